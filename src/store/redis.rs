//! The Redis [`KvStore`] (the `store-redis` feature): `--store redis://HOST:PORT[/DB]`.
//!
//! One [`redis::aio::ConnectionManager`] (a multiplexed connection that reconnects by
//! itself) serves every caller. Operations time out quickly and fail with
//! [`StoreError::Unavailable`] while Redis is away, so only what needs the store fails;
//! the next operation after Redis is back goes through. Values are stored as JSON text.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::AsyncCommands;
use serde_json::Value;

use super::{KvStore, StoreError, StoreFuture};

/// How long one command may take before it counts as "unavailable".
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A Redis server shared by the replicas of a served home.
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    conn: ConnectionManager,
    url: String,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .finish()
    }
}

/// Answers of a Redis that is there but cannot serve now, and will again by itself: it is
/// loading its data after a restart (`LOADING`), running a long script (`BUSY`), moving
/// keys (`TRYAGAIN`), or a replica whose primary is away (`MASTERDOWN`).
const TRANSIENT: [&str; 4] = ["LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN"];

/// A Redis error as a [`StoreError`]: anything about reaching the server, and the answers
/// of a server that cannot serve for a while (`LOADING`, `BUSY`, `TRYAGAIN`, `MASTERDOWN`), is `Unavailable` (retried by
/// the client); what the server refused is `Invalid`.
pub fn store_error(e: &redis::RedisError) -> StoreError {
    if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || e.code().is_some_and(|c| TRANSIENT.contains(&c))
    {
        StoreError::Unavailable(e.to_string())
    } else if e.code() == Some("TAVERNCORRUPT") {
        // A jobs script that checked the keys it writes before writing any (`jobs::redis`).
        let what = e
            .detail()
            .unwrap_or("a store key holds another type than tavern wrote");
        StoreError::Corrupt(format!(
            "{what}; nothing was written. Delete that key (or give tavern its own Redis DB) and try again"
        ))
    } else {
        StoreError::Invalid(format!("the store refused the operation: {e}"))
    }
}

/// `url` without a password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`) and checks the server answers; a bad
    /// URL or a server that cannot be reached is an error that says which.
    pub async fn connect(url: &str) -> Result<RedisStore, StoreError> {
        let shown = redact(url);
        if !url.starts_with("redis://") && !url.starts_with("redis+unix://") {
            return Err(StoreError::Invalid(format!(
                "store URL '{shown}' is not a Redis URL; write redis://HOST:PORT[/DB]"
            )));
        }
        let client = redis::Client::open(url).map_err(|e| {
            StoreError::Invalid(format!(
                "store URL '{shown}' cannot be read ({e}); write redis://HOST:PORT[/DB]"
            ))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|e| {
                StoreError::Unavailable(format!("cannot reach the store at {shown}: {e}"))
            })?;
        let store = RedisStore {
            client,
            conn,
            url: shown,
        };
        let mut c = store.conn();
        let _: String = redis::cmd("PING").query_async(&mut c).await.map_err(|e| {
            StoreError::Unavailable(format!(
                "the store at {} did not answer PING: {e}",
                store.url
            ))
        })?;
        Ok(store)
    }

    /// A handle on the shared connection (cheap to clone).
    pub fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// The client, for connections of their own (pub/sub).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// The URL without its password.
    pub fn url(&self) -> &str {
        &self.url
    }
}

fn ttl_ms(ttl: Option<Duration>) -> Option<u64> {
    ttl.map(|t| (t.as_millis() as u64).max(1))
}

impl KvStore for RedisStore {
    fn get<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Value>> {
        Box::pin(async move {
            let mut c = self.conn();
            let raw: Option<String> = c.get(key).await.map_err(|e| store_error(&e))?;
            Ok(raw.map(|s| serde_json::from_str(&s).unwrap_or(Value::String(s))))
        })
    }

    fn set<'a>(&'a self, key: &'a str, value: Value, ttl: Option<Duration>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut c = self.conn();
            let mut cmd = redis::cmd("SET");
            cmd.arg(key).arg(value.to_string());
            if let Some(ms) = ttl_ms(ttl) {
                cmd.arg("PX").arg(ms);
            }
            let _: () = cmd.query_async(&mut c).await.map_err(|e| store_error(&e))?;
            Ok(())
        })
    }

    fn incr<'a>(&'a self, key: &'a str, by: i64, ttl: Option<Duration>) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let mut c = self.conn();
            let mut p = redis::pipe();
            p.atomic().cmd("INCRBY").arg(key).arg(by);
            if let Some(ms) = ttl_ms(ttl) {
                // NX: only a key with no time to live yet gets one (Redis 7).
                p.cmd("PEXPIRE").arg(key).arg(ms).arg("NX").ignore();
            }
            let r: redis::RedisResult<(i64,)> = p.query_async(&mut c).await;
            match r {
                Ok((n,)) => Ok(n),
                Err(e) if e.to_string().contains("not an integer") => {
                    let found = self.get(key).await?.unwrap_or(Value::Null);
                    Err(StoreError::NotAnInteger {
                        key: key.to_string(),
                        found: found.to_string(),
                    })
                }
                Err(e) => Err(store_error(&e)),
            }
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut c = self.conn();
            let n: i64 = c.del(key).await.map_err(|e| store_error(&e))?;
            Ok(n > 0)
        })
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}
