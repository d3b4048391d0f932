//! Threat: `__gc` finalizers run with hooks off (an endless one hangs collection and even
//! dropping the state); `__close` handlers run during error unwinding. Both are refused.

use crate::common;

use common::*;

#[test]
fn gc_and_close_metamethods_refused() {
    let cases = [
        ("gc", "function gc() setmetatable({}, {__gc = function() while true do end end}) end"),
        ("close", "function close() local x <close> = setmetatable({}, {__close = function() while true do end end}) end"),
        ("gc_false", "function gc_false() setmetatable({}, {__gc = false}) end"),
    ];
    for (f, src) in cases {
        let e = assert_contained("main.lua", src, f, "runtime");
        assert!(e.to_string().contains("not allowed"), "{e}");
    }
}

#[test]
fn gc_added_after_setmetatable_is_inert() {
    // Lua only marks an object for finalization if __gc is present at setmetatable time.
    let p = plugin(
        "gc",
        &[(
            "main.lua",
            &format!(
                "function later() local mt = {{}} for i = 1, 100 do setmetatable({{}}, mt) end mt.__gc = function() while true do end end return 1 end\n{PING_LUA}"
            ),
        )],
    );
    within(bound(&test_limits()), || {
        assert!(call(&p, "later", serde_json::json!({})).is_ok());
        drop(p);
    });
}
