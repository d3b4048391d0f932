//! The event bus: `agent:*` events of the runtime and whatever `PublishEventTool` publishes.
//!
//! Hosts subscribe with [`EventBus::subscribe`] (a name, a `prefix:*` pattern or `*`). Script
//! subscribers arrive with the hooks engine (issue 8); see
//! [`hook_seam`](super::runtime::hook_seam) for the two points it will fire.

use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde_json::Value;

/// `agent:response`: the prose of a turn's output (outside any call block).
pub const RESPONSE: &str = "agent:response";
/// `agent:tool-started`: a call is about to run.
pub const TOOL_STARTED: &str = "agent:tool-started";
/// `agent:tool-finished`: a call ended (value or error, with its Observation).
pub const TOOL_FINISHED: &str = "agent:tool-finished";
/// `agent:turn-finished`: a turn ended (its output, calls and results are known).
pub const TURN_FINISHED: &str = "agent:turn-finished";

/// One event on the bus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// `agent:response`, `agent:tool-started` … or a name chosen by `PublishEventTool`.
    pub name: String,
    /// The agent that caused it.
    pub agent: String,
    /// What happened (see each `agent:*` constant for its fields).
    pub payload: Value,
}

type Handler = Arc<dyn Fn(&Event) + Send + Sync>;

/// A handle that removes its subscription when passed to [`EventBus::unsubscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription(u64);

#[derive(Default)]
struct Inner {
    next: u64,
    subs: Vec<(u64, String, Handler)>,
}

/// Publish/subscribe for agent events. Cheap to clone (shared); handlers run synchronously
/// on the publishing task, so they should be quick (send to a channel for slow work).
#[derive(Clone, Default)]
pub struct EventBus {
    inner: Arc<RwLock<Inner>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("subscribers", &self.read().subs.len())
            .finish()
    }
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

impl EventBus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // Writes are single pushes/removals: a poisoned list is still consistent.
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `handler` for every event whose name matches `pattern`: an exact name
    /// (`agent:tool-finished`), a prefix ending in `*` (`agent:*`), or `*` for all.
    pub fn subscribe(
        &self,
        pattern: impl Into<String>,
        handler: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Subscription {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        inner.next += 1;
        let id = inner.next;
        inner.subs.push((id, pattern.into(), Arc::new(handler)));
        Subscription(id)
    }

    /// Removes a subscription; returns whether it existed.
    pub fn unsubscribe(&self, sub: Subscription) -> bool {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let before = inner.subs.len();
        inner.subs.retain(|(id, _, _)| *id != sub.0);
        before != inner.subs.len()
    }

    /// True when someone listens for `name` (lets publishers skip building payloads).
    pub fn wants(&self, name: &str) -> bool {
        self.read().subs.iter().any(|(_, p, _)| matches(p, name))
    }

    /// Delivers `event` to every matching subscriber, in subscription order. A panicking
    /// handler is caught and logged; the others still run.
    pub fn publish(&self, event: &Event) {
        let handlers: Vec<Handler> = self
            .read()
            .subs
            .iter()
            .filter(|(_, p, _)| matches(p, &event.name))
            .map(|(_, _, h)| h.clone())
            .collect();
        for h in handlers {
            let r = crate::tools::contain(|| h(event));
            if r.is_err() {
                tracing::error!(event = %event.name, "an event subscriber panicked");
            }
        }
    }

    /// Builds and publishes an event only when someone listens for `name`.
    pub fn emit(&self, name: &str, agent: &str, payload: impl FnOnce() -> Value) {
        if self.wants(name) {
            self.publish(&Event {
                name: name.to_string(),
                agent: agent.to_string(),
                payload: payload(),
            });
        }
    }
}
