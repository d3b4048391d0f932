//! The streaming reader: model output in chunks of any size, each call yielded as soon
//! as its block closes, the same final result as one-shot [`parse`](super::parse).

use super::scan::Scanner;
use super::types::{Call, Format, Parsed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `Auto`: only blanks so far; JSON or text is not known yet.
    Undecided,
    /// Reading TAM/VCP/`<ACTION>` as text arrives.
    Text,
    /// A JSON document: read whole at [`StreamReader::finish`].
    Deferred,
}

/// Reads model output chunk by chunk.
///
/// ```
/// use tavern::protocol::{Format, StreamReader};
/// let mut r = StreamReader::new(Format::Auto);
/// let mut calls = r.push("<|[REQUEST_TOOL]|>\ncommand:「始」Echo「末」\n");
/// calls.extend(r.push("text:「始」hi「末」\n<|[END_TOOL]|>"));
/// assert_eq!(calls[0].tool, "Echo");
/// let parsed = r.finish();
/// assert_eq!(parsed.calls.len(), 1);
/// ```
///
/// Work is linear in the total text: the reader resumes where it stopped and only
/// re-examines at most a marker's length of text. Chunks that contain no line break
/// and no `>` cannot close anything and are only appended.
#[derive(Debug)]
pub struct StreamReader {
    format: Format,
    buf: String,
    pending: Vec<u8>,
    mode: Mode,
    blank_checked: usize,
    scanner: Scanner,
    emitted: usize,
}

impl StreamReader {
    /// A reader for `format`.
    pub fn new(format: Format) -> Self {
        let mode = match format {
            Format::Auto => Mode::Undecided,
            Format::Json => Mode::Deferred,
            _ => Mode::Text,
        };
        StreamReader {
            format,
            buf: String::new(),
            pending: Vec::new(),
            mode,
            blank_checked: 0,
            scanner: Scanner::new(format),
            emitted: 0,
        }
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        &self.buf
    }

    /// Adds a chunk; returns the calls whose blocks closed in it.
    #[inline]
    pub fn push(&mut self, chunk: &str) -> Vec<Call> {
        if chunk.len() <= 8 {
            // Token-sized chunks: pushing chars avoids a `memcpy` call per chunk.
            chunk.chars().for_each(|c| self.buf.push(c));
        } else {
            self.buf.push_str(chunk);
        }
        match self.mode {
            Mode::Deferred => return Vec::new(),
            Mode::Undecided => {
                let rest = &self.buf[self.blank_checked..];
                let t = rest.trim_start();
                match t.as_bytes().first() {
                    None => {
                        self.blank_checked = self.buf.len();
                        return Vec::new();
                    }
                    Some(b'{' | b'[') => {
                        self.mode = Mode::Deferred;
                        return Vec::new();
                    }
                    Some(_) => self.mode = Mode::Text,
                }
            }
            Mode::Text => {
                let b = chunk.as_bytes();
                // Small chunks (token streams) are checked by hand: memchr's dispatch
                // costs more than the check itself.
                let closes = if b.len() < 16 {
                    b.iter().any(|&c| c == b'\n' || c == b'\r' || c == b'>')
                } else {
                    memchr::memchr3(b'\n', b'\r', b'>', b).is_some()
                };
                if !closes {
                    return Vec::new();
                }
            }
        }
        self.scanner.run(&self.buf, false);
        self.take_new()
    }

    /// Adds raw bytes; a UTF-8 sequence split between chunks is joined, and invalid
    /// bytes become U+FFFD as in [`String::from_utf8_lossy`].
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Vec<Call> {
        // Fast paths, without copying or allocating: first complete a character held
        // back from the previous chunk, then push whole characters and hold back an
        // incomplete last one. Invalid bytes take the general path below.
        if self.pending.is_empty() && bytes.is_ascii() {
            // SAFETY: ASCII bytes are always valid UTF-8 (checked just above). This
            // skips a second validation pass on every small chunk of a token stream.
            let s = unsafe { std::str::from_utf8_unchecked(bytes) };
            return self.push(s);
        }
        let mut bytes = bytes;
        let mut out = Vec::new();
        if let Some(&lead) = self.pending.first() {
            let want: usize = match lead {
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => 0,
            };
            let need = want.saturating_sub(self.pending.len());
            if want > 0 && bytes.len() >= need {
                let mut buf = [0u8; 4];
                let have = self.pending.len();
                buf[..have].copy_from_slice(&self.pending);
                buf[have..want].copy_from_slice(&bytes[..need]);
                if let Ok(c) = std::str::from_utf8(&buf[..want]) {
                    self.pending.clear();
                    out = self.push(c);
                    bytes = &bytes[need..];
                }
            }
        }
        if self.pending.is_empty() {
            match std::str::from_utf8(bytes) {
                Ok(s) => {
                    out.extend(self.push(s));
                    return out;
                }
                Err(e) if e.error_len().is_none() => {
                    let (good, tail) = bytes.split_at(e.valid_up_to());
                    // `good` is valid UTF-8 by `valid_up_to`.
                    out.extend(self.push(std::str::from_utf8(good).unwrap_or_default()));
                    self.pending.extend_from_slice(tail);
                    return out;
                }
                Err(_) => {}
            }
        }
        let mut text = String::new();
        let mut rest: &[u8] = if self.pending.is_empty() {
            bytes
        } else {
            self.pending.extend_from_slice(bytes);
            &self.pending
        };
        let mut keep = Vec::new();
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    text.push_str(s);
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // `good` is valid UTF-8 by `valid_up_to`.
                    text.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            text.push('\u{FFFD}');
                            rest = &bad[n..];
                        }
                        None => {
                            keep.extend_from_slice(bad);
                            break;
                        }
                    }
                }
            }
        }
        self.pending = keep;
        out.extend(self.push(&text));
        out
    }

    fn take_new(&mut self) -> Vec<Call> {
        let new = self.scanner.calls[self.emitted..].to_vec();
        self.emitted = self.scanner.calls.len();
        new
    }

    /// Ends the text and returns everything read, exactly as
    /// [`parse`](super::parse) of the whole text would.
    pub fn finish(mut self) -> Parsed {
        if !self.pending.is_empty() {
            self.pending.clear();
            self.buf.push('\u{FFFD}');
        }
        match self.mode {
            Mode::Deferred | Mode::Undecided => super::parse(&self.buf, self.format),
            Mode::Text => {
                self.scanner.run(&self.buf, true);
                super::finish_scanner(self.scanner, &self.buf)
            }
        }
    }
}
