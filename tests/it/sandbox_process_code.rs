//! `CodeInterpreter:execute` in Python and JavaScript (issue 12): real python3 / node
//! children inside the process-tool confinement, listed only when installed.

use crate::plugin_support;

use plugin_support::{bundled, copy_dir};
use serde_json::{json, Value};
use tavern::internal::tools::{Caller, ToolError};
use tavern::Engine;

fn engine(home: &std::path::Path) -> Engine {
    copy_dir(
        &bundled("CodeInterpreter"),
        &home.join("plugins/CodeInterpreter"),
    );
    let e = Engine::builder()
        .home(home)
        .builtins(false)
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e
}

fn on_path(bin: &str) -> bool {
    std::process::Command::new(bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

async fn run(e: &Engine, language: &str, code: &str) -> Result<Value, ToolError> {
    e.tools()
        .invoke(
            "CodeInterpreter:execute",
            json!({"language": language, "code": code, "inputs": {"n": 4}}),
            Caller::Cli,
        )
        .await
}

#[tokio::test]
async fn the_enum_lists_the_languages_this_machine_runs() {
    let t = tempfile::tempdir().unwrap();
    let e = engine(t.path());
    let tool = e.tools().get("CodeInterpreter:execute").unwrap();
    let langs = tool.definition.parameters["properties"]["language"]["enum"].clone();
    let mut want = vec!["lua", "rhai"];
    if on_path("python3") {
        want.push("python");
    }
    if on_path("node") {
        want.push("javascript");
    }
    assert_eq!(langs, json!(want));
}

/// The expected value (JSON text) or texts the error must contain (`a|b`: either).
type Want = Result<&'static str, &'static [&'static str]>;

/// (language, code, expected)
const CASES: &[(&str, &str, Want)] = &[
    (
        "python",
        "print('hi')\nsum(range(inputs['n']))",
        Ok(r#"{"output":"hi\n","value":6}"#),
    ),
    (
        "python",
        "open('/etc/passwd').read()",
        Err(&["PermissionError"]),
    ),
    (
        "python",
        "import os\nos.listdir('/root')",
        Err(&["PermissionError"]),
    ),
    (
        "python",
        "import socket\nsocket.create_connection(('127.0.0.1', 9))",
        Err(&["PermissionError"]),
    ),
    (
        "python",
        "x = bytearray(1 << 30)",
        Err(&["memory", "256 MiB"]),
    ),
    // On a loaded machine the wall-clock limit may come first; either names itself.
    (
        "python",
        "while True: pass",
        Err(&["cpu limit: the process used its 3 s|timed out after 10000 ms"]),
    ),
    ("python", "1/0", Err(&["ZeroDivisionError"])),
    (
        "javascript",
        "console.log('hi'); [1,2,3].map(x => x * inputs.n)",
        Ok(r#"{"output":"hi\n","value":[4,8,12]}"#),
    ),
    (
        "javascript",
        "require('fs').readFileSync('/etc/passwd', 'utf8')",
        Err(&["EACCES"]),
    ),
    (
        "javascript",
        "require('fs').readdirSync('/root')",
        Err(&["EACCES"]),
    ),
    ("javascript", "throw new Error('boom')", Err(&["boom"])),
];

#[tokio::test]
async fn python_and_javascript_run_confined() {
    let t = tempfile::tempdir().unwrap();
    let e = engine(t.path());
    let mut ran = 0;
    for (lang, code, want) in CASES {
        let bin = if *lang == "python" { "python3" } else { "node" };
        if !on_path(bin) {
            continue;
        }
        ran += 1;
        let got = run(&e, lang, code).await;
        match (&got, want) {
            (Ok(v), Ok(w)) => {
                let w: Value = serde_json::from_str(w).unwrap();
                assert_eq!(v, &w, "{lang}: {code}");
            }
            (Err(err), Err(texts)) => {
                for t in *texts {
                    assert!(
                        t.split('|').any(|t| err.to_string().contains(t)),
                        "{lang}: {code}: {err}"
                    );
                }
            }
            _ => panic!("{lang}: {code}: {got:?}"),
        }
    }
    // CI installs python3 and node; a machine with neither runs nothing here.
    if on_path("python3") && on_path("node") {
        assert_eq!(ran, CASES.len());
    }
}
