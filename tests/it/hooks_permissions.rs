//! Permissions for hooks, overrides and tool calls, declared and enforced: undeclared uses are
//! refused with the missing permission named (at load when known, else at call time), both
//! written forms of a hook permission are accepted, and `tavern plugin check` sets declared
//! beside used.

use crate::cli_support;
use crate::hooks_support;

use hooks_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn undeclared_hook_and_override_are_refused_at_load() {
    let h = home(&[
        ("plugins/NoHook/plugin.yaml", "name: NoHook\n"),
        (
            "plugins/NoHook/main.lua",
            "api.hooks.on('tool:before-invoke', function() return false end)\n",
        ),
        (
            "plugins/NoOver/plugin.yaml",
            "name: NoOver\npermissions:\n  services:\n    override: [\"Echo:count\"]\n",
        ),
        (
            "plugins/NoOver/main.lua",
            "api.services.override('Echo:echo', function() return 'stolen' end)\n",
        ),
        (
            "plugins/RNoHook/plugin.yaml",
            "name: RNoHook\npermissions:\n  hooks: [tool:after-invoke]\n",
        ),
        (
            "plugins/RNoHook/main.rhai",
            "api::hooks::on(\"tool:before-invoke\", |ev| false);\n",
        ),
        (
            "plugins/BadOpt/plugin.yaml",
            "name: BadOpt\npermissions:\n  hooks: [tool:after-invoke]\n",
        ),
        (
            "plugins/BadOpt/main.lua",
            "api.hooks.on('tool:after-invoke', function() end, {prio = 1})\n",
        ),
        (
            "plugins/BadPoint/plugin.yaml",
            "name: BadPoint\npermissions:\n  hooks: [\"*\"]\n",
        ),
        (
            "plugins/BadPoint/main.rhai",
            "api::hooks::on(\"tool:sometime\", |ev| ());\n",
        ),
    ]);
    let e = engine(h.path());
    let problems: Vec<String> = e.problems().iter().map(ToString::to_string).collect();
    let find = |plugin: &str, needle: &str| {
        assert!(
            problems
                .iter()
                .any(|p| p.contains(plugin) && p.contains(needle)),
            "no problem for {plugin} naming '{needle}': {problems:#?}"
        )
    };
    find("NoHook/main.lua", "hooks: tool:before-invoke");
    find("NoOver/main.lua", "services.override: Echo:echo");
    find("RNoHook/main.rhai", "hooks: tool:before-invoke");
    find("BadOpt/main.lua", "unknown option prio");
    find("BadPoint/main.rhai", "unknown hook point 'tool:sometime'");
    // BadOpt and BadPoint declare hooks: guards that did not load, so calls are refused
    // until they load (issue 23 item 14).
    let err = call(&e, "Echo:echo", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed", "{err}");
    assert!(err.to_string().contains("plugin:BadOpt"), "{err}");
    // Told to fail open, nothing they tried is in effect; the rest of the engine serves.
    let e = tavern::Engine::builder()
        .home(h.path())
        .set("scripts.fail_open=true")
        .build()
        .unwrap();
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "hi"})).await.unwrap(),
        json!("hi")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn both_written_forms_of_a_hook_permission_are_accepted() {
    for (declared, used) in [
        ("hook:client:tool:before-invoke", "tool:before-invoke"),
        ("tool:before-invoke", "hook:client:tool:before-invoke"),
        (
            "hook:client:tool:before-invoke",
            "hook:client:tool:before-invoke",
        ),
    ] {
        let h = home(&[
            ("plugins/Hk/plugin.yaml", &manifest("Hk", &[declared], "")),
            (
                "plugins/Hk/main.lua",
                &format!("api.hooks.on('{used}', function(ev) if ev.args.text == 'x' then return false, 'form ok' end end)\n"),
            ),
        ]);
        let e = clean_engine(h.path());
        let err = call(&e, "Echo:echo", json!({"text": "x"}))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("form ok"),
            "{declared} / {used}: {err}"
        );
    }
}

const SNEAKY_LUA: &str = r#"
api.tools.register{ id = "borrow", description = "calls another plugin's tool",
  parameters = {type = "object", properties = {id = {type = "string"}}},
  handler = function(args) return api.tools.call(args.id, {text = "t"}) end }
api.tools.register{ id = "own", description = "own tool", handler = function() return "mine" end }
api.tools.register{ id = "callown", description = "calls own and system tools",
  handler = function() return api.tools.call("Sneaky:own") .. api.tools.call("system:echo", {text = "+sys"}) end }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_need_permissions_tools_except_own_and_system() {
    let h = home(&[
        ("plugins/Sneaky/plugin.yaml", "name: Sneaky\n"),
        ("plugins/Sneaky/main.lua", SNEAKY_LUA),
        (
            "plugins/Allowed/plugin.yaml",
            "name: Allowed\npermissions:\n  tools: [\"Echo:*\"]\n",
        ),
        (
            "plugins/Allowed/main.lua",
            &SNEAKY_LUA.replace("Sneaky:own", "Allowed:own"),
        ),
    ]);
    let e = clean_engine(h.path());
    let err = call(&e, "Sneaky:borrow", json!({"id": "Echo:echo"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "permission_denied", "{err}");
    assert!(err.to_string().contains("tools: Echo:echo"), "{err}");
    // The refused call never ran.
    assert_eq!(call(&e, "Echo:count", json!({})).await.unwrap(), json!(0));
    // Any spelling resolves to the canonical id before the check.
    let err = call(&e, "Sneaky:borrow", json!({"id": "Echo.echo"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("tools: Echo:echo"), "{err}");
    assert_eq!(
        call(&e, "Allowed:borrow", json!({"id": "Echo:echo"}))
            .await
            .unwrap(),
        json!("t")
    );
    let own = call(&e, "Sneaky:callown", json!({})).await.unwrap();
    assert!(own.as_str().unwrap().starts_with("mine"), "{own}");
}

#[test]
fn plugin_check_sets_declared_beside_used_and_names_undeclared_uses() {
    let h = home(&[
        ("plugins/Sneaky/plugin.yaml", "name: Sneaky\npermissions:\n  hooks: [\"tool:after-invoke\"]\n"),
        (
            "plugins/Sneaky/main.lua",
            "function later()\n  api.hooks.on('tool:before-invoke', function() end)\n  return api.tools.call('Echo:echo', {text = 'x'})\nend\napi.hooks.on('tool:after-invoke', function() end)\n",
        ),
    ]);
    let run = cli_support::tavern(h.path(), &["plugin", "check"], b"");
    assert_eq!(
        run.code, 1,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    // Everything is on stdout (issue 23 item 7: `plugin check | less` shows the table).
    assert!(run.stderr.trim().is_empty(), "{}", run.stderr);
    // The table: declared beside used, and each undeclared use.
    let table = &run.stdout;
    assert!(table.contains("plugin Sneaky"), "{table}");
    assert!(
        table.lines().any(|l| l.contains("hooks")
            && l.contains("declared: tool:after-invoke")
            && l.contains("used: tool:before-invoke, tool:after-invoke")),
        "{table}"
    );
    assert!(
        table.contains("undeclared:") && table.contains("main.lua:2"),
        "{table}"
    );
    // The problems: one per line with file and line, before the table.
    let out = run.stdout.split("\n\n").next().unwrap_or_default();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(run.stdout.contains("2 problem(s)"), "{}", run.stdout);
    assert!(
        out.contains("main.lua:2") && out.contains("hooks 'tool:before-invoke'"),
        "{out}"
    );
    assert!(
        out.contains("main.lua:3") && out.contains("tools 'Echo:echo'"),
        "{out}"
    );
    assert!(
        !out.contains("main.lua:5:"),
        "the declared use is not reported: {out}"
    );
}
