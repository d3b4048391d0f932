//! The readers of the 2025–26 families (`qwen3_coder`, `glm45`, `kimi_k2`, `harmony`,
//! `minimax_m2`, `step3`, `gemma4`, `gemma3`, `lfm2`, `olmo3`, `granite3`, `tool_calls`,
//! `internlm2`, `longcat`, `functools`, `gigachat3`, `command_r`, `apertus`) and `auto` on
//! any bytes: no panic, places inside the text, streaming equal to one-shot (the harness
//! in `../harness.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../harness.rs");

fuzz_target!(|data: &[u8]| {
    // Every format after `functionary` in the table is one of the 2025–26 families.
    let after = Format::NAMES
        .iter()
        .position(|n| *n == "functionary")
        .map_or(0, |i| i + 1);
    for name in &Format::NAMES[after..] {
        if let Ok(f) = name.parse::<Format>() {
            check(data, f);
        }
    }
    check(data, Format::Auto);
});
