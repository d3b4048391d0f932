//! The C ABI of tavern. `include/tavern.h` is generated from this file by cbindgen (see
//! `tests/header.rs`); the doc comments below are the header's documentation.
//!
//! Every function catches panics (a panic is an error code plus [`tavern_last_error`]),
//! checks every pointer for NULL and every string for UTF-8, and keeps the last error per
//! thread. Every `unsafe` block says why it is sound (`// SAFETY:`; clippy checks).
#![allow(clippy::missing_safety_doc)] // Each function's safety contract is its doc comment.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use serde_json::Value;
use tavern::{CallOptions, Caller, Engine, EngineBuilder, Ticket, ToolDefinition, ToolError};

/// An engine: opaque to C. Made by `tavern_engine_new`, freed by `tavern_engine_free`.
///
/// The engine is built (plugins and workflows loaded) by `tavern_engine_build`, or else on
/// the first call that needs it (`tavern_engine_call`, `tavern_engine_submit[_with]`,
/// `tavern_engine_problems`), so host tools registered before then exist before any plugin
/// loads and their namespaces are reserved: a plugin cannot take their ids.
pub struct TavernEngine {
    home: PathBuf,
    /// What was registered before the engine was built.
    early: Mutex<Early>,
    engine: OnceLock<Result<Engine, String>>,
    /// Tickets handed out and not yet taken.
    tickets: Mutex<HashSet<u64>>,
    /// Finished tickets a pump collected and `tavern_engine_pump_finished` has not handed
    /// over yet (more than its array held).
    unreported: Mutex<std::collections::VecDeque<u64>>,
}

/// Host tools, main-thread tools, the log callback and settings given before the build.
#[derive(Default)]
struct Early {
    tools: Vec<(ToolDefinition, HostCallback)>,
    main: Vec<(ToolDefinition, HostCallback, ThreadId)>,
    log: Option<LogCallback>,
    /// `KEY=VALUE` settings over `tavern.toml` (`tavern_engine_set_local_model`).
    sets: Vec<String>,
}

impl Early {
    fn has(&self, id: &str) -> bool {
        self.tools.iter().any(|(d, _)| d.id == id) || self.main.iter().any(|(d, _, _)| d.id == id)
    }
}

/// Log levels passed to a `TavernLogCallback`.
pub const TAVERN_LOG_DEBUG: c_int = 0;
/// `print`, `api.log.info`, `ctx.log`.
pub const TAVERN_LOG_INFO: c_int = 1;
/// `api.log.warn`, load problems.
pub const TAVERN_LOG_WARN: c_int = 2;
/// `api.log.error`, a panicking tool or script.
pub const TAVERN_LOG_ERROR: c_int = 3;

/// The host's log callback:
/// `void callback(void *user_data, int level, const char *source, const char *message)`.
/// `level` is one of `TAVERN_LOG_*`; `source` is who wrote the line (`plugin:<name>`,
/// `script:<name>`, `tool:<id>`, or a file for a load problem); both strings are borrowed
/// for the call only.
pub type TavernLogCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: c_int,
        source: *const c_char,
        message: *const c_char,
    ),
>;

/// A registered C log callback and its user data.
#[derive(Clone)]
struct LogCallback {
    f: unsafe extern "C" fn(*mut c_void, c_int, *const c_char, *const c_char),
    user_data: *mut c_void,
    /// One call at a time: C callbacks need not be thread-safe.
    serial: Arc<Mutex<()>>,
}

// SAFETY: the header documents that the log callback and its user_data are called from
// engine threads, one call at a time (`serial`); the host promises that this is sound.
unsafe impl Send for LogCallback {}
// SAFETY: as above; a shared `LogCallback` only ever calls `f` under `serial`.
unsafe impl Sync for LogCallback {}

impl LogCallback {
    fn call(&self, r: &tavern::LogRecord<'_>) {
        let level = match r.level {
            tavern::LogLevel::Debug => TAVERN_LOG_DEBUG,
            tavern::LogLevel::Info => TAVERN_LOG_INFO,
            tavern::LogLevel::Warning => TAVERN_LOG_WARN,
            tavern::LogLevel::Error => TAVERN_LOG_ERROR,
        };
        let source = CString::new(r.source.replace('\0', " ")).unwrap_or_default();
        let message = CString::new(r.message.replace('\0', " ")).unwrap_or_default();
        let _one = self.serial.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: `f` is the host's callback, called as the header documents it; both
        // strings live until it returns.
        unsafe { (self.f)(self.user_data, level, source.as_ptr(), message.as_ptr()) };
    }

    fn boxed(self) -> tavern::LogCallback {
        Arc::new(move |r: &tavern::LogRecord<'_>| self.call(r))
    }
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
// threads (a main-thread tool's only from the thread that registered it), one call at a
// time per tool (`serial`); the host promises that this is sound.
unsafe impl Send for HostCallback {}
// SAFETY: as above; a shared `HostCallback` only ever calls `f` under `serial`.
unsafe impl Sync for HostCallback {}

impl HostCallback {
    fn call(&self, tool: &str, caller: &tavern::Caller, args: &Value) -> Result<Value, ToolError> {
        let _one = self.serial.lock().unwrap_or_else(|p| p.into_inner());
        let text = CString::new(args.to_string())
            .map_err(|_| ToolError::failed(tool, "arguments contain a NUL byte"))?;
        let _caller = CurrentCaller::enter(caller);
        // SAFETY: `f` is the host's callback, called as the header documents it; `text`
        // lives until the call returns.
        let out = unsafe { (self.f)(self.user_data, text.as_ptr()) };
        if out.is_null() {
            return Err(ToolError::failed(tool, "the host callback returned NULL"));
        }
        // SAFETY: the callback returns a NUL-terminated string from malloc (documented),
        // non-NULL (checked above); we copy it before freeing it.
        let owned = unsafe { CStr::from_ptr(out) }.to_bytes().to_vec();
        // SAFETY: `out` came from the host's malloc (documented) and is freed once, here.
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
    /// Who called the host tool whose callback runs on this thread (innermost last).
    static CURRENT_CALLER: RefCell<Vec<CString>> = const { RefCell::new(Vec::new()) };
}

/// The caller of the callback running on this thread, while it runs.
struct CurrentCaller;

impl CurrentCaller {
    fn enter(caller: &tavern::Caller) -> Self {
        let c = CString::new(caller.to_string().replace('\0', " ")).unwrap_or_default();
        CURRENT_CALLER.with(|v| v.borrow_mut().push(c));
        CurrentCaller
    }
}

impl Drop for CurrentCaller {
    fn drop(&mut self) {
        CURRENT_CALLER.with(|v| v.borrow_mut().pop());
    }
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
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that stays valid for `'a`.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, String> {
    if p.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|e| format!("{what} is not valid UTF-8 (at byte {})", e.valid_up_to()))
}

/// The engine behind a handle, or why not.
///
/// # Safety
/// `engine` is NULL or a handle made by `tavern_engine_new` and not yet freed.
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

impl TavernEngine {
    /// The engine, built on first use with what was registered so far.
    fn engine(&self) -> Result<&Engine, String> {
        let built = self.engine.get_or_init(|| {
            let mut b: EngineBuilder = Engine::builder().home(&self.home);
            let early = std::mem::take(&mut *self.early.lock().unwrap_or_else(|p| p.into_inner()));
            for (def, cb) in early.tools {
                b = b.host_tool(def, move |ctx, args| {
                    cb.call(&ctx.tool_id, &ctx.caller, &args)
                });
            }
            for (def, cb, owner) in early.main {
                b = b.main_thread_tool_on(owner, def, move |ctx, args| {
                    cb.call(&ctx.tool_id, &ctx.caller, &args)
                });
            }
            if let Some(log) = early.log {
                let log = log.boxed();
                b = b.log_callback(move |r| log(r));
            }
            for set in early.sets {
                b = b.set(set);
            }
            b.build()
                .map_err(|e| format!("cannot build the engine: {e}"))
        });
        built.as_ref().map_err(Clone::clone)
    }

    /// The engine if it is built already (and built without error).
    fn built(&self) -> Option<&Engine> {
        self.engine.get().and_then(|r| r.as_ref().ok())
    }
}

/// A tool definition from the host's JSON (`implementation` defaults to a service).
fn definition(text: &str) -> Result<ToolDefinition, String> {
    let mut v: Value = serde_json::from_str(text)
        .map_err(|e| format!("definition_json is not valid JSON: {e}"))?;
    let obj = v
        .as_object_mut()
        .ok_or("definition_json must be a JSON object")?;
    obj.entry("implementation")
        .or_insert_with(|| serde_json::json!({"type": "service"}));
    serde_json::from_value(v).map_err(|e| format!("definition_json is not a tool definition: {e}"))
}

/// A tool registration from C: the engine, its definition and its callback, checked.
///
/// # Safety
/// As `tavern_engine_register_tool`'s contract.
unsafe fn registration<'a>(
    engine: *mut TavernEngine,
    definition_json: *const c_char,
    callback: TavernToolCallback,
    user_data: *mut c_void,
) -> Result<(&'a TavernEngine, ToolDefinition, HostCallback), String> {
    // SAFETY: the caller's contract (a live handle or NULL).
    let e = unsafe { handle(engine) }?;
    // SAFETY: the caller's contract (NULL or a NUL-terminated string for the call).
    let text = unsafe { text(definition_json, "definition_json") }?;
    let f = callback.ok_or("callback is NULL")?;
    let def = definition(text)?;
    let cb = HostCallback {
        f,
        user_data,
        serial: Arc::new(Mutex::new(())),
    };
    Ok((e, def, cb))
}

/// Makes an engine for the home directory `home` (holding `plugins/`, `workflows/` and
/// `tavern.toml`). `home` is borrowed. Returns NULL on failure (NULL or non-UTF-8 `home`,
/// not a directory, unreadable `tavern.toml`); see `tavern_last_error`.
/// Plugins load at `tavern_engine_build`, or else on the first call that needs them.
/// The engine is owned by the caller: free it with `tavern_engine_free`.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_new(home: *const c_char) -> *mut TavernEngine {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract: NULL or a NUL-terminated string for the call.
        let home = PathBuf::from(unsafe { text(home, "home") }?);
        if !home.is_dir() {
            return Err(format!("home '{}' is not a directory", home.display()));
        }
        tavern::internal::config::Settings::load(&home)
            .map_err(|p| format!("cannot read the configuration: {p}"))?;
        Ok(Box::into_raw(Box::new(TavernEngine {
            home,
            early: Mutex::new(Early::default()),
            engine: OnceLock::new(),
            tickets: Mutex::new(HashSet::new()),
            unreported: Mutex::new(std::collections::VecDeque::new()),
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
/// too. The callback runs on an engine thread where blocking is allowed (the runtime's
/// blocking pool, or the thread of the mod's script that called it), so a slow callback
/// never delays another call; one call at a time per tool. It must not unwind (C++
/// exceptions) across the boundary. `user_data` is passed through untouched and must stay
/// valid until the engine is freed. For a callback that must run on the host's own thread,
/// use `tavern_engine_register_main_thread_tool`.
/// Returns 0 on success, -1 on failure (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_register_tool(
    engine: *mut TavernEngine,
    definition_json: *const c_char,
    callback: TavernToolCallback,
    user_data: *mut c_void,
) -> c_int {
    guard(-1, || {
        // SAFETY: this function's contract is `registration`'s.
        let (e, def, cb) = unsafe { registration(engine, definition_json, callback, user_data) }?;
        match e.engine.get() {
            None => {
                let mut early = e.early.lock().unwrap_or_else(|p| p.into_inner());
                if early.has(&def.id) {
                    return Err(format!("tool '{}' is already registered", def.id));
                }
                early.tools.push((def, cb));
            }
            Some(built) => {
                let engine = built.as_ref().map_err(Clone::clone)?;
                engine
                    .register_host_tool(def, move |ctx, args| {
                        cb.call(&ctx.tool_id, &ctx.caller, &args)
                    })
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(0)
    })
}

/// Registers a main-thread host tool: like `tavern_engine_register_tool`, but `callback`
/// runs only on **the thread calling this function**, inside `tavern_engine_pump` (or while
/// a `tavern_engine_call` on that thread waits), never on an engine thread. A call to it —
/// from model text or from a mod's `api.tools.call` — is parked until that thread's next
/// pump runs it within the pump's budget; its result then goes back to the caller (a mod
/// resumes). A parked call still ends at its caller's timeout or cancel. Use it for world
/// objects only the game thread may touch. Returns 0 on success, -1 on failure (see
/// `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_register_main_thread_tool(
    engine: *mut TavernEngine,
    definition_json: *const c_char,
    callback: TavernToolCallback,
    user_data: *mut c_void,
) -> c_int {
    guard(-1, || {
        // SAFETY: this function's contract is `registration`'s.
        let (e, def, cb) = unsafe { registration(engine, definition_json, callback, user_data) }?;
        let owner = std::thread::current().id();
        match e.engine.get() {
            None => {
                let mut early = e.early.lock().unwrap_or_else(|p| p.into_inner());
                if early.has(&def.id) {
                    return Err(format!("tool '{}' is already registered", def.id));
                }
                early.main.push((def, cb, owner));
            }
            Some(built) => {
                let engine = built.as_ref().map_err(Clone::clone)?;
                engine
                    .register_main_thread_tool_on(owner, def, move |ctx, args| {
                        cb.call(&ctx.tool_id, &ctx.caller, &args)
                    })
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(0)
    })
}

/// Sends mods' `print` and `api.log.*` lines, and the engine's own warnings (a panicking
/// tool or script; every load problem once the engine is built), to `callback` instead of
/// the engine's default (stderr, from info up: `[info] plugin:<name>: ...`). `callback` runs on
/// engine threads (and the pumping thread), one call at a time; it must be quick and must
/// not call back into this engine. `user_data` is passed through untouched and must stay
/// valid until the engine is freed or the callback replaced. A NULL `callback` goes back to
/// the default. Set it before `tavern_engine_build` to hear the load problems.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_set_log_callback(
    engine: *mut TavernEngine,
    callback: TavernLogCallback,
    user_data: *mut c_void,
) {
    guard((), || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        let cb = callback.map(|f| LogCallback {
            f,
            user_data,
            serial: Arc::new(Mutex::new(())),
        });
        // Under the lock, so a build running now either takes it or is seen built.
        let mut early = e.early.lock().unwrap_or_else(|p| p.into_inner());
        match e.built() {
            Some(engine) => match cb {
                Some(cb) => engine.set_log_callback(move |r| cb.call(r)),
                None => engine.clear_log_callback(),
            },
            None => early.log = cb,
        }
        Ok(())
    })
}

/// Runs the engine's model in this process: every agent and `llm:Chat` node of the engine
/// (unless its own settings name another model) uses the GGUF file at `gguf_path`
/// (borrowed; relative to the home), as `[llm] base_url = "local:PATH"` in `tavern.toml`
/// would. The file is checked now: a missing, unreadable or non-GGUF file fails, and so
/// does a library built without the `llm-local` feature (`cargo build -p tavern-capi
/// --features llm-local`, which compiles llama.cpp). Call it before `tavern_engine_build`
/// (and before the first call, which builds the engine). The model loads on its first
/// use. Returns 0 on success, -1 on failure (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_set_local_model(
    engine: *mut TavernEngine,
    gguf_path: *const c_char,
) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        // SAFETY: the caller's contract (NULL or a NUL-terminated string for the call).
        let path = unsafe { text(gguf_path, "gguf_path") }?.trim();
        if path.is_empty() {
            return Err("gguf_path is empty: give the path of a .gguf model file".into());
        }
        let full = e.home.join(path);
        local_model_usable(&full)?;
        // Under the lock, so a build running now either takes it or is seen built.
        let mut early = e.early.lock().unwrap_or_else(|p| p.into_inner());
        if e.engine.get().is_some() {
            return Err(
                "the engine is built already: call tavern_engine_set_local_model before tavern_engine_build and before the first call".into(),
            );
        }
        early
            .sets
            .push(format!("llm.base_url=local:{}", full.display()));
        Ok(0)
    })
}

/// Whether this library can run the model file at `path` (checked before the engine is
/// built, so the host hears of a bad path at once).
fn local_model_usable(path: &std::path::Path) -> Result<(), String> {
    #[cfg(feature = "llm-local")]
    return tavern::internal::agent::llm::check_model_file(path).map_err(|e| e.to_string());
    #[cfg(not(feature = "llm-local"))]
    Err(format!(
        "local model {}: this libtavern_capi runs no model in-process; build it with `cargo build -p tavern-capi --features llm-local` (llama.cpp is compiled: cmake and a C++ compiler)",
        path.display()
    ))
}

/// Builds the engine now: loads plugins and workflows (with the host tools registered so
/// far). Returns the number of load problems (0 when everything loaded; read them with
/// `tavern_engine_problems`), or -1 when the engine cannot be built (see
/// `tavern_last_error`). Calling it again returns the same count. Without it, the first
/// call, submit or problems query builds the engine.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_build(engine: *mut TavernEngine) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        let n = e.engine()?.problems().len();
        Ok(c_int::try_from(n).unwrap_or(c_int::MAX))
    })
}

/// The load problems (building the engine first if needed) as a JSON array, each
/// `{"file": "...", "line": N, "column": N, "message": "...", "hint": "..."}` (`line`,
/// `column` and `hint` only when known); `[]` when everything loaded. Owned by the caller:
/// free with `tavern_string_free`. NULL on failure (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_problems(engine: *mut TavernEngine) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        let problems = e.engine()?.problems();
        let json = serde_json::to_string(problems).map_err(|e| e.to_string())?;
        Ok(owned_string(json))
    })
}

/// Parses `text` (borrowed) and runs its calls as the host (caller `host`), blocking until
/// they finish; main-thread tools registered on this thread run here meanwhile. Returns what
/// `tavern call` prints: `{"results": [...], "diagnostics": [...]}`, owned by the caller
/// (free with `tavern_string_free`), or NULL on failure (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_call(
    engine: *mut TavernEngine,
    text: *const c_char,
) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        // SAFETY: the caller's contract (NULL or a NUL-terminated string for the call).
        let t = unsafe { self::text(text, "text") }?;
        let report = e
            .engine()?
            .call_blocking(t, CallOptions::new())
            .map_err(|e| e.to_string())?;
        Ok(owned_string(report.to_json().to_string()))
    })
}

/// Queues `text` (borrowed) to run on the engine's threads as the host (caller `host`, no
/// timeout) and returns at once with a ticket (never 0), or 0 on failure (see
/// `tavern_last_error`). Collect the result with `tavern_engine_pump` and
/// `tavern_engine_take`; stop it with `tavern_engine_cancel`.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_submit(
    engine: *mut TavernEngine,
    text: *const c_char,
) -> u64 {
    // SAFETY: the same contract; NULL options are the defaults.
    unsafe { tavern_engine_submit_with(engine, text, std::ptr::null()) }
}

/// The options `tavern_engine_submit_with` reads.
fn call_options(json: Option<&str>) -> Result<CallOptions, String> {
    let mut opts = CallOptions::new();
    let Some(json) = json else { return Ok(opts) };
    let v: Value =
        serde_json::from_str(json).map_err(|e| format!("options_json is not valid JSON: {e}"))?;
    let obj = v.as_object().ok_or("options_json must be a JSON object")?;
    for (k, v) in obj {
        match k.as_str() {
            "timeout_ms" => {
                let ms = v.as_u64().ok_or_else(|| {
                    format!("options_json: timeout_ms must be a whole number of milliseconds, got {v}")
                })?;
                opts = opts.timeout(Duration::from_millis(ms));
            }
            "caller" => {
                let c: Caller = v
                    .as_str()
                    .ok_or_else(|| format!("options_json: caller must be a string, got {v}"))?
                    .parse()
                    .map_err(|e| format!("options_json: {e}"))?;
                opts = opts.caller(c);
            }
            "refuse_on_warnings" => {
                let b = v.as_bool().ok_or_else(|| {
                    format!("options_json: refuse_on_warnings must be true or false, got {v}")
                })?;
                opts = opts.refuse_on_warnings(b);
            }
            other => {
                return Err(format!(
                    "options_json: unknown option '{other}' (known: timeout_ms, caller, refuse_on_warnings)"
                ))
            }
        }
    }
    Ok(opts)
}

/// `tavern_engine_submit` with options: `options_json` (borrowed; NULL for the defaults) is
/// a JSON object with any of `"timeout_ms": N` (the calls end, as `timeout` errors, N ms
/// from now, time in host tools included), `"caller": "model:npc-1"` (who is calling,
/// checked against each tool's caller policy: `host` (the default), `cli`, `model`,
/// `model:<agent>`, `plugin:<name>`, `workflow:<id>`, `remote:<client>`) and
/// `"refuse_on_warnings": true` (refuse every call when parsing warned). An unknown key or a
/// wrong type fails. Returns a ticket (never 0), or 0 on failure (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_submit_with(
    engine: *mut TavernEngine,
    text: *const c_char,
    options_json: *const c_char,
) -> u64 {
    guard(0, || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        // SAFETY: the caller's contract (NULL or a NUL-terminated string for the call).
        let t = unsafe { self::text(text, "text") }?;
        let opts = if options_json.is_null() {
            None
        } else {
            // SAFETY: non-NULL, NUL-terminated for the call (the caller's contract).
            Some(unsafe { self::text(options_json, "options_json") }?)
        };
        let opts = call_options(opts)?;
        let ticket = e
            .engine()?
            .submit_with(t, opts)
            .map_err(|e| e.to_string())?;
        e.tickets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ticket.0);
        Ok(ticket.0)
    })
}

/// Stops a submission: its calls end as `cancelled` (a script at its next check, a parked
/// or pending call before it starts); its result is still collected by a pump and taken
/// with `tavern_engine_take`. Returns 0 when it was still running (now cancelled), 1 when it
/// had already finished (nothing to stop; take its result), -1 for an unknown or already
/// taken ticket or a NULL engine (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_cancel(engine: *mut TavernEngine, ticket: u64) -> c_int {
    guard(-1, || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        let tickets = e.tickets.lock().unwrap_or_else(|p| p.into_inner());
        if !tickets.contains(&ticket) {
            return Err(format!("ticket {ticket} is unknown or was already taken"));
        }
        let engine = e.built().ok_or("the engine is not built")?;
        Ok(if engine.cancel(Ticket(ticket)) { 0 } else { 1 })
    })
}

/// Runs the main-thread tools parked for this thread and collects finished submissions,
/// within `budget_us` microseconds; returns how many submissions it collected. It never
/// waits: it returns as soon as the work it can do now is done, and starts a main-thread
/// call only while the budget lasts (the first one always), so it is late by at most one
/// callback's own run. Returns at once with nothing queued. Script work never runs on the
/// calling thread. Main-thread tools run on the thread that registered them. On a NULL
/// engine returns 0 and sets `tavern_last_error`. To learn which submissions finished, use
/// `tavern_engine_pump_finished`.
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_pump(engine: *mut TavernEngine, budget_us: u32) -> u32 {
    guard(0, || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        let Some(Ok(engine)) = e.engine.get() else {
            return Ok(0);
        };
        let n = engine
            .pump(Duration::from_micros(u64::from(budget_us)))
            .len();
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    })
}

/// `tavern_engine_pump` that says which submissions finished: writes up to `capacity`
/// tickets into `finished` (borrowed, an array of at least `capacity` entries; NULL when
/// `capacity` is 0) and returns how many it wrote; take each with `tavern_engine_take`.
/// Tickets that did not fit are kept and written first by the next call, so none is
/// lost. Returns -1 on a NULL engine or a NULL `finished` with a non-zero `capacity` (see
/// `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_pump_finished(
    engine: *mut TavernEngine,
    budget_us: u32,
    finished: *mut u64,
    capacity: u32,
) -> i32 {
    guard(-1, || {
        // SAFETY: the caller's contract (a live handle or NULL).
        let e = unsafe { handle(engine) }?;
        if finished.is_null() && capacity > 0 {
            return Err("finished is NULL".into());
        }
        let mut queue = e.unreported.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Ok(engine)) = e.engine.get() {
            let done = engine.pump(Duration::from_micros(u64::from(budget_us)));
            queue.extend(done.iter().map(|t| t.0));
        }
        let n = queue.len().min(capacity as usize).min(i32::MAX as usize);
        for (i, t) in queue.drain(..n).enumerate() {
            // SAFETY: `finished` holds at least `capacity` entries (caller's contract) and
            // `i < n <= capacity`.
            unsafe { finished.add(i).write(t) };
        }
        Ok(n as i32)
    })
}

/// The result of a submission, as `tavern_engine_call` returns it (owned by the caller:
/// free with `tavern_string_free`), once a pump collected it; then the ticket is forgotten.
/// NULL while pending (and `tavern_last_error` is NULL), or NULL for an unknown or already
/// taken ticket (and `tavern_last_error` says so).
#[no_mangle]
pub unsafe extern "C" fn tavern_engine_take(engine: *mut TavernEngine, ticket: u64) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract (a live handle or NULL).
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

/// Inside a host tool's callback (main-thread or not): who called the tool — `host`,
/// `model`, `model:<agent>`, `plugin:<name>`, `workflow:<id>`, `remote:<client>`, `cli` —
/// as a string owned by the library and valid until the callback returns (do not free
/// it). NULL outside a callback.
#[no_mangle]
pub extern "C" fn tavern_current_caller() -> *const c_char {
    CURRENT_CALLER.with(|v| v.borrow().last().map_or(std::ptr::null(), |c| c.as_ptr()))
}

/// A copy of `s` (borrowed) allocated with the C runtime's malloc: what a host tool
/// callback returns (the engine frees it with free()), for hosts that cannot call that
/// malloc themselves (C# through P/Invoke, other FFI). NULL when `s` is NULL or memory runs
/// out (see `tavern_last_error`).
#[no_mangle]
pub unsafe extern "C" fn tavern_malloc_string(s: *const c_char) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        if s.is_null() {
            return Err("s is NULL".into());
        }
        // SAFETY: non-NULL and NUL-terminated by the caller's contract.
        let bytes = unsafe { CStr::from_ptr(s) }.to_bytes_with_nul();
        // SAFETY: malloc of a positive size; the result is checked for NULL below.
        let p = unsafe { libc::malloc(bytes.len()) }.cast::<c_char>();
        if p.is_null() {
            return Err("out of memory".into());
        }
        // SAFETY: `p` holds `bytes.len()` bytes and does not overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), p, bytes.len()) };
        Ok(p)
    })
}

/// Frees a string returned by `tavern_engine_call`, `tavern_engine_take` or
/// `tavern_engine_problems` (NULL is ignored). Do not use free() on these strings.
#[no_mangle]
pub unsafe extern "C" fn tavern_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: made by CString::into_raw in this library and not freed before.
        drop(unsafe { CString::from_raw(s) });
    }
}
