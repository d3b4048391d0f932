//! Threat: poisoning shared metatables (the string metatable, library tables) to affect
//! other plugins. Each plugin has its own Lua state; the string metatable is hidden.

use crate::common;

use common::*;
use serde_json::json;

#[test]
fn string_metatable_is_hidden() {
    let p = plugin(
        "mt",
        &[(
            "main.lua",
            "function f() return tostring(getmetatable('')) end",
        )],
    );
    assert_eq!(call(&p, "f", json!({})).unwrap(), json!("string"));
}

#[test]
fn poisoning_one_plugin_does_not_reach_another() {
    let evil = plugin(
        "evil",
        &[(
            "main.lua",
            "function poison() string.upper = function() return 'pwned' end; string.rep = nil; rawset(_G, 'tostring', nil) return ('a'):upper() end",
        )],
    );
    let good = plugin(
        "good",
        &[(
            "main.lua",
            "function up(a) return (a.s):upper() .. tostring(1) .. string.rep('x', 2) end",
        )],
    );
    assert_eq!(call(&evil, "poison", json!({})).unwrap(), json!("pwned"));
    assert_eq!(
        call(&good, "up", json!({"s": "abc"})).unwrap(),
        json!("ABC1xx")
    );
}

#[test]
fn setmetatable_on_string_refused() {
    let e = assert_contained(
        "main.lua",
        "function f() setmetatable('', {}) end",
        "f",
        "runtime",
    );
    assert!(e.to_string().contains("table expected"), "{e}");
}
