//! Seed 000 §3.1.2: `FileOperator.WriteFile` then `FileOperator.AppendFile` on
//! `/logs/today.log`, through the engine and through the real `tavern call` binary, against a
//! temp workspace. The file must hold both contents, in order.

use crate::plugin_support;

use std::path::Path;
use std::process::Command;

use plugin_support::copy_dir;
use serde_json::Value;
use tavern::internal::protocol::Format;
use tavern::internal::tools::Caller;
use tavern::Engine;

const CHAIN: &str = include_str!("../data/seed_chain.tam");

fn home_with_file_operator() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/FileOperator"),
        &tmp.path().join("plugins/FileOperator"),
    );
    tmp
}

fn assert_both_contents(file: &Path) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let first = text
        .find("任务开始...")
        .unwrap_or_else(|| panic!("first content missing: {text:?}"));
    let second = text
        .find("添加新记录。")
        .unwrap_or_else(|| panic!("second content missing: {text:?}"));
    assert!(first < second, "{text:?}");
    assert!(
        text.starts_with("任务开始..."),
        "WriteFile must come first: {text:?}"
    );
}

#[tokio::test]
async fn through_the_engine() {
    let home = home_with_file_operator();
    let ws = home.path().join("ws");
    let e = Engine::builder()
        .home(home.path())
        .set(format!("extensions.FileOperator.root={}", ws.display()))
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    let (parsed, outcomes) = e
        .run(
            tavern::Request::text(CHAIN)
                .format(Format::Auto)
                .caller(Caller::Cli),
        )
        .await
        .map(|r| (r.parsed, r.outcomes))
        .unwrap();
    assert_eq!(parsed.calls.len(), 2, "{:?}", parsed.diagnostics);
    for o in &outcomes {
        assert!(o.result.is_ok(), "{}: {:?}", o.tool, o.result);
    }
    assert_both_contents(&ws.join("logs/today.log"));
    assert!(!home.path().join("workspace").join("logs").exists());
}

#[test]
fn through_tavern_call() {
    let home = home_with_file_operator();
    let ws = home.path().join("elsewhere");
    let input = home.path().join("chain.tam");
    std::fs::write(&input, CHAIN).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tavern"))
        .arg("--home")
        .arg(home.path())
        .arg("--set")
        .arg(format!("extensions.FileOperator.root={}", ws.display()))
        .arg("call")
        .arg(&input)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "status {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    assert!(results.iter().all(|r| r["ok"] == Value::Bool(true)), "{v}");
    assert_both_contents(&ws.join("logs/today.log"));

    // The default workspace, through TAVERN_HOME instead of --home.
    let out = Command::new(env!("CARGO_BIN_EXE_tavern"))
        .env("TAVERN_HOME", home.path())
        .arg("call")
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_both_contents(&home.path().join("workspace/logs/today.log"));
}
