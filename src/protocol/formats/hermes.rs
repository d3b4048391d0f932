//! Hermes / Qwen 2.5–3 / Nous: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, one
//! tag per call; the JSON may be Python-dict-like (single quotes, `True`, `None`) and its
//! keys in any order. A tag the text ends inside still runs when its JSON is complete
//! (only the closing tag is missing); a cut-off JSON is an error and runs nothing. A
//! model that opens the call with its chat template's `<|im_start|>` instead of
//! `<tool_call>` is read too, when the JSON follows the marker directly.
//!
//! At the start of the answer or as the whole content of a fenced block (never from the
//! middle of prose), the other wrappers Hermes-style models write are read too:
//! `<tools>`, `<tool>`, `<response>`, `<json>` or `<xml>` around the same JSON, in any
//! case; and with `--format hermes` (not under `auto`, where the `json` and `llama_json`
//! rows read them), call objects with no tag at all, as the `llama_json` row reads them.

use super::lead::Lead;
use super::lit;
use super::text::find_ci;
use super::{Auto, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Severity, Span};

/// The opening tag (matched case-insensitively, then blanks and `>`).
pub(crate) const OPEN: &[u8] = b"<tool_call";
/// The closing tag.
pub(crate) const CLOSE: &[u8] = b"</tool_call";
/// The chat template's turn marker, which a model sometimes writes instead of
/// `<tool_call>`: read as a call when a JSON value follows it directly (a turn marker
/// is followed by a role name), and ending with that value or with a `</tool_call>` after
/// it.
pub(crate) const IM_START: &[u8] = b"<|im_start|>";
/// How diagnostics name the mistaken opening.
pub(crate) const IM_START_SHOWN_AS: &str = "<|im_start|>";
/// The error for a mistaken opening the text ends inside.
pub(crate) const IM_START_UNCLOSED: (&str, &str) = (
    "the output was cut off inside a call opened with <|im_start|>; it was not executed",
    "Open every call with <tool_call> and end it with </tool_call>, its JSON complete.",
);
/// How diagnostics name it.
pub(crate) const SHOWN_AS: &str = "<tool_call>";
/// The warning for a tag the text ends inside whose JSON is complete.
pub(crate) const UNCLOSED: (&str, &str) = (
    "<tool_call> has no closing </tool_call>; its complete JSON was read up to the end of the text",
    "End every call with </tool_call>.",
);

/// The other tags Hermes-style models wrap their calls in (without `<`, lowercase;
/// `tools` before `tool`), read only at the start of the answer or as a fenced block.
const WRAPS: &[&[u8]] = &[b"tools", b"tool", b"response", b"json", b"xml"];

/// Read by `--format hermes` only (`formats::leading_for`): call objects with no tag at
/// the start of `text[from..to]`, as the `llama_json` row reads them.
pub(crate) fn untagged(text: &str, from: usize, to: usize) -> Lead {
    super::llama_json::lead_as(text, from, to, Format::Hermes)
}

/// The format table's leading reader: one of [`WRAPS`] around JSON calls, its closing
/// tag present, at the start of `text[from..to]`.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    let s = text.as_bytes();
    let mut p = from;
    while p < to && s[p].is_ascii_whitespace() {
        p += 1;
    }
    if s.get(p) != Some(&b'<') {
        return Lead::No;
    }
    let Some(wrap) = WRAPS.iter().find(|w| {
        let e = p + 1 + w.len();
        e <= to && s[p + 1..e].eq_ignore_ascii_case(w) && {
            let mut q = e;
            while q < to && matches!(s[q], b' ' | b'\t') {
                q += 1;
            }
            s.get(q) == Some(&b'>')
        }
    }) else {
        return Lead::No;
    };
    // The content starts after the `>` found above.
    let content = p
        + 1
        + wrap.len()
        + s[p + 1 + wrap.len()..to]
            .iter()
            .position(|&b| b == b'>')
            .unwrap_or(0)
        + 1;
    // The closing tag: `</`, the name, blanks, `>`.
    let mut k = content;
    let (close, end) = loop {
        let Some(c) = find_ci(s, k, to, b"</") else {
            return Lead::No;
        };
        let e = c + 2 + wrap.len();
        if e <= to && s[c + 2..e].eq_ignore_ascii_case(wrap) {
            let mut q = e;
            while q < to && matches!(s[q], b' ' | b'\t') {
                q += 1;
            }
            if s.get(q) == Some(&b'>') {
                break (c, q + 1);
            }
        }
        k = c + 2;
    };
    let span = Span {
        start: p,
        end,
        line: 0,
        column: 0,
    };
    let mut diags = Vec::new();
    let mut calls = Vec::new();
    lit::read_json_calls(
        text,
        content,
        close,
        None,
        Format::Hermes,
        0,
        span,
        &mut diags,
        &mut calls,
    );
    // Anything but calls inside (prose, a JSON value that is no call) stays prose.
    if calls.is_empty() || diags.iter().any(|d| d.severity == Severity::Error) {
        return Lead::No;
    }
    Lead::Calls {
        calls,
        end,
        prose: Vec::new(),
        diags,
    }
}

/// Where a tag's content starts once the tags that were only mentioned are passed: a
/// `<tool_call>` followed by nothing, or by text with a blank and no `{`, `[` or `<` in it,
/// and then another `<tool_call>` was named in prose (`use <tool_call> here.\n<tool_call>…`); the call
/// is in the last one.
fn past_mentions(text: &str, mut content: usize, close: usize) -> usize {
    let s = text.as_bytes();
    while let Some(i) = s
        .get(content..close)
        .and_then(|c| memchr::memchr3(b'{', b'[', b'<', c))
    {
        let q = content + i;
        // Text with no blank in it (`<tool_call>get_time<tool_call>…`) is no mention.
        let words = &s[content..q];
        if s[q] != b'<'
            || (!words.is_empty() && !words.iter().any(u8::is_ascii_whitespace))
            || !s[q..close]
                .get(..OPEN.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(OPEN))
        {
            break;
        }
        let mut e = q + OPEN.len();
        while e < close && matches!(s[e], b' ' | b'\t') {
            e += 1;
        }
        if s.get(e) != Some(&b'>') {
            break;
        }
        content = e + 1;
    }
    content
}

/// The format table's reader.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let content = past_mentions(text, content, close);
    // The tag is shared: what is inside says whose call it is.
    let inner = text.get(content..close).unwrap_or("").trim_start();
    if super::text::starts_with_function(inner) {
        return super::qwen3_coder::read(text, content, close, block, span, diags, out);
    }
    if super::glm45::is_glm45(inner) {
        return super::glm45::read(text, content, close, block, span, diags, out);
    }
    lit::read_json_calls(
        text,
        content,
        close,
        None,
        Format::Hermes,
        block,
        span,
        diags,
        out,
    );
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Hermes,
    name: "hermes",
    aliases: &["qwen", "tool_call", "granite4", "ernie", "reka"],
    auto: Auto::InText,
    reader: Reader::Region(RegionSyntax {
        open: Open::Tag(OPEN),
        close: Close::Tag(CLOSE),
        opaque: &[],
        read,
        shown_as: SHOWN_AS,
        unclosed: UNCLOSED,
        reads_unclosed: true,
        only_first: None,
        prose: None,
    }),
    exact_keys: false,
    leading: Some(lead),
    names_as_written: true,
    also: &[RegionSyntax {
        open: Open::Exact(IM_START),
        close: Close::Value {
            sep: None,
            name_then: None,
            call_id: None,
            trailer: Some(CLOSE),
        },
        opaque: &[],
        read,
        shown_as: IM_START_SHOWN_AS,
        unclosed: IM_START_UNCLOSED,
        reads_unclosed: false,
        only_first: None,
        prose: None,
    }],
    lesson: super::Lesson::wire(
        |name, args| format!("<tool_call>\n{}\n</tool_call>", super::teach::json_call(name, args)),
        "To use a tool or skill, write the call as a JSON object with \"name\" and \"arguments\" inside <tool_call></tool_call> tags, one pair of tags per call. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("hermes"),
};
