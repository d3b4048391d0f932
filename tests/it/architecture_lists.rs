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

/// The names one `pub use` statement (without `pub use` and `;`) brings in.
fn use_names(stmt: &str) -> Vec<String> {
    match stmt.find('{') {
        Some(open) => stmt[open + 1..stmt.rfind('}').unwrap()]
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect(),
        None => vec![stmt.rsplit("::").next().unwrap().trim().to_string()],
    }
}

/// The `pub use` statements of `src/lib.rs`'s root (before `pub mod internal`).
fn root_uses(lib: &str) -> Vec<&str> {
    let top = &lib[..lib.find("pub mod internal").unwrap()];
    let mut stmts = Vec::new();
    let mut rest = top;
    while let Some(at) = rest.find("\npub use ") {
        let stmt = &rest[at + 9..];
        let end = stmt.find(';').unwrap();
        stmts.push(&stmt[..end]);
        rest = &rest[at + 9 + end..];
    }
    stmts
}

/// The names `src/lib.rs` re-exports at its root (`pub use path::{A, B};`, `pub use path::A;`).
fn root_names(lib: &str) -> BTreeSet<String> {
    root_uses(lib).into_iter().flat_map(use_names).collect()
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

/// The top-level modules of `src/lib.rs` (`mod x;`).
fn lib_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| l.strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// The crate root's re-exported names and the module each comes from (`Engine` → `engine`).
fn root_name_modules(lib: &str) -> std::collections::BTreeMap<String, String> {
    let mut map = std::collections::BTreeMap::new();
    for stmt in root_uses(lib) {
        let module = stmt.split("::").next().unwrap().trim();
        for name in use_names(stmt) {
            map.insert(name, module.to_string());
        }
    }
    map
}

/// Every `.rs` file of top-level module `module` (`src/x.rs`, or everything under `src/x/`).
fn module_files(src: &std::path::Path, module: &str) -> Vec<PathBuf> {
    let single = src.join(format!("{module}.rs"));
    if single.is_file() {
        return vec![single];
    }
    let mut files = Vec::new();
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The lines of `text` that are library code: comments cut off, unit-test modules
/// (`#[cfg(test)]` then `mod x {`, up to its closing brace at the same indentation) left out.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim() == "#[cfg(test)]" {
            if let Some(next) = lines.get(i + 1) {
                let t = next.trim_start();
                if (t.starts_with("mod ") || t.starts_with("pub mod ")) && t.ends_with('{') {
                    let close = format!("{}}}", &next[..next.len() - t.len()]);
                    i += 2;
                    while i < lines.len() && lines[i] != close {
                        i += 1;
                    }
                    i += 1;
                    continue;
                }
            }
        }
        out.push((i + 1, line.split("//").next().unwrap()));
        i += 1;
    }
    out
}

/// Who imports whom among the top-level modules: `crate::x` paths (and root re-exports such
/// as `crate::Engine`, counted as their module) in each module's library code.
type Graph = std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>;

fn import_graph() -> Graph {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let lib = read("src/lib.rs");
    let modules = lib_modules(&lib);
    let names = root_name_modules(&lib);
    let mut graph = Graph::new();
    for m in &modules {
        let edges = graph.entry(m.clone()).or_default();
        for file in module_files(&src, m) {
            let text = std::fs::read_to_string(&file).unwrap();
            let rel = file.strip_prefix(&root).unwrap().display().to_string();
            for (n, line) in code_lines(&text) {
                for part in line.split("crate::").skip(1) {
                    let word: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    let target = if modules.contains(&word) {
                        Some(word)
                    } else {
                        names.get(&word).cloned()
                    };
                    if let Some(t) = target.filter(|t| t != m) {
                        edges.entry(t).or_insert_with(|| format!("{rel}:{n}"));
                    }
                }
            }
        }
    }
    graph
}

/// The modules `from` reaches through the graph (itself only if a path leads back).
fn reach(graph: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = graph[from].keys().map(String::as_str).collect();
    while let Some(m) = todo.pop() {
        if seen.insert(m.to_string()) {
            todo.extend(
                graph
                    .get(m)
                    .into_iter()
                    .flat_map(|e| e.keys().map(String::as_str)),
            );
        }
    }
    seen
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let graph = import_graph();
    assert!(
        graph["engine"].contains_key("agent") && graph["agent"].contains_key("tools"),
        "the import scan found the edges it must: {graph:?}"
    );
    let mut cycles = Vec::new();
    for (m, edges) in &graph {
        for (to, at) in edges {
            if reach(&graph, to).contains(m) {
                cycles.push(format!("{m} -> {to} ({at})"));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "top-level modules import each other (ARCHITECTURE.md: dependencies point one way); \
         each edge below lies on a cycle:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_scan_sees_a_cycle_when_there_is_one() {
    // The same check over a graph with the agent -> engine edge the old run path had.
    let mut graph = import_graph();
    graph
        .get_mut("agent")
        .unwrap()
        .insert("engine".into(), "src/agent/runtime.rs".into());
    assert!(reach(&graph, "engine").contains("engine"));
    // `crate::Engine` in a module's code counts as an import of `engine`.
    let lib = read("src/lib.rs");
    assert_eq!(root_name_modules(&lib)["Engine"], "engine");
    assert_eq!(root_name_modules(&lib)["AgentRuntime"], "agent");
    let code = "use crate::Engine; // crate::agent\n#[cfg(test)]\nmod tests {\n    use crate::agent;\n}\nfn f() {}\n";
    let kept: Vec<usize> = code_lines(code).iter().map(|(n, _)| *n).collect();
    assert_eq!(kept, vec![1, 6]);
    assert!(!code_lines(code)[0].1.contains("agent"));
}
