//! The docs are executable (issue 14).
//!
//! - Generated pages are current: `docs/rhai.md` (from the api registry) and the node catalogue
//!   of `docs/workflows.md` (from the node registry). Regenerate with
//!   `TAVERN_BLESS=1 cargo test --test it docs_examples`.
//! - Every fenced code block in `docs/*.md` is accounted for: preceded by
//!   `<!-- file: PATH -->` it is written to PATH in a fresh home for that page (a second block
//!   for the same PATH is appended); `<!-- file: PATH` … `-->` writes a hidden file; a block
//!   preceded by `<!-- not run: REASON -->` is exempt. Then, per page, `tavern plugin check`
//!   must pass, `tavern plugin test` must pass when the page wrote test files, every
//!   `<!-- run: tavern ARGS -->` must exit 0, and every `scripts/*.tam` written must run
//!   with `tavern call` (results for every call, no diagnostics). An unmarked block fails.

use crate::cli_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cli_support::tavern;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bless_or_compare(path: &Path, fresh: &str) {
    if std::env::var_os("TAVERN_BLESS").is_some() {
        std::fs::write(path, fresh).unwrap();
    }
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        on_disk == fresh,
        "{} is stale; run `TAVERN_BLESS=1 cargo test --test it docs_examples`",
        path.display()
    );
}

#[test]
fn generated_docs_are_current() {
    bless_or_compare(
        &root().join("docs/rhai.md"),
        &tavern::internal::script::rhai_api_markdown(),
    );
    let path = root().join("docs/workflows.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let registry = tavern::internal::workflow::NodeRegistry::with_builtins();
    let fresh = tavern::internal::workflow::catalogue::refresh(&text, &registry)
        .expect("docs/workflows.md has the catalogue markers");
    bless_or_compare(&path, &fresh);
    // Every built-in node type is in the catalogue.
    for d in registry.definitions() {
        assert!(
            fresh.contains(&format!("### `{}`", d.node_type)),
            "{}",
            d.node_type
        );
    }
}

/// What one page asks for.
#[derive(Default)]
struct Page {
    files: BTreeMap<String, String>,
    runs: Vec<Vec<String>>,
    unmarked: Vec<String>,
    blocks: usize,
}

fn read_page(name: &str, text: &str) -> Page {
    let mut page = Page::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut pending: Option<Option<String>> = None; // Some(Some(path)) | Some(None) = not run
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if let Some(rest) = line.strip_prefix("<!-- file:") {
            if let Some(path) = rest.strip_suffix("-->") {
                pending = Some(Some(path.trim().to_string()));
            } else {
                // A hidden file: up to the closing `-->`.
                let path = rest.trim().to_string();
                let mut body = String::new();
                i += 1;
                while i < lines.len() && lines[i].trim() != "-->" {
                    body.push_str(lines[i]);
                    body.push('\n');
                    i += 1;
                }
                page.files.entry(path).or_default().push_str(&body);
            }
        } else if line.starts_with("<!-- not run:") {
            pending = Some(None);
        } else if let Some(cmd) = line
            .strip_prefix("<!-- run: tavern ")
            .and_then(|r| r.strip_suffix("-->"))
        {
            page.runs
                .push(cmd.split_whitespace().map(str::to_string).collect());
        } else if line.starts_with("```") && line.len() > 3 {
            page.blocks += 1;
            let start = i + 1;
            let mut body = String::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push_str(lines[i]);
                body.push('\n');
                i += 1;
            }
            match pending.take() {
                Some(Some(path)) => page.files.entry(path).or_default().push_str(&body),
                Some(None) => {}
                None => page.unmarked.push(format!("{name}:{start}")),
            }
        } else if !line.is_empty() {
            pending = None;
        }
        i += 1;
    }
    page
}

#[test]
fn every_docs_example_runs() {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    assert!(
        pages.len() >= 3,
        "docs/plugins.md, rhai.md, workflows.md at least"
    );
    let mut unmarked = Vec::new();
    let mut ran = 0;
    for path in &pages {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let page = read_page(&name, &std::fs::read_to_string(path).unwrap());
        unmarked.extend(page.unmarked.iter().cloned());
        if page.files.is_empty() {
            continue;
        }
        let home = tempfile::tempdir().unwrap();
        for (rel, body) in &page.files {
            let p = home.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
        }
        let h = home.path().to_str().unwrap();
        let run = tavern(home.path(), &["--home", h, "plugin", "check"], b"");
        assert_eq!(
            run.code, 0,
            "{name}: plugin check:\n{}\n{}",
            run.stdout, run.stderr
        );
        if page.files.keys().any(|f| f.ends_with(".test.json")) {
            let run = tavern(home.path(), &["--home", h, "plugin", "test"], b"");
            assert_eq!(
                run.code, 0,
                "{name}: plugin test:\n{}\n{}",
                run.stdout, run.stderr
            );
            assert!(!run.stdout.contains(" 0 passed"), "{name}: {}", run.stdout);
        }
        for cmd in &page.runs {
            let mut args = vec!["--home", h];
            args.extend(cmd.iter().map(String::as_str));
            let run = tavern(home.path(), &args, b"");
            assert_eq!(
                run.code, 0,
                "{name}: tavern {cmd:?}:\n{}\n{}",
                run.stdout, run.stderr
            );
        }
        // A script runs: every call gives a result (a chain may fail a step on purpose,
        // so exit 1 is allowed; 2 would be unreadable input).
        for f in page.files.keys().filter(|f| f.ends_with(".tam")) {
            let run = tavern(home.path(), &["--home", h, "call", f], b"");
            assert!(
                run.code == 0 || run.code == 1,
                "{name}: tavern call {f}: {}",
                run.stderr
            );
            let out = run.json();
            assert!(
                !out["results"].as_array().unwrap().is_empty()
                    && out["diagnostics"].as_array().unwrap().is_empty(),
                "{name}: {f}: {out}"
            );
        }
        ran += page.blocks;
    }
    assert!(ran > 0, "no example ran");
    assert!(
        unmarked.is_empty(),
        "code blocks with neither `<!-- file: PATH -->` nor `<!-- not run: why -->`: {unmarked:?}"
    );
}
