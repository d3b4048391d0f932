//! The call format names the CLI, REST and the docs show are exactly the protocol's
//! format table's (`Format::NAMES`), in its order: a new format in the table shows up
//! everywhere, and a doc that lists another set fails here.

use crate::{cli_support, server_support};

use reqwest::StatusCode;
use serde_json::Value;
use tavern::internal::protocol::Format;

fn read(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn readme_lists_the_table_for_every_call_format_option() {
    let readme = read("README.md");
    // `--format a\|b\|c` lists in the command table; only the call-format ones name `tam`.
    let lists: Vec<Vec<&str>> = readme
        .match_indices("--format ")
        .filter_map(|(i, m)| {
            let rest = &readme[i + m.len()..];
            let end = rest.find([']', '`', ' '])?;
            let list: Vec<&str> = rest[..end].split("\\|").collect();
            list.contains(&"tam").then_some(list)
        })
        .collect();
    assert!(!lists.is_empty(), "README lists no call formats");
    for list in lists {
        assert_eq!(list, Format::NAMES);
    }
}

#[test]
fn agents_doc_lists_the_table_for_tool_call_format() {
    let doc = read("docs/agents.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `tool_call_format` |"))
        .expect("docs/agents.md has a tool_call_format row");
    let listed = row
        .split_once("how output is read:")
        .expect("the row lists the formats")
        .1;
    let names: Vec<&str> = listed.split('`').skip(1).step_by(2).collect();
    assert_eq!(names, Format::NAMES);
}

#[test]
fn cli_help_and_errors_list_the_table() {
    let dir = cli_support::home();
    for cmd in ["parse", "call"] {
        let run = cli_support::tavern(dir.path(), &[cmd, "--help"], b"");
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.contains(&format!(
                "Call format to look for: {}.",
                Format::names_text()
            )),
            "{cmd} --help: {}",
            run.stdout
        );
        let bad = cli_support::tavern(dir.path(), &[cmd, "--format", "yaml"], b"");
        assert_eq!(bad.code, 2, "{}", bad.stderr);
        assert!(
            bad.stderr
                .contains(&format!("expected {}", Format::names_text())),
            "{}",
            bad.stderr
        );
    }
}

#[tokio::test]
async fn rest_suggests_the_table_for_a_bad_format() {
    let s = server_support::Server::start(&server_support::fixture_home(), &[]);
    let bad = reqwest::Client::new()
        .post(format!("{}/api/invoke?format=yaml", s.base))
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let e: Value = bad.json().await.unwrap();
    assert_eq!(e["error"]["code"], "bad_format");
    let suggested: Vec<&str> = e["error"]["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(suggested, Format::NAMES);
}
