//! The streaming reader: model output in chunks of any size, each call yielded as soon
//! as its block closes, the same final result as one-shot [`parse`].

use super::formats;
use super::read::{finish_scanner, parse};
use super::scan::Scanner;
use super::types::{Call, Format, Parsed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `Auto`: only blanks so far; a document (JSON) or text is not known yet.
    Undecided,
    /// Reading TAM/VCP/`<ACTION>` as text arrives.
    Text,
    /// A document format (JSON): read whole at [`StreamReader::finish`].
    Deferred,
}

/// True for the bytes a block can end with (see [`StreamReader`]).
#[inline]
fn closes(b: u8) -> bool {
    matches!(b, b'>' | b'}' | b']')
}

/// True when `head` ends with `tag`; when `loose`, in any case and with blanks after it
/// (what the scanner's closing-tag match accepts before a `>`).
fn ends_with_tag(head: &[u8], tag: &[u8], loose: bool) -> bool {
    if !loose {
        return head.ends_with(tag);
    }
    let end = head.len()
        - head
            .iter()
            .rev()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
    end >= tag.len() && head[end - tag.len()..end].eq_ignore_ascii_case(tag)
}

/// `buf[..valid]` as text without checking it again.
fn checked_prefix(buf: &[u8], valid: usize) -> &str {
    let bytes = &buf[..valid];
    // SAFETY: `StreamReader` only moves `valid` past bytes that came from a `&str`
    // (`push`) or that `validate` checked or replaced with valid UTF-8, and never
    // changes bytes before `valid`. Checking again here would make every chunk cost
    // the whole text so far.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

/// Reads model output chunk by chunk.
///
/// ```
/// use tavern::internal::protocol::{Format, StreamReader};
/// let mut r = StreamReader::new(Format::Auto);
/// let mut calls = r.push("<|[REQUEST_TOOL]|>\ncommand:「始」Echo「末」\n");
/// calls.extend(r.push("text:「始」hi「末」\n<|[END_TOOL]|>"));
/// assert_eq!(calls[0].tool, "Echo");
/// let parsed = r.finish();
/// assert_eq!(parsed.calls.len(), 1);
/// ```
///
/// Work is linear in the total text: the reader resumes where it stopped and only
/// re-examines at most a marker's (or key's) length of text. Every block ends with a
/// `>` (`<|[END_TOOL]|>`, `</ACTION>`, `</tool_call>`, or the next start marker) or
/// with the `}` or `]` of its JSON value (`<function_call> {…}`, `[TOOL_CALLS] […]`),
/// so a chunk without one cannot complete a call: it is only appended (and its UTF-8
/// checked later, once); inside a region that an exact tag ending in `>` closes
/// (DeepSeek's, Kimi K2's sections), only a `>` that ends that tag can. Shapes read only at the start of the answer (a pythonic call
/// list) come with the first block that closes after them, ahead of its calls, or with
/// [`finish`](Self::finish); those of a whole fenced block come with `finish`. The calls
/// yielded are always the first calls of the one-shot result, in its order.
#[derive(Debug)]
pub struct StreamReader {
    format: Format,
    /// Every byte received; `buf[..valid]` is valid UTF-8 (invalid sequences already
    /// replaced by U+FFFD), the rest is not checked yet.
    buf: Vec<u8>,
    valid: usize,
    mode: Mode,
    blank_checked: usize,
    scanner: Scanner,
    emitted: usize,
}

impl StreamReader {
    /// A reader for `format`.
    pub fn new(format: Format) -> Self {
        // The table says which formats stream (blocks and regions) and which are
        // documents read whole; `auto` waits for the first non-blank byte.
        let mode = match formats::entry(format) {
            None => Mode::Undecided,
            Some(e) if e.streams() => Mode::Text,
            Some(_) => Mode::Deferred,
        };
        StreamReader {
            format,
            // A model answer's first few kilobytes without growing (and copying) the
            // buffer at every power of two.
            buf: Vec::with_capacity(4096),
            valid: 0,
            mode,
            blank_checked: 0,
            scanner: Scanner::new(format),
            emitted: 0,
        }
    }

    /// The text received and checked so far (a last incomplete UTF-8 sequence from
    /// [`push_bytes`](Self::push_bytes) is not included yet).
    pub fn text(&self) -> &str {
        checked_prefix(&self.buf, self.valid)
    }

    /// Adds a chunk; returns the calls whose blocks closed in it.
    #[inline]
    pub fn push(&mut self, chunk: &str) -> Vec<Call> {
        let whole = self.valid == self.buf.len();
        self.buf.extend_from_slice(chunk.as_bytes());
        if whole {
            self.valid = self.buf.len();
        }
        self.after_append(chunk.as_bytes())
    }

    /// Adds raw bytes; a UTF-8 sequence split between chunks is joined, and invalid
    /// bytes become U+FFFD as in [`String::from_utf8_lossy`] of the whole text.
    #[inline]
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Vec<Call> {
        if bytes.len() <= 8 {
            // Token-sized chunks: copied by a loop the compiler inlines (one capacity
            // check, no `memcpy` call), and returned from at once when nothing can have
            // closed (`after_append`'s check, without the call).
            self.buf.extend(bytes.iter().copied());
            if self.mode == Mode::Text && !bytes.iter().any(|&b| closes(b)) {
                return Vec::new();
            }
        } else {
            self.buf.extend_from_slice(bytes);
        }
        self.after_append(bytes)
    }

    fn after_append(&mut self, chunk: &[u8]) -> Vec<Call> {
        match self.mode {
            Mode::Deferred => return Vec::new(),
            Mode::Undecided => {
                self.validate(false);
                let rest = &self.text()[self.blank_checked..];
                let t = rest.trim_start();
                match t.as_bytes().first() {
                    None => {
                        self.blank_checked = self.valid;
                        return Vec::new();
                    }
                    Some(&b) if formats::opens_document(b) => {
                        match formats::starts_with_marker(t.as_bytes()) {
                            // `[TOOL_CALLS]`: a region, read as text arrives.
                            Some(true) => self.mode = Mode::Text,
                            None => return Vec::new(),
                            Some(false) => {
                                self.mode = Mode::Deferred;
                                return Vec::new();
                            }
                        }
                    }
                    Some(_) => self.mode = Mode::Text,
                }
            }
            Mode::Text => {
                // These are ASCII, so never part of a multi-byte sequence.
                let closed = if let Some((tag, loose)) = self.scanner.gt_close() {
                    // The chunk is the buffer's tail; the region can only close at a
                    // `>` that ends its tag (the tag may have begun in earlier chunks).
                    let from = self.buf.len() - chunk.len();
                    memchr::memchr_iter(b'>', chunk)
                        .any(|i| ends_with_tag(&self.buf[..from + i], tag, loose))
                } else if self.scanner.waits_for_gt() {
                    memchr::memchr(b'>', chunk).is_some()
                } else if chunk.len() < 16 {
                    chunk.iter().any(|&b| closes(b))
                } else {
                    memchr::memchr3(b'>', b'}', b']', chunk).is_some()
                };
                if !closed {
                    return Vec::new();
                }
                self.validate(false);
            }
        }
        let text = checked_prefix(&self.buf, self.valid);
        self.scanner.run(text, false);
        super::types::give_ids(&mut self.scanner.calls, self.emitted);
        let new = self.scanner.calls[self.emitted..].to_vec();
        self.emitted = self.scanner.calls.len();
        new
    }

    /// Checks `buf[valid..]`: valid UTF-8 is accepted as is, invalid sequences are
    /// replaced by U+FFFD, and an incomplete last sequence waits for more bytes unless
    /// `eof`. Each byte is checked once (a held-back sequence at most four times).
    fn validate(&mut self, eof: bool) {
        let region = &self.buf[self.valid..];
        match std::str::from_utf8(region) {
            Ok(_) => self.valid = self.buf.len(),
            Err(e) if e.error_len().is_none() && !eof => self.valid += e.valid_up_to(),
            Err(_) => {
                // Find an incomplete last sequence to hold back.
                let mut keep_from = region.len();
                if !eof {
                    for back in 1..=3.min(region.len()) {
                        let tail = &region[region.len() - back..];
                        if let Err(e) = std::str::from_utf8(tail) {
                            if e.valid_up_to() == 0 && e.error_len().is_none() {
                                keep_from = region.len() - back;
                            }
                        }
                    }
                }
                let fixed = String::from_utf8_lossy(&region[..keep_from]).into_owned();
                let tail = region[keep_from..].to_vec();
                self.buf.truncate(self.valid);
                self.buf.extend_from_slice(fixed.as_bytes());
                self.valid = self.buf.len();
                self.buf.extend_from_slice(&tail);
            }
        }
    }

    /// Ends the text and returns everything read, exactly as
    /// [`parse`] of the whole text would.
    pub fn finish(mut self) -> Parsed {
        self.validate(true);
        let text = checked_prefix(&self.buf, self.valid);
        match self.mode {
            Mode::Deferred | Mode::Undecided => parse(text, self.format),
            Mode::Text => {
                self.scanner.run(text, true);
                finish_scanner(self.scanner, text)
            }
        }
    }
}
