//! Threat: pathological Lua patterns that backtrack exponentially inside one C call. The
//! Rust matcher charges its steps to the budget, so they end with the instruction limit.

use crate::common;

use common::*;
use serde_json::json;

const EVIL: &str =
    "local p = string.rep('a?', 28) .. string.rep('a', 28) local s = string.rep('a', 28)";

#[test]
fn catastrophic_patterns_hit_the_budget() {
    let cases = [
        (
            "find",
            format!("function find() {EVIL} return string.find(s, p) end"),
        ),
        (
            "match",
            format!("function match() {EVIL} return s:match(p) end"),
        ),
        (
            "gmatch",
            format!("function gmatch() {EVIL} for x in s:gmatch(p) do end end"),
        ),
        (
            "gsub",
            format!("function gsub() {EVIL} return (s:gsub(p, 'x')) end"),
        ),
        (
            "pcall_find",
            format!("function pcall_find() {EVIL} while true do pcall(string.find, s, p) end end"),
        ),
    ];
    for (f, src) in &cases {
        assert_contained("main.lua", src, f, "instruction_limit");
    }
}

#[test]
fn patterns_still_work() {
    let p = plugin(
        "pat",
        &[(
            "main.lua",
            r#"function f()
                 local out = {}
                 out.find = {string.find("hello world", "o w")}
                 out.plain = {string.find("a.b", ".", 1, true)}
                 out.match = {string.match("key = value", "(%w+)%s*=%s*(%w+)")}
                 out.gsub = {string.gsub("hello world", "o", "0")}
                 out.gsub_fn = (string.gsub("abc", "%w", function(c) return c:upper() .. "." end))
                 out.gsub_tbl = (string.gsub("$a $b", "%$(%w+)", {a = "1", b = 2}))
                 out.gsub_pct = (string.gsub("abc", "(b)", "[%1%0%%]"))
                 local words = {}
                 for w in string.gmatch("one two  three", "%a+") do words[#words + 1] = w end
                 out.gmatch = words
                 local it = ("k1=v1, k2=v2"):gmatch("(%w+)=(%w+)")
                 out.pairs = {it()}
                 out.anchor = {("abc"):find("^b")}
                 out.frontier = (string.gsub("THE (quick) fox", "%f[%a]%a+", "W"))
                 out.balance = ("f(a(b)c)d"):match("%b()")
                 out.position = {("abc"):match("()b()")}
                 out.neg_init = {("abcabc"):find("b", -3)}
                 return out
               end"#,
        )],
    );
    let out = call(&p, "f", json!({})).unwrap();
    let want = json!({
        "find": [5, 7], "plain": [2, 2], "match": ["key", "value"],
        "gsub": ["hell0 w0rld", 2], "gsub_fn": "A.B.C.", "gsub_tbl": "1 2",
        "gsub_pct": "a[bb%]c", "gmatch": ["one", "two", "three"], "pairs": ["k1", "v1"],
        "anchor": {}, "frontier": "W (W) W", "balance": "(a(b)c)", "position": [2, 3],
        "neg_init": [5, 5]
    });
    assert_eq!(out, want);
}

#[test]
fn malformed_pattern_is_a_runtime_error() {
    let e = assert_contained(
        "main.lua",
        "function f() return ('x'):find('[a') end",
        "f",
        "runtime",
    );
    assert!(e.to_string().contains("missing ']'"), "{e}");
}
