//! The official Python MCP client (`pip install mcp`) against the real `tavern` binary, over
//! stdio, Streamable HTTP, and with `--watch` (see tests/server/mcp_client.py for the checks).
//! Under `CI=true` a missing python3/mcp fails the test instead of skipping it.

use crate::server_support;

use std::process::Command;

use server_support::{fixture_home, tavern, temp_home, Server};

fn python_ready() -> bool {
    if Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success())
    {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "python3 with the `mcp` package is required under CI (python3 -m pip install mcp)"
    );
    eprintln!("skipping: python3 with the `mcp` package is not installed");
    false
}

fn script() -> String {
    format!("{}/tests/server/mcp_client.py", env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) {
    let out = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().last().is_some_and(|l| l.starts_with("OK ")),
        "python MCP client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let n: usize = stdout
        .lines()
        .last()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(n >= 5, "the client ran too few checks: {stdout}");
}

#[test]
fn python_client_over_stdio() {
    if !python_ready() {
        return;
    }
    let home = fixture_home();
    run(&["stdio", tavern(), home.to_str().expect("utf-8 path")]);
}

#[test]
fn python_client_over_streamable_http() {
    if !python_ready() {
        return;
    }
    let home = fixture_home();
    let server = Server::start(&home, &["--page-size", "3"]);
    run(&["http", &format!("{}/mcp", server.base)]);
}

#[test]
fn reload_under_watch_sends_list_changed() {
    if !python_ready() {
        return;
    }
    let home = temp_home();
    run(&["watch", tavern(), home.path().to_str().expect("utf-8 path")]);
}
