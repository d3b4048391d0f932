//! A modder's first hour (issue 14): every mistake from the report gets a message that names
//! the file, line and column at fault, and says what is really wrong. Through the real binary.

use crate::cli_support;

use std::path::Path;

use cli_support::{home, tavern};
use serde_json::Value;

fn write(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

const GOOD_TOOL: &str = r#"{
  "id": "Dice:roll",
  "description": "Rolls a die.",
  "parameters": {"type": "object", "properties": {"sides": {"type": "integer"}}},
  "implementation": {"type": "service", "script": "main.lua", "function": "roll"}
}
"#;

const GOOD_LUA: &str = "function roll(args, ctx)\n  return math.random(1, args.sides or 6)\nend\n";

/// `plugin check` on a home holding `files`: (exit code, problem lines).
fn check(files: &[(&str, &str)]) -> (i32, Vec<String>, tempfile::TempDir) {
    let h = home();
    write(h.path(), files);
    let run = tavern(h.path(), &["--home", ".", "plugin", "check"], b"");
    let lines = run.stdout.lines().map(str::to_string).collect();
    (run.code, lines, h)
}

/// One problem line that ends in `file:line:column: …` and contains every `part`.
fn assert_problem(lines: &[String], file: &str, line: u32, column: u32, parts: &[&str]) {
    let at = format!("{file}:{line}:{column}: ");
    let hit = lines
        .iter()
        .find(|l| l.contains(&at) && parts.iter().all(|p| l.contains(p)));
    assert!(
        hit.is_some(),
        "no problem at {at} containing {parts:?}; got:\n{}",
        lines.join("\n")
    );
}

#[test]
fn manifest_key_typos_are_problems_at_the_key_with_a_suggestion() {
    let cases: &[(&str, &str, u32, u32, &[&str])] = &[
        (
            "name: Dice\nconfigOption:\n  - id: sides\n    type: integer\n",
            "plugin.yaml",
            2,
            1,
            &[
                "unknown key `configOption`",
                "did you mean `configOptions`?",
            ],
        ),
        (
            "name: Dice\npermissions:\n  proceses: true\n",
            "plugin.yaml",
            3,
            3,
            &[
                "unknown key `proceses`",
                "permissions",
                "did you mean `processes`?",
            ],
        ),
    ];
    for (yaml, file, line, column, parts) in cases {
        let (code, lines, _h) = check(&[
            ("plugins/Dice/plugin.yaml", yaml),
            ("plugins/Dice/tools/roll.tool.json", GOOD_TOOL),
            ("plugins/Dice/main.lua", GOOD_LUA),
        ]);
        assert_eq!(code, 1, "{yaml}\n{lines:?}");
        assert_problem(&lines, &format!("Dice/{file}"), *line, *column, parts);
    }
}

#[test]
fn tool_and_node_file_typos_point_at_the_key() {
    let tool = GOOD_TOOL.replace("\"parameters\"", "\"params\"");
    let node = r#"{
  "type": "Dice:Pick",
  "inputs": {"list": {"dataFlowType": "ARRAY", "requird": true}},
  "outputs": {"item": {"dataFlowType": "ANY"}},
  "function": "pick"
}
"#;
    let (code, lines, _h) = check(&[
        ("plugins/Dice/plugin.yaml", "name: Dice\n"),
        ("plugins/Dice/tools/roll.tool.json", &tool),
        ("plugins/Dice/main.lua", GOOD_LUA),
        ("plugins/Dice/nodes/pick.node.json", node),
    ]);
    assert_eq!(code, 1);
    assert_problem(
        &lines,
        "Dice/tools/roll.tool.json",
        4,
        3,
        &["unknown key `params`", "did you mean `parameters`?"],
    );
    assert_problem(
        &lines,
        "Dice/nodes/pick.node.json",
        3,
        48,
        &["unknown key `requird`", "did you mean `required`?"],
    );
}

#[test]
fn schema_type_typos_list_the_valid_types() {
    let tool = GOOD_TOOL.replace("\"integer\"", "\"int\"");
    let (code, lines, _h) = check(&[
        ("plugins/Dice/plugin.yaml", "name: Dice\n"),
        ("plugins/Dice/tools/roll.tool.json", &tool),
        ("plugins/Dice/main.lua", GOOD_LUA),
    ]);
    assert_eq!(code, 1);
    assert_problem(
        &lines,
        "Dice/tools/roll.tool.json",
        4,
        61,
        &[
            "schema type 'int' is not a JSON Schema type",
            "did you mean 'integer'?",
            "valid types: array, boolean, integer, null, number, object, string",
        ],
    );
}

#[test]
fn a_one_space_indentation_slip_is_named_not_missing_field() {
    let (code, lines, _h) = check(&[(
        "plugins/Dice/plugin.yaml",
        "name: Dice\nconfigOptions:\n  - id: sides\n   type: integer\n",
    )]);
    assert_eq!(code, 1);
    assert_problem(
        &lines,
        "Dice/plugin.yaml",
        4,
        4,
        &["`type` is indented 3 spaces but the keys beside it are indented 4"],
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("missing field `type`:") || l.starts_with("missing field")),
        "{lines:?}"
    );
}

#[test]
fn home_workflows_are_checked_keys_and_edges_at_their_line() {
    let wf = r#"{
  "id": "skill_check",
  "nodes": [
    {"id": "a", "type": "core:Math", "inputValues": {"a": 1, "b": 2}},
    {"id": "b", "type": "core:Math", "inputValus": {"a": 1, "b": 2}}
  ],
  "edges": [
    {"source": "a", "sourceHandle": "reslt", "target": "b", "targetHandle": "a"}
  ]
}
"#;
    let (code, lines, _h) = check(&[("workflows/skill_check.json", wf)]);
    assert_eq!(code, 1, "a broken workflow fails the check: {lines:?}");
    assert_problem(
        &lines,
        "workflows/skill_check.json",
        5,
        38,
        &["unknown key `inputValus`", "did you mean `inputValues`?"],
    );

    // With the key fixed, the broken edge is reported at its `sourceHandle`.
    let (code, lines, _h) = check(&[(
        "workflows/skill_check.json",
        &wf.replace("inputValus", "inputValues"),
    )]);
    assert_eq!(code, 1, "{lines:?}");
    assert_problem(
        &lines,
        "workflows/skill_check.json",
        8,
        21,
        &["node 'a' has no slot 'reslt' (sourceHandle); it has: result"],
    );
    assert!(!lines.iter().any(|l| l.contains("plugins")), "{lines:?}");
}

#[test]
fn check_changes_nothing_on_disk_and_speaks_json() {
    let yaml = "name: Notes\npermissions:\n  fs: { read: [], write: [./notes_root] }\n";
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Notes/plugin.yaml", yaml),
            (
                "scripts/bad.tam",
                "<|[REQUEST_TOOL]|>\ncommand:「始」system:echo\n",
            ),
        ],
    );
    let run = tavern(h.path(), &["--home", ".", "plugin", "check", "--json"], b"");
    assert!(
        !h.path().join("notes_root").exists(),
        "check created a write root"
    );
    let out = run.json();
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(out["ok"], Value::Bool(false));
    assert_eq!(out["plugins"], serde_json::json!(["Notes"]));
    let problems = out["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p["file"].as_str().unwrap().ends_with("bad.tam") && p["line"].is_u64()),
        "{problems:?}"
    );

    // A clean home: exit 0, `ok: true`, still nothing created.
    std::fs::remove_file(h.path().join("scripts/bad.tam")).unwrap();
    let run = tavern(h.path(), &["--home", ".", "plugin", "check", "--json"], b"");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json()["ok"], Value::Bool(true));
    assert!(!h.path().join("notes_root").exists());
}

#[test]
fn a_tool_that_failed_to_load_is_unavailable_not_unknown() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", "name: Dice\n"),
            ("plugins/Dice/tools/roll.tool.json", GOOD_TOOL),
            (
                "plugins/Dice/main.lua",
                "function roll(args, ctx)\n  return 1 +\nend\n",
            ),
        ],
    );
    let call = "<|[REQUEST_TOOL]|>\ncommand:「始」Dice:roll「末」\n<|[END_TOOL]|>\n";
    let run = tavern(h.path(), &["--home", ".", "call"], call.as_bytes());
    let out = run.json();
    let err = &out["results"][0]["error"];
    assert_eq!(err["code"], "tool_unavailable", "{out}");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("failed to load: plugins/Dice/main.lua:3:1: script does not compile"),
        "the message names the script, line and column: {msg}"
    );
    assert!(!msg.contains("Unknown tool"), "{msg}");
}

#[test]
fn a_workflow_that_failed_to_load_is_unavailable_not_missing() {
    let h = home();
    write(
        h.path(),
        &[(
            "workflows/skill_check.json",
            "{\"nodes\": [{\"id\": \"a\", \"type\": \"core:Math\", \"colour\": 1}]}",
        )],
    );
    let run = tavern(
        h.path(),
        &["--home", ".", "workflow", "run", "skill_check"],
        b"",
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("workflow 'skill_check' is unavailable: failed to load:")
            && run.stderr.contains("skill_check.json:1:")
            && run.stderr.contains("unknown key `colour`"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_undeclared_setting_is_blamed_on_its_source_and_disables_only_itself() {
    let h = home();
    let yaml = "name: Dice\nconfigOptions:\n  - id: sides\n    type: integer\n    default: 6\n";
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", yaml),
            ("plugins/Dice/tools/roll.tool.json", GOOD_TOOL),
            ("plugins/Dice/main.lua", GOOD_LUA),
        ],
    );
    let run = tavern(
        h.path(),
        &[
            "--home",
            ".",
            "--set",
            "extensions.Dice.sidez=8",
            "plugin",
            "check",
        ],
        b"",
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("--set extensions.Dice.sidez: setting extensions.Dice.sidez: plugin Dice declares no option 'sidez'")
            && run.stdout.contains("did you mean extensions.Dice.sides?"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("tavern.toml"),
        "no tavern.toml exists: {}",
        run.stdout
    );
    assert!(
        run.stdout.contains("1 plugin(s), 1 tool(s)"),
        "the plugin still loads: {}",
        run.stdout
    );

    // From the environment.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tavern"))
        .args(["--home", ".", "plugin", "check"])
        .current_dir(h.path())
        .env("TAVERN_SET", "extensions.Dice.sidez=8")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("environment TAVERN_SET (extensions.Dice.sidez): setting extensions.Dice.sidez: plugin Dice declares no option 'sidez'"),
        "{stdout}"
    );

    // From tavern.toml: file and line.
    write(
        h.path(),
        &[("tavern.toml", "# dice\n[extensions.Dice]\nsidez = 8\n")],
    );
    let run = tavern(h.path(), &["--home", ".", "plugin", "check"], b"");
    assert!(
        run.stdout
            .contains("tavern.toml:3: setting extensions.Dice.sidez"),
        "{}",
        run.stdout
    );
    // The tool still works.
    let call = "<|[REQUEST_TOOL]|>\ncommand:「始」Dice:roll「末」\n<|[END_TOOL]|>\n";
    let run = tavern(h.path(), &["--home", ".", "call"], call.as_bytes());
    assert_eq!(
        run.json()["results"][0]["ok"],
        Value::Bool(true),
        "{}",
        run.stdout
    );
}

#[test]
fn plugin_tests_run_in_fresh_roots_seeded_from_fixtures() {
    let h = home();
    let yaml = "name: Notes\nconfigOptions:\n  - id: root\n    type: string\n    default: ./notes_root\npermissions:\n  fs: { read: [\"{config.root}\"], write: [\"{config.root}\"] }\n";
    let tool = |name: &str, f: &str| {
        format!(
            r#"{{"id": "Notes:{name}", "parameters": {{"type": "object", "properties": {{"text": {{"type": "string"}}}}}},
  "implementation": {{"type": "service", "script": "main.lua", "function": "{f}"}}}}"#
        )
    };
    let lua = r#"
function add(args, ctx)
  local old = api.fs.exists("log.txt") and api.fs.read("log.txt") or ""
  api.fs.write("log.txt", old .. args.text .. "\n")
  return {lines = select(2, (old .. args.text .. "\n"):gsub("\n", "")), roll = math.random(1, 6)}
end
function seed(args, ctx)
  return api.fs.read("seed.txt")
end
"#;
    let tests = r#"{"cases": [
  {"name": "first write", "call": "Notes:add", "args": {"text": "a"}, "expectSubset": {"lines": 1}, "expectType": {"roll": "integer"}},
  {"name": "second write", "call": "Notes:add", "args": {"text": "b"}, "expectSubset": {"lines": 2}},
  {"name": "fixture", "call": "Notes:seed", "expect": "from fixtures\n"}
]}"#;
    write(
        h.path(),
        &[
            ("plugins/Notes/plugin.yaml", yaml),
            ("plugins/Notes/tools/add.tool.json", &tool("add", "add")),
            ("plugins/Notes/tools/seed.tool.json", &tool("seed", "seed")),
            ("plugins/Notes/main.lua", lua),
            ("plugins/Notes/tests/notes.test.json", tests),
            ("plugins/Notes/tests/fixtures/seed.txt", "from fixtures\n"),
        ],
    );
    for run_no in 1..=2 {
        let run = tavern(h.path(), &["--home", ".", "plugin", "test"], b"");
        assert_eq!(run.code, 0, "run {run_no}:\n{}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("3 passed, 0 failed"), "{}", run.stdout);
    }
    assert!(
        !h.path().join("notes_root").exists(),
        "the real root was touched"
    );

    // A type or subset that does not match fails, naming the place.
    write(
        h.path(),
        &[(
            "plugins/Notes/tests/notes.test.json",
            r#"{"cases": [{"name": "typed", "call": "Notes:add", "args": {"text": "a"}, "expectType": {"roll": "string"}}]}"#,
        )],
    );
    let run = tavern(h.path(), &["--home", ".", "plugin", "test"], b"");
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("expectType: result.roll is integer"),
        "{}",
        run.stdout
    );
}

#[test]
fn check_reports_power_user_scripts_and_the_colourless_log() {
    let h = home();
    write(
        h.path(),
        &[(
            "scripts/guard.lua",
            "api.hooks.on('tool:before-invoke', function(ev)\n  return nil +\nend)\n",
        )],
    );
    let run = tavern(h.path(), &["--home", ".", "plugin", "check"], b"");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("guard.lua:3"), "{}", run.stdout);
    // Logs on a pipe carry no ANSI colour.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tavern"));
    let out = cmd
        .args(["--home", ".", "tools"])
        .current_dir(h.path())
        .env("TAVERN_LOG", "debug")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.is_empty(), "debug logging produced nothing to check");
    assert!(!err.contains('\u{1b}'), "ANSI escape on a pipe: {err}");
}

#[test]
fn a_rhai_syntax_error_points_at_its_file_line_and_column() {
    let tool = GOOD_TOOL.replace("main.lua", "main.rhai");
    let (code, lines, _h) = check(&[
        ("plugins/Dice/plugin.yaml", "name: Dice\n"),
        ("plugins/Dice/tools/roll.tool.json", &tool),
        // Line 2: `let x = ;` — the parser stops at the `;` in column 13.
        (
            "plugins/Dice/main.rhai",
            "fn roll(args) {\n    let x = ;\n    x\n}\n",
        ),
    ]);
    assert_eq!(code, 1, "{lines:?}");
    assert_problem(
        &lines,
        "Dice/main.rhai",
        2,
        13,
        &["script does not compile"],
    );
}

/// Issue 23 item 6: `plugin check` reads agent profiles and built-in settings by type, as
/// `agent run` and the engine read them, each problem at its file and line.
#[test]
fn check_reads_agents_and_settings_by_type() {
    let h = home();
    write(
        h.path(),
        &[
            (
                "agents/bad.json",
                "{\n  \"id\": \"bad\",\n  \"max_turns\": \"eight\"\n}\n",
            ),
            ("tavern.toml", "[llm]\nmodel = 5\nmodle = \"gpt\"\n"),
        ],
    );
    let run = tavern(h.path(), &["--home", ".", "plugin", "check"], b"");
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let has = |start: &str, part: &str| {
        run.stdout
            .lines()
            .any(|l| l.contains(start) && l.contains(part))
    };
    assert!(
        has("agents/bad.json:3:", "invalid type: string \"eight\""),
        "{}",
        run.stdout
    );
    assert!(
        has("tavern.toml:2:", "setting llm.model: expected a string"),
        "{}",
        run.stdout
    );
    assert!(
        has("tavern.toml:3:", "unknown setting llm.modle")
            && has("tavern.toml:3:", "did you mean llm.model?"),
        "{}",
        run.stdout
    );

    // `agent run` fails on the same profile with the same message.
    std::fs::write(h.path().join("tavern.toml"), "").unwrap();
    std::fs::write(h.path().join("replies.json"), "[\"hi\"]").unwrap();
    let run = tavern(
        h.path(),
        &[
            "--home",
            ".",
            "agent",
            "run",
            "bad",
            "--llm",
            "scripted:replies.json",
        ],
        b"",
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("bad.json:3:") && run.stderr.contains("invalid type: string \"eight\""),
        "{}",
        run.stderr
    );

    // The engine reports a mistyped setting too, where it was written.
    let run = tavern(
        h.path(),
        &["--home", ".", "--set", "llm.stream=maybe", "tools"],
        b"",
    );
    assert!(
        run.stderr.contains(
            "--set llm.stream: setting llm.stream: expected true or false, got \"maybe\""
        ),
        "{}",
        run.stderr
    );
}

/// Issue 23 item 8: a setting of the wrong type drops its plugin, and calling one of its
/// tools says which setting and what it wants, not "Unknown tool".
#[test]
fn a_bad_setting_value_names_the_setting_not_unknown_tool() {
    let h = home();
    let yaml = "name: Dice\nconfigOptions:\n  - id: max_count\n    type: integer\n    default: 3\n";
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", yaml),
            ("plugins/Dice/tools/roll.tool.json", GOOD_TOOL),
            ("plugins/Dice/main.lua", GOOD_LUA),
        ],
    );
    let call = br#"{"tool": "Dice:roll", "args": {}}"#;
    let run = tavern(
        h.path(),
        &[
            "--home",
            ".",
            "--set",
            "extensions.Dice.max_count=lots",
            "call",
        ],
        call,
    );
    let out = run.json();
    let err = &out["results"][0]["error"];
    assert_eq!(err["code"], "tool_unavailable", "{out}");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("--set extensions.Dice.max_count")
            && msg.contains("expected integer, got \"lots\"")
            && msg.contains("wants a whole number"),
        "{msg}"
    );
    assert!(!msg.contains("Unknown tool"), "{msg}");
}

/// Issue 23 item 15: no absolute path reaches the model or the problem list. Observations
/// of tools and workflows that failed to load, and every problem `plugin check` and `tavern
/// call` print, name files relative to the home, whatever directory tavern runs in.
#[test]
fn no_absolute_paths_reach_the_model_or_the_problems() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Anvil/plugin.yaml", "name: Anvil\n"),
            ("plugins/Anvil2/plugin.yaml", "name: Anvil\n"),
            (
                "plugins/Anvil2/tools/forge.tool.json",
                r#"{"id": "forge", "implementation": {"type": "service", "script": "main.lua", "function": "forge"}}"#,
            ),
            ("workflows/skill_check.json", "{\"id\": \"skill_check\",\n"),
        ],
    );
    let abs = h.path().canonicalize().unwrap();
    let home_text = abs.to_string_lossy().into_owned();
    let elsewhere = tempfile::tempdir().unwrap();
    let calls =
        r#"[{"tool": "Anvil:forge", "args": {}}, {"tool": "workflow:skill_check", "args": {}}]"#;
    let run = tavern(
        elsewhere.path(),
        &["--home", &home_text, "call"],
        calls.as_bytes(),
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains(&home_text), "{}", run.stdout);
    assert!(!run.stderr.contains(&home_text), "{}", run.stderr);
    let out = run.json();
    let forge = out["results"][0]["observation"].as_str().unwrap();
    assert!(
        forge.contains("is already used by plugins/Anvil/plugin.yaml"),
        "{forge}"
    );
    let wf = out["results"][1]["observation"].as_str().unwrap();
    assert!(wf.contains("workflows/skill_check.json"), "{wf}");

    let run = tavern(
        elsewhere.path(),
        &["--home", &home_text, "plugin", "check", "--json"],
        b"",
    );
    assert!(!run.stdout.contains(&home_text), "{}", run.stdout);
    let problems = run.json()["problems"].as_array().unwrap().clone();
    assert!(!problems.is_empty());
    for p in &problems {
        let file = p["file"].as_str().unwrap();
        assert!(
            file.starts_with("plugins/") || file.starts_with("workflows/"),
            "{p}"
        );
    }
}
