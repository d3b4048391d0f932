//! Builds `examples/c/host.c` with `cc` against the cdylib and runs it (under valgrind when
//! it is installed; CI installs it and sets `CI`, and then valgrind is required): every
//! exported function is called, and valgrind must report no memory error and no definite or
//! indirect leak.

use std::path::{Path, PathBuf};
use std::process::Command;

const QUEST_LUA: &str = r#"
api.tools.register({
  id = "reward",
  description = "Adds a reward to the gold the world reports.",
  parameters = {type = "object", properties = {amount = {type = "integer"}}, required = {"amount"}},
  handler = function(args)
    local w = api.tools.call("world:get", {})
    return {total = w.gold + args.amount}
  end,
})
"#;

/// The directory holding libtavern_capi.so for this test build.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for d in [deps, deps.parent().unwrap()] {
        if d.join("libtavern_capi.so").exists() {
            return d.to_path_buf();
        }
    }
    panic!("libtavern_capi.so not found next to {}", exe.display());
}

fn have(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").output().is_ok()
}

#[test]
fn c_host_exercises_every_function_without_leaks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tmp = tempfile_dir();
    let home = tmp.join("home");
    let quest = home.join("plugins/quest");
    std::fs::create_dir_all(&quest).unwrap();
    // The mod calls the host's `world:get`: that needs `permissions.tools`.
    std::fs::write(
        quest.join("plugin.yaml"),
        "name: quest\nversion: 1.0.0\npermissions:\n  tools: [\"world:*\"]\n",
    )
    .unwrap();
    std::fs::write(quest.join("main.lua"), QUEST_LUA).unwrap();

    let lib = lib_dir();
    let exe = tmp.join("host");
    let cc = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(root.join("include"))
        .arg(root.join("examples/c/host.c"))
        .arg("-L")
        .arg(&lib)
        .arg("-ltavern_capi")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc runs");
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );

    let valgrind = have("valgrind");
    assert!(
        valgrind || std::env::var_os("CI").is_none(),
        "CI must run the C host under valgrind: install it (.ci/run does)"
    );
    let out = if valgrind {
        Command::new("valgrind")
            .args([
                "--error-exitcode=99",
                "--leak-check=full",
                "--errors-for-leak-kinds=definite,indirect",
                "--show-leak-kinds=definite,indirect",
            ])
            .arg(&exe)
            .arg(&home)
            .output()
            .unwrap()
    } else {
        eprintln!("valgrind is not installed: running the C host without it");
        Command::new(&exe).arg(&home).output().unwrap()
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "C host failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
    if valgrind {
        assert!(stderr.contains("ERROR SUMMARY: 0 errors"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A fresh directory under the system temp dir (no tempfile crate in this crate).
fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "tavern-capi-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
