//! The first hour, third round (issue 36): what a newcomer, a modder and a power user still
//! hit, through the real binary and the real server.

use crate::cli_support;

use std::path::Path;

use cli_support::{home, tavern};

fn write(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

const DICE_YAML: &str = "name: Dice\ndescription: dice\n";

/// Item 5: a script's `error({code, message})` reaches `tavern call` with its code.
#[test]
fn raised_codes_reach_the_caller() {
    let h = home();
    write(
        h.path(),
        &[
            ("plugins/Dice/plugin.yaml", DICE_YAML),
            (
                "plugins/Dice/main.lua",
                "api.tools.register{id = 'roll', description = 'Rolls.', handler = function(a)\n  error({code = \"bad_roll\", message = \"too high\"})\nend}\n",
            ),
        ],
    );
    let run = tavern(
        h.path(),
        &["--home", ".", "call", "--format", "json", "-"],
        br#"{"tool": "Dice:roll", "args": {}}"#,
    );
    let v = run.json();
    let err = &v["results"][0]["error"];
    assert_eq!(err["code"], "bad_roll", "{v}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("bad_roll: too high"),
        "{v}"
    );
}
