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
    pub fn push(&mut self, chunk: &str) -> Vec<Call> {
        self.buf.push_str(chunk);
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
                if memchr::memchr3(b'\n', b'\r', b'>', chunk.as_bytes()).is_none() {
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
        self.push(&text)
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
