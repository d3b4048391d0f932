//! What `tavern plugin check` prints: the problems, the declared-beside-used permissions,
//! each process tool's confinement, and the summary; as text or as one JSON document.
//! Both go to stdout (`plugin check | less` shows all of it); the JSON holds data only,
//! no preformatted text.

use serde_json::{json, Value};

use super::CheckReport;
use crate::problem::Problem;
use crate::sandbox::support::support;

/// Number of tools the loaded plugins brought.
fn tool_count(report: &CheckReport) -> usize {
    report.plugins.iter().map(|p| p.tools.len()).sum()
}

/// The `--json` document. `problems` are all problems to report (the report's and any the
/// caller met before, such as a broken `tavern.toml`).
pub fn to_json(report: &CheckReport, problems: &[Problem]) -> Value {
    let tools = confinement(report);
    let s = support();
    let confinement = if tools.is_empty() {
        Value::Null
    } else {
        json!({
            "mechanisms": s.summary(),
            "missing": s.missing(false),
            "tools": tools,
        })
    };
    json!({
        "ok": problems.is_empty(),
        "problems": problems,
        "permissions": report.permissions,
        "confinement": confinement,
        "plugins": report.plugins.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "tools": tool_count(report),
    })
}

/// The text form: one problem per line (`file:line:column: message`, so an editor or
/// `grep` finds them), then a blank line and the permissions tables, the confinement lines
/// and the summary line.
pub fn to_text(report: &CheckReport, problems: &[Problem]) -> String {
    let mut out = String::new();
    for p in problems {
        out.push_str(&format!("{p}\n"));
    }
    if !problems.is_empty() {
        out.push('\n');
    }
    for r in &report.permissions {
        out.push_str(&r.text());
    }
    for l in confinement_lines(report) {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str(&format!(
        "{} plugin(s), {} tool(s), {} problem(s)\n",
        report.plugins.len(),
        tool_count(report),
        problems.len()
    ));
    out
}

/// Per process tool: its id and what it will be allowed (`read`, `write`, `network`,
/// `limits`, `confined`), as the sandbox describes it.
fn confinement(report: &CheckReport) -> Vec<Value> {
    let mut out = Vec::new();
    for p in &report.plugins {
        for id in &p.tools {
            let Some(mut d) = report
                .tools
                .get(id)
                .ok()
                .and_then(|t| t.handler().describe_sandbox())
            else {
                continue;
            };
            if let Some(o) = d.as_object_mut() {
                o.insert("id".into(), Value::String(id.to_string()));
                // Roots inside the home as every message names them (`plugins/P/data`).
                for key in ["read", "write"] {
                    if let Some(Value::Array(roots)) = o.get_mut(key) {
                        for r in roots.iter_mut() {
                            if let Some(s) = r.as_str() {
                                let shown = crate::problem::shown_path(
                                    std::path::Path::new(s),
                                    &report.home,
                                );
                                *r = Value::String(shown);
                            }
                        }
                    }
                }
            }
            out.push(d);
        }
    }
    out
}

/// What `tavern plugin check` prints about process tools: the kernel's mechanisms once,
/// then one line per process tool with what it will be allowed.
pub fn confinement_lines(report: &CheckReport) -> Vec<String> {
    let mut lines = Vec::new();
    for d in confinement(report) {
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
            "process tool {}: read {} (+ system paths); write {}; network {}; memory {} MiB, cpu {} s, processes {}, open files {}, output {} bytes, timeout {} ms{}",
            d["id"].as_str().unwrap_or_default(),
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
