//! Kimi K2: `<|tool_calls_section_begin|>` then per call `<|tool_call_begin|>`
//! `functions.NAME:INDEX` `<|tool_call_argument_begin|>` `{…}` `<|tool_call_end|>`, then
//! `<|tool_calls_section_end|>` (some servers write `tool_call_section`, singular; calls
//! may also stand without their section, and a call's `<|tool_call_end|>` may be missing
//! before the next `<|tool_call_begin|>`: llama.cpp reads both). The
//! id `functions.NAME:INDEX` is the call's id; each call is read on its own, a broken
//! one (its arguments not an object, its id not ending in `:INDEX`, or no
//! `<|tool_call_argument_begin|>` before its `<|tool_call_end|>`) a diagnostic of its own.

use super::text;
use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

const CALL_BEGIN: &[u8] = b"<|tool_call_begin|>";
const ARG_BEGIN: &[u8] = b"<|tool_call_argument_begin|>";
const CALL_END: &[u8] = b"<|tool_call_end|>";
const HINT: &str =
    "Write <|tool_call_begin|>functions.ToolId:0<|tool_call_argument_begin|>{…}<|tool_call_end|>.";
const UNCLOSED: (&str, &str) = (
    "<|tool_calls_section_begin|> has no <|tool_calls_section_end|>; its complete calls were read up to the end of the text",
    "End the calls with <|tool_calls_section_end|>.",
);

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    also: &[
        RegionSyntax::new(
            Open::Exact(b"<|tool_call_section_begin|>"),
            Close::Exact(b"<|tool_call_section_end|>"),
            read,
            "<|tool_call_section_begin|>",
            UNCLOSED,
        ),
        RegionSyntax::new(
            Open::Exact(CALL_BEGIN),
            Close::Exact(CALL_END),
            read_bare,
            "<|tool_call_begin|>",
            (
                "<|tool_call_begin|> has no <|tool_call_end|>; its complete calls were read up to the end of the text",
                "End every call with <|tool_call_end|>.",
            ),
        ),
    ],
    ..FormatEntry::native(
        Format::KimiK2,
        "kimi_k2",
        &["kimi", "kimi_k2_5"],
        Reader::Region(RegionSyntax::new(
            Open::Exact(b"<|tool_calls_section_begin|>"),
            Close::Exact(b"<|tool_calls_section_end|>"),
            read,
            "<|tool_calls_section_begin|>",
            UNCLOSED,
        )),
        super::Lesson::wire(
            |name, args| {
                format!(
                    "<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
                    super::teach::pretty_inline(args)
                )
            },
            "To use tools or skills, write <|tool_calls_section_begin|>, then per call <|tool_call_begin|>functions.tool_name:N (N counts calls from 0), <|tool_call_argument_begin|>, its arguments as a JSON object and <|tool_call_end|>, and close with <|tool_calls_section_end|>. If no action is needed, answer in plain text.",
        ),
        super::Grammar::Native("kimi_k2"),
    )
};

/// The tool named by a call's id `functions.NAME:N` (`functions.` may be missing); none
/// when the id does not end in `:N`, as vLLM and SGLang read it.
pub(crate) fn name_of(id: &str) -> Option<&str> {
    let name = id.strip_prefix("functions.").unwrap_or(id);
    match name.rsplit_once(':') {
        Some((n, i)) if !i.is_empty() && i.bytes().all(|c| c.is_ascii_digit()) => Some(n),
        _ => None,
    }
}

/// The section's reader.
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
    let mut pos = content;
    let mut any = false;
    while let Some(b) = text::find(s, pos, close, CALL_BEGIN) {
        any = true;
        let id0 = b + CALL_BEGIN.len();
        // A call ends at its `<|tool_call_end|>` or, with none before it, where the next
        // `<|tool_call_begin|>` starts (or the section does).
        let call_end = text::find(s, id0, close, CALL_END);
        let next_begin = text::find(s, id0, close, CALL_BEGIN);
        let (limit, next, closed) = match (call_end, next_begin) {
            (Some(e), n) if n.is_none_or(|n| e < n) => (e, e + CALL_END.len(), true),
            (_, Some(n)) => (n, n, true),
            _ => (close, close, !ended),
        };
        // A call's arguments begin before its end: one without is an error of its own,
        // and the calls after it are read.
        let Some(a) = text::find(s, id0, limit, ARG_BEGIN) else {
            diags.push(if closed {
                text::bad(b, "a Kimi call has no <|tool_call_argument_begin|>", HINT)
            } else {
                text::cut(b, text[id0..close].trim(), HINT)
            });
            pos = next;
            continue;
        };
        let id = text[id0..a].trim();
        let args_at = a + ARG_BEGIN.len();
        let Some(name) = name_of(id) else {
            diags.push(text::bad(
                b,
                &format!("the id '{id}' of a Kimi call is not functions.NAME:N"),
                HINT,
            ));
            pos = next;
            continue;
        };
        match lit::json_args(text, args_at, limit) {
            Ok((Some(args), _)) if !name.is_empty() => {
                let mut c = lit::call(name.to_string(), args, Format::KimiK2, span, block);
                c.id = Some(id.to_string());
                out.push(c);
            }
            Ok(_) => diags.push(text::bad(
                b,
                &format!("the arguments of '{name}' are not an object"),
                HINT,
            )),
            Err(e) => diags.push(lit::value_error(
                e,
                b,
                !closed,
                &format!("the call to '{name}'"),
                HINT,
            )),
        }
        pos = next;
    }
    if !any && ended {
        diags.push(text::cut(content, "?", HINT));
    }
}

/// The reader of calls written without their section (`<|tool_call_begin|>` … straight in
/// the answer, as Kimi K2 Thinking does in its reasoning): read as a section holding them.
fn read_bare(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    read(
        text,
        content - CALL_BEGIN.len(),
        close,
        block,
        span,
        diags,
        out,
    );
}
