//! The `glm` reader (and `auto`) on any bytes: no panic, places inside the text,
//! streaming equal to one-shot (the harness in `../harness.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../harness.rs");

fuzz_target!(|data: &[u8]| {
    check(data, Format::Glm);
    check(data, Format::Auto);
});
