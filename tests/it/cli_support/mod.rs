//! Runs the real `tavern` binary for the CLI tests.

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// What one run printed and how it ended.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as JSON (panics with both streams when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// No Rust panic text ever reaches the user.
    pub fn assert_no_panic(&self) {
        for s in [&self.stdout, &self.stderr] {
            assert!(!s.contains("panicked at"), "panic text: {s}");
            assert!(!s.contains("RUST_BACKTRACE"), "panic text: {s}");
        }
        assert_ne!(self.code, 70, "internal error: {}", self.stderr);
        assert_ne!(self.code, 101, "panic exit: {}", self.stderr);
    }
}

/// Runs `tavern ARGS` in `dir` with `stdin` as input; the home is `dir` unless given.
pub fn tavern(dir: &Path, args: &[&str], stdin: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tavern"))
        .args(args)
        .current_dir(dir)
        .env_remove("TAVERN_HOME")
        .env_remove("TAVERN_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tavern binary starts");
    // A child that exits before reading stdin closes the pipe; that is fine here.
    let _ = child.stdin.take().expect("piped stdin").write_all(stdin);
    let out = child
        .wait_with_output()
        .expect("the tavern binary finishes");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    run.assert_no_panic();
    run
}

/// A fresh empty home directory (no plugins, no workflows, no tavern.toml).
pub fn home() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}
