//! Hostile sizes: 1 MB of nesting in every format and a 10 MB single line. Each must
//! complete (no stack overflow, no quadratic blow-up) with an error or a prose result.
//! No timing assertions: finishing at all is the check.

use tavern::internal::protocol::{parse, Format, Severity, StreamReader};

const MB: usize = 1 << 20;

fn has_error(p: &tavern::internal::protocol::Parsed) -> bool {
    p.diagnostics.iter().any(|d| d.severity == Severity::Error)
}

#[test]
fn nested_xml_elements_in_action() {
    let mut text = String::from("<ACTION>");
    while text.len() < MB {
        text.push_str("<a>");
    }
    text.push_str("</ACTION>");
    let p = parse(&text, Format::Auto);
    assert!(p.calls.is_empty());
    assert!(has_error(&p), "{:?}", p.diagnostics);
    // Balanced but too deep: also an error, not a crash.
    let depth = MB / 8;
    let text = format!(
        "<ACTION>{}{}</ACTION>",
        "<a>".repeat(depth),
        "</a>".repeat(depth)
    );
    let p = parse(&text, Format::Action);
    assert!(p.calls.is_empty() && has_error(&p));
}

#[test]
fn nested_brackets_in_json_and_text() {
    for (open, close) in [("[", "]"), ("{", "}")] {
        let text = format!("{}{}", open.repeat(MB / 2), close.repeat(MB / 2));
        let p = parse(&text, Format::Json);
        assert!(
            p.calls.is_empty() && has_error(&p),
            "{open}: {:?}",
            p.diagnostics
        );
        let p = parse(&text, Format::Auto);
        assert!(p.calls.is_empty(), "{open}");
        assert_eq!(p.response_text.len(), text.len(), "read as prose in auto");
    }
    let text = "[[[[".repeat(MB / 4);
    let p = parse(&text, Format::Tam);
    assert!(p.calls.is_empty() && !has_error(&p));
}

#[test]
fn ten_megabyte_single_lines() {
    let ten = 10 * MB;
    // Prose.
    let prose = "word < and > more ".repeat(ten / 18);
    let p = parse(&prose, Format::Auto);
    assert!(p.calls.is_empty());
    assert_eq!(p.response_text, prose.trim());

    // One value of 10 MB on one line, full of 「末」 that do not close it.
    let body = "x「末」y".repeat(ten / 11);
    let text = format!(
        "<|[REQUEST_TOOL]|>\ncommand:「始」Big「末」\nv:「始」{body}「末」\n<|[END_TOOL]|>"
    );
    let p = parse(&text, Format::Auto);
    assert_eq!(p.calls.len(), 1);
    assert_eq!(p.calls[0].args["v"].as_str().unwrap(), body);

    // Many inline blocks on one 10 MB line (line/column stay incremental).
    let block = "<|[REQUEST_TOOL]|>command:「始」T「末」<|[END_TOOL]|> ";
    let n = ten / block.len();
    let text = block.repeat(n);
    let p = parse(&text, Format::Tam);
    assert_eq!(p.calls.len(), n);
    assert_eq!(p.calls[n - 1].span.line, 1);

    // Start markers that never open a block (rule 9), 10 MB of them.
    let text = "<|[REQUEST_TOOL]|>".repeat(ten / 18);
    let p = parse(&text, Format::Auto);
    assert!(p.calls.is_empty());

    // An unclosed value that runs to the end of a 10 MB line: the output was cut off,
    // so nothing runs (issue 24), and saying so stays linear.
    let text = format!(
        "<|[REQUEST_TOOL]|>\ncommand:「始」T「末」\nv:「始」{}",
        "ab".repeat(ten / 2)
    );
    let p = parse(&text, Format::Tam);
    assert_eq!(p.calls.len(), 0);
    assert!(p
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error && d.message.contains("cut off")));
}

#[test]
fn ten_megabyte_line_streamed_in_small_chunks() {
    let body = "x「末」y>".repeat(MB);
    let text = format!(
        "<|[REQUEST_TOOL]|>\ncommand:「始」Big「末」\nv:「始」{body}「末」\n<|[END_TOOL]|>"
    );
    let mut r = StreamReader::new(Format::Auto);
    let bytes = text.as_bytes();
    let mut yielded = 0;
    for chunk in bytes.chunks(4096 + 3) {
        yielded += r.push_bytes(chunk).len();
    }
    let p = r.finish();
    assert_eq!(yielded, 1);
    assert_eq!(p, parse(&text, Format::Auto));
}

#[test]
fn unclosed_think_and_cdata_at_scale() {
    let text = format!("ok <think>{}", "<think> </thin ".repeat(MB / 15));
    let p = parse(&text, Format::Auto);
    assert_eq!(p.response_text, "ok");
    let text = format!("<ACTION><T><v><![CDATA[{}", "]]".repeat(MB / 2));
    let p = parse(&text, Format::Auto);
    assert!(has_error(&p));
}

/// Rule 6 (issue 35): a value that meets a pair line searches on for a later `「末」`
/// that closes it, then for the block's end marker. 1 MB of unterminated values, each
/// followed by pair lines, must not search the rest of the text once per value.
#[test]
fn unterminated_values_before_pair_lines_at_scale() {
    // No 「末」 on any line that is not a pair line: every search runs to the end.
    let n = MB / 16;
    let mut text = String::from("<|[REQUEST_TOOL]|>\ncommand:「始」T「末」\n");
    for i in 0..n {
        text.push_str(&format!("k{i}:「始」x\n"));
    }
    text.push_str("<|[END_TOOL]|>\n");
    let p = parse(&text, Format::Tam);
    assert_eq!(p.calls.len(), 1);
    assert_eq!(p.calls[0].args.len(), n);
    assert_eq!(p.calls[0].args["k0"].as_str(), Some("x"));
    let mut r = StreamReader::new(Format::Tam);
    for chunk in text.as_bytes().chunks(4093) {
        r.push_bytes(chunk);
    }
    assert_eq!(r.finish(), p);

    // A 「末」 that closes each value, but no end marker after it: every look-ahead
    // runs to the end of the text.
    let mut text = String::from("<|[REQUEST_TOOL]|>\ncommand:「始」T「末」\n");
    for i in 0..MB / 40 {
        text.push_str(&format!("a{i}:「始」x\nb{i}:「始」y「末」\nz「末」\n"));
    }
    let p = parse(&text, Format::Tam);
    assert!(p.calls.is_empty() && has_error(&p), "cut off at the end");
}
