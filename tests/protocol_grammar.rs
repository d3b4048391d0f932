//! Differential test: the production TAM scanner reads exactly what the pest grammar
//! (`grammar/tam.pest`, the formal definition) reads — same blocks, same pairs, same
//! values, same recoveries — on generated inputs built from the protocol's own pieces.

use proptest::prelude::*;
use tavern::protocol::grammar::{reference_blocks, scanned_blocks};

const PIECES: &[&str] = &[
    "<|[REQUEST_TOOL]|>",
    "<|[request_tool]|>",
    "<|[END_TOOL]|>",
    "<|[end_tool]|>",
    "<|[REQUEST_",
    "<<<[TOOL_REQUEST]>>>",
    "command",
    "command1",
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
    let reference = reference_blocks(text).map_err(TestCaseError::fail)?;
    let scanned = scanned_blocks(text);
    prop_assert_eq!(&scanned, &reference, "text: {:?}", text);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn scanner_agrees_with_grammar_on_pieces(text in text_strategy()) {
        check(&text)?;
    }

    #[test]
    fn scanner_agrees_with_grammar_on_blocky_text(text in blocky_strategy()) {
        check(&text)?;
    }
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
