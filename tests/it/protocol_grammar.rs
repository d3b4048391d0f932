//! Differential test: the production TAM scanner reads exactly what the pest grammar
//! (`grammar/tam.pest`, the formal definition) reads — same blocks, same pairs, same
//! values, same recoveries — on generated inputs built from the protocol's own pieces, in
//! the TAM, VCP and auto formats; keys split into base name and step number the same way;
//! and the whole reference reader (`tavern parse --reader grammar`) gives the same calls
//! as the fast reader on every case in `tests/data/parse_cases*.jsonl`.

use proptest::prelude::*;
use tavern::internal::protocol::grammar::{
    parse_reference, reference_blocks, reference_blocks_in, reference_key, reference_key_kind,
    scanned_blocks, scanned_blocks_in,
};
use tavern::internal::protocol::{parse, split_step_key, Format};

const PIECES: &[&str] = &[
    "<|[REQUEST_TOOL]|>",
    "<|[request_tool]|>",
    "<|[END_TOOL]|>",
    "<|[end_tool]|>",
    "<|[REQUEST_",
    "<<<[TOOL_REQUEST]>>>",
    "<<<[END_TOOL_REQUEST]>>>",
    "<<<[end_tool_request]>>>",
    "tool_name",
    "command",
    "command1",
    "command_2",
    "on_error_1",
    "common_x",
    "sha256",
    "key",
    "k_2",
    "文件",
    "é",
    ":",
    "：",
    "「始」",
    "「末」",
    "「末」",
    "「",
    " ",
    "\t",
    ",",
    "\n",
    "\n",
    "\n",
    "\r\n",
    "\r",
    "#",
    "x",
    "value text",
    "<think>",
    "</think>",
    "<thinking >",
    "<",
    ">",
    "1",
];

fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..80).prop_map(|v| v.concat())
}

/// Lines that look like real blocks, so the interesting paths are hit often.
fn blocky_strategy() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        3 => (prop::sample::select(&["command", "a", "b_1", "文件"][..]), prop::collection::vec(prop::sample::select(PIECES), 0..6))
            .prop_map(|(k, v)| format!("{k}:「始」{}「末」", v.concat())),
        1 => prop::collection::vec(prop::sample::select(PIECES), 0..6).prop_map(|v| format!("k:「始」{}", v.concat())),
        1 => Just("<|[REQUEST_TOOL]|>".to_string()),
        1 => Just("<|[END_TOOL]|>".to_string()),
        1 => Just("# comment <|[END_TOOL]|>".to_string()),
        1 => Just("stray words".to_string()),
        1 => Just("「末」".to_string()),
        // Lines that close a value which crossed pair lines (rule 6).
        1 => Just("tail words「末」".to_string()),
        1 => Just("more「末」, b_1:「始」y「末」".to_string()),
        1 => Just("  <|[END_TOOL]|> tail".to_string()),
        1 => Just(String::new()),
    ];
    (
        prop::collection::vec(line, 0..14),
        prop::sample::select(&["\n", "\r\n", "\r"][..]),
    )
        .prop_map(|(lines, nl)| lines.join(nl))
}

fn check(text: &str) -> Result<(), TestCaseError> {
    let reference = reference_blocks(text).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let scanned = scanned_blocks(text);
    prop_assert_eq!(&scanned, &reference, "text: {:?}", text);
    for format in [Format::Vcp, Format::Auto] {
        let reference =
            reference_blocks_in(text, format).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let scanned = scanned_blocks_in(text, format);
        prop_assert_eq!(
            &scanned,
            &reference,
            "format {:?}, text: {:?}",
            format,
            text
        );
    }
    // The whole readers agree too (calls, prose and diagnostics).
    for format in [Format::Tam, Format::Vcp, Format::Auto] {
        let reference =
            parse_reference(text, format).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            &parse(text, format),
            &reference,
            "format {:?}, text: {:?}",
            format,
            text
        );
    }
    Ok(())
}

/// The same lines as `blocky_strategy` in VCP blocks, with VCP's trailing commas and
/// numbered keys.
fn vcp_strategy() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        3 => (prop::sample::select(&["tool_name", "command", "command1", "filePath1", "sha256", "文件", "on_error_2"][..]), prop::collection::vec(prop::sample::select(PIECES), 0..6), prop::sample::select(&["", ",", " , "][..]))
            .prop_map(|(k, v, comma)| format!("{k}:「始」{}「末」{comma}", v.concat())),
        1 => prop::collection::vec(prop::sample::select(PIECES), 0..6).prop_map(|v| format!("k:「始」{}", v.concat())),
        1 => Just("<<<[TOOL_REQUEST]>>>".to_string()),
        1 => Just("<<<[END_TOOL_REQUEST]>>>".to_string()),
        1 => Just("<|[END_TOOL]|>".to_string()),
        1 => Just("<|[REQUEST_TOOL]|>".to_string()),
        1 => Just("stray words".to_string()),
        1 => Just("stray words「末」,".to_string()),
        1 => Just(String::new()),
    ];
    (
        prop::collection::vec(line, 0..14),
        prop::sample::select(&["\n", "\r\n"][..]),
    )
        .prop_map(|(lines, nl)| lines.join(nl))
}

/// Keys made of the characters keys may hold, digits and `_` weighted up.
fn key_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(
            &[
                "a", "Z", "_", "1", "2", "0", "-", ".", "文", "é", "command", "on_error", "common_",
            ][..],
        ),
        1..8,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    // Each case runs pest six times (three formats, blocks and whole readers).
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn scanner_agrees_with_grammar_on_pieces(text in text_strategy()) {
        check(&text)?;
    }

    #[test]
    fn scanner_agrees_with_grammar_on_blocky_text(text in blocky_strategy()) {
        check(&text)?;
    }

    #[test]
    fn scanner_agrees_with_grammar_on_vcp_blocks(text in vcp_strategy()) {
        check(&text)?;
    }

    /// Rule 13's step numbers: the grammar's `key = key_base? ~ step_suffix?` splits every
    /// key exactly as the chain reader does.
    #[test]
    fn grammar_splits_keys_like_the_chain_reader(key in key_strategy()) {
        let (base, digits) = reference_key(&key).expect("every such string is a key");
        match split_step_key(&key) {
            None => {
                prop_assert_eq!(&base, &key);
                prop_assert_eq!(digits, None);
            }
            Some((b, n)) => {
                prop_assert_eq!(&base, b, "key {:?}", key);
                let digits = digits.expect("a step suffix");
                prop_assert_eq!(digits.parse::<u32>().ok(), n, "key {:?}", key);
            }
        }
    }
}

/// The grammar's key kinds, input → kind.
#[test]
fn key_kinds() {
    let cases = [
        ("command", "tool"),
        ("Command", "tool"),
        ("command_3", "tool"),
        ("command12", "tool"),
        ("tool_name", "tool"),
        ("toolName", "tool"),
        ("on_error_2", "on_error"),
        ("onError2", "on_error"),
        ("common_path", "common"),
        ("COMMON_content", "common"),
        ("request_id", "meta"),
        ("comment", "meta"),
        ("content2", "param"),
        ("commander", "param"),
        ("sha256", "param"),
        ("文件", "param"),
    ];
    for (key, kind) in cases {
        assert_eq!(reference_key_kind(key), Some(kind), "key {key}");
    }
    assert_eq!(
        reference_key("content_12"),
        Some(("content".into(), Some("12".into())))
    );
    assert_eq!(
        reference_key("sha256"),
        Some(("sha".into(), Some("256".into())))
    );
    assert_eq!(
        reference_key("12"),
        Some((String::new(), Some("12".into())))
    );
    assert_eq!(reference_key("a1b"), Some(("a1b".into(), None)));
}

/// `tavern parse --reader grammar` and the default reader print the same calls (and the
/// same prose and diagnostics) on every worked case.
#[test]
fn readers_agree_on_every_parse_case() {
    let mut n = 0;
    for file in [
        include_str!("../data/parse_cases.jsonl"),
        include_str!("../data/parse_cases_tavern.jsonl"),
    ] {
        for line in file.lines().filter(|l| !l.trim().is_empty()) {
            let case: serde_json::Value = serde_json::from_str(line).unwrap();
            let input = case["input"].as_str().unwrap();
            let format: Format = case
                .get("format")
                .and_then(|f| f.as_str())
                .unwrap_or("auto")
                .parse()
                .unwrap();
            let fast = parse(input, format);
            let reference = parse_reference(input, format).unwrap();
            assert_eq!(fast, reference, "case {}", case["name"]);
            n += 1;
        }
    }
    assert!(n >= 60, "only {n} cases");
}

/// Fixed inputs for the subtle corners of rule 6, input → the grammar's reading.
#[test]
fn rule6_corners_agree() {
    let cases = [
        "<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\nb:「始」x\n<|[END_TOOL]|>\ny「末」\n<|[END_TOOL]|>",
        "<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\nb:「始」x\n<|[END_TOOL]|>\ny「末」\n<|[REQUEST_TOOL]|>\n<|[END_TOOL]|>",
        "<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\nb:「始」x\n<|[REQUEST_TOOL]|>\nc:「始」y「末」\n<|[END_TOOL]|>",
        "<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\nb:「始」x\n",
        "<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\nb:「始」x\n  ",
        "<|[REQUEST_TOOL]|>\r\ncommand:「始」A「末」\r\nb:「始」x\r\n",
        "<|[REQUEST_TOOL]|> command:「始」A「末」 , b:「始」1「末」<|[END_TOOL]|>",
        "<|[REQUEST_TOOL]|>\n\n# c\n\ncommand:「始」A「末」\n<|[END_TOOL]|>",
        "<|[REQUEST_TOOL]|> # c\ncommand:「始」A「末」\n<|[END_TOOL]|>",
    ];
    for c in cases {
        let r = reference_blocks(c).unwrap();
        // Only the comment on the marker's own line makes the marker prose (rule 9).
        assert_eq!(r.is_empty(), c.contains("|> # c"), "text: {c:?}");
        assert_eq!(scanned_blocks(c), r, "text: {c:?}");
    }
}
