//! `tavern agent run --json` and `tavern agent manual` on the bundled innkeeper.

use crate::cli_support;

use std::path::Path;

use cli_support::tavern;
use serde_json::{json, Value};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn agent_run_json_shows_every_turn_and_the_stop_reason() {
    let r = tavern(
        root(),
        &[
            "agent",
            "run",
            "innkeeper",
            "--llm",
            "scripted:scripts/innkeeper.replies.json",
            "--message",
            "A traveller named Aria comes in from the rain.",
            "--json",
        ],
        b"",
    );
    r.assert_no_panic();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["turns", "stop_reason"]);
    assert_eq!(v["stop_reason"], "no_calls");
    let turns = v["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 5);
    for t in turns {
        let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["output", "calls", "results", "diagnostics", "observations"]
        );
    }
    // 1: a tool call, its value from world.json.
    assert_eq!(turns[0]["calls"][0]["tool"], "ReadWorldStateTool");
    assert_eq!(
        turns[0]["results"][0],
        json!({"tool": "ReadWorldStateTool", "call_id": "call_0", "ok": true, "value": "rainy",
               "observation": "Observation: Tool ReadWorldStateTool executed successfully. Result: rainy"})
    );
    // 2: the wrong parameter name (seed 002 §5.5) …
    let bad = &turns[1]["results"][0];
    assert_eq!(bad["ok"], false);
    assert_eq!(bad["error"]["code"], "invalid_parameters");
    assert_eq!(
        bad["observation"],
        "Observation: Error - Invalid parameters for workflow:greet_guest: unknown parameter 'guest', did you mean 'guest_name'?"
    );
    // 3: … corrected; the skill runs.
    let good = &turns[2]["results"][0];
    assert_eq!(good["tool"], "workflow:greet_guest");
    assert_eq!(good["ok"], true);
    assert!(good["value"]
        .as_str()
        .unwrap()
        .starts_with("Welcome to the Prancing Pony, Aria!"));
    // 5: no calls.
    assert_eq!(turns[4]["calls"], json!([]));
    assert_eq!(turns[4]["results"], json!([]));
}

#[test]
fn agent_run_on_a_terminal_shows_the_conversation() {
    let r = tavern(
        root(),
        &[
            "agent",
            "run",
            "innkeeper",
            "--llm",
            "scripted:scripts/innkeeper.replies.json",
            "--max-turns",
            "2",
        ],
        b"",
    );
    r.assert_no_panic();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("── innkeeper · turn 1 ──"),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .contains("  Observation: Tool ReadWorldStateTool executed successfully. Result: rainy"));
    assert!(
        r.stdout.contains("── stop: max_turns after 2 turn(s)"),
        "{}",
        r.stdout
    );
}

#[test]
fn agent_run_errors_are_clear() {
    let r = tavern(
        root(),
        &[
            "agent",
            "run",
            "innkeper",
            "--llm",
            "scripted:scripts/innkeeper.replies.json",
        ],
        b"",
    );
    r.assert_no_panic();
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("no agent 'innkeper'") && r.stderr.contains("innkeeper"),
        "{}",
        r.stderr
    );

    let r = tavern(
        root(),
        &["agent", "run", "innkeeper", "--llm", "ftp://x"],
        b"",
    );
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("neither openai:BASE_URL"), "{}", r.stderr);

    // A local model in a build without `llm-local`: exit 1, how to get the feature.
    #[cfg(not(feature = "llm-local"))]
    {
        let r = tavern(
            root(),
            &[
                "agent",
                "run",
                "innkeeper",
                "--llm",
                "local:models/npc.gguf",
            ],
            b"",
        );
        r.assert_no_panic();
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(
            r.stderr.contains("models/npc.gguf")
                && r.stderr.contains("cargo build --features llm-local"),
            "{}",
            r.stderr
        );
    }

    // A dead server: exit 1, the error names the URL, JSON still printed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("openai:http://127.0.0.1:{port}/v1");
    let r = tavern(
        root(),
        &[
            "agent",
            "run",
            "innkeeper",
            "--llm",
            &url,
            "--json",
            "--set",
            "llm.retries=0",
        ],
        b"",
    );
    r.assert_no_panic();
    assert_eq!(r.code, 1, "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["stop_reason"], "error");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("cannot reach the model"),
        "{v}"
    );
}

#[test]
fn agent_manual_prints_the_inventory_in_each_style() {
    let inventory = [
        "ReadWorldStateTool",
        "ReadPrivateStateTool",
        "UpdatePrivateStateTool",
        "PublishEventTool",
        "system:get_current_time",
        "workflow:greet_guest",
    ];
    let r = tavern(
        root(),
        &["agent", "manual", "innkeeper", "--style", "action"],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ids: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("*   `<"))
        .filter_map(|l| l.split_once(">`").map(|(id, _)| id))
        .collect();
    assert_eq!(ids, inventory);
    let skills = r.stdout.find("**Skills (workflow executions):**").unwrap();
    assert!(r.stdout.find("`<workflow:greet_guest>`").unwrap() > skills);
    assert!(r.stdout.find("`<PublishEventTool>`").unwrap() < skills);

    let r = tavern(
        root(),
        &["agent", "manual", "innkeeper", "--style", "tam"],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ids: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("- Tool ID: "))
        .collect();
    assert_eq!(ids, inventory);
    assert!(r
        .stdout
        .contains("command:「始」workflow:greet_guest「末」"));

    for style in ["openai", "anthropic"] {
        let r = tavern(
            root(),
            &["agent", "manual", "innkeeper", "--style", style],
            b"",
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let v: Value = r.json();
        assert_eq!(v.as_array().unwrap().len(), inventory.len(), "{style}");
    }

    let r = tavern(
        root(),
        &["agent", "manual", "innkeeper", "--style", "yaml"],
        b"",
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("expected tam, action, openai, anthropic or short"),
        "{}",
        r.stderr
    );
}

/// Issue 23 item 5: relative paths in flags and settings are taken from the home, not from
/// the working directory: run from elsewhere with `--home`, everything still resolves.
#[test]
fn relative_paths_in_flags_and_settings_resolve_from_the_home() {
    let cwd = tempfile::tempdir().unwrap();
    let home = root().to_str().unwrap();
    let r = tavern(
        cwd.path(),
        &[
            "--home",
            home,
            "agent",
            "run",
            "agents/innkeeper.json",
            "--llm",
            "scripted:scripts/innkeeper.replies.json",
            "--world",
            "world.json",
            "--message",
            "A traveller named Aria comes in from the rain.",
            "--json",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["turns"].as_array().unwrap().len(), 5);

    // The same model named in a setting (the agent's, and the [llm] base_url).
    let r = tavern(
        cwd.path(),
        &[
            "--home",
            home,
            "--set",
            "llm.base_url=scripted:scripts/innkeeper.replies.json",
            "agent",
            "run",
            "innkeeper",
            "--json",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Workflow files and plugin directories too.
    let r = tavern(
        cwd.path(),
        &[
            "--home",
            home,
            "workflow",
            "schema",
            "workflows/greet_guest.json",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = tavern(
        cwd.path(),
        &["--home", home, "plugin", "check", "plugins/TextTools"],
        b"",
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("plugin TextTools"), "{}", r.stdout);
}
