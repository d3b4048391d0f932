//! The TAM/VCP block body reader: a resumable, hand-written scanner that implements
//! `grammar/tam.pest` (rules 1–9 of the TAM rules) in one forward pass.
//!
//! The scanner keeps its state between calls, so the streaming reader feeds it text as
//! it arrives and no byte is examined more than a constant number of times. Its
//! agreement with the pest grammar is checked by `tests/it/protocol_grammar.rs`.

use memchr::memmem::Finder;

use super::lex::{
    floor_boundary, line_break, match_ci, match_pair_start, skip_ws, CLOSE, M, TAM_END, TAM_START,
    VCP_END, VCP_START,
};
use super::types::{Format, RawDiag, RawPair};

/// Which marker pair delimits a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `<|[REQUEST_TOOL]|>` … `<|[END_TOOL]|>`.
    Tam,
    /// `<<<[TOOL_REQUEST]>>>` … `<<<[END_TOOL_REQUEST]>>>`.
    Vcp,
}

impl BlockKind {
    /// The name used in diagnostics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BlockKind::Tam => "TAM",
            BlockKind::Vcp => "VCP",
        }
    }

    /// The format a call read from this kind of block reports as its source.
    pub(crate) fn format(self) -> Format {
        match self {
            BlockKind::Tam => Format::Tam,
            BlockKind::Vcp => Format::Vcp,
        }
    }

    pub(crate) fn start(self) -> &'static [u8] {
        match self {
            BlockKind::Tam => TAM_START,
            BlockKind::Vcp => VCP_START,
        }
    }
    pub(crate) fn end(self) -> &'static [u8] {
        match self {
            BlockKind::Tam => TAM_END,
            BlockKind::Vcp => VCP_END,
        }
    }
    pub(crate) fn end_text(self) -> &'static str {
        match self {
            BlockKind::Tam => "<|[END_TOOL]|>",
            BlockKind::Vcp => "<<<[END_TOOL_REQUEST]>>>",
        }
    }
    pub(crate) fn start_text(self) -> &'static str {
        match self {
            BlockKind::Tam => "<|[REQUEST_TOOL]|>",
            BlockKind::Vcp => "<<<[TOOL_REQUEST]>>>",
        }
    }
}

/// One TAM/VCP block as read by the grammar or the scanner (byte offsets into the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockReading {
    /// Offset of the start marker.
    pub start: usize,
    /// Offset one past the block (its end marker, or where it was cut off).
    pub end: usize,
    /// True when the block ended at its own end marker.
    pub terminated: bool,
    /// The pairs, in order.
    pub pairs: Vec<RawPair>,
}

/// How a block ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// At its end marker; the offset is one past the marker.
    Terminated(usize),
    /// At the next start marker, which is not part of the block.
    AtStart(usize),
    /// At the end of the text.
    Eof(usize),
}

/// What one run of the scanner achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The text ended before a decision; call again with more text.
    NeedMore,
    /// The start marker was not followed by a pair (rule 9): not a block.
    NotBlock,
    /// The block ended.
    Done(BodyEnd),
}

#[derive(Debug, Clone)]
struct ValueScan {
    key: (usize, usize),
    start: usize,
    scan: usize,
    at_line_start: bool,
    line_start: usize,
    brk: usize,
    first_end: Option<usize>,
    first_cut: Option<usize>,
    /// The value crossed a line that begins a pair: from then on only a `「末」` on a line
    /// that does not begin a pair can close it (rule 6).
    nested: bool,
    /// The line being scanned begins a pair (so, once nested, its `「末」`s are content).
    pair_line: bool,
}

/// What the scanner learned about the text ahead while reading one value, kept across
/// values and blocks (one per block kind) so that no stretch of text is searched again
/// when a later value asks the same question: a text of many unterminated values that
/// cross pair lines stays linear.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ahead {
    find: CloseFind,
    close: CloseMemo,
    look: LookMemo,
}

/// The first `「末」` at or after `from`: `at`, or, while `None`, none starts in
/// `from..searched`.
#[derive(Debug, Clone, Copy, Default)]
struct CloseFind {
    valid: bool,
    from: usize,
    at: Option<usize>,
    searched: usize,
}

impl Ahead {
    /// The first `「末」` at or after `scan`, if the text so far has one. Values read
    /// later start later, so one search serves every value it passes over.
    #[inline]
    fn next_close(&mut self, s: &[u8], scan: usize, finder: &Finder<'_>) -> Option<usize> {
        let f = &mut self.find;
        let mut from = scan;
        match f.at {
            Some(c) if f.valid && f.from <= scan && c >= scan => return Some(c),
            // None starts in `from..searched`: go on from there.
            None if f.valid && f.from <= scan && scan <= f.searched => from = f.searched,
            _ => {
                f.valid = true;
                f.from = scan;
            }
        }
        match finder.find(&s[from..]) {
            Some(i) => {
                f.at = Some(from + i);
                f.at
            }
            None => {
                f.at = None;
                f.searched = from.max(s.len().saturating_sub(CLOSE.len() - 1));
                None
            }
        }
    }
}

/// Rule 6, nested values: the first `「末」` that closes a value on a line not beginning a
/// pair, searched line by line from the line start `from`. `found` is that `「末」`, or,
/// while `None`, the lines from `from` up to the line start `to` hold none.
#[derive(Debug, Clone, Copy, Default)]
struct CloseMemo {
    valid: bool,
    from: usize,
    to: usize,
    to_brk: usize,
    found: Option<usize>,
}

/// What a nested search at a line start may skip.
enum Known {
    /// The first closing `「末」` from here.
    Close(usize),
    /// No closing `「末」` before this line start (and the offset of the break before it).
    ClearTo(usize, usize),
    Nothing,
}

impl CloseMemo {
    /// A nested value's scan reached the line start `l` (after the break at `brk`).
    fn at_line(&mut self, l: usize, brk: usize) -> Known {
        if self.valid && self.from <= l {
            match self.found {
                Some(c) if l <= c => return Known::Close(c),
                Some(_) => {}
                None if l < self.to => return Known::ClearTo(self.to, self.to_brk),
                None if l == self.to => return Known::Nothing,
                None => {}
            }
        }
        *self = CloseMemo {
            valid: true,
            from: l,
            to: l,
            to_brk: brk,
            found: None,
        };
        Known::Nothing
    }

    /// The line starting at `line` held no closing `「末」`; the next starts at `next`.
    fn line_clear(&mut self, line: usize, next: usize, brk: usize) {
        if self.valid && self.found.is_none() && self.to == line {
            self.to = next;
            self.to_brk = brk;
        }
    }

    /// The `「末」` at `c`, on the line starting at `line`, closes.
    fn closes(&mut self, line: usize, c: usize) {
        if self.valid && self.found.is_none() && self.to == line {
            self.found = Some(c);
        }
    }
}

/// Rule 6's look-ahead after a value that crossed end-marker or pair lines: does the
/// block's end marker come before the next start marker? Known from `from` up to
/// `scanned` (where the marker that decides it starts, once `found`).
#[derive(Debug, Clone, Copy, Default)]
struct LookMemo {
    valid: bool,
    from: usize,
    scanned: usize,
    found: Option<bool>,
}

impl LookMemo {
    /// A look-ahead from `at`: its answer if known, else where to go on searching.
    fn start(&mut self, at: usize) -> Result<bool, usize> {
        if self.valid && self.from <= at && at <= self.scanned {
            return match self.found {
                Some(r) => Ok(r),
                None => Err(self.scanned),
            };
        }
        *self = LookMemo {
            valid: true,
            from: at,
            scanned: at,
            found: None,
        };
        Err(at)
    }
}

#[derive(Debug, Clone)]
enum Sub {
    OpenLine {
        on_marker_line: bool,
    },
    OpenComment,
    LineStart,
    MidLine,
    Comment,
    Stray,
    Value(ValueScan),
    Lookahead {
        v: ValueScan,
        close: usize,
        tail: usize,
        scan: usize,
    },
}

/// The state of one block being read.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    pub kind: BlockKind,
    /// Offset of the start marker.
    pub start: usize,
    pub pairs: Vec<RawPair>,
    pub diags: Vec<RawDiag>,
    pos: usize,
    sub: Sub,
}

fn match_any_start(s: &[u8], at: usize, eof: bool, starts: &[&[u8]]) -> M {
    let mut partial = false;
    for st in starts {
        match match_ci(s, at, st, eof) {
            M::Yes(e) => return M::Yes(e),
            M::Partial => partial = true,
            M::No => {}
        }
    }
    if partial {
        M::Partial
    } else {
        M::No
    }
}

/// Rule 5: does the `「末」` ending at `p` close the value?
fn after_close(s: &[u8], p: usize, eof: bool, kind: BlockKind) -> M {
    let mut p = skip_ws(s, p);
    if p < s.len() && s[p] == b',' {
        p = skip_ws(s, p + 1);
    }
    if p >= s.len() {
        return if eof { M::Yes(p) } else { M::Partial };
    }
    match line_break(s, p, eof) {
        M::Yes(_) => return M::Yes(p),
        M::Partial => return M::Partial,
        M::No => {}
    }
    if s[p] == b'<' {
        return match match_ci(s, p, kind.end(), eof) {
            M::Yes(_) => M::Yes(p),
            other => other,
        };
    }
    match match_pair_start(s, p, eof) {
        M::Yes(_) => M::Yes(p),
        M::Partial => M::Partial,
        M::No => M::No,
    }
}

fn close_tail(s: &[u8], p: usize) -> usize {
    let mut p = skip_ws(s, p);
    if p < s.len() && s[p] == b',' {
        p = skip_ws(s, p + 1);
    }
    p
}

impl Body {
    /// A block whose start marker spans `start..body`.
    pub(crate) fn new(kind: BlockKind, start: usize, body: usize, pairs: Vec<RawPair>) -> Self {
        Body {
            kind,
            start,
            pairs,
            diags: Vec::new(),
            pos: body,
            sub: Sub::OpenLine {
                on_marker_line: true,
            },
        }
    }

    /// A block as the reference reader (the pest grammar) read it: its pairs and the
    /// offsets of its stray lines, with the same warnings the scanner gives.
    pub(crate) fn replayed(
        kind: BlockKind,
        start: usize,
        pairs: Vec<RawPair>,
        strays: &[usize],
        s: &[u8],
    ) -> Self {
        let mut b = Body::new(kind, start, start, Vec::new());
        let mut strays = strays.iter().copied().peekable();
        for p in pairs {
            while let Some(at) = strays.next_if(|&at| at < p.key.0) {
                b.stray_warning(at);
            }
            if p.recovered {
                b.cut_warning(s, p.key);
            }
            b.pairs.push(p);
        }
        for at in strays {
            b.stray_warning(at);
        }
        b
    }

    fn key_str<'a>(&self, s: &'a [u8], key: (usize, usize)) -> &'a str {
        // Keys are whole characters matched by `match_pair_start`.
        std::str::from_utf8(&s[key.0..key.1]).unwrap_or("?")
    }

    fn start_value(&mut self, key: (usize, usize), value_start: usize) {
        self.sub = Sub::Value(ValueScan {
            key,
            start: value_start,
            scan: value_start,
            at_line_start: false,
            line_start: value_start,
            brk: value_start,
            first_end: None,
            first_cut: None,
            nested: false,
            pair_line: false,
        });
        self.pos = value_start;
    }

    fn cut(&mut self, s: &[u8], v: &ValueScan, end: usize) {
        self.pairs.push(RawPair {
            key: v.key,
            value: (v.start, end),
            recovered: true,
        });
        self.cut_warning(s, v.key);
        self.pos = end;
        self.sub = Sub::MidLine;
    }

    fn cut_warning(&mut self, s: &[u8], k: (usize, usize)) {
        let key = self.key_str(s, k).to_string();
        self.diags.push(RawDiag::warning(
            k.0,
            format!("value of '{key}' has no closing 「末」; it was read up to the end of its last line"),
            format!(
                "End every value with 「末」 on the same line as its last character or on a line of its own, e.g. {key}:「始」…「末」."
            ),
        ));
    }

    /// Advances over `s` (all text so far); `eof` says no more text will come.
    #[inline]
    pub(crate) fn run(
        &mut self,
        s: &[u8],
        eof: bool,
        starts: &[&[u8]],
        finder: &Finder<'_>,
        ahead: &mut Ahead,
    ) -> Step {
        let len = s.len();
        let kind = self.kind;
        loop {
            match &mut self.sub {
                Sub::OpenLine { on_marker_line } => {
                    let p = skip_ws(s, self.pos);
                    if p >= len {
                        return if eof { Step::NotBlock } else { Step::NeedMore };
                    }
                    match match_pair_start(s, p, eof) {
                        M::Yes(_) => {
                            self.pos = p;
                            self.sub = Sub::MidLine;
                            continue;
                        }
                        M::Partial => return Step::NeedMore,
                        M::No => {}
                    }
                    match line_break(s, p, eof) {
                        M::Yes(e) => {
                            self.pos = e;
                            *on_marker_line = false;
                            continue;
                        }
                        M::Partial => return Step::NeedMore,
                        M::No => {}
                    }
                    if s[p] == b'#' && !*on_marker_line {
                        self.pos = p + 1;
                        self.sub = Sub::OpenComment;
                        continue;
                    }
                    return Step::NotBlock;
                }
                Sub::OpenComment => match memchr::memchr2(b'\n', b'\r', &s[self.pos..]) {
                    Some(i) => {
                        self.pos += i;
                        self.sub = Sub::OpenLine {
                            on_marker_line: false,
                        };
                    }
                    None => {
                        if eof {
                            return Step::NotBlock;
                        }
                        self.pos = len;
                        return Step::NeedMore;
                    }
                },
                Sub::MidLine => {
                    let p = skip_ws(s, self.pos);
                    if p >= len {
                        return if eof {
                            Step::Done(BodyEnd::Eof(len))
                        } else {
                            Step::NeedMore
                        };
                    }
                    match line_break(s, p, eof) {
                        M::Yes(e) => {
                            self.pos = e;
                            self.sub = Sub::LineStart;
                            continue;
                        }
                        M::Partial => return Step::NeedMore,
                        M::No => {}
                    }
                    if s[p] == b'<' {
                        match match_ci(s, p, kind.end(), eof) {
                            M::Yes(e) => return Step::Done(BodyEnd::Terminated(e)),
                            M::Partial => return Step::NeedMore,
                            M::No => {}
                        }
                    }
                    match match_pair_start(s, p, eof) {
                        M::Yes(ps) => {
                            self.start_value((ps.key_start, ps.key_end), ps.value_start);
                            continue;
                        }
                        M::Partial => return Step::NeedMore,
                        M::No => {}
                    }
                    // Not reachable after a value (rule 5 guarantees what follows), kept
                    // as a safe fallback: read the rest of the line as stray text.
                    self.pos = p;
                    self.stray_warning(p);
                    self.sub = Sub::Stray;
                }
                Sub::LineStart => {
                    let p = skip_ws(s, self.pos);
                    if p >= len {
                        return if eof {
                            Step::Done(BodyEnd::Eof(len))
                        } else {
                            Step::NeedMore
                        };
                    }
                    // Markers begin with `<`, which no key, comment or line break does.
                    if s[p] == b'<' {
                        match match_ci(s, p, kind.end(), eof) {
                            M::Yes(e) => return Step::Done(BodyEnd::Terminated(e)),
                            M::Partial => return Step::NeedMore,
                            M::No => {}
                        }
                        match match_any_start(s, p, eof, starts) {
                            M::Yes(_) => return Step::Done(BodyEnd::AtStart(p)),
                            M::Partial => return Step::NeedMore,
                            M::No => {}
                        }
                    }
                    match match_pair_start(s, p, eof) {
                        M::Yes(ps) => {
                            self.start_value((ps.key_start, ps.key_end), ps.value_start);
                            continue;
                        }
                        M::Partial => return Step::NeedMore,
                        M::No => {}
                    }
                    if s[p] == b'#' {
                        self.pos = p + 1;
                        self.sub = Sub::Comment;
                        continue;
                    }
                    match line_break(s, p, eof) {
                        M::Yes(e) => {
                            self.pos = e;
                            continue;
                        }
                        M::Partial => return Step::NeedMore,
                        M::No => {}
                    }
                    self.pos = p;
                    self.stray_warning(p);
                    self.sub = Sub::Stray;
                }
                Sub::Comment => match memchr::memchr2(b'\n', b'\r', &s[self.pos..]) {
                    Some(i) => {
                        self.pos += i;
                        self.sub = Sub::MidLine;
                    }
                    None => {
                        if eof {
                            return Step::Done(BodyEnd::Eof(len));
                        }
                        self.pos = len;
                        return Step::NeedMore;
                    }
                },
                Sub::Stray => match memchr::memchr3(b'\n', b'\r', b'<', &s[self.pos..]) {
                    Some(i) => {
                        let p = self.pos + i;
                        if s[p] != b'<' {
                            self.pos = p;
                            self.sub = Sub::MidLine;
                            continue;
                        }
                        match match_ci(s, p, kind.end(), eof) {
                            M::Yes(e) => return Step::Done(BodyEnd::Terminated(e)),
                            M::Partial => {
                                self.pos = p;
                                return Step::NeedMore;
                            }
                            M::No => {}
                        }
                        match match_any_start(s, p, eof, starts) {
                            M::Yes(_) => return Step::Done(BodyEnd::AtStart(p)),
                            M::Partial => {
                                self.pos = p;
                                return Step::NeedMore;
                            }
                            M::No => {}
                        }
                        self.pos = p + 1;
                    }
                    None => {
                        if eof {
                            return Step::Done(BodyEnd::Eof(len));
                        }
                        self.pos = len;
                        return Step::NeedMore;
                    }
                },
                Sub::Value(_) => {
                    let Sub::Value(mut v) = std::mem::replace(&mut self.sub, Sub::MidLine) else {
                        unreachable!("matched Sub::Value above")
                    };
                    let r = self.run_value(s, eof, starts, finder, ahead, &mut v);
                    match r {
                        ValueStep::NeedMore => {
                            self.sub = Sub::Value(v);
                            return Step::NeedMore;
                        }
                        ValueStep::Cut(end) => self.cut(s, &v, end),
                        ValueStep::Closed(c) => {
                            let tail = close_tail(s, c + CLOSE.len());
                            if v.first_end.is_none() && !v.nested {
                                self.pairs.push(RawPair {
                                    key: v.key,
                                    value: (v.start, c),
                                    recovered: false,
                                });
                                self.pos = tail;
                                self.sub = Sub::MidLine;
                            } else {
                                self.sub = Sub::Lookahead {
                                    v,
                                    close: c,
                                    tail,
                                    scan: tail,
                                };
                            }
                        }
                    }
                }
                Sub::Lookahead {
                    v,
                    close,
                    tail,
                    scan,
                } => {
                    // Rule 6: end-marker and pair lines inside a closed value are content
                    // only if another end marker follows before the next start marker.
                    let found = match ahead.look.start(*scan) {
                        Ok(r) => Some(r),
                        Err(from) => {
                            *scan = from;
                            let found = loop {
                                match memchr::memchr(b'<', &s[*scan..]) {
                                    Some(i) => {
                                        let p = *scan + i;
                                        match match_ci(s, p, kind.end(), eof) {
                                            M::Yes(_) => {
                                                *scan = p;
                                                break Some(true);
                                            }
                                            M::Partial => {
                                                *scan = p;
                                                break None;
                                            }
                                            M::No => {}
                                        }
                                        match match_any_start(s, p, eof, starts) {
                                            M::Yes(_) => {
                                                *scan = p;
                                                break Some(false);
                                            }
                                            M::Partial => {
                                                *scan = p;
                                                break None;
                                            }
                                            M::No => {}
                                        }
                                        *scan = p + 1;
                                    }
                                    None => {
                                        *scan = len;
                                        break if eof { Some(false) } else { None };
                                    }
                                }
                            };
                            ahead.look.scanned = *scan;
                            ahead.look.found = found;
                            found
                        }
                    };
                    match found {
                        None => return Step::NeedMore,
                        Some(true) => {
                            let (close, tail) = (*close, *tail);
                            self.pairs.push(RawPair {
                                key: v.key,
                                value: (v.start, close),
                                recovered: false,
                            });
                            self.pos = tail;
                            self.sub = Sub::MidLine;
                        }
                        Some(false) => {
                            let v = v.clone();
                            // `first_cut` is set whenever `first_end` is.
                            let end = v.first_cut.unwrap_or(close.to_owned());
                            self.cut(s, &v, end);
                        }
                    }
                }
            }
        }
    }

    fn stray_warning(&mut self, at: usize) {
        self.diags.push(RawDiag::warning(
            at,
            format!(
                "line inside a {} block is not a key:「始」value「末」 pair, a # comment or the end marker; it was ignored",
                self.kind.start_text()
            ),
            "Write parameters as key:「始」value「末」 and start comment lines with #.".to_string(),
        ));
    }

    fn run_value(
        &mut self,
        s: &[u8],
        eof: bool,
        starts: &[&[u8]],
        finder: &Finder<'_>,
        ahead: &mut Ahead,
        v: &mut ValueScan,
    ) -> ValueStep {
        let len = s.len();
        let kind = self.kind;
        loop {
            if v.at_line_start {
                let q = skip_ws(s, v.scan);
                v.pair_line = false;
                match match_ci(s, q, kind.end(), eof) {
                    M::Yes(_) => {
                        v.first_end.get_or_insert(v.brk);
                        v.first_cut.get_or_insert(v.brk);
                    }
                    M::Partial => return ValueStep::NeedMore,
                    M::No => match match_any_start(s, q, eof, starts) {
                        M::Yes(_) => {
                            v.first_cut.get_or_insert(v.brk);
                        }
                        M::Partial => return ValueStep::NeedMore,
                        M::No => match match_pair_start(s, q, eof) {
                            // Rule 6: a pair line ends the value only if no later 「末」
                            // closes it; until one does, its cut would be here.
                            M::Yes(_) => {
                                v.first_cut.get_or_insert(v.brk);
                                v.nested = true;
                                v.pair_line = true;
                            }
                            M::Partial => return ValueStep::NeedMore,
                            M::No => {}
                        },
                    },
                }
                v.at_line_start = false;
                if v.nested {
                    match ahead.close.at_line(v.line_start, v.brk) {
                        Known::Close(c) => return ValueStep::Closed(c),
                        Known::ClearTo(to, brk) => {
                            v.scan = to;
                            v.line_start = to;
                            v.brk = brk;
                            v.at_line_start = true;
                            continue;
                        }
                        Known::Nothing => {}
                    }
                }
            }
            if v.pair_line {
                // A pair line inside a nested value is content, its 「末」s included.
                match memchr::memchr2(b'\n', b'\r', &s[v.scan..]) {
                    Some(i) => {
                        let b = v.scan + i;
                        match line_break(s, b, eof) {
                            M::Yes(e) => {
                                ahead.close.line_clear(v.line_start, e, b);
                                v.brk = b;
                                v.scan = e;
                                v.line_start = e;
                                v.at_line_start = true;
                                continue;
                            }
                            _ => {
                                v.scan = b;
                                return ValueStep::NeedMore;
                            }
                        }
                    }
                    None => {
                        if eof {
                            // `first_cut` is set on every pair line.
                            return ValueStep::Cut(v.first_cut.unwrap_or(v.brk));
                        }
                        v.scan = len;
                        return ValueStep::NeedMore;
                    }
                }
            }
            // Look for a line break only up to the next 「末」, so a long line with many
            // values is not searched again for each of them.
            let nc = ahead.next_close(s, v.scan, finder);
            let limit = nc.unwrap_or(len);
            let nb = memchr::memchr2(b'\n', b'\r', &s[v.scan..limit]).map(|i| v.scan + i);
            match (nc, nb) {
                (_, Some(b)) => match line_break(s, b, eof) {
                    M::Yes(e) => {
                        if v.nested {
                            ahead.close.line_clear(v.line_start, e, b);
                        }
                        v.brk = b;
                        v.scan = e;
                        v.line_start = e;
                        v.at_line_start = true;
                    }
                    _ => {
                        v.scan = b;
                        return ValueStep::NeedMore;
                    }
                },
                (Some(c), None) => match after_close(s, c + CLOSE.len(), eof, kind) {
                    M::Yes(_) => {
                        if v.nested {
                            ahead.close.closes(v.line_start, c);
                        }
                        return ValueStep::Closed(c);
                    }
                    M::No => v.scan = c + CLOSE.len(),
                    M::Partial => {
                        v.scan = c;
                        return ValueStep::NeedMore;
                    }
                },
                _ => {
                    if eof {
                        if let Some(c) = v.first_cut {
                            return ValueStep::Cut(c);
                        }
                        // A last line break before the end of the text is not content.
                        if v.line_start == len && v.line_start > v.start {
                            return ValueStep::Cut(v.brk);
                        }
                        return ValueStep::Cut(len);
                    }
                    v.scan = v
                        .scan
                        .max(floor_boundary(s, len.saturating_sub(CLOSE.len() - 1)));
                    return ValueStep::NeedMore;
                }
            }
        }
    }
}

enum ValueStep {
    NeedMore,
    Closed(usize),
    Cut(usize),
}
