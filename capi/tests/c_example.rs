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
    print("reward given")
    return {total = w.gold + args.amount}
  end,
})
api.tools.register({
  id = "summon",
  description = "Spawns through the host's main-thread tool.",
  parameters = {type = "object", properties = {kind = {type = "string"}}, required = {"kind"}},
  handler = function(args)
    local got = api.tools.call("world:spawn", {kind = args.kind})
    return {spawned = got.id}
  end,
})
api.tools.register({id = "spin", description = "Loops until stopped.", handler = function()
  while true do end
end})
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
    // A broken plugin: one load problem for tavern_engine_build / tavern_engine_problems.
    let broken = home.join("plugins/broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("plugin.yaml"), "name: [").unwrap();

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

/// The C example must call every function the header declares (so the valgrind run above
/// covers the whole ABI): a function added to `capi/` and the header without a call in
/// `examples/c/host.c` fails here.
#[test]
fn the_c_host_calls_every_function_the_header_declares() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let header = std::fs::read_to_string(root.join("include/tavern.h")).unwrap();
    let host = std::fs::read_to_string(root.join("examples/c/host.c")).unwrap();
    // Declarations: a line that is not a comment and names `tavern_…(`.
    let declared: Vec<&str> = header
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('*') && !l.starts_with("/*") && !l.starts_with("//"))
        .filter_map(|l| {
            let at = l.find("tavern_")?;
            let name = &l[at..];
            let end = name.find('(')?;
            let name = &name[..end];
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                .then_some(name)
        })
        .collect();
    assert!(
        declared.len() >= 15,
        "the header declares the functions of issues 11 and 27: {declared:?}"
    );
    for name in &declared {
        assert!(
            host.contains(&format!("{name}(")),
            "examples/c/host.c never calls {name}"
        );
    }
    // And every one of them is exported by the library this test links against.
    let nm = Command::new("nm")
        .arg("-D")
        .arg("--defined-only")
        .arg(lib_dir().join("libtavern_capi.so"))
        .output();
    if let Some(nm) = nm.ok().filter(|o| o.status.success()) {
        let symbols = String::from_utf8_lossy(&nm.stdout);
        for name in &declared {
            assert!(
                symbols
                    .lines()
                    .any(|l| l.split_whitespace().last() == Some(name)),
                "libtavern_capi.so does not export {name}"
            );
        }
    }
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
