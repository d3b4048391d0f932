//! `<ACTION>` XML (rules 17–20), read with quick-xml.
//!
//! Model output is not always well-formed XML: a bare `<` that cannot start a tag
//! (`a < b`, `x <= 3`, `<3`) is escaped before quick-xml sees it, and a bare `&` is
//! accepted by quick-xml's `allow_dangling_amp`. Everything else — unclosed or
//! mismatched tags, truncated CDATA — is "Malformed XML in ACTION block" and the block
//! yields no calls. The element tree is built with an explicit stack (no recursion)
//! and nesting is capped, so deep input cannot overflow the stack.

use quick_xml::events::Event;
use quick_xml::Reader;
use serde_json::{Map, Value};

use super::{Auto, Close, FormatEntry, Open, Reader as RowReader, RegionSyntax};
use crate::protocol::types::{Call, Format, OnError, RawDiag, Span};

/// The opening tag, matched case-insensitively at a `<` and followed by blanks and `>`.
pub(crate) const OPEN_TAG: &[u8] = b"<action";
/// The closing tag, matched the same way.
pub(crate) const CLOSE_TAG: &[u8] = b"</action";
/// Sections inside which `</ACTION>` is content: CDATA and comments.
pub(crate) const OPAQUE: &[(&[u8], &[u8])] = &[(b"<![CDATA[", b"]]>"), (b"<!--", b"-->")];
/// The block as diagnostics name it.
pub(crate) const SHOWN_AS: &str = "<ACTION>";
/// The error for a block the text ends inside (rule 20): message and hint.
pub(crate) const UNCLOSED: (&str, &str) = (
    "Malformed XML in ACTION block: <ACTION> is never closed (the output was cut off); nothing in it was executed",
    "End the block with </ACTION> after the last call.",
);
/// The hint for a second `<ACTION>` block, which does not run (seed 002 §3.2.1).
pub(crate) const LATER_HINT: &str = "Put every call of one answer in a single <ACTION> block, then wait for the Observation before the next action.";

/// Deepest element nesting accepted inside `<ACTION>` (tool = 1, parameter = 2, …).
pub const MAX_XML_DEPTH: usize = 64;

/// Escapes every `<` that cannot start markup. Returns the new text and, for each
/// inserted `&lt;`, its offset in the new text (to map positions back).
fn escape_bare_lt(raw: &str) -> (std::borrow::Cow<'_, str>, Vec<usize>) {
    let b = raw.as_bytes();
    let mut out: Option<String> = None;
    let mut inserts = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while let Some(j) = memchr::memchr(b'<', &b[i..]) {
        let p = i + j;
        let next = b.get(p + 1).copied();
        let starts_markup = match next {
            Some(c) => {
                c.is_ascii_alphabetic()
                    || c == b'_'
                    || c == b':'
                    || c >= 0x80
                    || c == b'/'
                    || c == b'!'
                    || c == b'?'
            }
            None => false,
        };
        if starts_markup {
            // Skip CDATA and comments whole: a `<` inside them is content.
            let rest = &b[p..];
            let skip_to = if rest.starts_with(b"<![CDATA[") {
                memchr::memmem::find(&rest[9..], b"]]>").map(|k| p + 9 + k + 3)
            } else if rest.starts_with(b"<!--") {
                memchr::memmem::find(&rest[4..], b"-->").map(|k| p + 4 + k + 3)
            } else {
                Some(p + 1)
            };
            i = skip_to.unwrap_or(b.len());
            continue;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(raw.len() + 16));
        o.push_str(&raw[copied..p]);
        inserts.push(o.len());
        o.push_str("&lt;");
        copied = p + 1;
        i = p + 1;
    }
    match out {
        Some(mut o) => {
            o.push_str(&raw[copied..]);
            (std::borrow::Cow::Owned(o), inserts)
        }
        None => (std::borrow::Cow::Borrowed(raw), inserts),
    }
}

/// Maps an offset in the escaped text back to the raw text.
fn unmap(inserts: &[usize], off: usize) -> usize {
    let n = inserts.partition_point(|&x| x < off);
    off.saturating_sub(3 * n)
}

#[derive(Default)]
struct Frame {
    name: String,
    at: usize,
    fields: Map<String, Value>,
    has_children: bool,
    text: String,
    cdata: Option<String>,
}

fn entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "apos" => Some('\''),
        "quot" => Some('"'),
        _ => {
            let n = name.strip_prefix('#')?;
            let code = if let Some(h) = n.strip_prefix(['x', 'X']) {
                u32::from_str_radix(h, 16).ok()?
            } else {
                n.parse().ok()?
            };
            char::from_u32(code)
        }
    }
}

impl Frame {
    fn push_text(&mut self, t: &str) {
        self.text.push_str(t);
    }

    /// Rule 18: objects for nested elements, strings for text (trimmed), CDATA exact.
    fn into_value(self, diags: &mut Vec<RawDiag>, base: usize) -> Value {
        if self.has_children {
            if !self.text.trim().is_empty() {
                diags.push(RawDiag::warning(
                    base + self.at,
                    format!(
                        "text beside the child elements of <{}> was ignored",
                        self.name
                    ),
                    "Put text in an element of its own, e.g. <note>…</note>.".into(),
                ));
            }
            return Value::Object(self.fields);
        }
        let s = match self.cdata {
            Some(mut c) => {
                let t = self.text.trim();
                if !t.is_empty() {
                    c.push_str(t);
                }
                c
            }
            None => self.text.trim().to_string(),
        };
        if self.fields.is_empty() {
            Value::String(s)
        } else {
            let mut f = self.fields;
            if !s.is_empty() {
                f.insert("#text".into(), Value::String(s));
            }
            Value::Object(f)
        }
    }
}

/// Reads the calls of one `<ACTION>` block whose content is `text[content..end_tag]`
/// onto `out` (none of them when the block has an error).
pub(crate) fn read(
    text: &str,
    content: usize,
    end_tag: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let raw = &text[content..end_tag];
    let (xml, inserts) = escape_bare_lt(raw);
    let mut reader = Reader::from_str(&xml);
    {
        let cfg = reader.config_mut();
        cfg.allow_dangling_amp = true;
        cfg.check_end_names = true;
        cfg.allow_unmatched_ends = false;
        cfg.expand_empty_elements = false;
        cfg.trim_text(false);
    }
    let start = out.len();
    let mut stack: Vec<Frame> = Vec::new();
    let mut local = Vec::new();
    let malformed = |diags: &mut Vec<RawDiag>, at: usize, what: String| {
        diags.push(RawDiag::error(
            content + at,
            format!("Malformed XML in ACTION block: {what}; no call from this block was executed"),
            "Close every tag in the order it was opened (<tool><param>…</param></tool>), and wrap text with special characters in <![CDATA[…]]>.".into(),
        ));
    };
    // Repeated tags inside one element become arrays; the first repetition turns the
    // value into an array, later ones append. Track which keys were made arrays by
    // repetition so a single array-valued child is never mistaken for a repetition.
    let mut repeated: Vec<std::collections::HashSet<String>> = Vec::new();
    loop {
        let before = reader.buffer_position() as usize;
        let ev = match reader.read_event() {
            Ok(ev) => ev,
            Err(e) => {
                let at = unmap(&inserts, reader.error_position() as usize);
                malformed(diags, at, e.to_string());
                out.truncate(start);
                return;
            }
        };
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let is_empty = matches!(ev, Event::Empty(_));
                let name = e.name().as_ref().to_string();
                if stack.len() >= MAX_XML_DEPTH {
                    malformed(
                        diags,
                        unmap(&inserts, before),
                        format!("elements are nested more than {MAX_XML_DEPTH} deep"),
                    );
                    out.truncate(start);
                    return;
                }
                let mut frame = Frame {
                    name,
                    at: unmap(&inserts, before),
                    ..Frame::default()
                };
                for a in e.attributes().with_checks(false) {
                    match a {
                        Ok(a) => {
                            let k = a.key.as_ref().to_string();
                            let v = a
                                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                .map(|v| v.into_owned())
                                .unwrap_or_else(|_| a.value.to_string());
                            frame.fields.insert(k, Value::String(v));
                        }
                        Err(err) => {
                            malformed(diags, unmap(&inserts, before), err.to_string());
                            out.truncate(start);
                            return;
                        }
                    }
                }
                if let Some(parent) = stack.last_mut() {
                    parent.has_children = true;
                }
                stack.push(frame);
                repeated.push(Default::default());
                if is_empty {
                    close_frame(
                        &mut stack,
                        &mut repeated,
                        out,
                        &mut local,
                        block,
                        span,
                        content,
                    );
                }
            }
            Event::End(_) => {
                if stack.is_empty() {
                    malformed(
                        diags,
                        unmap(&inserts, before),
                        "closing tag without an opening tag".into(),
                    );
                    out.truncate(start);
                    return;
                }
                close_frame(
                    &mut stack,
                    &mut repeated,
                    out,
                    &mut local,
                    block,
                    span,
                    content,
                );
            }
            Event::Text(t) => {
                let t = t.into_inner();
                match stack.last_mut() {
                    Some(f) => f.push_text(&t),
                    None => {
                        if !t.trim().is_empty() {
                            local.push(RawDiag::warning(
                                content + unmap(&inserts, before),
                                "text directly inside <ACTION> was ignored".into(),
                                "Inside <ACTION>, write only tool elements such as <ToolId><param>…</param></ToolId>.".into(),
                            ));
                        }
                    }
                }
            }
            Event::GeneralRef(r) => {
                let name = r.into_inner();
                if let Some(f) = stack.last_mut() {
                    match entity(&name) {
                        Some(c) => f.text.push(c),
                        None => {
                            f.text.push('&');
                            f.text.push_str(&name);
                            f.text.push(';');
                        }
                    }
                }
            }
            Event::CData(c) => {
                let c = c.into_inner();
                if let Some(f) = stack.last_mut() {
                    // Whitespace-only text around CDATA is ignored.
                    if f.cdata.is_none() && f.text.trim().is_empty() {
                        f.text.clear();
                    }
                    f.cdata.get_or_insert_with(String::new).push_str(&c);
                }
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
            Event::Eof => break,
        }
    }
    if let Some(open) = stack.last() {
        malformed(diags, open.at, format!("<{}> is never closed", open.name));
        out.truncate(start);
        return;
    }
    diags.extend(local);
}

#[allow(clippy::too_many_arguments)]
fn close_frame(
    stack: &mut Vec<Frame>,
    repeated: &mut Vec<std::collections::HashSet<String>>,
    calls: &mut Vec<Call>,
    diags: &mut Vec<RawDiag>,
    block: usize,
    span: Span,
    content: usize,
) {
    let Some(frame) = stack.pop() else { return };
    repeated.pop();
    let name = frame.name.clone();
    match stack.last_mut() {
        None => {
            // A tool element: its children are the arguments.
            if !frame.has_children && !frame.text.trim().is_empty() && frame.cdata.is_none() {
                diags.push(RawDiag::warning(
                    content + frame.at,
                    format!("text directly inside <{name}> was ignored; parameters must be child elements"),
                    format!("Write parameters as <{name}><param>value</param></{name}>."),
                ));
            }
            calls.push(Call {
                tool: name,
                args: frame.fields.into(),
                span,
                block,
                step: None,
                on_error: OnError::Stop,
                source: Format::Action,
                dispatch: None,
                id: None,
                texts: None,
            });
        }
        Some(parent) => {
            let v = frame.into_value(diags, content);
            let reps = repeated.last_mut();
            match parent.fields.get_mut(&name) {
                None => {
                    parent.fields.insert(name, v);
                }
                Some(existing) => {
                    let is_rep = reps.as_ref().is_some_and(|r| r.contains(&name));
                    if is_rep {
                        if let Value::Array(a) = existing {
                            a.push(v);
                        }
                    } else {
                        let prev = std::mem::take(existing);
                        *existing = Value::Array(vec![prev, v]);
                        if let Some(r) = reps {
                            r.insert(name);
                        }
                    }
                }
            }
        }
    }
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Action,
    name: "action",
    aliases: &["xml"],
    auto: Auto::InText,
    reader: RowReader::Region(RegionSyntax {
        open: Open::Tag(OPEN_TAG),
        close: Close::Tag(CLOSE_TAG),
        opaque: OPAQUE,
        read,
        shown_as: SHOWN_AS,
        unclosed: UNCLOSED,
        reads_unclosed: false,
        only_first: Some(LATER_HINT),
        prose: None,
    }),
    // One rule for argument names in every format (issue 36): loose, each loose match a warning.
    exact_keys: false,
    leading: None,
    names_as_written: false,
    also: &[],
    lesson: super::Lesson {
        naming: super::Naming::Id,
        example: |name, args| {
            let mut s = format!("<ACTION>\n    <{name}>\n");
            for (k, v) in args {
                s.push_str(&format!("        <{k}>{}</{k}>\n", super::teach::xml_value(v)));
            }
            s.push_str(&format!("    </{name}>\n</ACTION>"));
            s
        },
        how: "When you decide to use a tool or skill, first explain your reasoning, then output the <ACTION> block with the chosen tool/skill ID as the main tag, and its parameters as child tags (use <![CDATA[...]]> for values with <, > or &). If no action is needed, just provide your textual response.",
    },
    grammar: super::Grammar::Tam("action"),
};
