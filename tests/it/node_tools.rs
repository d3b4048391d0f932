//! Every node is a tool: `node:<type>` with no configuration, parameters from the node's
//! inputs, the node's output as the result.

use serde_json::json;
use tavern::internal::tools::{Caller, Implementation};
use tavern::Engine;

#[tokio::test]
async fn every_node_type_is_callable_as_node_type() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder().home(dir.path()).build().unwrap();
    let tools = engine.tools();
    let math = tools
        .get("node:core:Math")
        .expect("node:core:Math resolves");
    assert_eq!(math.id(), "node:core.Math");
    assert_eq!(math.wire_name(), "node_core_Math");
    assert!(matches!(
        &math.definition.implementation,
        Implementation::Node { node_type } if node_type == "core:Math"
    ));
    assert_eq!(
        math.definition.parameters["properties"]["a"]["type"],
        json!("number")
    );
    for spelling in ["node:core:Math", "node:core.Math", "node_core_Math"] {
        let v = tools
            .invoke(spelling, json!({"a": 2, "b": 3, "op": "add"}), Caller::Host)
            .await
            .unwrap();
        assert_eq!(v, json!(5), "{spelling}");
    }
    let listed: Vec<String> = tools.list().iter().map(|t| t.id().to_string()).collect();
    assert!(
        listed.iter().any(|i| i == "node:core.Template"),
        "{listed:?}"
    );
    assert!(
        !listed
            .iter()
            .any(|i| i.contains("GroupInput") || i.contains("GroupOutput")),
        "group nodes only make sense inside a workflow"
    );
    let e = tools
        .invoke("node:core:Math", json!({"a": 1, "zzz": 1}), Caller::Host)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "invalid_parameters");
}
