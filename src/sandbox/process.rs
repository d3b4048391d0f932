//! Script tools: a tool carried out by an external process speaking VCPToolBox's stdio
//! contract. The arguments go to the child's stdin as one JSON object; the child answers on
//! stdout with `{"status":"success","result":…}` or `{"status":"error","error":"…"}`.
//!
//! The child runs in the plugin's directory, in its own process group on Unix (so a timeout
//! kills the whole tree; elsewhere the child itself is killed), with an environment that
//! holds only `PATH` and the plugin's config values, and with stdout and stderr capped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::confine::{self, Confinement, Prepared};
use crate::tools::{CallContext, ToolError, ToolFuture, ToolHandler};

/// Wall-clock limit when a tool gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest limit a tool may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Cap on each of stdout and stderr.
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;
/// How much of stderr goes into an error message.
const EXCERPT: usize = 600;

/// Why a command line could not be split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The command is empty.
    #[error("the command is empty")]
    Empty,
    /// A quote was not closed.
    #[error("unclosed {0} quote in command")]
    Unclosed(char),
}

/// Splits a command line like a shell does for words and quotes, without a shell: no
/// variables, globs, pipes or redirections. `'…'` is literal; `"…"` allows `\"` and `\\`;
/// a backslash outside quotes escapes the next character.
pub fn split_command(cmd: &str) -> Result<Vec<String>, CommandError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = cmd.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(CommandError::Unclosed('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err(CommandError::Unclosed('"')),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(CommandError::Unclosed('"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err(CommandError::Empty);
    }
    Ok(words)
}

/// Turns config values into environment variables, one per option, named as the option is.
/// Strings go as they are; other values as JSON text; absent values are left out.
pub fn config_env(config: &Map<String, Value>) -> BTreeMap<String, String> {
    config
        .iter()
        .filter(|(k, _)| !k.is_empty() && !k.contains('=') && !k.contains('\0'))
        .filter_map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Null => return None,
                other => other.to_string(),
            };
            (!s.contains('\0')).then(|| (k.clone(), s))
        })
        .collect()
}

/// How to run one process tool.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Program and arguments, already split.
    pub argv: Vec<String>,
    /// Working directory (the plugin's directory).
    pub dir: PathBuf,
    /// The whole environment of the child.
    pub env: BTreeMap<String, String>,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Cap on each of stdout and stderr, in bytes.
    pub output_cap: usize,
    /// Extra members merged into the arguments object (VCP's `command`), when absent.
    pub extra_args: Map<String, Value>,
    /// The sandbox the child runs in (see [`super::confine`]); `None` runs it unconfined.
    pub confine: Option<Arc<Confinement>>,
}

impl ProcessSpec {
    /// A spec for `command` run in `dir`, with `PATH` from the host and `config` as variables.
    pub fn new(
        command: &str,
        dir: &Path,
        config: &Map<String, Value>,
        timeout_ms: Option<u64>,
    ) -> Result<Self, CommandError> {
        let argv = split_command(command)?;
        let mut env = config_env(config);
        // PATH lets `python3`/`node` resolve and lets scripts start helpers; it carries no
        // secrets. Everything else of the host's environment stays out.
        if let Some(path) = std::env::var_os("PATH").and_then(|p| p.into_string().ok()) {
            env.entry("PATH".into()).or_insert(path);
        }
        Ok(ProcessSpec {
            argv,
            dir: dir.to_path_buf(),
            env,
            timeout: Duration::from_millis(
                timeout_ms
                    .unwrap_or(DEFAULT_TIMEOUT_MS)
                    .clamp(1, MAX_TIMEOUT_MS),
            ),
            output_cap: DEFAULT_OUTPUT_CAP,
            extra_args: Map::new(),
            confine: None,
        })
    }
}

/// The [`ToolHandler`] of a script (process) tool.
pub struct ProcessToolHandler {
    spec: Arc<ProcessSpec>,
}

impl ProcessToolHandler {
    /// A handler running `spec` once per call.
    pub fn new(spec: ProcessSpec) -> Self {
        ProcessToolHandler {
            spec: Arc::new(spec),
        }
    }
}

impl ToolHandler for ProcessToolHandler {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let spec = self.spec.clone();
        Box::pin(async move { run(&spec, &ctx.tool_id, args, ctx.cancel.clone()).await })
    }

    fn describe_sandbox(&self) -> Option<Value> {
        let c = self.spec.confine.as_ref()?;
        Some(c.describe(self.spec.timeout.as_millis() as u64))
    }
}

/// Kills the child's whole process group when dropped (timeout, overflow, cancellation, or the
/// caller dropping the future), so no grandchild outlives the call.
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    fn kill(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: kill(2) with a negative pid signals the process group we created with
            // process_group(0); it has no memory-safety preconditions.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        // Elsewhere there is no process group: `kill_on_drop` ends the child itself.
        #[cfg(not(unix))]
        self.pgid.take();
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Debug)]
enum ReadOutcome {
    Done(Vec<u8>),
    Overflow,
}

async fn read_capped<R: AsyncRead + Unpin>(mut r: R, cap: usize) -> std::io::Result<ReadOutcome> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Ok(ReadOutcome::Done(buf));
        }
        if buf.len() + n > cap {
            return Ok(ReadOutcome::Overflow);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn excerpt(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim();
    if s.chars().count() > EXCERPT {
        format!("{}…", s.chars().take(EXCERPT).collect::<String>())
    } else {
        s.to_string()
    }
}

fn with_stderr(msg: String, stderr: &[u8]) -> String {
    let e = excerpt(stderr);
    if e.is_empty() {
        msg
    } else {
        format!("{msg}; stderr: {e}")
    }
}

/// Runs the process once for `args` and reads its answer.
pub async fn run(
    spec: &ProcessSpec,
    tool: &str,
    args: Value,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<Value, ToolError> {
    let mut args = args;
    if let Value::Object(m) = &mut args {
        for (k, v) in &spec.extra_args {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let input = serde_json::to_vec(&args)
        .map_err(|e| ToolError::failed(tool, format!("cannot encode arguments: {e}")))?;

    let program = &spec.argv[0];
    // A program written with a slash is a file of the plugin; a bare name is looked up on PATH.
    // A confined child cannot search PATH directories it may not read: resolve it here.
    let program_path = if program.contains('/') {
        spec.dir.join(program)
    } else if spec.confine.is_some() {
        confine::which(program, spec.env.get("PATH").map(String::as_str))
            .unwrap_or_else(|| PathBuf::from(program))
    } else {
        PathBuf::from(program)
    };
    let prepared: Option<Prepared> = match &spec.confine {
        Some(c) => Some(
            c.prepare(&program_path)
                .map_err(|e| ToolError::failed(tool, e.to_string()))?,
        ),
        None => None,
    };
    let mut cmd = tokio::process::Command::new(&program_path);
    let cwd = match (&spec.confine, &prepared) {
        (Some(c), Some(p)) if c.plugin_dir.is_none() => p.tmp().to_path_buf(),
        _ => spec.dir.clone(),
    };
    cmd.args(&spec.argv[1..])
        .current_dir(&cwd)
        .env_clear()
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(p) = &prepared {
        cmd.env("TMPDIR", p.tmp()).env("HOME", p.tmp());
        p.apply(&mut cmd);
    }
    let mut child = cmd.spawn().map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            "not found (is it installed and on PATH?)".to_string()
        } else {
            e.to_string()
        };
        ToolError::failed(tool, format!("cannot start '{program}': {why}"))
    })?;
    let mut guard = GroupGuard {
        pgid: child.id().map(|p| p as i32),
    };

    // Feed stdin from a task: a child that never reads must not block us.
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
    }
    // Both pipes exist: they were requested as piped above.
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ToolError::failed(tool, "the process has no output pipes"));
    };
    let cap = spec.output_cap;
    let mut out_task = tokio::spawn(read_capped(stdout, cap));
    let mut err_task = tokio::spawn(read_capped(stderr, cap));
    let mut out: Option<Vec<u8>> = None;
    let mut err: Option<Vec<u8>> = None;

    let deadline = tokio::time::sleep(spec.timeout);
    tokio::pin!(deadline);
    let overflow = |which: &str| ToolError::LimitExceeded {
        tool: tool.to_string(),
        limit: "output".into(),
        message: format!("the process wrote more than {cap} bytes to {which}; it was stopped"),
    };
    let status = loop {
        tokio::select! {
            st = child.wait() => break st,
            r = &mut out_task, if out.is_none() => match r {
                Ok(Ok(ReadOutcome::Done(b))) => out = Some(b),
                Ok(Ok(ReadOutcome::Overflow)) => { guard.kill(); return Err(overflow("stdout")); }
                _ => out = Some(Vec::new()),
            },
            r = &mut err_task, if err.is_none() => match r {
                Ok(Ok(ReadOutcome::Done(b))) => err = Some(b),
                Ok(Ok(ReadOutcome::Overflow)) => { guard.kill(); return Err(overflow("stderr")); }
                _ => err = Some(Vec::new()),
            },
            _ = &mut deadline => {
                guard.kill();
                let _ = child.wait().await;
                return Err(ToolError::Timeout { tool: tool.to_string(), after_ms: spec.timeout.as_millis() as u64, at: None });
            }
            _ = cancel.cancelled() => {
                guard.kill();
                let _ = child.wait().await;
                return Err(ToolError::Cancelled { tool: tool.to_string() });
            }
        }
    };
    // The leader has exited: whatever it left behind in its group goes too, and that also
    // closes any pipe a grandchild still held, so the reads below finish. The cgroup catches
    // those that left the group (setsid).
    guard.kill();
    if let Some(p) = &prepared {
        p.kill_all();
    }
    let status = status
        .map_err(|e| ToolError::failed(tool, format!("waiting for the process failed: {e}")))?;
    let out = match out {
        Some(b) => b,
        None => match out_task.await {
            Ok(Ok(ReadOutcome::Done(b))) => b,
            Ok(Ok(ReadOutcome::Overflow)) => return Err(overflow("stdout")),
            _ => Vec::new(),
        },
    };
    let err = match err {
        Some(b) => b,
        None => match err_task.await {
            Ok(Ok(ReadOutcome::Done(b))) => b,
            Ok(Ok(ReadOutcome::Overflow)) => return Err(overflow("stderr")),
            _ => Vec::new(),
        },
    };
    if let (Some(p), Some(c)) = (&prepared, &spec.confine) {
        if let Some(e) = limit_failure(tool, &status, &err, p, c) {
            return Err(e);
        }
    }
    let result = interpret(tool, status, &out, &err);
    match (result, &prepared, &spec.confine) {
        // The tool reported the refused fork itself: say which limit refused it.
        (Err(ToolError::Failed { message, .. }), Some(p), Some(c)) if p.processes_refused() > 0 => {
            Err(ToolError::LimitExceeded {
                tool: tool.to_string(),
                limit: "processes".into(),
                message: format!(
                    "a fork was refused: the limit is {} processes or threads at once (processes); the tool said: {message}",
                    c.limits.processes
                ),
            })
        }
        (r, _, _) => r,
    }
}

/// The signal that ended the process (Unix only).
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    return std::os::unix::process::ExitStatusExt::signal(status);
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

#[cfg(unix)]
const SIGXCPU: i32 = libc::SIGXCPU;
#[cfg(unix)]
const SIGKILL: i32 = libc::SIGKILL;
// No signals elsewhere: values no exit status carries.
#[cfg(not(unix))]
const SIGXCPU: i32 = -1;
#[cfg(not(unix))]
const SIGKILL: i32 = -2;

/// Text in stderr that means an allocation failed.
const OUT_OF_MEMORY: &[&str] = &[
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
    "Out of memory",
    "bad_alloc",
    "Fatal process OOM",
    "memory allocation of",
];

/// A failed child that hit one of its confinement limits, as the limit and its value.
fn limit_failure(
    tool: &str,
    status: &std::process::ExitStatus,
    err: &[u8],
    prepared: &Prepared,
    c: &Confinement,
) -> Option<ToolError> {
    if status.success() {
        return None;
    }
    let l = &c.limits;
    let signal = signal_of(status);
    let limit = |limit: &str, message: String| {
        Some(ToolError::LimitExceeded {
            tool: tool.to_string(),
            limit: limit.into(),
            message: with_stderr(message, err),
        })
    };
    if signal == Some(SIGXCPU) {
        return limit(
            "cpu",
            format!(
                "the process used its {} s of CPU time (cpuSeconds) and was stopped",
                l.cpu_seconds
            ),
        );
    }
    if signal == Some(SIGKILL) {
        return limit("cpu", format!("the process was killed (SIGKILL): it passed its CPU time limit of {} s (cpuSeconds), or the system ran out of memory", l.cpu_seconds));
    }
    if prepared.processes_refused() > 0 {
        return limit("processes", format!("the process tried to run more than {} processes or threads at once (processes) and failed", l.processes));
    }
    let text = String::from_utf8_lossy(err);
    if OUT_OF_MEMORY.iter().any(|m| text.contains(m)) {
        return limit(
            "memory",
            format!(
                "the process ran out of memory: its limit is {} MiB (memoryMb) and it failed",
                l.memory_mb
            ),
        );
    }
    None
}

fn parse_answer(out: &[u8]) -> Option<Map<String, Value>> {
    let text = String::from_utf8_lossy(out);
    let text = text.trim();
    if let Ok(Value::Object(m)) = serde_json::from_str(text) {
        return Some(m);
    }
    // Some plugins print progress lines first: accept a JSON answer on the last line.
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    match serde_json::from_str(last.trim()) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn error_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "the plugin reported an error without a message".into(),
        Some(other) => other.to_string(),
    }
}

fn interpret(
    tool: &str,
    status: std::process::ExitStatus,
    out: &[u8],
    err: &[u8],
) -> Result<Value, ToolError> {
    let answer = parse_answer(out);
    let status_field = answer
        .as_ref()
        .and_then(|m| m.get("status"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    if !status.success() {
        let how = match (status.code(), signal_of(&status)) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("signal {s}"),
            _ => "an unknown status".into(),
        };
        let said = match (&answer, status_field.as_deref()) {
            (Some(m), Some("error")) => format!(": {}", error_text(m.get("error"))),
            _ => String::new(),
        };
        return Err(ToolError::failed(
            tool,
            with_stderr(format!("the process ended with {how}{said}"), err),
        ));
    }
    let Some(mut m) = answer else {
        let shown = excerpt(out);
        let shown = if shown.is_empty() {
            "nothing".to_string()
        } else {
            format!("'{shown}'")
        };
        return Err(ToolError::failed(
            tool,
            with_stderr(
                format!("the process did not answer with JSON on stdout (expected {{\"status\":\"success\",\"result\":…}}); it wrote {shown}"),
                err,
            ),
        ));
    };
    match status_field.as_deref() {
        Some("success") => Ok(m.remove("result").unwrap_or(Value::Null)),
        Some("error") => Err(ToolError::failed(tool, error_text(m.get("error")))),
        _ => Err(ToolError::failed(
            tool,
            with_stderr(
                "the process answered JSON without \"status\": \"success\" or \"error\""
                    .to_string(),
                err,
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_like_a_shell() {
        let cases: &[(&str, Result<&[&str], CommandError>)] = &[
            ("python3 scripts/x.py", Ok(&["python3", "scripts/x.py"])),
            ("  a   b  ", Ok(&["a", "b"])),
            ("a 'b c' \"d \\\"e\\\"\"", Ok(&["a", "b c", "d \"e\""])),
            ("a b\\ c", Ok(&["a", "b c"])),
            ("a ''", Ok(&["a", ""])),
            ("a 'b", Err(CommandError::Unclosed('\''))),
            ("a \"b", Err(CommandError::Unclosed('"'))),
            ("   ", Err(CommandError::Empty)),
        ];
        for (cmd, want) in cases {
            let got = split_command(cmd);
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(
                    g,
                    w.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                    "{cmd}"
                ),
                (Err(g), Err(w)) => assert_eq!(&g, w, "{cmd}"),
                (g, w) => panic!("{cmd}: got {g:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn config_becomes_environment() {
        let mut m = Map::new();
        m.insert("API_KEY".into(), Value::from("k"));
        m.insert("n".into(), Value::from(3));
        m.insert("bad=name".into(), Value::from("x"));
        let env = config_env(&m);
        assert_eq!(env.get("API_KEY").map(String::as_str), Some("k"));
        assert_eq!(env.get("n").map(String::as_str), Some("3"));
        assert!(!env.contains_key("bad=name"));
    }
}
