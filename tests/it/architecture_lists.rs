//! ARCHITECTURE.md's lists are the code's (issue 37 item 8): the public names of the crate
//! root, the `tavern::internal` modules and the module map's rows, each checked against
//! `src/lib.rs` both ways, so a name added to or dropped from one shows up here.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn read(rel: &str) -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The backticked words (identifiers only) of `text`.
fn ticked(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(String::from)
        .collect()
}

/// The text of `s` between `from` and `to` (both must be there).
fn between<'a>(s: &'a str, from: &str, to: &str) -> &'a str {
    let a = s.find(from).unwrap_or_else(|| panic!("'{from}' not found"));
    let b = a + s[a..]
        .find(to)
        .unwrap_or_else(|| panic!("'{to}' not found after '{from}'"));
    &s[a..b]
}

/// The names `src/lib.rs` re-exports at its root (`pub use path::{A, B};`, `pub use path::A;`).
fn root_names(lib: &str) -> BTreeSet<String> {
    let top = &lib[..lib.find("pub mod internal").unwrap()];
    let mut names = BTreeSet::new();
    let mut rest = top;
    while let Some(at) = rest.find("\npub use ") {
        let stmt = &rest[at + 9..];
        let end = stmt.find(';').unwrap();
        let stmt = &stmt[..end];
        match stmt.find('{') {
            Some(open) => names.extend(
                stmt[open + 1..stmt.rfind('}').unwrap()]
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(String::from),
            ),
            None => {
                names.insert(stmt.rsplit("::").next().unwrap().trim().to_string());
            }
        }
        rest = &rest[at + 9 + end..];
    }
    names
}

#[test]
fn the_public_names_are_the_crate_roots() {
    let lib = read("src/lib.rs");
    let arch = read("ARCHITECTURE.md");
    let code = root_names(&lib);
    assert!(code.len() > 40, "read the root re-exports: {code:?}");
    let listed = ticked(between(
        &arch,
        "A host sees only the crate root",
        "Every module below is private.",
    ));
    let mut listed = listed;
    listed.remove("src");
    let missing: Vec<_> = code.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's public names drifted from src/lib.rs: not listed {missing:?}, listed but not exported {stale:?}"
    );
}

#[test]
fn the_internal_modules_are_lib_rs_ones() {
    let lib = read("src/lib.rs");
    let arch = read("ARCHITECTURE.md");
    let internal = &lib[lib.find("pub mod internal {").unwrap() + "pub mod internal {".len()..];
    let code: BTreeSet<String> = internal
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(" {").to_string())
        .collect();
    let listed = ticked(between(&arch, "(glob re-exports of", "#[doc(hidden)]"));
    assert_eq!(listed, code, "ARCHITECTURE.md's tavern::internal list");
}

#[test]
fn the_module_map_names_every_module() {
    let lib = read("src/lib.rs");
    let arch = read("ARCHITECTURE.md");
    let code: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    assert!(
        code.contains("engine") && code.contains("tools"),
        "{code:?}"
    );
    let map = between(&arch, "## Module map", "\n## ");
    // The first cell of each row: the module(s) it describes (`config`, `problem`).
    let mut rows = BTreeSet::new();
    for line in map.lines().filter(|l| l.starts_with("| `")) {
        let cell = line[1..].split(" | ").next().unwrap();
        // `server::web`, `capi/` and the binary's `cli` are not modules of lib.rs.
        if cell.contains("::") || cell.contains('/') && !cell.contains("(`src") {
            continue;
        }
        rows.extend(ticked(cell.split(" (").next().unwrap()));
    }
    rows.remove("cli");
    assert_eq!(
        rows, code,
        "ARCHITECTURE.md's module map rows against src/lib.rs's modules"
    );
}
