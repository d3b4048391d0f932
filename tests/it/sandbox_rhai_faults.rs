//! Threat: Rhai scripts trying to panic the host through arithmetic and indexing faults.
//! Every case ends in a typed error (or a value), the host alive and the plugin usable.

use crate::common;

use common::*;
use serde_json::json;

#[test]
fn faults_are_errors_not_panics() {
    let cases = [
        "1 / 0",
        "9223372036854775807 + 1",
        "-9223372036854775808 / -1",
        "[1][5]",
        "\"abc\".sub_string(10, -5)",
        "2 ** 1000000",
        "1 << 100",
        "parse_int(\"x\")",
        "#{a: 1}.b.c",
        "\"x\".pad(1000000000000, \"y\")",
        "[].pad(9999999999, 0)",
        "\"abc\"[99]",
        "range(0, 9223372036854775807).len()",
    ];
    for expr in cases {
        let src = format!("fn f() {{ {expr} }}\n{PING_RHAI}");
        let p = try_plugin("faults", &[("main.rhai", &src)], test_limits()).unwrap();
        let r = within(bound(&test_limits()), || call(&p, "f", json!({})));
        if let Err(e) = &r {
            assert_ne!(e.kind(), "internal", "{expr}: {e}");
        }
        assert_usable(&p);
    }
}
