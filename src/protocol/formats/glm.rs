//! GLM-4: the tool name alone on a line, then its JSON arguments
//! (`forge_smelt\n{"ore": "iron"}`). Only when that is the whole answer (or a whole
//! fenced block): a name line is otherwise ordinary prose.

use super::lead::Lead;
use super::lit::{self, Lit, LitErr};
use super::{Auto, FormatEntry, Reader};
use crate::protocol::types::{Format, Span};

/// The format table's leading reader.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    let s = text.as_bytes();
    let mut l = Lit::new(s, from, to);
    l.ws();
    let at = l.pos;
    let Some(name) = l.name() else {
        return Lead::No;
    };
    l.blanks();
    if !(l.eat(b"\r\n") || l.eat(b"\n") || l.eat(b"\r")) {
        return Lead::No;
    }
    l.ws();
    if l.peek() != Some(b'{') {
        return Lead::No;
    }
    match lit::json_args(text, l.pos, to) {
        Ok((Some(args), e)) => {
            if !s[e..to].iter().all(u8::is_ascii_whitespace) {
                return Lead::No;
            }
            let span = Span {
                start: at,
                end: e,
                line: 0,
                column: 0,
            };
            Lead::calls(vec![lit::call(name, args, Format::Glm, span, 0)], e)
        }
        Err(LitErr::Cut) => Lead::Error(lit::value_error(
            LitErr::Cut,
            at,
            to >= text.len(),
            &format!("the arguments of '{name}'"),
            "Write the tool name on its own line, then its arguments as one JSON object.",
        )),
        _ => Lead::No,
    }
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Glm,
    name: "glm",
    aliases: &[],
    auto: Auto::InText,
    reader: Reader::Leading,
    exact_keys: false,
    leading: Some(lead),
    names_as_written: true,
    also: &[],
    lesson: super::Lesson::wire(
        |name, args| format!("{name}\n{}", super::teach::pretty_inline(args)),
        "To use a tool or skill, answer with only the tool's name on the first line and its arguments as a JSON object on the next line; one call per answer. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("glm"),
};
