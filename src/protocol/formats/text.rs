//! What the tag-per-argument forms share (Qwen3-Coder's `<parameter=…>`, GLM-4.5's
//! `<arg_key>`/`<arg_value>`, MiniMax-M2's and Step-3's `<parameter name="…">`): a value
//! is the raw text between its tags, so its type comes from the tool's schema when the
//! tool is known (the ToolManager converts [`Call::texts`], so a string parameter keeps
//! the text as written, quotes and all), and with no schema a value that is a JSON
//! literal (number, `true`, `null`, object, array, quoted string) is read as one, anything
//! else is a string. The text keeps its inner newlines, minus one leading and one
//! trailing newline (an indented layout loses its indent: [`trim_one_newline`]).

use std::fmt::Write;

use serde_json::Map;

use super::lit;
use crate::protocol::args::Args;
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The value between its tags: one leading and one trailing line break dropped. When the
/// closing tag stands indented on a line of its own (`\n        </parameter>`), the value
/// is laid out with that indent: the line break and blanks before the closing tag are
/// dropped, and so are up to as many blanks at the value's start (as SGLang reads it).
pub(crate) fn trim_one_newline(v: &str) -> &str {
    let v = v
        .strip_prefix("\r\n")
        .or_else(|| v.strip_prefix('\n'))
        .unwrap_or(v);
    // Only a value that ends in blanks can end in an indent (most end in text or a line
    // break: no search back for the line break).
    let nl = match v.as_bytes().last() {
        Some(b' ' | b'\t') => memchr::memrchr(b'\n', v.as_bytes()),
        _ => None,
    };
    if let Some(nl) = nl {
        let indent = &v[nl + 1..];
        if !indent.is_empty() && indent.bytes().all(|b| b == b' ' || b == b'\t') {
            let body = &v[..nl];
            let body = body.strip_suffix('\r').unwrap_or(body);
            let lead = body
                .bytes()
                .take(indent.len())
                .take_while(|b| *b == b' ' || *b == b'\t')
                .count();
            return &body[lead..];
        }
    }
    v.strip_suffix("\r\n")
        .or_else(|| v.strip_suffix('\n'))
        .unwrap_or(v)
}

/// A Seed-OSS value: its template writes a value right between its tags
/// (`<parameter=k>v</parameter>`), so a line break that ends it is the value's own (as
/// llama.cpp reads it); a value written on lines of its own (Qwen3-Coder's way) loses its
/// line breaks as [`trim_one_newline`] says.
pub(crate) fn trim_seed_value(v: &str) -> &str {
    if v.starts_with('\n') || v.starts_with("\r\n") {
        trim_one_newline(v)
    } else {
        v
    }
}

/// The blanks and `=` (`=`, ` = `) or ` name=` that follow a Qwen3 tag's word
/// (`<function`, `<parameter`) at `at`: where its name starts.
fn name_eq_at(s: &[u8], at: usize, to: usize) -> Option<usize> {
    let blank = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let skip = |mut i: usize| {
        while i < to && blank(s[i]) {
            i += 1;
        }
        i
    };
    let i = skip(at);
    let i = if i < to && s[i] == b'=' {
        i
    } else if i > at && tag_at(s, i, to, b"name") {
        let j = skip(i + 4);
        if j < to && s[j] == b'=' {
            j
        } else {
            return None;
        }
    } else {
        return None;
    };
    Some(skip(i + 1))
}

/// A Qwen3 tag's name as written between its `=` and `>`: blanks and one pair of quotes
/// (`name="send"`) dropped.
pub(crate) fn tag_name(raw: &str) -> &str {
    let t = raw.trim();
    match t.as_bytes() {
        [q @ (b'"' | b'\''), .., e] if q == e && t.len() >= 2 => t[1..t.len() - 1].trim(),
        _ => t,
    }
}

/// The first opening tag `word` (`<function`, `<parameter`) in `s[from..to]` followed by
/// its `=` or ` name=`: where it starts and where its name starts.
fn find_open_ci(s: &[u8], from: usize, to: usize, word: &[u8]) -> Option<(usize, usize)> {
    let mut k = from;
    loop {
        let p = find_ci(s, k, to, word)?;
        if let Some(n) = name_eq_at(s, p + word.len(), to) {
            return Some((p, n));
        }
        k = p + 1;
    }
}

/// The first of a closing tag `close` and an opening tag `word` (followed by its `=` or
/// ` name=`) in `s[from..to]`: `(offset, true)` for the closing one.
fn find_close_or_open_ci(
    s: &[u8],
    from: usize,
    to: usize,
    close: &[u8],
    word: &[u8],
) -> Option<(usize, bool)> {
    let mut k = from;
    while k < to {
        let p = k + memchr::memchr(b'<', &s[k..to])?;
        if tag_at(s, p, to, close) {
            return Some((p, true));
        }
        if tag_at(s, p, to, word) && name_eq_at(s, p + word.len(), to).is_some() {
            return Some((p, false));
        }
        k = p + 1;
    }
    None
}

/// What [`next_part`] found in a Qwen3 function.
enum Part {
    /// A `<parameter=`, its name starting at the offset.
    Param(usize),
    /// `</function`.
    End,
    /// The next `<function=`.
    Function,
}

/// The next part of a Qwen3 function at or after `from`: a parameter, its end, or the next
/// function.
fn next_part(s: &[u8], from: usize, to: usize) -> Option<(usize, Part)> {
    let mut k = from;
    while k < to {
        let p = k + memchr::memchr(b'<', &s[k..to])?;
        if tag_at(s, p, to, b"</function") {
            return Some((p, Part::End));
        }
        if tag_at(s, p, to, b"<parameter") {
            if let Some(n) = name_eq_at(s, p + b"<parameter".len(), to) {
                return Some((p, Part::Param(n)));
            }
        } else if tag_at(s, p, to, b"<function")
            && name_eq_at(s, p + b"<function".len(), to).is_some()
        {
            return Some((p, Part::Function));
        }
        k = p + 1;
    }
    None
}

/// Where a Qwen3 parameter's value that starts at `from` ends: `(offset, true)` at its
/// `</parameter`, `(offset, false)` at the next `<parameter=` or `</function` (no closing
/// tag); `None` when none follows.
fn value_end(s: &[u8], from: usize, to: usize) -> Option<(usize, bool)> {
    let mut k = from;
    while k < to {
        let p = k + memchr::memchr(b'<', &s[k..to])?;
        if tag_at(s, p, to, b"</parameter") {
            return Some((p, true));
        }
        if tag_at(s, p, to, b"</function")
            || (tag_at(s, p, to, b"<parameter")
                && name_eq_at(s, p + b"<parameter".len(), to).is_some())
        {
            return Some((p, false));
        }
        k = p + 1;
    }
    None
}

/// True when `content` starts (after blanks) with a Qwen3 `<function=…>` tag, in its
/// `=NAME` or `name="NAME"` spelling.
pub(crate) fn starts_with_function(content: &str) -> bool {
    let t = content.trim_start().as_bytes();
    tag_at(t, 0, t.len(), b"<function") && name_eq_at(t, b"<function".len(), t.len()).is_some()
}

/// The arguments of one call whose values are written as text, kept as one JSON object
/// of the texts ([`Args::from_texts`]): the call's map, and the texts the ToolManager
/// converts by a schema, are built from it only when something reads them.
#[derive(Debug, Default)]
pub(crate) struct TextArgs {
    /// `{"key":"text",…` without its closing brace; empty for no arguments.
    json: String,
    /// Seed-OSS' values ([`trim_seed_value`]).
    seed: bool,
}

impl TextArgs {
    /// Arguments whose values are trimmed as Seed-OSS' are ([`trim_seed_value`]).
    pub(crate) fn seed() -> Self {
        TextArgs {
            json: String::new(),
            seed: true,
        }
    }

    /// Adds `key` with its value as written between the tags.
    pub(crate) fn push(&mut self, key: &str, raw: &str) {
        let t = if self.seed {
            trim_seed_value(raw)
        } else {
            trim_one_newline(raw)
        };
        self.json.push(if self.json.is_empty() { '{' } else { ',' });
        push_json_str(&mut self.json, key.trim());
        self.json.push(':');
        push_json_str(&mut self.json, t);
    }

    /// The call.
    pub(crate) fn call(mut self, tool: String, source: Format, span: Span, block: usize) -> Call {
        if self.json.is_empty() {
            return lit::call(tool, Map::new(), source, span, block);
        }
        self.json.push('}');
        let args = Args::from_texts(&self.json);
        let texts = args.texts();
        let mut c = lit::call(tool, args, source, span, block);
        c.texts = texts;
        c
    }
}

/// Appends `s` to `out` as a JSON string, quotes included.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let b = s.as_bytes();
    let mut run = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &str = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{c:04x}"); // writing to a String cannot fail
        } else {
            out.push_str(esc);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// The offset of `pat` in `s[from..to]`.
///
/// The tags looked for are short and near (the next `</arg_value>`, `>`): a search for
/// their first byte, then a compare, is quicker than setting up `memmem`'s searcher for
/// each one, which was a fifth of reading GLM-4.5's tags.
pub(crate) fn find(s: &[u8], from: usize, to: usize, pat: &[u8]) -> Option<usize> {
    let hay = s.get(from..to.min(s.len()))?;
    if hay.is_empty() {
        return None;
    }
    let Some((&first, rest)) = pat.split_first() else {
        return Some(from);
    };
    let mut k = 0;
    while let Some(i) = memchr::memchr(first, &hay[k..]) {
        let p = k + i;
        if hay[p + 1..].starts_with(rest) {
            return Some(from + p);
        }
        k = p + 1;
    }
    None
}

/// True when `s[at..to]` starts with `pat`, its ASCII letters matched in any case.
fn tag_at(s: &[u8], at: usize, to: usize, pat: &[u8]) -> bool {
    at + pat.len() <= to && s[at..at + pat.len()].eq_ignore_ascii_case(pat)
}

/// The first of two tags (both starting with `<`) in `s[from..to]`, their ASCII letters
/// matched in any case: `(offset, true)` for `a`, `(offset, false)` for `b`.
fn find_either_ci(s: &[u8], from: usize, to: usize, a: &[u8], b: &[u8]) -> Option<(usize, bool)> {
    let mut k = from;
    while k < to {
        let p = k + memchr::memchr(b'<', &s[k..to])?;
        if tag_at(s, p, to, a) {
            return Some((p, true));
        }
        if tag_at(s, p, to, b) {
            return Some((p, false));
        }
        k = p + 1;
    }
    None
}

/// The offset of `pat` in `s[from..to]`, its ASCII letters matched in any case.
pub(crate) fn find_ci(s: &[u8], from: usize, to: usize, pat: &[u8]) -> Option<usize> {
    let mut k = from;
    let (lo, up) = (pat[0].to_ascii_lowercase(), pat[0].to_ascii_uppercase());
    while k < to {
        let i = if lo == up {
            memchr::memchr(lo, &s[k..to])?
        } else {
            memchr::memchr2(lo, up, &s[k..to])?
        };
        let p = k + i;
        if p + pat.len() <= to && s[p..p + pat.len()].eq_ignore_ascii_case(pat) {
            return Some(p);
        }
        k = p + 1;
    }
    None
}

/// The error for a call whose text ended inside it.
pub(crate) fn cut(at: usize, name: &str, hint: &str) -> RawDiag {
    RawDiag::error(
        at,
        format!("the output was cut off inside the call to '{name}'; it was not executed"),
        format!("The text ended before the call was complete. {hint}"),
    )
}

/// The error for a call that could not be read.
pub(crate) fn bad(at: usize, what: &str, hint: &str) -> RawDiag {
    RawDiag::error(at, format!("{what}; it was not executed"), hint.to_string())
}

/// Reads `<fun=NAME>` … `<param=KEY>value</param>` … `</fun>` calls (Qwen3-Coder's
/// `<function=…>`/`<parameter=…>`, also spelt `<function = NAME>` or
/// `<function name="NAME">`) in `text[from..to]`, each its own call: a broken one
/// is a diagnostic and its neighbours are read. `from` may stand right after a
/// `<function=NAME>` tag the scanner already read (`name`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_param_calls(
    text: &str,
    from: usize,
    to: usize,
    name: Option<(String, usize)>,
    source: Format,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    read_params(text, from, to, name, source, false, block, span, diags, out);
}

/// [`read_param_calls`] in a Seed-OSS `<seed:tool_call>`: its values are trimmed as
/// [`trim_seed_value`] says.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_seed_param_calls(
    text: &str,
    from: usize,
    to: usize,
    source: Format,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    read_params(text, from, to, None, source, true, block, span, diags, out);
}

#[allow(clippy::too_many_arguments)]
fn read_params(
    text: &str,
    from: usize,
    to: usize,
    mut name: Option<(String, usize)>,
    source: Format,
    seed: bool,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    const HINT: &str = "Write <function=ToolId><parameter=name>value</parameter></function>.";
    let s = text.as_bytes();
    let ended = to >= text.len();
    let mut pos = from;
    loop {
        let (tool, at) = match name.take() {
            Some(n) => n,
            None => {
                let Some((p, n0)) = find_open_ci(s, pos, to, b"<function") else {
                    return;
                };
                let Some(gt) = find(s, n0, to, b">") else {
                    diags.push(if ended {
                        cut(p, "?", HINT)
                    } else {
                        bad(p, "a <function=…> tag is not closed with '>'", HINT)
                    });
                    return;
                };
                pos = gt + 1;
                (lit::unescape_name(tag_name(&text[n0..gt])), p)
            }
        };
        // The function's parts in order: a parameter, whose value may hold any text but
        // its closing tag, the next parameter and `</function` (a `<function=` in it is
        // text, as vLLM, SGLang and llama.cpp read it); then the function's end, its
        // `</function` or where the next `<function=` starts.
        let mut args = if seed {
            TextArgs::seed()
        } else {
            TextArgs::default()
        };
        let mut p = pos;
        let mut broken = None;
        let function_end =
            |from: usize| match find_close_or_open_ci(s, from, to, b"</function", b"<function") {
                Some((e, true)) => (e, e),
                Some((n, false)) => (find_ci(s, n, to, b"</function").unwrap_or(to), n),
                None => (to, to),
            };
        let (fun_end, next_fun) = loop {
            let Some((q, part)) = next_part(s, p, to) else {
                break (to, to);
            };
            let k0 = match part {
                Part::End => break (q, q),
                Part::Function => break function_end(q),
                Part::Param(k0) => k0,
            };
            let Some(gt) = find(s, k0, to, b">") else {
                broken = Some(q);
                break function_end(q);
            };
            let key = tag_name(&text[k0..gt]);
            let v0 = gt + 1;
            // The value ends at its `</parameter` or, unclosed, at the next parameter or
            // the function's end.
            match value_end(s, v0, to) {
                Some((c, true)) => {
                    args.push(key, &text[v0..c]);
                    p = find(s, c, to, b">").map_or(to, |g| g + 1);
                }
                None if ended => {
                    broken = Some(q);
                    break (to, to);
                }
                unclosed => {
                    // No closing tag: the value runs to the next parameter or the end of
                    // the function.
                    let next = unclosed.map_or(to, |(n, _)| n);
                    args.push(key, text[v0..next].trim_end_matches([' ', '\t']));
                    p = next;
                }
            }
        };
        match broken {
            _ if ended && fun_end == to => diags.push(cut(broken.unwrap_or(at), &tool, HINT)),
            Some(q) => diags.push(bad(
                q,
                &format!("a parameter of '{tool}' could not be read"),
                HINT,
            )),
            None if tool.is_empty() => {
                diags.push(bad(at, "a <function=…> tag names no tool", HINT))
            }
            None => {
                out.push(args.call(tool, source, span, block));
            }
        }
        pos = if next_fun < fun_end {
            next_fun
        } else if fun_end < to {
            fun_end + 1
        } else {
            return;
        };
    }
}

/// Reads `<PREFIXinvoke name="NAME">` … `<PREFIXparameter name="KEY">value</PREFIXparameter>`
/// … `</PREFIXinvoke>` calls (MiniMax-M2 with no prefix, Step-3 with `steptml:`) in
/// `text[from..to]`, each its own call.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_invokes(
    text: &str,
    from: usize,
    to: usize,
    prefix: &str,
    source: Format,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let s = text.as_bytes();
    let ended = to >= text.len();
    let invoke = format!("<{prefix}invoke");
    let invoke_end = format!("</{prefix}invoke");
    let param = format!("<{prefix}parameter");
    let param_end = format!("</{prefix}parameter");
    let hint = format!(
        "Write <{prefix}invoke name=\"ToolId\"><{prefix}parameter name=\"key\">value</{prefix}parameter></{prefix}invoke>."
    );
    let mut pos = from;
    let mut any = false;
    while let Some(p) = find_ci(s, pos, to, invoke.as_bytes()) {
        any = true;
        let Some((tool, body)) = named_tag(text, p + invoke.len(), to) else {
            diags.push(if ended && find(s, p, to, b">").is_none() {
                cut(p, "?", &hint)
            } else {
                bad(
                    p,
                    &format!("a <{prefix}invoke> tag has no name=\"…\""),
                    &hint,
                )
            });
            pos = p + 1;
            continue;
        };
        let (inv_end, next_inv) =
            match find_either_ci(s, body, to, invoke_end.as_bytes(), invoke.as_bytes()) {
                Some((e, true)) => (e, e),
                Some((n, false)) => (find_ci(s, n, to, invoke_end.as_bytes()).unwrap_or(to), n),
                None => (to, to),
            };
        let body_end = next_inv.min(inv_end);
        let mut args = TextArgs::default();
        let mut q = body;
        let mut broken = None;
        while let Some(r) = find_ci(s, q, body_end, param.as_bytes()) {
            let Some((key, v0)) = named_tag(text, r + param.len(), body_end) else {
                broken = Some(r);
                break;
            };
            match find_ci(s, v0, body_end, param_end.as_bytes()) {
                Some(c) => {
                    let c = real_close(s, c, body_end, param_end.as_bytes()).unwrap_or(c);
                    args.push(&key, &text[v0..c]);
                    q = find(s, c, body_end, b">").map_or(body_end, |g| g + 1);
                }
                None => {
                    broken = Some(r);
                    break;
                }
            }
        }
        match broken {
            _ if ended && inv_end == to => diags.push(cut(broken.unwrap_or(p), &tool, &hint)),
            Some(r) => diags.push(bad(
                r,
                &format!("a parameter of '{tool}' could not be read"),
                &hint,
            )),
            None => out.push(args.call(tool, source, span, block)),
        }
        pos = if next_inv < inv_end {
            next_inv
        } else if inv_end < to {
            inv_end + 1
        } else {
            break;
        };
    }
    if !any {
        diags.push(if ended {
            RawDiag::error(
                from,
                format!(
                    "the output was cut off inside a {} call; it was not executed",
                    source.name()
                ),
                hint,
            )
        } else {
            bad(from, &format!("no <{prefix}invoke> call in it"), &hint)
        });
    }
}

/// The first closing tag `close` at or after `from` (where one stands) that a tag or the
/// end of the call follows (blanks between allowed): a `</parameter>` with text after it
/// is part of the value (`contains </parameter> in it`, as SGLang reads it).
fn real_close(s: &[u8], from: usize, to: usize, close: &[u8]) -> Option<usize> {
    let mut c = from;
    loop {
        // `close` is at `c`: its `>` comes after it.
        let mut e = find(s, (c + close.len()).min(to), to, b">").map_or(to, |g| g + 1);
        while e < to && matches!(s[e], b' ' | b'\t' | b'\r' | b'\n') {
            e += 1;
        }
        if e >= to || s[e] == b'<' {
            return Some(c);
        }
        c = find_ci(s, c + 1, to, close)?;
    }
}

/// After a tag's name (`<invoke`), its ` name="…"` attribute and `>`: the name and where
/// the tag's content starts.
fn named_tag(text: &str, at: usize, to: usize) -> Option<(String, usize)> {
    let s = text.as_bytes();
    let gt = find(s, at, to, b">")?;
    let attrs = text[at..gt].trim();
    let rest = attrs
        .strip_prefix("name")?
        .trim_start()
        .strip_prefix('=')?
        .trim();
    let name = match rest.as_bytes().first() {
        Some(&q @ (b'"' | b'\'')) => {
            let inner = &rest[1..];
            &inner[..inner.find(q as char)?]
        }
        _ => rest.trim_end_matches('/'),
    };
    let name = name.trim();
    (!name.is_empty()).then(|| (name.to_string(), gt + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `find` finds what `memmem` finds, within the bounds given.
    #[test]
    fn find_agrees_with_memmem() {
        let s = b"<a<arg_key>k</arg_key><<</arg_value>x</arg_value>";
        for pat in [&b"</arg_value>"[..], b"<", b"<<", b"x", b"</arg_keyz", b""] {
            for from in 0..s.len() {
                for to in from..=s.len() + 2 {
                    let want = if from >= to.min(s.len()) {
                        None
                    } else {
                        memchr::memmem::find(&s[from..to.min(s.len())], pat).map(|i| from + i)
                    };
                    assert_eq!(find(s, from, to, pat), want, "{pat:?} {from}..{to}");
                }
            }
        }
    }
}
