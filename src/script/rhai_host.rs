//! The Rhai host: one engine and one merged AST per plugin (or a fresh one per snippet).
//!
//! Every Rhai limit is set from [`Limits`]; `eval` is disabled; `import` only reaches `.rhai`
//! files inside the plugin directory (snippets cannot import at all); a progress callback
//! stops a run at its wall-clock deadline; `print`/`debug` go to the log or the snippet's
//! output buffer. Rhai values are converted to JSON with a depth and size limit.

use std::cell::Cell;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rhai::module_resolvers::{DummyModuleResolver, FileModuleResolver};
use rhai::{
    CallFnOptions, Dynamic, Engine, EvalAltResult, FnPtr, ImmutableString, Module, ModuleResolver,
    NativeCallContext, Position, Scope, Shared, AST,
};
use serde_json::{Map, Value};

use super::api::{namespaces, ApiOp, API};
use super::big_stack::on_big_stack;
use super::error::bounded;
use super::host::HostCore;
use super::{Limits, ScriptError};

thread_local! {
    /// Deadline of the Rhai call running on this thread (nested calls save and restore it).
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// A tool registered by a Rhai script at load time.
#[derive(Debug, Clone)]
pub(crate) struct RhaiSpec {
    pub id: String,
    pub display_name: Option<String>,
    pub description: String,
    pub parameters: Option<Value>,
    /// Name of the script function that handles it.
    pub function: String,
}

struct RhaiShared {
    loading: std::sync::atomic::AtomicBool,
    registered: Mutex<Vec<RhaiSpec>>,
    /// Hook and override functions (closures or `Fn("name")`), by key (`hook#<n>`).
    fn_ptrs: Mutex<std::collections::HashMap<String, FnPtr>>,
}

/// One plugin's Rhai engine and scripts.
pub(crate) struct RhaiHost {
    engine: Engine,
    ast: AST,
    shared: Arc<RhaiShared>,
    limits: Limits,
    /// The plugin's settings, converted once (`ctx.config`).
    config: Dynamic,
    /// For nested tool errors thrown as maps (see `nested_error.rs`).
    core: Arc<HostCore>,
    /// The file each script function was defined in, so a runtime error names it.
    fn_files: std::collections::HashMap<String, String>,
    /// Each script function's line and the lines of the loops in its body (see
    /// [`fn_places`]): where the instruction limit stopped it, as near as can be said.
    fn_lines: std::collections::HashMap<String, (u32, Vec<u32>)>,
}

/// `import` resolver confined to one directory.
struct ConfinedResolver {
    dir: PathBuf,
    inner: FileModuleResolver,
}

impl ModuleResolver for ConfinedResolver {
    fn resolve(
        &self,
        engine: &Engine,
        _source: Option<&str>,
        path: &str,
        pos: Position,
    ) -> Result<Shared<Module>, Box<EvalAltResult>> {
        let refuse = |why: &str| -> Box<EvalAltResult> {
            // A runtime error (not ModuleNotFound, whose text Rhai rewrites) so the reason
            // reaches the script author.
            EvalAltResult::ErrorRuntime(
                Dynamic::from(format!(
                    "import '{path}' refused: {why}; imports stay inside the plugin directory"
                )),
                pos,
            )
            .into()
        };
        if path.contains('\0') {
            return Err(refuse("NUL byte"));
        }
        let rel = Path::new(path);
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(refuse("absolute path or '..'"));
        }
        let file = self.dir.join(format!("{path}.rhai"));
        if let Ok(real) = file.canonicalize() {
            if !real.starts_with(&self.dir) {
                return Err(refuse("a symlink leads out of the plugin directory"));
            }
        }
        self.inner.resolve(engine, None, path, pos)
    }
}

fn rhai_err(msg: impl Into<String>) -> ScriptError {
    ScriptError::runtime(msg)
}

/// Throws an error an api function met as the `#{code, message}` map the script catches
/// ([`ScriptError::to_value`], remembered so a script that lets it through fails with the
/// same error; see `nested_error.rs`). Every error an api function raises goes through here.
fn thrown(core: &HostCore, cx: &NativeCallContext, e: ScriptError) -> Box<EvalAltResult> {
    let v = core.error_value(e);
    let v = json_to_dynamic(&v).unwrap_or_else(|_| Dynamic::from(v.to_string()));
    EvalAltResult::ErrorRuntime(v, cx.call_position()).into()
}

/// Dynamic → JSON with depth and size limits.
pub(crate) fn dynamic_to_json(d: &Dynamic, limits: &Limits) -> Result<Value, ScriptError> {
    let mut bytes = 0usize;
    to_json_at(d, 0, limits, &mut bytes, &mut String::from("$"))
}

fn to_json_at(
    d: &Dynamic,
    depth: usize,
    limits: &Limits,
    bytes: &mut usize,
    path: &mut String,
) -> Result<Value, ScriptError> {
    *bytes += 8;
    if *bytes > limits.max_value_bytes {
        return Err(ScriptError::ValueLimit {
            what: "value_bytes".into(),
            message: format!(
                "value larger than {} bytes at {path}",
                limits.max_value_bytes
            ),
        });
    }
    if depth > limits.max_value_depth {
        return Err(ScriptError::ValueLimit {
            what: "value_depth".into(),
            message: format!(
                "value nested deeper than {} levels at {path}",
                limits.max_value_depth
            ),
        });
    }
    if d.is_unit() {
        return Ok(Value::Null);
    }
    if let Ok(b) = d.as_bool() {
        return Ok(Value::Bool(b));
    }
    if let Ok(i) = d.as_int() {
        return Ok(Value::Number(i.into()));
    }
    if let Ok(f) = d.as_float() {
        return serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| ScriptError::Conversion {
                path: path.clone(),
                message: format!("the number {f} has no JSON form"),
            });
    }
    if let Ok(c) = d.as_char() {
        return Ok(Value::String(c.to_string()));
    }
    if d.is_string() {
        let s = d.clone().into_string().unwrap_or_default();
        *bytes += s.len();
        if *bytes > limits.max_value_bytes {
            return Err(ScriptError::ValueLimit {
                what: "value_bytes".into(),
                message: format!(
                    "value larger than {} bytes at {path}",
                    limits.max_value_bytes
                ),
            });
        }
        return Ok(Value::String(s));
    }
    if d.is_array() {
        let arr = d
            .as_array_ref()
            .map_err(|e| ScriptError::Internal(e.into()))?;
        let mut out = Vec::with_capacity(arr.len().min(4096));
        for (i, x) in arr.iter().enumerate() {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let v = to_json_at(x, depth + 1, limits, bytes, path);
            path.truncate(len);
            out.push(v?);
        }
        return Ok(Value::Array(out));
    }
    if d.is_map() {
        let map = d
            .as_map_ref()
            .map_err(|e| ScriptError::Internal(e.into()))?;
        let mut out = Map::new();
        for (k, x) in map.iter() {
            let len = path.len();
            path.push('.');
            path.push_str(k);
            *bytes += k.len();
            let v = to_json_at(x, depth + 1, limits, bytes, path);
            path.truncate(len);
            out.insert(k.to_string(), v?);
        }
        return Ok(Value::Object(out));
    }
    if d.is_blob() {
        let b = d
            .as_blob_ref()
            .map_err(|e| ScriptError::Internal(e.into()))?;
        return Ok(Value::Array(b.iter().map(|x| Value::from(*x)).collect()));
    }
    Err(ScriptError::Conversion {
        path: path.clone(),
        message: format!("a {} cannot be converted to JSON", d.type_name()),
    })
}

fn json_to_dynamic(v: &Value) -> Result<Dynamic, ScriptError> {
    rhai::serde::to_dynamic(v).map_err(|e| ScriptError::Internal(format!("JSON to Rhai: {e}")))
}

impl RhaiHost {
    /// An engine for one plugin (`dir`: its directory; `None` for snippets: no imports).
    pub fn new(
        core: Arc<HostCore>,
        limits: Limits,
        import_dir: Option<&Path>,
    ) -> Result<Self, ScriptError> {
        let mut engine = Engine::new();
        engine
            .set_max_operations(limits.instructions.max(1))
            .set_max_call_levels(limits.max_call_depth.min(64))
            .set_max_expr_depths(64, 32)
            .set_max_string_size(limits.max_string_bytes.max(1))
            .set_max_array_size(limits.max_collection_items.max(1))
            .set_max_map_size(limits.max_collection_items.max(1))
            .set_max_modules(limits.max_modules)
            .set_max_variables(10_000)
            .set_max_functions(10_000);
        engine.disable_symbol("eval");
        match import_dir.and_then(|d| d.canonicalize().ok()) {
            Some(dir) if limits.max_modules > 0 => {
                let mut inner = FileModuleResolver::new_with_path(&dir);
                inner.enable_cache(true);
                engine.set_module_resolver(ConfinedResolver { dir, inner });
            }
            _ => {
                engine.set_module_resolver(DummyModuleResolver::new());
            }
        }
        engine.on_progress(|_ops| {
            let late = DEADLINE.with(|d| d.get().is_some_and(|t| Instant::now() > t));
            if late {
                return Some(Dynamic::from("timeout"));
            }
            super::host::current_cancelled().then(|| Dynamic::from("cancelled"))
        });
        let c = core.clone();
        engine.on_print(move |s| c.print(s));
        let c = core.clone();
        engine.on_debug(move |s, _src, _pos| c.log(ApiOp::LogDebug, s));
        let shared = Arc::new(RhaiShared {
            loading: std::sync::atomic::AtomicBool::new(false),
            registered: Mutex::new(Vec::new()),
            fn_ptrs: Mutex::new(std::collections::HashMap::new()),
        });
        engine.register_static_module("api", Self::api_module(&core, &shared, &limits).into());
        let config = json_to_dynamic(&Value::Object(core.env.config.clone()))?;
        Ok(RhaiHost {
            engine,
            ast: AST::empty(),
            shared,
            limits,
            config,
            core,
            fn_files: Default::default(),
            fn_lines: Default::default(),
        })
    }

    fn api_module(core: &Arc<HostCore>, shared: &Arc<RhaiShared>, limits: &Limits) -> Module {
        let mut root = Module::new();
        for ns in namespaces() {
            let mut m = Module::new();
            for f in API.iter().filter(|f| f.namespace == ns) {
                let op = f.op;
                if op == ApiOp::HooksOn {
                    let (c, sh) = (core.clone(), shared.clone());
                    m.set_native_fn(
                        "on",
                        move |cx: NativeCallContext, point: Dynamic, f: Dynamic| {
                            hooks_on(&c, &sh, point, f, Dynamic::UNIT)
                                .map_err(|e| thrown(&c, &cx, e))
                        },
                    );
                    let (c, sh) = (core.clone(), shared.clone());
                    m.set_native_fn(
                        "on",
                        move |cx: NativeCallContext, point: Dynamic, f: Dynamic, opts: Dynamic| {
                            hooks_on(&c, &sh, point, f, opts).map_err(|e| thrown(&c, &cx, e))
                        },
                    );
                    continue;
                }
                if op == ApiOp::ServicesOverride {
                    let (c, sh) = (core.clone(), shared.clone());
                    m.set_native_fn(
                        "override",
                        move |cx: NativeCallContext, id: Dynamic, f: Dynamic| {
                            services_override(&c, &sh, id, f).map_err(|e| thrown(&c, &cx, e))
                        },
                    );
                    let (c, l) = (core.clone(), *limits);
                    m.set_native_fn("next", move |cx: NativeCallContext, ctx: Dynamic, args: Dynamic| {
                        let run = || {
                            let token = ctx
                                .try_cast::<rhai::Map>()
                                .and_then(|m| m.get("next").and_then(|t| t.as_int().ok()))
                                .ok_or_else(|| {
                                    rhai_err("api::services::next(ctx, args): ctx must be the ctx an override received")
                                })?;
                            let a = dynamic_to_json(&args, &l)?;
                            let out = c.call_next(token as u64, a)?;
                            json_to_dynamic(&out)
                        };
                        run().map_err(|e| thrown(&c, &cx, e))
                    });
                    continue;
                }
                if op == ApiOp::ToolsRegister {
                    let (c, sh) = (core.clone(), shared.clone());
                    let limits = *limits;
                    m.set_native_fn("register", move |cx: NativeCallContext, spec: Dynamic| {
                        register_tool(&sh, &c.env.plugin, &limits, spec)
                            .map_err(|e| thrown(&c, &cx, e))
                    });
                    continue;
                }
                let min = f.params.iter().filter(|p| !p.optional).count();
                for arity in min..=f.params.len() {
                    let c = core.clone();
                    let l = *limits;
                    let run = move |cx: NativeCallContext,
                                    args: Vec<Dynamic>|
                          -> Result<Dynamic, Box<EvalAltResult>> {
                        let call = || {
                            let mut json = Vec::with_capacity(args.len());
                            for a in &args {
                                json.push(dynamic_to_json(a, &l)?);
                            }
                            json_to_dynamic(&c.invoke(op, &json)?)
                        };
                        call().map_err(|e| thrown(&c, &cx, e))
                    };
                    match arity {
                        0 => {
                            m.set_native_fn(f.rhai_name(), move |cx: NativeCallContext| {
                                run(cx, vec![])
                            });
                        }
                        1 => {
                            m.set_native_fn(
                                f.rhai_name(),
                                move |cx: NativeCallContext, a: Dynamic| run(cx, vec![a]),
                            );
                        }
                        2 => {
                            m.set_native_fn(
                                f.rhai_name(),
                                move |cx: NativeCallContext, a: Dynamic, b: Dynamic| {
                                    run(cx, vec![a, b])
                                },
                            );
                        }
                        _ => {
                            m.set_native_fn(
                                f.rhai_name(),
                                move |cx: NativeCallContext, a: Dynamic, b: Dynamic, c: Dynamic| {
                                    run(cx, vec![a, b, c])
                                },
                            );
                        }
                    }
                }
            }
            root.set_sub_module(ns, m);
        }
        root
    }

    /// Compiles and runs one script file's top level (tools may be registered here).
    pub fn load_file(&mut self, name: &str, text: &str) -> Result<(), ScriptError> {
        on_big_stack(|| self.load_file_inner(name, text))
    }

    fn load_file_inner(&mut self, name: &str, text: &str) -> Result<(), ScriptError> {
        let mut ast = self.engine.compile(text).map_err(|e| {
            let mut message = e.0.to_string();
            if let Some(h) = lua_ism_hint(&message) {
                message.push_str(&format!(" (hint: {h})"));
            }
            ScriptError::Syntax {
                file: name.to_string(),
                line: e.1.line().unwrap_or(0) as u32,
                column: e.1.position().unwrap_or(0) as u32,
                message,
            }
        })?;
        ast.set_source(name);
        self.shared
            .loading
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let r = self.with_deadline(|| self.engine.run_ast_with_scope(&mut Scope::new(), &ast));
        self.shared
            .loading
            .store(false, std::sync::atomic::Ordering::Relaxed);
        r.map_err(|e| self.map_error(*e, Some(name)))?;
        for f in ast.iter_functions() {
            self.fn_files
                .entry(f.name.to_string())
                .or_insert_with(|| name.to_string());
        }
        for (f, line, loops) in fn_places(text) {
            self.fn_lines.entry(f).or_insert((line, loops));
        }
        self.ast = self.ast.merge(&ast);
        Ok(())
    }

    fn with_deadline<T>(&self, f: impl FnOnce() -> T) -> T {
        let own = Instant::now() + Duration::from_millis(self.limits.wall_ms);
        // The active call's deadline folds in the per-call and the enclosing deadlines.
        let deadline = super::host::current_deadline().map_or(own, |d| d.min(own));
        let prev = DEADLINE.with(|d| d.replace(Some(deadline)));
        struct Restore(Option<Instant>);
        impl Drop for Restore {
            fn drop(&mut self) {
                DEADLINE.with(|d| d.set(self.0));
            }
        }
        let _restore = Restore(prev);
        f()
    }

    /// Evaluates a snippet: the value of its last expression.
    pub fn eval_snippet(&self, text: &str, inputs: &Value) -> Result<Value, ScriptError> {
        on_big_stack(|| self.eval_snippet_inner(text, inputs))
    }

    fn eval_snippet_inner(&self, text: &str, inputs: &Value) -> Result<Value, ScriptError> {
        let ast = self.engine.compile(text).map_err(|e| ScriptError::Syntax {
            file: "<snippet>".into(),
            line: e.1.line().unwrap_or(0) as u32,
            column: e.1.position().unwrap_or(0) as u32,
            message: e.0.to_string(),
        })?;
        let mut scope = Scope::new();
        scope.push("inputs", json_to_dynamic(inputs)?);
        let r = self.with_deadline(|| self.engine.eval_ast_with_scope::<Dynamic>(&mut scope, &ast));
        let v = r.map_err(|e| self.map_error(*e, None))?;
        dynamic_to_json(&v, &self.limits)
    }

    /// Whether a script function of this name (or a registered tool id) exists.
    pub fn has_function(&self, name: &str) -> bool {
        if name.starts_with("hook#") || name.starts_with("override#") {
            return self
                .shared
                .fn_ptrs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(name);
        }
        let name = self.function_for(name);
        self.ast.iter_functions().any(|f| f.name == name)
    }

    /// The script functions' names.
    pub fn function_names(&self) -> Vec<String> {
        self.ast
            .iter_functions()
            .map(|f| f.name.to_string())
            .collect()
    }

    fn function_for(&self, name: &str) -> String {
        let reg = self
            .shared
            .registered
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        reg.iter()
            .find(|s| s.id == name)
            .map(|s| s.function.clone())
            .unwrap_or_else(|| name.to_string())
    }

    /// Calls a script function (or a registered tool's handler) with `(args, ctx)`.
    pub fn call(
        &self,
        function: &str,
        args: &Value,
        tool_id: &str,
        caller: &str,
    ) -> Result<Value, ScriptError> {
        on_big_stack(|| self.call_inner(function, args, tool_id, caller))
    }

    fn call_inner(
        &self,
        function: &str,
        args: &Value,
        tool_id: &str,
        caller: &str,
    ) -> Result<Value, ScriptError> {
        if function.starts_with("hook#") || function.starts_with("override#") {
            return self.call_fn_ptr(function, args, tool_id, caller);
        }
        let fname = self.function_for(function);
        let arity = self
            .ast
            .iter_functions()
            .find(|f| f.name == fname)
            .map(|f| f.params.len());
        let Some(arity) = arity else {
            return Err(ScriptError::UnknownFunction {
                function: function.to_string(),
            });
        };
        let a = json_to_dynamic(args)?;
        let mut ctx = rhai::Map::new();
        ctx.insert("tool_id".into(), tool_id.into());
        ctx.insert("caller".into(), caller.into());
        ctx.insert("config".into(), self.config.clone());
        let opts = CallFnOptions::new().eval_ast(false).rewind_scope(true);
        let mut scope = Scope::new();
        let r = self.with_deadline(|| match arity {
            0 => {
                self.engine
                    .call_fn_with_options::<Dynamic>(opts, &mut scope, &self.ast, &fname, ())
            }
            1 => self.engine.call_fn_with_options::<Dynamic>(
                opts,
                &mut scope,
                &self.ast,
                &fname,
                (a,),
            ),
            _ => self.engine.call_fn_with_options::<Dynamic>(
                opts,
                &mut scope,
                &self.ast,
                &fname,
                (a, Dynamic::from_map(ctx)),
            ),
        });
        let file = self.fn_files.get(&fname).map(String::as_str);
        let v = r.map_err(|e| self.limit_place(self.map_error(*e, file), &fname, file))?;
        dynamic_to_json(&v, &self.limits)
    }

    fn call_fn_ptr(
        &self,
        key: &str,
        args: &Value,
        tool_id: &str,
        caller: &str,
    ) -> Result<Value, ScriptError> {
        let fp = self
            .shared
            .fn_ptrs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
            .ok_or_else(|| ScriptError::UnknownFunction {
                function: key.to_string(),
            })?;
        let mut ctx = rhai::Map::new();
        ctx.insert("tool_id".into(), tool_id.into());
        ctx.insert("caller".into(), caller.into());
        ctx.insert("config".into(), self.config.clone());
        // Overrides get `{args, token}`: the args go to the function, the token into ctx.
        let payload = if key.starts_with("override#") {
            if let Some(t) = args.get("token").and_then(Value::as_i64) {
                ctx.insert("next".into(), Dynamic::from_int(t));
            }
            args.get("args").cloned().unwrap_or(Value::Null)
        } else {
            args.clone()
        };
        let a = json_to_dynamic(&payload)?;
        let params = self
            .ast
            .iter_functions()
            .find(|f| f.name == fp.fn_name())
            .map(|f| f.params.len().saturating_sub(fp.curry().len()))
            .unwrap_or(1);
        let r = self.with_deadline(|| {
            if params >= 2 {
                fp.call::<Dynamic>(&self.engine, &self.ast, (a, Dynamic::from_map(ctx)))
            } else {
                fp.call::<Dynamic>(&self.engine, &self.ast, (a,))
            }
        });
        let v = r.map_err(|e| self.map_error(*e, None))?;
        dynamic_to_json(&v, &self.limits)
    }

    /// The hook function stored under `key` (`hook#<n>`) and how many parameters it takes
    /// beyond its curried ones, resolved once at registration.
    pub fn hook_function(&self, key: &str) -> Option<(FnPtr, usize)> {
        let fp = self
            .shared
            .fn_ptrs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()?;
        let params = self
            .ast
            .iter_functions()
            .find(|f| f.name == fp.fn_name())
            .map(|f| f.params.len().saturating_sub(fp.curry().len()))
            .unwrap_or(1);
        Some((fp, params))
    }

    /// Calls hook function `fp` (see [`RhaiHost::hook_function`]) with `(ev, ctx)` under the
    /// deadline; its value is read by [`HookReturn::from_value`].
    pub fn call_hook(
        &self,
        fp: &FnPtr,
        params: usize,
        event: &Value,
        tool_id: &str,
        caller: &str,
    ) -> Result<crate::hooks::HookReturn, ScriptError> {
        on_big_stack(|| {
            let a = json_to_dynamic(event)?;
            let r = self.with_deadline(|| {
                if params >= 2 {
                    let mut ctx = rhai::Map::new();
                    ctx.insert("tool_id".into(), tool_id.into());
                    ctx.insert("caller".into(), caller.into());
                    ctx.insert("config".into(), self.config.clone());
                    fp.call::<Dynamic>(&self.engine, &self.ast, (a, Dynamic::from_map(ctx)))
                } else {
                    fp.call::<Dynamic>(&self.engine, &self.ast, (a,))
                }
            });
            let v = r.map_err(|e| self.map_error(*e, None))?;
            if v.is_unit() {
                return Ok(crate::hooks::HookReturn::Continue);
            }
            Ok(crate::hooks::HookReturn::from_value(dynamic_to_json(
                &v,
                &self.limits,
            )?))
        })
    }

    /// Tools registered by the scripts while loading.
    pub fn registered(&self) -> Vec<RhaiSpec> {
        self.shared
            .registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The instruction limit (and the time limit) with a line: Rhai gives its error no position once it leaves
    /// a script function (`func/script.rs` sets a system error's position to the call's,
    /// which is none for a call from the host), so the place is the loop of the function
    /// that was called when it has exactly one (`main.rhai:13, the loop in fd`), else the
    /// function's own line (`main.rhai:11, in fd`).
    fn limit_place(&self, e: ScriptError, fname: &str, file: Option<&str>) -> ScriptError {
        match (e, file, self.fn_lines.get(fname)) {
            (ScriptError::InstructionLimit { limit, at }, Some(f), Some((line, loops)))
                if at.as_deref().is_none_or(|a| a == f) =>
            {
                ScriptError::InstructionLimit {
                    limit,
                    at: Some(fn_place(f, fname, *line, loops)),
                }
            }
            (ScriptError::Timeout { after_ms, at }, Some(f), Some((line, loops)))
                if at.as_deref().is_none_or(|a| a == f) =>
            {
                ScriptError::Timeout {
                    after_ms,
                    at: Some(fn_place(f, fname, *line, loops)),
                }
            }
            (e, ..) => e,
        }
    }

    fn map_error(&self, e: EvalAltResult, file: Option<&str>) -> ScriptError {
        match map_rhai_error(e, file, &self.limits) {
            // A thrown map keeps its content; a nested tool error's map its own code.
            ScriptError::Runtime {
                message,
                file,
                line,
            } if message.starts_with(THROWN_MAP) => {
                let json: Value =
                    serde_json::from_str(&message[THROWN_MAP.len()..]).unwrap_or(Value::Null);
                if let (Some(Value::String(c)), Some(Value::String(m))) =
                    (json.get("code"), json.get("message"))
                {
                    if let Some(e) = self.core.raised_error(c, m) {
                        // Where the script called the function that threw it.
                        return e.placed(file, line);
                    }
                    if super::error::is_raised_code(c) {
                        return ScriptError::Raised {
                            code: c.clone(),
                            message: bounded(m, 4096),
                            file,
                            line,
                        };
                    }
                }
                ScriptError::Runtime {
                    message: bounded(&super::nested_error::error_text(&json), 4096),
                    file,
                    line,
                }
            }
            other => other,
        }
    }
}

/// Prefix of the runtime message of a thrown map, before its JSON.
const THROWN_MAP: &str = "\u{0}thrown-map:";

fn map_rhai_error(e: EvalAltResult, file: Option<&str>, limits: &Limits) -> ScriptError {
    let line = e.position().line().map(|l| l as u32);
    match e {
        EvalAltResult::ErrorInFunctionCall(_, src, inner, _)
        | EvalAltResult::ErrorInModule(src, inner, _) => {
            let f = if src.is_empty() {
                file.map(str::to_string)
            } else {
                Some(src)
            };
            map_rhai_error(*inner, f.as_deref(), limits)
        }
        EvalAltResult::ErrorTooManyOperations(pos) => ScriptError::InstructionLimit {
            limit: limits.instructions,
            at: match (file, pos.line()) {
                (Some(f), Some(l)) => Some(format!("{f}:{l}")),
                (None, Some(l)) => Some(format!("line {l}")),
                // Rhai's progress check has no position: the function's file at least.
                (Some(f), None) => Some(f.to_string()),
                _ => None,
            },
        },
        EvalAltResult::ErrorTerminated(token, _) if token.to_string() == "cancelled" => {
            ScriptError::Cancelled
        }
        EvalAltResult::ErrorTerminated(..) => ScriptError::Timeout {
            after_ms: limits.wall_ms,
            // Like the instruction limit: no position; `limit_place` adds the function's.
            at: file.map(str::to_string),
        },
        EvalAltResult::ErrorStackOverflow(_) => ScriptError::ValueLimit {
            what: "call_depth".into(),
            message: format!(
                "function calls nested deeper than {} levels",
                limits.max_call_depth.min(64)
            ),
        },
        EvalAltResult::ErrorDataTooLarge(what, _) => ScriptError::ValueLimit {
            what: match what.as_str() {
                "Length of string" => "string_size".into(),
                "Size of array" | "Size of object map" => "collection_size".into(),
                _ => "data_size".into(),
            },
            message: format!("{what} exceeds the limit"),
        },
        EvalAltResult::ErrorTooManyModules(_) => ScriptError::ValueLimit {
            what: "modules".into(),
            message: format!("more than {} modules imported", limits.max_modules),
        },
        EvalAltResult::ErrorParsing(p, pos) => ScriptError::Syntax {
            file: file.unwrap_or("<script>").to_string(),
            line: pos.line().unwrap_or(0) as u32,
            column: pos.position().unwrap_or(0) as u32,
            message: p.to_string(),
        },
        EvalAltResult::ErrorRuntime(v, pos) => {
            let msg = if v.is_string() {
                v.clone().into_string().unwrap_or_default()
            } else if v.is_map() {
                // Marked for `RhaiHost::map_error`, which keeps the map's content.
                let json = rhai::serde::from_dynamic::<Value>(&v).unwrap_or(Value::Null);
                format!("{THROWN_MAP}{json}")
            } else {
                v.to_string()
            };
            ScriptError::Runtime {
                message: bounded(&msg, 4096),
                file: file.map(str::to_string),
                line: pos.line().map(|l| l as u32),
            }
        }
        EvalAltResult::ErrorFunctionNotFound(name, _) if name.starts_with("eval") => {
            ScriptError::Runtime {
                message: "eval is disabled in tavern scripts".into(),
                file: file.map(str::to_string),
                line,
            }
        }
        other => {
            // The place goes before the message (`main.rhai:7: …`), not after it.
            let mut message = other.to_string();
            if let Some(i) = message.rfind(" (line ") {
                if message.ends_with(')') {
                    message.truncate(i);
                }
            }
            if let Some(h) = lua_ism_hint(&message) {
                message.push_str(&format!(" (hint: {h})"));
            }
            ScriptError::Runtime {
                message: bounded(&message, 4096),
                file: file.map(str::to_string),
                line,
            }
        }
    }
}

/// What a Lua habit that Rhai does not share looks like in its error, and the Rhai way.
fn lua_ism_hint(message: &str) -> Option<&'static str> {
    let m = message.trim_start_matches("Function not found: ");
    if m.starts_with("log (map") {
        Some(
            "there is no ctx.log in Rhai: log with api::log::info(message) (also warn, error, dbg)",
        )
    } else if m.starts_with(".. (") {
        Some("Rhai joins strings with +, not Lua's ..")
    } else if message.contains("'~'") || message.contains("~=") {
        Some("Rhai writes 'not equal' as !=, not Lua's ~=")
    } else {
        None
    }
}

/// A handler argument: a closure, `Fn("name")` or a function name.
fn fn_ptr(api: &str, f: Dynamic) -> Result<FnPtr, ScriptError> {
    if f.is_fnptr() {
        return f
            .try_cast::<FnPtr>()
            .ok_or_else(|| rhai_err(format!("{api}: the handler is not a function")));
    }
    match f.into_immutable_string() {
        Ok(name) => FnPtr::new(name.as_str()).map_err(|e| rhai_err(format!("{api}: {e}"))),
        Err(_) => Err(rhai_err(format!(
            "{api}: the handler must be a closure |ev| … or Fn(\"name\")"
        ))),
    }
}

fn string_arg(api: &str, what: &str, v: Dynamic) -> Result<String, ScriptError> {
    v.into_immutable_string()
        .map(|s| s.to_string())
        .map_err(|t| rhai_err(format!("{api}: {what} must be a string, got {t}")))
}

/// `api::hooks::on(point, f[, options])`.
fn hooks_on(
    core: &Arc<HostCore>,
    sh: &RhaiShared,
    point: Dynamic,
    f: Dynamic,
    opts: Dynamic,
) -> Result<rhai::INT, ScriptError> {
    const API_NAME: &str = "api::hooks::on";
    let env = &core.env;
    let point = string_arg(API_NAME, "the point", point)?;
    let point = super::hooks_api::ScriptHooks::check_point(env, API_NAME, &point)?;
    let f = fn_ptr(API_NAME, f)?;
    let mut o = crate::hooks::HookOptions::default();
    if !opts.is_unit() {
        let Some(m) = opts.try_cast::<rhai::Map>() else {
            return Err(rhai_err(
                "api::hooks::on: options must be a map #{ priority: n, once: true, id: \"name\" }",
            ));
        };
        if let Some(k) = m
            .keys()
            .find(|k| !matches!(k.as_str(), "priority" | "once" | "id"))
        {
            return Err(rhai_err(format!(
                "api::hooks::on: unknown option '{k}' (options: priority, once, id)"
            )));
        }
        o.priority = m.get("priority").and_then(|v| v.as_int().ok()).unwrap_or(0);
        o.once = m
            .get("once")
            .and_then(|v| v.as_bool().ok())
            .unwrap_or(false);
        o.id = m.get("id").and_then(|v| v.clone().into_string().ok());
    }
    let n = core.hooks.next_key();
    let key = format!("hook#{n}");
    sh.fn_ptrs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.clone(), f);
    let h = core.hooks.add_hook(env, n, key, point, o)?;
    Ok(h as rhai::INT)
}

/// `api::services::override(id, f)`.
fn services_override(
    core: &Arc<HostCore>,
    sh: &RhaiShared,
    id: Dynamic,
    f: Dynamic,
) -> Result<(), ScriptError> {
    const API_NAME: &str = "api::services::override";
    let env = &core.env;
    let id = string_arg(API_NAME, "the id", id)?;
    let tool = super::hooks_api::ScriptHooks::check_override(env, &id)?;
    let f = fn_ptr(API_NAME, f)?;
    let n = core.hooks.next_key();
    let key = format!("override#{n}");
    sh.fn_ptrs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.clone(), f);
    core.hooks.add_override(env, n, key, tool)
}

fn register_tool(
    sh: &RhaiShared,
    plugin: &str,
    limits: &Limits,
    spec: Dynamic,
) -> Result<(), ScriptError> {
    let Some(spec) = spec.try_cast::<rhai::Map>() else {
        return Err(rhai_err(
            "api::tools::register expects a map #{ id: …, description: …, parameters: …, handler: \"fn_name\" }",
        ));
    };
    if !sh.loading.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(rhai_err(
            "api::tools::register can only be called while the plugin loads (at the top level of a script)",
        ));
    }
    let get_str = |k: &str| -> Option<String> {
        spec.get(k)
            .and_then(|v| v.clone().into_immutable_string().ok())
            .map(|s: ImmutableString| s.to_string())
    };
    let id = get_str("id")
        .ok_or_else(|| rhai_err("api::tools::register: 'id' (a string) is required"))?;
    let id = super::host::register_id(plugin, &id)
        .map_err(|e| rhai_err(format!("api::tools::register: {e}")))?;
    if let Some(d) = get_str("description") {
        super::host::check_description(&id, &d)
            .map_err(|e| rhai_err(format!("api::tools::register: {e}")))?;
    }
    let function = match spec.get("handler") {
        Some(h) if h.is_fnptr() => h
            .read_lock::<FnPtr>()
            .map(|f| f.fn_name().to_string())
            .unwrap_or_default(),
        Some(h) if h.is_string() => h.clone().into_string().unwrap_or_default(),
        _ => {
            return Err(rhai_err(format!(
                "api::tools::register: tool '{id}' needs handler: \"function_name\" (or Fn(\"function_name\"))"
            )))
        }
    };
    let parameters = match spec.get("parameters") {
        Some(p) => Some(dynamic_to_json(p, limits)?),
        None => None,
    };
    let mut reg = sh.registered.lock().unwrap_or_else(|p| p.into_inner());
    if reg.iter().any(|s| s.id == id) {
        return Err(rhai_err(format!(
            "api::tools::register: tool '{id}' is already registered"
        )));
    }
    reg.push(RhaiSpec {
        id,
        display_name: get_str("displayName"),
        description: get_str("description").unwrap_or_default(),
        parameters,
        function,
    });
    Ok(())
}

/// Where a limit stopped function `fname` of file `f`, as near as can be said: its one
/// loop, else its own line.
fn fn_place(f: &str, fname: &str, line: u32, loops: &[u32]) -> String {
    match loops {
        [l] => format!("{f}:{l}, the loop in {fname}"),
        _ => format!("{f}:{line}, in {fname}"),
    }
}

/// Each `fn NAME(` of a Rhai file: its name, its line and the lines of the loops (`loop`,
/// `while`, `for`, `do … while` once) in its body. A light scan (strings and comments are
/// skipped), used only to say where the instruction limit stopped a function.
fn fn_places(text: &str) -> Vec<(String, u32, Vec<u32>)> {
    // Tokens: identifiers with their line, and the brackets `{` `}`.
    let b = text.as_bytes();
    let mut toks: Vec<(&str, u32)> = Vec::new();
    let (mut i, mut line) = (0usize, 1u32);
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    line += u32::from(b[i] == b'\n');
                    i += 1;
                }
                i += 2;
            }
            b'"' | b'\'' | b'`' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    line += u32::from(b[i] == b'\n');
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'{' | b'}' => {
                toks.push((&text[i..i + 1], line));
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                toks.push((&text[start..i], line));
            }
            _ => i += 1,
        }
    }
    let mut out = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        if toks[k].0 != "fn" || k + 1 >= toks.len() {
            k += 1;
            continue;
        }
        let (name, fn_line) = (toks[k + 1].0.to_string(), toks[k].1);
        // The body: from the first `{` to its match.
        let Some(open) = (k + 2..toks.len()).find(|&j| toks[j].0 == "{") else {
            break;
        };
        let (mut depth, mut j, mut loops) = (0i32, open, Vec::new());
        let mut after_do_block = false;
        while j < toks.len() {
            match toks[j].0 {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                "loop" | "for" | "do" => loops.push(toks[j].1),
                // `do { … } while x` is one loop.
                "while" if !after_do_block => loops.push(toks[j].1),
                _ => {}
            }
            after_do_block = toks[j].0 == "}" && {
                // Whether the block just closed was a `do` block: its `{` follows `do`.
                let mut d = 0i32;
                let mut m = j;
                loop {
                    match toks[m].0 {
                        "}" => d += 1,
                        "{" => d -= 1,
                        _ => {}
                    }
                    if d == 0 || m == 0 {
                        break;
                    }
                    m -= 1;
                }
                m > 0 && toks[m - 1].0 == "do"
            };
            j += 1;
        }
        out.push((name, fn_line, loops));
        k = j.max(k + 1);
    }
    out
}

#[cfg(test)]
mod fn_places_tests {
    use super::fn_places;

    #[test]
    fn finds_functions_and_their_loops() {
        let text = "// fn nope() { loop {} }\nfn a(x) {\n  let s = \"while {\";\n  loop {\n    x += 1;\n  }\n}\n\nfn b() {\n  do {\n    1\n  } while true;\n  for i in 0..3 { }\n}\nfn c() { 1 }\n";
        assert_eq!(
            fn_places(text),
            vec![
                ("a".to_string(), 2, vec![4]),
                ("b".to_string(), 9, vec![10, 13]),
                ("c".to_string(), 15, vec![]),
            ]
        );
    }
}
