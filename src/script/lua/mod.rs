//! The Lua host: one sandboxed Lua 5.4 state per plugin (or per snippet run).
//!
//! What holds the sandbox (see `sandbox-threats.md`):
//! - only the `table`, `string`, `math`, `utf8` and `coroutine` libraries; `load`,
//!   `loadfile`, `dofile`, `require`, `collectgarbage` and `string.dump` removed; text chunks
//!   only;
//! - one state per plugin, and the string metatable hidden behind `__metatable`;
//! - a memory limit on the state (a failed allocation is a catchable error, and the state is
//!   collected after the call);
//! - a global instruction hook (reaches coroutines) that charges the [`Budget`] and checks the
//!   wall-clock deadline; once the budget is gone, `pcall`, `xpcall`, `coroutine.resume` and
//!   `coroutine.close` re-raise instead of catching, and the call's result is the budget error
//!   whatever the script did;
//! - `string.find/match/gmatch/gsub` replaced by a Rust matcher that charges its steps;
//!   `string.rep` checks the result size before allocating;
//! - `setmetatable` refuses `__gc` (finalizers run with hooks off) and `__close`;
//! - Rust callbacks catch panics, log them and raise a plain error.
//!
//! A tool call from the host (not a hook handler) runs as a coroutine of the host's (the instruction hook reaches
//! it as any other). When its script calls a sync host tool (`api.tools.call`) right from
//! that coroutine, it yields to the host, which lets the state go while the tool runs (other
//! calls to the plugin use it meanwhile), takes it back and resumes the call with its own
//! budget. The script sees none of this: `coroutine.yield` and `coroutine.isyieldable` at a
//! handler's top level behave as outside any coroutine, and inside the script's own
//! coroutines (or below a Rust function) the tool runs in place, holding the state.

mod convert;
pub(crate) mod patterns;
mod stdlib;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mlua::chunk::ChunkMode;
use mlua::{
    Function, HookTriggers, IntoLuaMulti, Lua, LuaOptions, StdLib, Table, Value as LuaValue,
};
use serde_json::Value;

use super::api::{ApiOp, API};
use super::budget::{Abort, Budget};
use super::error::bounded;
use super::host::{current_tool_id, HostCore};
use super::{Limits, ScriptError};
use crate::hooks::HookReturn;
pub(crate) use convert::{from_json, to_json, ConvertLimits};

thread_local! {
    /// Where the instruction hook stopped the script running on this thread (`main.lua:6`).
    static STOPPED_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The place the instruction hook stopped the script at, taken once.
fn stopped_at() -> Option<String> {
    STOPPED_AT.with(|s| s.borrow_mut().take())
}

/// Instructions between two hook calls. Any count hook costs about the same (notes), so this
/// only sets how fast an exhausted budget is noticed.
const HOOK_EVERY: u32 = 1000;
/// Longest error message kept from a script.
const MAX_ERROR_TEXT: usize = 4096;
const HANDLERS_KEY: &str = "tavern.handlers";
/// Registry key of the metatable of `{code, message}` error tables (made by the prelude).
pub(crate) const ERROR_MT_KEY: &str = "tavern.errormt";

/// A tool registered by a script at load time.
#[derive(Debug, Clone)]
pub(crate) struct RegisteredSpec {
    pub id: String,
    pub display_name: Option<String>,
    pub description: String,
    pub parameters: Option<Value>,
}

/// State shared by the Lua state's Rust callbacks (never holds Lua handles, so the state can
/// be dropped).
pub(crate) struct Shared {
    pub core: Arc<HostCore>,
    pub budget: Budget,
    pub loading: AtomicBool,
    pub registered: Mutex<Vec<RegisteredSpec>>,
    pub limits: Limits,
    /// Rust callbacks currently on the stack (gsub → Lua → gsub … recursion).
    pub rust_depth: AtomicU64,
    /// The coroutine (its address) the host resumed for the outermost call running on the
    /// state, 0 when none: `api.tools.call` hands a sync host tool over only from it.
    pub engine_co: AtomicUsize,
    /// The tool call `api.tools.call` handed over (id, arguments), for the host to run.
    pub pending: Mutex<Option<(String, Value)>>,
    /// Its error, for the script to raise once it goes on.
    pub handed_back: Mutex<Option<ScriptError>>,
}

/// What the `api.tools.call` wrapper yields to the host when it hands a call over (the
/// address of a static: a script can neither make nor see it).
static HAND_OVER: u8 = 0;

fn hand_over_mark() -> mlua::LightUserData {
    mlua::LightUserData(std::ptr::addr_of!(HAND_OVER) as *mut std::ffi::c_void)
}

/// Rust callbacks that may be nested inside each other (through Lua functions they call).
/// Each level costs Rust stack that Lua's own C-stack limit does not see; 2 MB thread stacks
/// must hold them all.
const MAX_RUST_NESTING: u64 = 24;

struct DepthGuard<'a>(&'a AtomicU64);

impl Drop for DepthGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One plugin's (or snippet's) Lua state.
pub(crate) struct LuaHost {
    pub lua: Lua,
    pub shared: Arc<Shared>,
    /// Nesting of calls currently inside this state (re-entrant calls share the budget).
    /// Only the thread holding the plugin's lock runs the state (every call takes it
    /// first, as it must: two calls at once would reset each other's budget), and the lock
    /// orders one holder's writes before the next's, so it is read and written plainly.
    depth: AtomicU64,
    handles: Handles,
    /// Coroutines of calls that could not take the state back after handing a tool over
    /// (their deadline passed meanwhile): dropped by the next call, which holds the state.
    orphans: Mutex<Vec<mlua::Thread>>,
    /// The coroutine of the last call that ended, reused by the next one (a reset is
    /// cheaper than a new Lua thread).
    spare: Mutex<Option<mlua::Thread>>,
}

pub(crate) fn abort_error(a: Abort) -> mlua::Error {
    mlua::Error::external(a)
}

pub(crate) fn script_error(e: ScriptError) -> mlua::Error {
    mlua::Error::external(e)
}

/// Wraps a Rust callback: panics are caught, logged and counted, and become a Lua error.
pub(crate) fn guarded<A, R, F>(
    lua: &Lua,
    shared: &Arc<Shared>,
    name: &'static str,
    f: F,
) -> mlua::Result<Function>
where
    A: mlua::FromLuaMulti,
    R: mlua::IntoLuaMulti,
    F: Fn(&Lua, &Arc<Shared>, A) -> mlua::Result<R> + Send + 'static,
{
    let sh = shared.clone();
    lua.create_function(move |lua, args: A| {
        let depth = sh.rust_depth.fetch_add(1, Ordering::Relaxed);
        let _depth = DepthGuard(&sh.rust_depth);
        if depth >= MAX_RUST_NESTING {
            return Err(script_error(ScriptError::ValueLimit {
                what: "call_depth".into(),
                message: format!("{name} nested more than {MAX_RUST_NESTING} levels deep"),
            }));
        }
        match crate::tools::quiet(|| {
            std::panic::catch_unwind(AssertUnwindSafe(|| f(lua, &sh, args)))
        }) {
            Ok(r) => r,
            Err(p) => {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                sh.core.panics.fetch_add(1, Ordering::Relaxed);
                sh.core.emit(
                    crate::tools::LogLevel::Error,
                    &format!("panic in the Rust function behind {name}: {what}"),
                );
                Err(mlua::Error::runtime(format!(
                    "internal error in {name} (logged by the host)"
                )))
            }
        }
    })
}

impl LuaHost {
    /// Builds a sandboxed state with the `api` table.
    pub fn new(core: Arc<HostCore>, limits: Limits) -> Result<Self, ScriptError> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE;
        let lua = Lua::new_with(libs, LuaOptions::new())
            .map_err(|e| ScriptError::Internal(format!("creating a Lua state: {e}")))?;
        let shared = Arc::new(Shared {
            core,
            budget: Budget::new(),
            loading: AtomicBool::new(false),
            registered: Mutex::new(Vec::new()),
            limits,
            rust_depth: AtomicU64::new(0),
            engine_co: AtomicUsize::new(0),
            pending: Mutex::new(None),
            handed_back: Mutex::new(None),
        });
        let handles = setup(&lua, &shared)
            .map_err(|e| ScriptError::Internal(format!("setting up the Lua sandbox: {e}")))?;
        let host = LuaHost {
            lua,
            shared,
            depth: AtomicU64::new(0),
            handles,
            orphans: Mutex::new(Vec::new()),
            spare: Mutex::new(None),
        };
        host.lua
            .set_memory_limit(limits.memory_bytes)
            .map_err(|e| ScriptError::Internal(format!("setting the memory limit: {e}")))?;
        Ok(host)
    }
}

/// How a call that hands a sync host tool over gives its state up and takes it back:
/// `gate(run)` lets the state go, calls `run` (which runs the tool) and takes the state back;
/// an error (the deadline passed, a cycle of waits) ends the call, and the state is not
/// touched again by it.
pub(crate) type Gate<'a> = &'a dyn Fn(&mut dyn FnMut()) -> Result<(), ScriptError>;

/// One leg of a call run as a coroutine.
enum Step {
    /// It returned (the result, converted).
    Done(Value),
    /// It handed `api.tools.call(id, args)` over.
    HandOver(String, Value),
}

/// Lua values the host uses on every call, kept as handles (no lookups by name).
pub(crate) struct Handles {
    handlers: Table,
    globals: Table,
    /// `function(f, args, tool_id, caller)`: builds `ctx` in Lua and calls `f(args, ctx)`.
    trampoline: Function,
    /// `function(f, ev, tool_id, caller)`: the same for a hook handler, returning its first
    /// two values (`false, "why"` is a veto with a reason); `f(ev)` alone when `tool_id` is
    /// nil (a handler that takes no `ctx` gets none built).
    hook_runner: Function,
    /// `fail(e)`: raises a handler's error the way the runners do (a plain table goes to
    /// `raise`), for handlers called straight from Rust.
    hook_fail: Function,
    /// [`convert::EVENT_KEYS`] as Lua strings, in order (kept interned).
    event_keys: Table,
    /// mlua's array metatable (marks empty arrays), for events built with raw calls.
    array_mt: Table,
}

// A table raised by the handler (not one with its own `__tostring`) goes to `raise`, which
// keeps its content (see `nested_error.rs`); every other error value passes through as is.
const TRAMPOLINE: &str = r#"
local config, log, raise = ...
local pcall, type, getmetatable, error = pcall, type, getmetatable, error
local function fail(e)
  if type(e) == "table" then
    local mt = getmetatable(e)
    if not (type(mt) == "table" and mt.__tostring) then return raise(e) end
  end
  error(e, 0)
end
local function finish(ok, ...)
  if ok then return ... end
  return fail((...))
end
local function call(f, args, tool_id, caller)
  return finish(pcall(f, args, {tool_id = tool_id, caller = caller, config = config, log = log}))
end
local function hook(f, ev, tool_id, caller)
  local ok, r, why
  if tool_id == nil then
    ok, r, why = pcall(f, ev)
  else
    ok, r, why = pcall(f, ev, {tool_id = tool_id, caller = caller, config = config, log = log})
  end
  if not ok then return fail(r) end
  return r, why
end
return call, hook, fail
"#;

const OVERRIDE_WRAP_KEY: &str = "tavern.overridewrap";

/// An override is called with `{args, token}`; its `next` reaches the continuation by token.
const OVERRIDE_WRAP: &str = r#"
local nxt = ...
return function(f)
  return function(p, ctx)
    local token, args = p.token, p.args
    return f(args, ctx, function(a)
      if a == nil then a = args end
      return nxt(token, a)
    end)
  end
end
"#;

fn setup(lua: &Lua, shared: &Arc<Shared>) -> mlua::Result<Handles> {
    {
        let sh = shared.clone();
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_lua, debug| {
                sh.budget.charge(u64::from(HOOK_EVERY)).map_err(|a| {
                    if matches!(a, Abort::Instructions | Abort::Timeout) {
                        // Where the loop was when the budget ran out, for the message.
                        let src = debug.source();
                        let at = src
                            .short_src
                            .as_deref()
                            .map(|f| match debug.current_line() {
                                Some(l) => format!("{f}:{l}"),
                                None => f.to_string(),
                            });
                        STOPPED_AT.with(|s| *s.borrow_mut() = at);
                    }
                    abort_error(a)
                })?;
                Ok(mlua::VmState::Continue)
            },
        )?;
        let log = stdlib::install(lua, shared)?;
        install_api(lua, shared)?;
        let handlers = lua.create_table()?;
        lua.set_named_registry_value(HANDLERS_KEY, &handlers)?;
        let next = guarded(lua, shared, "next", call_next)?;
        let wrap: Function = lua
            .load(OVERRIDE_WRAP)
            .set_name("=tavern-override")
            .call(next)?;
        lua.set_named_registry_value(OVERRIDE_WRAP_KEY, wrap)?;
        let config = from_json(lua, &Value::Object(shared.core.env.config.clone()))
            .map_err(|e| mlua::Error::runtime(e.to_string()))?;
        let (trampoline, hook_runner, hook_fail): (Function, Function, Function) = lua
            .load(TRAMPOLINE)
            .set_name("=tavern-call")
            .call((config, log, raise_fn(lua, shared)?))?;
        Ok(Handles {
            handlers,
            globals: lua.globals(),
            trampoline,
            hook_runner,
            hook_fail,
            event_keys: lua.create_sequence_from(convert::EVENT_KEYS.iter().copied())?,
            array_mt: mlua::LuaSerdeExt::array_metatable(lua),
        })
    }
}

/// `api.<namespace>.<name>` of entry `i` of [`API`], built once per process (not leaked
/// per Lua state: every plugin load used to leak these strings).
fn api_name(i: usize) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        API.iter()
            .map(|f| format!("api.{}.{}", f.namespace, f.name))
            .collect()
    })[i]
        .as_str()
}

/// `api.tools.call`, in Lua over the Rust functions: a sync host tool called from the
/// coroutine the host runs a call in is handed over (the script yields `mark`; the host
/// lets the state go, runs the tool, takes the state back and resumes it with `true` and the
/// result, or `false` when the call failed: `finish` then raises the error as `raw` would
/// have); every other call runs in place. `coroutine.yield` and
/// `coroutine.isyieldable` keep what they did before calls ran as coroutines: the host's
/// coroutine is not the script's to yield from.
const TOOLS_CALL: &str = r#"
local raw, finish, host_co, mark = ...
local co = coroutine
local isyieldable, yield, error = co.isyieldable, co.yield, error
co.yield = function(...)
  if host_co() then error("attempt to yield from outside a coroutine", 0) end
  return yield(...)
end
co.isyieldable = function()
  return isyieldable() and not host_co()
end
return function(...)
  local handed, v = raw(isyieldable(), ...)
  if not handed then return v end
  local ok, r = yield(mark)
  if ok then return r end
  return finish()
end
"#;

/// Whether the running Lua thread is the coroutine the host resumed for the outermost call.
fn on_host_co(lua: &Lua, sh: &Shared) -> bool {
    let co = sh.engine_co.load(Ordering::Relaxed);
    co != 0 && lua.current_thread().to_pointer() as usize == co
}

fn tools_call_fn(lua: &Lua, shared: &Arc<Shared>) -> mlua::Result<Function> {
    let raw = guarded(
        lua,
        shared,
        "api.tools.call",
        |lua, sh, (yieldable, args): (bool, mlua::Variadic<LuaValue>)| {
            let mut json = Vec::with_capacity(args.len());
            for a in args.iter() {
                json.push(to_json(lua, a, convert_limits(sh)).map_err(script_error)?);
            }
            let (id, a) = super::host::tools_call_args(&json).map_err(script_error)?;
            // Handed over only when the yield reaches the host: from its own coroutine, with
            // no C call (a Rust function, a metamethod run from C) in between, and no other
            // Rust function of this state on the stack.
            if yieldable
                && sh.rust_depth.load(Ordering::Relaxed) == 1
                && sh.budget.aborted().is_none()
                && on_host_co(lua, sh)
                && sh.core.hands_over(&id)
            {
                *sh.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some((id, a));
                return Ok((true, LuaValue::Nil));
            }
            let out = sh.core.call_tool(&id, a).map_err(script_error)?;
            Ok((false, from_json(lua, &out).map_err(script_error)?))
        },
    )?;
    let finish = guarded(
        lua,
        shared,
        "api.tools.call",
        |_lua, sh, ()| -> mlua::Result<()> {
            let e = sh
                .handed_back
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or_else(|| {
                    ScriptError::Internal("api.tools.call: the host handed no result back".into())
                });
            Err(script_error(e))
        },
    )?;
    let host_co = guarded(lua, shared, "coroutine.yield", |lua, sh, ()| {
        Ok(on_host_co(lua, sh))
    })?;
    lua.load(TOOLS_CALL).set_name("=tavern-tools-call").call((
        raw,
        finish,
        host_co,
        LuaValue::LightUserData(hand_over_mark()),
    ))
}

/// `error_value(e)`: an error a Rust function raised into the script (mlua's error userdata)
/// as the `{code, message}` table the script catches ([`ScriptError::to_value`], remembered
/// so raising it again fails with the same error); any other value as it is. The prelude
/// calls it wherever a script can catch an error.
pub(crate) fn error_value_fn(lua: &Lua, shared: &Arc<Shared>) -> mlua::Result<Function> {
    guarded(lua, shared, "pcall", |lua, sh, v: LuaValue| {
        let LuaValue::Error(e) = v else {
            return Ok(v);
        };
        let value = sh.core.error_value(map_lua_error(*e, &sh.limits));
        let t = from_json(lua, &value).map_err(script_error)?;
        if let LuaValue::Table(t) = &t {
            t.set_metatable(Some(lua.named_registry_value::<Table>(ERROR_MT_KEY)?))?;
        }
        Ok(t)
    })
}

/// `raise(table)`: fails the call with the table's content — the nested tool error it stands
/// for (same code), or its `message` / JSON as a runtime error.
fn raise_fn(lua: &Lua, shared: &Arc<Shared>) -> mlua::Result<Function> {
    guarded(
        lua,
        shared,
        "error",
        |lua, sh, v: LuaValue| -> mlua::Result<()> {
            let limits = ConvertLimits {
                max_depth: sh.limits.max_value_depth,
                max_bytes: sh.limits.max_value_bytes,
            };
            let json = match to_json(lua, &v, limits) {
                Ok(j) => j,
                Err(e) => {
                    return Err(script_error(ScriptError::runtime(format!(
                        "a table was raised as an error and cannot be shown: {e}"
                    ))))
                }
            };
            if let (Some(Value::String(c)), Some(Value::String(m))) =
                (json.get("code"), json.get("message"))
            {
                if let Some(e) = sh.core.raised_error(c, m) {
                    return Err(script_error(e));
                }
                if super::error::is_raised_code(c) {
                    return Err(script_error(ScriptError::Raised {
                        code: c.clone(),
                        message: bounded(m, MAX_ERROR_TEXT),
                        file: None,
                        line: None,
                    }));
                }
            }
            let text = super::nested_error::error_text(&json);
            Err(script_error(ScriptError::runtime(bounded(
                &text,
                MAX_ERROR_TEXT,
            ))))
        },
    )
}

fn install_api(lua: &Lua, shared: &Arc<Shared>) -> mlua::Result<()> {
    {
        let api = lua.create_table()?;
        for ns in super::api::namespaces() {
            api.raw_set(ns, lua.create_table()?)?;
        }
        for (i, f) in API.iter().enumerate() {
            let t: Table = api.raw_get(f.namespace)?;
            let func = match f.op {
                ApiOp::ToolsRegister => guarded(lua, shared, "api.tools.register", register_tool)?,
                ApiOp::HooksOn => guarded(lua, shared, "api.hooks.on", hooks_on)?,
                ApiOp::ToolsCall => tools_call_fn(lua, shared)?,
                ApiOp::ServicesOverride => {
                    guarded(lua, shared, "api.services.override", services_override)?
                }
                op => {
                    let name = api_name(i);
                    guarded(
                        lua,
                        shared,
                        name,
                        move |lua, sh, args: mlua::Variadic<LuaValue>| {
                            let limits = ConvertLimits {
                                max_depth: sh.limits.max_value_depth,
                                max_bytes: sh.limits.max_value_bytes,
                            };
                            let mut json = Vec::with_capacity(args.len());
                            for a in args.iter() {
                                json.push(to_json(lua, a, limits).map_err(script_error)?);
                            }
                            let out = sh.core.invoke(op, &json).map_err(script_error)?;
                            // A missing key or unset setting is nil (not api.json.null), so
                            // `if v == nil` and `api.config.get(k) or default` read.
                            if matches!(op, ApiOp::StoreGet | ApiOp::ConfigGet | ApiOp::WorldGet)
                                && out.is_null()
                            {
                                return Ok(LuaValue::Nil);
                            }
                            if op == ApiOp::JsonEncode || op == ApiOp::FsRead {
                                // Plain strings: no need to walk them.
                                if let Value::String(s) = &out {
                                    return Ok(LuaValue::String(lua.create_string(s)?));
                                }
                            }
                            from_json(lua, &out).map_err(script_error)
                        },
                    )?
                }
            };
            t.raw_set(f.name, func)?;
        }
        let json: Table = api.raw_get("json")?;
        json.raw_set("null", LuaValue::NULL)?;
        // `api.ask` is `api.client.ask` (the name docs and the issue use).
        let client: Table = api.raw_get("client")?;
        api.raw_set("ask", client.raw_get::<Function>("ask")?)?;
        lua.globals().raw_set("api", api)?;
        Ok(())
    }
}

impl LuaHost {
    /// Runs one script file's top level (registering tools is allowed here).
    pub fn load_file(&self, name: &str, text: &str) -> Result<(), ScriptError> {
        self.shared.loading.store(true, Ordering::Relaxed);
        let r = self.run(|| {
            self.lua
                .load(text)
                .set_name(format!("@{name}"))
                .set_mode(ChunkMode::Text)
                .exec()?;
            Ok(Value::Null)
        });
        self.shared.loading.store(false, Ordering::Relaxed);
        r.map(|_| ())
    }

    /// Evaluates a chunk (snippets): the chunk's `return` value.
    pub fn eval_chunk(&self, name: &str, text: &str, inputs: &Value) -> Result<Value, ScriptError> {
        self.run(|| {
            let inputs = from_json(&self.lua, inputs).map_err(script_error)?;
            self.lua.globals().raw_set("inputs", inputs)?;
            let v: LuaValue = self
                .lua
                .load(text)
                .set_name(format!("@{name}"))
                .set_mode(ChunkMode::Text)
                .eval()?;
            self.result_json(&v)
        })
    }

    fn result_json(&self, v: &LuaValue) -> mlua::Result<Value> {
        let limits = ConvertLimits {
            max_depth: self.shared.limits.max_value_depth,
            max_bytes: self.shared.limits.max_value_bytes,
        };
        to_json(&self.lua, v, limits).map_err(script_error)
    }

    /// Whether a registered handler or a global function has this name.
    pub fn has_function(&self, name: &str) -> bool {
        self.lookup(name).ok().flatten().is_some()
    }

    /// The names of the global functions.
    pub fn function_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in self.handles.globals.pairs::<LuaValue, LuaValue>().flatten() {
            if let (LuaValue::String(k), LuaValue::Function(_)) = (k, v) {
                out.push(k.to_string_lossy());
            }
        }
        out.sort();
        out
    }

    fn lookup(&self, name: &str) -> mlua::Result<Option<Function>> {
        if let LuaValue::Function(f) = self.handles.handlers.raw_get::<LuaValue>(name)? {
            return Ok(Some(f));
        }
        match self.handles.globals.raw_get::<LuaValue>(name)? {
            LuaValue::Function(f) => Ok(Some(f)),
            _ => Ok(None),
        }
    }

    /// Calls a registered handler (by tool id) or a global function with `(args, ctx)`.
    ///
    /// With a `gate`, an outermost call runs as a coroutine of the host's: when its script
    /// calls a sync host tool (`api.tools.call`), the coroutine yields, `gate` lets the
    /// state go while the tool runs (other calls may use it meanwhile) and takes it back,
    /// and the call goes on with its own budget: the instructions it used so far and its
    /// deadline (time away counts). Its frames stay on this thread: the call stack of
    /// script calls ([`super::host::ActiveCall`]) is the one it left.
    pub fn call(
        &self,
        function: &str,
        args: &Value,
        tool_id: &str,
        caller: &str,
        gate: Option<Gate<'_>>,
    ) -> Result<Value, ScriptError> {
        let f = match self.lookup(function) {
            Ok(Some(f)) => f,
            Ok(None) => {
                return Err(ScriptError::UnknownFunction {
                    function: function.to_string(),
                })
            }
            Err(e) => return Err(ScriptError::Internal(e.to_string())),
        };
        match gate {
            Some(gate) if self.depth.load(Ordering::Relaxed) == 0 => {
                self.call_as_coroutine(f, args, tool_id, caller, gate)
            }
            _ => self.run_from(None, || {
                let lua = &self.lua;
                let a = from_json(lua, args).map_err(script_error)?;
                let v: LuaValue = self.handles.trampoline.call((f, a, tool_id, caller))?;
                self.result_json(&v)
            }),
        }
    }

    /// [`LuaHost::call`] as a coroutine that hands sync host tools over through `gate`.
    fn call_as_coroutine(
        &self,
        f: Function,
        args: &Value,
        tool_id: &str,
        caller: &str,
        gate: Gate<'_>,
    ) -> Result<Value, ScriptError> {
        // This thread holds the state: coroutines left by calls that lost it go now.
        let orphans = std::mem::take(&mut *self.orphans.lock().unwrap_or_else(|p| p.into_inner()));
        drop(orphans);
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
        let trampoline = self.handles.trampoline.clone();
        let co = match spare {
            Some(co) => co.reset(trampoline).map(|()| co),
            None => self.lua.create_thread(trampoline),
        }
        .map_err(|e| ScriptError::Internal(format!("creating a Lua coroutine: {e}")))?;
        let mut first = Some(f);
        let mut saved = None;
        let mut handed: Option<Result<Value, ScriptError>> = None;
        loop {
            let step = self.run_from(saved.take(), || {
                let input = match (first.take(), handed.take()) {
                    (Some(f), _) => {
                        let a = from_json(&self.lua, args).map_err(script_error)?;
                        (f, a, tool_id, caller).into_lua_multi(&self.lua)?
                    }
                    // The script goes on with `true, result`, or `false` and raises the
                    // error (as the call made in place would have).
                    (None, Some(out)) => match out.and_then(|v| from_json(&self.lua, &v)) {
                        Ok(v) => (true, v).into_lua_multi(&self.lua)?,
                        Err(e) => {
                            *self
                                .shared
                                .handed_back
                                .lock()
                                .unwrap_or_else(|p| p.into_inner()) = Some(e);
                            false.into_lua_multi(&self.lua)?
                        }
                    },
                    (None, None) => mlua::MultiValue::new(),
                };
                self.resume(&co, input)
            })?;
            let (id, tool_args) = match step {
                Step::Done(v) => {
                    if co.status() == mlua::thread::ThreadStatus::Finished {
                        *self.spare.lock().unwrap_or_else(|p| p.into_inner()) = Some(co);
                    }
                    return Ok(v);
                }
                Step::HandOver(id, a) => (id, a),
            };
            saved = Some(self.shared.budget.save());
            let core = &self.shared.core;
            let mut tool_args = Some(tool_args);
            let mut out = None;
            let back = gate(&mut || {
                if let Some(a) = tool_args.take() {
                    out = Some(core.call_tool(&id, a));
                }
            });
            if let Err(e) = back {
                // The state belongs to another call now: leave the coroutine untouched.
                self.orphans
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(co);
                return Err(e);
            }
            handed = Some(out.unwrap_or_else(|| {
                Err(ScriptError::Internal(
                    "api.tools.call: the handed-over call did not run".into(),
                ))
            }));
        }
    }

    /// Resumes the call's coroutine once: to its end, or to a sync host tool it hands over.
    fn resume(&self, co: &mlua::Thread, input: mlua::MultiValue) -> mlua::Result<Step> {
        let prev = self
            .shared
            .engine_co
            .swap(co.to_pointer() as usize, Ordering::Relaxed);
        let r = co.resume::<mlua::MultiValue>(input);
        self.shared.engine_co.store(prev, Ordering::Relaxed);
        let pending = self
            .shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let values = r?;
        let marked =
            matches!(values.front(), Some(LuaValue::LightUserData(m)) if *m == hand_over_mark());
        match (marked, pending) {
            // Only the wrapper can yield the mark (a script can neither make nor reach it),
            // and it yields right after `raw` left the call in `pending`.
            (true, Some((id, a))) => return Ok(Step::HandOver(id, a)),
            // Any other yield of the host's coroutine: the script's own yields at a
            // handler's top level fail before they get here.
            _ if co.status() == mlua::thread::ThreadStatus::Resumable => {
                return Err(mlua::Error::runtime(
                    "attempt to yield from outside a coroutine",
                ))
            }
            _ => {}
        }
        let v = values.front().unwrap_or(&LuaValue::Nil);
        Ok(Step::Done(self.result_json(v)?))
    }

    /// The hook function stored under `key` (`hook#<n>`), if this state has it, and whether
    /// it takes a `ctx` (two parameters or more, or `...`).
    pub fn hook_function(&self, key: &str) -> Option<(Function, bool)> {
        match self.handles.handlers.raw_get::<LuaValue>(key) {
            Ok(LuaValue::Function(f)) => {
                let info = f.info();
                let wants_ctx = info.num_params >= 2 || info.is_vararg;
                Some((f, wants_ctx))
            }
            _ => None,
        }
    }

    /// Calls hook handler `f` with `(ev, ctx)` under the budget, like [`LuaHost::call`] but
    /// reading the handler's answer without a JSON round trip: `nil`/`true` go on, `false`
    /// (with an optional reason) vetoes, a table is converted and read by
    /// [`HookReturn::from_value`].
    pub fn call_hook(
        &self,
        f: &Function,
        event: &Value,
        ctx: Option<(&str, &str)>,
    ) -> Result<HookReturn, ScriptError> {
        self.run(|| {
            let mut complete = true;
            // [1] array metatable, [2] event keys, [3] the runner (with a ctx) or `fail`
            // (without), [4] f.
            let third = match ctx {
                Some(_) => &self.handles.hook_runner,
                None => &self.handles.hook_fail,
            };
            let args = (&self.handles.array_mt, &self.handles.event_keys, third, f);
            // One protected call builds the event with raw pushes and calls the handler:
            // without a ctx straight (`f(ev)` under `lua_pcall`, a failure handed to `fail`,
            // which raises it as the runner would: no Lua frame, no `pcall` in Lua), else
            // through the runner, `runner(f, ev, tool_id, caller)`. Either way the stack
            // ends as [1] r, [2] why, or empty when `r` is nil or true (read as nil, nil).
            // SAFETY: the closure runs inside `exec_raw`'s protected call and holds nothing
            // with a destructor; `push_event` pushes exactly one value; the stack grows by
            // three before the call (checked); `fail` never returns (it raises).
            let (r, why): (LuaValue, LuaValue) = unsafe {
                self.lua.exec_raw(args, |state| {
                    use mlua::ffi;
                    complete = convert::push_event(state, event, 1, 2);
                    if !complete || ffi::lua_checkstack(state, 3) == 0 {
                        complete = false;
                        ffi::lua_settop(state, 0);
                        ffi::lua_pushnil(state);
                        ffi::lua_pushnil(state);
                        return;
                    }
                    match ctx {
                        Some((tool_id, caller)) => {
                            // [3] runner [4] f [5] ev [6] tool_id [7] caller.
                            let (t, c) = (tool_id.as_bytes(), caller.as_bytes());
                            ffi::lua_pushlstring(state, t.as_ptr().cast(), t.len());
                            ffi::lua_pushlstring(state, c.as_ptr().cast(), c.len());
                            ffi::lua_call(state, 4, 2);
                        }
                        None => {
                            // [3] fail [4] f [5] ev.
                            if ffi::lua_pcall(state, 1, 2, 0) != ffi::LUA_OK {
                                // [3] fail [4] error: raises.
                                ffi::lua_call(state, 1, 0);
                            }
                            // [3] fail [4] r [5] why: drop `fail`.
                            ffi::lua_rotate(state, 3, -1);
                            ffi::lua_settop(state, 4);
                        }
                    }
                    // [1] mt [2] keys [3] r [4] why → [1] r [2] why; nothing when the handler
                    // lets the work go on (nil or true: no values to read back).
                    ffi::lua_rotate(state, 1, -2);
                    ffi::lua_settop(state, 2);
                    let t = ffi::lua_type(state, 1);
                    if t == ffi::LUA_TNIL
                        || (t == ffi::LUA_TBOOLEAN && ffi::lua_toboolean(state, 1) != 0)
                    {
                        ffi::lua_settop(state, 0);
                    }
                })?
            };
            if !complete {
                return Err(script_error(ScriptError::ValueLimit {
                    what: "value_depth".into(),
                    message: "the hook event is nested too deeply to hand to Lua".into(),
                }));
            }
            Ok(match r {
                LuaValue::Nil | LuaValue::Boolean(true) => HookReturn::Continue,
                LuaValue::Boolean(false) => HookReturn::Veto(match why {
                    LuaValue::Nil => String::new(),
                    LuaValue::String(s) => s.to_string_lossy(),
                    other => self.result_json(&other).map(|v| v.to_string())?,
                }),
                other => HookReturn::from_value(self.result_json(&other)?),
            })
        })
    }

    /// Runs `f` under the budget (fresh unless this state is already running a call on
    /// this thread), maps every failure to a [`ScriptError`], and collects garbage after a
    /// memory error so the next call starts clean.
    fn run<T>(&self, f: impl FnOnce() -> mlua::Result<T>) -> Result<T, ScriptError> {
        self.run_from(None, f)
    }

    /// [`LuaHost::run`], going on with a `saved` budget instead of a fresh one when given
    /// (a call taking its state back after handing a tool over).
    fn run_from<T>(
        &self,
        saved: Option<super::budget::Saved>,
        f: impl FnOnce() -> mlua::Result<T>,
    ) -> Result<T, ScriptError> {
        let depth = self.depth.load(Ordering::Relaxed);
        self.depth.store(depth + 1, Ordering::Relaxed);
        let outer = depth == 0;
        if let (true, Some(s)) = (outer, saved) {
            self.shared.budget.restore(s);
        } else if outer {
            let l = &self.shared.limits;
            // The active call's deadline already folds in the per-call deadline, the
            // enclosing call's and the plugin's own `wall_ms`: when it was capped with a
            // `wall_ms` no longer than ours it is the sooner one, and the clock need not be
            // read again.
            match super::host::current_budget() {
                Some(c) if c.wall_ms <= l.wall_ms => {
                    self.shared
                        .budget
                        .reset(l.instructions, c.deadline, c.allowed_ms);
                }
                cur => {
                    let now = std::time::Instant::now();
                    let own = now + std::time::Duration::from_millis(l.wall_ms);
                    let deadline = cur.map_or(own, |c| c.deadline.min(own));
                    let wall = deadline.saturating_duration_since(now).as_millis() as u64;
                    self.shared.budget.reset(l.instructions, deadline, wall);
                }
            }
        }
        let r = crate::tools::quiet(|| std::panic::catch_unwind(AssertUnwindSafe(f)));
        self.depth.store(depth, Ordering::Relaxed);
        let out = match r {
            Ok(Ok(v)) => match self.shared.budget.aborted() {
                // The script caught the budget error and returned anyway: still a failure.
                Some(a) => Err(self.abort_to_script(a)),
                None => Ok(v),
            },
            Ok(Err(e)) => Err(self.map_error(e)),
            Err(p) => {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                self.shared.core.panics.fetch_add(1, Ordering::Relaxed);
                self.shared.core.emit(
                    crate::tools::LogLevel::Error,
                    &format!("panic while running Lua: {what}"),
                );
                Err(ScriptError::Internal(format!(
                    "panic while running Lua: {what}"
                )))
            }
        };
        if outer {
            if let Err(ScriptError::MemoryLimit { .. }) = &out {
                let _ = self.lua.gc_collect();
            }
        }
        out
    }

    fn abort_to_script(&self, a: Abort) -> ScriptError {
        match a {
            Abort::Instructions => ScriptError::InstructionLimit {
                limit: self.shared.limits.instructions,
                at: stopped_at(),
            },
            Abort::Timeout => ScriptError::Timeout {
                after_ms: self.shared.budget.wall_ms(),
                at: stopped_at(),
            },
            Abort::Cancelled => ScriptError::Cancelled,
        }
    }

    fn map_error(&self, e: mlua::Error) -> ScriptError {
        if let Some(a) = self.shared.budget.aborted() {
            return self.abort_to_script(a);
        }
        map_lua_error(e, &self.shared.limits)
    }

    /// Bytes used by the state.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Tools registered by the scripts while loading.
    pub fn registered(&self) -> Vec<RegisteredSpec> {
        self.shared
            .registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Maps an mlua error (after budget checks) to a [`ScriptError`].
pub(crate) fn map_lua_error(e: mlua::Error, limits: &Limits) -> ScriptError {
    for cause in e.chain() {
        if let Some(s) = cause.downcast_ref::<ScriptError>() {
            let (file, line) = calling_line(&e);
            return s.clone().placed(file, line);
        }
        if let Some(a) = cause.downcast_ref::<Abort>() {
            return match a {
                Abort::Instructions => ScriptError::InstructionLimit {
                    limit: limits.instructions,
                    at: stopped_at(),
                },
                Abort::Timeout => ScriptError::Timeout {
                    after_ms: limits.wall_ms,
                    at: stopped_at(),
                },
                Abort::Cancelled => ScriptError::Cancelled,
            };
        }
    }
    let mut root = &e;
    loop {
        match root {
            mlua::Error::CallbackError { cause, .. } => root = cause,
            mlua::Error::WithContext { cause, .. } => root = cause,
            _ => break,
        }
    }
    match root {
        mlua::Error::MemoryError(_) => ScriptError::MemoryLimit {
            limit: limits.memory_bytes,
        },
        mlua::Error::SyntaxError { message, .. } => {
            let (file, line, msg) = split_place(message);
            ScriptError::Syntax {
                file: file.unwrap_or_else(|| "<chunk>".into()),
                line: line.unwrap_or(0),
                column: 0,
                message: bounded(&msg, MAX_ERROR_TEXT),
            }
        }
        mlua::Error::StackError => ScriptError::ValueLimit {
            what: "call_depth".into(),
            message: "the Lua stack is exhausted".into(),
        },
        other => {
            let text = match other {
                mlua::Error::RuntimeError(m) => m.clone(),
                o => o.to_string(),
            };
            // Drop the traceback mlua appends; keep the message.
            let text = text
                .split("\nstack traceback:")
                .next()
                .unwrap_or_default()
                .to_string();
            if text.contains("stack overflow") {
                return ScriptError::ValueLimit {
                    what: "call_depth".into(),
                    message: bounded(&text, 512),
                };
            }
            if text.contains("not enough memory") {
                return ScriptError::MemoryLimit {
                    limit: limits.memory_bytes,
                };
            }
            let (file, line, msg) = split_place(&text);
            ScriptError::Runtime {
                message: bounded(&msg, MAX_ERROR_TEXT),
                file,
                line,
            }
        }
    }
}

/// Where the script called the Rust function that failed: the first frame of a script
/// file in the traceback mlua took when the function returned its error (not a `[C]`
/// frame, not the host's own `tavern-*` chunks).
fn calling_line(e: &mlua::Error) -> (Option<String>, Option<u32>) {
    let mut err = e;
    let traceback = loop {
        match err {
            mlua::Error::CallbackError { traceback, .. } => break traceback,
            mlua::Error::WithContext { cause, .. } => err = cause,
            _ => return (None, None),
        }
    };
    for frame in traceback.lines().map(str::trim) {
        if frame.starts_with("[C]") || frame.starts_with("tavern-") {
            continue;
        }
        if let (Some(f), Some(l), _) = split_place(frame) {
            return (Some(f), Some(l));
        }
    }
    (None, None)
}

/// Splits `file:line: message` (Lua's error prefix) into its parts.
fn split_place(text: &str) -> (Option<String>, Option<u32>, String) {
    let first = text.lines().next().unwrap_or("");
    let mut it = first.splitn(3, ':');
    if let (Some(f), Some(l), Some(rest)) = (it.next(), it.next(), it.next()) {
        if let Ok(line) = l.trim().parse::<u32>() {
            if !f.is_empty() && !f.contains(' ') {
                let f = f.trim_start_matches('@').to_string();
                let mut msg = rest.trim_start().to_string();
                // Keep any further lines of a multi-line message.
                if let Some((_, tail)) = text.split_once('\n') {
                    msg.push('\n');
                    msg.push_str(tail);
                }
                return (Some(f), Some(line), msg);
            }
        }
    }
    (None, None, text.to_string())
}

fn register_tool(lua: &Lua, sh: &Arc<Shared>, spec: LuaValue) -> mlua::Result<()> {
    if !sh.loading.load(Ordering::Relaxed) {
        return Err(mlua::Error::runtime(
            "api.tools.register can only be called while the plugin loads (at the top level of a script)",
        ));
    }
    let LuaValue::Table(spec) = spec else {
        return Err(mlua::Error::runtime(
            "api.tools.register expects a table {id=…, description=…, parameters=…, handler=function(args, ctx) … end}",
        ));
    };
    let id: Option<String> = spec.raw_get("id")?;
    let Some(id) = id else {
        return Err(mlua::Error::runtime(
            "api.tools.register: 'id' (a string) is required",
        ));
    };
    let id = super::host::register_id(&sh.core.env.plugin, &id)
        .map_err(|e| mlua::Error::runtime(format!("api.tools.register: {e}")))?;
    let handler = match spec.raw_get::<LuaValue>("handler")? {
        LuaValue::Function(f) => f,
        _ => {
            return Err(mlua::Error::runtime(format!(
                "api.tools.register: tool '{id}' needs handler = function(args, ctx) … end"
            )))
        }
    };
    let description: Option<String> = spec.raw_get("description")?;
    let display_name: Option<String> = spec.raw_get("displayName")?;
    if let Some(d) = &description {
        super::host::check_description(&id, d)
            .map_err(|e| mlua::Error::runtime(format!("api.tools.register: {e}")))?;
    }
    let parameters = match spec.raw_get::<LuaValue>("parameters")? {
        LuaValue::Nil => None,
        v => Some(
            to_json(
                lua,
                &v,
                ConvertLimits {
                    max_depth: 64,
                    max_bytes: 1 << 20,
                },
            )
            .map_err(script_error)?,
        ),
    };
    let handlers: Table = lua.named_registry_value(HANDLERS_KEY)?;
    if handlers.raw_get::<LuaValue>(id.as_str())? != LuaValue::Nil {
        return Err(mlua::Error::runtime(format!(
            "api.tools.register: tool '{id}' is already registered"
        )));
    }
    handlers.raw_set(id.as_str(), handler)?;
    sh.registered
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(RegisteredSpec {
            id,
            display_name,
            description: description.unwrap_or_default(),
            parameters,
        });
    Ok(())
}

/// `ctx.log(...)`: logs with the running tool's id.
pub(crate) fn ctx_log(_lua: &Lua, sh: &Arc<Shared>, msg: LuaValue) -> mlua::Result<()> {
    let text = match &msg {
        LuaValue::String(s) => s.to_string_lossy(),
        other => other.to_string().unwrap_or_else(|_| "<unprintable>".into()),
    };
    let tool = current_tool_id().unwrap_or_default();
    sh.core.emit(
        crate::tools::LogLevel::Info,
        &format!("[{tool}] {}", bounded(&text, MAX_ERROR_TEXT)),
    );
    Ok(())
}

fn convert_limits(sh: &Shared) -> ConvertLimits {
    ConvertLimits {
        max_depth: sh.limits.max_value_depth,
        max_bytes: sh.limits.max_value_bytes,
    }
}

/// `api.hooks.on(point, handler, options)`.
fn hooks_on(
    lua: &Lua,
    sh: &Arc<Shared>,
    (point, f, opts): (String, LuaValue, Option<Table>),
) -> mlua::Result<u64> {
    let env = &sh.core.env;
    let point = super::hooks_api::ScriptHooks::check_point(env, "api.hooks.on", &point)
        .map_err(script_error)?;
    let LuaValue::Function(f) = f else {
        return Err(mlua::Error::runtime(
            "api.hooks.on: parameter 2 ('handler') must be a function(ev, ctx)",
        ));
    };
    let mut o = crate::hooks::HookOptions::default();
    if let Some(t) = opts {
        for pair in t.clone().pairs::<LuaValue, LuaValue>() {
            let (k, _) = pair?;
            let known = matches!(&k, LuaValue::String(s) if matches!(s.to_str().as_deref(), Ok("priority" | "once" | "id")));
            if !known {
                return Err(mlua::Error::runtime(format!(
                    "api.hooks.on: unknown option {} (options: priority, once, id)",
                    k.to_string().unwrap_or_else(|_| "?".into())
                )));
            }
        }
        o.priority = t.raw_get::<Option<i64>>("priority")?.unwrap_or(0);
        o.once = t.raw_get::<Option<bool>>("once")?.unwrap_or(false);
        o.id = t.raw_get::<Option<String>>("id")?;
    }
    let n = sh.core.hooks.next_key();
    let key = format!("hook#{n}");
    // Kept as it is: the hook runner reads `false, "why"` itself.
    let handlers: Table = lua.named_registry_value(HANDLERS_KEY)?;
    handlers.raw_set(key.as_str(), f)?;
    sh.core
        .hooks
        .add_hook(env, n, key, point, o)
        .map_err(script_error)
}

/// `api.services.override(id, function(args, ctx, next) … end)`.
fn services_override(lua: &Lua, sh: &Arc<Shared>, (id, f): (String, LuaValue)) -> mlua::Result<()> {
    let env = &sh.core.env;
    let tool = super::hooks_api::ScriptHooks::check_override(env, &id).map_err(script_error)?;
    let LuaValue::Function(f) = f else {
        return Err(mlua::Error::runtime(
            "api.services.override: parameter 2 ('handler') must be a function(args, ctx, next)",
        ));
    };
    let n = sh.core.hooks.next_key();
    let key = format!("override#{n}");
    let wrap: Function = lua.named_registry_value(OVERRIDE_WRAP_KEY)?;
    let wrapped: Function = wrap.call(f)?;
    let handlers: Table = lua.named_registry_value(HANDLERS_KEY)?;
    handlers.raw_set(key.as_str(), wrapped)?;
    sh.core
        .hooks
        .add_override(env, n, key, tool)
        .map_err(script_error)
}

/// The `next` an override gets: the next override down, or the tool itself.
fn call_next(
    lua: &Lua,
    sh: &Arc<Shared>,
    (token, args): (u64, LuaValue),
) -> mlua::Result<LuaValue> {
    let json = to_json(lua, &args, convert_limits(sh)).map_err(script_error)?;
    let out = sh.core.call_next(token, json).map_err(script_error)?;
    from_json(lua, &out).map_err(script_error)
}
