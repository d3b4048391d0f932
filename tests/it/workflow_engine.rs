//! The engine: validation lists every problem; the scheduler runs diamonds and fan-outs,
//! keeps healthy branches alive beside failing ones, honours timeouts and cancellation, and
//! reports events in order.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tavern::internal::workflow::{
    compile, Invalid, NodeError, NodeRegistry, NodeStatus, RunOptions, RunStatus, Workflow,
    WorkflowError, WorkflowEvent,
};

fn registry() -> NodeRegistry {
    NodeRegistry::with_builtins()
}

fn wf(v: Value) -> Workflow {
    Workflow::from_json(&v.to_string(), Path::new("test.json")).expect("test workflow parses")
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn report_opts() -> RunOptions {
    RunOptions {
        node_report: true,
        ..RunOptions::default()
    }
}

fn status_of<'a>(r: &'a tavern::internal::workflow::RunReport, id: &str) -> &'a NodeStatus {
    &r.nodes
        .iter()
        .find(|n| n.id == id)
        .expect("node in report")
        .status
}

/// in → (a: +1, b: *2) → sum(a, b) → out
fn diamond() -> Workflow {
    wf(json!({
        "id": "diamond",
        "interfaceInputs": {"x": {"dataFlowType": "INTEGER", "required": true}},
        "interfaceOutputs": {"y": {"dataFlowType": "FLOAT"}},
        "nodes": [
            {"id": "in", "type": "core:GroupInput"},
            {"id": "a", "type": "core:Math", "inputValues": {"op": "add", "b": 1}},
            {"id": "b", "type": "core:Math", "inputValues": {"op": "mul", "b": 2}},
            {"id": "sum", "type": "core:Math", "inputValues": {"op": "add"}},
            {"id": "out", "type": "core:GroupOutput"}
        ],
        "edges": [
            {"source": "in", "sourceHandle": "x", "target": "a", "targetHandle": "a"},
            {"source": "in", "sourceHandle": "x", "target": "b", "targetHandle": "a"},
            {"source": "a", "sourceHandle": "result", "target": "sum", "targetHandle": "a"},
            {"source": "b", "sourceHandle": "result", "target": "sum", "targetHandle": "b"},
            {"source": "sum", "sourceHandle": "result", "target": "out", "targetHandle": "y"}
        ]
    }))
}

#[tokio::test]
async fn diamond_computes_through_both_arms() {
    let plan = compile(&diamond(), &registry()).unwrap();
    for (x, y) in [(1, 4), (5, 16), (-3, -8)] {
        let out = plan
            .run(args(json!({"x": x})), RunOptions::default())
            .await
            .unwrap()
            .into_outputs()
            .unwrap();
        assert_eq!(out["y"], json!(y), "x = {x}");
    }
    // A string argument is converted to the declared INTEGER.
    let out = plan
        .run(args(json!({"x": "7"})), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.outputs["y"], json!(22));
}

#[tokio::test]
async fn fan_out_fan_in_keeps_connection_order() {
    // One source feeds five templates; a multi input gathers them in inputConnectionOrders.
    let mut nodes =
        vec![json!({"id": "src", "type": "core:String", "inputValues": {"value": "w"}})];
    let mut edges = Vec::new();
    for i in 0..5 {
        nodes.push(json!({"id": format!("t{i}"), "type": "core:Template",
            "inputValues": {"template": format!("{i}:{{{{v}}}}")}}));
        nodes.push(json!({"id": format!("o{i}"), "type": "core:BuildObject",
            "inputValues": {"keys": ["v"]}}));
        edges.push(json!({"source": "src", "sourceHandle": "value", "target": format!("o{i}"), "targetHandle": "values"}));
        edges.push(json!({"source": format!("o{i}"), "sourceHandle": "object", "target": format!("t{i}"), "targetHandle": "vars"}));
        edges.push(json!({"id": format!("e{i}"), "source": format!("t{i}"), "sourceHandle": "text", "target": "join", "targetHandle": "items"}));
    }
    nodes.push(
        json!({"id": "join", "type": "core:Concat", "inputValues": {"separator": ","},
        "inputConnectionOrders": {"items": ["e4", "e2", "e0", "e1", "e3"]}}),
    );
    nodes.push(json!({"id": "out", "type": "core:GroupOutput"}));
    edges.push(
        json!({"source": "join", "sourceHandle": "text", "target": "out", "targetHandle": "text"}),
    );
    let w = wf(json!({"id": "fan", "nodes": nodes, "edges": edges,
        "interfaceOutputs": {"text": {"dataFlowType": "STRING"}}}));
    let r = compile(&w, &registry())
        .unwrap()
        .run(Map::new(), report_opts())
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Succeeded);
    assert_eq!(r.outputs["text"], json!("4:w,2:w,0:w,1:w,3:w"));
    assert!(r.nodes.iter().all(|n| n.status == NodeStatus::Succeeded));
}

#[tokio::test]
async fn failing_branch_skips_descendants_and_healthy_branch_finishes() {
    let w = wf(json!({
        "id": "halves",
        "interfaceOutputs": {"good": {"dataFlowType": "FLOAT"}, "bad": {"dataFlowType": "FLOAT"}},
        "nodes": [
            {"id": "ok1", "type": "core:Math", "inputValues": {"a": 2, "b": 3, "op": "mul"}},
            {"id": "ok2", "type": "core:Math", "inputValues": {"b": 1}},
            {"id": "boom", "type": "core:Math", "inputValues": {"a": 1, "b": 0, "op": "div"}},
            {"id": "after1", "type": "core:Math", "inputValues": {"b": 1}},
            {"id": "after2", "type": "core:Math", "inputValues": {"b": 1}},
            {"id": "out", "type": "core:GroupOutput"}
        ],
        "edges": [
            {"source": "ok1", "sourceHandle": "result", "target": "ok2", "targetHandle": "a"},
            {"source": "ok2", "sourceHandle": "result", "target": "out", "targetHandle": "good"},
            {"source": "boom", "sourceHandle": "result", "target": "after1", "targetHandle": "a"},
            {"source": "after1", "sourceHandle": "result", "target": "after2", "targetHandle": "a"},
            {"source": "after2", "sourceHandle": "result", "target": "out", "targetHandle": "bad"}
        ]
    }));
    let r = compile(&w, &registry())
        .unwrap()
        .run(Map::new(), report_opts())
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.outputs.get("good"), Some(&json!(7)));
    assert!(r.outputs.get("bad").is_none());
    assert_eq!(status_of(&r, "ok2"), &NodeStatus::Succeeded);
    assert!(matches!(
        status_of(&r, "boom"),
        NodeStatus::Failed {
            error: NodeError::InvalidInput { .. }
        }
    ));
    for skipped in ["after1", "after2"] {
        match status_of(&r, skipped) {
            NodeStatus::Skipped { reason } => assert!(reason.contains("'boom'"), "{reason}"),
            other => panic!("{skipped}: {other:?}"),
        }
    }
    // GroupOutput depends on the failure too, so it is skipped.
    assert!(matches!(status_of(&r, "out"), NodeStatus::Skipped { .. }));
    let err = r.into_outputs().unwrap_err();
    match &err {
        WorkflowError::NodeFailed {
            node, node_type, ..
        } => {
            assert_eq!(node, "boom");
            assert_eq!(node_type, "core:Math");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("division by zero"), "{err}");
}

fn invalid(w: &Workflow) -> Vec<Invalid> {
    match compile(w, &registry()) {
        Err(WorkflowError::Invalid { problems, .. }) => problems,
        Err(other) => panic!("expected Invalid, got {other:?}"),
        Ok(_) => panic!("expected Invalid, got a plan"),
    }
}

#[test]
fn cycle_is_refused_and_named() {
    let w = wf(json!({
        "id": "loop",
        "nodes": [
            {"id": "start", "type": "core:Math", "inputValues": {"a": 1}},
            {"id": "a", "type": "core:Math"},
            {"id": "b", "type": "core:Math"},
            {"id": "c", "type": "core:Math"},
            {"id": "self", "type": "core:Math"}
        ],
        "edges": [
            {"source": "start", "sourceHandle": "result", "target": "a", "targetHandle": "b"},
            {"source": "a", "sourceHandle": "result", "target": "b", "targetHandle": "a"},
            {"source": "b", "sourceHandle": "result", "target": "c", "targetHandle": "a"},
            {"source": "c", "sourceHandle": "result", "target": "a", "targetHandle": "a"},
            {"source": "self", "sourceHandle": "result", "target": "self", "targetHandle": "a"}
        ]
    }));
    let problems = invalid(&w);
    let cycles: Vec<Vec<String>> = problems
        .iter()
        .filter_map(|p| match p {
            Invalid::Cycle { nodes } => Some(nodes.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        cycles,
        vec![
            vec!["a".to_string(), "b".into(), "c".into()],
            vec!["self".to_string()]
        ]
    );
    let text = WorkflowError::Invalid {
        workflow: "loop".into(),
        problems,
    }
    .to_string();
    assert!(text.contains("a -> b -> c -> a"), "{text}");
}

#[test]
fn every_problem_is_listed_at_once() {
    let w = wf(json!({
        "id": "broken",
        "nodes": [
            {"id": "t", "type": "core:Templat"},
            {"id": "m", "type": "core:Math"},
            {"id": "s", "type": "core:String", "inputValues": {"value": "x"}},
            {"id": "j", "type": "core:Join"},
            {"id": "m2", "type": "core:Math", "inputValues": {"a": 1}},
            {"id": "split", "type": "core:Split"}
        ],
        "edges": [
            {"id": "e1", "source": "s", "sourceHandle": "value", "target": "j", "targetHandle": "items"},
            {"id": "e2", "source": "ghost", "sourceHandle": "x", "target": "m", "targetHandle": "a"},
            {"id": "e3", "source": "m2", "sourceHandle": "nope", "target": "m", "targetHandle": "b"},
            {"id": "e4", "source": "m2", "sourceHandle": "result", "target": "split", "targetHandle": "text"}
        ]
    }));
    let problems = invalid(&w);
    let expected = vec![
        Invalid::UnknownNodeType {
            node: "t".into(),
            node_type: "core:Templat".into(),
            suggestion: Some("core:Template".into()),
        },
        Invalid::TypeMismatch {
            edge: "e1".into(),
            source: "s".into(),
            source_handle: "value".into(),
            from: tavern::internal::workflow::DataFlowType::String,
            target: "j".into(),
            target_handle: "items".into(),
            to: tavern::internal::workflow::DataFlowType::Array,
        },
        Invalid::MissingNode {
            edge: "e2".into(),
            end: "source",
            node: "ghost".into(),
        },
        Invalid::MissingHandle {
            edge: "e3".into(),
            node: "m2".into(),
            end: "sourceHandle",
            handle: "nope".into(),
            available: vec!["result".into()],
        },
        Invalid::TypeMismatch {
            edge: "e4".into(),
            source: "m2".into(),
            source_handle: "result".into(),
            from: tavern::internal::workflow::DataFlowType::Float,
            target: "split".into(),
            target_handle: "text".into(),
            to: tavern::internal::workflow::DataFlowType::String,
        },
        Invalid::MissingInput {
            node: "m".into(),
            slot: "a".into(),
        },
    ];
    assert_eq!(problems, expected);
    let text = WorkflowError::Invalid {
        workflow: "broken".into(),
        problems,
    }
    .to_string();
    assert!(text.contains("did you mean 'core:Template'"), "{text}");
    assert!(text.contains("node 'm': required input 'a'"), "{text}");
}

#[test]
fn type_rules_are_as_documented() {
    use tavern::internal::workflow::DataFlowType as T;
    let cases = [
        (T::Integer, T::Float, true),
        (T::Float, T::Integer, false),
        (T::String, T::Wildcard, true),
        (T::ConvertibleAny, T::Object, true),
        (T::Integer, T::String, false),
        (T::Binary, T::String, false),
        (T::Array, T::Array, true),
    ];
    for (from, to, ok) in cases {
        assert_eq!(from.connects_to(to), ok, "{from} -> {to}");
    }
}

#[test]
fn missing_required_interface_argument_is_refused() {
    let plan = compile(&diamond(), &registry()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(plan.run(args(json!({"z": 1})), RunOptions::default()))
        .unwrap_err();
    match err {
        WorkflowError::Arguments { problems, .. } => {
            assert_eq!(
                problems,
                vec![
                    "missing required argument 'x'".to_string(),
                    "unknown argument 'z'".into()
                ]
            );
        }
        other => panic!("{other:?}"),
    }
}

fn sleepy(ms_a: u64, ms_b: u64) -> Workflow {
    wf(json!({
        "id": "sleepy",
        "interfaceOutputs": {"a": {}, "b": {}},
        "nodes": [
            {"id": "slow", "type": "core:Delay", "inputValues": {"ms": ms_a, "value": "A"}},
            {"id": "fast", "type": "core:Delay", "inputValues": {"ms": ms_b, "value": "B"}},
            {"id": "out", "type": "core:GroupOutput"}
        ],
        "edges": [
            {"source": "slow", "sourceHandle": "value", "target": "out", "targetHandle": "a"},
            {"source": "fast", "sourceHandle": "value", "target": "out", "targetHandle": "b"}
        ]
    }))
}

#[tokio::test]
async fn node_timeout_fails_only_that_node() {
    let plan = compile(&sleepy(30_000, 1), &registry()).unwrap();
    let t0 = Instant::now();
    let r = plan
        .run(
            Map::new(),
            RunOptions {
                node_timeout: Some(Duration::from_millis(200)),
                ..report_opts()
            },
        )
        .await
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "hang bound");
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(
        status_of(&r, "slow"),
        &NodeStatus::Failed {
            error: NodeError::Timeout(200)
        }
    );
    assert_eq!(status_of(&r, "fast"), &NodeStatus::Succeeded);
}

#[tokio::test]
async fn workflow_timeout_stops_the_run() {
    let plan = compile(&sleepy(30_000, 30_000), &registry()).unwrap();
    let t0 = Instant::now();
    let r = plan
        .run(
            Map::new(),
            RunOptions {
                timeout: Some(Duration::from_millis(200)),
                ..report_opts()
            },
        )
        .await
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "hang bound");
    assert_eq!(r.status, RunStatus::TimedOut);
    assert!(matches!(
        status_of(&r, "slow"),
        NodeStatus::Failed {
            error: NodeError::Cancelled
        }
    ));
    assert!(matches!(status_of(&r, "out"), NodeStatus::Skipped { .. }));
    let err = r.into_outputs().unwrap_err();
    assert_eq!(
        err,
        WorkflowError::Timeout {
            workflow: "sleepy".into(),
            after_ms: 200
        }
    );
}

#[tokio::test]
async fn cancellation_stops_the_run() {
    let plan = Arc::new(compile(&sleepy(30_000, 30_000), &registry()).unwrap());
    let cancel = tokio_util::sync::CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c2.cancel();
    });
    let t0 = Instant::now();
    let r = plan
        .run(
            Map::new(),
            RunOptions {
                cancel,
                ..report_opts()
            },
        )
        .await
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "hang bound");
    assert_eq!(r.status, RunStatus::Cancelled);
    assert!(matches!(
        r.into_outputs(),
        Err(WorkflowError::Cancelled { .. })
    ));
}

#[tokio::test]
async fn concurrency_limit_of_one_still_finishes() {
    let plan = compile(&sleepy(20, 20), &registry()).unwrap();
    let r = plan
        .run(
            Map::new(),
            RunOptions {
                concurrency: 1,
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.into_outputs().unwrap(), args(json!({"a": "A", "b": "B"})));
}

#[tokio::test]
async fn events_arrive_in_order() {
    // a → b chain, c fails (so d is skipped).
    let w = wf(json!({
        "id": "ev",
        "nodes": [
            {"id": "a", "type": "core:Math", "inputValues": {"a": 1}},
            {"id": "b", "type": "core:Delay", "inputValues": {"ms": 5}},
            {"id": "c", "type": "core:JsonParse", "inputValues": {"text": "{oops"}},
            {"id": "d", "type": "core:JsonStringify"}
        ],
        "edges": [
            {"source": "a", "sourceHandle": "result", "target": "b", "targetHandle": "value"},
            {"source": "c", "sourceHandle": "value", "target": "d", "targetHandle": "value"}
        ]
    }));
    let plan = compile(&w, &registry()).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let r = plan
        .run(
            Map::new(),
            RunOptions {
                events: Some(tx),
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Failed);
    let mut seen = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        seen.push(match ev {
            WorkflowEvent::WorkflowStarted { nodes, .. } => format!("start {nodes}"),
            WorkflowEvent::NodeStarted { node, .. } => format!("started {node}"),
            WorkflowEvent::NodeFinished { node, .. } => format!("finished {node}"),
            WorkflowEvent::NodeFailed { node, .. } => format!("failed {node}"),
            WorkflowEvent::NodeSkipped { node, .. } => format!("skipped {node}"),
            WorkflowEvent::WorkflowFinished { status, .. } => format!("end {status:?}"),
        });
    }
    assert_eq!(
        seen,
        vec![
            "start 4",
            "started a",
            "finished a",
            "started c",
            "failed c",
            "skipped d",
            "started b",
            "finished b",
            "end Failed",
        ]
    );
}

#[tokio::test]
async fn a_panicking_node_fails_alone() {
    let reg = registry();
    reg.register_fn(
        tavern::internal::workflow::NodeDefinition::new("test:Panic", "panics").output(
            "x",
            tavern::internal::workflow::SlotDefinition::new(
                tavern::internal::workflow::DataFlowType::Wildcard,
            ),
        ),
        |_, _| panic!("deliberate"),
    )
    .unwrap();
    let w = wf(json!({"id": "p", "nodes": [
        {"id": "p", "type": "test:Panic"},
        {"id": "ok", "type": "core:String", "inputValues": {"value": "fine"}}
    ]}));
    let r = compile(&w, &reg)
        .unwrap()
        .run(Map::new(), report_opts())
        .await
        .unwrap();
    assert!(
        matches!(status_of(&r, "p"), NodeStatus::Failed { error: NodeError::Panicked(m) } if m == "deliberate")
    );
    assert_eq!(status_of(&r, "ok"), &NodeStatus::Succeeded);
}
