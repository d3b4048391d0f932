//! `tavern workflow …` through the real binary.

use crate::cli_support;

use std::path::Path;

use cli_support::tavern;
use serde_json::json;

/// A home with the bundled workflows copied in.
fn home() -> tempfile::TempDir {
    let dir = cli_support::home();
    let wf = dir.path().join("workflows");
    std::fs::create_dir(&wf).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, wf.join(p.file_name().unwrap())).unwrap();
    }
    dir
}

#[test]
fn run_by_id_prints_outputs() {
    let h = home();
    let r = tavern(
        h.path(),
        &[
            "workflow",
            "run",
            "summarize_text",
            "--input",
            "text_to_summarize=A. B. C.",
            "-i",
            "summary_length=简短",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json(), json!({"summary_result": "A."}));
}

#[test]
fn run_json_reports_nodes_and_converts_inputs() {
    let h = home();
    // `2` parses as JSON but the schema wants text: the ToolManager converts it.
    let r = tavern(
        h.path(),
        &[
            "workflow",
            "run",
            "text_stats",
            "--json",
            "--input",
            "text=2",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["status"], json!("succeeded"));
    assert_eq!(
        v["outputs"]["stats"],
        json!({"words": 1, "lines": 1, "characters": 1})
    );
    assert_eq!(v["nodes"].as_array().unwrap().len(), 7);
    assert!(v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["status"] == "succeeded"));
}

#[test]
fn run_a_file_with_a_failing_branch() {
    let h = home();
    std::fs::write(
        h.path().join("half.json"),
        json!({
            "interfaceOutputs": {"good": {}, "bad": {}},
            "nodes": [
                {"id": "ok", "type": "core:String", "inputValues": {"value": "fine"}},
                {"id": "boom", "type": "core:JsonParse", "inputValues": {"text": "{"}},
                {"id": "after", "type": "core:JsonStringify"},
                {"id": "out", "type": "core:GroupOutput"}
            ],
            "edges": [
                {"source": "ok", "sourceHandle": "value", "target": "out", "targetHandle": "good"},
                {"source": "boom", "sourceHandle": "value", "target": "after", "targetHandle": "value"},
                {"source": "after", "sourceHandle": "text", "target": "out", "targetHandle": "bad"}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let r = tavern(h.path(), &["workflow", "run", "half.json", "--json"], b"");
    assert_eq!(r.code, 1);
    let v = r.json();
    assert_eq!(v["status"], json!("failed"));
    assert_eq!(v["outputs"], json!({"good": "fine"}));
    let status: Vec<(String, String)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().into(),
                n["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        status,
        vec![
            ("ok".into(), "succeeded".into()),
            ("boom".into(), "failed".into()),
            ("after".into(), "skipped".into()),
            ("out".into(), "skipped".into()),
        ]
    );
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("node 'boom' (core:JsonParse) failed"),
        "{v}"
    );
}

#[test]
fn invalid_workflow_lists_every_problem() {
    let h = home();
    std::fs::write(
        h.path().join("bad.json"),
        "{\"nodes\": [\n {\"id\": \"a\", \"type\": \"core:Nope\"},\n {\"id\": \"b\", \"type\": \"core:Math\"}\n]}",
    )
    .unwrap();
    let r = tavern(h.path(), &["workflow", "run", "bad.json"], b"");
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("bad.json:2: workflow 'bad': node 'a': unknown node type 'core:Nope'"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("bad.json:3: workflow 'bad': node 'b': required input 'a'"),
        "{}",
        r.stderr
    );
}

#[test]
fn missing_argument_and_unknown_workflow_are_usage_errors() {
    let h = home();
    let r = tavern(h.path(), &["workflow", "run", "summarize_text"], b"");
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("text_to_summarize"), "{}", r.stderr);
    let r = tavern(h.path(), &["workflow", "run", "no_such_flow"], b"");
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("no workflow 'no_such_flow'"),
        "{}",
        r.stderr
    );
}

#[test]
fn graph_and_schema() {
    let h = home();
    let r = tavern(h.path(), &["workflow", "graph", "text_stats"], b"");
    assert_eq!(r.code, 0);
    assert!(r.stdout.starts_with("flowchart LR\n"), "{}", r.stdout);
    assert!(
        r.stdout.contains("n1 -- \"text → text\" --> n1")
            || r.stdout.contains("n0 -- \"text → text\" --> n1"),
        "{}",
        r.stdout
    );
    let r = tavern(
        h.path(),
        &["workflow", "graph", "text_stats", "--format", "dot"],
        b"",
    );
    assert!(
        r.stdout.starts_with("digraph \"text_stats\" {"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("\"collect\" -> \"sentence\" [label=\"object → vars\"];"),
        "{}",
        r.stdout
    );
    let r = tavern(h.path(), &["workflow", "schema", "summarize_text"], b"");
    assert_eq!(r.code, 0);
    assert_eq!(
        r.json()["parameters"]["required"],
        json!(["text_to_summarize"])
    );
}

#[test]
fn json_inputs_reach_script_nodes() {
    let h = home();
    let r = tavern(
        h.path(),
        &[
            "workflow",
            "run",
            "number_summary",
            "-i",
            "numbers=[1, 5, 3]",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json(),
        json!({"summary": {"count": 3, "mean": 3.0, "stddev": (8.0f64 / 3.0).sqrt(), "min": 1, "max": 5}})
    );
}

#[test]
fn ctrl_c_cancels_a_running_workflow() {
    let h = home();
    let file = h.path().join("slow.json");
    std::fs::write(
        &file,
        r#"{"id":"slow","nodes":[{"id":"d","type":"core:Delay","inputValues":{"ms":60000}}],"edges":[]}"#,
    )
    .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tavern"))
        .arg("--home")
        .arg(h.path())
        .args(["workflow", "run", "--json"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Give the runtime time to install its handler; an earlier signal would end the process
    // with the default action, which the assertions below would catch.
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: sending SIGINT to our own child process by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], json!("cancelled"));
}

/// Issue 23 item 21: `tavern nodes` lists every node type a workflow may use, the
/// interface nodes included, one line each; `--long` gives the detail.
#[test]
fn nodes_lists_every_type_one_line_each() {
    let home = tempfile::tempdir().unwrap();
    let r = tavern(home.path(), &["nodes", "--json"], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let types: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].as_str().unwrap().to_string())
        .collect();
    for t in [
        "core:GroupInput",
        "core:GroupOutput",
        "core:Math",
        "llm:Chat",
    ] {
        assert!(types.iter().any(|x| x == t), "{t}: {types:?}");
    }
    let r = tavern(home.path(), &["nodes"], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), types.len(), "{}", r.stdout);
    for (l, t) in lines.iter().zip(&types) {
        assert!(l.starts_with(&format!("{t} ")), "{l} / {t}");
    }
    let r = tavern(home.path(), &["nodes", "--long"], b"");
    assert!(
        r.stdout.contains("### `core:Math`") && r.stdout.contains("| key | type |"),
        "{}",
        r.stdout
    );
}

/// Issue 23 item 18: a workflow's interface defaults are in its schema wherever it is
/// listed: `workflow schema`, `tavern tools`, MCP and the OpenAI/Anthropic exports.
#[test]
fn workflow_interface_defaults_are_in_every_schema() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let want = json!("中等");
    let r = tavern(repo, &["workflow", "schema", "summarize_text"], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["parameters"]["properties"]["summary_length"]["default"],
        want
    );
    let r = tavern(repo, &["tools", "--json"], b"");
    let v = r.json();
    let t = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "workflow:summarize_text")
        .unwrap();
    assert_eq!(
        t["parameters"]["properties"]["summary_length"]["default"],
        want
    );
    for (format, name, schema) in [
        ("mcp", "/name", "/inputSchema"),
        ("openai", "/function/name", "/function/parameters"),
        ("anthropic", "/name", "/input_schema"),
    ] {
        let r = tavern(repo, &["tools", "--format", format], b"");
        let v = r.json();
        let t = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t.pointer(name) == Some(&json!("workflow_summarize_text")))
            .unwrap_or_else(|| panic!("{format}: {v}"));
        assert_eq!(
            t.pointer(&format!("{schema}/properties/summary_length/default")),
            Some(&want),
            "{format}: {t}"
        );
    }
}
