//! Hooks from Rhai: closures and `Fn("name")`, options as a map, `#{veto: …}`, field
//! replacement, priority, once, off, failing and runaway handlers, overrides with `next`.

use crate::hooks_support;

use hooks_support::*;
use serde_json::json;

fn rhai_hooker(rhai: &str) -> tempfile::TempDir {
    home(&[
        (
            "plugins/RHooker/plugin.yaml",
            &manifest(
                "RHooker",
                &["hook:client:tool:before-invoke", "tool:after-invoke"],
                "  services:\n    override: [\"Echo:*\"]\n",
            ),
        ),
        ("plugins/RHooker/main.rhai", rhai),
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn closures_and_named_functions_modify_and_veto() {
    let h = rhai_hooker(
        r#"
fn guard(ev) {
    if ev.tool == "Echo:echo" && ev.args.text == "bad" { return #{ veto: "rhai says no" }; }
    if ev.tool == "Echo:echo" && ev.args.text == "false" { return false; }
}
api::hooks::on("tool:before-invoke", Fn("guard"));
api::hooks::on("tool:before-invoke", |ev| {
    if ev.tool == "Echo:echo" && ev.args.text == "up" { #{ args: #{ text: "UP" } } }
});
api::hooks::on("tool:after-invoke", |ev| {
    if ev.tool == "Echo:echo" && ev.ok { #{ result: ev.result + "." } }
});
"#,
    );
    let e = clean_engine(h.path());
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "up"})).await.unwrap(),
        json!("UP.")
    );
    let err = call(&e, "Echo:echo", json!({"text": "bad"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("rhai says no"), "{err}");
    let err = call(&e, "Echo:echo", json!({"text": "false"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("plugin:RHooker"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn priority_once_off_and_failures() {
    let h = rhai_hooker(
        r#"
api::hooks::on("tool:before-invoke", |ev| {
    if ev.args.text == "order" { return #{ args: #{ text: ev.args.text + "-low" } }; }
});
api::hooks::on("tool:before-invoke", |ev| {
    if ev.args.text == "order" { return #{ args: #{ text: "high" } }; }
}, #{ priority: 10 });
api::hooks::on("tool:before-invoke", |ev| {
    if ev.tool == "Echo:echo" && ev.args.text == "once" { return false; }
}, #{ once: true });
let h = api::hooks::on("tool:before-invoke", |ev| { false });
api::hooks::off(h);
api::hooks::on("tool:before-invoke", |ev| {
    if ev.args.text == "boom" { throw "rhai handler failed"; }
    if ev.args.text == "spin" { loop { } }
});
"#,
    );
    let e = clean_engine(h.path());
    // `once`: the first event spends it.
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "once"}))
            .await
            .unwrap_err()
            .code(),
        "vetoed"
    );
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "once"}))
            .await
            .unwrap(),
        json!("once")
    );
    // The priority-10 handler runs first, the low one sees its replacement.
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "order"}))
            .await
            .unwrap(),
        json!("high")
    );
    let err = call(&e, "Echo:echo", json!({"text": "boom"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(
        err.to_string().contains("rhai handler failed")
            && err.to_string().contains("plugin:RHooker"),
        "{err}"
    );
    let err = call(&e, "Echo:echo", json!({"text": "spin"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("limit"), "{err}");
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "still"}))
            .await
            .unwrap(),
        json!("still")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rhai_override_wraps_next() {
    let h = rhai_hooker(
        r#"
api::services::override("Echo:echo", |args, ctx| {
    "(" + api::services::next(ctx, #{ text: args.text + "+" }) + ")"
});
"#,
    );
    let e = clean_engine(h.path());
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "a"})).await.unwrap(),
        json!("(a+)")
    );
    assert_eq!(e.hooks().overridden_by("Echo:echo"), vec!["plugin:RHooker"]);
}
