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
//!   with `tavern call` (results for every call, no diagnostics). A shell block marked
//!   `<!-- serve: … -->` runs with `sh -eu` against `tavern serve` on the page's home
//!   (`localhost:8765` becomes its address). An unmarked block fails.
//! - README.md: its `<!-- file: PATH -->` blocks are model output run with `tavern call`
//!   against the repository's own home (every call succeeds, no diagnostics; FileOperator
//!   writes into a fresh workspace); every other block is `<!-- not run: REASON -->`.
//! - A `not run` block that can run names the test that runs it; this file runs
//!   plugins.md's session with the bundled plugins, hooks.md's audit_trail settings and
//!   compares hooks.md's `--audit` samples with the binary's records.
//! - No Markdown table is split by a blank line; `docs/plugins.md`'s example manifest lists
//!   every permission key.

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
    /// Shell blocks marked `<!-- serve: … -->`: run against `tavern serve` on the page's home.
    serve: Vec<String>,
    unmarked: Vec<String>,
    blocks: usize,
}

fn read_page(name: &str, text: &str) -> Page {
    let mut page = Page::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut pending: Option<Option<String>> = None; // Some(Some(path)) | Some(None) = not run
    let mut serve = false;
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
        } else if line.starts_with("<!-- serve:") {
            pending = Some(None);
            serve = true;
        } else if let Some(cmd) = line
            .strip_prefix("<!-- run: tavern ")
            .and_then(|r| r.strip_suffix("-->"))
        {
            page.runs
                .push(cmd.split_whitespace().map(str::to_string).collect());
        } else if line.starts_with("```") {
            // An opening fence, with or without a language (the closing one is consumed
            // below).
            page.blocks += 1;
            let start = i + 1;
            let mut body = String::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push_str(lines[i]);
                body.push('\n');
                i += 1;
            }
            if std::mem::take(&mut serve) {
                page.serve.push(body.clone());
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
        for block in &page.serve {
            run_against_serve(&name, home.path(), block);
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

/// A free loopback port (bound, read, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs a shell block against `tavern serve` on `home`: the block must exit 0 and a job in
/// it must succeed.
fn run_against_serve(page: &str, home: &Path, block: &str) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_tavern"))
        .args(["--home", home.to_str().unwrap(), "serve", "--addr", &addr])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Ready when it accepts connections (a readiness wait, not a timing assertion).
    let mut ready = false;
    for _ in 0..200 {
        if std::net::TcpStream::connect(&addr).is_ok() {
            ready = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = if ready {
        Some(
            std::process::Command::new("sh")
                .args(["-eu", "-c", &block.replace("localhost:8765", &addr)])
                .current_dir(home)
                .output()
                .unwrap(),
        )
    } else {
        None
    };
    let _ = serve.kill();
    let _ = serve.wait();
    let out = out.unwrap_or_else(|| panic!("{page}: tavern serve did not start on {addr}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{page}: the serve example failed:\n{block}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("event: end") && stdout.contains(r#""status":"succeeded""#),
        "{page}: the job did not succeed:\n{stdout}"
    );
}

#[test]
fn readme_examples_run_against_the_repository() {
    let page = read_page(
        "README.md",
        &std::fs::read_to_string(root().join("README.md")).unwrap(),
    );
    assert!(
        page.files.keys().any(|f| f.ends_with(".txt")),
        "README.md has a `<!-- file: -->` example"
    );
    assert!(
        page.unmarked.is_empty(),
        "README.md code blocks with neither `<!-- file: PATH -->` nor `<!-- not run: why -->`: {:?}",
        page.unmarked
    );
    let dir = tempfile::tempdir().unwrap();
    // FileOperator writes into a fresh workspace, not the repository's.
    let workspace = tempfile::tempdir().unwrap();
    let root_setting = format!(
        "extensions.FileOperator.root={}",
        workspace.path().to_str().unwrap()
    );
    for (rel, body) in &page.files {
        let f = dir.path().join(rel);
        std::fs::write(&f, body).unwrap();
        let run = tavern(
            dir.path(),
            &[
                "--home",
                root().to_str().unwrap(),
                "--set",
                &root_setting,
                "call",
                f.to_str().unwrap(),
            ],
            b"",
        );
        assert_eq!(
            run.code, 0,
            "README.md {rel}: {}\n{}",
            run.stdout, run.stderr
        );
        let out = run.json();
        assert!(
            !out["results"].as_array().unwrap().is_empty()
                && out["diagnostics"].as_array().unwrap().is_empty(),
            "README.md {rel}: {out}"
        );
    }
    // The TAM example wrote its chain into the workspace.
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("logs/today.log")).unwrap(),
        "Quest started. The dragon waits."
    );
}

#[test]
fn no_table_is_split_and_the_permission_keys_are_current() {
    let mut pages = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    let mut split = Vec::new();
    for p in &pages {
        let text = std::fs::read_to_string(p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for i in 0..lines.len().saturating_sub(2) {
            let row = |l: &str| l.trim_start().starts_with('|');
            let separator =
                |l: &str| l.trim_start().starts_with("|-") || l.trim_start().starts_with("| -");
            if row(lines[i])
                && lines[i + 1].trim().is_empty()
                && row(lines[i + 2])
                && !lines.get(i + 3).is_some_and(|l| separator(l))
            {
                split.push(format!("{}:{}", p.display(), i + 2));
            }
        }
    }
    assert!(split.is_empty(), "tables split by a blank line: {split:?}");

    let page = read_page(
        "plugins.md",
        &std::fs::read_to_string(root().join("docs/plugins.md")).unwrap(),
    );
    let manifest = &page.files["plugins/Notes/plugin.yaml"];
    // The keys of `permissions:` as the manifest reads them.
    let spec =
        serde_json::to_value(tavern::internal::plugins::manifest::PermissionsSpec::default())
            .unwrap();
    for key in spec.as_object().unwrap().keys() {
        assert!(
            manifest.contains(&format!("\n  {key}:")),
            "docs/plugins.md's example manifest does not show permissions.{key}"
        );
    }
}

/// The bodies of the fenced blocks of `page` right after a `<!-- not run: … -->` marker
/// that contains `marker` (at least one).
fn marked_blocks(page: &str, marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(page)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (at, l) in lines.iter().enumerate() {
        if !(l.starts_with("<!-- not run:") && l.contains(marker)) {
            continue;
        }
        assert!(
            lines.get(at + 1).is_some_and(|l| l.starts_with("```")),
            "{page}:{}: the marker is not right before a fenced block",
            at + 1
        );
        let body: String = lines[at + 2..]
            .iter()
            .take_while(|l| !l.starts_with("```"))
            .map(|l| format!("{l}\n"))
            .collect();
        out.push(body);
    }
    assert!(
        !out.is_empty(),
        "{page}: no `not run` marker with {marker:?}"
    );
    out
}

fn marked_block(page: &str, marker: &str) -> String {
    marked_blocks(page, marker).remove(0)
}

/// plugins.md's shell session with the bundled plugins runs as written (`tavern` on PATH,
/// the repository as the home): every call succeeds.
#[test]
fn plugins_md_bundled_session_runs() {
    let block = marked_block("docs/plugins.md", "bundled plugins");
    let bin = Path::new(env!("CARGO_BIN_EXE_tavern")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .args(["-eu", "-c", &block])
        .current_dir(root())
        .env("PATH", path)
        .env_remove("TAVERN_HOME")
        .env_remove("TAVERN_SET")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{block}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    assert!(results.iter().all(|r| r["ok"] == true), "{v}");
}

/// hooks.md's settings for the shipped `scripts/audit_trail.lua` pass `plugin check`, and
/// the script then writes its trail where they say.
#[test]
fn hooks_md_audit_trail_settings_run() {
    let toml = marked_block("docs/hooks.md", "audit_trail.lua");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("scripts")).unwrap();
    std::fs::copy(
        root().join("scripts/audit_trail.lua"),
        home.path().join("scripts/audit_trail.lua"),
    )
    .unwrap();
    std::fs::write(home.path().join("tavern.toml"), &toml).unwrap();
    let h = home.path().to_str().unwrap();
    let run = tavern(home.path(), &["--home", h, "plugin", "check"], b"");
    assert_eq!(run.code, 0, "{toml}\n{}\n{}", run.stdout, run.stderr);
    let run = tavern(
        home.path(),
        &["--home", h, "call", "-"],
        br#"{"tool": "system:echo", "args": {"text": "hi"}}"#,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let trail = std::fs::read_to_string(home.path().join("logs/audit.jsonl")).unwrap();
    assert!(trail.contains("\"tool\":\"system:echo\""), "{trail}");
}

/// hooks.md's two sample `--audit` outputs have the fields the binary writes for the same
/// events, and the refusal and veto reasons word for word.
#[test]
fn hooks_md_audit_samples_are_the_real_shape() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("scripts")).unwrap();
    std::fs::write(
        home.path().join("scripts/no_dice.lua"),
        "api.hooks.on(\"tool:before-invoke\", function(ev)\n  if ev.tool == \"system:random_int\" then return {veto = \"no dice\"} end\nend)\n",
    )
    .unwrap();
    let h = home.path().to_str().unwrap();
    let audit = home.path().join("audit.jsonl");
    let run = tavern(
        home.path(),
        &["--home", h, "--audit", audit.to_str().unwrap(), "call", "-"],
        br#"[{"tool": "system:echo", "args": {"text": "hi"}},
             {"tool": "system:random_int", "args": {"min": 1, "max": 6}},
             {"tool": "system:random_int", "args": {"min": "one", "max": 6}}]"#,
    );
    assert_ne!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let real: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let samples = marked_blocks("docs/hooks.md", "tests/it/docs_examples.rs compares").concat();
    let mut checked = 0;
    for line in samples.lines().filter(|l| !l.trim().is_empty()) {
        let doc: serde_json::Value = serde_json::from_str(line).unwrap();
        let twin = real
            .iter()
            .find(|r| {
                r["event"] == doc["event"]
                    && r["tool"] == doc["tool"]
                    && r["outcome"] == doc["outcome"]
            })
            .unwrap_or_else(|| panic!("no real record like {doc}: {real:?}"));
        let keys = |v: &serde_json::Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(keys(&doc), keys(twin), "docs: {doc}\nreal: {twin}");
        if doc.get("reason").is_some() {
            assert_eq!(doc["reason"], twin["reason"], "docs: {doc}\nreal: {twin}");
        }
        checked += 1;
    }
    assert_eq!(checked, 3, "{samples}");
}

/// vcp-calls.md's two blocks run against the repository's FileOperator (in a fresh
/// workspace) the way the page says: one call by `tool_name+command`, then a batch of two
/// steps by `tool_name+commandN`, the second reading what the first wrote.
#[test]
fn vcp_calls_md_blocks_run() {
    let blocks = marked_blocks("docs/vcp-calls.md", "tests/it/docs_examples.rs runs");
    assert_eq!(blocks.len(), 2);
    let workspace = tempfile::tempdir().unwrap();
    let setting = format!(
        "extensions.FileOperator.root={}",
        workspace.path().to_str().unwrap()
    );
    let call = |text: &str| {
        let run = tavern(
            workspace.path(),
            &[
                "--home",
                root().to_str().unwrap(),
                "--set",
                &setting,
                "call",
                "-",
            ],
            text.as_bytes(),
        );
        assert_eq!(run.code, 0, "{text}\n{}\n{}", run.stdout, run.stderr);
        run.json()
    };
    let one = call(&blocks[0]);
    let r = &one["results"][0];
    assert_eq!(r["tool"], "FileOperator:WriteFile", "{one}");
    assert_eq!(r["dispatch"], "tool_name+command", "{one}");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("notes/today.txt")).unwrap(),
        "晴，微风。"
    );
    let batch = call(&blocks[1]);
    let rs = batch["results"].as_array().unwrap();
    assert_eq!(rs.len(), 2, "{batch}");
    for (r, (tool, step)) in rs
        .iter()
        .zip([("FileOperator:WriteFile", 1), ("FileOperator:ReadFile", 2)])
    {
        assert_eq!(r["tool"], tool, "{batch}");
        assert_eq!(r["step"], step, "{batch}");
        assert_eq!(r["dispatch"], "tool_name+commandN", "{batch}");
        assert_eq!(r["ok"], true, "{batch}");
    }
    assert!(rs[1]["value"].to_string().contains('A'), "{batch}");
}

/// `docs/formats.md` names every format and every alias, and runs an example of every
/// format that is not a seed's (`tam`, `action`, `vcp` have their own pages) as a
/// `scripts/*.tam` file (`every_docs_example_runs` runs it with `tavern call`).
#[test]
fn formats_md_names_every_format_and_runs_an_example_of_each() {
    use tavern::internal::protocol::Format;
    let text = std::fs::read_to_string(root().join("docs/formats.md")).unwrap();
    let page = read_page("formats.md", &text);
    // The examples of the formats that predate the families of 2025–26.
    let older = [("json", "openai"), ("llama_json", "llama")];
    let mut checked = 0;
    for f in Format::all().filter(|f| *f != Format::Auto) {
        let name = f.name();
        for n in std::iter::once(name).chain(f.aliases().iter().copied()) {
            assert!(
                text.contains(&format!("`{n}`")),
                "docs/formats.md lacks `{n}`"
            );
        }
        if matches!(name, "tam" | "action" | "vcp") {
            continue;
        }
        let script = older
            .iter()
            .find(|(f, _)| *f == name)
            .map_or(name, |(_, s)| s);
        assert!(
            page.files.contains_key(&format!("scripts/{script}.tam")),
            "docs/formats.md runs no example of {name} (scripts/{script}.tam)"
        );
        checked += 1;
    }
    assert!(checked >= 27, "{checked}");
}
