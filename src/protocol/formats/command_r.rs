//! Command R / R+: `Action:` then a ```` ```json ```` fence holding
//! `[{"tool_name": …, "parameters": {…}}]`. `auto` takes it at the start of the answer
//! (`Action:` and the fence, or the list alone) or as a whole fenced block after a
//! lead-in (`Plan: …`), as the other shapes that could be prose (`lead.rs`).
//!
//! Its fence nests in an outer one: when `Action:` is the first line of a fence, its own
//! fence closes at the first ```` ``` ```` after the list and the outer one at the next
//! (or the first closed both); the outer fence's lines go with the call (`lead::fences`).
//! In its fenced list, a call whose JSON breaks is an error of its own and the calls
//! around it are read.
//!
//! Command R7B and Command A write the same list between `<|START_ACTION|>` and
//! `<|END_ACTION|>` (special tokens): read wherever it stands, as the tagged forms are.
//! Their reasoning, between `<|START_THINKING|>` and `<|END_THINKING|>`, is never run and
//! is not response text (as `<think>`); their answer between `<|START_RESPONSE|>` and
//! `<|END_RESPONSE|>` is response text, without the markers.

use serde_json::Value;

use super::lead::{self, Lead};
use super::lit::{self, Lit, LitErr};
use super::{text as prose_text, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::args::Args;
use crate::protocol::types::{Call, Format, RawDiag, Span};

const HINT: &str = "Write Action: ```json [{\"tool_name\": \"ToolId\", \"parameters\": {…}}] ```.";

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    leading: Some(lead),
    also: &[RegionSyntax::new(
        Open::Exact(b"<|START_ACTION|>"),
        Close::Exact(b"<|END_ACTION|>"),
        read_action,
        "<|START_ACTION|>",
        (
            "<|START_ACTION|> has no <|END_ACTION|>; its complete calls were read up to the end of the text",
            "End the calls with <|END_ACTION|>.",
        ),
    ),
    RegionSyntax::new(
        Open::Exact(b"<|START_THINKING|>"),
        Close::Exact(b"<|END_THINKING|>"),
        super::no_calls,
        "<|START_THINKING|>",
        (
            "<|START_THINKING|> has no <|END_THINKING|>; everything after it was treated as reasoning and nothing in it was executed",
            "End the reasoning with <|END_THINKING|>.",
        ),
    ),
    RegionSyntax {
        prose: Some(all_prose),
        ..RegionSyntax::new(
            Open::Exact(b"<|START_RESPONSE|>"),
            Close::Exact(b"<|END_RESPONSE|>"),
            super::no_calls,
            "<|START_RESPONSE|>",
            (
                "<|START_RESPONSE|> has no <|END_RESPONSE|>; the answer was read up to the end of the text",
                "End the answer with <|END_RESPONSE|>.",
            ),
        )
    }],
    ..FormatEntry::native(
        Format::CommandR,
        "command_r",
        &["cohere", "command_r_plus", "command_a"],
        Reader::Leading,
        super::Lesson::wire(
            |name, args| {
                format!(
                    "Action: ```json\n[{{\"tool_name\": {}, \"parameters\": {}}}]\n```",
                    serde_json::Value::String(name.into()),
                    super::teach::pretty_inline(args)
                )
            },
            "To use tools or skills, write Action: followed by a ```json fenced block holding a JSON list of calls, each an object with \"tool_name\" and \"parameters\". If no action is needed, answer in plain text.",
        ),
        super::Grammar::Native("command_r"),
    )
};

/// The leading reader.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    let s = text.as_bytes();
    let mut l = Lit::new(s, from, to);
    l.ws();
    // Command R+ plans first (`Plan: …`): the lines before the `Action:` line stay
    // response text.
    let mut prose = Vec::new();
    // A fence the action fills (```` ``` ```` then `Action: ```json …`): its lines go
    // with the call (`lead::fences` says how the two fences nest).
    let mut outer = false;
    if !text[l.pos..to].starts_with("Action:") {
        let Some(i) = text[l.pos..to].find("\nAction:") else {
            return Lead::No;
        };
        let plan = (l.pos, l.pos + i);
        l.pos += i + 1;
        match lead::open_fence_before(s, plan.0, l.pos) {
            Some(o) => {
                outer = true;
                if o > plan.0 {
                    prose.push((plan.0, o));
                }
            }
            None => prose.push(plan),
        }
    }
    let at = l.pos;
    let action = l.eat(b"Action:");
    l.ws();
    let fenced = action && l.eat(b"```");
    if fenced {
        while l.peek().is_some_and(|b| b != b'\n') {
            l.pos += 1;
        }
        l.ws();
    }
    if l.peek() != Some(b'[') {
        return Lead::No;
    }
    let v0 = l.pos;
    let (parts, diags) = match fast_items(text, v0, to) {
        Some((parts, n)) => {
            l.pos = n;
            (parts, Vec::new())
        }
        None => match slow_items(&mut l, text, v0, to, fenced) {
            Ok(read) => read,
            // Cut off: the call runs to the end; the plan stays response text.
            Err(Lead::Error(d)) => {
                return Lead::Calls {
                    calls: Vec::new(),
                    end: to,
                    prose,
                    diags: vec![d],
                }
            }
            Err(lead) => return lead,
        },
    };
    if parts.is_empty() && diags.is_empty() {
        return Lead::No;
    }
    let mut end = l.pos;
    if fenced {
        l.ws();
        if l.eat(b"```") {
            end = l.pos;
        }
    }
    if outer {
        // The outer fence's close: the next fence line (only blanks before it); when
        // none follows, the action's own close closed both.
        let mut m = Lit::new(s, end, to);
        m.ws();
        if m.eat(b"```") {
            let e = m.pos;
            m.blanks();
            if matches!(m.peek(), None | Some(b'\n' | b'\r')) {
                end = e;
            }
        }
    }
    let span = Span {
        start: at,
        end,
        line: 0,
        column: 0,
    };
    let parts_empty = parts.is_empty();
    let mut calls = Vec::new();
    for (i, (name, args, id)) in parts.into_iter().enumerate() {
        let name = name.trim();
        if !name.is_empty() {
            let mut c = lit::call(name.to_string(), args, Format::CommandR, span, i);
            c.id = id;
            calls.push(c);
        }
    }
    // Calls whose names are all empty: no call list (an error in it is no call's either).
    if calls.is_empty() && (diags.is_empty() || !parts_empty) {
        Lead::No
    } else {
        Lead::Calls {
            calls,
            end,
            prose,
            diags,
        }
    }
}

/// Each call's name and arguments of the list at `v0`, and where it ends: serde reading
/// the list without building it (the arguments kept as their text); `None` when that
/// cannot (the tolerant reader, [`slow_items`], reads it then).
fn fast_items(text: &str, v0: usize, to: usize) -> Option<(Vec<Part>, usize)> {
    let (objs, n) = lit::raw_objects(&text[v0..to])?;
    let mut parts = Vec::with_capacity(objs.len());
    for o in &objs {
        let o = o.as_ref()?;
        let name: String = serde_json::from_str(o.get("tool_name")?.get()).ok()?;
        // Command R7B numbers its calls (`"tool_call_id": "0"`): the call's id.
        let id = match o.get("tool_call_id") {
            Some(v) => serde_json::from_str::<String>(v.get())
                .ok()
                .filter(|i| !i.is_empty()),
            None => None,
        };
        parts.push((name, lit::raw_arguments(o.get("parameters"))?, id));
    }
    Some((parts, v0 + n))
}

/// `<|START_RESPONSE|>`'s content is response text, all of it.
fn all_prose(_: &str, content: usize, _: usize) -> Option<usize> {
    Some(content)
}

/// The reader of `<|START_ACTION|>` … `<|END_ACTION|>` (Command R7B, Command A): the same
/// list as after `Action:`, its calls read as in the fenced list (a call whose JSON
/// breaks is an error of its own).
pub(crate) fn read_action(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let mut l = Lit::new(text.as_bytes(), content, close);
    l.ws();
    let v0 = l.pos;
    let read = if l.peek() != Some(b'[') {
        Err(Lead::No)
    } else {
        match fast_items(text, v0, close) {
            Some((parts, _)) => Ok((parts, Vec::new())),
            None => slow_items(&mut l, text, v0, close, true),
        }
    };
    match read {
        Ok((parts, d)) => {
            diags.extend(d);
            for (name, args, id) in parts {
                let name = name.trim();
                if !name.is_empty() {
                    let mut c = lit::call(name.to_string(), args, Format::CommandR, span, block);
                    c.id = id;
                    out.push(c);
                }
            }
        }
        Err(Lead::Error(d)) => diags.push(d),
        Err(_) => diags.push(prose_text::bad(
            content,
            "<|START_ACTION|> does not hold a JSON list of calls, each with a \"tool_name\"",
            HINT,
        )),
    }
}

/// A call object's `tool_call_id`, when it is a string that is not empty.
pub(crate) fn call_id(item: &Value) -> Option<String> {
    item.get("tool_call_id")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())
        .map(str::to_string)
}

/// The calls of a list (each its name and arguments) and the errors of the calls around
/// which they were read.
type Items = (Vec<Part>, Vec<RawDiag>);

/// One call of a list: its name, its arguments and its id (`tool_call_id`), if it has one.
type Part = (String, Args, Option<String>);

/// The tolerant reader's way: the list at `v0` read into values, each object's
/// `tool_name` and `parameters`, and an error for each element whose JSON breaks (no
/// calls and one error when none reads, or when a call's parameters are not an object);
/// `Err` of what the leading reader answers when the list is not this shape or is cut
/// off.
fn slow_items(
    l: &mut Lit<'_>,
    text: &str,
    v0: usize,
    to: usize,
    fenced: bool,
) -> Result<Items, Lead> {
    let s = text.as_bytes();
    let mut diags = Vec::new();
    let items = match l.value() {
        Ok(Value::Array(a)) => a,
        Ok(_) => return Err(Lead::No),
        Err(e)
            if fenced
                && memchr::memmem::find(&s[v0..to.min(v0 + 200)], b"\"tool_name\"").is_some() =>
        {
            // Its brackets close: a syntax break, read around (siblings survive).
            let mut pos = v0;
            let Some(close) = lit::ValueEnd::default().feed(&s[..to], &mut pos) else {
                return Err(Lead::Error(lit::value_error(
                    e,
                    v0,
                    to >= text.len(),
                    "a command_r call",
                    HINT,
                )));
            };
            l.pos = close;
            let items = around_breaks(s, v0 + 1, close - 1, &mut diags);
            if items.is_empty() {
                // Every element broken: one error (the first), nothing runs.
                diags.truncate(1);
                return Ok((Vec::new(), diags));
            }
            items
        }
        Err(_) => return Err(Lead::No),
    };
    // A list of objects with `tool_name`, or it is not this shape.
    if items.is_empty()
        || !items
            .iter()
            .all(|i| i.get("tool_name").is_some_and(Value::is_string))
    {
        return Err(Lead::No);
    }
    let mut parts = Vec::with_capacity(items.len());
    for item in items {
        let name = item["tool_name"].as_str().unwrap_or_default().to_string();
        match lit::arguments(item.get("parameters")) {
            Ok(m) => parts.push((name, m.into(), call_id(&item))),
            // None of the list runs.
            Err(msg) => {
                let d = RawDiag::error(
                    v0,
                    format!("the call to '{}': {msg}; it was not executed", name.trim()),
                    HINT.into(),
                );
                return Ok((Vec::new(), vec![d]));
            }
        }
    }
    Ok((parts, diags))
}

/// The elements of a list whose JSON breaks (`s[from..close]`, inside its brackets): each
/// element that reads, and for each break an error in `diags`; reading resumes at the
/// next call object after the break (`lit::next_call_start`), as the other JSON lists
/// read (`lit::read_json_calls`).
fn around_breaks(s: &[u8], from: usize, close: usize, diags: &mut Vec<RawDiag>) -> Vec<Value> {
    let mut items = Vec::new();
    let mut p = from;
    loop {
        let mut e = Lit::new(s, p, close);
        e.ws();
        while matches!(e.peek(), Some(b',' | b';')) {
            e.pos += 1;
            e.ws();
        }
        if e.at_end() {
            break;
        }
        let at = e.pos;
        let bad = match e.value() {
            Ok(v) => {
                let mut f = Lit::new(s, e.pos, close);
                f.ws();
                if f.at_end() || matches!(f.peek(), Some(b',' | b';')) {
                    items.push(v);
                    p = e.pos;
                    continue;
                }
                LitErr::Bad(f.pos, "expected `,` or `]` after a call".into())
            }
            Err(err) => err,
        };
        let b = match &bad {
            LitErr::Bad(b, _) => *b,
            LitErr::Cut => close,
        };
        diags.push(lit::value_error(bad, at, false, "a command_r call", HINT));
        match lit::next_call_start(s, b.max(at + 1), close) {
            Some(r) => p = r,
            None => break,
        }
    }
    items
}
