//! Threat: `string.rep` with a huge count (one C call, no hook inside). The result size is
//! checked before anything is allocated.

use crate::common;

use common::*;
use serde_json::json;

#[test]
fn huge_rep_is_refused_before_allocating() {
    let cases = [
        ("huge", "function huge() return string.rep('x', 1e15) end"),
        (
            "huge_sep",
            "function huge_sep() return ('ab'):rep(1e9, ',') end",
        ),
        (
            "overflow",
            "function overflow() return string.rep(string.rep('x', 1000), math.maxinteger) end",
        ),
    ];
    for (f, src) in cases {
        let e = assert_contained("main.lua", src, f, "value_limit");
        assert!(e.to_string().contains("string_size"), "{e}");
    }
}

#[test]
fn rep_still_works() {
    let p = plugin(
        "rep",
        &[(
            "main.lua",
            "function f() return {string.rep('ab', 3, '-'), ('x'):rep(0), ('x'):rep(-1)} end",
        )],
    );
    assert_eq!(
        call(&p, "f", json!({})).unwrap(),
        json!(["ab-ab-ab", "", ""])
    );
}

#[test]
fn rep_in_a_loop_is_charged() {
    let src = "function f() while true do local s = string.rep('x', 1000000) end end";
    let mut l = test_limits();
    l.wall_ms = 10_000;
    assert_contained_with("main.lua", src, "f", "instruction_limit", l);
}
