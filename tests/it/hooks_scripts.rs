//! Power-user scripts (`<home>/scripts/*.lua|*.rhai`) and the audit trail: the shipped scripts
//! are harmless until enabled, each works when enabled, scripts may hook every point but
//! call no tools beyond `system:*` unless `tavern.toml` grants them, and `--audit FILE` writes
//! JSON lines.

use crate::cli_support;
use crate::hooks_support;

use std::path::Path;

use hooks_support::*;
use serde_json::{json, Value};

const SHIPPED: [&str; 4] = [
    "audit_trail",
    "redact_secrets",
    "rate_limit",
    "repeat_guard",
];

fn with_shipped(toml: &str) -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let h = home(&[("tavern.toml", toml)]);
    for s in SHIPPED {
        let text = std::fs::read_to_string(root.join(format!("scripts/{s}.lua"))).unwrap();
        write(&h.path().join(format!("scripts/{s}.lua")), &text);
    }
    h
}

#[test]
fn shipped_scripts_load_and_stay_quiet_by_default() {
    // The repository root is itself a home: its scripts load, hook nothing, report nothing.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let e = engine(root);
    let names: Vec<&str> = e.user_scripts().iter().map(|s| s.name.as_str()).collect();
    for s in SHIPPED {
        assert!(names.contains(&s), "{s} not loaded: {names:?}");
    }
    assert!(
        !e.problems()
            .iter()
            .any(|p| p.to_string().contains("scripts/")),
        "{:?}",
        e.problems()
    );
    assert!(e.hooks().list().is_empty(), "{:?}", e.hooks().list());
}

#[tokio::test(flavor = "multi_thread")]
async fn repeat_guard_and_rate_limit_veto_when_enabled() {
    let h = with_shipped(
        "[scripts.repeat_guard]\nenabled = true\nmax_repeats = 2\n[scripts.rate_limit]\nenabled = true\nmax_calls = 5\nwindow_s = 3600\n",
    );
    let e = clean_engine(h.path());
    for _ in 0..2 {
        call(&e, "Echo:echo", json!({"text": "same"}))
            .await
            .unwrap();
    }
    let err = call(&e, "Echo:echo", json!({"text": "same"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(
        err.to_string().contains("repeat guard") && err.to_string().contains("script:repeat_guard"),
        "{err}"
    );
    // Different arguments reset the guard. The rate limit (priority 50) runs before the guard
    // (40), so it counted the vetoed attempt too: 3 so far, the 6th attempt is refused.
    call(&e, "Echo:echo", json!({"text": "other"}))
        .await
        .unwrap();
    call(&e, "Echo:echo", json!({"text": "third"}))
        .await
        .unwrap();
    let err = call(&e, "Echo:echo", json!({"text": "fourth"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("rate limit"), "{err}");
    // Another tool has its own budget.
    assert_eq!(call(&e, "Echo:count", json!({})).await.unwrap(), json!(4));
}

#[tokio::test(flavor = "multi_thread")]
async fn redaction_and_audit_trail_when_enabled() {
    let h = with_shipped(
        "[scripts.redact_secrets]\nenabled = true\n[scripts.audit_trail]\nenabled = true\nfile = \"trail.jsonl\"\n[scripts.audit_trail.permissions]\nfs = { write = [\"logs\"] }\n",
    );
    let e = clean_engine(h.path());
    let out = call(
        &e,
        "Echo:echo",
        json!({"text": "key sk-abcdefghijklmnop1234 ok"}),
    )
    .await
    .unwrap();
    assert_eq!(out, json!("key [REDACTED] ok"));
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "plain"}))
            .await
            .unwrap(),
        json!("plain")
    );
    let trail = std::fs::read_to_string(h.path().join("logs/trail.jsonl")).unwrap();
    let lines: Vec<Value> = trail
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{trail}");
    assert_eq!(lines[0]["tool"], "Echo:echo");
    assert_eq!(lines[0]["ok"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn scripts_call_only_system_tools_unless_granted() {
    let hook = "api.hooks.on('tool:before-invoke', function(ev)\n  if ev.tool == 'Echo:count' then api.tools.call('Echo:echo', {text = 'from script'}) end\nend)\n";
    let h = home(&[("scripts/spy.lua", hook)]);
    let e = clean_engine(h.path());
    let err = call(&e, "Echo:count", json!({})).await.unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("tools: Echo:echo"), "{err}");
    let h = home(&[
        ("scripts/spy.lua", hook),
        (
            "tavern.toml",
            "[scripts.spy.permissions]\ntools = [\"Echo:*\"]\n",
        ),
    ]);
    let e = clean_engine(h.path());
    assert_eq!(call(&e, "Echo:count", json!({})).await.unwrap(), json!(1));
    // A script with a syntax error is a problem with its file; the engine still builds,
    // and refuses calls until it loads (issue 23 item 14) unless told to fail open.
    let h = home(&[("scripts/broken.rhai", "let x = ;")]);
    let e = engine(h.path());
    assert!(
        e.problems()
            .iter()
            .any(|p| p.to_string().contains("broken.rhai")),
        "{:?}",
        e.problems()
    );
    let err = call(&e, "Echo:echo", json!({"text": "ok"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed", "{err}");
    let e = tavern::Engine::builder()
        .home(h.path())
        .set("scripts.fail_open=true")
        .build()
        .unwrap();
    assert!(
        e.problems()
            .iter()
            .any(|p| p.to_string().contains("broken.rhai")),
        "{:?}",
        e.problems()
    );
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "ok"})).await.unwrap(),
        json!("ok")
    );
}

#[test]
fn audit_option_writes_every_call_and_veto_as_json_lines() {
    let h = home(&[(
        "scripts/no_dice.lua",
        "api.hooks.on('tool:before-invoke', function(ev) if ev.tool == 'system:random_int' then return false, 'no dice' end end)\n",
    )]);
    // Four steps: one runs, one is vetoed, one is refused for its arguments before it
    // runs, one names no tool. Every one is in the trail.
    let text = "<|[REQUEST_TOOL]|>\ncommand1:「始」system:echo「末」\ntext1:「始」hi「末」\non_error_1:「始」continue「末」\ncommand2:「始」system:random_int「末」\nmin2:「始」1「末」\nmax2:「始」6「末」\non_error_2:「始」continue「末」\ncommand3:「始」system:random_int「末」\nmin3:「始」one「末」\nmax3:「始」6「末」\non_error_3:「始」continue「末」\ncommand4:「始」no:such_tool「末」\n<|[END_TOOL]|>\n";
    let audit = h.path().join("audit.jsonl");
    let run = cli_support::tavern(
        h.path(),
        &["--audit", audit.to_str().unwrap(), "call"],
        text.as_bytes(),
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let out = run.json();
    assert_eq!(out["results"][1]["error"]["code"], "vetoed", "{out}");
    assert!(out["results"][1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no dice"));
    let trail = std::fs::read_to_string(&audit).unwrap();
    let recs: Vec<Value> = trail
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<(&str, &str)> = recs
        .iter()
        .filter(|r| r["event"] == "call")
        .map(|r| (r["tool"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("system:echo", "ok"),
            ("system:random_int", "vetoed"),
            ("system:random_int", "invalid_parameters"),
            ("no:such_tool", "unknown_tool"),
        ],
        "{trail}"
    );
    // A call that ran carries the id of the call it was read from (the chain's first step).
    let ran = recs.iter().find(|r| r["outcome"] == "ok").unwrap();
    assert_eq!(ran["call_id"], "call_0", "{ran}");
    // So does a call refused before it ran (vetoed, invalid arguments, unknown tool).
    let ids: Vec<(&str, &str)> = recs
        .iter()
        .filter(|r| r["event"] == "call")
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["call_id"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        ids,
        vec![
            ("ok", "call_0"),
            ("vetoed", "call_1"),
            ("invalid_parameters", "call_2"),
            ("unknown_tool", "call_3"),
        ],
        "{trail}"
    );
    // A refused call says why, under the caller that asked.
    let refused = recs
        .iter()
        .find(|r| r["outcome"] == "invalid_parameters")
        .unwrap();
    assert_eq!(refused["caller"], "cli");
    assert!(
        refused["reason"].as_str().unwrap().contains("min"),
        "{refused}"
    );
    let decision = recs
        .iter()
        .find(|r| r["event"] == "decision")
        .expect("a veto decision");
    assert_eq!(decision["caller"], "cli");
    assert!(decision["reason"].as_str().unwrap().contains("no dice"));
    assert!(recs.iter().all(|r| r["ts"].is_string()));
    assert!(recs
        .iter()
        .filter(|r| r["event"] == "call")
        .all(|r| r["duration_ms"].is_number()));
}

#[test]
fn tavern_tools_shows_who_overrides_a_tool() {
    let h = home(&[(
        "scripts/loud.lua",
        "api.services.override('system:echo', function(args, ctx, next) return string.upper(next()) end)\n",
    )]);
    let run = cli_support::tavern(h.path(), &["tools"], b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let at = run
        .stdout
        .find("- Tool ID: system:echo")
        .expect("system:echo listed");
    let rest = &run.stdout[at..];
    let end = rest[1..].find("- Tool ID:").map_or(rest.len(), |i| i + 1);
    assert!(
        rest[..end].contains("Overridden by: script:loud"),
        "{}",
        run.stdout
    );
    let run = cli_support::tavern(h.path(), &["tools", "--json"], b"");
    let list = run.json();
    let echo = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "system:echo")
        .unwrap();
    assert_eq!(echo["overriddenBy"], json!(["script:loud"]));
    let plain = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "system:uuid")
        .unwrap();
    assert!(plain.get("overriddenBy").is_none());
    let text = "<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」quiet「末」\n<|[END_TOOL]|>\n";
    let run = cli_support::tavern(h.path(), &["call"], text.as_bytes());
    assert_eq!(
        run.json()["results"][0]["value"],
        json!("QUIET"),
        "{}",
        run.stdout
    );
}

#[test]
fn workflow_points_fire_for_cli_runs() {
    let wf = r#"{"id": "shout",
 "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
 "interfaceOutputs": {"result": {"dataFlowType": "STRING"}},
 "nodes": [{"id": "in", "type": "core:GroupInput"},
           {"id": "up", "type": "core:RegexReplace", "inputValues": {"pattern": "a", "replacement": "A"}},
           {"id": "out", "type": "core:GroupOutput"}],
 "edges": [{"source": "in", "sourceHandle": "text", "target": "up", "targetHandle": "text"},
           {"source": "up", "sourceHandle": "text", "target": "out", "targetHandle": "result"}]}"#;
    let h = home(&[
        ("workflows/shout.json", wf),
        (
            "scripts/wf.rhai",
            r#"
api::hooks::on("workflow:before-execute", |ev| {
    if ev.caller != "cli" { return #{ veto: "expected the cli caller" }; }
    if ev.inputs.text == "veto" { return #{ veto: "not from the cli" }; }
});
api::hooks::on("node:after-execute", |ev| #{ outputs: #{ text: ev.outputs.text + "!" } });
"#,
        ),
    ]);
    let run = cli_support::tavern(
        h.path(),
        &["workflow", "run", "shout", "-i", "text=banana", "--json"],
        b"",
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.json()["outputs"]["result"],
        json!("bAnAnA!"),
        "{}",
        run.stdout
    );
    let run = cli_support::tavern(
        h.path(),
        &["workflow", "run", "shout", "-i", "text=veto", "--json"],
        b"",
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stdout.contains("not from the cli") || run.stderr.contains("not from the cli"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}

const ECHO_CALL: &[u8] = br#"{"tool": "system:echo", "args": {"text": "hi"}}"#;

/// Issue 23 item 14: a hook script that fails to load (a misspelled point, a syntax error;
/// a plugin that declares hooks) fails closed: every call is refused naming the script and
/// its file:line, `plugin check` names it, `tavern call` exits non-zero; `scripts.fail_open
/// = true` chooses to run unguarded.
#[test]
fn a_hook_script_that_fails_to_load_fails_closed() {
    let cases: [(&str, &str, &str, &[&str]); 3] = [
        (
            "scripts/guard.lua",
            "-- a guard\nlocal banned = 'system:random_int'\napi.hooks.on('tool:before-invok', function(ev)\n  if ev.tool == banned then return false end\nend)\n",
            "script:guard",
            &["guard.lua:3", "did you mean 'tool:before-invoke'?"],
        ),
        (
            "scripts/guard.rhai",
            "fn guard(ev) { () }\n\napi::hooks::on(\"tool:befor-invoke\", Fn(\"guard\"));\n",
            "script:guard",
            &["guard.rhai:3", "did you mean 'tool:before-invoke'?"],
        ),
        (
            "scripts/guard.lua",
            "api.hooks.on('tool:before-invoke', function(ev)\n  return ev.tool ==\nend)\n",
            "script:guard",
            &["guard.lua:3", "does not compile"],
        ),
    ];
    for (file, text, owner, says) in cases {
        let h = home(&[(file, text)]);
        let run = cli_support::tavern(h.path(), &["call"], ECHO_CALL);
        assert_eq!(run.code, 1, "{file}: {}\n{}", run.stdout, run.stderr);
        let out = run.json();
        let err = &out["results"][0]["error"];
        assert_eq!(err["code"], "vetoed", "{out}");
        let msg = err["message"].as_str().unwrap();
        assert!(msg.contains(owner), "{msg}");
        for s in says {
            assert!(msg.contains(s), "{file}: '{s}' missing from {msg}");
        }

        let run = cli_support::tavern(h.path(), &["plugin", "check"], b"");
        assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
        let all = format!("{}{}", run.stdout, run.stderr);
        let line = all
            .lines()
            .find(|l| l.contains(file))
            .unwrap_or_else(|| panic!("{file} not named: {all}"));
        for s in says {
            assert!(line.contains(s), "'{s}' missing from {line}");
        }
        assert!(line.contains("calls are refused"), "{line}");

        let run = cli_support::tavern(
            h.path(),
            &["--set", "scripts.fail_open=true", "call"],
            ECHO_CALL,
        );
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert_eq!(run.json()["results"][0]["value"], "hi");
    }

    // A plugin that declares hooks is a guard too.
    let h = home(&[
        (
            "plugins/Guard/plugin.yaml",
            &manifest("Guard", &["tool:before-invoke"], ""),
        ),
        (
            "plugins/Guard/main.lua",
            "api.hooks.on('tool:before-invoke', function(ev)\n  return not\nend)\n",
        ),
    ]);
    let run = cli_support::tavern(h.path(), &["call"], ECHO_CALL);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let msg = run.json()["results"][0]["error"]["message"].to_string();
    assert!(
        msg.contains("plugin:Guard") && msg.contains("main.lua:3"),
        "{msg}"
    );
}

/// Issue 23 item 13: `[scripts.NAME] enabled = false` leaves the script unloaded; a value
/// that is not a boolean is a problem at its line (and the script, not loaded, fails closed).
#[test]
fn enabled_false_leaves_a_script_unloaded() {
    let veto = "api.hooks.on('tool:before-invoke', function(ev) return false, 'no calls' end)\n";
    let h = home(&[
        ("scripts/no_calls.lua", veto),
        ("tavern.toml", "[scripts.no_calls]\nenabled = false\n"),
    ]);
    let e = clean_engine(h.path());
    assert!(e.user_scripts().is_empty());
    assert!(e.hooks().list().is_empty(), "{:?}", e.hooks().list());
    let run = cli_support::tavern(h.path(), &["call"], ECHO_CALL);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);

    // Enabled, or said nothing about: it runs.
    for toml in ["[scripts.no_calls]\nenabled = true\n", ""] {
        write(&h.path().join("tavern.toml"), toml);
        let run = cli_support::tavern(h.path(), &["call"], ECHO_CALL);
        assert_eq!(run.code, 1, "{toml}: {}", run.stdout);
        assert!(run.stdout.contains("no calls"), "{}", run.stdout);
    }

    write(
        &h.path().join("tavern.toml"),
        "[scripts.no_calls]\nenabled = \"no\"\n",
    );
    let e = engine(h.path());
    let p = e
        .problems()
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>();
    assert!(
        p.iter().any(|p| p.contains("tavern.toml:2")
            && p.contains("scripts.no_calls.enabled: expected true or false")),
        "{p:?}"
    );
}
