//! The engine's live world: the [`WorldState`] its agents read, scripts change through
//! `api.world` and a host through `Engine::world_state`. [`LiveWorld`] wraps the world the
//! engine was given (or made from `world.json`) and announces every successful change on
//! [`resource_updates`] as [`WORLD_URI`], so an MCP server tells the sessions subscribed to
//! it. Without a server nobody listens and the announcement is dropped.

use std::sync::Arc;

use serde_json::Value;

use super::observe::resource_updates;
use crate::store::{StateError, WorldState};

/// The MCP resource that shows the live world.
pub const WORLD_URI: &str = "tavern://world";

/// The engine's world, announcing each successful `set` as [`WORLD_URI`].
pub struct LiveWorld {
    inner: Arc<dyn WorldState>,
}

impl LiveWorld {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn WorldState>) -> Arc<Self> {
        Arc::new(LiveWorld { inner })
    }

    /// The world behind the announcements (what a rebuilt engine keeps, see
    /// `EngineBuilder::keep_world_of`).
    pub fn inner(&self) -> &Arc<dyn WorldState> {
        &self.inner
    }
}

impl std::fmt::Debug for LiveWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveWorld")
    }
}

impl WorldState for LiveWorld {
    fn get(&self, path: &str) -> Option<Value> {
        self.inner.get(path)
    }

    fn set(&self, path: &str, value: Value) -> Result<(), StateError> {
        self.inner.set(path, value)?;
        // No receiver (no server running) is not an error.
        let _ = resource_updates().send(WORLD_URI.to_string());
        Ok(())
    }

    fn snapshot(&self) -> Option<Value> {
        self.inner.snapshot()
    }
}
