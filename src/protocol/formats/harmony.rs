//! gpt-oss (OpenAI harmony): messages `<|channel|>CHANNEL [to=functions.NAME]
//! [<|constrain|>json]<|message|>BODY` ended by `<|call|>`, `<|end|>` or `<|return|>`
//! (the recipient may also stand before the channel: `<|start|>assistant
//! to=functions.NAME<|channel|>commentary json<|message|>…`, or, the prompt having written
//! `<|start|>assistant`, ` to=functions.NAME<|channel|>…`). A message with a recipient
//! is a call whose arguments are the JSON body (an empty body, its end token written, is
//! a call with no arguments); in the `analysis` channel (reasoning: never run, not
//! response text) only a recipient `functions.NAME` makes one, as vLLM, SGLang and
//! llama.cpp read it; the `final` channel's body is the response text; other bodies are
//! dropped.

use super::text;
use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

const ENDS: &[&[u8]] = &[b"<|call|>", b"<|end|>", b"<|return|>"];
const MESSAGE: &[u8] = b"<|message|>";
const HINT: &str =
    "Write <|channel|>commentary to=functions.ToolId <|constrain|>json<|message|>{…}<|call|>.";
const UNCLOSED: (&str, &str) = (
    "a harmony message has no <|call|>; its complete call was read up to the end of the text",
    "End every call with <|call|>.",
);

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    also: &[RegionSyntax {
        prose: Some(final_text),
        ..RegionSyntax::new(
            Open::Exact(b"<|start|>"),
            Close::AnyExact(ENDS),
            read,
            "<|start|>",
            UNCLOSED,
        )
    }],
    ..FormatEntry::native(
        Format::Harmony,
        "harmony",
        &["gpt_oss", "openai_harmony"],
        Reader::Region(RegionSyntax {
            prose: Some(final_text),
            ..RegionSyntax::new(
                Open::Exact(b"<|channel|>"),
                Close::AnyExact(ENDS),
                read,
                "<|channel|>",
                UNCLOSED,
            )
        }),
        super::Lesson::wire(
            |name, args| {
                format!(
                    "<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{}<|call|>",
                    super::teach::pretty_inline(args)
                )
            },
            "To use a tool or skill, write a commentary message addressed to it: <|channel|>commentary to=functions.tool_name <|constrain|>json<|message|> followed by its arguments as a JSON object and <|call|>. Write your answer to the user in the final channel. If no action is needed, answer in plain text.",
        ),
        super::Grammar::Native("harmony"),
    )
};

/// A message's header (before `<|message|>`): its channel and recipient.
fn header(h: &str) -> (&str, Option<&str>) {
    let channel = match h.find("<|channel|>") {
        Some(i) => &h[i + "<|channel|>".len()..],
        None => h,
    };
    let channel = channel
        .split(|c: char| c.is_whitespace() || c == '<')
        .find(|w| !w.is_empty())
        .unwrap_or("");
    let to = h.find("to=").map(|i| {
        let r = &h[i + 3..];
        r.split(|c: char| c.is_whitespace() || c == '<')
            .next()
            .unwrap_or("")
    });
    (channel, to.filter(|t| !t.is_empty()))
}

/// The recipient written before a `<|channel|>` at `at` when the answer's first
/// `<|start|>assistant` was the prompt's (` to=functions.NAME<|channel|>…`): the text back
/// to the previous token (or the text's start) is `to=NAME`, `assistant` allowed before it.
pub(crate) fn role_recipient(text: &str, at: usize) -> Option<&str> {
    let before = &text[..at];
    let from = before.rfind("|>").map_or(0, |i| i + 2);
    let seg = before[from..].trim();
    let seg = seg.strip_prefix("assistant").map_or(seg, str::trim_start);
    let to = seg.strip_prefix("to=")?;
    (!to.is_empty() && !to.contains(char::is_whitespace)).then_some(to)
}

/// Where the `final` channel's text starts in a message.
fn final_text(text: &str, content: usize, end: usize) -> Option<usize> {
    let s = text.as_bytes();
    let m = text::find(s, content, end, MESSAGE)?;
    let (channel, to) = header(&text[content..m]);
    (channel == "final" && to.is_none()).then_some(m + MESSAGE.len())
}

/// One message's reader.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let s = text.as_bytes();
    let ended = close >= text.len();
    let Some(m) = text::find(s, content, close, MESSAGE) else {
        if ended && text[content..close].contains("to=") {
            diags.push(text::cut(span.start, "?", HINT));
        }
        return;
    };
    let (channel, to) = header(&text[content..m]);
    let opened_by_channel = text[span.start..content].starts_with("<|channel|>");
    let to = to.or_else(|| {
        opened_by_channel
            .then(|| role_recipient(text, span.start))
            .flatten()
    });
    let Some(to) = to else { return };
    if channel == "analysis" && !to.starts_with("functions.") {
        return;
    }
    let name = to.strip_prefix("functions.").unwrap_or(to);
    if !ended && text[m + MESSAGE.len()..close].trim().is_empty() {
        // `<|message|><|call|>`: a call with no arguments.
        out.push(lit::call(
            name.to_string(),
            serde_json::Map::new(),
            Format::Harmony,
            span,
            block,
        ));
        return;
    }
    match lit::json_args(text, m + MESSAGE.len(), close) {
        Ok((Some(args), _)) => out.push(lit::call(
            name.to_string(),
            args,
            Format::Harmony,
            span,
            block,
        )),
        Ok(_) => diags.push(text::bad(
            m,
            &format!("the arguments of '{name}' are not a JSON object"),
            HINT,
        )),
        Err(e) => diags.push(lit::value_error(
            e,
            span.start,
            ended,
            &format!("the call to '{name}'"),
            HINT,
        )),
    }
}
