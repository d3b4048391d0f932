//! Lua values ↔ JSON with depth, size and cycle limits.
//!
//! Tables are read raw (no metamethods run), so converting a result never runs script code.
//! A table whose keys are exactly `1..n` becomes an array; an empty table becomes `{}`
//! unless it carries mlua's array metatable (which `from_json` sets on empty arrays). Any
//! other table becomes an object with its keys sorted (numbers first, in numeric order, then
//! strings in byte order): Lua keeps no insertion order, and its traversal order changes
//! from state to state, so sorting is what makes the same result read the same every run.

use std::collections::HashSet;
use std::ffi::c_void;

use mlua::{Lua, LuaSerdeExt, Table, Value as LuaValue};
use serde_json::{Map, Number, Value};

use crate::script::ScriptError;

/// Limits for one conversion.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConvertLimits {
    pub max_depth: usize,
    pub max_bytes: usize,
}

struct ToJson<'a> {
    limits: ConvertLimits,
    bytes: usize,
    path: Vec<String>,
    on_path: HashSet<*const c_void>,
    lua: &'a Lua,
}

fn path_text(path: &[String]) -> String {
    let mut s = String::from("$");
    for p in path {
        s.push_str(p);
    }
    s
}

impl ToJson<'_> {
    fn is_array_marked(&self, t: &Table) -> bool {
        match t.metatable() {
            Some(m) => self.lua.array_metatable().to_pointer() == m.to_pointer(),
            None => false,
        }
    }

    fn err(&self, message: impl Into<String>) -> ScriptError {
        ScriptError::Conversion {
            path: path_text(&self.path),
            message: message.into(),
        }
    }

    fn limit(&self, what: &str, message: String) -> ScriptError {
        ScriptError::ValueLimit {
            what: what.into(),
            message: format!("{message} at {}", path_text(&self.path)),
        }
    }

    fn add_bytes(&mut self, n: usize) -> Result<(), ScriptError> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.limits.max_bytes {
            return Err(self.limit(
                "value_bytes",
                format!("value larger than {} bytes", self.limits.max_bytes),
            ));
        }
        Ok(())
    }

    fn string(&mut self, s: &mlua::LuaString) -> Result<String, ScriptError> {
        let b = s.as_bytes();
        self.add_bytes(b.len())?;
        Ok(match std::str::from_utf8(&b) {
            Ok(s) => s.to_string(),
            // Non-UTF-8 bytes are replaced rather than refused: binary junk from a script
            // should still produce a readable result.
            Err(_) => String::from_utf8_lossy(&b).into_owned(),
        })
    }

    fn convert(&mut self, v: &LuaValue, depth: usize) -> Result<Value, ScriptError> {
        self.add_bytes(8)?;
        Ok(match v {
            LuaValue::Nil => Value::Null,
            LuaValue::Boolean(b) => Value::Bool(*b),
            LuaValue::LightUserData(p) if p.0.is_null() => Value::Null,
            LuaValue::Integer(i) => Value::Number((*i).into()),
            LuaValue::Number(f) => match Number::from_f64(*f) {
                Some(n) => Value::Number(n),
                None => return Err(self.err(format!("the number {f} has no JSON form"))),
            },
            LuaValue::String(s) => Value::String(self.string(s)?),
            LuaValue::Table(t) => self.table(t, depth)?,
            LuaValue::Error(e) => {
                Value::String(crate::script::error::bounded(&e.to_string(), 4096))
            }
            other => {
                return Err(self.err(format!(
                    "a {} cannot be converted to JSON",
                    other.type_name()
                )))
            }
        })
    }

    fn table(&mut self, t: &Table, depth: usize) -> Result<Value, ScriptError> {
        if depth >= self.limits.max_depth {
            return Err(self.limit(
                "value_depth",
                format!("value nested deeper than {} levels", self.limits.max_depth),
            ));
        }
        let ptr = t.to_pointer();
        if !self.on_path.insert(ptr) {
            return Err(ScriptError::ValueLimit {
                what: "cycle".into(),
                message: format!("the table at {} contains itself", path_text(&self.path)),
            });
        }
        let out = self.table_inner(t, depth);
        self.on_path.remove(&ptr);
        out
    }

    fn table_inner(&mut self, t: &Table, depth: usize) -> Result<Value, ScriptError> {
        let n = t.raw_len();
        // Count the pairs to tell an array (keys exactly 1..n) from a map.
        let mut count = 0usize;
        for pair in t.pairs::<LuaValue, LuaValue>() {
            pair.map_err(|e| self.err(e.to_string()))?;
            count += 1;
        }
        if count == 0 {
            let is_array = self.is_array_marked(t);
            return Ok(if is_array {
                Value::Array(Vec::new())
            } else {
                Value::Object(Map::new())
            });
        }
        if n > 0 && count == n {
            let mut out = Vec::with_capacity(n.min(4096));
            for i in 1..=n {
                let v: LuaValue = t.raw_get(i).map_err(|e| self.err(e.to_string()))?;
                self.path.push(format!("[{}]", i - 1));
                let c = self.convert(&v, depth + 1);
                self.path.pop();
                out.push(c?);
            }
            return Ok(Value::Array(out));
        }
        // Lua's traversal order follows its hash seed, which differs per state: the keys
        // are sorted so the same table always gives the same object.
        let mut entries = Vec::with_capacity(count.min(4096));
        for pair in t.pairs::<LuaValue, LuaValue>() {
            let (k, v) = pair.map_err(|e| self.err(e.to_string()))?;
            let key = match &k {
                LuaValue::String(s) => Key::Text(self.string(s)?),
                LuaValue::Integer(i) => Key::Number(*i as f64, i.to_string()),
                LuaValue::Number(f) if f.is_finite() => Key::Number(*f, f.to_string()),
                other => {
                    return Err(self.err(format!(
                        "a table key of type {} cannot be a JSON object key",
                        other.type_name()
                    )))
                }
            };
            entries.push((key, v));
        }
        entries.sort_by(|(a, _), (b, _)| a.cmp(b));
        let mut map = Map::with_capacity(entries.len());
        for (key, v) in entries {
            let key = key.into_text();
            self.path.push(format!(".{key}"));
            let c = self.convert(&v, depth + 1);
            self.path.pop();
            map.insert(key, c?);
        }
        Ok(Value::Object(map))
    }
}

/// A table key on its way to a JSON object key. Objects list numeric keys first, in
/// numeric order, then string keys in byte order (the order Rhai's maps have too).
enum Key {
    Number(f64, String),
    Text(String),
}

impl Key {
    fn into_text(self) -> String {
        match self {
            Key::Number(_, s) | Key::Text(s) => s,
        }
    }

    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self, other) {
            (Key::Number(a, _), Key::Number(b, _)) => a.total_cmp(b),
            (Key::Number(..), Key::Text(_)) => Ordering::Less,
            (Key::Text(_), Key::Number(..)) => Ordering::Greater,
            (Key::Text(a), Key::Text(b)) => a.cmp(b),
        }
    }
}

/// Converts a Lua value to JSON within `limits`.
pub(crate) fn to_json(
    lua: &Lua,
    v: &LuaValue,
    limits: ConvertLimits,
) -> Result<Value, ScriptError> {
    let mut c = ToJson {
        limits,
        bytes: 0,
        path: Vec::new(),
        on_path: HashSet::new(),
        lua,
    };
    c.convert(v, 0)
}

/// Nesting accepted from JSON (the host's own values; serde_json parses at most 128 levels).
const MAX_JSON_DEPTH: usize = 256;

/// Converts JSON to a Lua value (null → `api.json.null`, empty arrays keep their kind).
pub(crate) fn from_json(lua: &Lua, v: &Value) -> Result<LuaValue, ScriptError> {
    from_json_at(lua, v, 0).map_err(|e| match e {
        FromErr::Lua(e) => ScriptError::Internal(format!("building a Lua value: {e}")),
        FromErr::Depth => ScriptError::ValueLimit {
            what: "value_depth".into(),
            message: format!("JSON value nested deeper than {MAX_JSON_DEPTH} levels"),
        },
    })
}

enum FromErr {
    Lua(mlua::Error),
    Depth,
}

impl From<mlua::Error> for FromErr {
    fn from(e: mlua::Error) -> Self {
        FromErr::Lua(e)
    }
}

fn from_json_at(lua: &Lua, v: &Value, depth: usize) -> Result<LuaValue, FromErr> {
    if depth > MAX_JSON_DEPTH {
        return Err(FromErr::Depth);
    }
    Ok(match v {
        Value::Null => LuaValue::NULL,
        Value::Bool(b) => LuaValue::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => LuaValue::Integer(i),
            None => LuaValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => LuaValue::String(lua.create_string(s)?),
        Value::Array(a) => {
            let t = lua.create_table_with_capacity(a.len(), 0)?;
            for (i, x) in a.iter().enumerate() {
                t.raw_set(i + 1, from_json_at(lua, x, depth + 1)?)?;
            }
            if a.is_empty() {
                t.set_metatable(Some(lua.array_metatable()))?;
            }
            LuaValue::Table(t)
        }
        Value::Object(m) => {
            let t = lua.create_table_with_capacity(0, m.len())?;
            for (k, x) in m {
                t.raw_set(k.as_str(), from_json_at(lua, x, depth + 1)?)?;
            }
            LuaValue::Table(t)
        }
    })
}

/// Field names of hook events ([`crate::hooks::points`]); a Lua state keeps them interned in
/// a table, in this order, so an event's keys are pushed without hashing their bytes again.
pub(crate) const EVENT_KEYS: &[&str] = &[
    "tool",
    "args",
    "caller",
    "workflow",
    "node",
    "type",
    "inputs",
    "outputs",
    "result",
    "ok",
    "error",
    "elapsed_ms",
    "status",
];

/// The position of `k` in [`EVENT_KEYS`].
fn event_key(k: &str) -> Option<usize> {
    EVENT_KEYS.iter().position(|e| *e == k)
}

/// [`push_json`] for a hook event: the top-level keys that are [`EVENT_KEYS`] come from the
/// table at stack index `keys` (their strings interned once) instead of being hashed anew.
///
/// # Safety
/// As [`push_json`].
pub(crate) unsafe fn push_event(
    state: *mut mlua::ffi::lua_State,
    v: &Value,
    array_mt: std::ffi::c_int,
    keys: std::ffi::c_int,
) -> bool {
    use mlua::ffi;
    let Value::Object(m) = v else {
        return push_json(state, v, array_mt, 0);
    };
    if ffi::lua_checkstack(state, 3) == 0 {
        ffi::lua_pushnil(state);
        return false;
    }
    let n = std::ffi::c_int::try_from(m.len()).unwrap_or(std::ffi::c_int::MAX);
    ffi::lua_createtable(state, 0, n);
    for (k, x) in m {
        match event_key(k) {
            Some(i) => {
                ffi::lua_rawgeti(state, keys, i as ffi::lua_Integer + 1);
            }
            None => {
                ffi::lua_pushlstring(state, k.as_ptr().cast(), k.len());
            }
        }
        let ok = push_json(state, x, array_mt, 1);
        ffi::lua_rawset(state, -3);
        if !ok {
            return false;
        }
    }
    true
}

/// Pushes `v` onto the Lua stack with raw API calls, for use inside ONE protected call
/// (`Lua::exec_raw`): no protected call and no registry reference per value, which is what
/// makes a hook event cheap to build (see BENCHMARKS.md, hooks). Values map as in
/// [`from_json`]; `array_mt` is the stack index of mlua's array metatable, set on empty
/// arrays. Always pushes exactly one value; returns false when `v` nests deeper than
/// [`from_json`] accepts or the stack cannot grow (the value is then incomplete).
///
/// # Safety
/// `state` must be the state of a protected call (allocation failures raise Lua errors,
/// which unwind to it); nothing with a destructor may live in the calling Rust frames
/// between that call and this one.
pub(crate) unsafe fn push_json(
    state: *mut mlua::ffi::lua_State,
    v: &Value,
    array_mt: std::ffi::c_int,
    depth: usize,
) -> bool {
    use mlua::ffi;
    match v {
        Value::Null => ffi::lua_pushlightuserdata(state, std::ptr::null_mut()),
        Value::Bool(b) => ffi::lua_pushboolean(state, std::ffi::c_int::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => ffi::lua_pushinteger(state, i),
            None => ffi::lua_pushnumber(state, n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => {
            ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
        }
        Value::Array(a) => {
            if depth >= MAX_JSON_DEPTH || ffi::lua_checkstack(state, 3) == 0 {
                ffi::lua_pushnil(state);
                return false;
            }
            let n = std::ffi::c_int::try_from(a.len()).unwrap_or(std::ffi::c_int::MAX);
            ffi::lua_createtable(state, n, 0);
            for (i, x) in a.iter().enumerate() {
                let ok = push_json(state, x, array_mt, depth + 1);
                ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                if !ok {
                    return false;
                }
            }
            if a.is_empty() {
                ffi::lua_pushvalue(state, array_mt);
                ffi::lua_setmetatable(state, -2);
            }
        }
        Value::Object(m) => {
            if depth >= MAX_JSON_DEPTH || ffi::lua_checkstack(state, 3) == 0 {
                ffi::lua_pushnil(state);
                return false;
            }
            let n = std::ffi::c_int::try_from(m.len()).unwrap_or(std::ffi::c_int::MAX);
            ffi::lua_createtable(state, 0, n);
            for (k, x) in m {
                ffi::lua_pushlstring(state, k.as_ptr().cast(), k.len());
                let ok = push_json(state, x, array_mt, depth + 1);
                ffi::lua_rawset(state, -3);
                if !ok {
                    return false;
                }
            }
        }
    }
    true
}
