//! The C ABI of tavern. `include/tavern.h` is generated from this file by cbindgen (see
//! `tests/header.rs`); the doc comments below are the header's documentation.
//!
//! Every function catches panics (a panic is an error code plus [`tavern_last_error`]),
//! checks every pointer for NULL and every string for UTF-8, and keeps the last error per
//! thread.
#![allow(clippy::missing_safety_doc)] // Each function's safety contract is its doc comment.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tavern::{CallOptions, Engine, EngineBuilder, Ticket, ToolDefinition, ToolError};

/// An engine: opaque to C. Made by `tavern_engine_new`, freed by `tavern_engine_free`.
///
/// The engine is built (plugins and workflows loaded) on the first `tavern_engine_call` or
/// `tavern_engine_submit`, so host tools registered before then exist before any plugin
/// loads and their namespaces are reserved: a plugin cannot take their ids.
pub struct TavernEngine {
    home: PathBuf,
    /// Host tools registered before the engine was built.
    early: Mutex<Vec<(ToolDefinition, HostCallback)>>,
    engine: OnceLock<Result<Engine, String>>,
    /// Tickets handed out and not yet taken.
    tickets: Mutex<HashSet<u64>>,
}

/// The C callback of a host tool.
/// `char *callback(void *user_data, const char *args_json)`.
pub type TavernToolCallback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, args_json: *const c_char) -> *mut c_char>;

/// A registered C callback and its user data.
#[derive(Clone)]
struct HostCallback {
    f: unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_char,
    user_data: *mut c_void,
    /// One call at a time per tool: C callbacks need not be thread-safe.
    serial: Arc<Mutex<()>>,
}

// SAFETY: the header documents that the callback and its user_data are used from engine
// threads, one call at a time per tool (`serial`); the host promises that this is sound.
unsafe impl Send for HostCallback {}
unsafe impl Sync for HostCallback {}

impl HostCallback {
    fn call(&self, tool: &str, args: &Value) -> Result<Value, ToolError> {
        let _one = self.serial.lock().unwrap_or_else(|p| p.into_inner());
        let text = CString::new(args.to_string())
            .map_err(|_| ToolError::failed(tool, "arguments contain a NUL byte"))?;
        // SAFETY: `f` is the host's callback, called as the header documents it; `text`
        // lives until the call returns.
        let out = unsafe { (self.f)(self.user_data, text.as_ptr()) };
        if out.is_null() {
            return Err(ToolError::failed(tool, "the host callback returned NULL"));
        }
        // SAFETY: the callback returns a NUL-terminated string from malloc (documented); we
        // copy it and free it with free().
        let owned = unsafe { CStr::from_ptr(out) }.to_bytes().to_vec();
        unsafe { libc::free(out.cast()) };
        let text = String::from_utf8(owned)
            .map_err(|_| ToolError::failed(tool, "the host callback returned invalid UTF-8"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            ToolError::failed(
                tool,
                format!("the host callback returned invalid JSON: {e}"),
            )
        })?;
        // `{"error": "..."}` (and nothing else) is the callback's way to fail.
        match v.as_object() {
            Some(m) if m.len() == 1 && m.get("error").is_some_and(Value::is_string) => Err(
                ToolError::failed(tool, m["error"].as_str().unwrap_or_default()),
            ),
            _ => Ok(v),
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_error(msg: &str) {
    // A NUL inside the message is replaced so the message is never lost.
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(c));
}

fn clear_error() {
    LAST_ERROR.with(|e| *e.borrow_mut() = None);
}

/// Runs `f` with panics caught: `Err` and panics set the last error and give `fail`.
fn guard<T>(fail: T, f: impl FnOnce() -> Result<T, String>) -> T {
    clear_error();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(msg)) => {
            set_error(&msg);
            fail
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            set_error(&format!("internal error (a panic was contained): {what}"));
            fail
        }
    }
}

/// A borrowed C string as UTF-8, or why not.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, String> {
    if p.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|e| format!("{what} is not valid UTF-8 (at byte {})", e.valid_up_to()))
}

unsafe fn handle<'a>(engine: *mut TavernEngine) -> Result<&'a TavernEngine, String> {
    if engine.is_null() {
        return Err("engine is NULL".into());
    }
    // SAFETY: non-NULL, made by tavern_engine_new and not yet freed (caller's contract).
    Ok(unsafe { &*engine })
}

fn owned_string(s: String) -> *mut c_char {
    CString::new(s.replace('\0', "\\u0000"))
        .unwrap_or_default()
        .into_raw()
}

fn host_tool(b: EngineBuilder, def: ToolDefinition, cb: HostCallback) -> EngineBuilder {
    b.host_tool(def, move |ctx, args| cb.call(&ctx.tool_id, &args))
}

impl TavernEngine {
    /// The engine, built on first use with the host tools registered so far.
    fn engine(&self) -> Result<&Engine, String> {
        let built = self.engine.get_or_init(|| {
            let mut b = Engine::builder().home(&self.home);
            let early = std::mem::take(&mut *self.early.lock().unwrap_or_else(|p| p.into_inner()));
            for (def, cb) in early {
                b = host_tool(b, def, cb);
            }
            b.build()
                .map_err(|e| format!("cannot build the engine: {e}"))
        });
        built.as_ref().map_err(Clone::clone)
    }
}

/// Makes an engine for the home directory `home` (holding `plugins/`, `workflows/` and
/// `tavern.toml`). `home` is borrowed. Returns NULL on failure (NULL or non-UTF-8 `home`,
/// not a directory, unreadable `tavern.toml`); see `tavern_last_error`.
/// Plugins load on the first `tavern_engine_call` or `tavern_engine_submit`.
/// The engine is owned by the caller: free it with `tavern_engine_free`.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_new(home: *const c_char) -> *mut TavernEngine {
    guard(std::ptr::null_mut(), || {
        let home = PathBuf::from(unsafe { text(home, "home") }?);
        if !home.is_dir() {
            return Err(format!("home '{}' is not a directory", home.display()));
        }
        tavern::internal::config::Settings::load(&home)
            .map_err(|p| format!("cannot read the configuration: {p}"))?;
        Ok(Box::into_raw(Box::new(TavernEngine {
            home,
            early: Mutex::new(Vec::new()),
            engine: OnceLock::new(),
            tickets: Mutex::new(HashSet::new()),
        })))
    })
}

/// Frees an engine made by `tavern_engine_new` (NULL is ignored). Calls still running are
/// cancelled at their next check; strings returned earlier stay valid.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_free(engine: *mut TavernEngine) {
    guard((), || {
        if !engine.is_null() {
            // SAFETY: made by Box::into_raw in tavern_engine_new and not freed before.
            drop(unsafe { Box::from_raw(engine) });
        }
        Ok(())
    })
}

/// Registers a host tool. `definition_json` (borrowed) is a tool definition:
/// `{"id": "world:get", "description": "...", "parameters": {JSON Schema}}`. Its namespace
/// (`world`) is reserved for the host. `callback(user_data, args_json)` runs the tool:
/// `args_json` is borrowed for the call; it returns a JSON text allocated with malloc, which
/// the engine frees with free() — the tool's value, or `{"error": "why"}` to fail; NULL fails
/// too. The callback runs on an engine thread, one call at a time per tool, and must not
/// unwind (C++ exceptions) across the boundary. `user_data` is passed through untouched and
/// must stay valid until the engine is freed.
/// Returns 0 on success, -1 on failure (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_register_tool(
    engine: *mut TavernEngine,
    definition_json: *const c_char,
    callback: TavernToolCallback,
    user_data: *mut c_void,
) -> c_int {
    guard(-1, || {
        let e = unsafe { handle(engine) }?;
        let text = unsafe { text(definition_json, "definition_json") }?;
        let f = callback.ok_or("callback is NULL")?;
        let mut v: Value = serde_json::from_str(text)
            .map_err(|e| format!("definition_json is not valid JSON: {e}"))?;
        let obj = v
            .as_object_mut()
            .ok_or("definition_json must be a JSON object")?;
        obj.entry("implementation")
            .or_insert_with(|| serde_json::json!({"type": "service"}));
        let def: ToolDefinition = serde_json::from_value(v)
            .map_err(|e| format!("definition_json is not a tool definition: {e}"))?;
        let cb = HostCallback {
            f,
            user_data,
            serial: Arc::new(Mutex::new(())),
        };
        match e.engine.get() {
            None => {
                let mut early = e.early.lock().unwrap_or_else(|p| p.into_inner());
                if early.iter().any(|(d, _)| d.id == def.id) {
                    return Err(format!("tool '{}' is already registered", def.id));
                }
                early.push((def, cb));
            }
            Some(built) => {
                let engine = built.as_ref().map_err(Clone::clone)?;
                let tools = engine.tools();
                tools.reserve_namespace(def.id.split_once(':').map_or(&*def.id, |(n, _)| n));
                let handler = tavern::internal::tools::fn_handler(move |ctx, args| {
                    cb.call(&ctx.tool_id, &args)
                });
                tools
                    .register_reserved(def, handler, tavern::CallerPolicy::ANY)
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(0)
    })
}

/// Parses `text` (borrowed) and runs its calls, blocking until they finish. Returns what
/// `tavern call` prints: `{"results": [...], "diagnostics": [...]}`, owned by the caller
/// (free with `tavern_string_free`), or NULL on failure (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_call(
    engine: *mut TavernEngine,
    text: *const c_char,
) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        let e = unsafe { handle(engine) }?;
        let t = unsafe { self::text(text, "text") }?;
        let report = e
            .engine()?
            .call_blocking(t, CallOptions::new())
            .map_err(|e| e.to_string())?;
        Ok(owned_string(report.to_json().to_string()))
    })
}

/// Queues `text` (borrowed) to run on the engine's threads and returns at once with a
/// ticket (never 0), or 0 on failure (see `tavern_last_error`). Collect the result with
/// `tavern_engine_pump` and `tavern_engine_take`.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_submit(
    engine: *mut TavernEngine,
    text: *const c_char,
) -> u64 {
    guard(0, || {
        let e = unsafe { handle(engine) }?;
        let t = unsafe { self::text(text, "text") }?;
        let ticket = e.engine()?.submit(t).map_err(|e| e.to_string())?;
        e.tickets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ticket.0);
        Ok(ticket.0)
    })
}

/// Collects finished submissions for at most `budget_us` microseconds and returns how many
/// finished during this call (0 with nothing queued, at once). Script work never runs on
/// the calling thread. On a NULL engine returns 0 and sets `tavern_last_error`.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_pump(engine: *mut TavernEngine, budget_us: u32) -> u32 {
    guard(0, || {
        let e = unsafe { handle(engine) }?;
        let Some(Ok(engine)) = e.engine.get() else {
            return Ok(0);
        };
        let n = engine.pump(Duration::from_micros(u64::from(budget_us)));
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    })
}

/// The result of a submission, as `tavern_engine_call` returns it (owned by the caller:
/// free with `tavern_string_free`), once a pump collected it; then the ticket is forgotten.
/// NULL while pending (and `tavern_last_error` is NULL), or NULL for an unknown or already
/// taken ticket (and `tavern_last_error` says so).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_take(engine: *mut TavernEngine, ticket: u64) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        let e = unsafe { handle(engine) }?;
        let mut tickets = e.tickets.lock().unwrap_or_else(|p| p.into_inner());
        if !tickets.contains(&ticket) {
            return Err(format!("ticket {ticket} is unknown or was already taken"));
        }
        let Some(Ok(engine)) = e.engine.get() else {
            return Ok(std::ptr::null_mut());
        };
        match engine.take(Ticket(ticket)) {
            None => Ok(std::ptr::null_mut()),
            Some(r) => {
                tickets.remove(&ticket);
                let report = r.map_err(|e| e.to_string())?;
                Ok(owned_string(report.to_json().to_string()))
            }
        }
    })
}

/// This thread's last error message, or NULL when the last call on this thread succeeded.
/// The string is owned by the library and valid until the next tavern call on this thread;
/// do not free it.
#[no_mangle]
pub extern "C" fn tavern_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |c| c.as_ptr()))
}

/// Frees a string returned by `tavern_engine_call` or `tavern_engine_take` (NULL is
/// ignored). Do not use free() on these strings.
#[no_mangle]
pub unsafe extern "C" fn tavern_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: made by CString::into_raw in this library and not freed before.
        drop(unsafe { CString::from_raw(s) });
    }
}
