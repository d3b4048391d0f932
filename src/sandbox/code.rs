//! Host service `code.execute`: runs model-written code in a fresh sandbox with strict
//! limits (seed 001 §4.3, `CodeInterpreter:execute`) and returns
//! `{"value": …, "output": "<what it printed>"}`.
//!
//! Lua and Rhai run in the engine's script sandbox. Python and JavaScript run as `python3` /
//! `node` child processes, when present, inside the process-tool confinement
//! ([`super::confine`]) with no file roots, no network and [`ProcessLimits::CODE`]; only the
//! languages this machine can run are listed in the tool's `language` enum.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::confine::{self, ProcessLimits};
use super::process::{self, ProcessSpec};
use crate::plugins::host_services::{HostServices, ServiceFactory};
use crate::plugins::scripts::effective_limits;
use crate::script::{run_snippet, Lang, Limits};
use crate::tools::{CallContext, ToolDefinition, ToolError, ToolFuture, ToolHandler};

/// Name of the service.
pub const NAME: &str = "code.execute";

/// Wall-clock limit of a Python or JavaScript snippet.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the snippet from stdin (`{"code", "inputs"}`): prints are captured, the value of a
/// final expression is the value.
const PY_WRAPPER: &str = r#"
import ast, contextlib, io, json, sys, traceback
a = json.load(sys.stdin)
buf = io.StringIO()
g = {"__name__": "__main__", "inputs": a.get("inputs") or {}}
try:
    tree = ast.parse(a["code"], "<code>")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    value = None
    with contextlib.redirect_stdout(buf):
        exec(compile(tree, "<code>", "exec"), g)
        if last is not None:
            value = eval(compile(last, "<code>", "eval"), g)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        value = repr(value)
    print(json.dumps({"status": "success", "result": {"value": value, "output": buf.getvalue()}}))
except MemoryError:
    raise
except BaseException as e:
    msg = "".join(traceback.format_exception_only(type(e), e)).strip()
    out = buf.getvalue()
    print(json.dumps({"status": "error", "error": msg + ("\noutput: " + out[-2000:] if out else "")}))
"#;

const JS_WRAPPER: &str = r#"
const vm = require('vm'); const util = require('util');
let data = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', c => { data += c; });
process.stdin.on('end', () => {
  const a = JSON.parse(data);
  const emit = s => process.stdout.write(JSON.stringify(s) + '\n');
  let out = '';
  const log = (...xs) => { out += xs.map(x => typeof x === 'string' ? x : util.inspect(x)).join(' ') + '\n'; };
  console.log = console.info = console.warn = console.error = console.debug = log;
  globalThis.inputs = a.inputs || {};
  try {
    const value = vm.runInThisContext(a.code, { filename: '<code>' });
    let v = null;
    try { v = JSON.parse(JSON.stringify(value === undefined ? null : value)); } catch (_) { v = String(value); }
    if (v === undefined) v = null;
    emit({ status: 'success', result: { value: v, output: out } });
  } catch (e) {
    emit({ status: 'error', error: String(e) + (out ? '\noutput: ' + out.slice(-2000) : '') });
  }
});
"#;

/// A language run as a child process.
#[derive(Debug, Clone)]
struct Interpreter {
    /// `python` or `javascript`.
    language: &'static str,
    /// The interpreter's real executable (not a version-manager shim).
    program: PathBuf,
}

/// The process languages this machine can run confined (probed once).
fn interpreters() -> &'static [Interpreter] {
    static I: OnceLock<Vec<Interpreter>> = OnceLock::new();
    I.get_or_init(|| {
        if !confine::support().missing(false).is_empty() {
            return Vec::new();
        }
        let path = std::env::var("PATH").ok();
        let mut out = Vec::new();
        for (language, bin, ask) in [
            (
                "python",
                "python3",
                &["-I", "-S", "-c", "import sys; print(sys.executable)"][..],
            ),
            ("javascript", "node", &["-p", "process.execPath"][..]),
        ] {
            let Some(found) = confine::which(bin, path.as_deref()) else {
                continue;
            };
            // Ask the interpreter for its own executable, past any shim.
            let real = std::process::Command::new(&found)
                .args(ask)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
                .filter(|p| p.is_absolute() && p.is_file());
            if let Some(program) = real {
                out.push(Interpreter { language, program });
            }
        }
        out
    })
}

/// The languages `code.execute` runs on this machine.
pub fn languages() -> Vec<&'static str> {
    let mut v = vec!["lua", "rhai"];
    v.extend(interpreters().iter().map(|i| i.language));
    v
}

/// Keeps only the languages this machine runs in the definition's `language` enum.
fn adjust(def: &mut ToolDefinition) {
    let available = languages();
    if let Some(Value::Array(list)) = def.parameters.pointer_mut("/properties/language/enum") {
        list.retain(|v| v.as_str().is_some_and(|l| available.contains(&l)));
    }
}

struct CodeExecute {
    limits: Limits,
    process_limits: ProcessLimits,
    /// Shared by every call, so the private temp dirs are reused.
    confinement: Arc<confine::Confinement>,
}

impl CodeExecute {
    fn process_spec(&self, i: &Interpreter) -> ProcessSpec {
        let wrapper = if i.language == "python" {
            vec!["-I", "-S", "-c", PY_WRAPPER]
        } else {
            vec!["-e", JS_WRAPPER]
        };
        let mut argv = vec![i.program.display().to_string()];
        argv.extend(wrapper.into_iter().map(String::from));
        let mut env = std::collections::BTreeMap::new();
        if let Ok(p) = std::env::var("PATH") {
            env.insert("PATH".to_string(), p);
        }
        ProcessSpec {
            argv,
            dir: std::env::temp_dir(),
            env,
            timeout: PROCESS_TIMEOUT,
            output_cap: usize::try_from(self.process_limits.output_bytes).unwrap_or(usize::MAX),
            extra_args: Map::new(),
            confine: Some(self.confinement.clone()),
        }
    }
}

impl ToolHandler for CodeExecute {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let limits = self.limits;
        let tool = ctx.tool_id.to_string();
        let language = args
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let process = interpreters()
            .iter()
            .find(|i| i.language == language)
            .map(|i| self.process_spec(i));
        Box::pin(async move {
            let Some(code) = args.get("code").and_then(Value::as_str).map(str::to_string) else {
                return Err(ToolError::InvalidParameters {
                    tool,
                    problems: vec!["parameter 'code' is required".into()],
                });
            };
            let inputs = args
                .get("inputs")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            if let Some(spec) = process {
                let input = json!({"code": code, "inputs": inputs});
                return process::run(&spec, &tool, input, ctx.cancel.clone()).await;
            }
            let Some(lang) = Lang::from_name(&language) else {
                return Err(ToolError::InvalidParameters {
                    tool,
                    problems: vec![format!(
                        "parameter 'language': '{language}' is not one of {}",
                        languages().join(", ")
                    )],
                });
            };
            // Script work never runs on the async workers; the sandbox bounds its time.
            let result =
                tokio::task::spawn_blocking(move || run_snippet(lang, &code, inputs, &limits))
                    .await
                    .map_err(|e| {
                        ToolError::failed(&tool, format!("the interpreter thread failed: {e}"))
                    })?;
            match result {
                Ok(out) => Ok(json!({"value": out.value, "output": out.output})),
                Err(e) => Err(e.into_tool_error(&tool)),
            }
        })
    }

    fn describe_sandbox(&self) -> Option<Value> {
        interpreters().first()?;
        Some(
            self.confinement
                .describe(PROCESS_TIMEOUT.as_millis() as u64),
        )
    }
}

/// Adds `code.execute` to `services`. Lua/Rhai snippets run with [`Limits::strict`], lowered
/// further by the binding plugin's `limits:` section; Python/JavaScript with
/// [`ProcessLimits::CODE`], lowered by its `processLimits:`.
pub fn register(services: &mut HostServices) {
    let f: ServiceFactory = Arc::new(|ctx| {
        let limits = effective_limits(ctx.limits.as_ref(), &Limits::strict())
            .unwrap_or_else(|_| Limits::strict());
        let process_limits = ProcessLimits::CODE.lowered_by(
            &confine::PartialProcessLimits::parse(ctx.process_limits.as_ref()).unwrap_or_default(),
        );
        Arc::new(CodeExecute {
            limits,
            process_limits,
            confinement: confine::bare(process_limits),
        }) as Arc<dyn ToolHandler>
    });
    services.register(NAME, f);
    services.register_adjuster(NAME, adjust);
}
