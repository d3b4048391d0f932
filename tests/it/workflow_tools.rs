//! Workflows and nodes as tools: the seed 003 schema, bundled workflows called as
//! `workflow:<id>`, a node called as a tool, load problems, recursion.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tavern::internal::tools::{Caller, ToolError};
use tavern::internal::workflow::{
    node_tool_definition, workflow_tool_schema, NodeRegistry, Workflow,
};
use tavern::Engine;

fn data(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/workflow")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn bundled() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows")
}

/// A home directory holding copies of the bundled workflows.
fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("workflows");
    std::fs::create_dir(&wf).unwrap();
    for e in std::fs::read_dir(bundled()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, wf.join(p.file_name().unwrap())).unwrap();
    }
    dir
}

fn engine(home: &Path) -> Engine {
    Engine::builder().home(home).plugins(false).build().unwrap()
}

#[test]
fn seed_003_interface_gives_exactly_the_printed_schema() {
    let wf = Workflow::from_json(
        &data("seed003_interface.json"),
        Path::new("summarize_text.json"),
    )
    .unwrap();
    let expected: Value = serde_json::from_str(&data("seed003_schema.json")).unwrap();
    let got = workflow_tool_schema(&wf);
    assert_eq!(got, expected);
    // Same keys in the same order, too.
    assert_eq!(got.to_string(), expected.to_string());
}

#[test]
fn bundled_summarize_text_has_the_seed_schema() {
    let wf = Workflow::load(&bundled().join("summarize_text.json")).unwrap();
    let expected: Value = serde_json::from_str(&data("seed003_schema.json")).unwrap();
    assert_eq!(workflow_tool_schema(&wf), expected);
}

#[test]
fn every_bundled_workflow_loads_and_becomes_a_tool() {
    let home = home();
    let e = engine(home.path());
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    let mut ids: Vec<String> = e
        .tools()
        .list()
        .iter()
        .map(|t| t.id().to_string())
        .filter(|id| id.starts_with("workflow:"))
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        vec![
            "workflow:character_intro",
            "workflow:greet_guest",
            "workflow:greet_with_ticket",
            "workflow:number_summary",
            "workflow:summarize_text",
            "workflow:text_stats",
        ]
    );
}

#[tokio::test]
async fn bundled_workflows_run_as_tools() {
    let home = home();
    let e = engine(home.path());
    let call = |id: &'static str, args: Value| {
        let tools = e.tools().clone();
        async move { tools.invoke(id, args, Caller::Cli).await }
    };
    let text = "第一句话。第二句话！第三句话？第四句话。第五句话。";
    let cases = [
        (
            json!({"text_to_summarize": text}),
            json!("第一句话。第二句话！"),
        ),
        (
            json!({"text_to_summarize": text, "summary_length": "简短"}),
            json!("第一句话。"),
        ),
        (
            json!({"text_to_summarize": text, "summary_length": "详细"}),
            json!("第一句话。第二句话！第三句话？第四句话。"),
        ),
        (
            json!({"text_to_summarize": "One. Two!  Three? Four."}),
            json!("One. Two!"),
        ),
    ];
    for (args, want) in cases {
        let got = call("workflow:summarize_text", args.clone()).await.unwrap();
        assert_eq!(got, want, "{args}");
    }
    // The enum is enforced by the ToolManager's schema validation.
    let err = call(
        "workflow:summarize_text",
        json!({"text_to_summarize": "x", "summary_length": "huge"}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidParameters { .. }),
        "{err:?}"
    );

    let stats = call("workflow:text_stats", json!({"text": "a b c\nd e"}))
        .await
        .unwrap();
    assert_eq!(
        stats,
        json!({"stats": {"words": 5, "lines": 2, "characters": 9},
               "report": "5 words, 2 lines, 9 characters."})
    );

    let intro = call(
        "workflow:character_intro",
        json!({"character_name": "Ada", "traits": "brave,  curious ,stubborn", "tone": "dramatic"}),
    )
    .await
    .unwrap();
    assert_eq!(intro, json!("Behold Ada: brave, curious, stubborn."));

    let greet = call("workflow:greet_with_ticket", json!({"name": "Ada"}))
        .await
        .unwrap();
    let ticket = greet["ticket"].as_str().unwrap().to_string();
    assert_eq!(ticket.len(), 36, "a uuid: {ticket}");
    assert_eq!(
        greet["greeting"],
        json!(format!("Hello, Ada! Your ticket is {ticket}."))
    );
}

#[tokio::test]
async fn a_node_runs_as_a_tool() {
    let home = tempfile::tempdir().unwrap();
    let e = engine(home.path());
    let wfs = e.workflows();
    wfs.register_node_tool(e.tools(), "core:Math", None)
        .unwrap();
    wfs.register_node_tool(e.tools(), "core:Split", Some("text:split"))
        .unwrap();

    let def = e.tools().get("core:Math").unwrap().definition.clone();
    assert_eq!(def.implementation.kind(), "node");
    assert_eq!(def.parameters["required"], json!(["a"]));
    assert_eq!(def.parameters["properties"]["op"]["enum"][2], json!("mul"));
    assert_eq!(def.parameters["properties"]["a"]["type"], json!("number"));

    let t = e.tools();
    assert_eq!(
        t.invoke(
            "core:Math",
            json!({"a": 6, "b": 7, "op": "mul"}),
            Caller::Cli
        )
        .await
        .unwrap(),
        json!(42)
    );
    // String arguments are converted by the schema before the node sees them.
    assert_eq!(
        t.invoke("core:Math", json!({"a": "1.5", "b": "2"}), Caller::Cli)
            .await
            .unwrap(),
        json!(3.5)
    );
    // Two outputs → an object.
    assert_eq!(
        t.invoke(
            "text:split",
            json!({"text": "a,b", "separator": ","}),
            Caller::Cli
        )
        .await
        .unwrap(),
        json!({"items": ["a", "b"], "count": 2})
    );
    let err = t
        .invoke("core:Math", json!({"b": 1}), Caller::Cli)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidParameters { .. }),
        "{err:?}"
    );
    let err = t
        .invoke(
            "core:Math",
            json!({"a": 1, "b": 0, "op": "div"}),
            Caller::Cli,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("division by zero"), "{err}");
}

#[test]
fn node_tool_definition_is_inferred_from_inputs() {
    let reg = NodeRegistry::with_builtins();
    let def = node_tool_definition(&reg.get("core:Template").unwrap().definition, None);
    assert_eq!(def.id, "core:Template");
    assert_eq!(
        def.parameters,
        json!({"type": "object", "properties": {
            "template": {"type": "string", "description": "Text with {{placeholders}}."},
            "vars": {"type": "object", "description": "Values by name."}
        }, "required": ["template"]})
    );
}

#[test]
fn load_problems_name_file_line_node_and_field() {
    let home = home();
    let dir = home.path().join("workflows");
    std::fs::write(
        dir.join("bad_json.json"),
        "{\n  \"nodes\": [\n    {\"id\": \"a\",\n  ]\n}",
    )
    .unwrap();
    std::fs::write(
        dir.join("bad_field.json"),
        "{\n  \"nodes\": [\n    {\"id\": \"n1\", \"type\": \"core:Math\"},\n    {\"id\": \"n2\", \"type\": \"Math\"}\n  ]\n}",
    )
    .unwrap();
    std::fs::write(
        dir.join("bad_graph.json"),
        r#"{"interfaceOutputs": {"r": {}},
"nodes": [
 {"id": "m", "type": "core:Math"},
 {"id": "out", "type": "core:GroupOutput"}],
"edges": [{"source": "m", "sourceHandle": "result", "target": "out", "targetHandle": "r"}]}"#,
    )
    .unwrap();
    let e = engine(home.path());
    let p: Vec<String> = e.problems().iter().map(ToString::to_string).collect();
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(
        p[0].contains("bad_field.json:4:") && p[0].contains("node 'n2': field `type`"),
        "{}",
        p[0]
    );
    assert!(
        p[1].contains("bad_graph.json:3:") && p[1].contains("node 'm': required input 'a'"),
        "{}",
        p[1]
    );
    assert!(
        p[2].contains("bad_json.json:4:") && p[2].contains("not valid JSON"),
        "{}",
        p[2]
    );
    // The good ones still load and serve.
    assert!(e.tools().get("workflow:summarize_text").is_ok());
}

#[tokio::test]
async fn a_workflow_calling_itself_stops_at_the_depth_limit() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("workflows")).unwrap();
    std::fs::write(
        home.path().join("workflows/ouroboros.json"),
        json!({
            "interfaceInputs": {"x": {"dataFlowType": "INTEGER"}},
            "interfaceOutputs": {"y": {}},
            "nodes": [
                {"id": "call", "type": "core:ToolCall", "inputValues": {"tool": "workflow:ouroboros", "args": {"x": 1}}},
                {"id": "out", "type": "core:GroupOutput"}
            ],
            "edges": [{"source": "call", "sourceHandle": "result", "target": "out", "targetHandle": "y"}]
        })
        .to_string(),
    )
    .unwrap();
    let e = engine(home.path());
    let err = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        e.tools()
            .invoke("workflow:ouroboros", json!({}), Caller::Cli),
    )
    .await
    .expect("hang bound")
    .unwrap_err();
    assert!(err.to_string().contains("nested deeper"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_is_called_through_tam_text() {
    let home = home();
    let e = engine(home.path());
    let text =
        "I will summarize it.\n<|[REQUEST_TOOL]|>\ntool_name:「始」workflow:summarize_text「末」\n\
                text_to_summarize:「始」First point. Second point. Third point.「末」\n\
                summary_length:「始」简短「末」\n<|[END_TOOL]|>";
    let parsed = tavern::internal::protocol::parse(text, tavern::internal::protocol::Format::Auto);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert_eq!(parsed.calls.len(), 1);
    assert_eq!(parsed.calls[0].tool, "workflow:summarize_text");
    let outcomes = e.tools().execute(&parsed.calls, Caller::Model(None)).await;
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].result, Ok(json!("First point.")));
    // The same through the engine facade.
    let (_, outcomes) = e
        .run(
            tavern::Request::text(text)
                .format(tavern::internal::protocol::Format::Auto)
                .caller(Caller::Model(None)),
        )
        .await
        .map(|r| (r.parsed, r.outcomes))
        .unwrap();
    assert_eq!(outcomes[0].result, Ok(json!("First point.")));
}
