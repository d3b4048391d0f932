//! World state: a JSON document addressed by dotted paths
//! (`environment.weather.current_conditions`), behind the [`WorldState`] seam. The engine
//! keeps one live world (`Engine::world_state`): agents read it, scripts read and write it
//! through `api.world`, a host through the engine. [`MemoryWorldState`] keeps it in memory;
//! [`StoreWorldState`] as one document in a [`KvStore`], so every replica of a served home
//! sees one world.

use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use super::{block_on, KvStore};

/// Why a value could not be set in a world or private state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The path is empty.
    #[error("the path is empty; name a key such as `mood` or `quests.active`")]
    EmptyPath,
    /// A part between dots is empty (`a..b`).
    #[error("path '{path}' has an empty part")]
    EmptyPart {
        /// The path.
        path: String,
    },
    /// A part on the way addresses a list with something that is not an index in it.
    #[error("'{list}' is a list of {len} items; '{part}' is not an index in it")]
    NotAnIndex {
        /// The path of the list.
        list: String,
        /// Its length.
        len: usize,
        /// The part that is not an index.
        part: String,
    },
    /// A part on the way holds a value that is neither an object nor a list.
    #[error("'{at}' holds {value}, not an object, so '{part}' cannot be set in it")]
    NotAnObject {
        /// The path of that value.
        at: String,
        /// The value, as JSON.
        value: String,
        /// The part that cannot be set in it.
        part: String,
    },
    /// The host's store refused the write (a [`WorldState`] of the host's own).
    #[error("{0}")]
    Store(String),
}

/// A world-state store the host can supply (a game's ECS, a database …). Paths are dotted:
/// `environment.time.current_hour`. Implementations must be cheap to call from async code
/// (no blocking I/O on the caller's thread).
pub trait WorldState: Send + Sync + 'static {
    /// The value at `path`, or `None` when there is none.
    fn get(&self, path: &str) -> Option<Value>;
    /// Sets the value at `path`, creating objects on the way.
    fn set(&self, path: &str, value: Value) -> Result<(), StateError>;
    /// The whole state, for the deliberation context; `None` when the store is too large
    /// or not enumerable (the agent then reads it through `ReadWorldStateTool` only).
    fn snapshot(&self) -> Option<Value> {
        None
    }
}

/// The default [`WorldState`]: one JSON object in memory.
#[derive(Debug, Default)]
pub struct MemoryWorldState {
    root: RwLock<Value>,
}

impl MemoryWorldState {
    /// A store holding `initial` (an object; anything else starts empty).
    pub fn new(initial: Value) -> Arc<Self> {
        let root = if initial.is_object() {
            initial
        } else {
            Value::Object(Map::new())
        };
        Arc::new(MemoryWorldState {
            root: RwLock::new(root),
        })
    }
}

impl WorldState for MemoryWorldState {
    fn get(&self, path: &str) -> Option<Value> {
        // Writers only replace values in place, so a poisoned lock still holds a whole value.
        let root = self.root.read().unwrap_or_else(|p| p.into_inner());
        get_path(&root, path).cloned()
    }

    fn set(&self, path: &str, value: Value) -> Result<(), StateError> {
        let mut root = self.root.write().unwrap_or_else(|p| p.into_inner());
        set_path(&mut root, path, value)
    }

    fn snapshot(&self) -> Option<Value> {
        Some(self.root.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

/// The value at a dotted `path` in `root` (an empty path is the root). Array elements are
/// addressed by index (`party.0.name`).
pub fn get_path<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim();
    if path.is_empty() {
        return Some(root);
    }
    let mut cur = root;
    for part in path.split('.') {
        cur = match cur {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Sets the value at a dotted `path`, creating objects where parts are missing. Fails when
/// a part on the way is a value that is not an object (or an array with that index).
pub fn set_path(root: &mut Value, path: &str, value: Value) -> Result<(), StateError> {
    let path = path.trim();
    if path.is_empty() {
        return Err(StateError::EmptyPath);
    }
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(StateError::EmptyPart {
            path: path.to_string(),
        });
    }
    let mut cur = root;
    let mut walked = String::new();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        cur = match cur {
            Value::Object(m) => {
                if last {
                    m.insert((*part).to_string(), value);
                    return Ok(());
                }
                m.entry((*part).to_string())
                    .or_insert_with(|| Value::Object(Map::new()))
            }
            Value::Array(a) => {
                let idx = part.parse::<usize>().ok().filter(|i| *i < a.len());
                let Some(idx) = idx else {
                    return Err(StateError::NotAnIndex {
                        list: walked,
                        len: a.len(),
                        part: (*part).to_string(),
                    });
                };
                if last {
                    a[idx] = value;
                    return Ok(());
                }
                &mut a[idx]
            }
            other => {
                return Err(StateError::NotAnObject {
                    at: walked,
                    value: other.to_string(),
                    part: (*part).to_string(),
                })
            }
        };
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(part);
    }
    Ok(())
}

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
