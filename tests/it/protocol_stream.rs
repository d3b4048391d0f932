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

/// Streams `text` in `size`-byte chunks: each yield that holds calls (the bytes read when
/// it came, and its tools), and the reader.
fn yields(text: &str, format: Format, size: usize) -> (Vec<(usize, Vec<String>)>, StreamReader) {
    let mut r = StreamReader::new(format);
    let mut got = Vec::new();
    let mut at = 0;
    for chunk in text.as_bytes().chunks(size) {
        at += chunk.len();
        let calls = r.push_bytes(chunk);
        if !calls.is_empty() {
            got.push((at, calls.into_iter().map(|c| c.tool).collect()));
        }
    }
    (got, r)
}

/// What [`yields`] should give: the calls closed at each of `ends`, each on the chunk
/// holding its closing tag's last byte.
fn yields_wanted(
    text: &str,
    ends: &[usize],
    tools: &[&[&str]],
    size: usize,
) -> Vec<(usize, Vec<String>)> {
    ends.iter()
        .zip(tools)
        .map(|(e, t)| {
            let at = e.div_ceil(size) * size;
            (
                at.min(text.len()),
                t.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect()
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

#[test]
fn native_tags_yield_their_calls_as_they_close() {
    let t = "Checking.\n<tool_call>{\"name\": \"A\", \"arguments\": {}}</tool_call>\n<tool_call>{'name': 'B', 'arguments': {'x': True}}</tool_call>";
    let ends = [
        (end_of(t, "</tool_call>", 0), &["A"][..]),
        (end_of(t, "</tool_call>", 1), &["B"][..]),
    ];
    check(t, Format::Auto, &ends);
    check(t, Format::Hermes, &ends);

    let t = "<function=A>{\"x\": 1}</function> and <function=B>{}</function>";
    let ends = [
        (end_of(t, "</function>", 0), &["A"][..]),
        (end_of(t, "</function>", 1), &["B"][..]),
    ];
    check(t, Format::Auto, &ends);
    check(t, Format::Functionary, &ends);

    let ds = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>A\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜> ok";
    let ends = [(end_of(ds, "<｜tool▁calls▁end｜>", 0), &["A"][..])];
    check(ds, Format::Auto, &ends);
    check(ds, Format::DeepSeek, &ends);
}

#[test]
fn native_values_yield_their_calls_at_their_last_bracket() {
    // Granite and Mistral write no closing tag: the call is complete with its JSON.
    let t = "<function_call> {\"name\": \"A\", \"arguments\": {\"s\": \"}\"}} then <function_call> {\"name\": \"B\", \"arguments\": {}} end";
    let ends = [
        (end_of(t, "}}", 0), &["A"][..]),
        (end_of(t, "{}}", 0), &["B"][..]),
    ];
    check(t, Format::Auto, &ends);
    check(t, Format::Granite, &ends);

    let t =
        "[TOOL_CALLS] [{\"name\": \"A\", \"arguments\": {}}, {\"name\": \"B\", \"arguments\": {}}]";
    let ends = [(t.len(), &["A", "B"][..])];
    check(t, Format::Auto, &ends);
    check(t, Format::Mistral, &ends);

    let t = "[TOOL_CALLS]A[ARGS]{\"x\": [1]}[TOOL_CALLS]B[ARGS]{}";
    let ends = [(end_of(t, "]}", 0), &["A"][..]), (t.len(), &["B"][..])];
    check(t, Format::Auto, &ends);
    check(t, Format::Mistral, &ends);
}

#[test]
fn cut_off_native_calls_never_come_out() {
    for (t, f) in [
        (
            "<tool_call>{\"name\": \"A\", \"arguments\": {\"x\": \"",
            Format::Hermes,
        ),
        (
            "<function_call> {\"name\": \"A\", \"arguments\": {\"x\": 1",
            Format::Granite,
        ),
        ("[TOOL_CALLS]A[ARGS]{\"x\": [1, ", Format::Mistral),
        ("<function=A>{\"x\": ", Format::Functionary),
        ("[A(x=1), B(y=", Format::Pythonic),
        (
            "<|[REQUEST_TOOL]|>\ncommand:「始」A「末」\nx:「始」half",
            Format::Tam,
        ),
    ] {
        check(t, f, &[]);
        check(t, Format::Auto, &[]);
        let p = parse(t, f);
        assert!(p.calls.is_empty(), "{t}: {p:?}");
        assert!(
            p.diagnostics.iter().any(|d| d.message.contains("cut off")),
            "{t}: {p:?}"
        );
    }
}

#[test]
fn leading_shapes_come_with_finish() {
    // A pythonic list or a GLM name line is a call only as the start or the whole of
    // the answer: known when the answer ends.
    for (t, f, n) in [
        ("[A(x=1), B(y='2')]\nDone.", Format::Pythonic, 2),
        ("lamp_on\n{\"room\": \"hall\"}", Format::Glm, 1),
        (">>>A\n{}\n>>>B\n{}", Format::Functionary, 2),
    ] {
        check(t, f, &[]);
        check(t, Format::Auto, &[]);
        assert_eq!(parse(t, f).calls.len(), n, "{t}");
        assert_eq!(parse(t, Format::Auto).calls.len(), n, "{t}");
    }
}

#[test]
fn exact_region_tags_split_across_byte_chunks_yield_at_their_last_byte() {
    // A region closed by an exact tag ending in `>` runs only when a chunk's `>` ends
    // that tag; the tag here is cut inside its multi-byte characters, and the other
    // markers' `>` (which end in the same `｜>`) yield nothing.
    let ds = "Sure.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>A\n```json\n{\"s\": \"a>b\"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>B\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜> then <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>C\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let kimi = "<|tool_calls_section_begin|><|tool_call_begin|>functions.A:0<|tool_call_argument_begin|>{\"x\": \">\"}<|tool_call_end|><|tool_calls_section_end|> and <|tool_calls_section_begin|><|tool_call_begin|>functions.B:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
    for (text, format, close, want) in [
        (
            ds,
            Format::DeepSeek,
            "<｜tool▁calls▁end｜>",
            [&["A", "B"][..], &["C"][..]],
        ),
        (
            kimi,
            Format::KimiK2,
            "<|tool_calls_section_end|>",
            [&["A"][..], &["B"][..]],
        ),
    ] {
        let ends = [end_of(text, close, 0), end_of(text, close, 1)];
        for size in 1..=7 {
            for format in [format, Format::Auto] {
                let (got, r) = yields(text, format, size);
                let want = yields_wanted(text, &ends, &want, size);
                assert_eq!(got, want, "{format}, {size}-byte chunks: {text:?}");
                assert_eq!(r.finish(), parse(text, format));
            }
        }
    }
}

#[test]
fn closing_tags_in_any_case_with_blanks_yield_at_their_last_byte() {
    // A region a tag closes (`</tool_call>`, any case, blanks before its `>`) runs only
    // when a chunk's `>` ends that tag; the argument tags' `>` inside it yield nothing.
    let text = "Checking.\n<tool_call>lamp_light\n<arg_key>wick</arg_key>\n<arg_value>a>b</arg_value>\n</TOOL_CALL \t> and <tool_call>\n{\"name\": \"door_open\", \"arguments\": {\"s\": \"</tool_call\"}}\n</tool_call>";
    let ends = [
        end_of(text, "</TOOL_CALL \t>", 0),
        end_of(text, "</tool_call>", 0),
    ];
    let want_tools: [&[&str]; 2] = [&["lamp_light"], &["door_open"]];
    for size in 1..=7 {
        for format in [Format::Glm45, Format::Auto] {
            let (got, r) = yields(text, format, size);
            let want = yields_wanted(text, &ends, &want_tools, size);
            if format == Format::Glm45 {
                // `--format glm45` reads the GLM call; the Hermes JSON one is not its.
                let glm: Vec<_> = got
                    .iter()
                    .filter(|(_, t)| t[0] == "lamp_light")
                    .cloned()
                    .collect();
                assert_eq!(glm, want[..1], "{format}, {size}-byte chunks");
            } else {
                assert_eq!(got, want, "{format}, {size}-byte chunks");
            }
            assert_eq!(r.finish(), parse(text, format));
        }
    }
}
