//! Registration, id resolution, wire names, suggestions, replacement and listings.

use std::sync::Arc;

use serde_json::{json, Value};
use tavern::internal::tools::{id::is_wire_name, ToolDefinition, ToolError, ToolManager};

fn def(id: &str, params: Value) -> ToolDefinition {
    ToolDefinition::host(id, format!("the {id} tool"), params)
}

fn echo_args(tools: &ToolManager, id: &str) -> Result<(), ToolError> {
    tools.register_fn(def(id, json!({"type": "object"})), |_, a| Ok(a))
}

fn registration_message(r: Result<(), ToolError>) -> String {
    match r {
        Err(ToolError::Registration { message, .. }) => message,
        other => panic!("expected a registration error, got {other:?}"),
    }
}

#[test]
fn bad_ids_are_refused_with_a_reason() {
    let tools = ToolManager::new();
    let cases = [
        ("", "empty"),
        ("a:b:c", "at most one ':'"),
        ("my plugin:x", "contains ' '"),
        ("ns:-x", "starts with '-'"),
        ("插件:x", "contains '插'"),
        (":x", "namespace part is empty"),
    ];
    for (id, want) in cases {
        let msg = registration_message(echo_args(&tools, id));
        assert!(msg.contains(want), "{id:?}: {msg}");
    }
    assert!(tools.is_empty());
}

#[test]
fn bad_schemas_are_refused_with_a_reason() {
    let tools = ToolManager::new();
    let cases = [
        (json!("object"), "must be a JSON Schema object"),
        (json!({"type": "array"}), "must describe an object"),
        (
            json!({"type": "object", "properties": {"a": {"type": "strng"}}}),
            "at '/properties/a/type'",
        ),
        (
            json!({"type": "object", "properties": {"a": {"minimum": "x"}}}),
            "at '/properties/a/minimum'",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}),
            "required parameter 'b' is not declared",
        ),
    ];
    for (schema, want) in cases {
        let msg = registration_message(tools.register_fn(def("t:x", schema.clone()), |_, a| Ok(a)));
        assert!(msg.contains(want), "{schema}: {msg}");
    }
}

#[test]
fn duplicates_are_refused() {
    let tools = ToolManager::new();
    echo_args(&tools, "a:b").unwrap();
    let msg = registration_message(echo_args(&tools, "a:b"));
    assert!(msg.contains("already registered"), "{msg}");
    // An id that is another tool's wire name would make that name mean two tools.
    let msg = registration_message(echo_args(&tools, "a_b"));
    assert!(msg.contains("wire name of tool 'a:b'"), "{msg}");
    assert_eq!(tools.len(), 1);
}

#[test]
fn ids_resolve_in_every_accepted_spelling() {
    let tools = ToolManager::new();
    echo_args(&tools, "FileOperator:WriteFile").unwrap();
    echo_args(&tools, "my.plugin:do.it").unwrap();
    for spelling in [
        "FileOperator:WriteFile",
        "FileOperator.WriteFile",
        "FileOperator_WriteFile",
    ] {
        assert_eq!(
            tools.get(spelling).unwrap().id(),
            "FileOperator:WriteFile",
            "{spelling}"
        );
    }
    for spelling in ["my.plugin:do.it", "my.plugin.do.it", "my_plugin_do_it"] {
        assert_eq!(
            tools.get(spelling).unwrap().id(),
            "my.plugin:do.it",
            "{spelling}"
        );
        // `find` resolves the same spellings, without an error for the unknown ones.
        assert_eq!(
            tools.find(spelling).map(|t| t.id().to_string()).as_deref(),
            Some("my.plugin:do.it"),
            "{spelling}"
        );
    }
    assert!(tools.find("FileOperator:WriteFil").is_none());
    assert!(tools.find("no:such").is_none());
}

#[test]
fn unknown_tools_get_suggestions() {
    let tools = ToolManager::new();
    echo_args(&tools, "FileOperator:WriteFile").unwrap();
    echo_args(&tools, "system:random_int").unwrap();
    let cases = [
        ("FileOperator.WriteFle", Some("FileOperator:WriteFile")),
        ("fileoperator.writefile", Some("FileOperator:WriteFile")),
        ("WriteFile", Some("FileOperator:WriteFile")),
        ("system:randomint", Some("system:random_int")),
        ("weather:forecast", None),
    ];
    for (id, want) in cases {
        match tools.get(id) {
            Err(ToolError::UnknownTool {
                id: got_id,
                suggestion,
            }) => {
                assert_eq!(got_id, id);
                assert_eq!(suggestion.as_deref(), want, "{id}");
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    let e = tools.get("FileOperator.WriteFle").unwrap_err();
    assert_eq!(
        e.observation(),
        "Observation: Error - Unknown tool 'FileOperator.WriteFle', did you mean 'FileOperator:WriteFile'?"
    );
}

#[test]
fn wire_names_are_valid_and_unique() {
    let tools = ToolManager::new();
    let ids = [
        "FileOperator:WriteFile",
        "FileOperator_WriteFile_2",
        "FileOperator.WriteFile",
        "9lives:x",
        "workflow:summarize_text",
    ];
    let long = format!("{}:{}", "n".repeat(60), "m".repeat(60));
    for id in ids.iter().copied().chain([long.as_str()]) {
        echo_args(&tools, id).unwrap_or_else(|e| panic!("{id}: {e}"));
    }
    let list = tools.list();
    let wires: Vec<&str> = list.iter().map(|t| t.wire_name()).collect();
    assert_eq!(
        &wires[..5],
        [
            "FileOperator_WriteFile",
            "FileOperator_WriteFile_2",
            "FileOperator_WriteFile_3",
            "_9lives_x",
            "workflow_summarize_text"
        ]
    );
    let _ = wires.iter().fold(Vec::new(), |mut seen, w| {
        assert!(is_wire_name(w), "{w}");
        assert!(!seen.contains(w), "duplicate wire name {w}");
        seen.push(*w);
        seen
    });
    assert_eq!(wires[5].len(), 64);
    // Each wire name leads back to its own tool.
    for t in &list {
        assert_eq!(tools.get(t.wire_name()).unwrap().id(), t.id());
    }
}

#[test]
fn unregister_and_replace() {
    let tools = ToolManager::new();
    echo_args(&tools, "p:a").unwrap();
    echo_args(&tools, "p:b").unwrap();
    echo_args(&tools, "q:a").unwrap();
    assert!(tools.unregister("q:a"));
    assert!(!tools.unregister("q:a"));
    assert!(
        tools.get("q_a").is_err(),
        "the wire name goes with the tool"
    );

    // replace swaps a definition in place.
    let mut d = def("p:a", json!({"type": "object"}));
    d.description = "new".into();
    tools.replace(d, Arc::new(Fixed(json!(1)))).unwrap();
    assert_eq!(tools.get("p:a").unwrap().definition.description, "new");
    assert_eq!(tools.get("p:a").unwrap().wire_name(), "p_a");

    // A failing namespace replacement changes nothing.
    let bad = vec![
        (def("p:c", json!({"type": "object"})), fixed()),
        (def("other:d", json!({"type": "object"})), fixed()),
    ];
    let e = tools.replace_namespace("p", bad).unwrap_err();
    assert!(e.to_string().contains("outside namespace 'p'"), "{e}");
    let ids: Vec<String> = tools.list().iter().map(|t| t.id().to_string()).collect();
    assert_eq!(ids, ["p:b", "p:a"]);

    let good = vec![(def("p:c", json!({"type": "object"})), fixed())];
    tools.replace_namespace("p", good).unwrap();
    let ids: Vec<String> = tools.list().iter().map(|t| t.id().to_string()).collect();
    assert_eq!(ids, ["p:c"]);
    echo_args(&tools, "p:d").unwrap();
    assert_eq!(tools.unregister_namespace("p"), 2);
    assert!(tools.is_empty());
}

struct Fixed(Value);
impl tavern::internal::tools::ToolHandler for Fixed {
    fn invoke(
        &self,
        _: tavern::internal::tools::CallContext,
        _: Value,
    ) -> tavern::internal::tools::ToolFuture {
        let v = self.0.clone();
        Box::pin(async move { Ok(v) })
    }
}
fn fixed() -> Arc<dyn tavern::internal::tools::ToolHandler> {
    Arc::new(Fixed(json!(null)))
}

#[test]
fn listings_come_from_the_definition() {
    let tools = ToolManager::new();
    let mut d = def(
        "FileOperator:ApplyEdit",
        json!({
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "description": "Absolute path of the file."},
                "search_string": {"type": "string", "description": "Old text to find."},
                "count": {"type": "integer", "default": 1}
            },
            "required": ["filePath", "search_string"]
        }),
    );
    d.description = "Replaces lines of text in a file.".into();
    d.display_name = Some("Apply edit".into());
    d.annotations = Some(json!({"destructiveHint": true}));
    tools.register_fn(d, |_, a| Ok(a)).unwrap();
    assert_eq!(
        tools.manual(),
        "- Tool ID: FileOperator:ApplyEdit\n\
         \x20 - Description: Replaces lines of text in a file.\n\
         \x20 - Parameters:\n\
         \x20   - filePath (string, required): Absolute path of the file.\n\
         \x20   - search_string (string, required): Old text to find.\n\
         \x20   - count (integer, optional, default 1)\n"
    );
    let list = tools.list_json();
    assert_eq!(list[0]["id"], "FileOperator:ApplyEdit");
    assert_eq!(list[0]["wireName"], "FileOperator_ApplyEdit");
    assert_eq!(list[0]["displayName"], "Apply edit");
    assert_eq!(list[0]["implementationType"], "service");
    assert_eq!(list[0]["annotations"]["destructiveHint"], true);
    assert_eq!(
        list[0]["parameters"]["required"],
        json!(["filePath", "search_string"])
    );
}
