//! GLM-4.5, 4.6, 4.7: `<tool_call>NAME` then pairs `<arg_key>KEY</arg_key>`
//! `<arg_value>VALUE</arg_value>`, then `</tool_call>`, with line breaks between them or
//! none (or a literal `\n`, two characters, as GLM-4.6 sometimes writes). The tag is
//! Hermes' too: its reader hands a content that is a name (then pairs or nothing) here.
//! Values are text (`text.rs`); a value that is an object or list written JSON-escaped
//! (`[{\"id\": 1}]`, GLM-4.6 again) is read unescaped, as SGLang reads it.

use std::borrow::Cow;

use super::text::{self, TextArgs};
use super::{Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

const HINT: &str =
    "Write <tool_call>ToolId<arg_key>name</arg_key><arg_value>value</arg_value></tool_call>.";

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::Glm45,
    "glm45",
    &["glm4_5", "glm46", "glm4_6", "glm47", "glm4_7", "glm4_moe"],
    Reader::Region(RegionSyntax::new(
        Open::Tag(super::hermes::OPEN),
        Close::Tag(super::hermes::CLOSE),
        super::hermes::read,
        super::hermes::SHOWN_AS,
        super::hermes::UNCLOSED,
    )),
    super::Lesson::wire(
        |name, args| {
            let pairs = super::teach::text_params(
                args,
                |k| format!("<arg_key>{k}</arg_key>\n<arg_value>"),
                "</arg_value>",
            );
            format!("<tool_call>{name}\n{pairs}</tool_call>")
        },
        "To use a tool or skill, write <tool_call> followed by the tool name, then one <arg_key>name</arg_key><arg_value>value</arg_value> pair per parameter, then </tool_call>, once per call. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("glm45"),
);

/// True when `content` (trimmed) is a GLM-4.5 call: a name with no blank in it, then
/// `<arg_key>` or nothing.
pub(crate) fn is_glm45(content: &str) -> bool {
    let t = content.trim_start();
    let head = t.find('<').map_or(t, |i| &t[..i]).trim();
    !head.is_empty()
        && !head.contains(char::is_whitespace)
        && !head.starts_with(['{', '[', '"', '\''])
        && (t.trim_end().len() == head.len()
            || t[head.len()..].trim_start().starts_with("<arg_key>"))
}

/// The call's name as written before its first pair: blanks and literal `\n`s dropped.
pub(crate) fn name_of(raw: &str) -> &str {
    skip_seps(raw.trim_end().trim_end_matches("\\n").trim_end())
}

/// `s` without the blanks and literal `\n`s (two characters) it starts with.
fn skip_seps(s: &str) -> &str {
    let mut t = s.trim_start();
    while let Some(r) = t.strip_prefix("\\n") {
        t = r.trim_start();
    }
    t
}

/// A value as its text is read: an object or list written JSON-escaped (`[{\"a\": 1}]`,
/// not JSON as it stands, JSON once its escapes are undone) is that JSON; any other value
/// is its text as written.
pub(crate) fn value_text(raw: &str) -> Cow<'_, str> {
    let t = raw.trim();
    if !(t.starts_with('{') || t.starts_with('[')) || !t.contains("\\\"") {
        return Cow::Borrowed(raw);
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok() {
        return Cow::Borrowed(raw);
    }
    match serde_json::from_str::<String>(&format!("\"{t}\"")) {
        Ok(u) if serde_json::from_str::<serde::de::IgnoredAny>(&u).is_ok() => Cow::Owned(u),
        _ => Cow::Borrowed(raw),
    }
}

/// Reads one GLM-4.5 call in `text[from..to]`.
pub(crate) fn read(
    text: &str,
    from: usize,
    to: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let s = text.as_bytes();
    let ended = to >= text.len();
    let first = text::find(s, from, to, b"<arg_key>").unwrap_or(to);
    let name = name_of(&text[from..first]).to_string();
    let mut args = TextArgs::default();
    let mut p = first;
    while let Some(k) = text::find(s, p, to, b"<arg_key>") {
        let k0 = k + b"<arg_key>".len();
        let Some(k1) = text::find(s, k0, to, b"</arg_key>") else {
            diags.push(if ended {
                text::cut(k, &name, HINT)
            } else {
                text::bad(k, &format!("an <arg_key> of '{name}' is not closed"), HINT)
            });
            return;
        };
        let after = k1 + b"</arg_key>".len();
        let rest = skip_seps(&text[after..to]);
        let v = to - rest.len();
        if !rest.starts_with("<arg_value>") {
            diags.push(if ended && rest.is_empty() {
                text::cut(k, &name, HINT)
            } else {
                text::bad(
                    k,
                    &format!("the <arg_key> of '{name}' has no <arg_value> after it"),
                    HINT,
                )
            });
            return;
        }
        let v0 = v + b"<arg_value>".len();
        let Some(v1) = text::find(s, v0, to, b"</arg_value>") else {
            diags.push(if ended {
                text::cut(k, &name, HINT)
            } else {
                text::bad(
                    k,
                    &format!("an <arg_value> of '{name}' is not closed"),
                    HINT,
                )
            });
            return;
        };
        args.push(&text[k0..k1], &value_text(&text[v0..v1]));
        p = v1 + b"</arg_value>".len();
    }
    if ended {
        // No `</tool_call>`: the text may have ended between two pairs.
        diags.push(text::cut(from, &name, HINT));
        return;
    }
    out.push(args.call(name, Format::Glm45, span, block));
}
