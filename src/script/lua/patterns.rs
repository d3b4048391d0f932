//! Lua 5.4 patterns in Rust, with a step counter.
//!
//! The C matcher in `lstrlib.c` cannot be interrupted by an instruction hook, and a pattern
//! like `string.rep('a?',28)..string.rep('a',28)` backtracks ~2^28 times. This is a port of
//! the same algorithm (same syntax, same results) that charges every matching step to the
//! call's budget, so such a pattern ends with the instruction-limit error.

/// Why a match stopped without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// The pattern is malformed (message as Lua words it).
    Malformed(String),
    /// The step budget refused more work (the budget records why).
    Budget,
}

const MAX_CAPTURES: usize = 32;
const MAX_MATCH_DEPTH: usize = 200;
const CAP_UNFINISHED: isize = -1;
const CAP_POSITION: isize = -2;
const SPECIALS: &[u8] = b"^$*+?.([%-";
/// Steps between two charges to the budget.
const CHARGE_EVERY: u64 = 1024;

/// One capture of a successful match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Capture {
    /// A substring `src[start..end]`.
    Str(usize, usize),
    /// A position capture `()` (1-based).
    Pos(usize),
}

/// Matching state over one subject and one pattern.
pub(crate) struct Matcher<'a, F: FnMut(u64) -> bool> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    capture: [(usize, isize); MAX_CAPTURES],
    depth: usize,
    pending: u64,
    /// Called with a number of steps; returns false when the budget is exhausted.
    charge: F,
}

fn malformed<T>(msg: impl Into<String>) -> Result<T, PatternError> {
    Err(PatternError::Malformed(msg.into()))
}

fn class_matches(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        _ => return cl == c,
    };
    if cl.is_ascii_uppercase() {
        !res
    } else {
        res
    }
}

impl<'a, F: FnMut(u64) -> bool> Matcher<'a, F> {
    pub fn new(src: &'a [u8], pat: &'a [u8], charge: F) -> Self {
        Matcher {
            src,
            pat,
            level: 0,
            capture: [(0, 0); MAX_CAPTURES],
            depth: MAX_MATCH_DEPTH,
            pending: 0,
            charge,
        }
    }

    /// Charges what is still pending (call once the match is over).
    pub fn flush(&mut self) -> Result<(), PatternError> {
        let n = std::mem::take(&mut self.pending);
        if n > 0 && !(self.charge)(n) {
            return Err(PatternError::Budget);
        }
        Ok(())
    }

    #[inline]
    fn step(&mut self) -> Result<(), PatternError> {
        self.pending += 1;
        if self.pending >= CHARGE_EVERY {
            self.pending = 0;
            if !(self.charge)(CHARGE_EVERY) {
                return Err(PatternError::Budget);
            }
        }
        Ok(())
    }

    #[inline]
    fn p(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    fn reset(&mut self) {
        self.level = 0;
        self.depth = MAX_MATCH_DEPTH;
    }

    fn class_end(&self, mut p: usize) -> Result<usize, PatternError> {
        let c = self.p(p);
        p += 1;
        if c == b'%' {
            if p >= self.pat.len() {
                return malformed("malformed pattern (ends with '%')");
            }
            return Ok(p + 1);
        }
        if c == b'[' {
            if self.p(p) == b'^' {
                p += 1;
            }
            loop {
                // Look for a ']' (the first char after '[' or '[^' is literal).
                if p >= self.pat.len() {
                    return malformed("malformed pattern (missing ']')");
                }
                let cc = self.pat[p];
                p += 1;
                if cc == b'%' && p < self.pat.len() {
                    p += 1;
                }
                if self.p(p) == b']' {
                    break;
                }
            }
            return Ok(p + 1);
        }
        Ok(p)
    }

    fn bracket_class(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if self.p(p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        p += 1;
        while p < ec {
            if self.pat[p] == b'%' {
                p += 1;
                if class_matches(c, self.p(p)) {
                    return sig;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < ec {
                if self.pat[p] <= c && c <= self.pat[p + 2] {
                    return sig;
                }
                p += 2;
            } else if self.pat[p] == c {
                return sig;
            }
            p += 1;
        }
        !sig
    }

    fn single(&self, s: usize, p: usize, ep: usize) -> bool {
        if s >= self.src.len() {
            return false;
        }
        let c = self.src[s];
        match self.pat[p] {
            b'.' => true,
            b'%' => class_matches(c, self.p(p + 1)),
            b'[' => self.bracket_class(c, p, ep - 1),
            pc => pc == c,
        }
    }

    /// Matches the pattern from `p` against the subject from `s`; the end of the match.
    pub fn do_match(&mut self, s: usize, p: usize) -> Result<Option<usize>, PatternError> {
        if self.depth == 0 {
            return malformed("pattern too complex");
        }
        self.depth -= 1;
        let r = self.match_inner(s, p);
        self.depth += 1;
        r
    }

    fn match_inner(&mut self, mut s: usize, mut p: usize) -> Result<Option<usize>, PatternError> {
        loop {
            self.step()?;
            if p >= self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat[p] {
                b'(' => {
                    return if self.p(p + 1) == b')' {
                        self.start_capture(s, p + 2, CAP_POSITION)
                    } else {
                        self.start_capture(s, p + 1, CAP_UNFINISHED)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok(if s == self.src.len() { Some(s) } else { None });
                }
                b'%' if self.p(p + 1) == b'b' => match self.balance(s, p + 2)? {
                    Some(ns) => {
                        s = ns;
                        p += 4;
                        continue;
                    }
                    None => return Ok(None),
                },
                b'%' if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return malformed("missing '[' after '%f' in pattern");
                    }
                    let ep = self.class_end(p)?;
                    let prev = if s == 0 { 0 } else { self.src[s - 1] };
                    let cur = self.src.get(s).copied().unwrap_or(0);
                    if !self.bracket_class(prev, p, ep - 1) && self.bracket_class(cur, p, ep - 1) {
                        p = ep;
                        continue;
                    }
                    return Ok(None);
                }
                b'%' if self.p(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.p(p + 1))? {
                        Some(ns) => {
                            s = ns;
                            p += 2;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    let ep = self.class_end(p)?;
                    let epc = self.p(ep);
                    if !self.single(s, p, ep) {
                        if epc == b'*' || epc == b'?' || epc == b'-' {
                            p = ep + 1;
                            continue;
                        }
                        return Ok(None);
                    }
                    match epc {
                        b'?' => {
                            if let Some(r) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(r));
                            }
                            p = ep + 1;
                            continue;
                        }
                        b'+' => return self.max_expand(s + 1, p, ep),
                        b'*' => return self.max_expand(s, p, ep),
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                            continue;
                        }
                    }
                }
            }
        }
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Result<Option<usize>, PatternError> {
        let mut i = 0usize;
        while self.single(s + i, p, ep) {
            self.step()?;
            i += 1;
        }
        loop {
            if let Some(r) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(r));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(
        &mut self,
        mut s: usize,
        p: usize,
        ep: usize,
    ) -> Result<Option<usize>, PatternError> {
        loop {
            if let Some(r) = self.do_match(s, ep + 1)? {
                return Ok(Some(r));
            }
            if self.single(s, p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(
        &mut self,
        s: usize,
        p: usize,
        what: isize,
    ) -> Result<Option<usize>, PatternError> {
        if self.level >= MAX_CAPTURES {
            return malformed("too many captures");
        }
        self.capture[self.level] = (s, what);
        self.level += 1;
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.level -= 1;
        }
        Ok(r)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Result<Option<usize>, PatternError> {
        let l = self.capture_to_close()?;
        self.capture[l].1 = (s - self.capture[l].0) as isize;
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.capture[l].1 = CAP_UNFINISHED;
        }
        Ok(r)
    }

    fn capture_to_close(&self) -> Result<usize, PatternError> {
        (0..self.level)
            .rev()
            .find(|&l| self.capture[l].1 == CAP_UNFINISHED)
            .map_or_else(|| malformed("invalid pattern capture"), Ok)
    }

    fn balance(&mut self, s: usize, p: usize) -> Result<Option<usize>, PatternError> {
        if p + 1 >= self.pat.len() {
            return malformed("malformed pattern (missing arguments to '%b')");
        }
        if s >= self.src.len() || self.src[s] != self.pat[p] {
            return Ok(None);
        }
        let (b, e) = (self.pat[p], self.pat[p + 1]);
        let mut cont = 1;
        let mut i = s + 1;
        while i < self.src.len() {
            self.step()?;
            let c = self.src[i];
            if c == e {
                cont -= 1;
                if cont == 0 {
                    return Ok(Some(i + 1));
                }
            } else if c == b {
                cont += 1;
            }
            i += 1;
        }
        Ok(None)
    }

    fn match_capture(&mut self, s: usize, l: u8) -> Result<Option<usize>, PatternError> {
        let l = self.check_capture(l)?;
        let (start, len) = self.capture[l];
        let len = len as usize;
        if self.src.len() - s >= len && self.src[start..start + len] == self.src[s..s + len] {
            Ok(Some(s + len))
        } else {
            Ok(None)
        }
    }

    fn check_capture(&self, l: u8) -> Result<usize, PatternError> {
        let idx = l as isize - b'1' as isize;
        if idx < 0 || idx as usize >= self.level || self.capture[idx as usize].1 == CAP_UNFINISHED {
            return malformed(format!("invalid capture index %{}", idx + 1));
        }
        Ok(idx as usize)
    }

    /// Capture `i` of a match `s..e` (capture 0 is the whole match when there are none).
    pub fn get_capture(&self, i: usize, s: usize, e: usize) -> Result<Capture, PatternError> {
        if i >= self.level {
            if i != 0 {
                return malformed(format!("invalid capture index %{}", i + 1));
            }
            return Ok(Capture::Str(s, e));
        }
        let (start, len) = self.capture[i];
        match len {
            CAP_UNFINISHED => malformed("unfinished capture"),
            CAP_POSITION => Ok(Capture::Pos(start + 1)),
            l => Ok(Capture::Str(start, start + l as usize)),
        }
    }

    /// All captures of a match `s..e` (the whole match when the pattern has none).
    pub fn captures(&self, s: usize, e: usize) -> Result<Vec<Capture>, PatternError> {
        let n = if self.level == 0 { 1 } else { self.level };
        (0..n).map(|i| self.get_capture(i, s, e)).collect()
    }

    /// Finds the first match at or after `init` (honouring a leading `^`): `(start, end)`.
    pub fn find(&mut self, init: usize) -> Result<Option<(usize, usize)>, PatternError> {
        let anchor = self.p(0) == b'^';
        let p0 = usize::from(anchor);
        let mut s1 = init;
        loop {
            self.reset();
            if let Some(e) = self.do_match(s1, p0)? {
                return Ok(Some((s1, e)));
            }
            s1 += 1;
            if anchor || s1 > self.src.len() {
                return Ok(None);
            }
        }
    }

    /// Matches exactly at `s` from pattern position `p` (for gmatch/gsub loops).
    pub fn match_at(&mut self, s: usize, p: usize) -> Result<Option<usize>, PatternError> {
        self.reset();
        self.do_match(s, p)
    }
}

/// Whether a pattern has no special characters (so `find` may search plainly).
pub(crate) fn is_plain(pat: &[u8]) -> bool {
    !pat.iter().any(|c| SPECIALS.contains(c))
}

/// Lua's `posrelatI`: a 1-based start position → 0-based index (may exceed the length).
pub(crate) fn start_index(init: i64, len: usize) -> usize {
    if init > 0 {
        (init as usize).saturating_sub(1)
    } else if init == 0 || init < -(len as i64) {
        0
    } else {
        (len as i64 + init) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(s: &str, p: &str) -> Option<(usize, usize, Vec<String>)> {
        let mut m = Matcher::new(s.as_bytes(), p.as_bytes(), |_| true);
        let (a, b) = m.find(0).unwrap()?;
        let caps = m
            .captures(a, b)
            .unwrap()
            .into_iter()
            .map(|c| match c {
                Capture::Str(x, y) => s[x..y].to_string(),
                Capture::Pos(n) => format!("@{n}"),
            })
            .collect();
        Some((a + 1, b, caps))
    }

    #[test]
    fn matches_like_lua() {
        let cases: &[(&str, &str, Option<(usize, usize, &[&str])>)] = &[
            ("hello world", "o w", Some((5, 7, &["o w"]))),
            (
                "hello world",
                "(%w+) (%w+)",
                Some((1, 11, &["hello", "world"])),
            ),
            (
                "key = value",
                "(%w+)%s*=%s*(%w+)",
                Some((1, 11, &["key", "value"])),
            ),
            ("abc", "^b", None),
            ("abc", "c$", Some((3, 3, &["c"]))),
            ("f(a(b)c)d", "%b()", Some((2, 8, &["(a(b)c)"]))),
            ("THE (quick) fox", "%f[%a]%a+", Some((1, 3, &["THE"]))),
            ("aaa", "a-b", None),
            ("aaab", "a-b", Some((1, 4, &["aaab"]))),
            ("abc", "()b()", Some((2, 2, &["@2", "@3"]))),
            ("abab", "(ab)%1", Some((1, 4, &["ab"]))),
            ("x=[1]", "[%[%]]", Some((3, 3, &["["]))),
            ("a-b", "[a-]", Some((1, 1, &["a"]))),
            ("", "a*", Some((1, 0, &[""]))),
            ("hello", "[^hel]", Some((5, 5, &["o"]))),
        ];
        for (s, p, want) in cases {
            let got = find(s, p);
            let want = want.map(|(a, b, c)| (a, b, c.iter().map(|x| x.to_string()).collect()));
            assert_eq!(got, want, "find({s:?}, {p:?})");
        }
    }

    #[test]
    fn malformed_patterns() {
        for p in ["%", "[a", "(()", "%b", "%f", "(a)%2"] {
            let mut m = Matcher::new(b"aaa", p.as_bytes(), |_| true);
            assert!(matches!(m.find(0), Err(PatternError::Malformed(_))), "{p}");
        }
    }

    #[test]
    fn catastrophic_backtracking_is_stopped() {
        let pat = format!("{}{}", "a?".repeat(28), "a".repeat(28));
        let src = "a".repeat(28);
        let mut spent = 0u64;
        let mut m = Matcher::new(src.as_bytes(), pat.as_bytes(), |n| {
            spent += n;
            spent < 1_000_000
        });
        assert_eq!(m.find(0), Err(PatternError::Budget));
    }
}
