//! Pythonic call lists: `[forge.smelt(ore='iron', amount=4), bard.sing(ore="iron")]` —
//! the shape most models use when asked for "a list of calls" (Llama 3.2/4, Gorilla).
//!
//! Read as models write it: Python literals (either quote, numbers, `True/False/None`,
//! lists, tuples and sets as arrays, dicts; a single quote that no value end follows is
//! kept in its string); without the brackets (`a(x=1), b(y=2)`), separated
//! by `;`, `,` or newlines; several lists one after another; each call quoted as a
//! string (`['forge.smelt(ore="iron")']`); indented or in a fence; with markdown-escaped
//! underscores (`forge\_smelt`). An argument that is not one literal (`x=data['sales']`)
//! is kept as its source text; nothing is evaluated. Only keyword arguments are read:
//! a positional one means the text is not a call list (or, inside brackets, an error).

use super::lead::Lead;
use super::lit::{self, Lit, LitErr, Out, Skip};
use super::{Auto, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::args::{Args, Reading};
use crate::protocol::types::{Call, Format, RawDiag, Span};

const HINT: &str = "Write calls as [tool_name(param=value, …), …] with keyword arguments.";

/// Why a call could not be read, and whether it had begun as a call (`name(`).
struct Miss {
    err: LitErr,
    at: usize,
    begun: bool,
}

/// `name(kw=value, …)` at the cursor; `text` is the text `l` reads (as `str`).
fn one_call(l: &mut Lit<'_>, text: &str) -> Result<(String, Args, usize), Miss> {
    let at = l.pos;
    let miss = |err, begun| Miss { err, at, begun };
    let Some((ns, ne, escaped)) = l.skip_name() else {
        return Err(miss(LitErr::Bad(at, "expected a call".into()), false));
    };
    // A name starts and ends next to ASCII bytes: character boundaries of `text`.
    let name = text.get(ns..ne).unwrap_or_default();
    let name = if escaped {
        lit::unescape_name(name)
    } else {
        name.to_owned()
    };
    l.blanks();
    if !l.eat(b"(") {
        let e = if l.at_end() {
            LitErr::Cut
        } else {
            LitErr::Bad(l.pos, "expected '('".into())
        };
        return Err(miss(e, false));
    }
    // The arguments are only checked here, and kept as their source text: the JSON they
    // mean is written when something first reads them (`args_json`).
    let open = l.pos;
    call_args(l, &name, &mut Skip).map_err(|err| Miss {
        err,
        at,
        begun: true,
    })?;
    // `open` is past a `(` and the cursor past a `)`: both are character boundaries.
    let source = text.get(open..l.pos).unwrap_or_default();
    let reading = if l.lines {
        &REGION_ARGS
    } else {
        &PYTHONIC_ARGS
    };
    Ok((name, Args::from_source(source, reading), at))
}

/// How a pythonic call's kept arguments become a map.
static PYTHONIC_ARGS: Reading = Reading::source(args_json);
/// The same for a call in a region (a tag's), where a single-quoted string may span lines.
static REGION_ARGS: Reading = Reading::source(region_args_json);

/// The arguments of a pythonic call as [`one_call`] kept them (from after the `(` to the
/// `)`), written as the JSON object they mean.
fn args_json(source: &str) -> Vec<u8> {
    write_args(source, false)
}

/// [`args_json`] for a call in a region.
fn region_args_json(source: &str) -> Vec<u8> {
    write_args(source, true)
}

fn write_args(source: &str, lines: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(source.len() + 8);
    let mut l = Lit::new(source.as_bytes(), 0, source.len());
    l.lines = lines;
    if call_args(&mut l, "", &mut out).is_err() {
        // `one_call` read this very text with the same code (writing nothing), which
        // accepted it; so this is never reached.
        out = b"{}".to_vec();
    }
    out
}

/// The arguments of the call to `name`, the cursor past its `(`, written to `args` as a
/// JSON object (or only checked, with [`Skip`]); or why they cannot be read.
fn call_args<O: Out>(l: &mut Lit<'_>, name: &str, args: &mut O) -> Result<(), LitErr> {
    args.byte(b'{');
    let mut first = true;
    loop {
        l.ws();
        match l.peek() {
            None => return Err(LitErr::Cut),
            Some(b')') => {
                l.pos += 1;
                args.byte(b'}');
                return Ok(());
            }
            _ => {}
        }
        let key_at = l.pos;
        let key = l
            .skip_name()
            .filter(|&(s, e, _)| !l.s[s..e].iter().any(|b| matches!(b, b'.' | b':' | b'-')));
        let Some((ks, ke, escaped)) = key else {
            return Err(LitErr::Bad(
                key_at,
                format!("positional argument in the call to '{name}'"),
            ));
        };
        l.blanks();
        if l.peek() != Some(b'=') || l.peek_at(1) == Some(b'=') {
            let e = if l.at_end() {
                LitErr::Cut
            } else {
                LitErr::Bad(
                    key_at,
                    format!("positional argument in the call to '{name}'"),
                )
            };
            return Err(e);
        }
        l.pos += 1;
        if !first {
            args.byte(b',');
        }
        first = false;
        if escaped {
            if O::WRITES {
                let key = lit::text_of(&l.s[ks..ke]);
                args.json(&lit::unescape_name(&key));
            }
        } else {
            args.json_str(&l.s[ks..ke]);
        }
        args.byte(b':');
        l.write_arg(args)?;
        l.ws();
        match l.peek() {
            None => return Err(LitErr::Cut),
            Some(b',') => l.pos += 1,
            Some(b')') => {}
            Some(_) => return Err(LitErr::Bad(l.pos, "expected ',' or ')'".into())),
        }
    }
}

/// A call written inside a string (`'forge.smelt(ore="iron")'`).
fn quoted_call(l: &mut Lit<'_>) -> Result<(String, Args, usize), Miss> {
    let at = l.pos;
    let inner = l.string().map_err(|err| Miss {
        err,
        at,
        begun: false,
    })?;
    let inner = inner.trim();
    let mut il = Lit::new(inner.as_bytes(), 0, inner.len());
    il.lines = l.lines;
    let (name, args, _) = one_call(&mut il, inner).map_err(|m| Miss {
        err: match m.err {
            LitErr::Cut => LitErr::Bad(at, "the quoted call is incomplete".into()),
            LitErr::Bad(_, msg) => LitErr::Bad(at, msg),
        },
        at,
        begun: m.begun,
    })?;
    il.ws();
    if !il.at_end() {
        return Err(Miss {
            err: LitErr::Bad(at, "text after the quoted call".into()),
            at,
            begun: true,
        });
    }
    Ok((name, args, at))
}

/// True when a call (`name(`, or a quoted one inside a list) starts at the cursor.
fn call_starts(l: &Lit<'_>, in_list: bool) -> bool {
    let mut t = l.clone();
    if in_list && matches!(t.peek(), Some(b'\'' | b'"')) {
        t.pos += 1;
    }
    if t.skip_name().is_none() {
        return false;
    }
    t.blanks();
    t.peek() == Some(b'(')
}

/// The format table's leading reader.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    let mut calls = Vec::new();
    match lead_into(text, from, to, false, &mut calls) {
        Lead::Calls {
            end, prose, diags, ..
        } => Lead::Calls {
            calls,
            end,
            prose,
            diags,
        },
        other => other,
    }
}

/// [`lead`], its calls pushed onto `calls` (a region's reader gives the scanner's own
/// list, so no list is built per region); `Lead::Calls` holds none of them. Nothing is
/// added unless it answers `Lead::Calls`. `region` when the text is a region's (a
/// tag's), where a single-quoted string may span lines.
fn lead_into(text: &str, from: usize, to: usize, region: bool, calls: &mut Vec<Call>) -> Lead {
    let base = calls.len();
    let read = read_lead(text, from, to, region, calls, base);
    if !matches!(read, Lead::Calls { .. }) {
        calls.truncate(base);
    }
    read
}

fn read_lead(
    text: &str,
    from: usize,
    to: usize,
    region: bool,
    calls: &mut Vec<Call>,
    base: usize,
) -> Lead {
    let s = text.as_bytes();
    let mut l = Lit::new(s, from, to);
    l.lines = region;
    l.ws();
    let bracketed = l.peek() == Some(b'[');
    let push = |(tool, args, at): (String, Args, usize), end: usize, calls: &mut Vec<Call>| {
        let span = Span {
            start: at,
            end,
            line: 0,
            column: 0,
        };
        let block = calls.len() - base;
        if calls.len() == calls.capacity() && end > from {
            // Grow once by the calls the rest of the text likely holds (calls so far,
            // scaled to its length) instead of doubling, which copies every call.
            let more = (block + 1).saturating_mul(to.saturating_sub(end)) / (end - from);
            calls.reserve(more.clamp(4, 1 << 16));
        }
        calls.push(lit::call(tool, args, Format::Pythonic, span, block));
    };
    let fail = |m: Miss, calls: &[Call]| -> Lead {
        let begun = m.begun || calls.len() > base;
        match m.err {
            LitErr::Cut if begun => Lead::Error(lit::value_error(
                LitErr::Cut,
                m.at,
                to >= text.len(),
                "a pythonic call",
                HINT,
            )),
            LitErr::Bad(o, msg) if begun && bracketed => Lead::Error(lit::value_error(
                LitErr::Bad(o, msg),
                m.at,
                false,
                "a pythonic call",
                HINT,
            )),
            _ => Lead::No,
        }
    };
    let mut end;
    // The calls of a list that could not be read.
    let mut bad: Vec<RawDiag> = Vec::new();
    // True when the look-ahead after the last call already saw a call start here.
    let mut starts_known = false;
    loop {
        if l.peek() == Some(b'[') {
            let mut probe = l.clone();
            probe.pos += 1;
            probe.ws();
            if !call_starts(&probe, true) && probe.peek() != Some(b']') {
                break;
            }
            l.pos += 1;
            loop {
                l.ws();
                match l.peek() {
                    None => {
                        return fail(
                            Miss {
                                err: LitErr::Cut,
                                at: l.pos,
                                begun: true,
                            },
                            calls,
                        )
                    }
                    Some(b']') => {
                        l.pos += 1;
                        break;
                    }
                    _ => {}
                }
                let r = if matches!(l.peek(), Some(b'\'' | b'"')) {
                    quoted_call(&mut l)
                } else {
                    one_call(&mut l, text)
                };
                match r {
                    Ok(c) => push(c, l.pos, calls),
                    // One malformed call in a list is its own error; its neighbours are
                    // read (a cut-off one still ends the list: nothing after it is there).
                    // Skipped from its start, so brackets it breaks off inside are passed.
                    Err(m) if matches!(m.err, LitErr::Bad(..)) => {
                        l.pos = m.at;
                        if !skip_item(&mut l) {
                            return fail(m, calls);
                        }
                        bad.push(lit::value_error(
                            m.err,
                            m.at,
                            false,
                            "a pythonic call",
                            HINT,
                        ));
                    }
                    Err(m) => return fail(m, calls),
                }
                l.ws();
                match l.peek() {
                    Some(b',' | b';') => l.pos += 1,
                    Some(b']') => {}
                    None => {
                        return fail(
                            Miss {
                                err: LitErr::Cut,
                                at: l.pos,
                                begun: true,
                            },
                            calls,
                        )
                    }
                    Some(_) => {
                        let at = l.pos;
                        return fail(
                            Miss {
                                err: LitErr::Bad(at, "expected ',' or ']'".into()),
                                at,
                                begun: true,
                            },
                            calls,
                        );
                    }
                }
            }
        } else {
            if !starts_known && !call_starts(&l, false) {
                break;
            }
            match one_call(&mut l, text) {
                Ok(c) => push(c, l.pos, calls),
                // In a call tag (one call a line, OLMo 3), a malformed call is its own
                // error and the calls on the next lines are read.
                Err(m) if region && m.begun && matches!(m.err, LitErr::Bad(..)) => {
                    skip_line(&mut l);
                    bad.push(lit::value_error(
                        m.err,
                        m.at,
                        false,
                        "a pythonic call",
                        HINT,
                    ));
                }
                Err(m) => return fail(m, calls),
            }
        }
        end = l.pos;
        // Another call or list: after `,`/`;` on the same line, or on the next lines.
        l.blanks();
        while matches!(l.peek(), Some(b',' | b';')) {
            l.pos += 1;
            l.blanks();
        }
        let mut next = l.clone();
        next.ws();
        starts_known = call_starts(&next, false);
        if starts_known
            || (next.peek() == Some(b'[') && {
                let mut p = next.clone();
                p.pos += 1;
                p.ws();
                call_starts(&p, true)
            })
        {
            l = next;
            continue;
        }
        if calls.len() == base {
            return match bad.into_iter().next() {
                Some(d) => Lead::Error(d),
                None => Lead::No,
            };
        }
        return Lead::Calls {
            calls: Vec::new(),
            end,
            prose: Vec::new(),
            diags: bad,
        };
    }
    if calls.len() == base {
        match bad.into_iter().next() {
            Some(d) => Lead::Error(d),
            None => Lead::No,
        }
    } else {
        // A list opener with no call in it after the calls: they end before it.
        let end = calls[base..].last().map_or(from, |c| c.span.end);
        Lead::Calls {
            calls: Vec::new(),
            end,
            prose: Vec::new(),
            diags: bad,
        }
    }
}

/// Reads the pythonic calls that fill a region (`text[from..to]`: LFM2's, OLMo 3's,
/// Gemma 3's fence, Llama 4's `<|python_start|>`), marked as `source`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_region(
    text: &str,
    from: usize,
    to: usize,
    source: Format,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let base = out.len();
    match lead_into(text, from, to, true, out) {
        Lead::Calls { diags: d, .. } => {
            diags.extend(d);
            for c in &mut out[base..] {
                c.source = source;
                c.span = span;
                c.block = block;
            }
        }
        Lead::Error(d) => diags.push(d),
        Lead::No => diags.push(lit::value_error(
            if to >= text.len() {
                LitErr::Cut
            } else {
                LitErr::Bad(from, "no call in it".into())
            },
            from,
            to >= text.len(),
            &format!("a {} call", source.name()),
            HINT,
        )),
    }
}

/// Llama 4's `<|python_start|>` … `<|python_end|>` around a pythonic list.
pub(crate) fn read_python_start(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    read_region(
        text,
        content,
        close,
        Format::Pythonic,
        block,
        span,
        diags,
        out,
    );
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Pythonic,
    name: "pythonic",
    aliases: &["python", "llama4"],
    auto: Auto::InText,
    reader: Reader::Leading,
    exact_keys: false,
    leading: Some(lead),
    names_as_written: true,
    also: &[RegionSyntax::new(
        Open::Exact(b"<|python_start|>"),
        Close::Exact(b"<|python_end|>"),
        read_python_start,
        "<|python_start|>",
        (
            "<|python_start|> has no <|python_end|>; its complete calls were read up to the end of the text",
            "End the calls with <|python_end|>.",
        ),
    )],
    lesson: super::Lesson::wire(
        |name, args| format!("[{}]", super::teach::python_call(name, args)),
        "To use tools or skills, begin your answer with a Python list of calls, [tool_name(parameter=value, …), …], with keyword arguments and Python literals (strings in quotes, numbers, True, False, None, lists, dicts); an explanation may follow on the next lines. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("pythonic"),
};

/// Moves past a malformed call to the end of its line (outside strings and brackets), or
/// of the text.
fn skip_line(l: &mut Lit<'_>) {
    skip_to(l, b"\n");
}

/// Moves past one item of a list (to its `,` or the list's `]`, outside strings and
/// brackets); false when the list never ends.
fn skip_item(l: &mut Lit<'_>) -> bool {
    skip_to(l, b",]")
}

/// Moves to the first of `stops` outside strings and brackets (a closing bracket among
/// them counts only where it closes nothing opened after the cursor); false (the cursor at
/// the end) when there is none.
fn skip_to(l: &mut Lit<'_>, stops: &[u8]) -> bool {
    let mut depth = 0u32;
    let mut quote = 0u8;
    while let Some(b) = l.peek() {
        if quote != 0 {
            if b == b'\\' {
                l.pos += 1;
            } else if b == quote {
                quote = 0;
            }
        } else {
            match b {
                b'\'' | b'"' => quote = b,
                b'(' | b'[' | b'{' => depth += 1,
                _ if depth == 0 && stops.contains(&b) => return true,
                b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        l.pos += 1;
    }
    l.pos = l.end;
    false
}
