//! The first hour, third round (issue 36): what a newcomer, a modder and a power user still
//! hit, through the real binary and the real server.

use crate::cli_support;

use std::path::Path;

use cli_support::{home, tavern};

fn write(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

const DICE_YAML: &str = "name: Dice\ndescription: dice\n";

/// Item 5: a script's `error({code, message})` reaches `tavern call` with its code.
#[test]
fn raised_codes_reach_the_caller() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", DICE_YAML),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'roll', description = 'Rolls.', handler = function(a)\n  error({code = \"bad_roll\", message = \"too high\"})\nend}\n",
            ),
        ],
    );
    let run = tavern(
        h.path(),
        &["--home", ".", "call", "--format", "json", "-"],
        br#"{"tool": "Dice:roll", "args": {}}"#,
    );
    let v = run.json();
    let err = &v["results"][0]["error"];
    assert_eq!(err["code"], "bad_roll", "{v}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("bad_roll: too high"),
        "{v}"
    );
}

/// Item 7: malformed JSON sent as JSON is 400 with the parser's line and column; a
/// `{tool, args}` object whose arguments cannot be read is a diagnostic.
#[tokio::test]
async fn json_bodies_that_cannot_be_read_say_why() {
    use crate::server_support;
    use reqwest::StatusCode;
    use serde_json::{json, Value};

    let s = server_support::Server::start(&server_support::fixture_home(), &[]);
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{}/api/invoke", s.base))
        .header("content-type", "application/json")
        .body("{\"tool\": \"LuaDemo:shout\",\n \"args\": {\"text\": \"hey\",}}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_json", "{e}");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("line 2 column"), "{msg}");

    let r = c
        .post(format!("{}/api/invoke", s.base))
        .header("content-type", "text/plain")
        .body(r#"{"tool": "LuaDemo:shout", "args": {"text": 1e400}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["results"], json!([]), "{v}");
    assert_eq!(v["diagnostics"][0]["severity"], "error", "{v}");
    assert!(v.get("response_text").is_none(), "not prose: {v}");
}

/// Item 9: README's test command is `.ci/test`, which runs `.ci/deps.sh` (the one install
/// list, also called by `.ci/run`) and then `cargo test`; on a machine that has everything
/// the list installs nothing and succeeds.
#[test]
fn the_test_command_sets_itself_up() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains("```sh\n.ci/test\n```"),
        "README's test command"
    );
    let test = std::fs::read_to_string(root.join(".ci/test")).unwrap();
    let deps_at = test.find(".ci/deps.sh").expect(".ci/test runs .ci/deps.sh");
    let cargo_at = test.find("cargo test").expect(".ci/test runs cargo test");
    assert!(deps_at < cargo_at);
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == ".ci/deps.sh"), ".ci/run");
    assert!(
        !ci.contains("command -v redis-server"),
        "the list lives in .ci/deps.sh only"
    );
    let deps = std::fs::read_to_string(root.join(".ci/deps.sh")).unwrap();
    for program in [
        "python3",
        "node",
        "curl",
        "valgrind",
        "mcp",
        "redis-server",
        "chromedriver",
    ] {
        assert!(deps.contains(program), "{program} in .ci/deps.sh");
    }
    let out = std::process::Command::new(root.join(".ci/deps.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Item 10: `agent run` prints its error once (stderr), not also on stdout.
#[test]
fn agent_run_prints_its_error_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("openai:http://127.0.0.1:{port}/v1");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let r = tavern(
        root,
        &[
            "agent",
            "run",
            "innkeeper",
            "--llm",
            &url,
            "--set",
            "llm.retries=0",
        ],
        b"",
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(
        all.matches("cannot reach the model").count(),
        1,
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains("── stop: error"), "{}", r.stdout);
}

/// Item 10: a missing home given by `TAVERN_HOME` is reported as `TAVERN_HOME`.
#[test]
fn a_missing_tavern_home_is_named_as_such() {
    let h = home();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tavern"))
        .args(["tools"])
        .current_dir(h.path())
        .env("TAVERN_HOME", h.path().join("nope"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("tavern: TAVERN_HOME="), "{err}");
    assert!(err.contains("unset it"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tavern"))
        .args(["--home", "nope", "tools"])
        .current_dir(h.path())
        .env("TAVERN_HOME", h.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("tavern: --home nope:"), "{err}");
}

/// Item 10: `tavern tools` shows a parameter's `minimum` and `maximum`.
#[test]
fn tools_shows_minimum_and_maximum() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", DICE_YAML),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'roll', description = 'Rolls.', parameters = {type = 'object', properties = {sides = {type = 'integer', minimum = 2, maximum = 100}}}, handler = function(a) return 1 end}\n",
            ),
        ],
    );
    let run = tavern(h.path(), &["--home", ".", "tools"], b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("- sides (integer, optional, minimum 2, maximum 100)"),
        "{}",
        run.stdout
    );
}

/// Item 10: `plugin test DIR` failing on `unknown_tool` suggests `--with-home`.
#[test]
fn plugin_test_suggests_with_home_on_unknown_tool() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", DICE_YAML),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'roll', description = 'Rolls.', handler = function(a) return 1 end}\n",
            ),
            (
                "plugins/Dice/tests/roll.test.json",
                r#"{"cases": [{"name": "other", "call": "Cards:draw", "args": {}, "expect": 1}]}"#,
            ),
        ],
    );
    let run = tavern(
        h.path(),
        &["--home", ".", "plugin", "test", "plugins/Dice"],
        b"",
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(line.contains("(unknown_tool)"), "{line}");
    assert!(line.contains("run with --with-home"), "{line}");
}

const INN_LUA: &str = "api.tools.register{id = 'greet', description = 'Greets.', parameters = {type = 'object', properties = {guest_name = {type = 'string'}}, required = {'guest_name'}}, handler = function(a) return 'hi ' .. a.guest_name end}\n";

/// Item 6: one rule for argument names in every format: a loose match runs with a warning
/// on its result; a name no loose reading fits keeps its did-you-mean.
#[test]
fn argument_names_follow_one_rule_in_every_format() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Inn/plugin.yaml", "name: Inn\ndescription: inn\n"),
            ("plugins/Inn/main.lua", INN_LUA),
        ],
    );
    let bodies = |name: &str| {
        [
            format!("<ACTION>\n<Inn.greet>\n<{name}>Bo</{name}>\n</Inn.greet>\n</ACTION>\n"),
            format!("<|[REQUEST_TOOL]|>\ncommand:「始」Inn:greet「末」\n{name}:「始」Bo「末」\n<|[END_TOOL]|>\n"),
            format!("{{\"tool\": \"Inn:greet\", \"args\": {{\"{name}\": \"Bo\"}}}}"),
            format!("<<<[TOOL_REQUEST]>>>\ntool_name:「始」Inn:greet「末」\n{name}:「始」Bo「末」\n<<<[END_TOOL_REQUEST]>>>\n"),
        ]
    };
    for body in bodies("guestName") {
        let v = tavern(h.path(), &["--home", ".", "call", "-"], body.as_bytes()).json();
        let r = &v["results"][0];
        assert_eq!(r["value"], "hi Bo", "{body}: {v}");
        assert_eq!(
            r["warnings"],
            serde_json::json!(["argument 'guestName' read as 'guest_name'"]),
            "{body}: {v}"
        );
    }
    for body in bodies("gust_name") {
        let v = tavern(h.path(), &["--home", ".", "call", "-"], body.as_bytes()).json();
        let msg = v["results"][0]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            msg.ends_with("unknown parameter 'gust_name', did you mean 'guest_name'?"),
            "{body}: {v}"
        );
    }
    // Exact names carry no warnings.
    let v = tavern(
        h.path(),
        &["--home", ".", "call", "-"],
        bodies("guest_name")[0].as_bytes(),
    )
    .json();
    assert!(v["results"][0].get("warnings").is_none(), "{v}");
}

/// `plugin check` on a home holding `files`: (exit code, stdout lines).
fn check(files: &[(&str, &str)]) -> (i32, Vec<String>) {
    let h = home();
    write(h.path(), files);
    let run = tavern(h.path(), &["--home", ".", "plugin", "check"], b"");
    (run.code, run.stdout.lines().map(str::to_string).collect())
}

fn has(lines: &[String], parts: &[&str]) -> bool {
    lines.iter().any(|l| parts.iter().all(|p| l.contains(p)))
}

/// Item 2: every name a user writes is checked, with file:line and a did-you-mean.
#[test]
fn every_name_is_checked() {
    const ROLL: &str =
        "api.tools.register{id = 'roll', description = 'Rolls.', handler = function(a) return 1 end}\n";
    // Hook points in permissions.
    let (code, lines) = check(&[
        (
            "plugins/Dice/plugin.yaml",
            "name: Dice\npermissions:\n  hooks: [\"tool:befor-invoke\"]\n",
        ),
        ("plugins/Dice/main.lua", ROLL),
    ]);
    assert_eq!(code, 1);
    assert!(
        has(
            &lines,
            &[
                "plugins/Dice/plugin.yaml:3:12: ",
                "unknown hook point 'tool:befor-invoke'",
                "did you mean 'tool:before-invoke'?"
            ]
        ),
        "{lines:#?}"
    );
    // A default of the wrong type, though tavern.toml sets the value.
    let (code, lines) = check(&[
        (
            "plugins/Dice/plugin.yaml",
            "name: Dice\nconfigOptions:\n  - id: faces\n    type: integer\n    default: 4\n  - id: sides\n    type: integer\n    default: \"six\"\n",
        ),
        ("plugins/Dice/main.lua", ROLL),
        ("tavern.toml", "[extensions.Dice]\nsides = 8\n"),
    ]);
    assert_eq!(code, 1);
    assert!(
        has(
            &lines,
            &[
                "plugins/Dice/plugin.yaml:8:5: ",
                "default \"six\" is not a integer"
            ]
        ),
        "{lines:#?}"
    );
    // [scripts.NAME] keys.
    let (code, lines) = check(&[
        (
            "scripts/guard.lua",
            "api.hooks.on('tool:before-invoke', function(ev) return nil end)\n",
        ),
        ("tavern.toml", "[scripts.guard]\nenabeld = false\n"),
    ]);
    assert_eq!(code, 1);
    assert!(
        has(
            &lines,
            &[
                "tavern.toml:2: ",
                "unknown key `enabeld` in [scripts.guard], did you mean `enabled`?"
            ]
        ),
        "{lines:#?}"
    );
    // Agent profiles whole: every wrong field by its path, at once.
    let (code, lines) = check(&[(
        "agents/inn.json",
        "{\n  \"id\": \"inn\",\n  \"max_turns\": \"eight\",\n  \"llm\": {\"temperature\": \"hot\"}\n}\n",
    )]);
    assert_eq!(code, 1);
    assert!(
        has(
            &lines,
            &[
                "agents/inn.json:3:3: ",
                "`max_turns`: invalid type: string \"eight\", expected u32"
            ]
        ),
        "{lines:#?}"
    );
    assert!(
        has(
            &lines,
            &[
                "agents/inn.json:4:11: ",
                "`llm.temperature`: invalid type: string \"hot\""
            ]
        ),
        "{lines:#?}"
    );
    // Inventory tools and scripted model files resolved.
    let (code, lines) = check(&[
        ("plugins/Dice/plugin.yaml", "name: Dice\n"),
        ("plugins/Dice/main.lua", ROLL),
        (
            "agents/inn.json",
            "{\n  \"id\": \"inn\",\n  \"llm\": {\"base_url\": \"scripted:nope.json\"},\n  \"tool_ids_inventory\": [\"Dice:rol\", \"system:get_current_time\", \"ReadWorldStateTool\"]\n}\n",
        ),
    ]);
    assert_eq!(code, 1);
    assert!(
        has(
            &lines,
            &[
                "agents/inn.json:4: ",
                "unknown tool 'Dice:rol'",
                "did you mean 'Dice:roll'?"
            ]
        ),
        "{lines:#?}"
    );
    assert!(
        has(
            &lines,
            &[
                "agents/inn.json:3: ",
                "scripted model file 'nope.json', which does not exist"
            ]
        ),
        "{lines:#?}"
    );
    assert!(!has(&lines, &["system:get_current_time"]), "{lines:#?}");
}

/// Item 2: a script turned off in tavern.toml is said so.
#[test]
fn a_disabled_script_is_noticed() {
    let h = home();
    write(
        h.path(),
        &[
            (
                "scripts/guard.lua",
                "api.hooks.on('tool:before-invoke', function(ev) return nil end)\n",
            ),
            ("tavern.toml", "[scripts.guard]\nenabled = false\n"),
        ],
    );
    let run = tavern(h.path(), &["--home", ".", "tools"], b"");
    assert_eq!(run.code, 0);
    assert!(
        run.stderr.contains(
            "scripts/guard.lua is not loaded: tavern.toml:2 sets scripts.guard.enabled = false"
        ),
        "{}",
        run.stderr
    );
}

/// Item 1: a tool, workflow or node that exists but failed to load is `tool_unavailable`
/// naming the root cause, in every way in; one missing `end` is one problem.
#[test]
fn broken_is_not_unknown() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", DICE_YAML),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'roll', description = 'Rolls.', handler = function(a)\n  return 1\nend}\nfunction advantage(node, ctx)\n  if true then\n    return { value = 2 }\nend\n",
            ),
            (
                "plugins/Dice/nodes/advantage.node.json",
                r#"{"type": "Advantage", "description": "Rolls twice.", "inputs": {}, "outputs": {"value": {"dataFlowType": "INTEGER"}}, "script": "main.lua", "function": "advantage"}"#,
            ),
            (
                "plugins/Dice/workflows/adv_roll.json",
                r#"{"id": "adv_roll", "description": "Rolls with advantage.", "interfaceInputs": {},
 "interfaceOutputs": {"value": {"dataFlowType": "INTEGER"}},
 "nodes": [{"id": "a", "type": "Dice:Advantage"}, {"id": "out", "type": "core:GroupOutput"}],
 "edges": [{"source": "a", "sourceHandle": "value", "target": "out", "targetHandle": "value"}]}"#,
            ),
        ],
    );
    let root = "plugins/Dice/main.lua:8: script does not compile";
    let run = tavern(h.path(), &["--home", ".", "plugin", "check"], b"");
    let problems: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("plugins/"))
        .collect();
    assert_eq!(problems.len(), 1, "{}", run.stdout);
    assert!(problems[0].starts_with(root), "{}", run.stdout);
    for tool in ["workflow:adv_roll", "node:Dice:Advantage", "Dice:roll"] {
        let body = format!("{{\"tool\": \"{tool}\", \"args\": {{}}}}");
        let v = tavern(h.path(), &["--home", ".", "call", "-"], body.as_bytes()).json();
        let err = &v["results"][0]["error"];
        assert_eq!(err["code"], "tool_unavailable", "{tool}: {v}");
        assert!(
            err["message"].as_str().unwrap().contains(root),
            "{tool}: {v}"
        );
    }
    let run = tavern(
        h.path(),
        &["--home", ".", "workflow", "run", "adv_roll"],
        b"",
    );
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("unavailable"), "{}", run.stderr);
    assert!(run.stderr.contains(root), "{}", run.stderr);
}

/// Item 4: runtime messages with a place and a hint.
#[test]
fn runtime_messages_have_a_place_and_a_hint() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/R/plugin.yaml", "name: R\ndescription: r\nlimits:\n  instructions: 100000\n"),
            (
                "plugins/R/main.rhai",
                "api::tools::register(#{id: \"a\", description: \"a\", handler: \"fa\"});\n\
                 api::tools::register(#{id: \"b\", description: \"b\", handler: \"fb\"});\n\
                 api::tools::register(#{id: \"c\", description: \"c\", handler: \"fc\"});\n\
                 api::tools::register(#{id: \"d\", description: \"d\", handler: \"fd\"});\n\
                 fn fa(args, ctx) {\n  let x = 1;\n  x.foo.bar\n}\n\
                 fn fb(args, ctx) {\n  ctx.log(\"hi\");\n}\n\
                 fn fc(args, ctx) {\n  \"a\" .. \"b\"\n}\n\
                 fn fd(args, ctx) {\n  let i = 0;\n  loop {\n    i += 1;\n  }\n}\n",
            ),
            ("plugins/L/plugin.yaml", "name: L\ndescription: l\nlimits:\n  instructions: 100000\n"),
            (
                "plugins/L/main.lua",
                "api.tools.register{id = 'd', description = 'd', handler = function(a)\n  local i = 0\n  while true do\n    i = i + 1\n  end\nend}\n",
            ),
        ],
    );
    let msg = |tool: &str| {
        let body = format!("{{\"tool\": \"{tool}\", \"args\": {{}}}}");
        let v = tavern(h.path(), &["--home", ".", "call", "-"], body.as_bytes()).json();
        v["results"][0]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let a = msg("R:a");
    assert!(a.contains("main.rhai:7: Unknown property 'foo'"), "{a}");
    assert!(!a.contains("position"), "{a}");
    let b = msg("R:b");
    assert!(
        b.contains("main.rhai:10:") && b.contains("api::log::info"),
        "{b}"
    );
    let c = msg("R:c");
    assert!(
        c.contains("main.rhai:13:") && c.contains("joins strings with +"),
        "{c}"
    );
    let d = msg("R:d");
    // Rhai's error has no position once it leaves the function: the function's one loop.
    assert!(
        d.contains("instructions")
            && d.contains("stopped at plugins/R/main.rhai:17, the loop in fd"),
        "{d}"
    );
    let l = msg("L:d");
    assert!(
        l.contains("instructions")
            && (l.contains("stopped at plugins/L/main.lua:3")
                || l.contains("stopped at plugins/L/main.lua:4")),
        "{l}"
    );

    // A tab in YAML is called a tab; an unclosed `#{` is blamed, not the function's `{`.
    let h2 = home();
    write(
        h2.path(),
        &[
            (
                "plugins/T/plugin.yaml",
                "name: T\ndescription: t\nconfigOptions:\n\t- id: x\n",
            ),
            ("plugins/M/plugin.yaml", "name: M\ndescription: m\n"),
            (
                "plugins/M/main.rhai",
                "fn f(a, ctx) {\n  let m = #{ a: 1, b: 2;\n  m\n}\n",
            ),
        ],
    );
    let run = tavern(h2.path(), &["--home", ".", "plugin", "check"], b"");
    assert!(
        run.stdout
            .contains("plugins/T/plugin.yaml:4:2: `- id` is indented with a tab")
            || run.stdout.contains("is indented with a tab"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("indented 1 space"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("the '#{' opened at line 2, column 11 is never closed"),
        "{}",
        run.stdout
    );
}

/// Item 10: docs/rhai.md speaks Rhai (thrown maps, `try … catch`, `()`), not Lua.
#[test]
fn rhai_md_speaks_rhai() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/rhai.md")).unwrap();
    for lua in [
        "pcall",
        "tostring",
        "or nil",
        "raises a table",
        "a table of fields",
        "{veto = ",
    ] {
        assert!(!text.contains(lua), "docs/rhai.md says `{lua}`");
    }
    assert!(text.contains("throws a map `#{code, message}`"));
}

/// Item 10: plugins.md's permission-keys example is what `plugin check` prints.
#[test]
fn plugins_md_permission_keys_are_the_real_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/plugins.md")).unwrap();
    let want = doc
        .lines()
        .find(|l| l.starts_with("plugins/Dice/plugin.yaml:3:3: unknown key `proceses`"))
        .expect("plugins.md shows the example");
    let (code, lines) = check(&[(
        "plugins/Dice/plugin.yaml",
        "name: Dice\npermissions:\n  proceses: true\n",
    )]);
    assert_eq!(code, 1);
    assert!(lines.iter().any(|l| l == want), "{want}\n{lines:#?}");
}

/// Item 10: `serve --store` with an unreachable store says it cannot reach it and exits,
/// not that it "is retried on the next use".
#[test]
fn an_unreachable_store_is_said_so_at_start() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = home();
    let store = format!("redis://127.0.0.1:{port}/");
    let run = tavern(
        h.path(),
        &[
            "--home",
            ".",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            &store,
        ],
        b"",
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot reach the shared store"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("retried on the next use"),
        "{}",
        run.stderr
    );
}

/// Item 3: a path given from the home `.` is shown as written, without `./` (never
/// `././plugins/Dice`).
#[test]
fn paths_from_the_home_have_no_dot_slash() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", DICE_YAML),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'roll', description = 'Rolls.', handler = function(a) return 1 end}\n",
            ),
        ],
    );
    let run = tavern(
        h.path(),
        &["--home", ".", "plugin", "test", "./plugins/Dice"],
        b"",
    );
    assert!(
        run.stdout.starts_with("testing plugins/Dice alone"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("./"), "{}", run.stdout);
}

/// Item 10: serving.md's `server/discover` codes over HTTP are the binary's: -32601 for a
/// complete request, -32602 without its `_meta`, -32020 without the revision's headers.
#[tokio::test]
async fn discover_over_http_answers_what_serving_md_says() {
    let s = crate::server_support::Server::start(&crate::server_support::fixture_home(), &[]);
    let c = reqwest::Client::new();
    let meta = serde_json::json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}});
    let cases = [
        (meta.clone(), true, -32601),
        (serde_json::json!({}), true, -32602),
        (meta, false, -32020),
    ];
    for (params, headers, want) in cases {
        let mut r = c
            .post(format!("{}/mcp", s.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if headers {
            r = r
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "server/discover");
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": params});
        let v: serde_json::Value = r.json(&body).send().await.unwrap().json().await.unwrap();
        assert_eq!(v["error"]["code"], want, "{v}");
    }
}

/// A home that is broken in every way a message names a file: a Lua and a Rhai runtime
/// error at line 2, a script that does not compile, a failing plugin test, a process tool
/// with a root inside the home.
fn broken_home() -> tempfile::TempDir {
    let h = home();
    write(
        h.path(),
        &[
            (
                "plugins/Dice/plugin.yaml",
                "name: Dice\ndescription: dice\npermissions:\n  processes: true\n  fs: { read: [data] }\n",
            ),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'roll', description = 'Rolls.', handler = function(a)\n  local t = nil; return t.x\nend}\n",
            ),
            (
                "plugins/Dice/tools/run.tool.json",
                r#"{"id": "Dice:run", "description": "runs", "parameters": {"type": "object"},
                    "implementation": {"type": "script", "command": "python3 x.py"}}"#,
            ),
            ("plugins/Dice/x.py", "print('{\"status\":\"success\",\"result\":1}')"),
            ("data/.keep", ""),
            (
                "plugins/Dice/tests/roll.test.json",
                r#"{"cases": [{"name": "rolls", "call": "Dice:roll", "args": {}, "expect": 1}]}"#,
            ),
            ("plugins/R/plugin.yaml", "name: R\ndescription: r\n"),
            (
                "plugins/R/main.rhai",
                "api::tools::register(#{id: \"boom\", description: \"b\", handler: \"boom\"});\nfn boom(args, ctx) { let x = 1; x.foo.bar }\n",
            ),
            ("plugins/U/plugin.yaml", "name: U\ndescription: u\n"),
            (
                "plugins/U/main.lua",
                "api.tools.register{id = 'w', description = 'w', handler = function(a)\n  api.fs.write('/x.txt', 'y')\nend}\n",
            ),
            ("tavern.toml", "[extensions.Dice]\nsidez = 8\n"),
            ("workflows/w.json", r#"{"id": "w", "nodes": {"a": {"type": "nope"}}}"#),
            ("agents/x.json", r#"{"id": "x", "max_turns": "eight"}"#),
            ("plugins/Bad/plugin.yaml", "name: Bad\ndescription: bad\n"),
            (
                "plugins/Bad/main.lua",
                "api.tools.register{id = 'x', description = 'x', handler = function(a)\n  return 1\n",
            ),
        ],
    );
    h
}

/// What no message may hold: the home's absolute path (as given or canonical) or a `./`
/// (a `../` is not one).
fn assert_home_relative(way: &str, text: &str, home: &Path) {
    let canonical = home.canonicalize().unwrap();
    for abs in [home.to_string_lossy(), canonical.to_string_lossy()] {
        assert!(
            !text.contains(abs.as_ref()),
            "{way}: absolute path {abs} in:\n{text}"
        );
    }
    let b = text.as_bytes();
    let dot_slash = (0..b.len().saturating_sub(1))
        .any(|i| b[i] == b'.' && b[i + 1] == b'/' && (i == 0 || b[i - 1] != b'.'));
    assert!(!dot_slash, "{way}: `./` in:\n{text}");
}

/// Item 3: every way in names files relative to the home — `call`, `plugin check` (text
/// and JSON, the process-tool line included), `plugin test`, REST, MCP and the server's log —
/// runtime errors of Lua and Rhai included (`plugins/Dice/main.lua:2`, not `main.lua:2`).
#[tokio::test]
async fn every_way_in_names_files_from_the_home() {
    use serde_json::{json, Value};
    use std::io::Write as _;

    let h = broken_home();
    let home = h.path().to_path_buf();
    let abs = home.to_string_lossy().into_owned();
    let lua_place = "plugins/Dice/main.lua:2:";
    let rhai_place = "plugins/R/main.rhai:2:";
    let bad_place = "plugins/Bad/main.lua:";

    // `call`, from another directory with the home given absolute.
    let body = br#"[{"tool": "Dice:roll", "args": {}}, {"tool": "R:boom", "args": {}}, {"tool": "Bad:x", "args": {}}]"#;
    let run = tavern(
        std::env::temp_dir().as_path(),
        &["--home", &abs, "call", "--format", "json", "-"],
        body,
    );
    let out = format!("{}\n{}", run.stdout, run.stderr);
    assert_home_relative("call", &out, &home);
    for want in [lua_place, rhai_place, bad_place] {
        assert!(run.stdout.contains(want), "call: {want} in:\n{out}");
    }

    // `plugin check`, text and JSON.
    let run = tavern(&home, &["--home", &abs, "plugin", "check"], b"");
    let out = format!("{}\n{}", run.stdout, run.stderr);
    assert_home_relative("plugin check", &out, &home);
    assert!(run.stdout.contains(bad_place), "{out}");
    // An undeclared use in the permissions table, a stray setting in tavern.toml.
    assert!(
        run.stdout.contains("  undeclared: plugins/U/main.lua:2: "),
        "{out}"
    );
    assert!(run.stdout.contains("tavern.toml:2"), "{out}");
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("process tool Dice:run:"))
        .unwrap_or_else(|| panic!("no process-tool line:\n{out}"));
    // fs roots are taken from the home: `data` is `<home>/data`.
    assert!(
        line.contains("read plugins/Dice, data (+ system paths)"),
        "{line}"
    );
    assert!(
        run.stdout.contains("fs.read            declared: data "),
        "{out}"
    );
    let run = tavern(&home, &["--home", &abs, "plugin", "check", "--json"], b"");
    assert_home_relative("plugin check --json", &run.stdout, &home);
    let v = run.json();
    let read = &v["confinement"]["tools"][0]["read"];
    assert_eq!(read, &json!(["plugins/Dice", "data"]), "{v}");

    // `plugin test`: the whole plugins directory and one plugin given absolute.
    for args in [
        vec!["--home", &abs, "plugin", "test"],
        vec![
            "--home",
            &abs,
            "plugin",
            "test",
            &format!("{abs}/plugins/Dice"),
        ],
    ] {
        let run = tavern(std::env::temp_dir().as_path(), &args, b"");
        let out = format!("{}\n{}", run.stdout, run.stderr);
        assert_home_relative("plugin test", &out, &home);
        assert!(
            run.stdout
                .contains("FAIL plugins/Dice/tests/roll.test.json :: rolls"),
            "{out}"
        );
        assert!(run.stdout.contains(lua_place), "{out}");
    }

    // A broken workflow file and agent profile given by their absolute paths.
    for (args, want) in [
        (
            vec!["workflow", "run", "workflows/w.json"],
            "workflows/w.json: ",
        ),
        (
            vec![
                "agent",
                "run",
                "agents/x.json",
                "--llm",
                "scripted:nope.json",
            ],
            "agents/x.json:1:",
        ),
    ] {
        let file = format!("{abs}/{}", args[2]);
        let mut all = vec!["--home", abs.as_str()];
        all.extend(args.iter().take(2));
        all.push(&file);
        all.extend(args.iter().skip(3));
        let run = tavern(std::env::temp_dir().as_path(), &all, b"");
        let out = format!("{}\n{}", run.stdout, run.stderr);
        assert_ne!(run.code, 0, "{out}");
        assert_home_relative(&format!("{args:?}"), &out, &home);
        assert!(run.stderr.contains(want), "{want}: {out}");
    }

    // `plugin new`: the directory from the home; the next command works as printed.
    let run = tavern(
        std::env::temp_dir().as_path(),
        &["--home", &abs, "plugin", "new", "Fresh"],
        b"",
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "created plugins/Fresh".to_string(),
            format!("next: tavern --home {abs} plugin test plugins/Fresh")
        ],
        "{}",
        run.stderr
    );
    let run = tavern(
        std::env::temp_dir().as_path(),
        &["--home", &abs, "plugin", "test", "plugins/Fresh"],
        b"",
    );
    assert!(run.stdout.contains("3 passed, 0 failed"), "{}", run.stdout);
    assert_home_relative("plugin test plugins/Fresh", &run.stdout, &home);

    // REST, and what the server logs.
    let s = crate::server_support::Server::start(&home, &[]);
    let c = reqwest::Client::new();
    for (tool, want) in [
        ("Dice:roll", lua_place),
        ("R:boom", rhai_place),
        ("Bad:x", bad_place),
    ] {
        let r = c
            .post(format!("{}/api/invoke", s.base))
            .json(&json!({"tool": tool, "args": {}}))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        assert_home_relative("REST", &text, &home);
        assert!(text.contains(want), "REST {tool}: {text}");
    }
    let log = s.stderr_lines().join("\n");
    assert_home_relative("server log", &log, &home);
    drop(s);

    // MCP over stdio.
    let (mut child, mut stdin, rx) = crate::server_support::spawn_mcp(&home);
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "paths", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for (i, (tool, want)) in [
        ("Dice:roll", lua_place),
        ("R:boom", rhai_place),
        ("Bad:x", bad_place),
    ]
    .into_iter()
    .enumerate()
    {
        let id = json!(i + 1);
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}));
        let answer = loop {
            let v = rx
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("an MCP answer within 30 s");
            if v.get("id") == Some(&id) {
                break v;
            }
        };
        let text = answer.to_string();
        assert_home_relative("MCP", &text, &home);
        assert!(text.contains(want), "MCP {tool}: {text}");
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Item 6: a loose argument name is a warning in MCP's `tools/call` result too (a text
/// block after the result) and in the agent loop's Observation and its `--json` record.
#[test]
fn loose_names_are_warnings_in_mcp_and_the_agent_loop() {
    use serde_json::{json, Value};
    use std::io::Write as _;

    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Inn/plugin.yaml", "name: Inn\ndescription: inn\n"),
            ("plugins/Inn/main.lua", INN_LUA),
            (
                "agents/host.json",
                r#"{"id": "host", "name": "Host", "description": "Greets.",
                    "tool_ids_inventory": ["Inn:greet"], "tool_call_format": "tam",
                    "max_turns": 3}"#,
            ),
            (
                "replies.json",
                r#"["<|[REQUEST_TOOL]|>\ncommand:「始」Inn:greet「末」\nguestName:「始」Bo「末」\n<|[END_TOOL]|>", "Done."]"#,
            ),
        ],
    );
    let warning = "argument 'guestName' read as 'guest_name'";

    // MCP over stdio: the result's own block first, then the warning; exact names add none.
    // The same for a client that declares tasks (a quick call is answered directly).
    for (version, caps) in [
        ("2025-06-18", json!({})),
        (
            "2025-11-25",
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        ),
    ] {
        let (mut child, mut stdin, rx) = crate::server_support::spawn_mcp(h.path());
        let mut send = |v: Value| {
            writeln!(stdin, "{v}").unwrap();
            stdin.flush().unwrap();
        };
        send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": caps,
            "clientInfo": {"name": "loose", "version": "1"}}}),
        );
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let mut call = |id: i64, key: &str| {
            send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "Inn:greet", "arguments": {key: "Bo"}}}));
            loop {
                let v = rx
                    .recv_timeout(std::time::Duration::from_secs(30))
                    .expect("an MCP answer within 30 s");
                if v.get("id") == Some(&json!(id)) {
                    break v;
                }
            }
        };
        let loose = call(1, "guestName");
        assert_eq!(
            loose["result"]["content"],
            json!([{"type": "text", "text": "hi Bo"}, {"type": "text", "text": format!("warning: {warning}")}]),
            "{version}: {loose}"
        );
        let exact = call(2, "guest_name");
        assert_eq!(
            exact["result"]["content"],
            json!([{"type": "text", "text": "hi Bo"}]),
            "{version}: {exact}"
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    // The agent loop: the Observation tells the model, the run's record keeps the warning.
    let r = tavern(
        h.path(),
        &[
            "--home",
            ".",
            "agent",
            "run",
            "host",
            "--llm",
            "scripted:replies.json",
            "--message",
            "Bo is here.",
            "--json",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    let turn = &v["turns"][0];
    assert_eq!(turn["results"][0]["value"], "hi Bo", "{v}");
    assert_eq!(turn["results"][0]["warnings"], json!([warning]), "{v}");
    let obs = turn["observations"][0].as_str().unwrap_or_default();
    assert!(
        obs.starts_with("Observation: Tool Inn:greet executed successfully.")
            && obs.ends_with(&format!("\n    Warning: {warning}")),
        "{obs}"
    );
    assert_eq!(v["stop_reason"], "no_calls", "{v}");
}

/// Item 4: the time limit says where it stopped a script too (Lua: the line it ran; Rhai:
/// the called function's one loop).
#[test]
fn the_time_limit_says_where_it_stopped() {
    let h = home();
    // The time limit must come first: 20 ms is far less than the host's 50,000,000
    // instructions take on any machine, loaded or quiet.
    let limits = "limits:\n  instructions: 1000000000000\n  wallMs: 20\n";
    write(
        h.path(),
        &[
            ("plugins/L/plugin.yaml", &format!("name: L\ndescription: l\n{limits}")),
            (
                "plugins/L/main.lua",
                "api.tools.register{id = 'spin', description = 's', handler = function(a)\n  local i = 0\n  while true do\n    i = i + 1\n  end\nend}\n",
            ),
            ("plugins/R/plugin.yaml", &format!("name: R\ndescription: r\n{limits}")),
            (
                "plugins/R/main.rhai",
                "api::tools::register(#{id: \"spin\", description: \"s\", handler: \"spin\"});\n\nfn spin(args, ctx) {\n  let i = 0;\n  while true {\n    i += 1;\n  }\n}\n",
            ),
        ],
    );
    let err = |tool: &str| {
        let body = format!("{{\"tool\": \"{tool}\", \"args\": {{}}}}");
        let v = tavern(h.path(), &["--home", ".", "call", "-"], body.as_bytes()).json();
        v["results"][0]["error"].clone()
    };
    let l = err("L:spin");
    assert_eq!(l["code"], "timeout", "{l}");
    let m = l["message"].as_str().unwrap();
    assert!(
        m.contains("timed out after 20 ms (stopped at plugins/L/main.lua:")
            && ["3)", "4)"].iter().any(|e| m.ends_with(e)),
        "{m}"
    );
    let r = err("R:spin");
    assert_eq!(r["code"], "timeout", "{r}");
    assert!(
        r["message"].as_str().unwrap().ends_with(
            "timed out after 20 ms (stopped at plugins/R/main.rhai:5, the loop in spin)"
        ),
        "{r}"
    );
}

/// Item 3: a Lua file whose path from the home Lua would shorten (60 bytes or more) is
/// named from its plugin directory, whole, never `...` and a tail.
#[test]
fn a_long_lua_path_is_never_cut() {
    let h = home();
    let name = format!("Long{}", "x".repeat(50));
    write(
        h.path(),
        &[
            (
                &format!("plugins/{name}/plugin.yaml"),
                &format!("name: {name}\ndescription: l\n"),
            ),
            (
                &format!("plugins/{name}/main.lua"),
                "api.tools.register{id = 'f', description = 'f', handler = function(a)\n  local t = nil; return t.x\nend}\n",
            ),
            ("plugins/Dice/plugin.yaml", DICE_YAML),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'f', description = 'f', handler = function(a)\n  local t = nil; return t.x\nend}\n",
            ),
        ],
    );
    let msg = |tool: &str| {
        let body = format!("{{\"tool\": \"{tool}\", \"args\": {{}}}}");
        let v = tavern(h.path(), &["--home", ".", "call", "-"], body.as_bytes()).json();
        v["results"][0]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let long = msg(&format!("{name}:f"));
    assert!(long.contains(": main.lua:2: "), "{long}");
    assert!(!long.contains("..."), "{long}");
    let short = msg("Dice:f");
    assert!(short.contains(": plugins/Dice/main.lua:2: "), "{short}");
}
