//! `tavern plugin new|check|test` through the real binary: a scaffolded plugin loads and
//! passes its own tests as generated, in both languages; `check` prints file:line:column.

use std::path::Path;
use std::process::{Command, Output};

fn tavern(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tavern"))
        .arg("--home")
        .arg(home)
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn scaffolded_plugins_load_and_pass_their_tests() {
    for lang in ["lua", "rhai"] {
        let home = tempfile::tempdir().unwrap();
        let name = format!("Hello{}", if lang == "lua" { "Lua" } else { "Rhai" });
        let o = tavern(home.path(), &["plugin", "new", &name, "--lang", lang]);
        assert!(o.status.success(), "{}", text(&o));
        let dir = home.path().join("plugins").join(&name);
        for f in [
            "plugin.yaml",
            "tools/greet.tool.json",
            &format!("main.{lang}"),
            "tests/greet.test.json",
        ] {
            assert!(dir.join(f).is_file(), "{lang}: missing {f}");
        }
        let o = tavern(home.path(), &["plugin", "check"]);
        assert!(o.status.success(), "{lang}: {}", text(&o));
        // No problem lines: the report starts with the plugin's permissions table.
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.starts_with(&format!("plugin {name}\n")),
            "{lang}: {}",
            text(&o)
        );
        assert!(out.contains(", 0 problem(s)"), "{lang}: {}", text(&o));
        let o = tavern(home.path(), &["plugin", "test", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{lang}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("3 passed, 0 failed"),
            "{lang}: {}",
            text(&o)
        );
        // The config option reaches the script.
        let o = Command::new(env!("CARGO_BIN_EXE_tavern"))
            .arg("--home")
            .arg(home.path())
            .args([
                "--set",
                &format!("extensions.{name}.greeting=Howdy"),
                "plugin",
                "test",
            ])
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "{lang}: the expected greeting changed, so a case must fail"
        );
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("Howdy, Ada!"),
            "{lang}: {}",
            text(&o)
        );
        // A second `new` with the same name refuses to overwrite.
        let o = tavern(home.path(), &["plugin", "new", &name, "--lang", lang]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    }
}

#[test]
fn check_prints_every_problem_with_its_place() {
    let home = tempfile::tempdir().unwrap();
    let bad = home.path().join("plugins/Bad");
    std::fs::create_dir_all(bad.join("tools")).unwrap();
    std::fs::write(bad.join("plugin.yaml"), "name: Bad\n").unwrap();
    std::fs::write(bad.join("tools/a.tool.json"), "{\n  \"id\": \"a\",\n  \"implementation\": {\"type\": \"service\", \"function\": \"nope\"}\n}").unwrap();
    std::fs::write(
        bad.join("tools/b.tool.json"),
        "{\n  \"id\": \"b\"\n  oops\n}",
    )
    .unwrap();
    let o = tavern(home.path(), &["plugin", "check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // Files are named relative to the home (issue 23 item 15).
    let a = "plugins/Bad/tools/a.tool.json:3:3: ";
    let b = "plugins/Bad/tools/b.tool.json:3:";
    assert!(
        out.lines()
            .any(|l| l.starts_with(a) && l.contains("unknown host service 'nope'")),
        "{}",
        text(&o)
    );
    assert!(out.lines().any(|l| l.starts_with(b)), "{}", text(&o));
    // The problems come first, one per line; the permissions report follows a blank line.
    let problems = out.split("\n\n").next().unwrap_or_default();
    assert_eq!(problems.lines().count(), 2, "{}", text(&o));
    assert!(out.contains("2 problem(s)"), "{}", text(&o));

    let o = tavern(home.path(), &["plugin", "new", "bad.name"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn the_repository_is_a_working_home() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = tavern(repo, &["plugin", "check"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// CI runs the bundled plugins' own tests here (`cargo test` runs this): a fresh clone's
/// `tavern plugin test` passes on the repository's home.
#[test]
fn the_bundled_plugin_tests_pass_on_the_repository_home() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = tavern(repo, &["plugin", "test"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(" 0 failed, 0 problem(s)"), "{}", text(&o));
    assert!(!out.contains("FAIL "), "{}", text(&o));
}

/// Every string in a JSON document, with its path.
fn strings<'a>(v: &'a serde_json::Value, path: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        serde_json::Value::String(s) => out.push((path, s)),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                strings(x, format!("{path}[{i}]"), out);
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                strings(x, format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// Issue 23 item 7: the whole report (problems, permissions, summary) is on stdout, so
/// `plugin check | less` shows it; `--json` holds data, not preformatted text.
#[test]
fn check_reports_on_stdout_and_its_json_is_structured() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("plugins/Sneaky");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: Sneaky\npermissions:\n  hooks: [\"tool:after-invoke\"]\n  env: [LANG]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.lua"),
        "function later()\n  api.hooks.on('tool:before-invoke', function() end)\nend\n",
    )
    .unwrap();
    let o = tavern(home.path(), &["plugin", "check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(o.stderr.is_empty(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "main.lua:2: plugin 'Sneaky' uses hooks 'tool:before-invoke'",
        "plugin Sneaky\n",
        "declared: tool:after-invoke",
        "  env                declared: LANG",
        "  network            declared: false",
        "1 plugin(s), 0 tool(s), 1 problem(s)",
    ] {
        assert!(out.contains(want), "missing {want:?}: {}", text(&o));
    }

    let o = tavern(home.path(), &["plugin", "check", "--json"]);
    assert!(o.stderr.is_empty(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &v["permissions"][0];
    assert_eq!(p["plugin"], "Sneaky", "{v}");
    assert_eq!(p["env"], serde_json::json!(["LANG"]), "{v}");
    let hooks = p["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["permission"] == "hooks")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(hooks["declared"], serde_json::json!(["tool:after-invoke"]));
    assert_eq!(hooks["used"], serde_json::json!(["tool:before-invoke"]));
    assert_eq!(p["undeclared"][0]["line"], 2, "{v}");
    let mut all = Vec::new();
    strings(&v, String::new(), &mut all);
    for (path, s) in all {
        assert!(!s.contains('\n'), "preformatted text at {path}: {s:?}");
    }
}

/// Issue 23 item 17: `plugin test DIR` says it loaded that plugin alone, without the hook
/// scripts; `--with-home` loads the rest of the home, so a guard hook applies to the tests.
#[test]
fn plugin_test_says_what_it_loaded_and_with_home_loads_the_rest() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("plugins/Echo");
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::create_dir_all(home.path().join("scripts")).unwrap();
    std::fs::write(dir.join("plugin.yaml"), "name: Echo\n").unwrap();
    std::fs::write(
        dir.join("tools/echo.tool.json"),
        r#"{"id": "echo", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
            "implementation": {"type": "service", "script": "main.lua", "function": "echo"}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("main.lua"), "function echo(a) return a.text end\n").unwrap();
    std::fs::write(
        dir.join("tests/echo.test.json"),
        r#"{"cases": [{"name": "guarded", "call": "Echo:echo", "args": {"text": "x"}, "expectError": "vetoed"}]}"#,
    )
    .unwrap();
    std::fs::write(
        home.path().join("scripts/guard.lua"),
        "api.hooks.on('tool:before-invoke', function(ev) if ev.tool == 'Echo:echo' then return false, 'guarded' end end)\n",
    )
    .unwrap();

    let o = tavern(home.path(), &["plugin", "test", "plugins/Echo"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines().next().is_some_and(|l| l.contains("alone")
            && l.contains("no hook scripts")
            && l.contains("--with-home")),
        "{}",
        text(&o)
    );
    assert!(
        !o.status.success(),
        "no guard without the home: {}",
        text(&o)
    );

    let o = tavern(
        home.path(),
        &["plugin", "test", "plugins/Echo", "--with-home"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("whole home loaded"), "{}", text(&o));
    assert!(out.contains("1 passed, 0 failed"), "{}", text(&o));
}
