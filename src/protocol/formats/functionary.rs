//! functionary: `>>>name\n{…}` (v2/v3; `>>>all\n…` is the answer's text, up to the next
//! `>>>`; v3.2's answer may start with its `all` line, the prompt having ended in `>>>`) and
//! `<function=name>{…}</function>` (v3.1, Llama-style). The tag form is a region `auto`
//! finds anywhere; the `>>>` form is taken at the start of the answer (or as a whole
//! fenced block).

use super::lead::Lead;
use super::lit::{self, Lit, LitErr};
use super::{Auto, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The opening tag up to the name (matched case-insensitively).
pub(crate) const OPEN: &[u8] = b"<function=";
/// The closing tag.
pub(crate) const CLOSE: &[u8] = b"</function";
/// How diagnostics name it.
pub(crate) const SHOWN_AS: &str = "<function=…>";
/// The warning for a tag the text ends inside whose JSON is complete.
pub(crate) const UNCLOSED: (&str, &str) = (
    "<function=…> has no closing </function>; its complete JSON was read up to the end of the text",
    "End every call with </function>.",
);
const HINT: &str = "Write <function=ToolId>{\"param\": …}</function>.";

/// The format table's reader of `<function=name>…</function>`.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let name_at = span.start + OPEN.len();
    let name = lit::unescape_name(text.get(name_at..content.saturating_sub(1)).unwrap_or(""));
    let ended = close >= text.len();
    // Only built for a diagnostic.
    let what = |name: &str| format!("the call to '{name}'");
    let mut l = Lit::new(text.as_bytes(), content, close);
    l.ws();
    if text.as_bytes()[l.pos..close.min(text.len())]
        .get(..11)
        .is_some_and(|h| h.eq_ignore_ascii_case(b"<parameter="))
    {
        // Qwen3-Coder's parameters, its `<tool_call>` left out.
        return super::text::read_param_calls(
            text,
            content,
            close,
            Some((name, span.start)),
            Format::Qwen3Coder,
            block,
            span,
            diags,
            out,
        );
    }
    if l.at_end() {
        if ended {
            diags.push(lit::value_error(
                LitErr::Cut,
                span.start,
                true,
                &what(&name),
                HINT,
            ));
            return;
        }
        out.push(lit::call(
            name,
            crate::protocol::Args::new(),
            Format::Functionary,
            span,
            block,
        ));
        return;
    }
    match lit::json_args(text, l.pos, close) {
        Ok((Some(args), _)) => out.push(lit::call(name, args, Format::Functionary, span, block)),
        Ok(_) => diags.push(RawDiag::error(
            content,
            format!(
                "the arguments of {} are not an object; it was not executed",
                what(&name)
            ),
            HINT.into(),
        )),
        Err(e) => diags.push(lit::value_error(e, span.start, ended, &what(&name), HINT)),
    }
}

/// The format table's leading reader: `>>>name\n{…}` calls.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    let s = text.as_bytes();
    let mut l = Lit::new(s, from, to);
    l.ws();
    // v3.2: the prompt ends in `>>>`, so the answer's first call starts without it; taken
    // only when more `>>>` calls follow it or it is the whole answer.
    let bare = !l.eat(b">>>");
    if bare && !starts_all(s, l.pos, to) && !bare_first_call(text, l.pos, to) {
        return Lead::No;
    }
    let mut calls = Vec::new();
    let mut prose = Vec::new();
    let mut first = true;
    loop {
        let at = if first && bare { l.pos } else { l.pos - 3 };
        first = false;
        let Some(name) = l.name() else {
            return Lead::No;
        };
        l.blanks();
        if !(l.eat(b"\r\n") || l.eat(b"\n") || l.eat(b"\r")) {
            return Lead::No;
        }
        if name == "all" {
            // The answer's text, up to the next `>>>` (the model writes the marker right
            // after its text, on the same line or the next).
            let start = l.pos;
            let e = memchr::memmem::find(&s[start..to], b">>>").map_or(to, |i| start + i);
            prose.push((start, e));
            l.pos = e;
        } else {
            l.ws();
            match lit::json_args(text, l.pos, to) {
                Ok((Some(args), e)) => {
                    let span = Span {
                        start: at,
                        end: e,
                        line: 0,
                        column: 0,
                    };
                    calls.push(lit::call(
                        name,
                        args,
                        Format::Functionary,
                        span,
                        calls.len(),
                    ));
                    l.pos = e;
                }
                Err(LitErr::Cut) => {
                    return Lead::Error(lit::value_error(
                        LitErr::Cut,
                        at,
                        to >= text.len(),
                        &format!("the call to '{name}'"),
                        HINT,
                    ))
                }
                _ => return Lead::No,
            }
        }
        let end = l.pos;
        l.ws();
        if !l.eat(b">>>") {
            if calls.is_empty() {
                return Lead::No;
            }
            return Lead::Calls {
                calls,
                end,
                prose,
                diags: Vec::new(),
            };
        }
    }
}

/// True when `s[at..to]` starts with v3.2's `all` line (the prompt ended in `>>>`): the
/// answer's text comes first; it is a call only when a `>>>` call follows.
fn starts_all(s: &[u8], at: usize, to: usize) -> bool {
    let mut l = Lit::new(s, at, to);
    l.eat(b"all") && {
        l.blanks();
        l.eat(b"\r\n") || l.eat(b"\n") || l.eat(b"\r")
    }
}

/// True when `text[at..to]` starts with a `name\n{…}` call that is followed by a `>>>`
/// call or by nothing.
fn bare_first_call(text: &str, at: usize, to: usize) -> bool {
    let s = text.as_bytes();
    let mut l = Lit::new(s, at, to);
    if l.name().is_none() {
        return false;
    }
    l.blanks();
    if !(l.eat(b"\r\n") || l.eat(b"\n") || l.eat(b"\r")) {
        return false;
    }
    l.ws();
    if l.peek() != Some(b'{') {
        return false;
    }
    match lit::json_args(text, l.pos, to) {
        Ok((Some(_), e)) => {
            let mut r = Lit::new(s, e, to);
            r.ws();
            r.at_end() || r.eat(b">>>")
        }
        _ => false,
    }
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Functionary,
    name: "functionary",
    aliases: &[],
    auto: Auto::InText,
    reader: Reader::Region(RegionSyntax {
        open: Open::Named(OPEN),
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
    also: &[],
    lesson: super::Lesson::wire(
        |name, args| format!("<function={name}>{}</function>", super::teach::pretty_inline(args)),
        "To use a tool or skill, write <function=tool_name> followed by its arguments as a JSON object and </function>, once per call. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("functionary"),
};
