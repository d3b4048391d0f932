//! Threat: escaping the sandbox through the standard library (io, os, package, require,
//! load/loadfile/dofile, binary chunks via string.dump, debug, collectgarbage).

use crate::common;

use common::*;
use serde_json::json;

#[test]
fn dangerous_globals_are_absent() {
    let names = [
        "io",
        "os",
        "package",
        "require",
        "load",
        "loadfile",
        "dofile",
        "debug",
        "collectgarbage",
        "loadstring",
        "module",
    ];
    let p = plugin("probe", &[("main.lua", "function kind(a) return type(_G[a.name]) end\nfunction dump() return type(string.dump) end")]);
    for n in names {
        let out = call(&p, "kind", json!({"name": n})).unwrap();
        assert_eq!(out, json!("nil"), "{n} must not be reachable");
    }
    assert_eq!(call(&p, "dump", json!({})).unwrap(), json!("nil"));
}

#[test]
fn using_them_is_a_runtime_error() {
    let cases = [
        (
            "use_io",
            "function use_io() return io.open('/etc/passwd') end",
        ),
        ("use_os", "function use_os() return os.execute('true') end"),
        (
            "use_load",
            "function use_load() return load('return 1')() end",
        ),
        (
            "use_dump",
            "function use_dump() return string.dump(print) end",
        ),
        (
            "use_require",
            "function use_require() return require('os') end",
        ),
    ];
    for (f, src) in cases {
        let e = assert_contained("main.lua", src, f, "runtime");
        assert!(e.to_string().contains("nil"), "{e}");
    }
}

#[test]
fn binary_chunks_refused_at_load() {
    // "\27Lua" is the bytecode signature; text-only loading must refuse it.
    let src = "\x1bLua\x54\x00";
    let e = try_plugin("bin", &[("main.lua", src)], test_limits()).unwrap_err();
    assert_eq!(e.kind(), "syntax", "{e}");
    assert_usable(&bystander_lua());
}

#[test]
fn rhai_eval_is_disabled() {
    let e = try_plugin(
        "ev",
        &[("main.rhai", "fn f() { eval(\"40 + 2\") }")],
        test_limits(),
    );
    // Either refused at compile time (reserved symbol) or at call time: never evaluated.
    match e {
        Err(e) => assert_eq!(e.kind(), "syntax", "{e}"),
        Ok(p) => {
            let e = call(&p, "f", json!({})).unwrap_err();
            assert_eq!(e.kind(), "runtime", "{e}");
        }
    }
}
