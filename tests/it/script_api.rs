//! The script API end to end: plugin functions, registered tools through the ToolManager,
//! snippets, and the api surface.

use crate::common;

use common::*;
use serde_json::json;
use tavern::internal::script::{run_snippet, Lang, Limits, ScriptError};
use tavern::internal::tools::Caller;

#[test]
fn lua_function_call_roundtrip() {
    let p = plugin(
        "demo",
        &[("main.lua", "function add(args, ctx) return {sum = args.a + args.b, tool = ctx.tool_id, list = {1, 2, 3}} end")],
    );
    let out = call(&p, "add", json!({"a": 2, "b": 3})).unwrap();
    assert_eq!(
        out,
        json!({"sum": 5, "tool": "demo:add", "list": [1, 2, 3]})
    );
}

#[test]
fn rhai_function_call_roundtrip() {
    let p = plugin(
        "demo",
        &[(
            "main.rhai",
            "fn add(args, ctx) { #{ sum: args.a + args.b, tool: ctx.tool_id } }",
        )],
    );
    let out = call(&p, "add", json!({"a": 2, "b": 3})).unwrap();
    assert_eq!(out, json!({"sum": 5, "tool": "demo:add"}));
}

#[test]
fn unknown_function() {
    let p = plugin("demo", &[("main.lua", PING_LUA)]);
    let e = call(&p, "nope", json!({})).unwrap_err();
    assert!(matches!(e, ScriptError::UnknownFunction { .. }), "{e}");
}

#[test]
fn syntax_error_names_file_and_line() {
    let cases = [
        ("main.lua", "local x = 1\nfunction f( end", 2),
        ("main.rhai", "let x = 1;\nfn f( {", 2),
    ];
    for (name, text, line) in cases {
        let e = try_plugin("bad", &[(name, text)], test_limits()).unwrap_err();
        match e {
            ScriptError::Syntax { file, line: l, .. } => {
                assert_eq!(file, name);
                assert_eq!(l, line, "{name}");
            }
            other => panic!("{name}: expected a syntax error, got {other:?}"),
        }
    }
}

#[test]
fn runtime_error_has_place() {
    let p = plugin(
        "demo",
        &[("main.lua", "function boom()\n  error('kaput')\nend")],
    );
    match call(&p, "boom", json!({})).unwrap_err() {
        ScriptError::Runtime {
            message,
            file,
            line,
        } => {
            assert_eq!(message, "kaput");
            assert_eq!(file.as_deref(), Some("main.lua"));
            assert_eq!(line, Some(2));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_lua_tool_through_manager() {
    let p = plugin(
        "greeter",
        &[(
            "main.lua",
            r#"api.tools.register{
                id = "hello", description = "Says hello",
                parameters = {type = "object", properties = {name = {type = "string"}}},
                handler = function(args, ctx) return "hello " .. args.name .. " from " .. ctx.caller end,
            }"#,
        )],
    );
    let m = manager();
    let tools = p.registered_tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].0.id, "greeter:hello");
    for (def, h) in tools {
        m.register(def, h).unwrap();
    }
    let out = m
        .invoke("greeter:hello", json!({"name": "Ann"}), Caller::Cli)
        .await
        .unwrap();
    assert_eq!(out, json!("hello Ann from cli"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_rhai_tool_through_manager() {
    let p = plugin(
        "rh",
        &[(
            "main.rhai",
            r#"fn shout(args, ctx) { args.text.to_upper() }
               api::tools::register(#{ id: "shout", description: "Upper-cases", handler: "shout" });"#,
        )],
    );
    let m = manager();
    for (def, h) in p.registered_tools() {
        m.register(def, h).unwrap();
    }
    let out = m
        .invoke("rh:shout", json!({"text": "hi"}), Caller::Cli)
        .await
        .unwrap();
    assert_eq!(out, json!("HI"));
}

#[test]
fn snippets_return_value_and_output() {
    let cases = [
        (
            Lang::Lua,
            "print('x', 1) return inputs.a * 2",
            json!({"value": 42, "output": "x\t1\n"}),
        ),
        (
            Lang::Rhai,
            "print(`x ${inputs.a}`); inputs.a * 2",
            json!({"value": 42, "output": "x 21\n"}),
        ),
        (
            Lang::Lua,
            "local t = {} return t",
            json!({"value": {}, "output": ""}),
        ),
    ];
    for (lang, code, want) in cases {
        let out = run_snippet(lang, code, json!({"a": 21}), &Limits::strict()).unwrap();
        assert_eq!(serde_json::to_value(out).unwrap(), want, "{code}");
    }
}

#[test]
fn api_json_and_config() {
    let mut env = tavern::internal::script::ScriptEnv::new("cfg", std::env::temp_dir());
    env.config.insert("root".into(), json!("/w"));
    let p = tavern::internal::script::PluginScripts::from_sources(
        env,
        vec![tavern::internal::script::ScriptSource::new(
            "main.lua",
            r#"function f(args, ctx)
                 local t = api.json.decode('{"a":[1,2],"b":null}')
                 return {enc = api.json.encode({x = 1}), a2 = t.a[2], bnull = t.b == api.json.null,
                         root = api.config.get("root"), full = api.config.get("extensions.cfg.root"),
                         ctxroot = ctx.config.root}
               end"#,
        )
        .unwrap()],
    )
    .unwrap();
    let out = call(&p, "f", json!({})).unwrap();
    assert_eq!(
        out,
        json!({"enc": "{\"x\":1}", "a2": 2, "bnull": true, "root": "/w", "full": "/w", "ctxroot": "/w"})
    );
}

#[test]
fn register_validates_untrusted_names_and_descriptions() {
    let long = "x".repeat(5000);
    let cases = [
        ("other:name", "outside the plugin's namespace"),
        ("bad name!", "is invalid"),
        ("", "is invalid"),
    ];
    for (id, needle) in cases {
        let src = format!(
            "api.tools.register{{id = '{id}', description = 'd', handler = function() end}}"
        );
        let e = try_plugin("reg", &[("main.lua", &src)], test_limits()).unwrap_err();
        assert!(e.to_string().contains(needle), "{id}: {e}");
        let src = format!("fn h(a, c) {{ 1 }}\napi::tools::register(#{{ id: \"{id}\", description: \"d\", handler: \"h\" }});");
        let e = try_plugin("reg", &[("main.rhai", &src)], test_limits()).unwrap_err();
        assert!(e.to_string().contains(needle), "rhai {id}: {e}");
    }
    let src = format!(
        "api.tools.register{{id = 'ok', description = '{long}', handler = function() end}}"
    );
    let e = try_plugin("reg", &[("main.lua", &src)], test_limits()).unwrap_err();
    assert!(e.to_string().contains("description longer"), "{e}");
}

/// Issue 23 item 12: a Lua table converts with its keys in one order, whatever the state's
/// hash seed: numbers first in numeric order, then strings in byte order (Rhai's order).
#[test]
fn lua_tables_convert_with_sorted_keys() {
    let src = r#"
function t(args)
  local out = {}
  for _, k in ipairs(args.keys) do out[k] = #k end
  out[10] = "ten"; out[2] = "two"
  return {inner = out, zeta = 1, alpha = 2, ["Mid"] = 3}
end"#;
    let keys: Vec<String> = [
        "yellow",
        "apple",
        "kiwi",
        "banana",
        "zucchini",
        "cherry",
        "date",
        "elder",
        "fig",
        "grape",
        "honeydew",
        "iceberg",
        "jicama",
        "lime",
        "mango",
        "nectarine",
        "olive",
        "papaya",
        "quince",
        "raspberry",
        "squash",
        "tomato",
        "ugli",
        "vanilla",
        "watermelon",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    let mut want_inner = vec!["2".to_string(), "10".to_string()];
    want_inner.extend(sorted);
    for run in 0..8 {
        // A fresh state each run: a fresh hash seed.
        let p = plugin("demo", &[("main.lua", src)]);
        let out = call(&p, "t", json!({"keys": keys})).unwrap();
        let top: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(top, ["Mid", "alpha", "inner", "zeta"], "run {run}: {out}");
        let inner: Vec<&String> = out["inner"].as_object().unwrap().keys().collect();
        assert_eq!(inner, want_inner.iter().collect::<Vec<_>>(), "run {run}");
        // The same text every run.
        assert!(
            serde_json::to_string(&out)
                .unwrap()
                .starts_with(r#"{"Mid":3,"alpha":2,"inner":{"2":"two","10":"ten","apple":5"#),
            "{out}"
        );
    }
}

#[test]
fn asking_the_client_without_one_is_a_clear_error_or_the_fallback() {
    let lua = plugin(
        "asker",
        &[(
            "main.lua",
            r#"
            function ask(args, ctx) return api.ask({message = "ok?", schema = {type = "object", properties = {ok = {type = "boolean"}}}}) end
            function ask_fallback(args, ctx) return api.client.ask({message = "ok?", schema = {properties = {}}, fallback = {ok = false}}) end
            function chat(args, ctx) return api.llm.chat({prompt = "hi"}) end
            function notify(args, ctx) api.resources.notify("tavern://world") return "sent" end
            function bad(args, ctx) return api.ask({schema = {}}) end
            "#,
        )],
    );
    for f in ["ask", "chat"] {
        let e = call(&lua, f, json!({})).unwrap_err().to_string();
        assert!(e.contains("client_unsupported"), "{f}: {e}");
    }
    assert_eq!(
        call(&lua, "ask_fallback", json!({})).unwrap(),
        json!({"action": "unsupported", "content": {"ok": false}})
    );
    assert_eq!(call(&lua, "notify", json!({})).unwrap(), json!("sent"));
    let e = call(&lua, "bad", json!({})).unwrap_err().to_string();
    assert!(e.contains("`message`"), "{e}");

    let rhai = plugin(
        "asker",
        &[(
            "main.rhai",
            r#"
            fn ask(args, ctx) { api::client::ask(#{message: "ok?", schema: #{properties: #{}}}) }
            fn chat(args, ctx) { api::llm::chat(#{prompt: "hi"}) }
            "#,
        )],
    );
    for f in ["ask", "chat"] {
        let e = call(&rhai, f, json!({})).unwrap_err().to_string();
        assert!(e.contains("client_unsupported"), "rhai {f}: {e}");
    }
}
