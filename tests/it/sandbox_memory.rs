//! Threat: memory exhaustion. Every state has a memory limit; the next call on the same
//! state still works, and memory returns near its baseline.

use crate::common;

use common::*;
use serde_json::json;

#[test]
fn table_growth_hits_the_memory_limit() {
    let cases = [
        ("grow", "function grow() local t = {} for i = 1, 1e9 do t[i] = i end end"),
        ("strings", "function strings() local t = {} for i = 1, 1e9 do t[i] = tostring(i) .. 'xxxxxxxxxxxxxxxx' end end"),
        ("concat_doubling", "function concat_doubling() local s = 'x' while true do s = s .. s end end"),
        ("table_concat", "function table_concat() local t = {} for i = 1, 1e6 do t[i] = 'abcdefghij' end local s = table.concat(t) local u = {} for i = 1, 100 do u[i] = s .. i end end"),
    ];
    for (f, src) in cases {
        let mut l = test_limits();
        l.instructions = 200_000_000;
        l.wall_ms = 5_000;
        assert_contained_with("main.lua", src, f, "memory_limit", l);
    }
}

#[test]
fn memory_returns_after_a_memory_error() {
    let p = plugin(
        "mem",
        &[(
            "main.lua",
            &format!(
                "function grow() local t = {{}} for i = 1, 1e9 do t[i] = i end end\n{PING_LUA}"
            ),
        )],
    );
    let base = p.lua_memory();
    for _ in 0..3 {
        let e = call(&p, "grow", json!({})).unwrap_err();
        assert_eq!(e.kind(), "memory_limit");
        assert_usable(&p);
    }
    let after = p.lua_memory();
    assert!(
        after < base + 512 * 1024,
        "memory {after} did not return near {base}"
    );
}

#[test]
fn caught_memory_errors_still_end() {
    // A script that catches its memory errors forever still ends, on the instruction budget.
    let src = "function f() while true do pcall(function() local t = {} for i = 1, 1e9 do t[i] = i end end) end end";
    let mut l = test_limits();
    l.instructions = 20_000_000;
    l.wall_ms = 10_000;
    assert_contained_with("main.lua", src, "f", "instruction_limit", l);
}

#[test]
fn rhai_collections_are_bounded() {
    let mut l = test_limits();
    l.max_collection_items = 10_000;
    l.max_string_bytes = 100_000;
    let cases = [
        ("arr", "fn arr() { let a = []; loop { a.push(1); } }"),
        ("text", "fn text() { let s = \"x\"; loop { s += s; } }"),
    ];
    for (f, src) in cases {
        assert_contained_with("main.rhai", src, f, "value_limit", l);
    }
}

#[test]
fn rhai_map_growth_ends_on_a_limit() {
    // Rhai checks map sizes on some operations only; an index-assignment loop still ends on
    // a budget (operations or time), never by exhausting the host.
    let mut l = test_limits();
    l.max_collection_items = 10_000;
    let p = try_plugin("m", &[("main.rhai", &format!("fn map() {{ let m = #{{}}; let i = 0; loop {{ m[`k${{i}}`] = i; i += 1; }} }}\n{PING_RHAI}"))], l).unwrap();
    let e = within(bound(&l), || call(&p, "map", json!({}))).unwrap_err();
    assert!(
        ["value_limit", "instruction_limit", "timeout"].contains(&e.kind()),
        "{e:?}"
    );
    assert_usable(&p);
}
