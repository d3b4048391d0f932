//! Streaming: each call comes out of `push` as soon as its block closes — on the very
//! chunk that completes the closing marker — and not before. Cases are
//! `(text, [(byte offset where the closing marker completes, tools yielded there)])`.

use tavern::internal::protocol::{parse, Format, StreamReader};

fn check(text: &str, format: Format, expect: &[(usize, &[&str])]) {
    let mut r = StreamReader::new(format);
    let mut got: Vec<(usize, Vec<String>)> = Vec::new();
    // Feed one char at a time and note where calls come out.
    let mut at = 0;
    for ch in text.chars() {
        let mut buf = [0u8; 4];
        at += ch.len_utf8();
        let calls = r.push(ch.encode_utf8(&mut buf));
        if !calls.is_empty() {
            got.push((at, calls.into_iter().map(|c| c.tool).collect()));
        }
    }
    let want: Vec<(usize, Vec<String>)> = expect
        .iter()
        .map(|(o, t)| (*o, t.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(got, want, "text: {text:?}");
    assert_eq!(r.finish(), parse(text, format));
}

fn end_of(text: &str, needle: &str, nth: usize) -> usize {
    let mut from = 0;
    let mut pos = 0;
    for _ in 0..=nth {
        pos = from + text[from..].find(needle).expect("needle in text");
        from = pos + needle.len();
    }
    pos + needle.len()
}

#[test]
fn tam_call_yielded_at_its_end_marker() {
    let t = "Sure.\n<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\n<|[END_TOOL]|>\nthen\n<|[REQUEST_TOOL]|>\ncommand:「始」B「末」\n<|[END_TOOL]|> bye";
    check(
        t,
        Format::Auto,
        &[
            (end_of(t, "<|[END_TOOL]|>", 0), &["A"]),
            (end_of(t, "<|[END_TOOL]|>", 1), &["B"]),
        ],
    );
}

#[test]
fn chain_steps_come_together() {
    let t =
        "<|[REQUEST_TOOL]|>\ncommand2:「始」Two「末」\ncommand1:「始」One「末」\n<|[END_TOOL]|>";
    check(t, Format::Tam, &[(t.len(), &["One", "Two"])]);
}

#[test]
fn unterminated_block_yielded_at_next_start_marker() {
    let t = "<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\n<|[REQUEST_TOOL]|>\ncommand:「始」B「末」\n<|[END_TOOL]|>";
    check(
        t,
        Format::Tam,
        &[
            (end_of(t, "<|[REQUEST_TOOL]|>", 1), &["A"]),
            (t.len(), &["B"]),
        ],
    );
}

#[test]
fn action_and_vcp_yielded_at_their_closing_tags() {
    let t = "<ACTION><X><a>1</a></X><Y/></ACTION> and <<<[TOOL_REQUEST]>>>\ntool_name:「始」V「末」\n<<<[END_TOOL_REQUEST]>>> done";
    check(
        t,
        Format::Auto,
        &[
            (end_of(t, "</ACTION>", 0), &["X", "Y"]),
            (end_of(t, "<<<[END_TOOL_REQUEST]>>>", 0), &["V"]),
        ],
    );
}

#[test]
fn end_marker_inside_a_value_waits_for_the_real_end() {
    // Rule 6: the first end-marker line is content because another end marker follows.
    let t = "<|[REQUEST_TOOL]|>\ncommand:「始」Doc「末」\nbody:「始」a\n<|[END_TOOL]|>\nb「末」\n<|[END_TOOL]|>";
    check(t, Format::Tam, &[(t.len(), &["Doc"])]);
}

#[test]
fn json_is_read_at_finish() {
    let t = r#"{"name": "system:echo", "arguments": {"text": "<hi>"}}"#;
    check(t, Format::Auto, &[]);
    let r = parse(t, Format::Auto);
    assert_eq!(r.calls[0].tool, "system:echo");
}
