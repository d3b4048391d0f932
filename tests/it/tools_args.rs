//! Data-driven key matching, conversion and validation cases: schema + arguments → the
//! arguments a handler sees, or the exact problem sentences (tests/data/tool_args_cases.json).

use serde_json::Value;
use tavern::internal::tools::{KeyMatching, ToolDefinition, ToolError, ToolManager};

#[test]
fn argument_cases() {
    let data: Value = serde_json::from_str(include_str!("../data/tool_args_cases.json"))
        .expect("valid test data");
    let tools = ToolManager::new();
    for (name, schema) in data["schemas"].as_object().expect("schemas") {
        tools
            .register_fn(
                ToolDefinition::host(format!("t:{name}"), "test", schema.clone()),
                |_, a| Ok(a),
            )
            .unwrap_or_else(|e| panic!("schema {name}: {e}"));
    }
    let mut failures = Vec::new();
    let cases = data["cases"].as_array().expect("cases");
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let id = format!("t:{}", case["schema"].as_str().expect("schema"));
        let mode = match case.get("mode").and_then(Value::as_str) {
            Some("exact") => KeyMatching::Exact,
            _ => KeyMatching::Loose,
        };
        let got = tools
            .prepare(&id, case["args"].clone(), mode)
            .map(|(_, a)| a);
        match (case.get("expect"), case.get("problems"), got) {
            (Some(want), None, Ok(got)) if *want == got => {}
            (None, Some(want), Err(ToolError::InvalidParameters { problems, .. }))
                if *want == serde_json::json!(problems) => {}
            (_, _, got) => failures.push(format!("{name}: got {got:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
