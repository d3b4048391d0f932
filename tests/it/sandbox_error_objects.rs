//! Threat: hostile error objects: a table whose `__tostring` loops, `nil`, a 50 MB string,
//! tables, functions. Each ends in a bounded, typed error.

use crate::common;

use common::*;
use tavern::internal::script::Limits;

#[test]
fn hostile_error_values_are_bounded() {
    let cases = [
        ("looping_tostring", "function looping_tostring() error(setmetatable({}, {__tostring = function() while true do end end})) end", "instruction_limit"),
        ("nil_error", "function nil_error() error(nil) end", "runtime"),
        ("table_error", "function table_error() error({code = 1}) end", "runtime"),
        ("func_error", "function func_error() error(print) end", "runtime"),
        ("erroring_tostring", "function erroring_tostring() error(setmetatable({}, {__tostring = function() error('again') end})) end", "runtime"),
    ];
    for (f, src, kind) in cases {
        let e = assert_contained("main.lua", src, f, kind);
        assert!(e.to_string().len() < 8192, "{f}: error text not bounded");
    }
}

#[test]
fn huge_error_string_is_cut() {
    let l = Limits {
        memory_bytes: 256 << 20,
        max_string_bytes: 64 << 20,
        wall_ms: 10_000,
        instructions: 100_000_000,
        ..test_limits()
    };
    let e = assert_contained_with(
        "main.lua",
        "function big() error(string.rep('x', 50 * 1024 * 1024)) end",
        "big",
        "runtime",
        l,
    );
    assert!(
        e.to_string().len() < 8192,
        "error text is {} bytes",
        e.to_string().len()
    );
}

#[test]
fn rhai_throw_values() {
    for (f, src) in [
        ("t1", "fn t1() { throw #{ a: 1 }; }"),
        ("t2", "fn t2() { throw; }"),
    ] {
        assert_contained("main.rhai", src, f, "runtime");
    }
}
