//! Gemma 4 (and FunctionGemma): `<|tool_call>call:NAME{ore:<|"|>iron<|"|>,amount:4}<tool_call|>`:
//! keys bare, strings quoted by the `<|"|>` token, numbers, `true`/`false`/`null`,
//! nested `{…}` and `[…]`; a bare value that is none of these is kept as its text.
//! Several `call:` may follow one another in one tag; each is its own call.
//! FunctionGemma writes the same calls as `<start_function_call>call:NAME{…}<end_function_call>`,
//! its strings quoted by `<escape>`; either quote token is read in either tag.
//! Gemma 4's reasoning, `<|channel>thought…<channel|>`, is never run and is not response
//! text (as `<think>`).

use super::text;
use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::args::Args;
use crate::protocol::types::{Call, Format, RawDiag, Span};

const QUOTE: &str = "<|\"|>";
/// FunctionGemma's string quote.
const ESCAPE: &str = "<escape>";
const HINT: &str = "Write <|tool_call>call:ToolId{key:<|\"|>text<|\"|>,n:4}<tool_call|>.";

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    also: &[
    RegionSyntax::new(
        Open::Exact(b"<|channel>"),
        Close::Exact(b"<channel|>"),
        super::no_calls,
        "<|channel>",
        (
            "<|channel> has no <channel|>; everything after it was treated as reasoning and nothing in it was executed",
            "End the reasoning with <channel|>.",
        ),
    ),
    RegionSyntax::new(
        Open::Exact(b"<start_function_call>"),
        Close::Exact(b"<end_function_call>"),
        read,
        "<start_function_call>",
        (
            "<start_function_call> has no closing <end_function_call>; its complete call was read up to the end of the text",
            "End every call with <end_function_call>.",
        ),
    )],
    ..FormatEntry::native(
    Format::Gemma4,
    "gemma4",
    &["functiongemma", "function_gemma"],
    Reader::Region(RegionSyntax::new(
        Open::Exact(b"<|tool_call>"),
        Close::Exact(b"<tool_call|>"),
        read,
        "<|tool_call>",
        (
            "<|tool_call> has no closing <tool_call|>; its complete call was read up to the end of the text",
            "End every call with <tool_call|>.",
        ),
    )),
    super::Lesson::wire(
        |name, args| {
            let inner: Vec<String> = args
                .iter()
                .map(|(k, v)| format!("{k}:{}", super::teach::gemma_value(v)))
                .collect();
            format!("<|tool_call>call:{name}{{{}}}<tool_call|>", inner.join(","))
        },
        "To use a tool or skill, write <|tool_call>call:tool_name{name:value,…}<tool_call|>, strings between <|\"|> tokens, numbers and true/false bare, once per call. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("gemma4"),
)
};

/// Why a value could not be read: the text ended (`None`) or something else, at an offset.
type Miss = Option<(usize, &'static str)>;

struct P<'a> {
    t: &'a str,
    pos: usize,
    end: usize,
    depth: u32,
}

impl P<'_> {
    fn rest(&self) -> &str {
        &self.t[self.pos..self.end]
    }
    fn ws(&mut self) {
        // ASCII blanks a byte at a time (nearly every call); other whitespace as `trim`.
        let b = self.t.as_bytes();
        while self.pos < self.end
            && matches!(b[self.pos], b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C)
        {
            self.pos += 1;
        }
        if self.pos < self.end && b[self.pos] >= 0x80 {
            let r = self.rest();
            self.pos += r.len() - r.trim_start().len();
        }
    }
    /// Where `q` (a quote token) next starts after the cursor.
    fn find(&self, q: &str) -> Option<usize> {
        text::find(self.t.as_bytes(), self.pos, self.end, q.as_bytes()).map(|p| p - self.pos)
    }
    /// How far the first of `stops` (ASCII bytes) is after the cursor, or the rest's length.
    fn until(&self, stops: &[u8]) -> usize {
        let r = &self.t.as_bytes()[self.pos..self.end];
        r.iter().position(|b| stops.contains(b)).unwrap_or(r.len())
    }
    fn eat(&mut self, p: &str) -> bool {
        if self.rest().starts_with(p) {
            self.pos += p.len();
            true
        } else {
            false
        }
    }
    /// The quote token at the cursor (Gemma 4's `<|"|>` or FunctionGemma's `<escape>`),
    /// eaten; the same token closes the string.
    fn quote(&mut self) -> Option<&'static str> {
        if self.t.as_bytes().get(self.pos) != Some(&b'<') {
            return None;
        }
        [QUOTE, ESCAPE].into_iter().find(|q| self.eat(q))
    }
    fn miss(&self, why: &'static str) -> Miss {
        (self.pos < self.end).then_some((self.pos, why))
    }
    /// Reads the object at `{`, writing it to `out` as JSON.
    fn object(&mut self, out: &mut String) -> Result<(), Miss> {
        // At `{`.
        self.pos += 1;
        self.depth += 1;
        if self.depth > lit::MAX_DEPTH {
            return Err(self.miss("nested too deep"));
        }
        out.push('{');
        let t = self.t;
        let mut first = true;
        loop {
            self.ws();
            if self.eat("}") {
                break;
            }
            let key = if let Some(q) = self.quote() {
                let Some(i) = self.find(q) else {
                    return Err(None);
                };
                let k = &t[self.pos..self.pos + i];
                self.pos += i + q.len();
                k
            } else {
                // ASCII stops: `n` is a character boundary.
                let n = self.until(b":},");
                let k = &t[self.pos..self.pos + n];
                self.pos += n;
                k.trim().trim_matches('"')
            };
            self.ws();
            if !self.eat(":") {
                return Err(self.miss("expected ':' after a key"));
            }
            if !first {
                out.push(',');
            }
            first = false;
            text::push_json_str(out, key);
            out.push(':');
            let quoted = self.rest().starts_with(QUOTE) || self.rest().starts_with(ESCAPE);
            self.value(out)?;
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                break;
            }
            // After a quoted string the next key may follow with no comma (its end is
            // plain): `{city:<escape>Oslo<escape>unit:<escape>C<escape>}`.
            if quoted {
                continue;
            }
            return Err(self.miss("expected ',' or '}'"));
        }
        self.depth -= 1;
        out.push('}');
        Ok(())
    }
    /// Reads one value, writing it to `out` as JSON.
    fn value(&mut self, out: &mut String) -> Result<(), Miss> {
        self.ws();
        let t = self.t;
        if let Some(q) = self.quote() {
            let Some(i) = self.find(q) else {
                return Err(None);
            };
            text::push_json_str(out, &t[self.pos..self.pos + i]);
            self.pos += i + q.len();
            return Ok(());
        }
        match self.rest().as_bytes().first() {
            None => Err(None),
            Some(b'{') => self.object(out),
            Some(b'[') => {
                self.pos += 1;
                self.depth += 1;
                if self.depth > lit::MAX_DEPTH {
                    return Err(self.miss("nested too deep"));
                }
                out.push('[');
                let mut first = true;
                loop {
                    self.ws();
                    if self.eat("]") {
                        break;
                    }
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    self.value(out)?;
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("]") {
                        break;
                    }
                    return Err(self.miss("expected ',' or ']'"));
                }
                self.depth -= 1;
                out.push(']');
                Ok(())
            }
            Some(_) => {
                // ASCII stops: `n` is a character boundary.
                let n = self.until(b",}]");
                if self.pos + n == self.end {
                    return Err(None);
                }
                // A JSON literal as written (it reads as the value it is), anything
                // else as its text.
                let v = t[self.pos..self.pos + n].trim();
                if plain_literal(v) || crate::protocol::args::is_literal(v) {
                    out.push_str(v);
                } else if let Some(n) = dotted_number(v) {
                    out.push_str(&n);
                } else {
                    text::push_json_str(out, v);
                }
                self.pos += n;
                Ok(())
            }
        }
    }
}

/// True for the bare values nearly every call holds, which are JSON literals serde_json
/// reads (`true`, `false`, `null`, an integer of at most 18 digits with no leading zero,
/// such an integer with a fraction of digits): known without running its parser.
fn plain_literal(v: &str) -> bool {
    if matches!(v, "true" | "false" | "null") {
        return true;
    }
    let b = v.strip_prefix('-').unwrap_or(v).as_bytes();
    let int = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if int == 0 || int > 18 || (b[0] == b'0' && int > 1) {
        return false;
    }
    match &b[int..] {
        [] => true,
        [b'.', frac @ ..] => {
            !frac.is_empty() && frac.len() <= 30 && frac.iter().all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

/// A number written with a trailing dot (`108.`, as Python writes a float): the JSON
/// number it means (`108.0`).
pub(crate) fn dotted_number(v: &str) -> Option<String> {
    let digits = v.strip_suffix('.')?;
    let digits = digits.strip_prefix('-').unwrap_or(digits);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| format!("{v}0"))
}

/// The tag's reader.
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
    let mut p = P {
        t: text,
        pos: content,
        end: close,
        depth: 0,
    };
    let mut any = false;
    loop {
        p.ws();
        if p.pos >= close {
            break;
        }
        let at = p.pos;
        if !p.eat("call:") {
            if !any {
                diags.push(text::bad(
                    at,
                    "a Gemma call tag (<|tool_call> or <start_function_call>) does not start with 'call:'",
                    HINT,
                ));
            }
            return;
        }
        any = true;
        let r = p.rest();
        let Some(b) = r.find('{') else {
            diags.push(if ended {
                text::cut(at, r.trim(), HINT)
            } else {
                text::bad(at, "a Gemma call has no '{' after its name", HINT)
            });
            return;
        };
        let name = r[..b].trim().to_string();
        p.pos += b;
        let mut json = String::with_capacity((close - p.pos).min(512));
        match p.object(&mut json) {
            Ok(()) => match Args::from_read_json(&json) {
                Some(args) => out.push(lit::call(name, args, Format::Gemma4, span, block)),
                // Literals nested past serde_json's depth limit.
                None => {
                    diags.push(text::bad(
                        at,
                        &format!("the arguments of '{name}' could not be read: nested too deep"),
                        HINT,
                    ));
                    return;
                }
            },
            Err(None) => {
                diags.push(text::cut(at, &name, HINT));
                return;
            }
            Err(Some((o, why))) => {
                diags.push(text::bad(
                    o,
                    &format!("the arguments of '{name}' could not be read: {why}"),
                    HINT,
                ));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick literal check says yes only where serde_json reads a literal.
    #[test]
    fn plain_literals_are_literals() {
        let cases = [
            "true",
            "false",
            "null",
            "0",
            "-0",
            "7",
            "-12",
            "0.25",
            "10.5",
            "123456789012345678",
            "1234567890123456789",
            "00",
            "01",
            "1.",
            ".5",
            "-",
            "",
            "1e5",
            "1.2.3",
            "+1",
            "12a",
            "True",
            "0x10",
            "1_000",
            "3.14159265358979323846264338327950",
        ];
        for v in cases {
            if plain_literal(v) {
                assert!(crate::protocol::args::is_literal(v), "{v:?}");
            }
        }
        assert!(plain_literal("0.25") && plain_literal("-12") && plain_literal("null"));
        assert!(!plain_literal("01") && !plain_literal("1.") && !plain_literal("1e5"));
    }
}
