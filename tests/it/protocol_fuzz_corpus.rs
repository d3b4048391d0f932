//! The fuzz harness (`fuzz/harness.rs`, which the cargo-fuzz targets in `fuzz/` run) over
//! a seeded random corpus, so `cargo test` checks what the fuzzers check without
//! cargo-fuzz: the worked cases of every format cut, spliced, repeated and sprinkled
//! with markers and random bytes, read in every format.

use serde_json::Value;

include!("../../fuzz/harness.rs");

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const MARKERS: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function_call>",
    "<function=a_b>",
    "</function>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|python_tag|>",
    ">>>",
    ">>>all\n",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "```python\n",
    "```\n",
    "```json\n",
    "<|[REQUEST_TOOL]|>",
    "<|[END_TOOL]|>",
    "command:「始」",
    "「末」",
    "<ACTION>",
    "</ACTION>",
    "<think>",
    "</think>",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "'",
    "\"",
    "\\",
    "\\_",
    "=",
    ",",
    ";",
    "\n",
    "True",
    "None",
    "a_b(",
    "x=",
    "{\"name\": \"a\", \"arguments\": {",
    "'name': ",
    "<function=a_b>\n<parameter=x>\n",
    "</parameter>",
    "<arg_key>x</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>functions.a_b:0",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|channel|>commentary to=functions.a_b",
    "<|channel|>final",
    "<|message|>",
    "<|call|>",
    "<minimax:tool_call>",
    "<invoke name=\"a_b\">",
    "<parameter name=\"x\">",
    "</invoke>",
    "<｜tool_calls_begin｜>",
    "<steptml:invoke name=\"a_b\">",
    "<|tool_call>call:a_b{",
    "<|\"|>",
    "<tool_call|>",
    "```tool_code\n",
    "<|tool_call_start|>",
    "<function_calls>",
    "<|tool_call|>",
    "<tool_calls>",
    "<|action_start|><|plugin|>",
    "<longcat_tool_call>",
    "functools[",
    "function call<|role_sep|>",
    "Action: ```json\n",
    "{\"tool_name\": \"a\", \"parameters\": {",
    "<|tools_prefix|>",
    "<|python_start|>",
    "[CALL_ID]",
];

fn corpus() -> Vec<String> {
    let mut seeds = Vec::new();
    for file in [
        include_str!("../data/native_cases.jsonl"),
        include_str!("../data/native_cases_shared.jsonl"),
        include_str!("../data/native_cases_2026.jsonl"),
        include_str!("../data/parse_cases.jsonl"),
        include_str!("../data/parse_cases_tavern.jsonl"),
    ] {
        for line in file.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap();
            seeds.push(v["input"].as_str().unwrap().to_string());
        }
    }
    seeds
}

fn cut(s: &str, at: usize) -> &str {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    &s[..at]
}

fn mutate(rng: &mut Rng, seeds: &[String]) -> Vec<u8> {
    let mut out = seeds[rng.below(seeds.len())].clone();
    for _ in 0..rng.below(5) {
        match rng.below(5) {
            0 => out = cut(&out, rng.below(out.len() + 1)).to_string(),
            1 => {
                let at = cut(&out, rng.below(out.len() + 1)).len();
                out.insert_str(at, MARKERS[rng.below(MARKERS.len())]);
            }
            2 => {
                let other = &seeds[rng.below(seeds.len())];
                let tail = &other[cut(other, rng.below(other.len() + 1)).len()..];
                out = format!("{}{tail}", cut(&out, rng.below(out.len() + 1)));
            }
            3 => out = out.repeat(1 + rng.below(3)),
            _ => out.insert_str(0, &" ".repeat(rng.below(5))),
        }
    }
    let mut bytes = out.into_bytes();
    if rng.below(4) == 0 && !bytes.is_empty() {
        let i = rng.below(bytes.len());
        bytes[i] = rng.next() as u8;
    }
    bytes
}

#[test]
fn seeded_corpus_in_every_format() {
    let seeds = corpus();
    let mut rng = Rng(0x7a7e_524e_0000_0025);
    for _ in 0..600 {
        let input = mutate(&mut rng, &seeds);
        for f in Format::all() {
            check(&input, f);
        }
    }
}

#[test]
fn deep_and_long_inputs_stay_bounded() {
    // Nesting far past the readers' limit and long runs of openers: no overflow, no
    // quadratic blow-up (the test finishing is the check; no timing assertion).
    for text in [
        format!("<tool_call>{}", "[".repeat(100_000)),
        format!("[a_b(x={})]", "(".repeat(100_000)),
        format!(
            "{{\"name\": \"a\", \"arguments\": {}",
            "{\"a\": ".repeat(50_000)
        ),
        "[TOOL_CALLS]".repeat(20_000),
        "<function_call>".repeat(20_000),
        "a_b(x=1)\n".repeat(20_000),
        format!("lamp_on\n{}", "{".repeat(100_000)),
        "```\n".repeat(20_000),
    ] {
        for f in Format::all() {
            check(text.as_bytes(), f);
        }
    }
}
