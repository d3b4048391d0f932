//! Threat: deep recursion (Lua functions, `__index` chains, metamethod loops, Rhai calls)
//! must surface as a typed error, not a crash.

use crate::common;

use common::*;

#[test]
fn lua_deep_recursion_is_typed() {
    let cases = [
        ("rec", "function rec() local function f(n) return 1 + f(n + 1) end return f(1) end"),
        ("index_loop", "function index_loop() local t = setmetatable({}, {}) getmetatable(t).__index = function(s, k) return s[k] end return t.x end"),
        ("tostring_rec", "function tostring_rec() local t = setmetatable({}, {}) getmetatable(t).__tostring = function(s) return tostring(s) end return tostring(t) end"),
        ("gsub_rec", "function gsub_rec() local function g(s) return (s:gsub('a', g)) end return g('a') end"),
    ];
    let mut l = test_limits();
    l.instructions = 200_000_000;
    l.memory_bytes = 64 << 20;
    l.wall_ms = 5_000;
    // `CASE=<name>` runs one case; an unknown name fails instead of running nothing.
    let only = std::env::var("CASE").ok();
    let mut ran = 0;
    for (f, src) in cases {
        if only.as_deref().is_some_and(|o| o != f) {
            continue;
        }
        let e = assert_contained_with("main.lua", src, f, "value_limit", l);
        assert!(e.to_string().contains("call_depth"), "{f}: {e}");
        ran += 1;
    }
    let names: Vec<&str> = cases.iter().map(|(f, _)| *f).collect();
    assert!(
        ran > 0 && (only.is_some() || ran == cases.len()),
        "CASE={only:?} matches no case; cases: {names:?}"
    );
}

#[test]
fn rhai_deep_recursion_is_typed() {
    let e = assert_contained("main.rhai", "fn rec() { rec() }", "rec", "value_limit");
    assert!(e.to_string().contains("call_depth"), "{e}");
}

#[test]
fn rhai_deeply_nested_expression_is_a_syntax_error() {
    let src = format!("fn f() {{ {}1{} }}", "(".repeat(10_000), ")".repeat(10_000));
    let e = try_plugin("deep", &[("main.rhai", &src)], test_limits()).unwrap_err();
    assert_eq!(e.kind(), "syntax", "{e}");
}

#[test]
fn lua_deeply_nested_source_is_a_syntax_error() {
    let src = format!(
        "function f() return {}1{} end",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    let e = within(bound(&test_limits()), || {
        try_plugin("deep", &[("main.lua", &src)], test_limits())
    })
    .unwrap_err();
    assert!(["syntax", "value_limit"].contains(&e.kind()), "{e:?}");
    assert_usable(&bystander_lua());
}
