//! Compiles the C# binding (`bindings/csharp/Tavern.cs`) and `examples/csharp/GameLoop.cs`
//! with Mono's `mcs` and runs the sample under `mono` against this build's
//! libtavern_capi.so: it must print the same `event weather.forecast ...` line as
//! `examples/game_host.rs`. Needs Debian's `mono-mcs` and `mono-runtime` (.ci/run installs
//! them); without them the test fails and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

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

#[test]
fn the_csharp_game_loop_runs_under_mono() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tmp = std::env::temp_dir().join(format!("tavern-csharp-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let exe = tmp.join("GameLoop.exe");
    let mcs = Command::new("mcs")
        .arg("-warnaserror")
        .arg(format!("-out:{}", exe.display()))
        .arg(root.join("bindings/csharp/Tavern.cs"))
        .arg(root.join("examples/csharp/GameLoop.cs"))
        .output()
        .expect("mcs runs: install Mono's C# compiler (apt-get install mono-mcs mono-runtime)");
    assert!(
        mcs.status.success(),
        "mcs failed:\n{}{}",
        String::from_utf8_lossy(&mcs.stdout),
        String::from_utf8_lossy(&mcs.stderr)
    );
    let out = Command::new("mono")
        .arg(&exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("mono runs: install Mono (apt-get install mono-runtime)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "GameLoop.exe failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    // The same line examples/game_host.rs prints (and CI greps for).
    assert!(
        lines.contains(&r#"event weather.forecast (from plugin:weather): {"tomorrow":"cloudy"}"#),
        "{stdout}\n{stderr}"
    );
    // The mod's log line came through the log callback; both model turns were answered.
    assert!(
        lines.contains(&"[Info] plugin:weather: forecast: sunny then cloudy"),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(": weather:forecast -> ") && l.contains("cloudy")),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(": ReadWorldStateTool -> ") && l.contains("sunny")),
        "{stdout}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("longest pump: ")),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
