//! Model-written Python and JavaScript (seed 001 §4.3, `CodeInterpreter:execute`): run as
//! `python3` / `node` child processes, when present, inside the process-tool confinement
//! ([`super::confine`]) with no file roots, no network and [`ProcessLimits::CODE`], answering
//! `{"value": …, "output": "<what it printed>"}`. The `code.execute` host service
//! (`plugins::code_service`) sends Lua and Rhai to the script sandbox and the rest here.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::confine::{self, Confinement, ProcessLimits};
use super::process::{self, ProcessSpec};
use crate::tools::ToolError;

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

/// The process languages this machine runs confined (`python`, `javascript`).
pub fn process_languages() -> Vec<&'static str> {
    interpreters().iter().map(|i| i.language).collect()
}

/// Runs snippets in the process languages under one confinement, shared by every call so its
/// private temporary directories are reused.
pub struct CodeRunner {
    process_limits: ProcessLimits,
    confinement: Arc<Confinement>,
}

impl CodeRunner {
    /// A runner with `limits` (see [`ProcessLimits::CODE`]).
    pub fn new(limits: ProcessLimits) -> Self {
        CodeRunner {
            process_limits: limits,
            confinement: confine::bare(limits),
        }
    }

    /// Whether `language` runs here as a process.
    pub fn runs(&self, language: &str) -> bool {
        interpreters().iter().any(|i| i.language == language)
    }

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

    /// Runs `code` in `language` with `inputs` for tool `tool`; `None` when the language
    /// does not run here as a process.
    pub async fn run(
        &self,
        tool: &str,
        language: &str,
        code: String,
        inputs: Value,
        cancel: CancellationToken,
    ) -> Option<Result<Value, ToolError>> {
        let i = interpreters().iter().find(|i| i.language == language)?;
        let spec = self.process_spec(i);
        let input = json!({"code": code, "inputs": inputs});
        Some(process::run(&spec, tool, input, cancel).await)
    }

    /// What `tavern plugin check` shows (nothing when no process language runs here).
    pub fn describe(&self) -> Option<Value> {
        interpreters().first()?;
        Some(
            self.confinement
                .describe(PROCESS_TIMEOUT.as_millis() as u64),
        )
    }
}
