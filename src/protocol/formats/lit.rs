//! The tolerant literal reader the native formats share: JSON and Python-dict-like JSON
//! (single quotes, `True`, `None`, tuples as arrays, trailing commas), identifiers as
//! models write them (`forge.smelt`, `forge\_smelt`), the `{"name", "arguments"}` call
//! object every JSON-shaped format uses, and a resumable finder for where a bracketed
//! value ends (for regions with no closing tag, read while streaming).
//!
//! Nothing here evaluates anything: a value that is not a literal is kept as its source
//! text. A reader that reaches the end of the text inside a value says so
//! ([`LitErr::Cut`]) instead of guessing.

use serde_json::{Map, Number, Value};

use crate::protocol::args::Args;
use crate::protocol::types::{Call, Format, OnError, RawDiag, Span};

/// Nesting deeper than this is refused (no reader recurses without bound). Below
/// serde_json's limit (it reads 127 levels), so what the literal writer writes, inside
/// one arguments object, always reads back.
pub(crate) const MAX_DEPTH: u32 = 100;

/// Why a literal could not be read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LitErr {
    /// The text ended inside the value.
    Cut,
    /// Something else is wrong, at this offset.
    Bad(usize, String),
}

/// How the message of a literal JSON cannot hold begins (a bytes literal, a number out
/// of range): an argument that is one makes its call an error, not source text.
pub(crate) const NOT_JSON: &str = "JSON cannot hold";

/// A cursor over one text.
#[derive(Debug, Clone)]
pub(crate) struct Lit<'a> {
    pub s: &'a [u8],
    pub pos: usize,
    /// Where the readable part ends (a region's closing tag).
    pub end: usize,
    depth: u32,
    /// True when a single-quoted string may span lines: inside a region that holds
    /// only calls (a tag's), where an apostrophe is no prose's.
    pub lines: bool,
}

/// True for the bytes an identifier continues with (ASCII letters, digits, `_`, and
/// anything non-ASCII, so names in any script read whole).
#[inline]
pub(crate) fn is_ident_byte(b: u8) -> bool {
    IDENT[usize::from(b)]
}

/// [`is_ident_byte`] as a table (names are scanned a byte at a time).
static IDENT: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
        i += 1;
    }
    t
};

/// True for the bytes a number is read over (see `Lit::number`).
fn is_number_byte(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'_')
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

impl<'a> Lit<'a> {
    /// A cursor over `s[pos..end]`.
    pub(crate) fn new(s: &'a [u8], pos: usize, end: usize) -> Self {
        Lit {
            s,
            pos,
            end: end.min(s.len()),
            depth: 0,
            lines: false,
        }
    }

    /// The byte at the cursor.
    pub(crate) fn peek(&self) -> Option<u8> {
        (self.pos < self.end).then(|| self.s[self.pos])
    }

    /// The byte `k` past the cursor.
    pub(crate) fn peek_at(&self, k: usize) -> Option<u8> {
        (self.pos + k < self.end).then(|| self.s[self.pos + k])
    }

    /// True when the cursor is at the end.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    /// Skips blanks and line breaks.
    pub(crate) fn ws(&mut self) {
        while self.pos < self.end && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    /// Skips spaces and tabs only.
    pub(crate) fn blanks(&mut self) {
        while self.pos < self.end && matches!(self.s[self.pos], b' ' | b'\t') {
            self.pos += 1;
        }
    }

    /// True (and past it) when `pat` is at the cursor.
    pub(crate) fn eat(&mut self, pat: &[u8]) -> bool {
        if self.s[self.pos.min(self.end)..self.end].starts_with(pat) {
            self.pos += pat.len();
            true
        } else {
            false
        }
    }

    fn bad<T>(&self, msg: impl Into<String>) -> Result<T, LitErr> {
        if self.at_end() {
            Err(LitErr::Cut)
        } else {
            Err(LitErr::Bad(self.pos, msg.into()))
        }
    }

    /// A name as models write tool names and keywords: identifier parts joined by `.`,
    /// `:` or `-`, a markdown-escaped underscore (`\_`) read as `_`. `None` (cursor
    /// unmoved) when no identifier starts here.
    pub(crate) fn name(&mut self) -> Option<String> {
        let (start, end, escaped) = self.skip_name()?;
        let t = text_of(&self.s[start..end]);
        Some(if escaped {
            unescape_name(&t)
        } else {
            t.into_owned()
        })
    }

    /// Moves past a [`name`](Self::name) without building it: its byte range and whether
    /// it holds a markdown-escaped underscore. `None` (cursor unmoved) when no identifier
    /// starts here.
    pub(crate) fn skip_name(&mut self) -> Option<(usize, usize, bool)> {
        let s = &self.s[..self.end];
        let start = self.pos;
        let mut p = start;
        let mut escaped = false;
        loop {
            let part_start = p;
            loop {
                while p < s.len() && is_ident_byte(s[p]) {
                    p += 1;
                }
                if s.get(p) == Some(&b'\\') && s.get(p + 1) == Some(&b'_') {
                    p += 2;
                    escaped = true;
                    continue;
                }
                break;
            }
            if p == part_start || s[part_start].is_ascii_digit() {
                return None;
            }
            // A separator counts only when a name part follows it.
            match (s.get(p), s.get(p + 1)) {
                (Some(b'.' | b':' | b'-'), Some(&n)) if is_ident_start(n) || n == b'\\' => {
                    p += 1;
                }
                _ => break,
            }
        }
        self.pos = p;
        Some((start, p, escaped))
    }

    /// A quoted string (`'…'`, `"…"`, triple quotes, an `r`/`u`/`b`/`f` prefix), its
    /// escapes decoded as Python and JSON decode them. The cursor is on the prefix or
    /// the quote.
    pub(crate) fn string(&mut self) -> Result<String, LitErr> {
        self.string_bytes().map(|b| text_of(&b).into_owned())
    }

    /// [`string`](Self::string)'s bytes: borrowed from the text when it holds no
    /// escape.
    fn string_bytes(&mut self) -> Result<std::borrow::Cow<'a, [u8]>, LitErr> {
        let mut raw = false;
        while let Some(b) = self.peek() {
            match b {
                b'r' | b'R' => raw = true,
                b'u' | b'U' | b'b' | b'B' | b'f' | b'F' => {}
                _ => break,
            }
            self.pos += 1;
        }
        let q = match self.peek() {
            Some(q @ (b'"' | b'\'')) => q,
            _ => return self.bad("expected a string"),
        };
        let triple = self.peek_at(1) == Some(q) && self.peek_at(2) == Some(q);
        self.pos += if triple { 3 } else { 1 };
        if !triple {
            // Most strings hold no escape: taken whole, up to the closing quote.
            let rest = &self.s[self.pos..self.end];
            // Short strings (most values) end within a few bytes: a plain loop finds
            // the quote sooner than a vector search is set up.
            let near = &rest[..rest.len().min(24)];
            let found = match near.iter().position(|&b| b == q || b == b'\\') {
                Some(i) => Some(i),
                None if near.len() < rest.len() => {
                    memchr::memchr2(q, b'\\', &rest[near.len()..]).map(|i| i + near.len())
                }
                None => None,
            };
            if let Some(i) = found {
                let body = &rest[..i];
                if rest[i] == q
                    && (q != b'\''
                        || (self.closes_at(self.pos + i + 1)
                            && (self.lines || memchr::memchr2(b'\n', b'\r', body).is_none())))
                {
                    self.pos += i + 1;
                    return Ok(std::borrow::Cow::Borrowed(body));
                }
            }
        }
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(LitErr::Cut);
            };
            if b == q {
                if !triple {
                    if q != b'\'' || self.closes_at(self.pos + 1) {
                        self.pos += 1;
                        break;
                    }
                    // A quote inside the string (`'sed -n '1,5p' f.py'`): kept.
                    out.push(b);
                    self.pos += 1;
                    continue;
                }
                if self.peek_at(1) == Some(q) && self.peek_at(2) == Some(q) {
                    self.pos += 3;
                    break;
                }
            }
            if b == b'\\' && !raw {
                let Some(e) = self.peek_at(1) else {
                    return Err(LitErr::Cut);
                };
                self.pos += 2;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'0' => out.push(0),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'\\' | b'\'' | b'"' | b'/' => out.push(e),
                    b'\n' => {}
                    b'x' => {
                        let c = self.hex(2)?;
                        push_char(&mut out, c);
                    }
                    b'u' => {
                        let mut c = self.hex(4)?;
                        if (0xD800..0xDC00).contains(&c) && self.eat(b"\\u") {
                            let lo = self.hex(4)?;
                            if (0xDC00..0xE000).contains(&lo) {
                                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                            }
                        }
                        push_char(&mut out, c);
                    }
                    // Python keeps an unknown escape as written.
                    _ => {
                        out.push(b'\\');
                        out.push(e);
                    }
                }
                continue;
            }
            if (b == b'\n' || b == b'\r') && !triple && q == b'\'' && !self.lines {
                // A single-quoted string spans no lines outside a call region: an
                // apostrophe in prose.
                return Err(LitErr::Bad(self.pos, "unterminated string".into()));
            }
            out.push(b);
            self.pos += 1;
        }
        Ok(std::borrow::Cow::Owned(out))
    }

    /// True when a single quote before `p` closes its string: what follows it (after
    /// blanks) is no word (a letter, digit, `_`, a quote, `/`, `\\`, `$`, `-`, `~`, `@`,
    /// `#` or any non-ASCII character): the end of a value (`,`, `)`, `]`, `}`, `:`), an
    /// operator (`'a' + b`, kept as source text) or the end of the text. A quote a word
    /// follows is one the model left unescaped in the text (`'sed -n '1,5p' f.py'`).
    fn closes_at(&self, p: usize) -> bool {
        self.s[p.min(self.end)..self.end]
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .is_none_or(|&b| !(is_ident_byte(b) || b"'\"/\\$-~@#".contains(&b)))
    }

    fn hex(&mut self, n: usize) -> Result<u32, LitErr> {
        if self.pos + n > self.end {
            return Err(LitErr::Cut);
        }
        let t = std::str::from_utf8(&self.s[self.pos..self.pos + n]).unwrap_or("");
        let v =
            u32::from_str_radix(t, 16).map_err(|_| LitErr::Bad(self.pos, "bad escape".into()))?;
        self.pos += n;
        Ok(v)
    }

    /// A number at the cursor written as serde_json writes the number it reads as,
    /// taken as it is; `None` (cursor unmoved) for any other number, which
    /// [`number`](Self::number) reads and writes. Plain here is `0` or an optional `-`
    /// and up to 18 digits with no leading zero (an `i64`); or a decimal under 10⁷, at
    /// least 0.1 (or `0.0`), of at most 15 significant digits and no trailing zero but
    /// in `N.0`: such a decimal is the shortest text of the `f64` it reads as, which is
    /// what serde_json writes (`fast_paths_write_what_serde_writes` checks the forms).
    fn plain_number(&mut self) -> Option<&'a [u8]> {
        let s = &self.s[self.pos..self.end];
        let digits_at = |i: usize| {
            s[i.min(s.len())..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let neg = usize::from(s.first() == Some(&b'-'));
        let int = digits_at(neg);
        let mut end = neg + int;
        let zero = s.get(neg) == Some(&b'0');
        if int == 0 || (zero && int > 1) {
            return None;
        }
        if s.get(end) == Some(&b'.') {
            let frac = digits_at(end + 1);
            let f = &s[end + 1..end + 1 + frac];
            let plain = match f {
                [] => false,
                [b'0'] => true,
                [.., last] => {
                    *last != b'0'
                        && int <= 7
                        && (!zero || f[0] != b'0')
                        && frac + if zero { 0 } else { int } <= 15
                }
            };
            if !plain {
                return None;
            }
            end += 1 + frac;
        } else if int > 18 || (zero && neg == 1) {
            return None;
        }
        // What `number` would read on (an exponent, `_`, a second `.`) makes it not plain.
        if s.get(end).is_some_and(|&b| is_number_byte(b)) {
            return None;
        }
        self.pos += end;
        Some(&s[..end])
    }

    fn number(&mut self) -> Result<Number, LitErr> {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if is_number_byte(b) {
                self.pos += 1;
            } else {
                break;
            }
        }
        let written = text_of(&self.s[start..self.pos]);
        let t = if written.contains('_') {
            std::borrow::Cow::Owned(written.replace('_', ""))
        } else {
            written
        };
        if let Ok(i) = t.parse::<i64>() {
            return Ok(i.into());
        }
        if let Ok(u) = t.parse::<u64>() {
            return Ok(u.into());
        }
        match t.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Ok(n),
            None => {
                self.pos = start;
                if t.parse::<f64>().is_ok_and(f64::is_infinite) {
                    return self.bad(format!("{NOT_JSON} the number '{t}' (out of range)"));
                }
                self.bad(format!("'{t}' is not a number"))
            }
        }
    }

    /// One JSON or Python literal (see [`write_value`](Self::write_value)) as a `Value`.
    pub(crate) fn value(&mut self) -> Result<Value, LitErr> {
        let at = self.pos;
        let mut out: Vec<u8> = Vec::new();
        self.write_value(&mut out)?;
        // The writer writes JSON nested at most `MAX_DEPTH` deep, which serde_json reads.
        serde_json::from_slice(&out).map_err(|e| LitErr::Bad(at, e.to_string()))
    }

    /// One JSON or Python literal — string, number, `True`/`False`/`None` (and JSON's
    /// spellings), list, tuple (an array), dict — written to `out` as compact JSON, the
    /// one form every caller wants it in: pythonic arguments are read as this JSON
    /// ([`Args`]), and a `Value` is that text read by serde_json. With [`Skip`] for `out`
    /// it reads (and accepts or refuses) exactly the same, writing nothing.
    pub(crate) fn write_value<O: Out>(&mut self, out: &mut O) -> Result<(), LitErr> {
        self.ws();
        let Some(b) = self.peek() else {
            return Err(LitErr::Cut);
        };
        match b {
            b'"' | b'\'' => self.write_string(out),
            b'{' => self.nested(out, |l, out| l.dict(out)),
            b'[' => self.nested(out, |l, out| l.seq(b']', out).map(|_| ())),
            b'(' => self.nested(out, |l, out| l.tuple(out)),
            b'-' | b'+' | b'.' | b'0'..=b'9' => {
                if let Some(t) = self.plain_number() {
                    out.bytes(t);
                    return Ok(());
                }
                let n = self.number()?;
                out.json(&n);
                Ok(())
            }
            _ if is_ident_start(b) => {
                let start = self.pos;
                self.pos += self.s[start..self.end]
                    .iter()
                    .position(|&b| !is_ident_byte(b))
                    .unwrap_or(self.end - start);
                let word = &self.s[start..self.pos];
                // A string prefix: r'…', b"…".
                if word.len() <= 2
                    && matches!(self.peek(), Some(b'"' | b'\''))
                    && word.iter().all(|c| b"rRuUbBfF".contains(c))
                {
                    self.pos = start;
                    if word.iter().any(|c| matches!(c, b'b' | b'B')) {
                        // Bytes are not text.
                        return self.bad(format!("{NOT_JSON} a bytes literal"));
                    }
                    return self.write_string(out);
                }
                let lit: &[u8] = match word {
                    b"True" | b"true" => b"true",
                    b"False" | b"false" => b"false",
                    b"None" | b"null" => b"null",
                    _ => {
                        self.pos = start;
                        return self.bad("not a literal");
                    }
                };
                out.bytes(lit);
                Ok(())
            }
            _ => self.bad("not a literal"),
        }
    }

    /// A quoted string at the cursor, written as a JSON string.
    fn write_string<O: Out>(&mut self, out: &mut O) -> Result<(), LitErr> {
        let b = self.string_bytes()?;
        out.json_str(&b);
        Ok(())
    }

    fn nested<O: Out>(
        &mut self,
        out: &mut O,
        f: impl FnOnce(&mut Self, &mut O) -> Result<(), LitErr>,
    ) -> Result<(), LitErr> {
        if self.depth >= MAX_DEPTH {
            return self.bad(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        self.depth += 1;
        let r = f(self, out);
        self.depth -= 1;
        r
    }

    /// Items up to `close`, written as a JSON array; the cursor is on the opening
    /// bracket. Returns how many there were.
    fn seq<O: Out>(&mut self, close: u8, out: &mut O) -> Result<usize, LitErr> {
        self.pos += 1;
        out.byte(b'[');
        let mut n = 0;
        loop {
            self.ws();
            match self.peek() {
                None => return Err(LitErr::Cut),
                Some(b) if b == close => {
                    self.pos += 1;
                    out.byte(b']');
                    return Ok(n);
                }
                _ => {}
            }
            if n > 0 {
                out.byte(b',');
            }
            self.write_value(out)?;
            n += 1;
            self.ws();
            match self.peek() {
                None => return Err(LitErr::Cut),
                Some(b',') => self.pos += 1,
                Some(b) if b == close => {}
                Some(_) => return self.bad("expected ',' between items"),
            }
        }
    }

    fn tuple<O: Out>(&mut self, out: &mut O) -> Result<(), LitErr> {
        let open = self.pos;
        let at = out.mark();
        let n = self.seq(b')', out)?;
        // `(x)` is x in Python; `(x,)` and `(x, y)` are tuples.
        let trailing_comma = self.s[open..self.pos - 1]
            .iter()
            .rev()
            .find(|b| !b.is_ascii_whitespace())
            == Some(&b',');
        if n == 1 && !trailing_comma {
            // Unwrap the one item: drop the `[` before it and the `]` after it.
            out.unwrap_one(at);
        }
        Ok(())
    }

    /// A dict, or a set (`{'a', 'b'}`), which JSON has not: written as an array.
    fn dict<O: Out>(&mut self, out: &mut O) -> Result<(), LitErr> {
        let open = self.pos;
        let at = out.mark();
        self.pos += 1;
        out.byte(b'{');
        let mut first = true;
        let mut key_text: Vec<u8> = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                None => return Err(LitErr::Cut),
                Some(b'}') => {
                    self.pos += 1;
                    out.byte(b'}');
                    return Ok(());
                }
                _ => {}
            }
            if !first {
                out.byte(b',');
            }
            first = false;
            let key_at = self.pos;
            match self.peek() {
                Some(b'"' | b'\'') => self.write_string(out)?,
                Some(b) if is_ident_start(b) => match self.skip_name() {
                    Some((s, e, false)) => out.json_str(&self.s[s..e]),
                    Some((s, e, true)) => out.json(&unescape_name(&text_of(&self.s[s..e]))),
                    None => return self.bad("expected a key"),
                },
                _ if !O::WRITES => self.write_value(out)?,
                _ => {
                    // Any other literal is keyed by its JSON text (`{1: 'a'}` → "1").
                    key_text.clear();
                    self.write_value(&mut key_text)?;
                    if key_text.first() == Some(&b'"') {
                        out.bytes(&key_text);
                    } else {
                        out.json(&*text_of(&key_text));
                    }
                }
            }
            self.ws();
            if !self.eat(b":") {
                // The first item then `,` or `}`: a set, read again as a list.
                if self.s[open + 1..key_at].iter().all(u8::is_ascii_whitespace)
                    && matches!(self.peek(), Some(b',' | b'}'))
                {
                    out.truncate(at);
                    self.pos = open;
                    return self.seq(b'}', out).map(|_| ());
                }
                return self.bad("expected ':' after a key");
            }
            out.byte(b':');
            self.write_value(out)?;
            self.ws();
            match self.peek() {
                None => return Err(LitErr::Cut),
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                Some(_) => return self.bad("expected ',' between entries"),
            }
        }
    }

    /// Skips one expression up to a top-level `,` or a closing bracket (not consumed),
    /// over nested brackets and strings; returns its source text, trimmed.
    pub(crate) fn source_text(&mut self) -> Result<String, LitErr> {
        let start = self.pos;
        let mut depth = 0u32;
        loop {
            let Some(b) = self.peek() else {
                return Err(LitErr::Cut);
            };
            match b {
                b'"' | b'\'' => {
                    self.string()?;
                    continue;
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' if depth == 0 => break,
                b')' | b']' | b'}' => depth -= 1,
                b',' if depth == 0 => break,
                _ => {}
            }
            self.pos += 1;
        }
        let t = text_of(&self.s[start..self.pos]);
        Ok(t.trim().to_string())
    }

    /// An argument of a pythonic call, written to `out` as JSON: a literal when it is one
    /// whole literal, otherwise its source text as a string (never evaluated).
    pub(crate) fn write_arg<O: Out>(&mut self, out: &mut O) -> Result<(), LitErr> {
        self.ws();
        let start = self.pos;
        let mark = out.mark();
        match self.write_value(out) {
            Ok(()) => {
                self.ws();
                if matches!(self.peek(), Some(b',' | b')')) {
                    return Ok(());
                }
            }
            // The argument is a literal JSON cannot hold: the call is an error, not source
            // text (one inside a list or dict leaves the argument no literal, as the
            // grammar reads it).
            Err(LitErr::Bad(at, m)) if at == start && m.starts_with(NOT_JSON) => {
                return Err(LitErr::Bad(at, m))
            }
            Err(_) => {}
        }
        out.truncate(mark);
        self.pos = start;
        let t = self.source_text()?;
        if t.is_empty() {
            return self.bad("expected a value");
        }
        out.json(&t);
        Ok(())
    }
}

/// Where the literal writer writes: JSON text into a `Vec<u8>`, or nowhere ([`Skip`]).
/// Both read the same text the same way, so what `Skip` accepts, the writer writes.
pub(crate) trait Out {
    /// False for [`Skip`], which writes nothing.
    const WRITES: bool;
    /// Appends bytes that are already JSON.
    fn bytes(&mut self, b: &[u8]);
    /// Appends one byte of JSON.
    fn byte(&mut self, b: u8);
    /// Appends UTF-8 text as a JSON string ([`write_json_str`]).
    fn json_str(&mut self, b: &[u8]);
    /// Appends a string or number as compact JSON ([`write_json`]).
    fn json<T: serde::Serialize + ?Sized>(&mut self, v: &T);
    /// How much was written so far (for [`truncate`](Out::truncate)).
    fn mark(&self) -> usize;
    /// Drops what was written after `mark`.
    fn truncate(&mut self, mark: usize);
    /// Turns the array written from `mark` on, one item, into that item.
    fn unwrap_one(&mut self, mark: usize);
}

impl Out for Vec<u8> {
    const WRITES: bool = true;
    fn bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
    fn json_str(&mut self, b: &[u8]) {
        write_json_str(self, b);
    }
    fn json<T: serde::Serialize + ?Sized>(&mut self, v: &T) {
        write_json(self, v);
    }
    fn mark(&self) -> usize {
        self.len()
    }
    fn truncate(&mut self, mark: usize) {
        Vec::truncate(self, mark);
    }
    fn unwrap_one(&mut self, mark: usize) {
        self.pop();
        self.remove(mark);
    }
}

/// The literal writer's sink that writes nothing: a read that only checks the text, for
/// arguments kept as their source ([`Args::from_source`]) and written as JSON when read.
pub(crate) struct Skip;

impl Out for Skip {
    const WRITES: bool = false;
    fn bytes(&mut self, _: &[u8]) {}
    fn byte(&mut self, _: u8) {}
    fn json_str(&mut self, _: &[u8]) {}
    fn json<T: serde::Serialize + ?Sized>(&mut self, _: &T) {}
    fn mark(&self) -> usize {
        0
    }
    fn truncate(&mut self, _: usize) {}
    fn unwrap_one(&mut self, _: usize) {}
}

/// Writes `v` as compact JSON.
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // Cannot fail: strings and numbers always serialize, and a Vec takes any write.
    serde_json::to_writer(out, v).expect("a string or number serializes into a Vec");
}

/// Writes `b`, UTF-8 text, as a JSON string exactly as serde_json writes a `str`
/// (`"`, `\\` and the control characters escaped, the short forms where JSON has
/// them, `\u00xx` for the others; everything else as it is), without checking it is
/// UTF-8 again: the readers' strings are cut from the text next to ASCII bytes, or
/// decoded escapes written as whole characters.
pub(crate) fn write_json_str(out: &mut Vec<u8>, b: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(b.len() + 2);
    out.push(b'"');
    let mut from = 0;
    for (i, &c) in b.iter().enumerate() {
        if !ESCAPED[usize::from(c)] {
            continue;
        }
        out.extend_from_slice(&b[from..i]);
        from = i + 1;
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 15)],
            ]),
        }
    }
    out.extend_from_slice(&b[from..]);
    out.push(b'"');
}

/// The bytes a JSON string escapes.
static ESCAPED: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i < 0x20 || i == b'"' as usize || i == b'\\' as usize;
        i += 1;
    }
    t
};

/// A tool name as written with its markdown-escaped underscores (`\\_`) read as `_`.
pub(crate) fn unescape_name(t: &str) -> String {
    if memchr::memchr(b'\\', t.as_bytes()).is_some() {
        t.replace("\\_", "_")
    } else {
        t.to_string()
    }
}

/// Bytes of the text as `str`. Readers cut the text only next to ASCII bytes, so this
/// is always valid UTF-8; `from_utf8`'s ASCII fast path is what makes it cheaper than
/// `String::from_utf8_lossy`, kept for the case that cannot happen.
pub(crate) fn text_of(b: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(b),
    }
}

fn push_char(out: &mut Vec<u8>, c: u32) {
    let ch = char::from_u32(c).unwrap_or('\u{FFFD}');
    let mut buf = [0u8; 4];
    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
}

/// A call object's tool and arguments, or what is wrong with it.
pub(crate) type CallParts = Result<(String, Args), String>;

/// The one call object at `s[start..end]` (after blanks), read as [`read_json_calls`]
/// reads them: its tool and arguments or what is wrong with it, and where it ended.
/// A call object is `{"name", "arguments"}` in any order, with `parameters` (Llama) or
/// `input` (Anthropic) for the arguments, an OpenAI `{"function": {…}}` wrapper, and
/// arguments given as a JSON text.
pub(crate) fn object_call(s: &str, start: usize, end: usize) -> Result<(CallParts, usize), LitErr> {
    let (items, e) = call_items(s, start, end)?;
    let call = match items {
        CallItems::One(c) => c.into_call(),
        CallItems::Many(_) => Err("expected an object".into()),
    };
    Ok((call, e))
}

/// Reads the arguments object at `s[start..end]` (after blanks) and keeps it as JSON
/// text (`Args::from_read_json`): as written when serde_json reads it (the fast
/// path), else as the tolerant reader writes it. `None` for a value that is not an
/// object. Returns where the value ended.
pub(crate) fn json_args(
    s: &str,
    start: usize,
    end: usize,
) -> Result<(Option<Args>, usize), LitErr> {
    let b = s.as_bytes();
    let mut l = Lit::new(b, start, end);
    l.ws();
    let at = l.pos;
    if let Some((args, e)) = Args::read_value(&s[at..end]) {
        return Ok((args, at + e));
    }
    let mut out = Vec::new();
    l.write_value(&mut out)?;
    if out.first() != Some(&b'{') {
        return Ok((None, l.pos));
    }
    // The writer's JSON nests at most `MAX_DEPTH` deep, so serde_json holds it.
    match std::str::from_utf8(&out)
        .ok()
        .and_then(Args::from_read_json)
    {
        Some(a) => Ok((Some(a), l.pos)),
        None => Err(LitErr::Bad(at, "the arguments could not be read".into())),
    }
}

/// A call object's parts, read straight from the text by serde (no `Value` is built for
/// the object itself, only for what it holds) or taken from a `Value` (the tolerant
/// reader's): a key written twice counts by its last value, as in a `Map`.
#[derive(Debug, Default)]
pub(crate) struct CallObj<'de> {
    /// False when the value was not an object at all.
    object: bool,
    /// `name`: `Some` of its text when it is a string.
    name: Option<Option<String>>,
    arguments: Option<Part<'de>>,
    parameters: Option<Part<'de>>,
    input: Option<Part<'de>>,
    /// `function` when it is an object (OpenAI's wrapper); any other `function` is ignored.
    function: Option<Box<CallObj<'de>>>,
    /// True when it has a `function_call` that is an object (the legacy OpenAI shape).
    function_call: bool,
    /// `id` when it is a string (OpenAI `tool_calls[].id`, Anthropic `tool_use.id`).
    id: Option<String>,
}

/// The keys of a call object, or of a JSON call document, that mean something.
pub(crate) enum Key {
    Name,
    Arguments,
    Parameters,
    Input,
    Function,
    FunctionCall,
    Method,
    Params,
    ToolCalls,
    /// llama.cpp's generic `{"tool_call": {…}}`.
    ToolCall,
    Content,
    Id,
    Other,
}

impl Key {
    fn of(k: &str) -> Key {
        match k {
            "name" => Key::Name,
            "arguments" => Key::Arguments,
            "parameters" => Key::Parameters,
            "input" => Key::Input,
            "function" => Key::Function,
            "function_call" => Key::FunctionCall,
            "method" => Key::Method,
            "params" => Key::Params,
            "tool_calls" => Key::ToolCalls,
            "tool_call" => Key::ToolCall,
            "content" => Key::Content,
            "id" => Key::Id,
            _ => Key::Other,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key::of(v))
            }
        }
        // The key is only compared, never kept: no allocation for it.
        d.deserialize_identifier(V)
    }
}

/// A call object's `name`: its text when it is a string, `None` for any other value.
struct NameVal(Option<String>);

impl<'de> serde::Deserialize<'de> for NameVal {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = NameVal;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a name")
            }
            fn visit_str<E>(self, v: &str) -> Result<NameVal, E> {
                Ok(NameVal(Some(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<NameVal, E> {
                Ok(NameVal(Some(v)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<NameVal, A::Error> {
                while m
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(NameVal(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<NameVal, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(NameVal(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<NameVal, E> {
                Ok(NameVal(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<NameVal, E> {
                Ok(NameVal(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<NameVal, E> {
                Ok(NameVal(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<NameVal, E> {
                Ok(NameVal(None))
            }
            fn visit_unit<E>(self) -> Result<NameVal, E> {
                Ok(NameVal(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An arguments value of a call object: the text serde read it from (kept as written
/// when it is an object, see [`Args`]), or a value the tolerant reader built.
#[derive(Debug)]
pub(crate) enum Part<'de> {
    Text(&'de serde_json::value::RawValue),
    // Boxed: the tolerant reader's rare case should not make every call object larger.
    Value(Box<Value>),
}

impl Part<'_> {
    /// The arguments it holds, or what is wrong.
    fn into_args(self) -> Result<Args, String> {
        match self {
            Part::Value(v) => match *v {
                Value::Object(m) => Ok(m.into()),
                v => arguments(Some(&v)).map(Args::from),
            },
            Part::Text(raw) => {
                let t = raw.get();
                if t.starts_with('{') {
                    return Args::from_read_json(t).ok_or_else(|| {
                        let e = serde_json::from_str::<Map<String, Value>>(t)
                            .err()
                            .map(|e| e.to_string())
                            .unwrap_or_default();
                        format!("'arguments' could not be read ({e})")
                    });
                }
                // A JSON text of the arguments, `null`, or something wrong: rare enough
                // to build.
                let v: Value = serde_json::from_str(t)
                    .map_err(|e| format!("'arguments' could not be read ({e})"))?;
                arguments(Some(&v)).map(Args::from)
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Part<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'de serde_json::value::RawValue>::deserialize(d).map(Part::Text)
    }
}

impl<'de> CallObj<'de> {
    /// The parts of a value already read.
    pub(crate) fn from_value(v: Value) -> CallObj<'de> {
        let Value::Object(o) = v else {
            return CallObj::default();
        };
        let mut c = CallObj::object();
        for (k, v) in o {
            match Key::of(&k) {
                Key::Name => {
                    c.name = Some(match v {
                        Value::String(n) => Some(n),
                        _ => None,
                    })
                }
                Key::Arguments => c.arguments = Some(Part::Value(Box::new(v))),
                Key::Parameters => c.parameters = Some(Part::Value(Box::new(v))),
                Key::Input => c.input = Some(Part::Value(Box::new(v))),
                Key::Function => {
                    c.function =
                        matches!(v, Value::Object(_)).then(|| Box::new(CallObj::from_value(v)))
                }
                Key::FunctionCall => c.function_call = v.is_object(),
                Key::Id => {
                    if let Value::String(id) = v {
                        c.id = Some(id);
                    }
                }
                _ => {}
            }
        }
        c
    }

    /// Reads one entry of a call object's map whose key is `k`.
    pub(crate) fn entry<A: serde::de::MapAccess<'de>>(
        &mut self,
        k: Key,
        m: &mut A,
    ) -> Result<(), A::Error> {
        match k {
            Key::Name => self.name = Some(m.next_value::<NameVal>()?.0),
            Key::Arguments => self.arguments = Some(m.next_value()?),
            Key::Parameters => self.parameters = Some(m.next_value()?),
            Key::Input => self.input = Some(m.next_value()?),
            Key::Function => {
                let f: CallObj<'de> = m.next_value()?;
                self.function = f.object.then(|| Box::new(f));
            }
            Key::FunctionCall => self.function_call = m.next_value::<CallObj<'de>>()?.object,
            Key::Id => self.id = m.next_value::<NameVal>()?.0,
            _ => {
                m.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }

    /// An object as a call: `name` a string, or a `function`/`function_call` object.
    pub(crate) fn is_call_object(&self) -> bool {
        self.object
            && (matches!(self.name, Some(Some(_))) || self.function.is_some() || self.function_call)
    }

    /// True when the value was an object.
    pub(crate) fn is_object(&self) -> bool {
        self.object
    }

    /// Records whether it has a `function_call` object (read by the document's reader).
    pub(crate) fn set_function_call(&mut self, yes: bool) {
        self.function_call = yes;
    }

    /// An empty object's parts (a value that is an object).
    pub(crate) fn object() -> CallObj<'de> {
        CallObj {
            object: true,
            ..CallObj::default()
        }
    }

    /// The object the call is in: the `function` wrapper's when there is one.
    fn inner(&self) -> &CallObj<'de> {
        self.function.as_deref().unwrap_or(self)
    }

    /// The format it is written in: Llama 3.1's when it has `parameters` and no
    /// `arguments`, else plain JSON.
    pub(crate) fn source(&self) -> Format {
        let f = self.inner();
        if f.arguments.is_none() && f.parameters.is_some() {
            Format::LlamaJson
        } else {
            Format::Json
        }
    }

    /// Takes the call's id, if it has one (on the object or inside its `function`).
    pub(crate) fn take_id(&mut self) -> Option<String> {
        self.id
            .take()
            .or_else(|| self.function.as_mut().and_then(|f| f.id.take()))
    }

    /// The tool and arguments, or what is wrong.
    pub(crate) fn into_call(self) -> CallParts {
        if !self.object {
            return Err("expected an object".into());
        }
        let f = match self.function {
            Some(f) => *f,
            None => self,
        };
        let name = match f.name {
            Some(Some(n)) => {
                let t = n.trim();
                if t.is_empty() {
                    return Err("has no 'name'".to_string());
                }
                if t.len() == n.len() {
                    n
                } else {
                    t.to_string()
                }
            }
            _ => return Err("has no 'name'".to_string()),
        };
        let args = match f.arguments.or(f.parameters).or(f.input) {
            Some(p) => p.into_args()?,
            None => Args::new(),
        };
        Ok((name, args))
    }
}

/// Fills a [`CallObj`] from a map, or marks a value that is not one.
struct CallObjVisitor;

impl<'de> serde::de::Visitor<'de> for CallObjVisitor {
    type Value = CallObj<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a call object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<CallObj<'de>, A::Error> {
        let mut c = CallObj::object();
        while let Some(k) = m.next_key::<Key>()? {
            c.entry(k, &mut m)?;
        }
        Ok(c)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<CallObj<'de>, A::Error> {
        while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(CallObj::default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<CallObj<'de>, E> {
        Ok(CallObj::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<CallObj<'de>, E> {
        Ok(CallObj::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<CallObj<'de>, E> {
        Ok(CallObj::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<CallObj<'de>, E> {
        Ok(CallObj::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<CallObj<'de>, E> {
        Ok(CallObj::default())
    }
    fn visit_unit<E>(self) -> Result<CallObj<'de>, E> {
        Ok(CallObj::default())
    }
    fn visit_none<E>(self) -> Result<CallObj<'de>, E> {
        Ok(CallObj::default())
    }
}

impl<'de> serde::Deserialize<'de> for CallObj<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CallObjVisitor)
    }
}

/// One call object, or a list of them, as a JSON-shaped region holds them.
// A short-lived value on the stack: boxing the one object would cost an allocation a call.
#[allow(clippy::large_enum_variant)]
enum CallItems<'de> {
    One(CallObj<'de>),
    Many(Vec<CallObj<'de>>),
}

impl<'de> serde::Deserialize<'de> for CallItems<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CallItems<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a call object or a list of them")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                m: A,
            ) -> Result<CallItems<'de>, A::Error> {
                CallObjVisitor.visit_map(m).map(CallItems::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<CallItems<'de>, A::Error> {
                let mut items = Vec::with_capacity(s.size_hint().unwrap_or(0).min(64));
                while let Some(c) = s.next_element::<CallObj<'de>>()? {
                    items.push(c);
                }
                Ok(CallItems::Many(items))
            }
        }
        d.deserialize_any(V)
    }
}

/// A JSON object's entries as serde read them, nothing built: each key (borrowed when
/// it has no escape) and its value's text. `None` for a value that is not an object.
pub(crate) struct RawObj<'a>(Vec<(std::borrow::Cow<'a, str>, &'a serde_json::value::RawValue)>);

impl<'a> RawObj<'a> {
    /// The value of `key` (its last one, as in a `Map`).
    pub(crate) fn get(&self, key: &str) -> Option<&'a serde_json::value::RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// How many keys it has (a key written twice counts once, as in a `Map`).
    pub(crate) fn len(&self) -> usize {
        (0..self.0.len())
            .filter(|&i| !self.0[i + 1..].iter().any(|(k, _)| *k == self.0[i].0))
            .count()
    }

    /// The entries, a key written twice only by its last value, in the order of the
    /// keys' first writing (as a `Map` keeps them).
    pub(crate) fn entries(&self) -> Vec<(&str, &'a serde_json::value::RawValue)> {
        let mut out: Vec<(&str, &'a serde_json::value::RawValue)> =
            Vec::with_capacity(self.0.len());
        for (k, v) in &self.0 {
            match out.iter_mut().find(|(o, _)| *o == k.as_ref()) {
                Some(e) => e.1 = *v,
                None => out.push((k.as_ref(), *v)),
            }
        }
        out
    }
}

/// An object, `Some` of its entries, or another value, `None`.
struct MaybeRawObj<'a>(Option<RawObj<'a>>);

impl<'de> serde::Deserialize<'de> for MaybeRawObj<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MaybeRawVisitor)
    }
}

/// An object key: borrowed when it has no escape.
struct KeyText<'a>(std::borrow::Cow<'a, str>);
impl<'de> serde::Deserialize<'de> for KeyText<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = KeyText<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<KeyText<'de>, E> {
                Ok(KeyText(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<KeyText<'de>, E> {
                Ok(KeyText(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// Reads a [`MaybeRawObj`].
struct MaybeRawVisitor;

impl<'de> serde::de::Visitor<'de> for MaybeRawVisitor {
    type Value = MaybeRawObj<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut m: A,
    ) -> Result<MaybeRawObj<'de>, A::Error> {
        let mut e = Vec::new();
        while let Some(k) = m.next_key::<KeyText<'de>>()? {
            e.push((k.0, m.next_value::<&'de serde_json::value::RawValue>()?));
        }
        Ok(MaybeRawObj(Some(RawObj(e))))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut s: A,
    ) -> Result<MaybeRawObj<'de>, A::Error> {
        while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(MaybeRawObj(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<MaybeRawObj<'de>, E> {
        Ok(MaybeRawObj(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<MaybeRawObj<'de>, E> {
        Ok(MaybeRawObj(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<MaybeRawObj<'de>, E> {
        Ok(MaybeRawObj(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<MaybeRawObj<'de>, E> {
        Ok(MaybeRawObj(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<MaybeRawObj<'de>, E> {
        Ok(MaybeRawObj(None))
    }
    fn visit_unit<E>(self) -> Result<MaybeRawObj<'de>, E> {
        Ok(MaybeRawObj(None))
    }
}

/// The JSON list (or lone object) at the start of `s`, read by serde without building
/// its values: each element an object's entries or `None`, and where the value ended;
/// `None` when serde cannot read it (the tolerant reader's case) or it is neither.
pub(crate) fn raw_objects(s: &str) -> Option<(Vec<Option<RawObj<'_>>>, usize)> {
    enum Items<'a> {
        One(RawObj<'a>),
        Many(Vec<Option<RawObj<'a>>>),
        Neither,
    }
    impl<'de> serde::Deserialize<'de> for Items<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Items<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a list or an object")
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut s: A,
                ) -> Result<Items<'de>, A::Error> {
                    let mut v = Vec::new();
                    while let Some(o) = s.next_element::<MaybeRawObj<'de>>()? {
                        v.push(o.0);
                    }
                    Ok(Items::Many(v))
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    m: A,
                ) -> Result<Items<'de>, A::Error> {
                    let MaybeRawObj(o) = serde::de::Visitor::visit_map(MaybeRawVisitor, m)?;
                    Ok(o.map_or(Items::Neither, Items::One))
                }
            }
            d.deserialize_any(V)
        }
    }
    let mut de = serde_json::Deserializer::from_str(s).into_iter::<Items>();
    let items = de.next()?.ok()?;
    let end = de.byte_offset();
    match items {
        Items::One(o) => Some((vec![Some(o)], end)),
        Items::Many(v) => Some((v, end)),
        Items::Neither => None,
    }
}

/// The arguments of a call whose arguments value is `raw` (`None`: none given), kept as
/// their text, when they are an object a `Map` holds or `null` or absent; `None` for
/// anything else (the caller reads that the slow way, with [`arguments`]).
pub(crate) fn raw_arguments(raw: Option<&serde_json::value::RawValue>) -> Option<Args> {
    match raw.map(|r| r.get()) {
        None | Some("null") => Some(Args::new()),
        Some(t) if t.starts_with('{') => Args::from_read_json(t),
        Some(_) => None,
    }
}

/// Reads the call object (or list of them) at `s[start..end]` (after blanks): serde
/// straight into the calls' parts first, then the tolerant reader. Returns the objects
/// and where they ended.
fn call_items(s: &str, start: usize, end: usize) -> Result<(CallItems<'_>, usize), LitErr> {
    let b = s.as_bytes();
    let mut l = Lit::new(b, start, end);
    l.ws();
    let at = l.pos;
    let mut de = serde_json::Deserializer::from_str(&s[at..end]).into_iter::<CallItems>();
    if let Some(Ok(items)) = de.next() {
        return Ok((items, at + de.byte_offset()));
    }
    let items = match l.value()? {
        Value::Array(a) => CallItems::Many(a.into_iter().map(CallObj::from_value).collect()),
        other => CallItems::One(CallObj::from_value(other)),
    };
    Ok((items, l.pos))
}

/// Where reading resumes after a syntax break at `from`: the next list element or call
/// object that starts a call (`{` after `[`, `,`, `;` or a line break, its first key
/// `name`, `function`, `tool_name` or `type`), or `None`.
pub(crate) fn next_call_start(s: &[u8], from: usize, to: usize) -> Option<usize> {
    let mut k = from;
    while k < to {
        let p = k + memchr::memchr(b'{', &s[k..to])?;
        k = p + 1;
        // An element (after `[`, `,` or `;`) or an object on a line of its own.
        let blanks = s[..p]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        let new_line = s[p - blanks..p].contains(&b'\n');
        if !new_line && !matches!(s[..p - blanks].last(), Some(b'[' | b',' | b';')) {
            continue;
        }
        let mut q = p + 1;
        while q < to && s[q].is_ascii_whitespace() {
            q += 1;
        }
        let rest = &s[q..to];
        let key = |k: &[u8]| {
            rest.len() > k.len() + 1
                && matches!(rest[0], b'"' | b'\'')
                && rest[1..].starts_with(k)
                && rest[k.len() + 1] == rest[0]
        };
        if key(b"name") || key(b"function") || key(b"tool_name") || key(b"type") {
            return Some(p);
        }
    }
    None
}

/// A call's arguments: an object, a JSON text of one, or nothing.
pub(crate) fn arguments(v: Option<&Value>) -> Result<Map<String, Value>, String> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err("'arguments' is JSON text but not an object".into()),
            Err(e) => Err(format!("'arguments' is not valid JSON text ({e})")),
        },
        Some(_) => Err("'arguments' must be an object or a JSON text of an object".into()),
    }
}

/// Where a bracketed value (`{…}` or `[…]`, JSON or Python-dict-like) ends, found a
/// chunk at a time: strings in either quote are skipped, brackets counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ValueEnd {
    depth: u32,
    quote: u8,
    escaped: bool,
}

impl ValueEnd {
    /// Scans `s[*pos..]`, the cursor on or inside the value; `Some(end)` (one past the
    /// closing bracket) when it closes, else `None` with `*pos` at the end of `s`.
    pub(crate) fn feed(&mut self, s: &[u8], pos: &mut usize) -> Option<usize> {
        // The state lives in locals while scanning (kept in registers), written back once.
        let (mut depth, mut quote, mut escaped) = (self.depth, self.quote, self.escaped);
        let n = s.len();
        let mut p = *pos;
        let end = loop {
            if p >= n {
                break None;
            }
            if quote != 0 {
                if escaped {
                    escaped = false;
                    p += 1;
                    continue;
                }
                // Inside a string only its quote and a backslash matter. Most strings in
                // calls are short: a plain loop first, memchr for long ones.
                let stop = p.saturating_add(32).min(n);
                while p < stop && s[p] != quote && s[p] != b'\\' {
                    p += 1;
                }
                if p == stop {
                    match memchr::memchr2(quote, b'\\', &s[p..]) {
                        Some(i) => p += i,
                        None => {
                            p = n;
                            break None;
                        }
                    }
                }
                if s[p] == b'\\' {
                    escaped = true;
                } else {
                    quote = 0;
                }
                p += 1;
                continue;
            }
            // Outside strings only quotes and brackets matter: skip the rest by table.
            while p < n && VALUE_BYTES[s[p] as usize] == 0 {
                p += 1;
            }
            if p >= n {
                break None;
            }
            let b = s[p];
            p += 1;
            match VALUE_BYTES[b as usize] {
                QUOTE => quote = b,
                OPEN => depth += 1,
                _ => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break Some(p);
                    }
                }
            }
        };
        (self.depth, self.quote, self.escaped) = (depth, quote, escaped);
        *pos = p;
        end
    }
}

const QUOTE: u8 = 1;
const OPEN: u8 = 2;
const CLOSE: u8 = 3;

/// What each byte is to [`ValueEnd`] outside strings: nothing (0), a quote, an opening
/// or a closing bracket.
static VALUE_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = QUOTE;
    t[b'\'' as usize] = QUOTE;
    t[b'{' as usize] = OPEN;
    t[b'[' as usize] = OPEN;
    t[b'(' as usize] = OPEN;
    t[b'}' as usize] = CLOSE;
    t[b']' as usize] = CLOSE;
    t[b')' as usize] = CLOSE;
    t
};

/// A call read by a native reader (no chain step; its own block index).
pub(crate) fn call(
    tool: String,
    args: impl Into<Args>,
    source: Format,
    span: Span,
    block: usize,
) -> Call {
    Call {
        tool,
        args: args.into(),
        span,
        block,
        step: None,
        on_error: OnError::Stop,
        source,
        dispatch: None,
        id: None,
        texts: None,
    }
}

/// The error for a value that could not be read at `at`: cut off when the text ended
/// there (`text_ended`), else malformed.
pub(crate) fn value_error(
    e: LitErr,
    at: usize,
    text_ended: bool,
    what: &str,
    hint: &str,
) -> RawDiag {
    match e {
        LitErr::Cut if text_ended => RawDiag::error(
            at,
            format!("the output was cut off inside {what}; it was not executed"),
            format!("The text ended before the call was complete. {hint}"),
        ),
        LitErr::Cut => RawDiag::error(
            at,
            format!("{what} is incomplete; it was not executed"),
            hint.to_string(),
        ),
        LitErr::Bad(o, msg) => RawDiag::error(
            o,
            format!("{what} could not be read: {msg}; it was not executed"),
            hint.to_string(),
        ),
    }
}

/// Reads the JSON-shaped calls in `text[from..to]`: call objects (`{"name",
/// "arguments"}`, any order, Python-dict-like or not) or lists of them, separated by
/// blanks, `;` or `,`; with `name_then`, also `name` + that marker + an arguments object
/// (Mistral's `[ARGS]`). A call that is not one (no name, arguments not an object) is a
/// diagnostic of its own. A syntax break is one too: the list elements before it are
/// read, and reading resumes at the next call after it (`next_call_start`). When the
/// text ended inside the calls, or a Mistral `name[ARGS]` call is broken, none is
/// read. `to == text.len()` means the region was never closed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_json_calls(
    text: &str,
    from: usize,
    to: usize,
    name_then: Option<&[u8]>,
    source: Format,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    // Only built for a diagnostic (a call site per call would cost an allocation each).
    let what = || format!("a {} call", source.name());
    let hint = "Write each call as {\"name\": \"ToolId\", \"arguments\": {…}}.";
    let ended = to >= text.len();
    let mut l = Lit::new(text.as_bytes(), from, to);
    let start = out.len();
    // Reading resumed inside a list after a syntax break: its `]` ends the list.
    let mut resynced = false;
    let mut broke = false;
    loop {
        l.ws();
        while matches!(l.peek(), Some(b';' | b',')) || (resynced && l.peek() == Some(b']')) {
            l.pos += 1;
            l.ws();
        }
        let Some(b) = l.peek() else { break };
        let at = l.pos;
        if b != b'{' && b != b'[' {
            if let Some(marker) = name_then {
                let Some(name) = l.name() else {
                    diags.push(RawDiag::error(
                        at,
                        format!("expected {} here", what()),
                        hint.into(),
                    ));
                    out.truncate(start);
                    return;
                };
                l.blanks();
                let mut id = None;
                if l.eat(b"[CALL_ID]") {
                    let i0 = l.pos;
                    while l.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
                        l.pos += 1;
                    }
                    id = Some(text[i0..l.pos].to_string());
                }
                // `[TOOL_CALLS]name{…}`: the marker dropped by a server.
                if !l.eat(marker) && l.peek() != Some(b'{') {
                    let e = if l.at_end() {
                        LitErr::Cut
                    } else {
                        LitErr::Bad(l.pos, "expected its arguments".into())
                    };
                    diags.push(value_error(e, at, ended, &what(), hint));
                    out.truncate(start);
                    return;
                }
                match json_args(text, l.pos, to) {
                    Ok((Some(args), e)) => {
                        l.pos = e;
                        let mut c = call(name, args, source, span, block);
                        c.id = id;
                        out.push(c);
                    }
                    Ok((None, _)) => {
                        diags.push(RawDiag::error(
                            at,
                            format!(
                                "the arguments of '{name}' are not an object; it was not executed"
                            ),
                            hint.into(),
                        ));
                        out.truncate(start);
                        return;
                    }
                    Err(e) => {
                        diags.push(value_error(e, at, ended, &what(), hint));
                        out.truncate(start);
                        return;
                    }
                }
                continue;
            }
            // Prose after the calls (Granite writes no closing tag).
            break;
        }
        let push_items = |items: CallItems<'_>, out: &mut Vec<Call>, diags: &mut Vec<RawDiag>| {
            // One object (the common case) without a vector around it.
            let (one, many) = match items {
                CallItems::One(c) => (Some(c), Vec::new()),
                CallItems::Many(v) => (None, v),
            };
            for mut item in one.into_iter().chain(many) {
                let id = item.take_id();
                match item.into_call() {
                    Ok((tool, args)) => {
                        let mut c = call(tool, args, source, span, block);
                        c.id = id;
                        out.push(c);
                    }
                    // One bad call among good ones is its own diagnostic; its
                    // neighbours are read.
                    Err(msg) => diags.push(RawDiag::error(
                        at,
                        format!("{}: {msg}; it was not executed", what()),
                        hint.into(),
                    )),
                }
            }
        };
        match call_items(text, at, to) {
            Ok((items, e)) => {
                l.pos = e;
                push_items(items, out, diags);
            }
            // The text ended inside the calls: none of them runs.
            Err(LitErr::Cut) => {
                diags.push(value_error(LitErr::Cut, at, ended, &what(), hint));
                out.truncate(start);
                return;
            }
            // A syntax break: the broken call is a diagnostic of its own, and reading
            // goes on at the next call after the break; in a list, the elements before
            // it are read one by one.
            Err(LitErr::Bad(bad, msg)) => {
                let mut p = at;
                if b == b'[' {
                    p += 1;
                    loop {
                        let mut e = Lit::new(text.as_bytes(), p, to);
                        e.ws();
                        while matches!(e.peek(), Some(b',')) {
                            e.pos += 1;
                            e.ws();
                        }
                        if e.peek() != Some(b'{') || e.pos >= bad {
                            p = e.pos;
                            break;
                        }
                        match call_items(text, e.pos, to) {
                            Ok((items, end)) if end <= bad => {
                                push_items(items, out, diags);
                                p = end;
                            }
                            _ => {
                                p = e.pos;
                                break;
                            }
                        }
                    }
                }
                broke = true;
                diags.push(value_error(LitErr::Bad(bad, msg), p, ended, &what(), hint));
                match next_call_start(text.as_bytes(), bad.max(p + 1), to) {
                    Some(r) => {
                        l.pos = r;
                        resynced = true;
                    }
                    None => break,
                }
            }
        }
    }
    if out.len() == start && !broke {
        let e = if ended {
            LitErr::Cut
        } else {
            LitErr::Bad(from, "no call in it".into())
        };
        diags.push(value_error(e, from, ended, &what(), hint));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn val(t: &str) -> Result<Value, LitErr> {
        Lit::new(t.as_bytes(), 0, t.len()).value()
    }

    /// The writer's fast paths write what serde_json writes: strings with every
    /// escape, integers as the `i64` they read as (anything else goes the long way).
    #[test]
    fn fast_paths_write_what_serde_writes() {
        let mut all: String = (0u8..0x80).map(char::from).collect();
        all.push_str("é✓😀\u{7f}");
        for t in [
            all.as_str(),
            "",
            "plain",
            "a\"b\\c",
            "\u{1}\u{1f}\u{8}\u{c}",
        ] {
            let mut out = Vec::new();
            write_json_str(&mut out, t.as_bytes());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(t).unwrap()
            );
        }
        let fixed = [
            "0",
            "-1",
            "7",
            "42",
            "-0",
            "007",
            "+5",
            "1_000",
            "1.5",
            "1e3",
            "-",
            "00",
            "123456789012345678",
            "1234567890123456789",
            "-999999999999999999",
            "18446744073709551615",
            "99999999999999999999",
            "0.25",
            "0.0",
            "-0.0",
            "1.0",
            "10.0",
            "1.50",
            "0.05",
            "0.1",
            "9999999.5",
            "10000000.5",
            "1.",
            ".5",
            "1.5e3",
            "0.123456789012345",
            "0.1234567890123456",
            "1234567.12345678",
            "-3.14",
            "2.5_0",
            "1.2.3",
        ];
        // Decimals of every length and place a reader meets.
        let made = (0..4000u64).flat_map(|i| {
            let d = i.wrapping_mul(2654435761) % 10_000_000_000;
            let t = d.to_string();
            let (a, b) = t.split_at(t.len().saturating_sub((i % 12) as usize));
            let a = if a.is_empty() { "0" } else { a };
            let b0 = if b.is_empty() { "0" } else { b };
            [
                format!("{a}.{b0}"),
                format!("-0.{b}7"),
                format!("{}.{b}3", i % 9_999_999),
            ]
        });
        for t in fixed.into_iter().map(String::from).chain(made) {
            let t = t.as_str();
            let mut fast = Vec::new();
            Lit::new(t.as_bytes(), 0, t.len())
                .write_value(&mut fast)
                .ok();
            let slow = Lit::new(t.as_bytes(), 0, t.len())
                .number()
                .map(|n| serde_json::to_vec(&n).unwrap());
            match slow {
                Ok(slow) => assert_eq!(fast, slow, "{t}"),
                Err(_) => assert!(fast.is_empty(), "{t}"),
            }
        }
        // The fast path is taken where it should be.
        for (t, plain) in [
            ("0.25", true),
            ("42", true),
            ("0.05", false),
            ("1e3", false),
        ] {
            let taken = Lit::new(t.as_bytes(), 0, t.len()).plain_number().is_some();
            assert_eq!(taken, plain, "{t}");
        }
        // The cursor stops where the number stops, fast path or not.
        let mut l = Lit::new(b"12, x", 0, 5);
        let mut out = Vec::new();
        l.write_value(&mut out).unwrap();
        assert_eq!((l.pos, out.as_slice()), (2, b"12".as_slice()));
    }

    #[test]
    fn python_literals() {
        assert_eq!(
            val("{'a': True, \"b\": None, 'c': (1, 2.5), 'd': [1,], 'e': (3)}").unwrap(),
            json!({"a": true, "b": null, "c": [1, 2.5], "d": [1], "e": 3})
        );
        assert_eq!(val(r"'it\'s\n'").unwrap(), json!("it's\n"));
        assert_eq!(val(r#"r'a\d'"#).unwrap(), json!("a\\d"));
        assert_eq!(val("'''x'y'''").unwrap(), json!("x'y"));
        assert_eq!(val("{'a': 'b"), Err(LitErr::Cut));
        assert!(matches!(val("{'a': 1 2}"), Err(LitErr::Bad(..))));
        assert!(matches!(val("{\"a\" 1}"), Err(LitErr::Bad(..))));
        // A single quote a word follows stays in its string; others close it.
        assert_eq!(
            val("'sed -n '1,5p' f.py'").unwrap(),
            json!("sed -n '1,5p' f.py")
        );
        assert_eq!(val("['it's', 'x']").unwrap(), json!(["it's", "x"]));
        assert!(matches!(val("{'a' 1}"), Err(LitErr::Cut)));
        // A set is a list; bytes and numbers out of range are not JSON.
        assert_eq!(val("{'x', 2}").unwrap(), json!(["x", 2]));
        assert!(matches!(val("b'z'"), Err(LitErr::Bad(_, m)) if m.starts_with(NOT_JSON)));
        assert!(matches!(val("[1e999]"), Err(LitErr::Bad(_, m)) if m.starts_with(NOT_JSON)));
        let deep = "[".repeat(1000);
        assert!(matches!(val(&deep), Err(LitErr::Bad(..))));
    }

    #[test]
    fn names() {
        let mut l = Lit::new(br"quest\_log.add(", 0, 15);
        assert_eq!(l.name().as_deref(), Some("quest_log.add"));
        assert_eq!(l.peek(), Some(b'('));
        let mut l = Lit::new(b"Forge:smelt x", 0, 13);
        assert_eq!(l.name().as_deref(), Some("Forge:smelt"));
        assert!(Lit::new(b"9a", 0, 2).name().is_none());
    }

    #[test]
    fn value_end_across_chunks() {
        let t = br#"{"a": "}", 'b': [1, {2}]} tail"#;
        let mut e = ValueEnd::default();
        let mut pos = 0;
        assert_eq!(e.feed(&t[..10], &mut pos), None);
        assert_eq!(e.feed(t, &mut pos), Some(25));
    }
}
