//! Threat: values returned to the host that are cyclic, 100,000 levels deep, huge,
//! non-UTF-8, NaN or ±inf, or not data at all (functions, coroutines).

use crate::common;

use common::*;
use serde_json::json;

#[test]
fn hostile_return_values() {
    let cases = [
        ("cycle", "function cycle() local t = {} t.self = t return t end", "value_limit", "cycle"),
        ("deep", "function deep() local t = {} for i = 1, 100000 do t = {t} end return t end", "value_limit", "value_depth"),
        ("nan", "function nan() return {x = 0/0} end", "conversion", "$.x"),
        ("inf", "function inf() return {1, math.huge} end", "conversion", "$[1]"),
        ("ninf", "function ninf() return -math.huge end", "conversion", "$"),
        ("func", "function func() return {f = print} end", "conversion", "$.f"),
        ("thread", "function thread() return coroutine.create(print) end", "conversion", "thread"),
        ("bool_key", "function bool_key() return {[true] = 1} end", "conversion", "key"),
        ("huge", "function huge() local t = {} for i = 1, 2000 do t[i] = string.rep('x', 1000) end return t end", "value_limit", "value_bytes"),
    ];
    let mut l = test_limits();
    l.max_value_bytes = 1_000_000;
    for (f, src, kind, needle) in cases {
        let e = assert_contained_with("main.lua", src, f, kind, l);
        assert!(e.to_string().contains(needle), "{f}: {e}");
    }
}

#[test]
fn non_utf8_is_replaced_not_refused() {
    let p = plugin(
        "bytes",
        &[(
            "main.lua",
            "function f() return {s = 'ok\\xff\\xfe', [1.5] = 'half'} end",
        )],
    );
    let out = call(&p, "f", json!({})).unwrap();
    assert_eq!(out["s"], json!("ok\u{fffd}\u{fffd}"));
    assert_eq!(out["1.5"], json!("half"));
}

#[test]
fn shared_subtables_are_not_cycles() {
    let p = plugin(
        "dag",
        &[(
            "main.lua",
            "function f() local s = {1} return {a = s, b = s} end",
        )],
    );
    assert_eq!(
        call(&p, "f", json!({})).unwrap(),
        json!({"a": [1], "b": [1]})
    );
}

#[test]
fn rhai_deep_values() {
    let e = assert_contained(
        "main.rhai",
        "fn deep() { let a = []; for i in 0..1000 { a = [a]; } a }",
        "deep",
        "value_limit",
    );
    assert!(e.to_string().contains("value_depth"), "{e}");
}

#[test]
fn rhai_nan() {
    assert_contained("main.rhai", "fn nan() { 0.0 / 0.0 }", "nan", "conversion");
}

#[test]
fn rhai_very_deep_values_do_not_crash() {
    // Dropping a 100,000-level nested array recurses in Rhai's Drop: the size limits must
    // stop the script before such a value exists, or the host must survive it.
    let mut l = test_limits();
    l.instructions = 50_000_000;
    l.wall_ms = 5_000;
    let p = try_plugin(
        "deep",
        &[(
            "main.rhai",
            &format!(
                "fn deep() {{ let a = []; for i in 0..100000 {{ a = [a]; }} 1 }}\n{PING_RHAI}"
            ),
        )],
        l,
    )
    .unwrap();
    // Called from a thread with a deliberately small stack (512 KiB): the host's own stack
    // size must not decide whether a script can abort the process.
    let r = within(bound(&l), || {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(512 << 10)
                .spawn_scoped(s, || call(&p, "deep", json!({})))
                .unwrap()
                .join()
                .expect("the script thread survives")
        })
    });
    // The value (100,000 levels, or as deep as it got when a limit stopped the script:
    // Rhai's own size check makes each level slower to add) is built and freed on the
    // guaranteed stack: the call returns, it does not abort the process. Without the guard
    // (`on_big_stack` running `f` in place) this test dies with a stack overflow.
    match r {
        Ok(v) => assert_eq!(v, json!(1)),
        Err(e) => assert!(
            matches!(
                e,
                tavern::internal::script::ScriptError::Timeout { .. }
                    | tavern::internal::script::ScriptError::InstructionLimit { .. }
                    | tavern::internal::script::ScriptError::ValueLimit { .. }
            ),
            "a limit, not {e:?}"
        ),
    }
    assert_usable(&p);
}
