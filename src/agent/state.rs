//! The agent's private state, addressed by dotted paths like the world state
//! (`crate::store::world`, where the [`WorldState`](crate::store::WorldState) seam lives).

use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use crate::store::{get_path, set_path, StateError};

/// The agent's private state: a JSON object only its own tools read and write.
#[derive(Debug, Default)]
pub struct PrivateState {
    root: RwLock<Value>,
}

impl PrivateState {
    /// A state starting from `initial` (the profile's `initial_private_state_values`).
    pub fn new(initial: Map<String, Value>) -> Arc<Self> {
        Arc::new(PrivateState {
            root: RwLock::new(Value::Object(initial)),
        })
    }

    /// The value at a dotted path (empty: the whole state).
    pub fn get(&self, path: &str) -> Option<Value> {
        let root = self.root.read().unwrap_or_else(|p| p.into_inner());
        get_path(&root, path).cloned()
    }

    /// Sets the value at a dotted path.
    pub fn set(&self, path: &str, value: Value) -> Result<(), StateError> {
        let mut root = self.root.write().unwrap_or_else(|p| p.into_inner());
        set_path(&mut root, path, value)
    }

    /// The whole state.
    pub fn snapshot(&self) -> Value {
        self.root.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
