//! Hostile plugin code loaded through the real loader and called through the engine: every
//! threat ends in a typed error within its budget, the host keeps serving (`system:echo`),
//! other plugins are unaffected, and the hostile plugin still answers its next call.
//! (The sandbox's own per-class tests are the `sandbox_*` files; these check the same classes
//! end to end through plugin.yaml limits, tool files and the ToolManager.)

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tavern::internal::tools::Caller;
use tavern::Engine;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// (function, Lua source, accepted error codes)
const LUA: &[(&str, &str, &[&str])] = &[
    ("spin", "function spin() while true do end end", &["limit_exceeded", "timeout"]),
    ("pcall_spin", "function pcall_spin() while true do pcall(function() while true do end end) end end", &["limit_exceeded", "timeout"]),
    ("coroutine_spin", "function coroutine_spin() coroutine.wrap(function() while true do end end)() end", &["limit_exceeded", "timeout"]),
    ("memory", "function memory() local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end end", &["limit_exceeded"]),
    ("string_rep", "function string_rep() return string.rep('x', 1e12) end", &["limit_exceeded", "execution_failed"]),
    ("pattern", "function pattern() return string.find(string.rep('a', 28), string.rep('a?', 28) .. string.rep('a', 28)) end", &["limit_exceeded", "timeout"]),
    ("gc", "function gc() setmetatable({}, {__gc = function() while true do end end}) collectgarbage() return 1 end", &["execution_failed"]),
    ("recursion", "function recursion() local function f() return f() + 1 end return f() end", &["execution_failed", "limit_exceeded"]),
    ("io", "function io_() return io.open('/etc/passwd') end", &["execution_failed"]),
    ("os", "function os_() return os.execute('true') end", &["execution_failed"]),
    ("load_binary", "function load_binary() return load(string.dump(function() end)) end", &["execution_failed"]),
    ("cyclic_value", "function cyclic_value() local t = {} t.t = t return t end", &["limit_exceeded", "execution_failed"]),
    ("deep_value", "function deep_value() local t = {} for i = 1, 100000 do t = {t} end return t end", &["limit_exceeded", "execution_failed"]),
    ("hostile_error", "function hostile_error() error(setmetatable({}, {__tostring = function() while true do end end})) end", &["execution_failed", "limit_exceeded", "timeout"]),
    ("huge_error", "function huge_error() error(string.rep('x', 5e7)) end", &["execution_failed", "limit_exceeded"]),
    ("poison_strings", "function poison_strings() getmetatable('').__index = function() return 'pwned' end return 1 end", &["execution_failed"]),
];

#[tokio::test]
async fn hostile_lua_is_contained_end_to_end() {
    let t = tempfile::tempdir().unwrap();
    let evil = t.path().join("plugins/Evil");
    write(
        &evil.join("plugin.yaml"),
        "name: Evil\nlimits:\n  instructions: 2000000\n  memoryBytes: 33554432\n  wallMs: 2000\n",
    );
    let mut src = String::from("function ok() return ('ok'):upper() end\n");
    let mut ids = vec![("ok", "ok")];
    for (name, code, _) in LUA {
        let f = code
            .split_whitespace()
            .nth(1)
            .unwrap()
            .split('(')
            .next()
            .unwrap();
        src.push_str(code);
        src.push('\n');
        ids.push((name, f));
    }
    write(&evil.join("main.lua"), &src);
    for (id, f) in &ids {
        write(
            &evil.join(format!("tools/{id}.tool.json")),
            &json!({"id": id, "implementation": {"type": "service", "script": "main.lua", "function": f}}).to_string(),
        );
    }
    let good = t.path().join("plugins/Good");
    write(&good.join("plugin.yaml"), "name: Good\n");
    write(
        &good.join("main.lua"),
        "function up(args) return string.upper(args.s) .. ('x'):rep(2) end\n",
    );
    write(
        &good.join("tools/up.tool.json"),
        r#"{"id": "up", "parameters": {"type": "object", "properties": {"s": {"type": "string"}}}, "implementation": {"type": "service", "script": "main.lua", "function": "up"}}"#,
    );
    let e = Engine::builder().home(t.path()).build().unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());

    for (name, _, codes) in LUA {
        let start = Instant::now();
        let r = e
            .tools()
            .invoke(&format!("Evil:{name}"), json!({}), Caller::Cli)
            .await;
        let took = start.elapsed();
        let err = match r {
            Err(err) => err,
            Ok(v) => panic!("{name}: the hostile call returned {v}"),
        };
        assert!(
            codes.contains(&err.code()),
            "{name}: {} ({err})",
            err.code()
        );
        assert!(took < Duration::from_secs(2 + 3), "{name}: took {took:?}");
        // The host, the other plugin and the hostile plugin itself all still serve.
        assert_eq!(
            e.tools()
                .invoke("system:echo", json!({"text": "alive"}), Caller::Cli)
                .await
                .unwrap(),
            json!("alive"),
            "{name}"
        );
        assert_eq!(
            e.tools()
                .invoke("Good:up", json!({"s": "abc"}), Caller::Cli)
                .await
                .unwrap(),
            json!("ABCxx"),
            "{name}"
        );
        assert_eq!(
            e.tools()
                .invoke("Evil:ok", json!({}), Caller::Cli)
                .await
                .unwrap(),
            json!("OK"),
            "{name}: plugin unusable afterwards"
        );
    }
}

#[tokio::test]
async fn hostile_rhai_is_contained_end_to_end() {
    let t = tempfile::tempdir().unwrap();
    let evil = t.path().join("plugins/EvilRhai");
    write(
        &evil.join("plugin.yaml"),
        "name: EvilRhai\nlimits:\n  instructions: 1000000\n  wallMs: 2000\n",
    );
    let cases: &[(&str, &str)] = &[
        ("spin", "fn spin(a, c) { loop { } }"),
        ("recurse", "fn recurse(a, c) { recurse(a, c) }"),
        (
            "big_string",
            "fn big_string(a, c) { let s = \"x\"; loop { s += s; } }",
        ),
        (
            "import_",
            "fn import_(a, c) { import \"/etc/passwd\" as p; 1 }",
        ),
    ];
    let mut src = String::from("fn ok(a, c) { \"ok\" }\n");
    for (_, code) in cases {
        src.push_str(code);
        src.push('\n');
    }
    write(&evil.join("main.rhai"), &src);
    for (f, _) in cases.iter().chain([("ok", "")].iter()) {
        write(
            &evil.join(format!("tools/{f}.tool.json")),
            &json!({"id": f, "implementation": {"type": "service", "script": "main.rhai", "function": f}}).to_string(),
        );
    }
    let e = Engine::builder().home(t.path()).build().unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    for (f, _) in cases {
        let start = Instant::now();
        let r = e
            .tools()
            .invoke(&format!("EvilRhai:{f}"), json!({}), Caller::Cli)
            .await;
        assert!(r.is_err(), "{f}: {r:?}");
        assert!(start.elapsed() < Duration::from_secs(5), "{f}");
        assert_eq!(
            e.tools()
                .invoke("system:echo", json!({"text": "alive"}), Caller::Cli)
                .await
                .unwrap(),
            json!("alive")
        );
        assert_eq!(
            e.tools()
                .invoke("EvilRhai:ok", json!({}), Caller::Cli)
                .await
                .unwrap(),
            json!("ok"),
            "{f}"
        );
    }
}

#[test]
fn rhai_eval_is_refused_at_load_with_its_line() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("plugins/E");
    write(&dir.join("plugin.yaml"), "name: E\n");
    write(
        &dir.join("main.rhai"),
        "fn ok(a, c) { 1 }\n\nfn bad(a, c) { eval(\"1\") }\n",
    );
    let e = Engine::builder().home(t.path()).build().unwrap();
    let p = &e.problems()[0];
    assert!(p.file.ends_with("E/main.rhai"), "{p}");
    assert_eq!(p.line, Some(3), "{p}");
    assert!(p.message.contains("eval"), "{p}");
}
