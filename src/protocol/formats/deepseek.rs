//! DeepSeek V3: `<｜tool▁calls▁begin｜>` then per call `<｜tool▁call▁begin｜>function<｜tool▁sep｜>name`,
//! a ```` ```json ```` fence with the arguments and `<｜tool▁call▁end｜>`, then
//! `<｜tool▁calls▁end｜>` (the full-width bars and `▁` are literal). The later form
//! `<｜tool▁call▁begin｜>name<｜tool▁sep｜>{…}<｜tool▁call▁end｜>` is read too, and so is
//! the short opener `<｜tool▁calls｜>` with the first call's begin marker left out
//! (`<｜tool▁calls｜>function<｜tool▁sep｜>name…`, as llama.cpp reads DeepSeek R1).
//!
//! DeepSeek V3.2 writes its calls as DSML instead: `<｜DSML｜function_calls>`, per call
//! `<｜DSML｜invoke name="NAME">` with `<｜DSML｜parameter name="KEY" string="true">value
//! </｜DSML｜parameter>` lines and `</｜DSML｜invoke>`, then `</｜DSML｜function_calls>`:
//! MiniMax-M2's shape with a prefix, its values text (`text.rs`) as MiniMax-M2's are; an
//! invoke may hold one JSON object instead of parameter tags.

use memchr::memmem;

use super::lit::{self, Lit, LitErr};
use super::{Auto, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The opening marker, matched exactly.
pub(crate) const OPEN: &[u8] = "<｜tool▁calls▁begin｜>".as_bytes();
/// The closing marker.
pub(crate) const CLOSE: &[u8] = "<｜tool▁calls▁end｜>".as_bytes();
const CALL_BEGIN: &[u8] = "<｜tool▁call▁begin｜>".as_bytes();
const SEP: &[u8] = "<｜tool▁sep｜>".as_bytes();
const CALL_END: &[u8] = "<｜tool▁call▁end｜>".as_bytes();
/// How diagnostics name it.
pub(crate) const SHOWN_AS: &str = "<｜tool▁calls▁begin｜>";
/// The warning for calls the text ends inside whose JSON is complete.
pub(crate) const UNCLOSED: (&str, &str) = (
    "<｜tool▁calls▁begin｜> has no <｜tool▁calls▁end｜>; its complete calls were read up to the end of the text",
    "End the calls with <｜tool▁calls▁end｜>.",
);
const HINT: &str = "Write each call as <｜tool▁call▁begin｜>function<｜tool▁sep｜>ToolId, a ```json fence with the arguments, and <｜tool▁call▁end｜>.";

/// DeepSeek V3.2's opening marker, matched exactly.
pub(crate) const DSML_OPEN: &[u8] = "<｜DSML｜function_calls>".as_bytes();
/// Its closing marker.
pub(crate) const DSML_CLOSE: &[u8] = "</｜DSML｜function_calls>".as_bytes();

/// A DSML invoke's opening, up to its attributes.
const DSML_INVOKE: &[u8] = "<｜DSML｜invoke".as_bytes();
/// Its closing tag.
const DSML_INVOKE_END: &[u8] = "</｜DSML｜invoke".as_bytes();

/// The reader of DeepSeek V3.2's DSML calls: each invoke holds `<｜DSML｜parameter>` tags
/// (read as MiniMax-M2's are) or, as some servers' templates have it, one JSON object.
pub(crate) fn read_dsml(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let s = text.as_bytes();
    let invoke = memmem::Finder::new(DSML_INVOKE);
    let mut at = invoke.find(&s[content..close]).map(|i| content + i);
    if at.is_none() {
        // No invoke: the shared reader says so.
        at = Some(content);
    }
    while let Some(p) = at {
        let next = invoke
            .find(&s[(p + 1).min(close)..close])
            .map_or(close, |i| p + 1 + i);
        if !json_invoke(text, p, next, block, span, out) {
            super::text::read_invokes(
                text,
                p,
                next,
                "｜DSML｜",
                Format::DeepSeek,
                block,
                span,
                diags,
                out,
            );
        }
        at = (next < close).then_some(next);
    }
}

/// An invoke at `text[at..to]` holding one JSON object and its closing tag: its call
/// pushed onto `out`, true; false when it is not that shape.
fn json_invoke(
    text: &str,
    at: usize,
    to: usize,
    block: usize,
    span: Span,
    out: &mut Vec<Call>,
) -> bool {
    let s = text.as_bytes();
    if !s[at..to].starts_with(DSML_INVOKE) {
        return false;
    }
    let head = at + DSML_INVOKE.len();
    let Some(gt) = memchr::memchr(b'>', &s[head..to]).map(|i| head + i) else {
        return false;
    };
    let Some(name) = text[head..gt]
        .trim()
        .strip_prefix("name")
        .map(|r| r.trim_start())
        .and_then(|r| r.strip_prefix('='))
        .map(|r| r.trim_start())
        .and_then(|r| r.strip_prefix('"'))
        .and_then(|r| r.split('"').next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
    else {
        return false;
    };
    let mut l = Lit::new(s, gt + 1, to);
    l.ws();
    if l.peek() != Some(b'{') {
        return false;
    }
    let Ok((Some(args), e)) = lit::json_args(text, l.pos, to) else {
        return false;
    };
    let mut r = Lit::new(s, e, to);
    r.ws();
    if !s[r.pos..to].starts_with(DSML_INVOKE_END) {
        return false;
    }
    out.push(lit::call(
        lit::unescape_name(name),
        args,
        Format::DeepSeek,
        span,
        block,
    ));
    true
}

/// The short opening marker llama.cpp accepts for DeepSeek R1, the first call's
/// `<｜tool▁call▁begin｜>` left out after it.
pub(crate) const SHORT_OPEN: &[u8] = "<｜tool▁calls｜>".as_bytes();

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
    read_calls(text, content, close, block, span, diags, out, false);
}

/// The reader after [`SHORT_OPEN`]: its first call starts right after the marker.
pub(crate) fn read_short(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    read_calls(text, content, close, block, span, diags, out, true);
}

/// The calls in `text[content..close]`; `implicit`: the first one's
/// `<｜tool▁call▁begin｜>` is left out.
#[allow(clippy::too_many_arguments)]
fn read_calls(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
    mut implicit: bool,
) {
    let s = text.as_bytes();
    let ended = close >= text.len();
    let start = out.len();
    let mut pos = content;
    // Built once per region: building a finder costs more than a call's search.
    let (begin, sep, end) = (
        memmem::Finder::new(CALL_BEGIN),
        memmem::Finder::new(SEP),
        memmem::Finder::new(CALL_END),
    );
    loop {
        let (at, head) = if implicit {
            implicit = false;
            (content, content)
        } else {
            match begin.find(&s[pos..close]) {
                Some(i) => (pos + i, pos + i + CALL_BEGIN.len()),
                None => break,
            }
        };
        let Some(j) = sep.find(&s[head..close]) else {
            diags.push(lit::value_error(
                LitErr::Cut,
                at,
                ended,
                "a DeepSeek call",
                HINT,
            ));
            out.truncate(start);
            return;
        };
        let kind = text[head..head + j].trim();
        let mut l = Lit::new(s, head + j + SEP.len(), close);
        let name = if kind == "function" {
            l.blanks();
            let start = l.pos;
            while l.peek().is_some_and(|b| b != b'\n' && b != b'\r') {
                l.pos += 1;
            }
            lit::unescape_name(text[start..l.pos].trim())
        } else {
            lit::unescape_name(kind)
        };
        l.ws();
        let fenced = l.eat(b"```");
        if fenced {
            while l.peek().is_some_and(|b| b != b'\n' && b != b'\r') {
                l.pos += 1;
            }
        }
        // Only built for a diagnostic.
        let what = |name: &str| format!("the call to '{name}'");
        match lit::json_args(text, l.pos, close) {
            Ok((Some(args), e)) => {
                out.push(lit::call(name, args, Format::DeepSeek, span, block));
                l.pos = e;
            }
            Ok(_) => {
                diags.push(RawDiag::error(
                    at,
                    format!(
                        "the arguments of {} are not an object; it was not executed",
                        what(&name)
                    ),
                    HINT.into(),
                ));
                out.truncate(start);
                return;
            }
            Err(e) => {
                diags.push(lit::value_error(e, at, ended, &what(&name), HINT));
                out.truncate(start);
                return;
            }
        }
        if fenced {
            l.ws();
            if !l.eat(b"```") && ended && l.at_end() {
                // The call was just pushed: its name is the last one's.
                let name = out.last().map_or("", |c| c.tool.as_str());
                diags.push(lit::value_error(LitErr::Cut, at, true, &what(name), HINT));
                out.truncate(start);
                return;
            }
        }
        pos = match end.find(&s[l.pos..close]) {
            Some(k) => l.pos + k + CALL_END.len(),
            None => l.pos,
        };
    }
    if out.len() == start {
        diags.push(lit::value_error(
            if ended {
                LitErr::Cut
            } else {
                LitErr::Bad(content, "no call in it".into())
            },
            span.start,
            ended,
            "a DeepSeek call",
            HINT,
        ));
    }
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::DeepSeek,
    name: "deepseek",
    aliases: &[],
    auto: Auto::InText,
    reader: Reader::Region(RegionSyntax {
        open: Open::Exact(OPEN),
        close: Close::Exact(CLOSE),
        opaque: &[],
        read,
        shown_as: SHOWN_AS,
        unclosed: UNCLOSED,
        reads_unclosed: true,
        only_first: None,
        prose: None,
    }),
    exact_keys: false,
    leading: None,
    names_as_written: true,
    also: &[
        RegionSyntax::new(
            Open::Exact(SHORT_OPEN),
            Close::Exact(CLOSE),
            read_short,
            "<｜tool▁calls｜>",
            (
                "<｜tool▁calls｜> has no <｜tool▁calls▁end｜>; its complete calls were read up to the end of the text",
                "End the calls with <｜tool▁calls▁end｜>.",
            ),
        ),
        RegionSyntax::new(
        Open::Exact(DSML_OPEN),
        Close::Exact(DSML_CLOSE),
        read_dsml,
        "<｜DSML｜function_calls>",
        (
            "<｜DSML｜function_calls> has no </｜DSML｜function_calls>; its complete calls were read up to the end of the text",
            "End the calls with </｜DSML｜function_calls>.",
        ),
    )
    ],
    lesson: super::Lesson::wire(
        |name, args| {
            format!(
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                super::teach::pretty_inline(args)
            )
        },
        "To use tools or skills, write <｜tool▁calls▁begin｜>, then per call <｜tool▁call▁begin｜>function<｜tool▁sep｜> with the tool name, its arguments as JSON in a ```json fence and <｜tool▁call▁end｜>, and close with <｜tool▁calls▁end｜>. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("deepseek"),
};
