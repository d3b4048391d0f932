//! `core:Script` nodes with real Lua and Rhai: values in and out, failures, limits, and two
//! script branches started side by side.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tavern::internal::tools::{Caller, ToolError};
use tavern::internal::workflow::{
    compile, NodeError, NodeRegistry, NodeStatus, RunOptions, RunStatus, Workflow, WorkflowEvent,
};

fn wf(v: Value) -> Workflow {
    Workflow::from_json(&v.to_string(), Path::new("script_test.json")).expect("parses")
}

/// Two script nodes (`left`, `right`) fed the same inputs, joined by a Concat.
fn two_branches(left: (&str, &str), right: (&str, &str)) -> Workflow {
    wf(json!({
        "id": "two",
        "interfaceOutputs": {"joined": {"dataFlowType": "STRING"}, "left": {}, "right": {}},
        "nodes": [
            {"id": "args", "type": "core:Json", "inputValues": {"value": {"a": 6, "b": 7, "name": "Ada"}}},
            {"id": "left", "type": "core:Script", "inputValues": {"language": left.0, "code": left.1}},
            {"id": "right", "type": "core:Script", "inputValues": {"language": right.0, "code": right.1}},
            {"id": "join", "type": "core:Concat", "inputValues": {"separator": "|"},
             "inputConnectionOrders": {"items": ["l", "r"]}},
            {"id": "out", "type": "core:GroupOutput"}
        ],
        "edges": [
            {"source": "args", "sourceHandle": "value", "target": "left", "targetHandle": "inputs"},
            {"source": "args", "sourceHandle": "value", "target": "right", "targetHandle": "inputs"},
            {"id": "l", "source": "left", "sourceHandle": "result", "target": "join", "targetHandle": "items"},
            {"id": "r", "source": "right", "sourceHandle": "result", "target": "join", "targetHandle": "items"},
            {"source": "join", "sourceHandle": "text", "target": "out", "targetHandle": "joined"},
            {"source": "left", "sourceHandle": "output", "target": "out", "targetHandle": "left"},
            {"source": "right", "sourceHandle": "output", "target": "out", "targetHandle": "right"}
        ]
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_and_rhai_nodes_compute_with_inputs() {
    let reg = NodeRegistry::with_builtins();
    let w = two_branches(
        (
            "lua",
            "print('hi from ' .. inputs.name)\nreturn inputs.a * inputs.b",
        ),
        (
            "rhai",
            "print(`rhai sees ${inputs.name}`); inputs.a + inputs.b",
        ),
    );
    let out = compile(&w, &reg)
        .unwrap()
        .run(Map::new(), RunOptions::default())
        .await
        .unwrap()
        .into_outputs()
        .unwrap();
    assert_eq!(out["joined"], json!("42|13"));
    assert_eq!(out["left"], json!("hi from Ada\n"));
    assert!(
        out["right"].as_str().unwrap().contains("rhai sees Ada"),
        "{}",
        out["right"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_branches_start_together() {
    let reg = NodeRegistry::with_builtins();
    let w = two_branches(
        (
            "lua",
            "local s = 0 for i = 1, 200000 do s = s + i end return s",
        ),
        ("rhai", "let s = 0; for i in 1..20000 { s += i; } s"),
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let r = compile(&w, &reg)
        .unwrap()
        .run(
            Map::new(),
            RunOptions {
                events: Some(tx),
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.outputs["joined"], json!("20000100000|199990000"));
    let mut order = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        match ev {
            WorkflowEvent::NodeStarted { node, .. } if &*node != "args" => {
                order.push(format!("start {node}"))
            }
            WorkflowEvent::NodeFinished { node, .. } if &*node == "left" || &*node == "right" => {
                order.push("finish".into())
            }
            _ => {}
        }
    }
    // Both script nodes were under way before either finished.
    assert_eq!(
        &order[..3],
        &[
            "start left".to_string(),
            "start right".into(),
            "finish".into()
        ],
        "{order:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_script_fails_its_branch_only() {
    let reg = NodeRegistry::with_builtins();
    let w = two_branches(
        ("lua", "return inputs.a +"),
        ("rhai", "inputs.a - inputs.b"),
    );
    let r = compile(&w, &reg)
        .unwrap()
        .run(
            Map::new(),
            RunOptions {
                node_report: true,
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Failed);
    let left = r.nodes.iter().find(|n| n.id == "left").unwrap();
    match &left.status {
        NodeStatus::Failed {
            error: NodeError::Tool(e),
        } => assert!(e.to_string().contains("core:Script"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.nodes.iter().find(|n| n.id == "right").unwrap().status,
        NodeStatus::Succeeded
    );
    assert_eq!(r.outputs.get("right"), Some(&json!("")));
    assert!(r.outputs.get("joined").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_scripts_end_in_a_limit_error() {
    let reg = NodeRegistry::with_builtins();
    for (lang, code) in [("lua", "while true do end"), ("rhai", "loop { }")] {
        let w = wf(json!({"id": "spin", "nodes": [
            {"id": "s", "type": "core:Script", "inputValues": {"language": lang, "code": code}}
        ]}));
        let t0 = Instant::now();
        let r = compile(&w, &reg)
            .unwrap()
            .run(
                Map::new(),
                RunOptions {
                    node_report: true,
                    ..RunOptions::default()
                },
            )
            .await
            .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(15), "{lang}: hang bound");
        match &r.nodes[0].status {
            NodeStatus::Failed {
                error: NodeError::Tool(t),
            } if matches!(
                **t,
                ToolError::LimitExceeded { .. } | ToolError::Timeout { .. }
            ) => {}
            other => panic!("{lang}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundled_script_workflow_runs_as_a_tool() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("workflows")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows/number_summary.json"),
        home.path().join("workflows/number_summary.json"),
    )
    .unwrap();
    let e = tavern::Engine::builder()
        .home(home.path())
        .plugins(false)
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    let v = e
        .tools()
        .invoke(
            "workflow:number_summary",
            json!({"numbers": [2, 4, 4, 4, 5, 5, 7, 9]}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert_eq!(
        v,
        json!({"count": 8, "mean": 5.0, "stddev": 2.0, "min": 2, "max": 9})
    );
}
