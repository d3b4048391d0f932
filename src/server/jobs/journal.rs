//! The journal of issued job ids: `<home>/.tavern/state/jobs.jsonl`, one JSON line
//! `{"id", "created_ms"}` per job, so a server restarted over the same home can tell a
//! client that a job was lost to the restart (`410 job_lost`) rather than "not found".
//!
//! - Read once when the server starts; ids of earlier runs are kept in memory (at most
//!   [`KEEP`], newest kept).
//! - Created lazily when the first job is made (a server that makes no job writes
//!   nothing); each id is one `write` of one line to a file opened in append mode, so lines
//!   never interleave.
//! - Bounded: past `2 × KEEP` lines the file is rewritten (temp file + rename) with the
//!   newest [`KEEP`].
//! - A home that cannot be written (read-only, full) does not stop the server: a warning
//!   is logged once and journalling stops; ids of earlier runs still answer `job_lost`
//!   when the file could be read, ids of this run just become unknown after a restart.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Value};

/// Ids the journal keeps (and remembers from earlier runs).
pub const KEEP: usize = 10_000;

/// Where the journal lives under an engine home.
pub fn path_in(home: &Path) -> PathBuf {
    home.join(".tavern").join("state").join("jobs.jsonl")
}

enum Writer {
    /// Not opened yet.
    Closed,
    /// Appending.
    Open(File),
    /// Failed once; journalling is off.
    Off,
}

struct Inner {
    writer: Writer,
    /// The newest lines written or read, for compaction.
    lines: VecDeque<String>,
    /// Lines in the file now.
    in_file: usize,
}

/// The job id journal of one server (see the module docs).
pub struct Journal {
    path: Option<PathBuf>,
    /// Ids of earlier runs → when they were made.
    lost: HashMap<String, u64>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("lost", &self.lost.len())
            .finish()
    }
}

fn parse_line(line: &str) -> Option<(String, u64)> {
    let v: Value = serde_json::from_str(line).ok()?;
    let id = v.get("id")?.as_str()?.to_string();
    let created = v.get("created_ms").and_then(Value::as_u64).unwrap_or(0);
    Some((id, created))
}

impl Journal {
    /// A journal that records nothing (embedded servers, `tavern mcp`).
    pub fn disabled() -> Self {
        Journal {
            path: None,
            lost: HashMap::new(),
            inner: Mutex::new(Inner {
                writer: Writer::Off,
                lines: VecDeque::new(),
                in_file: 0,
            }),
        }
    }

    /// Opens the journal at `path`, reading the ids of earlier runs. A missing file is an
    /// empty journal; an unreadable one is logged and treated as empty.
    pub fn open(path: PathBuf) -> Self {
        let mut lines = VecDeque::new();
        let mut in_file = 0;
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                for l in text.lines().filter(|l| !l.trim().is_empty()) {
                    in_file += 1;
                    // A torn last line (crash mid-write) is skipped, not fatal.
                    if parse_line(l).is_some() {
                        lines.push_back(l.to_string());
                        if lines.len() > KEEP {
                            lines.pop_front();
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!("cannot read the job journal {}: {e}", path.display());
            }
        }
        let lost = lines.iter().filter_map(|l| parse_line(l)).collect();
        Journal {
            path: Some(path),
            lost,
            inner: Mutex::new(Inner {
                writer: Writer::Closed,
                lines,
                in_file,
            }),
        }
    }

    /// When the job `id` of an earlier run was made, if the journal knows it.
    pub fn lost(&self, id: &str) -> Option<u64> {
        self.lost.get(id).copied()
    }

    /// Appends `id`. Never fails: a write problem turns journalling off with a warning.
    pub fn record(&self, id: &str, created_ms: u64) {
        let Some(path) = &self.path else { return };
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let line = json!({"id": id, "created_ms": created_ms}).to_string();
        if matches!(inner.writer, Writer::Closed) {
            inner.writer = match open_append(path) {
                Ok(f) => Writer::Open(f),
                Err(e) => {
                    warn_off(path, &e);
                    Writer::Off
                }
            };
        }
        let Writer::Open(f) = &mut inner.writer else {
            return;
        };
        let mut buf = line.clone().into_bytes();
        buf.push(b'\n');
        if let Err(e) = f.write_all(&buf) {
            warn_off(path, &e);
            inner.writer = Writer::Off;
            return;
        }
        inner.lines.push_back(line);
        if inner.lines.len() > KEEP {
            inner.lines.pop_front();
        }
        inner.in_file += 1;
        if inner.in_file > 2 * KEEP {
            match compact(path, &inner.lines) {
                Ok(f) => {
                    inner.writer = Writer::Open(f);
                    inner.in_file = inner.lines.len();
                }
                Err(e) => {
                    warn_off(path, &e);
                    inner.writer = Writer::Off;
                }
            }
        }
    }
}

fn warn_off(path: &Path, e: &std::io::Error) {
    tracing::warn!(
        "cannot write the job journal {}: {e}; jobs still work, but after a restart their ids will answer 404 instead of 410 job_lost",
        path.display()
    );
}

fn open_append(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Rewrites the journal with `lines` (temp file in the same directory, then rename) and
/// reopens it for appending.
fn compact(path: &Path, lines: &VecDeque<String>) -> std::io::Result<File> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    for l in lines {
        writeln!(tmp, "{l}")?;
    }
    tmp.flush()?;
    tmp.persist(path).map_err(|e| e.error)?;
    open_append(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_survive_a_reopen_and_torn_lines_are_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = path_in(dir.path());
        let j = Journal::open(p.clone());
        assert_eq!(j.lost("job-a-1"), None);
        j.record("job-a-1", 5);
        j.record("job-a-2", 6);
        drop(j);
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"id\": \"job-a-3\", \"crea").unwrap();
        let j = Journal::open(p);
        assert_eq!(j.lost("job-a-1"), Some(5));
        assert_eq!(j.lost("job-a-2"), Some(6));
        assert_eq!(j.lost("job-a-3"), None);
    }

    #[test]
    fn the_file_is_compacted_past_twice_keep() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = path_in(dir.path());
        let j = Journal::open(p.clone());
        for i in 0..(2 * KEEP + 1) {
            j.record(&format!("job-b-{i}"), i as u64);
        }
        let n = std::fs::read_to_string(&p).unwrap().lines().count();
        assert_eq!(n, KEEP);
        j.record("job-b-last", 1);
        drop(j);
        let j = Journal::open(p);
        assert_eq!(j.lost("job-b-last"), Some(1));
        assert_eq!(
            j.lost("job-b-0"),
            None,
            "the oldest ids were compacted away"
        );
        assert!(j.lost(&format!("job-b-{}", 2 * KEEP)).is_some());
    }

    #[test]
    fn an_unwritable_home_turns_journalling_off() {
        let dir = tempfile::tempdir().expect("temp dir");
        // A file where the state directory should be: creating it fails.
        std::fs::write(dir.path().join(".tavern"), "not a dir").unwrap();
        let j = Journal::open(path_in(dir.path()));
        j.record("job-c-1", 1);
        j.record("job-c-2", 2);
        assert_eq!(j.lost("job-c-1"), None);
    }
}
