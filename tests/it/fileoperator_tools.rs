//! The bundled FileOperator plugin (Lua) against real files in a temp workspace: every tool,
//! ApplyEdit's rules, and path escapes (`..`, absolute paths, symlinks, sibling prefixes, NUL).

use crate::plugin_support;

use std::path::{Path, PathBuf};

use plugin_support::copy_dir;
use serde_json::{json, Value};
use tavern::internal::tools::{Caller, ToolError};
use tavern::Engine;

struct Fixture {
    _tmp: tempfile::TempDir,
    /// Parent of the workspace (things outside the root go here).
    base: PathBuf,
    root: PathBuf,
    engine: Engine,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let home = base.join("home");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/FileOperator"),
        &home.join("plugins/FileOperator"),
    );
    let root = base.join("ws");
    let engine = Engine::builder()
        .home(&home)
        .set(format!("extensions.FileOperator.root={}", root.display()))
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    Fixture {
        _tmp: tmp,
        base,
        root,
        engine,
    }
}

impl Fixture {
    async fn call(&self, tool: &str, args: Value) -> Result<Value, ToolError> {
        self.engine
            .tools()
            .invoke(&format!("FileOperator:{tool}"), args, Caller::Cli)
            .await
    }

    async fn ok(&self, tool: &str, args: Value) -> Value {
        match self.call(tool, args.clone()).await {
            Ok(v) => v,
            Err(e) => panic!("{tool} {args}: {e}"),
        }
    }

    /// Every file under `dir`, relative, sorted.
    fn tree(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        fn walk(d: &Path, base: &Path, out: &mut Vec<String>) {
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    let p = e.path();
                    out.push(p.strip_prefix(base).unwrap().display().to_string());
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        walk(&p, base, out);
                    }
                }
            }
        }
        walk(dir, dir, &mut out);
        out.sort();
        out
    }
}

#[tokio::test]
async fn every_tool_works_inside_the_root() {
    let f = fixture();
    assert_eq!(
        f.ok(
            "WriteFile",
            json!({"filePath": "/logs/today.log", "content": "Task started..."})
        )
        .await["bytes"],
        json!(15)
    );
    f.ok(
        "AppendFile",
        json!({"filePath": "/logs/today.log", "content": "\nNew record."}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(f.root.join("logs/today.log")).unwrap(),
        "Task started...\nNew record."
    );
    assert_eq!(
        f.ok("ReadFile", json!({"filePath": "logs/today.log"}))
            .await,
        json!("Task started...\nNew record.")
    );
    f.ok(
        "AppendFile",
        json!({"filePath": "/new.txt", "content": "created"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(f.root.join("new.txt")).unwrap(),
        "created"
    );

    let listing = f.ok("ListDirectory", json!({})).await;
    let names: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["logs", "new.txt"]);
    let listing = f.ok("ListDirectory", json!({"dirPath": "/logs"})).await;
    assert_eq!(listing[0]["name"], json!("today.log"));
    assert_eq!(listing[0]["type"], json!("file"));

    f.ok("DeleteFile", json!({"filePath": "/new.txt"})).await;
    assert!(!f.root.join("new.txt").exists());
    let err = f
        .call("ReadFile", json!({"filePath": "/new.txt"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "execution_failed", "{err}");
    // No temp files are left behind by the atomic writes.
    assert_eq!(Fixture::tree(&f.root), ["logs", "logs/today.log"]);
}

#[tokio::test]
async fn apply_edit_rules() {
    let f = fixture();
    f.ok("WriteFile", json!({"filePath": "/main.js", "content": "console.log(\"old message\");\nlet a = 1;\nlet a = 1;\n"})).await;
    // The seed's example (000 §6.2).
    let v = f
        .ok("ApplyEdit", json!({"filePath": "/main.js", "search_string": "console.log(\"old message\");", "replace_string": "console.log(\"new message\");"}))
        .await;
    assert_eq!(v["replacements"], json!(1));
    // Lua pattern characters are plain text here.
    f.ok(
        "WriteFile",
        json!({"filePath": "/p.txt", "content": "50% (a.b) [x]"}),
    )
    .await;
    f.ok(
        "ApplyEdit",
        json!({"filePath": "/p.txt", "search_string": "% (a.b) [x]", "replace_string": "%1 done"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(f.root.join("p.txt")).unwrap(),
        "50%1 done"
    );

    let cases: &[(Value, &str)] = &[
        (
            json!({"filePath": "/main.js", "search_string": "nothing like this", "replace_string": "x"}),
            "not found",
        ),
        (
            json!({"filePath": "/main.js", "search_string": "let a = 1;", "replace_string": "x"}),
            "occurs 2 times",
        ),
        (
            json!({"filePath": "/missing.js", "search_string": "a", "replace_string": "b"}),
            "missing.js",
        ),
    ];
    for (args, want) in cases {
        let err = f.call("ApplyEdit", args.clone()).await.unwrap_err();
        assert!(err.to_string().contains(want), "{args}: {err}");
    }
    // A refused edit changes nothing.
    assert!(std::fs::read_to_string(f.root.join("main.js"))
        .unwrap()
        .contains("let a = 1;\nlet a = 1;"));
    let v = f.ok("ApplyEdit", json!({"filePath": "/main.js", "search_string": "let a = 1;", "replace_string": "let b = 2;", "replace_all": true})).await;
    assert_eq!(v["replacements"], json!(2));
    assert_eq!(
        std::fs::read_to_string(f.root.join("main.js")).unwrap(),
        "console.log(\"new message\");\nlet b = 2;\nlet b = 2;\n"
    );
}

#[tokio::test]
async fn absolute_paths_are_taken_from_the_root() {
    let f = fixture();
    // Chroot semantics: "/etc/passwd" is <root>/etc/passwd, never the host's file.
    let err = f
        .call("ReadFile", json!({"filePath": "/etc/passwd"}))
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("root:x:0"), "{err}");
    f.ok(
        "WriteFile",
        json!({"filePath": "/etc/passwd", "content": "inside"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(f.root.join("etc/passwd")).unwrap(),
        "inside"
    );
    let outside = f.base.join("abs.txt");
    f.ok(
        "WriteFile",
        json!({"filePath": outside.display().to_string(), "content": "x"}),
    )
    .await;
    assert!(
        !outside.exists(),
        "an absolute host path must land inside the root"
    );
}

#[tokio::test]
async fn escapes_are_refused_and_nothing_is_written_outside() {
    let f = fixture();
    std::fs::create_dir_all(&f.root).unwrap();
    let outside = f.base.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    let sibling = f.base.join("ws-evil");
    std::fs::create_dir_all(&sibling).unwrap();
    std::os::unix::fs::symlink(&outside, f.root.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), f.root.join("secret-link.txt")).unwrap();

    let paths = [
        "../outside/secret.txt",
        "a/../../outside/secret.txt",
        "/../outside/secret.txt",
        "../ws-evil/x.txt",
        "link/secret.txt",
        "link/new.txt",
        "secret-link.txt",
        "nul\u{0}byte.txt",
    ];
    for p in paths {
        for (tool, args) in [
            ("ReadFile", json!({"filePath": p})),
            ("WriteFile", json!({"filePath": p, "content": "pwned"})),
            ("AppendFile", json!({"filePath": p, "content": "pwned"})),
            ("DeleteFile", json!({"filePath": p})),
            (
                "ApplyEdit",
                json!({"filePath": p, "search_string": "secret", "replace_string": "pwned"}),
            ),
        ] {
            let r = f.call(tool, args).await;
            assert!(r.is_err(), "{tool} {p:?} was allowed: {r:?}");
        }
    }
    let err = f
        .call("ListDirectory", json!({"dirPath": "link"}))
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("secret.txt"), "{err}");
    assert!(f
        .call("ListDirectory", json!({"dirPath": ".."}))
        .await
        .is_err());

    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret"
    );
    assert_eq!(Fixture::tree(&outside), ["secret.txt"]);
    assert!(Fixture::tree(&sibling).is_empty());
    // The plugin still serves after all that.
    f.ok(
        "WriteFile",
        json!({"filePath": "/ok.txt", "content": "fine"}),
    )
    .await;
    assert_eq!(
        f.ok("ReadFile", json!({"filePath": "/ok.txt"})).await,
        json!("fine")
    );
}

#[tokio::test]
async fn the_default_root_is_workspace_in_the_home() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/FileOperator"),
        &home.join("plugins/FileOperator"),
    );
    let e = Engine::builder().home(home).build().unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e.tools()
        .invoke(
            "FileOperator.WriteFile",
            json!({"filePath": "/a.txt", "content": "hi"}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(home.join("workspace/a.txt")).unwrap(),
        "hi"
    );
    // And from tavern.toml.
    std::fs::write(
        home.join("tavern.toml"),
        "[extensions.FileOperator]\nroot = \"other\"\n",
    )
    .unwrap();
    let e = Engine::builder().home(home).build().unwrap();
    e.tools()
        .invoke(
            "FileOperator.WriteFile",
            json!({"filePath": "/b.txt", "content": "yo"}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(home.join("other/b.txt")).unwrap(),
        "yo"
    );
}
