//! Shared key-value state: what scripts' `api.store` keeps, and the world state
//! ([`WorldState`], `world.rs`: in memory, or [`StoreWorldState`] in a store).
//!
//! [`KvStore`] is the seam: [`MemoryStore`] (the default, one process) lives here in the lean
//! library; the Redis one (`redis.rs`, the `store-redis` feature) shares the state between
//! the replicas of a served home. Nothing outside `redis.rs` imports the `redis` crate.
//!
//! Values are JSON. `incr` works on integer values (a missing key counts as 0). A time to
//! live is set when a key is written by `set`, and by `incr` only when the key had none
//! (so a counter's window starts with its first increment and is not pushed back by later
//! ones).

#[cfg(feature = "store-redis")]
pub mod redis;
mod world;

pub use world::{
    get_path, set_path, MemoryWorldState, StateError, StoreWorldState, WorldState, SERVED_WORLD,
};

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A future a [`KvStore`] answers with.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The shared store cannot be reached now (it reconnects by itself).
    #[error("the shared store is unavailable ({0}); it is retried on the next use")]
    Unavailable(String),
    /// `incr` on a value that is not an integer.
    #[error("'{key}' holds {found}, not an integer, so it cannot be incremented")]
    NotAnInteger {
        /// The key as the script named it.
        key: String,
        /// What it holds, as JSON.
        found: String,
    },
    /// A key or value the store refuses (too long, not JSON).
    #[error("{0}")]
    Invalid(String),
    /// What the store holds is not what tavern wrote there (a key of another type, a record
    /// that cannot be read); nothing was written. The message names the key.
    #[error("{0}")]
    Corrupt(String),
}

impl StoreError {
    /// The stable code clients and scripts see (`store_unavailable`, …).
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Unavailable(_) => "store_unavailable",
            StoreError::NotAnInteger { .. } => "not_an_integer",
            StoreError::Invalid(_) => "invalid_store_value",
            StoreError::Corrupt(_) => "store_corrupt",
        }
    }
}

/// A key-value store shared by everything one engine (or every replica of a served home)
/// runs. Keys are already namespaced by the caller.
pub trait KvStore: Send + Sync + std::fmt::Debug + 'static {
    /// The value at `key`, or `None`.
    fn get<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Value>>;
    /// Sets `key` to `value`, expiring after `ttl` (none: kept until deleted).
    fn set<'a>(&'a self, key: &'a str, value: Value, ttl: Option<Duration>) -> StoreFuture<'a, ()>;
    /// Adds `by` to the integer at `key` (missing: 0) and answers the new value; `ttl` is
    /// set when the key has no time to live yet.
    fn incr<'a>(&'a self, key: &'a str, by: i64, ttl: Option<Duration>) -> StoreFuture<'a, i64>;
    /// Removes `key`; answers whether it was there.
    fn delete<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool>;
    /// Where the state lives, for logs (`memory`, `redis://host:port/db`).
    fn describe(&self) -> String;
}

/// The in-process [`KvStore`]: a map with expiry times, swept as it is used.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

type Entry = (Value, Option<Instant>);

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, Entry>,
    ops: u64,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Entry>) -> T) -> T {
        // Every operation leaves the map whole: a poisoned lock still holds a valid map.
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.ops += 1;
        // Expired keys are dropped every 4096 operations (reads skip them meanwhile).
        if inner.ops % 4096 == 0 {
            let now = Instant::now();
            inner.map.retain(|_, (_, exp)| exp.is_none_or(|e| e > now));
        }
        f(&mut inner.map)
    }

    fn live(entry: Option<&Entry>) -> Option<&Entry> {
        entry.filter(|(_, e)| e.is_none_or(|e| e > Instant::now()))
    }
}

fn ready<'a, T: Send + 'a>(r: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(r))
}

impl KvStore for MemoryStore {
    fn get<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Value>> {
        ready(Ok(
            self.with(|m| Self::live(m.get(key)).map(|(v, _)| v.clone()))
        ))
    }

    fn set<'a>(&'a self, key: &'a str, value: Value, ttl: Option<Duration>) -> StoreFuture<'a, ()> {
        let exp = ttl.map(|t| Instant::now() + t);
        self.with(|m| m.insert(key.to_string(), (value, exp)));
        ready(Ok(()))
    }

    fn incr<'a>(&'a self, key: &'a str, by: i64, ttl: Option<Duration>) -> StoreFuture<'a, i64> {
        ready(self.with(|m| {
            let now = Instant::now();
            let (old, exp) = match Self::live(m.get(key)) {
                Some((v, e)) => (Some(v.clone()), *e),
                None => (None, None),
            };
            let n = match &old {
                None => 0,
                Some(v) => v.as_i64().ok_or_else(|| StoreError::NotAnInteger {
                    key: key.to_string(),
                    found: v.to_string(),
                })?,
            };
            let n = n.saturating_add(by);
            let exp = exp.or_else(|| ttl.map(|t| now + t));
            m.insert(key.to_string(), (Value::from(n), exp));
            Ok(n)
        }))
    }

    fn delete<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        ready(Ok(self.with(|m| {
            let was = Self::live(m.get(key)).is_some();
            m.remove(key);
            was
        })))
    }

    fn describe(&self) -> String {
        "memory".into()
    }
}

/// Runs a store future to its end from synchronous code: on a runtime's worker thread
/// through `block_in_place`, elsewhere (a script thread, no runtime) by parking the thread
/// between wake-ups inside `handle`'s context when one is given.
pub fn block_on<F: Future>(handle: Option<tokio::runtime::Handle>, fut: F) -> F::Output {
    let handle = handle.or_else(|| tokio::runtime::Handle::try_current().ok());
    let wait = || {
        let _entered = handle.as_ref().map(|h| h.enter());
        park_block_on(fut)
    };
    let on_worker = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if on_worker {
        tokio::task::block_in_place(wait)
    } else {
        wait()
    }
}

struct ThreadWaker(std::thread::Thread);

impl std::task::Wake for ThreadWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

fn park_block_on<F: Future>(fut: F) -> F::Output {
    let waker = std::task::Waker::from(std::sync::Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn memory_store_counts_expires_and_deletes() {
        let s = MemoryStore::new();
        assert_eq!(block_on(None, s.get("a")), Ok(None));
        block_on(None, s.set("a", json!({"x": 1}), None)).unwrap();
        assert_eq!(block_on(None, s.get("a")), Ok(Some(json!({"x": 1}))));
        assert_eq!(
            block_on(None, s.incr("a", 1, None)).unwrap_err().code(),
            "not_an_integer"
        );
        assert_eq!(block_on(None, s.incr("n", 2, None)), Ok(2));
        assert_eq!(block_on(None, s.incr("n", 3, None)), Ok(5));
        assert_eq!(block_on(None, s.delete("n")), Ok(true));
        assert_eq!(block_on(None, s.delete("n")), Ok(false));
        block_on(None, s.set("t", json!(1), Some(Duration::from_millis(1)))).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(block_on(None, s.get("t")), Ok(None));
        // A counter's window starts with its first increment.
        assert_eq!(
            block_on(None, s.incr("w", 1, Some(Duration::from_millis(1)))),
            Ok(1)
        );
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            block_on(None, s.incr("w", 1, Some(Duration::from_secs(60)))),
            Ok(1)
        );
    }
}
