//! Apertus: `<|tools_prefix|>[{"forge_smelt": {"ore": "iron"}}]<|tools_suffix|>`: a JSON
//! list of objects whose one key is the tool's name and whose value is its arguments.
//! Each object is its own call; a broken one is a diagnostic of its own. Its reasoning,
//! `<|inner_prefix|>…<|inner_suffix|>`, is never run and is not response text.

use serde_json::Value;

use super::text;
use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

const NOT_ONE_KEY: &str = "an Apertus call is not an object with one key, the tool's name";
const HINT: &str = "Write <|tools_prefix|>[{\"ToolId\": {…arguments…}}]<|tools_suffix|>.";

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    also: &[RegionSyntax::new(
        Open::Exact(b"<|inner_prefix|>"),
        Close::Exact(b"<|inner_suffix|>"),
        super::no_calls,
        "<|inner_prefix|>",
        (
            "<|inner_prefix|> has no <|inner_suffix|>; everything after it was treated as reasoning and nothing in it was executed",
            "End the reasoning with <|inner_suffix|>.",
        ),
    )],
    ..FormatEntry::native(
    Format::Apertus,
    "apertus",
    &[],
    Reader::Region(RegionSyntax::new(
        Open::Exact(b"<|tools_prefix|>"),
        Close::Exact(b"<|tools_suffix|>"),
        read,
        "<|tools_prefix|>",
        (
            "<|tools_prefix|> has no <|tools_suffix|>; its complete calls were read up to the end of the text",
            "End the calls with <|tools_suffix|>.",
        ),
    )),
    super::Lesson::wire(
        |name, args| {
            format!(
                "<|tools_prefix|>[{{{}: {}}}]<|tools_suffix|>",
                serde_json::Value::String(name.into()),
                super::teach::pretty_inline(args)
            )
        },
        "To use tools or skills, write <|tools_prefix|>, a JSON list of objects each with the tool name as its one key and the arguments as its value, and <|tools_suffix|>. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("apertus"),
)
};

/// The region's reader.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let ended = close >= text.len();
    let mut l = lit::Lit::new(text.as_bytes(), content, close);
    l.ws();
    // serde reading the list without building it (the arguments kept as their text)
    // when it can; else the tolerant reader below.
    let fast = lit::raw_objects(&text[l.pos..close]).and_then(|(objs, _)| {
        let mut calls = Vec::with_capacity(objs.len());
        for o in &objs {
            calls.push(match o {
                Some(o) if o.len() == 1 => {
                    let (name, args) = o.entries()[0];
                    Some((name.to_string(), lit::raw_arguments(Some(args))?))
                }
                _ => None,
            });
        }
        Some(calls)
    });
    if let Some(calls) = fast {
        for c in calls {
            match c {
                Some((name, args)) => out.push(lit::call(name, args, Format::Apertus, span, block)),
                None => diags.push(text::bad(content, NOT_ONE_KEY, HINT)),
            }
        }
        return;
    }
    let items = match l.value() {
        Ok(Value::Array(a)) => a,
        Ok(v @ Value::Object(_)) => vec![v],
        Ok(_) => {
            diags.push(text::bad(
                content,
                "an Apertus call list is not a JSON list",
                HINT,
            ));
            return;
        }
        Err(e) => {
            diags.push(lit::value_error(e, content, ended, "an apertus call", HINT));
            return;
        }
    };
    for item in items {
        match item {
            Value::Object(o) if o.len() == 1 => {
                for (name, args) in o {
                    match lit::arguments(Some(&args)) {
                        Ok(m) => out.push(lit::call(name, m, Format::Apertus, span, block)),
                        Err(msg) => diags.push(text::bad(
                            content,
                            &format!("the call to '{name}': {msg}"),
                            HINT,
                        )),
                    }
                }
            }
            _ => diags.push(text::bad(content, NOT_ONE_KEY, HINT)),
        }
    }
}
