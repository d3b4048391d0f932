//! Lazy, incremental line/column computation.
//!
//! Positions are only computed for calls and diagnostics, always moving forward from
//! the last position computed, so the total cost is linear in the text however many
//! positions are asked for (no per-block pass over the text, no whole-text line index).

use super::lex::count_chars;
use super::types::{Diagnostic, RawDiag};

/// A forward-moving cursor that turns byte offsets into 1-based line and column.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    off: usize,
    line: u32,
    col: u32,
}

impl Default for Locator {
    fn default() -> Self {
        Locator {
            off: 0,
            line: 1,
            col: 1,
        }
    }
}

impl Locator {
    /// A cursor already at byte `off`, known to be at `line` and `column`.
    pub(crate) fn starting(off: usize, line: u32, column: u32) -> Self {
        Locator {
            off,
            line,
            col: column,
        }
    }

    /// Line and column (in characters) of byte `to`. `to` must not be behind the last
    /// position asked for; an earlier offset restarts from the beginning (correct, but
    /// callers sort their offsets so this never happens in practice).
    pub(crate) fn locate(&mut self, s: &[u8], to: usize) -> (u32, u32) {
        let to = to.min(s.len());
        if to < self.off {
            *self = Locator::default();
        }
        let seg = &s[self.off..to];
        let mut line_start = None;
        for i in memchr::memchr2_iter(b'\n', b'\r', seg) {
            let a = self.off + i;
            // `\r\n` is one break: count it at the `\n`.
            if s[a] == b'\r' && s.get(a + 1) == Some(&b'\n') {
                continue;
            }
            self.line = self.line.saturating_add(1);
            line_start = Some(a + 1);
        }
        match line_start {
            Some(ls) => self.col = 1 + count_chars(&s[ls..to]) as u32,
            None => self.col = self.col.saturating_add(count_chars(seg) as u32),
        }
        self.off = to;
        (self.line, self.col)
    }
}

/// Turns raw diagnostics sorted by offset into located ones.
pub(crate) fn locate_diags(text: &str, raw: Vec<RawDiag>) -> Vec<Diagnostic> {
    let mut loc = Locator::default();
    raw.into_iter()
        .map(|d| {
            let (line, column) = loc.locate(text.as_bytes(), d.offset);
            Diagnostic {
                severity: d.severity,
                message: d.message,
                line,
                column,
                hint: d.hint,
            }
        })
        .collect()
}
