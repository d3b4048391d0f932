//! Shapes that could also be prose (a call list, a name line and JSON): `auto` takes them
//! only where models put their calls — as the whole answer, at its very start (an
//! explanation may follow on a later line; it stays response text), or as the whole
//! content of a fenced code block — never from the middle of a paragraph.
//!
//! A row of the format table names its leading reader; this file finds the places
//! (the start of the answer, each fenced block in the prose) and checks that a reader's
//! calls fill them.

use crate::protocol::types::{Call, RawDiag};

/// A leading reader: what it finds at the start of `text[from..to]`.
pub(crate) type LeadRead = fn(&str, usize, usize) -> Lead;

/// What a leading reader found.
#[derive(Debug)]
pub(crate) enum Lead {
    /// Not its shape.
    No,
    /// Its calls, where they end (offsets into the whole text), and stretches inside
    /// them that are response text (functionary's `>>>all`).
    Calls {
        calls: Vec<Call>,
        end: usize,
        prose: Vec<(usize, usize)>,
        /// Calls among them that could not be read (each its own error; its neighbours
        /// are read).
        diags: Vec<RawDiag>,
    },
    /// Its shape, but cut off or malformed: nothing runs.
    Error(RawDiag),
}

impl Lead {
    /// Calls ending at `end`, with no prose inside.
    pub(crate) fn calls(calls: Vec<Call>, end: usize) -> Lead {
        Lead::Calls {
            calls,
            end,
            prose: Vec::new(),
            diags: Vec::new(),
        }
    }
}

/// What the leading pass took from the text.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    pub calls: Vec<Call>,
    pub diags: Vec<RawDiag>,
    /// Ranges of the text that are no longer prose (the calls, a fence around them).
    pub removed: Vec<(usize, usize)>,
}

fn blank(s: &[u8]) -> bool {
    s.iter().all(u8::is_ascii_whitespace)
}

/// The first reader whose shape starts `text[from..to]` and ends at a line end.
pub(crate) fn at_start(text: &str, from: usize, to: usize, readers: &[LeadRead]) -> Option<Taken> {
    let s = text.as_bytes();
    for read in readers {
        match read(text, from, to) {
            Lead::No => {}
            Lead::Error(d) => {
                return Some(Taken {
                    calls: Vec::new(),
                    diags: vec![d],
                    removed: vec![(from, to)],
                })
            }
            Lead::Calls {
                calls,
                end,
                prose,
                diags,
            } => {
                let mut q = end;
                while q < to && matches!(s[q], b' ' | b'\t' | b';' | b',') {
                    q += 1;
                }
                if q < to && s[q] != b'\n' && s[q] != b'\r' {
                    continue;
                }
                return Some(Taken {
                    calls,
                    diags,
                    removed: minus(from, end, &prose),
                });
            }
        }
    }
    None
}

/// `from..to` without the `keep` ranges inside it.
fn minus(from: usize, to: usize, keep: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = from;
    for &(a, b) in keep {
        if a > at {
            out.push((at, a));
        }
        at = b;
    }
    if to > at {
        out.push((at, to));
    }
    out
}

/// The fenced code blocks in `text[from..to]`: (the opening fence line's start, the
/// content's range, the end of the closing fence line or of the text).
///
/// Fences do not nest (CommonMark), with one exception: Command R's `Action:` opens a
/// fence of its own (```` Action: ```json ````, the fence on the same line or the next).
/// When that is the first line of an open fence, its ```` ``` ```` opens a nested fence:
/// the first bare ```` ``` ```` line after it closes the nested one, and the next one
/// (only blank lines between) closes the outer. When no second one follows, the first
/// closed both.
fn fences(s: &[u8], from: usize, to: usize) -> Vec<(usize, usize, usize, usize)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    // The open fence holds Command R's own fence, not closed yet.
    let mut nested = false;
    let mut at = from;
    while let Some(i) = memchr::memmem::find(&s[at..to], b"```") {
        let p = at + i;
        at = p + 3;
        let line_start = s[from..p]
            .iter()
            .rposition(|&b| b == b'\n' || b == b'\r')
            .map_or(from, |k| from + k + 1);
        let line_end = memchr::memchr2(b'\n', b'\r', &s[p..to]).map_or(to, |k| p + k);
        if !s[line_start..p].iter().all(|&b| b == b' ' || b == b'\t') {
            // Not a fence line; but `Action: ```json` first in an open fence opens
            // Command R's own.
            if let Some((_, content)) = open {
                if !nested && action_first(s, content, p) {
                    nested = true;
                    at = line_end;
                }
            }
            continue;
        }
        match open {
            None => open = Some((line_start, (line_end + 1).min(to))),
            Some((o, content)) => {
                if !blank(&s[p + 3..line_end]) {
                    // An opening fence with an info string inside an open fence: not a
                    // close (Command R's own, after an `Action:` line, is nested).
                    if !nested && action_first(s, content, line_start) {
                        nested = true;
                    }
                    at = line_end.max(at);
                    continue;
                }
                if nested {
                    nested = false;
                    // The outer close: the next fence line, only blanks before it.
                    let mut q = line_end;
                    while q < to && s[q].is_ascii_whitespace() {
                        q += 1;
                    }
                    let q_end = memchr::memchr2(b'\n', b'\r', &s[q..to]).map_or(to, |k| q + k);
                    if s[q..to].starts_with(b"```") && blank(&s[q + 3..q_end]) {
                        let q_start = s[line_end..q]
                            .iter()
                            .rposition(|&b| b == b'\n' || b == b'\r')
                            .map_or(q, |k| line_end + k + 1);
                        out.push((o, content, q_start, q_end));
                        open = None;
                        at = q_end;
                        continue;
                    }
                }
                out.push((o, content, line_start, line_end));
                open = None;
            }
        }
        at = line_end.max(at);
    }
    if let Some((o, content)) = open {
        out.push((o, content, to, to));
    }
    out
}

/// `s[content..p]` is blanks, then `Action:`, then blanks: Command R's action opener is
/// the first thing in a fence (`p` at its own ```` ``` ````).
fn action_first(s: &[u8], content: usize, p: usize) -> bool {
    let t = s[content.min(p)..p].trim_ascii();
    t == b"Action:"
}

/// When `s[from..at]` (`at` a line start) ends with a fence opened and not closed, with
/// nothing but blank lines after its opening line: where that line starts. Command R's
/// `Action:` that follows it is that fence's content (`command_r.rs`).
pub(crate) fn open_fence_before(s: &[u8], from: usize, at: usize) -> Option<usize> {
    let t = s[from..at].trim_ascii_end();
    let line = t
        .iter()
        .rposition(|&b| b == b'\n' || b == b'\r')
        .map_or(0, |k| k + 1);
    if !t[line..].trim_ascii_start().starts_with(b"```") {
        return None;
    }
    match fences(s, from, at).last() {
        Some(&(o, content, close, _)) if close == at && blank(&s[content.min(at)..at]) => Some(o),
        _ => None,
    }
}

/// Every fenced block in `text[from..to]` whose whole content is one reader's shape.
pub(crate) fn in_fences(text: &str, from: usize, to: usize, readers: &[LeadRead], out: &mut Taken) {
    let s = text.as_bytes();
    for (open, content, close, end) in fences(s, from, to) {
        if content >= close {
            continue;
        }
        for read in readers {
            match read(text, content, close) {
                Lead::No => {}
                Lead::Error(d) => {
                    out.diags.push(d);
                    out.removed.push((open, end));
                    break;
                }
                Lead::Calls {
                    calls,
                    end: e,
                    diags,
                    ..
                } => {
                    if !blank(&s[e..close]) {
                        continue;
                    }
                    out.calls.extend(calls);
                    out.diags.extend(diags);
                    out.removed.push((open, end));
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The content of each fenced block `fences` finds.
    fn contents(t: &str) -> Vec<&str> {
        fences(t.as_bytes(), 0, t.len())
            .into_iter()
            .map(|(_, c, close, _)| &t[c.min(close)..close])
            .collect()
    }

    /// Command R's own fence nests in a fence whose first line is its `Action:`; every
    /// other fence follows CommonMark (no nesting).
    #[test]
    fn command_r_fence_nests_and_nothing_else_does() {
        let list = "[{\"tool_name\": \"a\", \"parameters\": {}}]";
        // Nested, on the same line and on the next; the outer closes after the inner.
        let t = format!("Lead:\n```\nAction: ```json\n{list}\n```\n```\nafter\n```\nx\n```");
        assert_eq!(
            contents(&t),
            [format!("Action: ```json\n{list}\n```\n").as_str(), "x\n"]
        );
        let t = format!("```text\n\nAction:\n```json\n{list}\n```\n\n```\n");
        assert_eq!(
            contents(&t),
            [format!("\nAction:\n```json\n{list}\n```\n\n").as_str()]
        );
        // No second close: the first closed both.
        let t = format!("```\nAction: ```json\n{list}\n```\ntext");
        assert_eq!(
            contents(&t),
            [format!("Action: ```json\n{list}\n").as_str()]
        );
        // `Action:` not first in the fence, or another info string: CommonMark.
        let t = format!("```\nsee\nAction: ```json\n{list}\n```\n```\n");
        assert_eq!(
            contents(&t),
            [format!("see\nAction: ```json\n{list}\n").as_str(), ""]
        );
        let t = "```markdown\n```json\n[1]\n```\n```\n";
        assert_eq!(contents(t), ["```json\n[1]\n", ""]);
    }

    /// A fence opened at the end of a plan is the action's; one closed there is not.
    #[test]
    fn the_fence_opened_before_an_action() {
        let t = "Lead:\n```\nAction:";
        let at = t.find("Action:").unwrap();
        assert_eq!(open_fence_before(t.as_bytes(), 0, at), Some(6));
        let t = "Code:\n```py\nx\n```\nAction:";
        let at = t.find("Action:").unwrap();
        assert_eq!(open_fence_before(t.as_bytes(), 0, at), None);
        let t = "Just a plan.\nAction:";
        let at = t.find("Action:").unwrap();
        assert_eq!(open_fence_before(t.as_bytes(), 0, at), None);
    }
}
