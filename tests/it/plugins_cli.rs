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
        assert!(
            String::from_utf8_lossy(&o.stdout).trim().is_empty(),
            "{lang}: {}",
            text(&o)
        );
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
    assert_eq!(out.lines().count(), 2, "{}", text(&o));

    let o = tavern(home.path(), &["plugin", "new", "bad.name"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn the_repository_is_a_working_home() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = tavern(repo, &["plugin", "check"]);
    assert!(o.status.success(), "{}", text(&o));
}
