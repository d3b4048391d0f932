//! `tavern tools [--json]`.

use crate::cli_support;

use cli_support::{home, tavern};

#[test]
fn lists_tools_as_json() {
    let dir = home();
    let run = tavern(dir.path(), &["tools", "--json"], b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list = run.json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    for id in [
        "system:get_current_time",
        "system:echo",
        "system:uuid",
        "system:random_int",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let ri = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "system:random_int")
        .unwrap();
    assert_eq!(ri["wireName"], "system_random_int");
    assert_eq!(
        ri["parameters"]["required"],
        serde_json::json!(["min", "max"])
    );
    assert_eq!(ri["implementationType"], "service");
}

#[test]
fn lists_tools_as_text() {
    let dir = home();
    let run = tavern(
        dir.path(),
        &["--home", dir.path().to_str().unwrap(), "tools"],
        b"",
    );
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.contains("- Tool ID: system:random_int"),
        "{}",
        run.stdout
    );
    assert!(run
        .stdout
        .contains("    - min (integer, required): Smallest possible value."));
    assert!(run.stdout.contains("  - Wire name: system_random_int"));
}

/// Issue 23 item 19: the lists a model reads (MCP, OpenAI, Anthropic, agent manuals) leave
/// the `node:*` tools out unless `tools.list_nodes = true`; they stay callable; `tavern
/// tools` sets them apart; the MCP `title` is the display name.
#[test]
fn node_tools_are_left_out_of_model_facing_lists() {
    let dir = home();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    std::fs::write(
        dir.path().join("agents/calc.json"),
        r#"{"id": "calc", "tool_ids_inventory": ["node:core:Math", "system:echo"]}"#,
    )
    .unwrap();
    let names = |extra: &[&str], format: &str, pointer: &str| -> Vec<String> {
        let mut args: Vec<&str> = extra.to_vec();
        args.extend(["tools", "--format", format]);
        let run = tavern(dir.path(), &args, b"");
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.json()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.pointer(pointer).unwrap().as_str().unwrap().to_string())
            .collect()
    };
    for (format, pointer) in [
        ("mcp", "/name"),
        ("openai", "/function/name"),
        ("anthropic", "/name"),
    ] {
        let hidden = names(&[], format, pointer);
        assert!(hidden.iter().any(|n| n == "system_echo"), "{hidden:?}");
        assert!(
            !hidden.iter().any(|n| n.starts_with("node_")),
            "{format}: {hidden:?}"
        );
        let shown = names(&["--set", "tools.list_nodes=true"], format, pointer);
        assert!(
            shown.iter().any(|n| n == "node_core_Math"),
            "{format}: {shown:?}"
        );
    }
    // The MCP title is the display name; the id is in _meta.
    let run = tavern(dir.path(), &["tools", "--format", "mcp"], b"");
    let v = run.json();
    let t = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "system_get_current_time")
        .unwrap();
    assert_eq!(t["title"], "Current time", "{t}");
    assert_eq!(t["_meta"]["tavern/id"], "system:get_current_time", "{t}");

    // Still callable.
    let run = tavern(
        dir.path(),
        &["call"],
        br#"{"tool": "node:core:Math", "args": {"a": 2, "b": 3, "op": "add"}}"#,
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json()["results"][0]["value"], 5, "{}", run.stdout);

    // `tavern tools` shows them apart, after the others.
    let run = tavern(dir.path(), &["tools"], b"");
    let (main, nodes) = run
        .stdout
        .split_once("\nNode tools (")
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(!main.contains("node:core"), "{main}");
    assert!(nodes.contains("- node:core.Math: "), "{nodes}");

    // An agent's manual, even with a node tool in its inventory.
    let run = tavern(
        dir.path(),
        &["agent", "manual", "calc", "--style", "tam"],
        b"",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("system:echo"), "{}", run.stdout);
    assert!(!run.stdout.contains("node:core"), "{}", run.stdout);
    let run = tavern(
        dir.path(),
        &[
            "--set",
            "tools.list_nodes=true",
            "agent",
            "manual",
            "calc",
            "--style",
            "tam",
        ],
        b"",
    );
    assert!(run.stdout.contains("node:core.Math"), "{}", run.stdout);
}
