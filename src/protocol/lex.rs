//! Byte-level matching shared by the readers: markers, pair starts, line breaks.
//!
//! Every matcher works on the text read so far and says `Partial` when the text ends
//! before it can decide and more text may still come (`eof == false`), so the
//! streaming reader can stop and resume without guessing.

/// The outcome of matching at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum M<T = usize> {
    /// Matched; carries the end offset (or a richer value).
    Yes(T),
    /// Does not match here.
    No,
    /// The text ended before a decision; ask again when more has arrived.
    Partial,
}

pub(crate) const TAM_START: &[u8] = b"<|[REQUEST_TOOL]|>";
pub(crate) const TAM_END: &[u8] = b"<|[END_TOOL]|>";
pub(crate) const VCP_START: &[u8] = b"<<<[TOOL_REQUEST]>>>";
pub(crate) const VCP_END: &[u8] = b"<<<[END_TOOL_REQUEST]>>>";
pub(crate) const OPEN: &[u8] = "「始」".as_bytes();
pub(crate) const CLOSE: &[u8] = "「末」".as_bytes();
pub(crate) const FULL_COLON: &[u8] = "：".as_bytes();

/// Matches `pat` at `at`, ASCII case-insensitively.
#[inline]
pub(crate) fn match_ci(s: &[u8], at: usize, pat: &[u8], eof: bool) -> M {
    let avail = s.len().saturating_sub(at);
    if avail >= pat.len() {
        if s[at..at + pat.len()].eq_ignore_ascii_case(pat) {
            M::Yes(at + pat.len())
        } else {
            M::No
        }
    } else if !eof
        && s.get(at..)
            .is_some_and(|r| r.eq_ignore_ascii_case(&pat[..avail]))
    {
        M::Partial
    } else {
        M::No
    }
}

/// Matches `pat` at `at` exactly.
#[inline]
pub(crate) fn match_exact(s: &[u8], at: usize, pat: &[u8], eof: bool) -> M {
    let avail = s.len().saturating_sub(at);
    if avail >= pat.len() {
        if &s[at..at + pat.len()] == pat {
            M::Yes(at + pat.len())
        } else {
            M::No
        }
    } else if !eof && s.get(at..).is_some_and(|r| r == &pat[..avail]) {
        M::Partial
    } else {
        M::No
    }
}

/// Skips spaces and tabs.
#[inline]
pub(crate) fn skip_ws(s: &[u8], mut at: usize) -> usize {
    while at < s.len() && (s[at] == b' ' || s[at] == b'\t') {
        at += 1;
    }
    at
}

/// A line break at `at`: `Yes(end)` for `\n`, `\r\n` or `\r`.
#[inline]
pub(crate) fn line_break(s: &[u8], at: usize, eof: bool) -> M {
    match s.get(at) {
        Some(b'\n') => M::Yes(at + 1),
        Some(b'\r') => match s.get(at + 1) {
            Some(b'\n') => M::Yes(at + 2),
            Some(_) => M::Yes(at + 1),
            None if eof => M::Yes(at + 1),
            None => M::Partial,
        },
        _ => M::No,
    }
}

/// Decodes the char starting at byte `at` (which must be a char boundary), if complete.
#[inline]
fn char_at(s: &[u8], at: usize) -> Option<(char, usize)> {
    let b = *s.get(at)?;
    let len = match b {
        0x00..=0x7F => return Some((b as char, 1)),
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    };
    let bytes = s.get(at..at + len)?;
    let c = std::str::from_utf8(bytes).ok()?.chars().next()?;
    Some((c, len))
}

/// True for a key character: Unicode letters and digits, `_`, `-`, `.` (rule 3).
#[inline]
pub(crate) fn is_key_char(c: char) -> bool {
    c.is_alphabetic() || c.is_numeric() || c == '_' || c == '-' || c == '.'
}

/// Where a pair starts: `key`, spaces, `:` or `：`, spaces, `「始」`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PairStart {
    pub key_start: usize,
    pub key_end: usize,
    /// First byte of the value.
    pub value_start: usize,
}

/// Matches a pair start at `at` (no leading spaces skipped).
pub(crate) fn match_pair_start(s: &[u8], at: usize, eof: bool) -> M<PairStart> {
    let mut p = at;
    // Key characters.
    loop {
        if p >= s.len() {
            return if eof { M::No } else { M::Partial };
        }
        let b = s[p];
        if b < 0x80 {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.' {
                p += 1;
                continue;
            }
            break;
        }
        match char_at(s, p) {
            Some((c, n)) if is_key_char(c) => p += n,
            Some(_) => break,
            // An incomplete UTF-8 sequence at the end of what has arrived.
            None => return if eof { M::No } else { M::Partial },
        }
    }
    if p == at {
        return M::No;
    }
    let key_end = p;
    p = skip_ws(s, p);
    if p >= s.len() {
        return if eof { M::No } else { M::Partial };
    }
    if s[p] == b':' {
        p += 1;
    } else {
        match match_exact(s, p, FULL_COLON, eof) {
            M::Yes(e) => p = e,
            M::No => return M::No,
            M::Partial => return M::Partial,
        }
    }
    p = skip_ws(s, p);
    match match_exact(s, p, OPEN, eof) {
        M::Yes(e) => M::Yes(PairStart {
            key_start: at,
            key_end,
            value_start: e,
        }),
        M::No => M::No,
        M::Partial => M::Partial,
    }
}

/// Counts characters in a byte slice of valid UTF-8 (or a prefix of it).
#[inline]
pub(crate) fn count_chars(s: &[u8]) -> usize {
    // A byte starts a character unless it is a continuation byte (`10xxxxxx`, as `i8`
    // below -64). Counted in blocks of 255 into a `u8`, which the compiler vectorizes.
    s.chunks(255)
        .map(|c| c.iter().fold(0u8, |n, &b| n + u8::from((b as i8) >= -64)) as usize)
        .sum()
}

/// The largest char boundary `<= at` in `s`.
#[inline]
pub(crate) fn floor_boundary(s: &[u8], mut at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    while at > 0 && (s[at] & 0xC0) == 0x80 {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::count_chars;

    #[test]
    fn count_chars_counts_characters() {
        let long = "añ「始」é🦀".repeat(100);
        for t in [
            "",
            "a",
            "é",
            "「始」",
            "🦀x",
            long.as_str(),
            &long[..long.len() - 4],
        ] {
            let want = String::from_utf8_lossy(t.as_bytes()).chars().count();
            assert_eq!(count_chars(t.as_bytes()), want, "{t}");
        }
        // A prefix cut inside a character counts the characters begun in it.
        let b = long.as_bytes();
        assert_eq!(count_chars(&b[..2]), 2);
    }
}
