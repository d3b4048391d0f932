//! File access that cannot be raced (issue 24, findings 1 and 2): FileOperator reads and
//! writes in a loop while another thread swaps a directory of its workspace with a symlink
//! to an outside directory (`renameat2(RENAME_EXCHANGE)`); nothing outside may be read or
//! written. A FIFO in the workspace answers an error at once; our stale temp files go at load.

#![cfg(target_os = "linux")]

use crate::common::answered_within;
use crate::plugin_support::copy_dir;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tavern::internal::tools::{Caller, ToolError};
use tavern::Engine;

fn engine(home: &Path, root: &Path) -> Engine {
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/FileOperator"),
        &home.join("plugins/FileOperator"),
    );
    let engine = Engine::builder()
        .home(home)
        .set(format!("extensions.FileOperator.root={}", root.display()))
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    engine
}

async fn call(engine: &Engine, tool: &str, args: Value) -> Result<Value, ToolError> {
    engine
        .tools()
        .invoke(&format!("FileOperator:{tool}"), args, Caller::Cli)
        .await
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Swaps `a` and `b` atomically (both must exist).
fn exchange(a: &CString, b: &CString) -> bool {
    // SAFETY: two valid NUL-terminated paths; the syscall only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    r == 0
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_a_directory_for_a_symlink_never_leads_outside_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let base: PathBuf = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("d/f.txt"), "inside").unwrap();
    std::fs::write(outside.join("f.txt"), "SECRET").unwrap();
    // `ws/x` is a symlink out; swapping it with `ws/d` makes `d/f.txt` the outside file.
    std::os::unix::fs::symlink(&outside, root.join("x")).unwrap();
    let engine = engine(&base.join("home"), &root);

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let (a, b) = (cpath(&root.join("d")), cpath(&root.join("x")));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if exchange(&a, &b) {
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let end = Instant::now() + Duration::from_secs(3);
    let (mut reads, mut writes, mut leaked) = (0usize, 0usize, Vec::new());
    let mut n = 0usize;
    while Instant::now() < end {
        n += 1;
        if let Ok(v) = call(&engine, "ReadFile", json!({"filePath": "d/f.txt"})).await {
            reads += 1;
            if v != json!("inside") {
                leaked.push(v);
            }
        }
        let w = json!({"filePath": format!("d/w{}.txt", n % 50), "content": "written"});
        if call(&engine, "WriteFile", w).await.is_ok() {
            writes += 1;
        }
        let a = json!({"filePath": "d/f.txt", "content": ""});
        let _ = call(&engine, "AppendFile", a).await;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        swaps.load(Ordering::Relaxed) > 0,
        "the swapper never swapped"
    );
    assert!(reads + writes > 0, "nothing ever succeeded");
    assert!(leaked.is_empty(), "read outside the root: {leaked:?}");
    assert_eq!(
        tree(&outside),
        ["f.txt"],
        "written outside the root (after {n} rounds)"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("f.txt")).unwrap(),
        "SECRET"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_refused_at_once_and_the_plugin_keeps_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    let fifo = cpath(&root.join("pipe"));
    // SAFETY: a valid path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let engine = Arc::new(engine(&base.join("home"), &root));
    // Without the fix the read blocks in the kernel; the watchdog turns the hang into a
    // failure.
    let e = engine.clone();
    let read = answered_within(20, async move {
        call(&e, "ReadFile", json!({"filePath": "pipe"})).await
    });
    let err = read.expect_err("a FIFO is not a file to read");
    assert!(err.to_string().contains("not a regular file"), "{err}");
    for (tool, args) in [
        ("AppendFile", json!({"filePath": "pipe", "content": "x"})),
        (
            "ApplyEdit",
            json!({"filePath": "pipe", "search_string": "a", "replace_string": "b"}),
        ),
        ("WriteFile", json!({"filePath": "pipe", "content": "x"})),
    ] {
        let e = engine.clone();
        let r = answered_within(20, async move { call(&e, tool, args).await });
        let err = r.expect_err("a FIFO is refused");
        assert!(
            err.to_string().contains("not a regular file"),
            "{tool}: {err}"
        );
    }
    call(
        &engine,
        "WriteFile",
        json!({"filePath": "ok.txt", "content": "fine"}),
    )
    .await
    .expect("the next call works");
    assert_eq!(
        call(&engine, "ReadFile", json!({"filePath": "ok.txt"}))
            .await
            .unwrap(),
        json!("fine")
    );
}

#[tokio::test]
async fn stale_temp_files_of_a_killed_write_are_removed_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    // What a write killed by SIGKILL leaves: our temp name, with the pid of a dead process.
    let dead = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let stale = [
        root.join(format!(".tavern-tmp.{dead}.a1b2")),
        root.join(format!("sub/.tavern-tmp.{dead}.c3d4")),
    ];
    for s in &stale {
        std::fs::write(s, "half a fi").unwrap();
    }
    // Files that only look alike stay.
    std::fs::write(root.join(".tavern-tmp-notes.txt"), "mine").unwrap();
    std::fs::write(root.join("sub/keep.txt"), "keep").unwrap();
    let engine = engine(&base.join("home"), &root);
    for s in &stale {
        assert!(!s.exists(), "{} was left", s.display());
    }
    assert!(root.join(".tavern-tmp-notes.txt").exists());
    assert_eq!(
        call(&engine, "ReadFile", json!({"filePath": "sub/keep.txt"}))
            .await
            .unwrap(),
        json!("keep")
    );
}
