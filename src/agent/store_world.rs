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
/// worker). A world with a seed reads as the seed until its first write, which writes the
/// seed with the change.
#[derive(Debug)]
pub struct StoreWorldState {
    store: Arc<dyn KvStore>,
    key: String,
    runtime: Option<tokio::runtime::Handle>,
    seed: Option<Value>,
}

/// The name of the world a served home's agents share (`tavern serve --store`): the key
/// `tavern:world:home`.
pub const SERVED_WORLD: &str = "home";

impl StoreWorldState {
    /// The world named `name` in `store` (key `tavern:world:<name>`); `runtime` runs the
    /// store's I/O when the caller is on no runtime.
    pub fn new(
        store: Arc<dyn KvStore>,
        name: &str,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Arc<Self> {
        Self::seeded(store, name, None, runtime)
    }

    /// [`StoreWorldState::new`], reading as `seed` (a JSON object, such as the home's
    /// `world.json`) while the store holds no world of that name.
    pub fn seeded(
        store: Arc<dyn KvStore>,
        name: &str,
        seed: Option<Value>,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Arc<Self> {
        Arc::new(StoreWorldState {
            store,
            key: format!("tavern:world:{name}"),
            runtime,
            seed: seed.filter(Value::is_object),
        })
    }

    fn doc(&self) -> Result<Value, StateError> {
        let v = block_on(self.runtime.clone(), self.store.get(&self.key))
            .map_err(|e| StateError::Store(e.to_string()))?;
        Ok(v.filter(Value::is_object)
            .or_else(|| self.seed.clone())
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

    #[test]
    fn a_seeded_world_reads_as_its_seed_until_written() {
        let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let seed = json!({"weather": {"now": "rain"}, "hour": 21});
        let a = StoreWorldState::seeded(store.clone(), "w", Some(seed.clone()), None);
        assert_eq!(a.get("weather.now"), Some(json!("rain")));
        let b = StoreWorldState::seeded(store.clone(), "w", Some(json!({"other": 1})), None);
        b.set("weather.now", json!("sun")).unwrap();
        // The first write kept the writer's seed; every view now reads the stored world.
        assert_eq!(a.get("weather.now"), Some(json!("sun")));
        assert_eq!(a.get("hour"), None);
        assert_eq!(a.get("other"), Some(json!(1)));
        assert_eq!(
            StoreWorldState::new(store, "w", None).get("other"),
            Some(json!(1))
        );
    }
}
