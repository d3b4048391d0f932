//! Every format reads any bytes without panicking, and streaming the same bytes in
//! chunks gives the one-shot result (the harness in `../harness.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../harness.rs");

fuzz_target!(|data: &[u8]| {
    for f in Format::all() {
        check(data, f);
    }
});
