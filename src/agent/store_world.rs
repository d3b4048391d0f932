//! Agents' world state in a [`KvStore`]: [`StoreWorldState`], so the agents of every replica
//! of a served home see one world.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::state::{get_path, set_path, StateError, WorldState};
use crate::store::{block_on, KvStore};

/// A [`WorldState`] kept as one JSON document under one key of a [`KvStore`].
///
/// Each `set` reads the document, changes the path and writes it back: two writers racing
/// on the same world can lose one write (the last one wins). Reads and writes block the
/// calling thread for one round trip to the store (through `block_in_place` on a runtime's
/// worker).
#[derive(Debug)]
pub struct StoreWorldState {
    store: Arc<dyn KvStore>,
    key: String,
    runtime: Option<tokio::runtime::Handle>,
}

impl StoreWorldState {
    /// The world named `name` in `store` (key `tavern:world:<name>`); `runtime` runs the
    /// store's I/O when the caller is on no runtime.
    pub fn new(
        store: Arc<dyn KvStore>,
        name: &str,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Arc<Self> {
        Arc::new(StoreWorldState {
            store,
            key: format!("tavern:world:{name}"),
            runtime,
        })
    }

    fn doc(&self) -> Result<Value, StateError> {
        let v = block_on(self.runtime.clone(), self.store.get(&self.key))
            .map_err(|e| StateError::Store(e.to_string()))?;
        Ok(v.filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Map::new())))
    }
}

impl WorldState for StoreWorldState {
    fn get(&self, path: &str) -> Option<Value> {
        let doc = self.doc().ok()?;
        get_path(&doc, path).cloned()
    }

    fn set(&self, path: &str, value: Value) -> Result<(), StateError> {
        let mut doc = self.doc()?;
        set_path(&mut doc, path, value)?;
        block_on(self.runtime.clone(), self.store.set(&self.key, doc, None))
            .map_err(|e| StateError::Store(e.to_string()))
    }

    fn snapshot(&self) -> Option<Value> {
        self.doc().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use serde_json::json;

    #[test]
    fn two_views_of_one_store_share_the_world() {
        let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let a = StoreWorldState::new(store.clone(), "w", None);
        let b = StoreWorldState::new(store, "w", None);
        a.set("weather.now", json!("rain")).unwrap();
        assert_eq!(b.get("weather.now"), Some(json!("rain")));
        assert_eq!(b.snapshot(), Some(json!({"weather": {"now": "rain"}})));
    }
}
