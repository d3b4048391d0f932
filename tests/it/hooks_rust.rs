//! Host (Rust) hooks: sync and async closures on the builder and the engine, every point,
//! the same contract as scripts, and workflow/node points for runs started by a tool call
//! and directly.

use crate::hooks_support;

use std::sync::{Arc, Mutex};

use hooks_support::*;
use serde_json::{json, Value};
use tavern::internal::hooks::{HookOptions, HookReturn};
use tavern::internal::workflow::RunOptions;
use tavern::Engine;

const SHOUT: &str = r#"{"id": "shout",
 "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
 "interfaceOutputs": {"result": {"dataFlowType": "STRING"}},
 "nodes": [{"id": "in", "type": "core:GroupInput"},
           {"id": "up", "type": "core:RegexReplace", "inputValues": {"pattern": "a", "replacement": "A"}},
           {"id": "out", "type": "core:GroupOutput"}],
 "edges": [{"source": "in", "sourceHandle": "text", "target": "up", "targetHandle": "text"},
           {"source": "up", "sourceHandle": "text", "target": "out", "targetHandle": "result"}]}"#;

type Log = Arc<Mutex<Vec<String>>>;

fn recorder(
    log: &Log,
    tag: &'static str,
) -> impl Fn(&str, &Value) -> HookReturn + Send + Sync + 'static {
    let log = log.clone();
    move |point, ev| {
        let subject = ev
            .get("tool")
            .or_else(|| ev.get("node"))
            .or_else(|| ev.get("workflow"))
            .or_else(|| ev.get("plugin"))
            .and_then(Value::as_str)
            .unwrap_or("-");
        log.lock().unwrap().push(format!("{tag}:{point}:{subject}"));
        HookReturn::Continue
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_point_fires_for_host_closures() {
    let h = home(&[("workflows/shout.json", SHOUT)]);
    let log: Log = Default::default();
    let mut b = Engine::builder().home(h.path());
    for p in tavern::internal::hooks::POINTS {
        b = b.hook(p.name, recorder(&log, "h"));
    }
    let e = b.build().unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    {
        let l = log.lock().unwrap();
        assert!(l.contains(&"h:plugin:loaded:Echo".to_string()), "{l:?}");
        assert_eq!(
            l.last().map(String::as_str),
            Some("h:engine:ready:-"),
            "{l:?}"
        );
    }
    log.lock().unwrap().clear();
    // A workflow run started by a tool call.
    assert_eq!(
        call(&e, "workflow:shout", json!({"text": "banana"}))
            .await
            .unwrap(),
        json!("bAnAnA")
    );
    let l = log.lock().unwrap().clone();
    assert_eq!(
        l,
        vec![
            "h:tool:before-invoke:workflow:shout",
            "h:workflow:before-execute:shout",
            "h:node:before-execute:up",
            "h:node:after-execute:up",
            "h:workflow:after-execute:shout",
            "h:tool:after-invoke:workflow:shout",
        ]
    );
    // A run started directly (as the CLI and hosts do): the workflow and node points fire.
    log.lock().unwrap().clear();
    let wf = e.workflows().get("shout").unwrap();
    let opts = RunOptions {
        tools: Some(e.tools().clone()),
        hooks: Some(e.hooks().clone()),
        ..Default::default()
    };
    let r = wf
        .plan
        .run(serde_json::from_value(json!({"text": "a"})).unwrap(), opts)
        .await
        .unwrap();
    assert_eq!(r.outputs["result"], json!("A"));
    let l = log.lock().unwrap().clone();
    assert_eq!(
        l,
        vec![
            "h:workflow:before-execute:shout",
            "h:node:before-execute:up",
            "h:node:after-execute:up",
            "h:workflow:after-execute:shout",
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn workflow_and_node_fields_can_be_replaced_and_vetoed() {
    let h = home(&[("workflows/shout.json", SHOUT)]);
    let e = Engine::builder()
        .home(h.path())
        .hook("workflow:before-execute", |_, ev| {
            if ev["inputs"]["text"] == "stop" {
                return HookReturn::Veto("no stopping".into());
            }
            HookReturn::Continue
        })
        .hook("node:before-execute", |_, ev| {
            assert_eq!(ev["type"], "core:RegexReplace");
            assert_eq!(ev["workflow"], "shout");
            let mut inputs = ev["inputs"].as_object().unwrap().clone();
            inputs.insert("replacement".into(), json!("4"));
            HookReturn::Replace(serde_json::from_value(json!({"inputs": inputs})).unwrap())
        })
        .hook("workflow:after-execute", |_, ev| {
            assert_eq!(ev["status"], "succeeded");
            let out = ev["outputs"]["result"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            HookReturn::Replace(
                serde_json::from_value(json!({"outputs": {"result": out + "!"}})).unwrap(),
            )
        })
        .build()
        .unwrap();
    assert_eq!(
        call(&e, "workflow:shout", json!({"text": "banana"}))
            .await
            .unwrap(),
        json!("b4n4n4!")
    );
    let err = call(&e, "workflow:shout", json!({"text": "stop"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("no stopping"), "{err}");
}

/// Vetoes the text "veto"; otherwise makes the node replace `n` with `N`.
fn veto_or_rewrite(ev: &Value) -> HookReturn {
    match ev["inputs"]["text"].as_str() {
        Some("veto") => HookReturn::Veto("not this text".into()),
        _ => HookReturn::Replace(
            serde_json::from_value(json!({"inputs": {
                "text": ev["inputs"]["text"], "pattern": "n", "replacement": "N"}}))
            .unwrap(),
        ),
    }
}

/// `node:before-execute` alone with handlers that run in place is fired where the node is
/// scheduled, with no future around the node; an async handler takes the general path. Both
/// replace inputs and veto the same way.
#[tokio::test(flavor = "multi_thread")]
async fn node_before_replaces_and_vetoes_in_place_and_through_an_async_handler() {
    let sync_home = home(&[("workflows/shout.json", SHOUT)]);
    let in_place = Engine::builder()
        .home(sync_home.path())
        .hook("node:before-execute", |_, ev| veto_or_rewrite(ev))
        .build()
        .unwrap();
    let async_home = home(&[("workflows/shout.json", SHOUT)]);
    let awaited = Engine::builder()
        .home(async_home.path())
        .hook_async("node:before-execute", |_, ev, _ctx| async move {
            tokio::task::yield_now().await;
            Ok(veto_or_rewrite(&ev))
        })
        .build()
        .unwrap();
    for e in [&in_place, &awaited] {
        assert_eq!(
            call(e, "workflow:shout", json!({"text": "banana"}))
                .await
                .unwrap(),
            json!("baNaNa"),
            "the handler's inputs replaced the node's"
        );
        let err = call(e, "workflow:shout", json!({"text": "veto"}))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "vetoed", "{err}");
        assert!(err.to_string().contains("not this text"), "{err}");
        assert!(err.to_string().contains("node 'up'"), "{err}");
        // The engine keeps working after a veto.
        assert_eq!(
            call(e, "workflow:shout", json!({"text": "nan"}))
                .await
                .unwrap(),
            json!("NaN")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn async_closures_priority_once_off_and_snapshot() {
    let h = home(&[]);
    let e = Engine::builder()
        .home(h.path())
        .hook_async("tool:before-invoke", |_, ev, ctx| async move {
            // Async hooks may call tools themselves (one level deeper).
            if ev["args"]["text"] == "nested" && ctx.depth == 0 {
                let v = ctx
                    .call("Echo:echo", json!({"text": "inner"}))
                    .await
                    .map_err(|e| e.to_string())?;
                return Ok(HookReturn::Replace(
                    serde_json::from_value(json!({"args": {"text": v}})).unwrap(),
                ));
            }
            Ok(HookReturn::Continue)
        })
        .build()
        .unwrap();
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "nested"}))
            .await
            .unwrap(),
        json!("inner")
    );

    let hooks = e.hooks().clone();
    let log: Log = Default::default();
    let rec = |tag: &'static str, opts: HookOptions| {
        hooks
            .on_fn("tool:after-invoke", opts, recorder(&log, tag))
            .unwrap()
    };
    rec("a", HookOptions::default());
    rec(
        "b",
        HookOptions {
            priority: 3,
            ..Default::default()
        },
    );
    rec(
        "once",
        HookOptions {
            priority: 7,
            once: true,
            ..Default::default()
        },
    );
    let off = rec("off", HookOptions::default());
    assert!(hooks.off(off));
    assert!(!hooks.off(off));
    // Same owner and id: the second replaces the first.
    rec(
        "id1",
        HookOptions {
            id: Some("x".into()),
            ..Default::default()
        },
    );
    rec(
        "id2",
        HookOptions {
            id: Some("x".into()),
            ..Default::default()
        },
    );
    call(&e, "Echo:echo", json!({"text": "1"})).await.unwrap();
    call(&e, "Echo:echo", json!({"text": "2"})).await.unwrap();
    let l: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.split(':').next().unwrap().to_string())
        .collect();
    assert_eq!(l, vec!["once", "b", "a", "id2", "b", "a", "id2"]);

    // Snapshot: a handler removing a later one mid-fire does not stop it this time. An async
    // handler is registered on this point, so the firing holds a copy of the list.
    assert_eq!(remove_later_mid_fire(&e, false).await, vec!["later"]);
}

/// Registers, on `tool:before-invoke`, a first handler that removes a later one while the
/// point fires (and, with `add`, registers a new one), then calls a tool twice; returns the
/// tags the later and added handlers logged, in order.
async fn remove_later_mid_fire(e: &Engine, add: bool) -> Vec<String> {
    let hooks = e.hooks().clone();
    let log: Log = Default::default();
    let later = Arc::new(Mutex::new(None));
    let (h2, later2, log2) = (hooks.clone(), later.clone(), log.clone());
    hooks
        .on_fn(
            "tool:before-invoke",
            HookOptions {
                priority: 100,
                ..Default::default()
            },
            move |_, _| {
                if let Some(hl) = later2.lock().unwrap().take() {
                    assert!(h2.off(hl));
                    if add {
                        h2.on_fn(
                            "tool:before-invoke",
                            HookOptions::default(),
                            recorder(&log2, "added"),
                        )
                        .unwrap();
                    }
                }
                HookReturn::Continue
            },
        )
        .unwrap();
    let hl = hooks
        .on_fn(
            "tool:before-invoke",
            HookOptions::default(),
            recorder(&log, "later"),
        )
        .unwrap();
    *later.lock().unwrap() = Some(hl);
    call(e, "Echo:echo", json!({"text": "3"})).await.unwrap();
    call(e, "Echo:echo", json!({"text": "4"})).await.unwrap();
    let tags = log.lock().unwrap();
    tags.iter()
        .map(|s| s.split(':').next().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn host_override_wraps_next_and_tools_lists_it() {
    let h = home(&[]);
    let e = engine(h.path());
    e.hooks()
        .override_fn("Echo:echo", |args, ctx, next| async move {
            let inner = next
                .call(
                    json!({"text": format!("{}?", args["text"].as_str().unwrap_or(""))}),
                    ctx,
                )
                .await?;
            Ok(json!(format!("host({})", inner.as_str().unwrap_or(""))))
        });
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "q"})).await.unwrap(),
        json!("host(q?)")
    );
    assert_eq!(e.hooks().overridden_by("Echo:echo"), vec!["host"]);
    assert!(e.hooks().overridden_by("Echo:count").is_empty());
}

#[test]
fn unknown_points_are_refused() {
    let h = home(&[]);
    let err = Engine::builder()
        .home(h.path())
        .hook("tool:before-everything", |_, _| HookReturn::Continue)
        .build()
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("unknown hook point 'tool:before-everything'"),
        "{err}"
    );
}

/// Handlers that all run in place fire over the registry's list as it stands (no copy):
/// a handler registered or removed while the point fires still waits for the next firing,
/// and one that registers handlers mid-fire does not block or break the one running.
#[tokio::test(flavor = "multi_thread")]
async fn sync_only_handlers_keep_snapshot_semantics() {
    let h = home(&[]);
    let e = Engine::builder().home(h.path()).build().unwrap();
    assert_eq!(
        remove_later_mid_fire(&e, true).await,
        vec!["later", "added"]
    );
}

/// Issue 37 item 8: a host hook fails with a typed `HookError`; the messages are the ones
/// text errors gave (a `before` point refuses the work, an `after` point skips the handler).
#[tokio::test(flavor = "multi_thread")]
async fn host_hooks_fail_with_a_typed_error() {
    use tavern::HookError;
    let h = home(&[("workflows/shout.json", SHOUT)]);
    let e = Engine::builder()
        .home(h.path())
        .hook_async("tool:before-invoke", |_, ev, _ctx| async move {
            match ev["args"]["text"].as_str() {
                // Any text is a `HookError::Failed`.
                Some("text") => Err("no text today".into()),
                Some("typed") => Err(HookError::Failed("typed refusal".to_string())),
                _ => Ok(HookReturn::Continue),
            }
        })
        .hook_async("node:after-execute", |_, _ev, _ctx| async move {
            Err::<HookReturn, _>(HookError::Failed("after points skip me".into()))
        })
        .build()
        .unwrap();
    for (text, why) in [("text", "no text today"), ("typed", "typed refusal")] {
        let err = call(&e, "Echo:echo", json!({ "text": text }))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "vetoed", "{err}");
        assert!(
            err.to_string().contains(&format!(
                "the tool:before-invoke hook of host failed, so the work is refused: {why}"
            )),
            "{err}"
        );
    }
    // A failing after handler is skipped: the run's outputs stand.
    assert_eq!(
        call(&e, "workflow:shout", json!({"text": "banana"}))
            .await
            .unwrap(),
        json!("bAnAnA")
    );
    // A replacement that is not an object is a typed failure with the old message.
    let bad = HookError::NotAnObject {
        field: "inputs".into(),
        value: "3".into(),
    };
    assert_eq!(
        bad.to_string(),
        "it replaced 'inputs' with 3, which is not an object of named values"
    );
}
