//! `tavern tools [--json]`.

use crate::cli_support;

use cli_support::{home, tavern};

#[test]
fn lists_tools_as_json() {
    let dir = home();
    let run = tavern(dir.path(), &["tools", "--json"], b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list = run.json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    for id in [
        "system:get_current_time",
        "system:echo",
        "system:uuid",
        "system:random_int",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let ri = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "system:random_int")
        .unwrap();
    assert_eq!(ri["wireName"], "system_random_int");
    assert_eq!(
        ri["parameters"]["required"],
        serde_json::json!(["min", "max"])
    );
    assert_eq!(ri["implementationType"], "service");
}

#[test]
fn lists_tools_as_text() {
    let dir = home();
    let run = tavern(
        dir.path(),
        &["--home", dir.path().to_str().unwrap(), "tools"],
        b"",
    );
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.contains("- Tool ID: system:random_int"),
        "{}",
        run.stdout
    );
    assert!(run
        .stdout
        .contains("    - min (integer, required): Smallest possible value."));
    assert!(run.stdout.contains("  - Wire name: system_random_int"));
}
