//! The text reader: one forward pass that finds reasoning regions, `key:「始」value「末」`
//! blocks (TAM, VCP) and tagged regions (`<ACTION>`), keeps the prose between them, and
//! turns blocks into calls. Which blocks and regions it looks for, and how each becomes
//! calls, comes from the format table (`formats/mod.rs`), looked up once per text and
//! once per block.
//!
//! The same [`Scanner`] serves one-shot [`parse`](super::parse) (one run with the whole
//! text) and the [`StreamReader`](super::StreamReader) (one run per chunk that may close
//! something). It never looks back further than a marker's length, so the total work
//! is linear in the text whatever the chunking.

use memchr::memmem::Finder;

use super::block::{Ahead, BlockKind, BlockReading, Body, BodyEnd, Step};
use super::formats::lead::{self, LeadRead, Taken};
use super::formats::lit::ValueEnd;
use super::formats::{self, Close, Open, Reader, RegionSyntax};
use super::lex::{match_ci, match_exact, skip_ws, CLOSE, M, OPEN};
use super::locate::{locate_diags, Locator};
use super::types::{Call, Diagnostic, Format, RawDiag, RawPair, Severity, Span};

/// A region the reference reader (the pest grammar, [`super::grammar`]) found, in text
/// order; [`Scanner::replay`] turns them into the same [`Parsed`](super::Parsed) the
/// scanner builds.
#[derive(Debug)]
pub(crate) enum Region {
    /// `<think>…</think>` (or unclosed to the end of the text).
    Think {
        start: usize,
        end: usize,
        closed: bool,
    },
    /// A `</think>` with no opening tag.
    StrayThinkClose { start: usize, end: usize },
    /// A TAM or VCP block, its pairs and the offsets of its stray lines.
    Block {
        kind: BlockKind,
        start: usize,
        end: BodyEnd,
        pairs: Vec<RawPair>,
        strays: Vec<usize>,
    },
    /// A tagged region (`<ACTION>`): content start and, when closed, the closing tag's
    /// range.
    Action {
        syntax: &'static RegionSyntax,
        start: usize,
        content: usize,
        close: Option<(usize, usize)>,
    },
}

/// A stretch of prose and whether a block follows it directly.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    before_block: bool,
}

/// What the scanner looks for at a `<` in prose, from the format table.
#[derive(Debug, Clone, Copy)]
enum Opener {
    /// A block start marker.
    Block(BlockKind),
    /// A tagged region's opening tag.
    Region(&'static RegionSyntax),
}

#[derive(Debug)]
enum Mode {
    Prose,
    Think {
        start: usize,
    },
    Block(Body),
    Region {
        syntax: &'static RegionSyntax,
        start: usize,
        content: usize,
        /// 0, or 1 + the index of the opaque section being skipped.
        opaque: u8,
        /// Where a region that ends with its value ([`Close::Value`]) stands.
        value: ValuePhase,
    },
    Done,
}

/// Reading a region that ends with its bracketed value.
#[derive(Debug, Clone, Copy)]
enum ValuePhase {
    /// Before the value (blanks, or a name and its marker); true once a name was read.
    Lead(bool),
    /// Inside the value.
    In(ValueEnd),
    /// After a value that ended here; another may follow a separator.
    After(usize),
}

/// Where a region ends, as far as the text tells.
enum RegionEnd {
    /// More text is needed.
    NeedMore,
    /// The text ended inside it.
    Eof,
    /// Its content ends at the first offset, the region at the second.
    Closed(usize, usize),
    /// No call follows the opening marker: it is prose.
    NotRegion,
}

enum Lt {
    None,
    Partial,
    ThinkOpen(usize),
    ThinkClose(usize),
    Block(BlockKind, usize),
    Region(&'static RegionSyntax, usize),
}

/// The resumable reader of TAM, VCP and `<ACTION>` blocks in prose.
#[derive(Debug)]
pub(crate) struct Scanner {
    /// The format it reads.
    pub format: Format,
    /// The start markers of the block kinds read (the block scanner ends a block at one).
    starts: Vec<&'static [u8]>,
    /// What a `<` in prose may open, in table order.
    openers: Vec<Opener>,
    pos: usize,
    mode: Mode,
    piece_start: usize,
    pieces: Vec<Piece>,
    pub calls: Vec<Call>,
    pub diags: Vec<RawDiag>,
    blocks: usize,
    loc: Locator,
    close_finder: Finder<'static>,
    recorded: Option<Vec<BlockReading>>,
    /// Up to two bytes (besides `<`) that may open a region in prose (`[`, a backtick).
    other_trigger: [Option<u8>; 2],
    /// Where the first `<ACTION>` block (a region read `only_first`) ended: only that
    /// block runs, and the response text is the prose before it (seed 002 §3.2.1, §3.3
    /// step 4).
    first_action_end: Option<usize>,
    spare_pairs: Vec<RawPair>,
    /// What values read so far learned about the text ahead (rule 6), per block kind
    /// (TAM, VCP): kept across blocks so the reading stays linear.
    ahead: [Ahead; 2],
    /// True once the leading pass at the start of the answer ran (`lead_first`).
    lead_done: bool,
    /// Streaming: a marker the text ended inside (`Lt::Partial`) at this offset, and what
    /// could still match there (see [`Scanner::classify_masked`]'s mask). The rest did not
    /// match the bytes already there, which more bytes cannot change, so the next run
    /// re-tries only these.
    stalled: Option<(usize, u64)>,
    /// The fewest bytes anything a trigger may open takes whole (`<think>`, a marker):
    /// with fewer after a trigger, a stream's run waits for more without trying any.
    min_open: usize,
}

/// Bits of [`Scanner::classify_masked`]'s mask: one per opener (up to 62, else the
/// stream re-tries every one), then the two reasoning tags.
const THINK_OPEN: u64 = 1 << 62;
const THINK_CLOSE: u64 = 1 << 63;
const MAX_MASKED: usize = 62;

/// `<think>` or `</think>` (also `<thinking>`, and Seed-OSS' `<seed:think>`) at `p`.
fn think_tag(s: &[u8], p: usize, eof: bool, close: bool) -> M {
    let pat: &[u8] = if close { b"</think" } else { b"<think" };
    let mut q = match match_ci(s, p, pat, eof) {
        M::Yes(e) => e,
        M::No => {
            let seed: &[u8] = if close {
                b"</seed:think"
            } else {
                b"<seed:think"
            };
            match match_ci(s, p, seed, eof) {
                M::Yes(e) => e,
                other => return other,
            }
        }
        M::Partial => {
            // `<th` could still be `<think`; `<` alone could also be `<seed:think`.
            return M::Partial;
        }
    };
    match match_ci(s, q, b"ing", eof) {
        M::Yes(e) => q = e,
        M::Partial => return M::Partial,
        M::No => {}
    }
    q = skip_ws(s, q);
    match s.get(q) {
        Some(b'>') => M::Yes(q + 1),
        Some(_) => M::No,
        None if eof => M::No,
        None => M::Partial,
    }
}

/// Kimi K2's section or call opening marker at `p`, which ends an open `<think>`.
fn kimi_mark(s: &[u8], p: usize, eof: bool) -> M {
    if s.get(p + 1).is_some_and(|&b| b != b'|') {
        return M::No;
    }
    let mut partial = false;
    for pat in [
        &b"<|tool_calls_section_begin|>"[..],
        b"<|tool_call_section_begin|>",
        b"<|tool_call_begin|>",
    ] {
        match match_exact(s, p, pat, eof) {
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

/// A tag (`pat` is `<name` or `</name`, lowercase) matched case-insensitively, then
/// optional blanks and `>`.
fn tag(s: &[u8], p: usize, eof: bool, pat: &[u8]) -> M {
    let q = match match_ci(s, p, pat, eof) {
        M::Yes(e) => skip_ws(s, e),
        other => return other,
    };
    match s.get(q) {
        Some(b'>') => M::Yes(q + 1),
        Some(_) => M::No,
        None if eof => M::No,
        None => M::Partial,
    }
}

impl Scanner {
    /// A reader for `format`'s blocks and regions, or for `auto`, of every format `auto`
    /// finds in text (a document format, such as JSON, reads nothing here).
    pub(crate) fn new(format: Format) -> Self {
        let mut openers: Vec<Opener> = Vec::new();
        for e in formats::readers_for(format) {
            if let Reader::Pairs { kind, .. } = e.reader {
                openers.push(Opener::Block(kind));
            }
            for r in formats::regions_of(e) {
                // Rows that share a tag (`<tool_call>`: Hermes JSON, Qwen3-Coder XML, a
                // GLM-4.5 name line) share its reader, which tells them apart by what is
                // inside; the first row's opener serves them all.
                let shared = openers
                    .iter()
                    .any(|o| matches!(o, Opener::Region(q) if q.open.same(r.open)));
                if !shared {
                    openers.push(Opener::Region(r));
                }
            }
        }
        let mut other_trigger = [None, None];
        for o in &openers {
            if let Opener::Region(r) = o {
                let b = r.open.first_byte();
                if b != b'<' && !other_trigger.contains(&Some(b)) {
                    if let Some(slot) = other_trigger.iter_mut().find(|t| t.is_none()) {
                        *slot = Some(b);
                    }
                }
            }
        }
        let min_open = openers
            .iter()
            .map(|o| match *o {
                Opener::Block(kind) => kind.start().len(),
                Opener::Region(r) => match r.open {
                    Open::Exact(p) => p.len(),
                    Open::Tag(p) => p.len() + 1,
                    Open::Named(p) => p.len() + 2,
                },
            })
            .chain(std::iter::once(b"<think>".len()))
            .min()
            .unwrap_or(1);
        Scanner {
            format,
            min_open,
            other_trigger,
            starts: openers
                .iter()
                .filter_map(|o| match o {
                    Opener::Block(k) => Some(k.start()),
                    Opener::Region(_) => None,
                })
                .collect(),
            openers,
            pos: 0,
            mode: Mode::Prose,
            piece_start: 0,
            pieces: Vec::new(),
            calls: Vec::new(),
            diags: Vec::new(),
            blocks: 0,
            loc: Locator::default(),
            close_finder: Finder::new(CLOSE),
            first_action_end: None,
            recorded: None,
            spare_pairs: Vec::new(),
            ahead: Default::default(),
            lead_done: false,
            stalled: None,
        }
    }

    /// Keeps a copy of every TAM/VCP block's raw reading (for the grammar tests).
    pub(crate) fn record_blocks(&mut self) {
        self.recorded = Some(Vec::new());
    }

    /// The raw readings kept since [`Scanner::record_blocks`].
    pub(crate) fn take_recorded(&mut self) -> Vec<BlockReading> {
        self.recorded.take().unwrap_or_default()
    }

    /// What the trigger byte at `p` opens.
    fn classify_lt(&self, s: &[u8], p: usize, eof: bool) -> Lt {
        let mut partial = false;
        if s[p] != b'<' {
            for o in &self.openers {
                if let Opener::Region(r) = *o {
                    match open_region(s, p, eof, r.open) {
                        M::Yes(e) => return Lt::Region(r, e),
                        M::Partial => partial = true,
                        M::No => {}
                    }
                }
            }
            return if partial { Lt::Partial } else { Lt::None };
        }
        match think_tag(s, p, eof, false) {
            M::Yes(e) => return Lt::ThinkOpen(e),
            M::Partial => partial = true,
            M::No => {}
        }
        for o in &self.openers {
            let m = match *o {
                Opener::Block(kind) => match match_ci(s, p, kind.start(), eof) {
                    M::Yes(e) => return Lt::Block(kind, e),
                    m => m,
                },
                Opener::Region(r) => match open_region(s, p, eof, r.open) {
                    M::Yes(e) => return Lt::Region(r, e),
                    m => m,
                },
            };
            partial |= m == M::Partial;
        }
        match think_tag(s, p, eof, true) {
            M::Yes(e) => return Lt::ThinkClose(e),
            M::Partial => partial = true,
            M::No => {}
        }
        if partial {
            Lt::Partial
        } else {
            Lt::None
        }
    }

    /// [`classify_lt`](Self::classify_lt) trying only what `maybe` allows (bit `i` for
    /// `openers[i]`, and [`THINK_OPEN`] and [`THINK_CLOSE`]); on `Lt::Partial` it also
    /// returns what is still possible (else 0). A separate copy, so the one-shot read
    /// (`parse`, the hot loop over prose) runs the plain version unchanged.
    fn classify_masked(&self, s: &[u8], p: usize, eof: bool, maybe: u64) -> (Lt, u64) {
        let bit = |i: usize| if i < MAX_MASKED { 1u64 << i } else { !0 };
        let skip = |b: u64| maybe & b == 0;
        let mut partial = 0u64;
        if s[p] != b'<' {
            for (i, o) in self.openers.iter().enumerate() {
                if skip(bit(i)) {
                    continue;
                }
                if let Opener::Region(r) = *o {
                    match open_region(s, p, eof, r.open) {
                        M::Yes(e) => return (Lt::Region(r, e), 0),
                        M::Partial => partial |= bit(i),
                        M::No => {}
                    }
                }
            }
            return if partial != 0 {
                (Lt::Partial, partial)
            } else {
                (Lt::None, 0)
            };
        }
        if !skip(THINK_OPEN) {
            match think_tag(s, p, eof, false) {
                M::Yes(e) => return (Lt::ThinkOpen(e), 0),
                M::Partial => partial |= THINK_OPEN,
                M::No => {}
            }
        }
        for (i, o) in self.openers.iter().enumerate() {
            if skip(bit(i)) {
                continue;
            }
            let m = match *o {
                Opener::Block(kind) => match match_ci(s, p, kind.start(), eof) {
                    M::Yes(e) => return (Lt::Block(kind, e), 0),
                    m => m,
                },
                Opener::Region(r) => match open_region(s, p, eof, r.open) {
                    M::Yes(e) => return (Lt::Region(r, e), 0),
                    m => m,
                },
            };
            if m == M::Partial {
                partial |= bit(i);
            }
        }
        if !skip(THINK_CLOSE) {
            match think_tag(s, p, eof, true) {
                M::Yes(e) => return (Lt::ThinkClose(e), 0),
                M::Partial => partial |= THINK_CLOSE,
                M::No => {}
            }
        }
        if partial != 0 {
            (Lt::Partial, partial)
        } else {
            (Lt::None, 0)
        }
    }

    /// [`classify_lt`](Self::classify_lt) for a stream's run (`eof` false): at the
    /// marker the last run stopped inside, only what was still possible there.
    #[inline(never)]
    fn classify_streamed(&mut self, s: &[u8], p: usize, eof: bool) -> Lt {
        if s.len() - p < self.min_open {
            // Nothing can open here yet (a chunk ended just after the trigger).
            self.stalled = None;
            return Lt::Partial;
        }
        let maybe = match self.stalled.take() {
            Some((at, m)) if at == p => m,
            _ => !0,
        };
        let (lt, still) = self.classify_masked(s, p, eof, maybe);
        if let Lt::Partial = lt {
            self.stalled = Some((p, still));
        }
        lt
    }

    fn end_piece(&mut self, end: usize, before_block: bool) {
        if end > self.piece_start {
            self.pieces.push(Piece {
                start: self.piece_start,
                end,
                before_block,
            });
        }
    }

    /// True when only a `>` can end what the scanner is inside (a block, a reasoning
    /// region, a region closed by a tag or marker), so the streaming reader need not
    /// run it for a chunk without one: the bytes are read on the next run all the same.
    /// In a region a tag closes that ends in `>`: the tag without its `>`, and whether it
    /// may differ in case and have blanks before its `>` (`Close::Tag`, against
    /// `Close::Exact`). A run there can only end the region (or yield anything) once the
    /// text holds the whole tag, so a stream need not run at a `>` that does not end it.
    pub(crate) fn gt_close(&self) -> Option<(&'static [u8], bool)> {
        match &self.mode {
            Mode::Region { syntax, .. } => match syntax.close {
                Close::Exact(t) => t.strip_suffix(b">").map(|t| (t, false)),
                Close::Tag(t) => Some((t, true)),
                _ => None,
            },
            _ => None,
        }
    }

    pub(crate) fn waits_for_gt(&self) -> bool {
        match &self.mode {
            Mode::Block(_) | Mode::Think { .. } => true,
            Mode::Region { syntax, .. } => match syntax.close {
                Close::Tag(_) | Close::AnyExact(_) => true,
                Close::Exact(t) => t.last() == Some(&b'>'),
                Close::Value { .. } => false,
            },
            Mode::Prose | Mode::Done => false,
        }
    }

    fn span(&mut self, s: &[u8], start: usize, end: usize) -> Span {
        let (line, column) = self.loc.locate(s, start);
        Span {
            start,
            end,
            line,
            column,
        }
    }

    /// Reads as far as `text` allows. With `eof`, everything is decided.
    pub(crate) fn run(&mut self, text: &str, eof: bool) {
        let s = text.as_bytes();
        let len = s.len();
        loop {
            match &mut self.mode {
                Mode::Done => return,
                Mode::Prose => match self.next_trigger(&s[self.pos..]) {
                    None => {
                        self.pos = len;
                        if eof {
                            self.end_piece(len, false);
                            self.mode = Mode::Done;
                        }
                        return;
                    }
                    Some(i) => {
                        let p = self.pos + i;
                        let lt = if eof {
                            self.classify_lt(s, p, eof)
                        } else {
                            self.classify_streamed(s, p, eof)
                        };
                        match lt {
                            Lt::None => self.pos = p + 1,
                            Lt::Partial => {
                                self.pos = p;
                                return;
                            }
                            Lt::ThinkOpen(e) => {
                                self.end_piece(p, false);
                                self.mode = Mode::Think { start: p };
                                self.pos = e;
                            }
                            Lt::ThinkClose(e) => self.stray_think_close(p, e),
                            Lt::Block(kind, e) => {
                                let mut pairs = std::mem::take(&mut self.spare_pairs);
                                pairs.clear();
                                self.mode = Mode::Block(Body::new(kind, p, e, pairs));
                                self.pos = e;
                            }
                            Lt::Region(syntax, e) => {
                                self.end_piece(p, true);
                                self.mode = Mode::Region {
                                    syntax,
                                    start: p,
                                    content: e,
                                    opaque: 0,
                                    value: ValuePhase::Lead(false),
                                };
                                self.pos = e;
                            }
                        }
                    }
                },
                Mode::Think { start } => {
                    let start = *start;
                    match memchr::memchr(b'<', &s[self.pos..]) {
                        None => {
                            self.pos = len;
                            if eof {
                                self.unclosed_think(start, len);
                            }
                            return;
                        }
                        Some(i) => {
                            let p = self.pos + i;
                            match think_tag(s, p, eof, true) {
                                M::Yes(e) => {
                                    self.piece_start = e;
                                    self.pos = e;
                                    self.mode = Mode::Prose;
                                }
                                M::Partial => {
                                    self.pos = p;
                                    return;
                                }
                                M::No => match kimi_mark(s, p, eof) {
                                    // Kimi K2 Thinking calls from inside its reasoning: its
                                    // call markers (special tokens, never prose) end it.
                                    M::Yes(_) => {
                                        self.piece_start = p;
                                        self.pos = p;
                                        self.mode = Mode::Prose;
                                    }
                                    M::Partial => {
                                        self.pos = p;
                                        return;
                                    }
                                    M::No => self.pos = p + 1,
                                },
                            }
                        }
                    }
                }
                Mode::Block(body) => {
                    let ahead = &mut self.ahead[usize::from(body.kind == BlockKind::Vcp)];
                    let step = body.run(s, eof, &self.starts, &self.close_finder, ahead);
                    match step {
                        Step::NeedMore => return,
                        Step::NotBlock => {
                            // Rule 9: the marker is prose; read on just after its `<`.
                            self.pos = body.start + 1;
                            self.mode = Mode::Prose;
                        }
                        Step::Done(end) => {
                            let Mode::Block(body) = std::mem::replace(&mut self.mode, Mode::Prose)
                            else {
                                unreachable!("matched Mode::Block above")
                            };
                            self.finish_block(text, body, end, eof);
                        }
                    }
                }
                Mode::Region {
                    syntax,
                    start,
                    content,
                    opaque,
                    value,
                } => {
                    let (syntax, start, content) = (*syntax, *start, *content);
                    let found = match syntax.close {
                        Close::Tag(_) | Close::Exact(_) | Close::AnyExact(_) => {
                            find_region_end(s, &mut self.pos, syntax, opaque, eof)
                        }
                        Close::Value {
                            sep,
                            name_then,
                            call_id,
                            trailer,
                        } => find_value_end(
                            s,
                            &mut self.pos,
                            (sep, name_then, call_id, trailer),
                            value,
                            eof,
                        ),
                    };
                    match found {
                        RegionEnd::NeedMore => return,
                        RegionEnd::Closed(end_tag, end) => {
                            self.region_closed(text, syntax, start, content, (end_tag, end), eof);
                        }
                        RegionEnd::Eof => self.region_unclosed(text, syntax, start, content),
                        RegionEnd::NotRegion => {
                            // Like rule 9: a marker with no call after it is prose.
                            if self
                                .pieces
                                .last()
                                .is_some_and(|p| p.end == start && p.start == self.piece_start)
                            {
                                self.pieces.pop();
                            }
                            self.pos = start + 1;
                            self.mode = Mode::Prose;
                        }
                    }
                }
            }
        }
    }

    /// The offset in `rest` of the next byte that may start something in prose.
    #[inline]
    fn next_trigger(&self, rest: &[u8]) -> Option<usize> {
        match self.other_trigger {
            [None, _] => memchr::memchr(b'<', rest),
            [Some(b), None] => memchr::memchr2(b'<', b, rest),
            [Some(b), Some(c)] => memchr::memchr3(b'<', b, c, rest),
        }
    }

    fn stray_think_close(&mut self, p: usize, e: usize) {
        self.diags.push(RawDiag::warning(
            p,
            "closing reasoning tag without an opening <think>; the text before it was read as normal output".into(),
            "Open reasoning with <think> and close it with </think>.".into(),
        ));
        self.end_piece(p, false);
        self.piece_start = e;
        self.pos = e;
    }

    /// A region (an `<ACTION>` block) from `start` whose closing tag is `end_tag..end`.
    fn region_closed(
        &mut self,
        text: &str,
        syntax: &RegionSyntax,
        start: usize,
        content: usize,
        (end_tag, end): (usize, usize),
        eof: bool,
    ) {
        self.lead_first(text);
        let block = self.blocks;
        self.blocks += 1;
        match syntax.only_first {
            Some(hint) if self.first_action_end.is_some() => {
                self.later_region(syntax, hint, start, block, false);
            }
            only_first => {
                if only_first.is_some() {
                    self.first_action_end = Some(end);
                }
                let span = self.span(text.as_bytes(), start, end);
                self.reserve_calls(text.len(), end, eof);
                let first = self.calls.len();
                (syntax.read)(
                    text,
                    content,
                    end_tag,
                    block,
                    span,
                    &mut self.diags,
                    &mut self.calls,
                );
                self.region_prose(text, syntax, content, end_tag);
                self.own_source(first);
            }
        }
        self.piece_start = end;
        self.pos = end;
        self.mode = Mode::Prose;
    }

    /// Calls read under one format's name are that format's, whatever shape of a shared
    /// tag they were written in (`--format hermes` reading a Qwen3-Coder `<tool_call>`).
    fn own_source(&mut self, first: usize) {
        if self.format != Format::Auto {
            for c in &mut self.calls[first..] {
                c.source = self.format;
            }
        }
    }

    /// The response text a region holds (harmony's `final` channel), as prose.
    fn region_prose(&mut self, text: &str, syntax: &RegionSyntax, content: usize, end: usize) {
        if let Some(at) = syntax.prose.and_then(|f| f(text, content, end)) {
            if end > at {
                self.pieces.push(Piece {
                    start: at,
                    end,
                    before_block: false,
                });
            }
        }
    }

    /// A region from `start` that the text ends inside: an error, or (for formats that
    /// read it) its content up to the end with a warning.
    fn region_unclosed(&mut self, text: &str, syntax: &RegionSyntax, start: usize, content: usize) {
        self.lead_first(text);
        let len = text.len();
        let block = self.blocks;
        self.blocks += 1;
        match syntax.only_first {
            Some(hint) if self.first_action_end.is_some() => {
                self.later_region(syntax, hint, start, block, true);
            }
            _ if syntax.reads_unclosed => {
                let (message, hint) = syntax.unclosed;
                let before = self.diags.len();
                let span = self.span(text.as_bytes(), start, len);
                let first = self.calls.len();
                (syntax.read)(
                    text,
                    content,
                    len,
                    block,
                    span,
                    &mut self.diags,
                    &mut self.calls,
                );
                if self.diags[before..]
                    .iter()
                    .any(|d| d.severity == Severity::Error)
                {
                    // Something in it was cut off: nothing of it runs.
                    self.calls.truncate(first);
                } else if syntax.prose.is_none() {
                    self.diags
                        .push(RawDiag::warning(start, message.into(), hint.into()));
                }
                self.region_prose(text, syntax, content, len);
                self.own_source(first);
            }
            _ => {
                let (message, hint) = syntax.unclosed;
                self.diags
                    .push(RawDiag::error(start, message.into(), hint.into()));
            }
        }
        self.piece_start = len;
        self.pos = len;
        self.mode = Mode::Done;
    }

    /// Builds the result from regions found by the reference reader instead of scanning:
    /// the same prose, block, call and diagnostic logic as [`Scanner::run`] with `eof`.
    pub(crate) fn replay(&mut self, text: &str, regions: Vec<Region>) {
        let len = text.len();
        for r in regions {
            match r {
                Region::Think { start, end, closed } => {
                    self.end_piece(start, false);
                    if !closed {
                        self.unclosed_think(start, len);
                        return;
                    }
                    self.piece_start = end;
                }
                Region::StrayThinkClose { start, end } => self.stray_think_close(start, end),
                Region::Block {
                    kind,
                    start,
                    end,
                    pairs,
                    strays,
                } => {
                    let body = Body::replayed(kind, start, pairs, &strays, text.as_bytes());
                    self.finish_block(text, body, end, true);
                }
                Region::Action {
                    syntax,
                    start,
                    content,
                    close: Some((tag, end)),
                } => {
                    self.end_piece(start, true);
                    self.region_closed(text, syntax, start, content, (tag, end), true);
                }
                Region::Action {
                    syntax,
                    start,
                    content,
                    close: None,
                } => {
                    self.end_piece(start, true);
                    self.region_unclosed(text, syntax, start, content);
                    return;
                }
            }
        }
        self.end_piece(len, false);
        self.mode = Mode::Done;
    }

    /// A second (or later) `<ACTION>` block: a warning, and none of its calls run.
    fn later_region(
        &mut self,
        syntax: &RegionSyntax,
        hint: &str,
        start: usize,
        block: usize,
        unclosed: bool,
    ) {
        let what = if unclosed {
            " (it is never closed)"
        } else {
            ""
        };
        let shown = syntax.shown_as;
        self.diags.push(RawDiag::warning(
            start,
            format!("only the first {shown} block runs; this {shown} block (block {block}){what} was not executed"),
            hint.into(),
        ));
    }

    fn unclosed_think(&mut self, start: usize, len: usize) {
        self.diags.push(RawDiag::warning(
            start,
            "<think> is never closed; everything after it was treated as reasoning and nothing in it was executed".into(),
            "Close reasoning with </think> before writing calls.".into(),
        ));
        self.piece_start = len;
        self.mode = Mode::Done;
    }

    /// Before adding a block's calls: when the calls vector is full, grows it once by the
    /// number of calls the rest of the text is likely to hold (calls so far, scaled to
    /// its length), instead of doubling repeatedly (copying every call each time); capped
    /// so a block early in a long text cannot over-reserve.
    fn reserve_calls(&mut self, text_len: usize, block_end: usize, eof: bool) {
        if self.calls.len() < self.calls.capacity() || block_end == 0 {
            return;
        }
        let len = self.calls.len();
        let more = (len + 1).saturating_mul(text_len.saturating_sub(block_end)) / block_end;
        if eof {
            // The whole text is known: reserve the estimate plus an eighth, so a text
            // slightly denser at its end than before does not double the vector for its
            // last few blocks; at least a quarter more, so growth stays geometric.
            self.calls
                .reserve_exact((more + more / 8).min(1 << 16).max(len / 4).max(4));
        } else {
            self.calls.reserve(more.clamp(4, 1 << 16));
        }
    }

    fn finish_block(&mut self, text: &str, body: Body, end: BodyEnd, eof: bool) {
        let s = text.as_bytes();
        self.end_piece(body.start, true);
        self.lead_first(text);
        let block = self.blocks;
        self.blocks += 1;
        let block_end = match end {
            BodyEnd::Terminated(e) | BodyEnd::AtStart(e) | BodyEnd::Eof(e) => e,
        };
        if let Some(r) = &mut self.recorded {
            r.push(BlockReading {
                start: body.start,
                end: block_end,
                terminated: matches!(end, BodyEnd::Terminated(_)),
                pairs: body.pairs.clone(),
            });
        }
        let mut diags = body.diags;
        let cut = cut_off_pair(s, &body.pairs, end);
        if let Some(p) = cut {
            // The error below replaces the recovery warning for that value.
            diags.retain(|d| !(d.offset == p.key.0 && d.severity == Severity::Warning));
        }
        match end {
            _ if cut.is_some() => {}
            BodyEnd::Terminated(_) => {}
            BodyEnd::AtStart(_) => diags.push(RawDiag::warning(
                body.start,
                format!(
                    "block has no end marker {} before the next start marker; it was read up to there",
                    body.kind.end_text()
                ),
                format!("End every block with {} on a line of its own.", body.kind.end_text()),
            )),
            BodyEnd::Eof(_) => diags.push(RawDiag::warning(
                body.start,
                format!(
                    "block has no end marker {}; it was read up to the end of the text",
                    body.kind.end_text()
                ),
                format!("End every block with {} on a line of its own.", body.kind.end_text()),
            )),
        }
        let span = self.span(s, body.start, block_end);
        self.reserve_calls(text.len(), block_end, eof);
        match cut {
            // Issue 24: a value the end of the text cut off is never run, not even
            // recovered; a block missing only its end marker still runs (rule 8).
            Some(p) => {
                let key = String::from_utf8_lossy(&s[p.key.0..p.key.1]).into_owned();
                diags.push(RawDiag::error(
                    s.len(),
                    format!(
                        "the output was cut off: it ends inside the value of '{key}' (no 「末」 and no end marker {}); nothing in this block was executed",
                        body.kind.end_text()
                    ),
                    format!(
                        "Write the whole block again, closing the value with 「末」 and the block with {}.",
                        body.kind.end_text()
                    ),
                ));
            }
            None => {
                if let Some(read) = formats::pairs_reader(body.kind) {
                    read(text, &body.pairs, block, span, &mut diags, &mut self.calls);
                }
            }
        }
        self.diags.extend(diags);
        self.spare_pairs = body.pairs;
        self.piece_start = block_end;
        self.pos = block_end;
    }

    /// Reads the shapes that are calls only at the start of the answer or as a whole
    /// fenced block (`formats/lead.rs`) in the prose found: at the start always, in
    /// fences only when nothing else in the text was a call. What they take is no
    /// longer prose.
    pub(crate) fn read_leading(&mut self, text: &str, readers: &[LeadRead]) {
        if readers.is_empty() || self.pieces.is_empty() {
            return;
        }
        let mut taken = self.leading_at_start(text, readers);
        if taken.is_none()
            && self.calls.is_empty()
            && !self.diags.iter().any(|d| d.severity == Severity::Error)
        {
            let mut t = Taken::default();
            for p in &self.pieces {
                lead::in_fences(text, p.start, p.end, readers, &mut t);
            }
            if !t.calls.is_empty() || !t.diags.is_empty() {
                taken = Some(t);
            }
        }
        if let Some(t) = taken {
            self.take_leading(text, t);
        }
    }

    /// Before the first call of a block is added: the shapes at the start of the answer,
    /// whose place (the first stretch of prose) is complete by now, so their calls come
    /// first in the one-shot result and in the streamed one alike.
    fn lead_first(&mut self, text: &str) {
        if self.lead_done {
            return;
        }
        let readers = formats::leading_for(self.format);
        if readers.is_empty() {
            self.lead_done = true;
            return;
        }
        if let Some(t) = self.leading_at_start(text, &readers) {
            self.take_leading(text, t);
        }
    }

    /// The leading pass at the start of the answer, once per text.
    fn leading_at_start(&mut self, text: &str, readers: &[LeadRead]) -> Option<Taken> {
        if self.lead_done {
            return None;
        }
        self.lead_done = true;
        let first = *self.pieces.first()?;
        let before = &text[..first.start];
        let at_start = (before.trim().is_empty()
            || before
                .trim_start()
                .as_bytes()
                .get(..6)
                .is_some_and(|h| h.eq_ignore_ascii_case(b"<think")))
            && self.calls.iter().all(|c| c.span.start >= first.start);
        if at_start {
            lead::at_start(text, first.start, first.end, readers)
        } else {
            None
        }
    }

    /// Puts what the leading pass took before the calls so far (renumbering their
    /// blocks) and takes its ranges out of the prose.
    fn take_leading(&mut self, text: &str, mut t: Taken) {
        let mut loc = Locator::default();
        let n = t.calls.len();
        for (i, c) in t.calls.iter_mut().enumerate() {
            let (line, column) = loc.locate(text.as_bytes(), c.span.start);
            c.span.line = line;
            c.span.column = column;
            c.block = i;
        }
        for c in &mut self.calls {
            c.block += n;
        }
        self.blocks += n;
        t.calls.append(&mut self.calls);
        self.calls = t.calls;
        self.diags.append(&mut t.diags);
        t.removed.sort_unstable();
        let mut pieces = Vec::with_capacity(self.pieces.len() + 1);
        for p in std::mem::take(&mut self.pieces) {
            let mut cur = p;
            for &(a, b) in &t.removed {
                if b <= cur.start || a >= cur.end {
                    continue;
                }
                if a > cur.start {
                    pieces.push(Piece {
                        start: cur.start,
                        end: a,
                        before_block: false,
                    });
                }
                cur.start = b.min(cur.end);
            }
            if cur.end > cur.start {
                pieces.push(cur);
            }
        }
        self.pieces = pieces;
    }

    /// The prose outside blocks and reasoning (rule 11a), plus warnings for pairs
    /// written outside any block (rule 10).
    pub(crate) fn response_text(&mut self, text: &str) -> String {
        let s = text.as_bytes();
        let open = Finder::new(OPEN);
        let mut out = String::new();
        let mut fenced = false;
        for piece in &self.pieces {
            if let Some(at) = pair_line_in(s, piece.start, piece.end, &open) {
                self.diags.push(RawDiag::warning(
                    at,
                    "key:「始」value「末」 pair outside any block; it was not executed".into(),
                    "Put calls between <|[REQUEST_TOOL]|> and <|[END_TOOL]|>.".into(),
                ));
            }
            if self.first_action_end.is_some_and(|e| piece.start >= e) {
                // After the one <ACTION> block: not part of the response text.
                continue;
            }
            let mut t = &text[piece.start..piece.end];
            if fenced {
                if let Some(rest) = strip_leading_fence(t) {
                    t = rest;
                    fenced = false;
                } else if !t.trim().is_empty() {
                    fenced = false;
                }
            }
            if piece.before_block {
                if let Some(rest) = strip_trailing_fence(t) {
                    t = rest;
                    fenced = true;
                }
            }
            let t = t.trim();
            if !t.is_empty() {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(t);
            }
        }
        out
    }

    /// Diagnostics in input order with their lines and columns.
    pub(crate) fn diagnostics(&mut self, text: &str) -> Vec<Diagnostic> {
        let mut raw = std::mem::take(&mut self.diags);
        raw.sort_by_key(|d| d.offset);
        locate_diags(text, raw)
    }
}

/// The pair whose value the end of the text cut off, in a block that reached the end of
/// the text: the last pair, recovered (no closing `「末」`), with nothing but a line break
/// after its value; or else any recovered pair. A value recovered in such a block was
/// cut before a pair line (an end-marker or start-marker line would have ended the
/// block), and had a `「末」` come, those pair lines would have been its text (rule 6): the
/// output may have been cut off inside it, so nothing of the block runs.
fn cut_off_pair(s: &[u8], pairs: &[RawPair], end: BodyEnd) -> Option<RawPair> {
    let BodyEnd::Eof(len) = end else {
        return None;
    };
    let last = *pairs.last()?;
    let rest = s.get(last.value.1..len)?;
    if last.recovered && rest.iter().all(|b| matches!(b, b'\n' | b'\r')) {
        return Some(last);
    }
    pairs.iter().find(|p| p.recovered).copied()
}

/// Finds the region's closing tag (`</ACTION>`), skipping its opaque sections (CDATA
/// sections and comments). `None`: need more text; `Some(None)`: the text ended first;
/// `Some(Some((tag_start, tag_end)))`: found.
fn find_region_end(
    s: &[u8],
    pos: &mut usize,
    syntax: &RegionSyntax,
    opaque: &mut u8,
    eof: bool,
) -> RegionEnd {
    let len = s.len();
    let (close, exact, any) = match syntax.close {
        Close::Tag(t) => (t, false, &[][..]),
        Close::Exact(t) => (t, true, &[][..]),
        Close::AnyExact(all) => (all[0], true, all),
        Close::Value { .. } => return RegionEnd::NotRegion,
    };
    'scan: loop {
        if *opaque == 0 {
            let Some(i) = memchr::memchr(close[0], &s[*pos..]) else {
                *pos = len;
                return if eof {
                    RegionEnd::Eof
                } else {
                    RegionEnd::NeedMore
                };
            };
            let p = *pos + i;
            for (k, (open, _)) in syntax.opaque.iter().enumerate() {
                match match_exact(s, p, open, eof) {
                    M::Yes(e) => {
                        // The table holds a handful of sections; the index fits.
                        *opaque = k as u8 + 1;
                        *pos = e;
                        continue 'scan;
                    }
                    M::Partial => {
                        *pos = p;
                        return RegionEnd::NeedMore;
                    }
                    M::No => {}
                }
            }
            let m = if !any.is_empty() {
                let mut m = M::No;
                for pat in any {
                    match match_exact(s, p, pat, eof) {
                        M::No => {}
                        found => {
                            m = found;
                            break;
                        }
                    }
                }
                m
            } else if exact {
                match_exact(s, p, close, eof)
            } else {
                tag(s, p, eof, close)
            };
            match m {
                M::Yes(e) => return RegionEnd::Closed(p, e),
                M::Partial => {
                    *pos = p;
                    return RegionEnd::NeedMore;
                }
                M::No => *pos = p + 1,
            }
        } else {
            let pat = syntax.opaque[usize::from(*opaque - 1)].1;
            match memchr::memmem::find(&s[*pos..], pat) {
                Some(i) => {
                    *pos += i + pat.len();
                    *opaque = 0;
                }
                None => {
                    if eof {
                        return RegionEnd::Eof;
                    }
                    *pos = (*pos).max(len.saturating_sub(pat.len() - 1));
                    return RegionEnd::NeedMore;
                }
            }
        }
    }
}

/// Longest tool name read before a region's value (`[TOOL_CALLS]name[ARGS]`) or in a
/// named opening tag (`<function=name>`).
const MAX_NAME: usize = 256;

/// Matches a region's opening marker at `p`.
fn open_region(s: &[u8], p: usize, eof: bool, open: Open) -> M {
    match open {
        Open::Tag(pat) => tag(s, p, eof, pat),
        Open::Exact(pat) => match_exact(s, p, pat, eof),
        Open::Named(pat) => {
            let mut q = match match_ci(s, p, pat, eof) {
                M::Yes(e) => e,
                other => return other,
            };
            let name_start = q;
            while q < s.len() && is_name_byte(s[q]) && q - name_start < MAX_NAME {
                q += 1;
            }
            match s.get(q) {
                Some(b'>') if q > name_start => M::Yes(q + 1),
                None if !eof => M::Partial,
                _ => M::No,
            }
        }
    }
}

/// Bytes of a tool name as written in a marker (`forge.smelt`, `Forge:smelt`,
/// `forge\_smelt`, any non-ASCII letter).
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-' | b'\\') || b >= 0x80
}

/// Finds where a region that ends with its bracketed value ends ([`Close::Value`]).
#[allow(clippy::type_complexity)]
fn find_value_end(
    s: &[u8],
    pos: &mut usize,
    (sep, name_then, call_id, trailer): (
        Option<u8>,
        Option<&'static [u8]>,
        Option<&'static [u8]>,
        Option<&'static [u8]>,
    ),
    phase: &mut ValuePhase,
    eof: bool,
) -> RegionEnd {
    let len = s.len();
    let skip = |mut q: usize| {
        while q < len && s[q].is_ascii_whitespace() {
            q += 1;
        }
        q
    };
    loop {
        match phase {
            ValuePhase::Lead(named) => {
                let q = skip(*pos);
                let Some(&b) = s.get(q) else {
                    *pos = q;
                    return if eof {
                        RegionEnd::Eof
                    } else {
                        RegionEnd::NeedMore
                    };
                };
                if b == b'{' || b == b'[' {
                    *pos = q;
                    *phase = ValuePhase::In(ValueEnd::default());
                    continue;
                }
                let Some(marker) = name_then.filter(|_| !*named) else {
                    return RegionEnd::NotRegion;
                };
                let mut e = q;
                while e < len && is_name_byte(s[e]) && e - q < MAX_NAME {
                    e += 1;
                }
                if e == q {
                    return RegionEnd::NotRegion;
                }
                if let Some(id_marker) = call_id {
                    match match_exact(s, e, id_marker, eof) {
                        M::Yes(after) => {
                            e = after;
                            while e < len && s[e].is_ascii_alphanumeric() && e - after < MAX_NAME {
                                e += 1;
                            }
                        }
                        M::Partial => return RegionEnd::NeedMore,
                        M::No => {}
                    }
                }
                if s.get(e) == Some(&b'{') {
                    // The marker dropped (`[TOOL_CALLS]name{…}`).
                    *pos = e;
                    *phase = ValuePhase::In(ValueEnd::default());
                    continue;
                }
                match match_exact(s, e, marker, eof) {
                    M::Yes(after) => {
                        *pos = after;
                        *phase = ValuePhase::Lead(true);
                    }
                    M::Partial => return RegionEnd::NeedMore,
                    M::No if e == len && !eof => return RegionEnd::NeedMore,
                    M::No if e == len => return RegionEnd::Eof,
                    M::No => return RegionEnd::NotRegion,
                }
            }
            ValuePhase::In(v) => match v.feed(s, pos) {
                Some(end) => *phase = ValuePhase::After(end),
                None => {
                    return if eof {
                        RegionEnd::Eof
                    } else {
                        RegionEnd::NeedMore
                    }
                }
            },
            ValuePhase::After(end) => {
                let end = *end;
                if let Some(t) = trailer {
                    let q = skip(end);
                    match tag(s, q, eof, t) {
                        M::Yes(e) => return RegionEnd::Closed(end, e),
                        M::Partial => return RegionEnd::NeedMore,
                        M::No if q == len && !eof => return RegionEnd::NeedMore,
                        M::No => {}
                    }
                }
                let Some(sep) = sep else {
                    return RegionEnd::Closed(end, end);
                };
                let q = skip(end);
                match s.get(q) {
                    None if !eof => return RegionEnd::NeedMore,
                    Some(&b) if b == sep => {}
                    _ => return RegionEnd::Closed(end, end),
                }
                let r = skip(q + 1);
                match s.get(r) {
                    None if !eof => return RegionEnd::NeedMore,
                    Some(b'{' | b'[') => {
                        *pos = r;
                        *phase = ValuePhase::In(ValueEnd::default());
                    }
                    _ => return RegionEnd::Closed(end, end),
                }
            }
        }
    }
}

/// The offset of the first `key:「始」` that starts a line within `start..end`.
fn pair_line_in(s: &[u8], start: usize, end: usize, open: &Finder<'_>) -> Option<usize> {
    let mut from = start;
    while let Some(i) = open.find(&s[from..end]) {
        let o = from + i;
        from = o + OPEN.len();
        let mut p = o;
        while p > start && (s[p - 1] == b' ' || s[p - 1] == b'\t') {
            p -= 1;
        }
        if p > start && s[p - 1] == b':' {
            p -= 1;
        } else if p >= start + 3 && &s[p - 3..p] == "：".as_bytes() {
            p -= 3;
        } else {
            continue;
        }
        while p > start && (s[p - 1] == b' ' || s[p - 1] == b'\t') {
            p -= 1;
        }
        let key_end = p;
        while p > start {
            let mut q = p - 1;
            while q > start && (s[q] & 0xC0) == 0x80 {
                q -= 1;
            }
            let c = std::str::from_utf8(&s[q..p])
                .ok()
                .and_then(|t| t.chars().next());
            match c {
                Some(c) if super::lex::is_key_char(c) => p = q,
                _ => break,
            }
        }
        if p == key_end {
            continue;
        }
        let key_start = p;
        while p > start && (s[p - 1] == b' ' || s[p - 1] == b'\t') {
            p -= 1;
        }
        if p == 0 || s[p - 1] == b'\n' || s[p - 1] == b'\r' {
            return Some(key_start);
        }
    }
    None
}

fn strip_leading_fence(t: &str) -> Option<&str> {
    let u = t.trim_start_matches([' ', '\t', '\r', '\n']);
    let rest = u.strip_prefix("```")?;
    let line_end = rest.find(['\n', '\r']).unwrap_or(rest.len());
    if rest[..line_end].trim().is_empty() {
        Some(&rest[line_end..])
    } else {
        None
    }
}

fn strip_trailing_fence(t: &str) -> Option<&str> {
    let u = t.trim_end();
    let ls = u.rfind(['\n', '\r']).map_or(0, |i| i + 1);
    let line = u[ls..].trim_start();
    let info = line.strip_prefix("```")?;
    if info.contains('`') || info.trim().contains(char::is_whitespace) {
        return None;
    }
    // An odd number of fence lines means the last one opens a fence.
    let fences = u
        .split(['\n', '\r'])
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    if fences % 2 == 1 {
        Some(&u[..ls])
    } else {
        None
    }
}
