//! What `tavern plugin check` prints: the problems, the declared-beside-used permissions,
//! each process tool's confinement, and the summary; as text or as one JSON document.

use serde_json::{json, Value};

use super::CheckReport;
use crate::problem::Problem;
use crate::sandbox::support::support;

/// The text form: `stdout` holds one problem per line, then the confinement lines; `stderr`
/// the permissions tables and the summary line (for the reader, not for tools).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text {
    /// Lines for stdout.
    pub stdout: Vec<String>,
    /// Text for stderr.
    pub stderr: String,
}

/// Number of tools the loaded plugins brought.
fn tool_count(report: &CheckReport) -> usize {
    report.plugins.iter().map(|p| p.tools.len()).sum()
}

/// The `--json` document. `problems` are all problems to report (the report's and any the
/// caller met before, such as a broken `tavern.toml`).
pub fn to_json(report: &CheckReport, problems: &[Problem]) -> Value {
    json!({
        "ok": problems.is_empty(),
        "problems": problems,
        "permissions": report.permissions,
        "confinement": confinement_lines(report),
        "plugins": report.plugins.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "tools": tool_count(report),
    })
}

/// The text form of the same.
pub fn to_text(report: &CheckReport, problems: &[Problem]) -> Text {
    let mut stdout: Vec<String> = problems.iter().map(ToString::to_string).collect();
    stdout.extend(confinement_lines(report));
    let mut stderr: String = report.permissions.concat();
    stderr.push_str(&format!(
        "{} plugin(s), {} tool(s), {} problem(s)\n",
        report.plugins.len(),
        tool_count(report),
        problems.len()
    ));
    Text { stdout, stderr }
}

/// What `tavern plugin check` prints about process tools: the kernel's mechanisms once,
/// then one line per process tool with what it will be allowed.
pub fn confinement_lines(report: &CheckReport) -> Vec<String> {
    let mut lines = Vec::new();
    for p in &report.plugins {
        for id in &p.tools {
            let Some(d) = report
                .tools
                .get(id)
                .ok()
                .and_then(|t| t.handler().describe_sandbox())
            else {
                continue;
            };
            let list = |v: &Value| {
                let items: Vec<&str> = v
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if items.is_empty() {
                    "none".to_string()
                } else {
                    items.join(", ")
                }
            };
            let l = &d["limits"];
            lines.push(format!(
                "process tool {id}: read {} (+ system paths); write {}; network {}; memory {} MiB, cpu {} s, processes {}, open files {}, output {} bytes, timeout {} ms{}",
                list(&d["read"]),
                list(&d["write"]),
                if d["network"] == Value::Bool(true) { "yes" } else { "no" },
                l["memoryMb"],
                l["cpuSeconds"],
                l["processes"],
                l["openFiles"],
                l["outputBytes"],
                l["timeoutMs"],
                if d["confined"] == Value::Bool(true) { "" } else { " (UNCONFINED: process.allow_unconfined)" },
            ));
        }
    }
    if !lines.is_empty() {
        let s = support();
        let head = match s.missing(false).as_slice() {
            [] => format!("process-tool confinement: {}", s.summary()),
            m => format!(
                "process-tool confinement: {}; the kernel lacks {}",
                s.summary(),
                m.join(", ")
            ),
        };
        lines.insert(0, head);
    }
    lines
}
