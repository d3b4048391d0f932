//! The built-in nodes, data-driven: `tests/data/workflow/node_cases.json` holds
//! `{node, inputs, outputs | error | error_contains}` cases, each run through the node's
//! executor directly.

use std::path::Path;

use serde_json::{Map, Value};
use tavern::internal::workflow::{NodeContext, NodeRegistry};

#[tokio::test]
async fn builtin_node_cases() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/workflow/node_cases.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let reg = NodeRegistry::with_builtins();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let ty = case["node"].as_str().unwrap();
        let node = reg
            .get(ty)
            .unwrap_or_else(|| panic!("case {i}: no node {ty}"));
        // Defaults fill in as the scheduler would (inputValues, then config.default).
        let mut inputs: Map<String, Value> =
            case["inputs"].as_object().cloned().unwrap_or_default();
        for (k, slot) in node.definition.inputs.iter() {
            if let (false, Some(d)) = (inputs.contains_key(k), slot.default()) {
                inputs.insert(k.to_string(), d.clone());
            }
        }
        let got = node
            .executor
            .execute(NodeContext::detached("n", None), inputs, Map::new())
            .await;
        let ok = match (
            &got,
            case.get("outputs"),
            case.get("error"),
            case.get("error_contains"),
        ) {
            (Ok(out), Some(want), _, _) => Value::Object(out.clone()) == *want,
            (Err(e), _, Some(want), _) => e.to_string() == want.as_str().unwrap(),
            (Err(e), _, _, Some(part)) => e.to_string().contains(part.as_str().unwrap()),
            _ => false,
        };
        if !ok {
            failures.push(format!("case {i} ({ty} {}): got {got:?}", case["inputs"]));
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

#[test]
fn every_builtin_is_registered_once() {
    let reg = NodeRegistry::with_builtins();
    let types: Vec<String> = reg.definitions().into_iter().map(|d| d.node_type).collect();
    let expected = [
        "core:String",
        "core:Number",
        "core:Integer",
        "core:Boolean",
        "core:Json",
        "core:Template",
        "core:Concat",
        "core:Split",
        "core:Join",
        "core:Slice",
        "core:RegexReplace",
        "core:Math",
        "core:JsonParse",
        "core:JsonStringify",
        "core:JsonGet",
        "core:BuildObject",
        "core:BuildArray",
        "core:SetField",
        "core:Compare",
        "core:If",
        "core:ToolCall",
        "core:Delay",
        "core:Script",
    ];
    assert_eq!(types, expected);
    for d in reg.definitions() {
        assert!(
            !d.description.is_empty(),
            "{} has no description",
            d.node_type
        );
        assert!(d.category.is_some(), "{} has no category", d.node_type);
    }
}

#[test]
fn duplicate_or_bare_types_are_refused() {
    let reg = NodeRegistry::with_builtins();
    let def = tavern::internal::workflow::NodeDefinition::new("core:Math", "again");
    let e = reg.register_fn(def, |_, _| Ok(Map::new())).unwrap_err();
    assert!(e.to_string().contains("already registered"), "{e}");
    let e = reg
        .register_fn(
            tavern::internal::workflow::NodeDefinition::new("Shout", "x"),
            |_, _| Ok(Map::new()),
        )
        .unwrap_err();
    assert!(e.to_string().contains("no namespace"), "{e}");
    let mut def = tavern::internal::workflow::NodeDefinition::new("Shout", "x");
    def.namespace = Some("fun".into());
    reg.register_fn(def, |_, _| Ok(Map::new())).unwrap();
    assert!(reg.get("fun:Shout").is_some());
    assert!(reg.unregister("fun:Shout"));
}

#[test]
fn node_definitions_read_comfytavern_shape() {
    let def: tavern::internal::workflow::NodeDefinition =
        serde_json::from_value(serde_json::json!({
            "type": "Shout", "namespace": "fun", "category": "Text", "displayName": "Shout",
            "description": "Upper-cases text.",
            "inputs": {"text": {"dataFlowType": "STRING", "required": true,
                                "config": {"default": "", "suggestions": ["a", {"value": "b"}]}}},
            "outputs": {"text": {"dataFlowType": "STRING"}}
        }))
        .unwrap();
    assert_eq!(def.full_type().unwrap(), "fun:Shout");
    let slot = def.inputs.get("text").unwrap();
    assert!(slot.required);
    assert_eq!(slot.config.as_ref().unwrap().suggestions.len(), 2);
    assert_eq!(
        slot.config.as_ref().unwrap().suggestions[1].0,
        serde_json::json!("b")
    );
}
