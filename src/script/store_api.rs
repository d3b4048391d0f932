//! `api.store` for scripts: `get`, `set` (with a time to live), `incr` (with a time to
//! live) and `delete` on the engine's [`crate::store::KvStore`] — in memory, or in the
//! Redis store a served home shares between replicas.
//!
//! Keys are namespaced by the script's owner (`plugin:<name>` or `script:<name>`), so no
//! plugin reads or changes another's keys. A store that cannot be reached fails the script
//! call with a `store_unavailable: …` error the script may catch with `pcall`.

use std::time::Duration;

use serde_json::Value;

use super::api::ApiOp;
use super::host::HostCore;
use super::ScriptError;
use crate::store::{block_on, StoreError};

/// Longest key a script may use, in bytes.
pub const MAX_KEY_BYTES: usize = 512;

fn key(core: &HostCore, fname: &str, v: &Value) -> Result<String, ScriptError> {
    let k = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(ScriptError::runtime(format!(
                "{fname}: parameter 1 ('key') must be a string, got {other}"
            )))
        }
    };
    if k.is_empty() || k.len() > MAX_KEY_BYTES {
        return Err(ScriptError::runtime(format!(
            "{fname}: the key must be 1 to {MAX_KEY_BYTES} bytes long, got {}",
            k.len()
        )));
    }
    Ok(format!("tavern:kv:{}:{k}", core.env.owner))
}

fn ttl(fname: &str, i: usize, v: Option<&Value>) -> Result<Option<Duration>, ScriptError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
            _ => Err(ScriptError::runtime(format!(
                "{fname}: parameter {i} ('ttl_s') must be a number of seconds above 0, got {v}"
            ))),
        },
    }
}

fn failed(fname: &str, e: StoreError) -> ScriptError {
    ScriptError::runtime(format!("{fname}: {}: {e}", e.code()))
}

/// Runs one `api.store` function.
pub(crate) fn invoke(core: &HostCore, op: ApiOp, args: &[Value]) -> Result<Value, ScriptError> {
    let manager = core
        .env
        .tools
        .as_ref()
        .and_then(std::sync::Weak::upgrade)
        .ok_or_else(|| ScriptError::runtime("api.store: no engine is attached to this script"))?;
    let store = manager.kv_store().clone();
    let handle = super::host::thread_handle().or_else(|| manager.runtime_handle().ok());
    let arg = |i: usize| args.get(i).unwrap_or(&Value::Null);
    match op {
        ApiOp::StoreGet => {
            let f = "api.store.get";
            let k = key(core, f, arg(0))?;
            let v = block_on(handle, store.get(&k)).map_err(|e| failed(f, e))?;
            Ok(v.unwrap_or(Value::Null))
        }
        ApiOp::StoreSet => {
            let f = "api.store.set";
            let k = key(core, f, arg(0))?;
            let t = ttl(f, 3, args.get(2))?;
            block_on(handle, store.set(&k, arg(1).clone(), t)).map_err(|e| failed(f, e))?;
            Ok(Value::Null)
        }
        ApiOp::StoreIncr => {
            let f = "api.store.incr";
            let k = key(core, f, arg(0))?;
            let by = match arg(1) {
                Value::Null => 1,
                v => v.as_i64().ok_or_else(|| {
                    ScriptError::runtime(format!(
                        "{f}: parameter 2 ('by') must be an integer, got {v}"
                    ))
                })?,
            };
            let t = ttl(f, 3, args.get(2))?;
            let n = block_on(handle, store.incr(&k, by, t)).map_err(|e| failed(f, e))?;
            Ok(Value::from(n))
        }
        ApiOp::StoreDelete => {
            let f = "api.store.delete";
            let k = key(core, f, arg(0))?;
            let was = block_on(handle, store.delete(&k)).map_err(|e| failed(f, e))?;
            Ok(Value::Bool(was))
        }
        _ => Err(ScriptError::Internal(format!(
            "{op:?} is not an api.store function"
        ))),
    }
}
