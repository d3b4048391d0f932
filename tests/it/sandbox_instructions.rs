//! Threat: CPU exhaustion that tries to evade the instruction budget (plain loops, `pcall`
//! loops, `xpcall`, coroutines, error handlers). Each ends with the instruction-limit error.

use crate::common;

use common::*;
use tavern::internal::script::Limits;

const CASES: &[(&str, &str)] = &[
    ("plain_loop", "function plain_loop() while true do end end"),
    ("pcall_loop", "function pcall_loop() while true do pcall(function() while true do end end) end end"),
    ("pcall_return", "function pcall_return() pcall(function() while true do end end) return 'escaped' end"),
    ("nested_pcall", "function nested_pcall() while true do pcall(pcall, pcall, function() while true do end end) end end"),
    ("xpcall_loop", "function xpcall_loop() while true do xpcall(function() while true do end end, function(e) return e end) end end"),
    ("xpcall_handler_loops", "function xpcall_handler_loops() xpcall(error, function() while true do end end) return 1 end"),
    ("coroutine_loop", "function coroutine_loop() local co = coroutine.create(function() while true do end end) coroutine.resume(co) return 'escaped' end"),
    ("coroutine_wrap", "function coroutine_wrap() while true do pcall(coroutine.wrap(function() while true do end end)) end end"),
    ("coroutine_yield_spin", "function coroutine_yield_spin() local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do co() end end"),
    ("sort_comparator", "function sort_comparator() local t = {} for i = 1, 100 do t[i] = i end while true do pcall(table.sort, t, function(a, b) while true do end end) end end"),
    ("gsub_callback", "function gsub_callback() while true do pcall(string.gsub, 'aaaa', 'a', function() while true do end end) end end"),
    ("tostring_meta", "function tostring_meta() local t = setmetatable({}, {__tostring = function() while true do end end}) while true do pcall(tostring, t) end end"),
];

#[test]
fn lua_budget_cannot_be_evaded() {
    // `CASE=<name>` runs one case; an unknown name fails instead of running nothing.
    let only = std::env::var("CASE").ok();
    let mut ran = 0;
    for (f, src) in CASES {
        if only.as_deref().is_some_and(|o| o != *f) {
            continue;
        }
        eprintln!("case {f}");
        assert_contained("main.lua", src, f, "instruction_limit");
        ran += 1;
    }
    let names: Vec<&str> = CASES.iter().map(|(f, _)| *f).collect();
    assert!(
        ran > 0 && (only.is_some() || ran == CASES.len()),
        "CASE={only:?} matches no case; cases: {names:?}"
    );
}

#[test]
fn rhai_operation_budget() {
    let cases = [
        ("spin", "fn spin() { loop { } }"),
        (
            "spin_catch",
            "fn spin_catch() { loop { try { loop {} } catch {} } }",
        ),
    ];
    // A smaller operation budget and a far wall-clock budget: Rhai in a debug build on a
    // loaded machine can take over a second for 2M operations, and this test is about the
    // operation budget, not the clock.
    let limits = Limits {
        instructions: 200_000,
        wall_ms: 20_000,
        ..test_limits()
    };
    for (f, src) in cases {
        assert_contained_with("main.rhai", src, f, "instruction_limit", limits);
    }
}
