//! Seed 004's `config/tools.json`: tools built from workflows by writing arguments into node
//! inputs; bad entries are load problems naming the file, the line and the field.

use serde_json::json;
use tavern::internal::tools::Caller;
use tavern::Engine;

const TEMPLATE: &str = r#"{
  "id": "tpl",
  "nodes": [
    { "id": "9", "type": "core:String", "inputValues": { "value": "" } },
    { "id": "n", "type": "core:Integer", "inputValues": { "value": 0 } },
    { "id": "join", "type": "core:Concat", "inputValues": { "separator": "/" } }
  ],
  "edges": [
    { "source": "9", "sourceHandle": "value", "target": "join", "targetHandle": "items" },
    { "source": "n", "sourceHandle": "value", "target": "join", "targetHandle": "items" }
  ]
}"#;

fn home(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(dir.path().join("config/tpl.json"), TEMPLATE).unwrap();
    std::fs::write(dir.path().join("config/tools.json"), config).unwrap();
    dir
}

#[tokio::test]
async fn arguments_go_into_node_inputs_and_generated_fields_are_fresh() {
    let h = home(
        r#"{"tools": [{"name": "joined", "workflow": "tpl.json", "fields": [
        {"name": "text", "type": "string", "mapping": {"nodeId": 9, "field": "value"}},
        {"name": "n", "type": "integer", "mapping": {"nodeId": "n", "field": "value"},
         "generation": {"strategy": "randomInt", "min": 1, "max": 1000000000}}]}]}"#,
    );
    let engine = Engine::builder()
        .home(h.path())
        .plugins(false)
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    let tool = engine.tools().get("joined").unwrap();
    assert_eq!(tool.wire_name(), "joined");
    let p = &tool.definition.parameters;
    assert_eq!(p["required"], json!(["text"]));
    assert_eq!(p["additionalProperties"], json!(false));
    let given = engine
        .tools()
        .invoke("joined", json!({"text": "a", "n": 7}), Caller::Host)
        .await
        .unwrap();
    assert_eq!(given, json!("a/7"));
    let a = engine
        .tools()
        .invoke("joined", json!({"text": "a"}), Caller::Host)
        .await
        .unwrap();
    let b = engine
        .tools()
        .invoke("joined", json!({"text": "a"}), Caller::Host)
        .await
        .unwrap();
    assert_ne!(a, b, "a generated seed is fresh per call");
    let e = engine
        .tools()
        .invoke("joined", json!({}), Caller::Host)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "invalid_parameters");
}

#[test]
fn bad_entries_name_file_line_and_field() {
    let config = r#"{"tools": [
  {"name": "good", "workflow": "tpl.json", "fields": [
    {"name": "text", "type": "string", "mapping": {"nodeId": 9, "field": "value"}}]},
  {"name": "bad_node", "workflow": "tpl.json", "fields": [
    {"name": "text", "type": "string",
     "mapping": {"nodeId": 99, "field": "value"}}]},
  {"name": "bad_strategy", "workflow": "tpl.json", "fields": [
    {"name": "seed", "type": "integer", "mapping": {"nodeId": "n", "field": "value"},
     "generation": {"strategy": "dice"}}]},
  {"name": "bad_workflow", "workflow": "missing.json", "fields": []}
]}"#;
    let h = home(config);
    let engine = Engine::builder()
        .home(h.path())
        .plugins(false)
        .build()
        .unwrap();
    assert!(
        engine.tools().get("good").is_ok(),
        "good entries still load"
    );
    for bad in ["bad_node", "bad_strategy", "bad_workflow"] {
        assert!(engine.tools().get(bad).is_err(), "{bad} must not load");
    }
    let text: Vec<String> = engine.problems().iter().map(|p| p.to_string()).collect();
    let find = |needle: &str| {
        text.iter()
            .find(|p| p.contains(needle))
            .unwrap_or_else(|| panic!("no problem mentions {needle}: {text:#?}"))
            .clone()
    };
    let p = find("fields[0].mapping.nodeId");
    assert!(p.contains("tools.json:5:"), "file and line: {p}");
    assert!(p.contains("no node '99'"), "{p}");
    let p = find("fields[0].generation");
    assert!(
        p.contains("tools.json:8:") && p.contains("unknown strategy 'dice'"),
        "{p}"
    );
    let p = find("field `workflow`");
    assert!(
        p.contains("tools.json:10:") && p.contains("missing.json"),
        "{p}"
    );
}
