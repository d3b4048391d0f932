//! `api.fs`: file access confined to a plugin's root, as in a chroot.
//!
//! Every path is taken inside the root: `/logs/today.log` and `logs/today.log` both mean
//! `<root>/logs/today.log`. Paths are resolved component by component; `..` that would leave
//! the root, a symlink (resolved with `canonicalize`) that leads out of it, and NUL bytes are
//! refused. Containment is checked by path component, never by string prefix, so
//! `<root>-sibling` is outside. Writes go through a temp file in the same directory and a
//! rename, so a crash never leaves half a file.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use serde_json::{json, Value};

use super::ScriptError;

fn refused(path: &str, reason: impl Into<String>) -> ScriptError {
    ScriptError::PathRefused {
        path: path.to_string(),
        reason: reason.into(),
    }
}

fn io_err(op: &str, path: &str, e: std::io::Error) -> ScriptError {
    let message = match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "the operating system denied access".to_string(),
        _ => e.to_string(),
    };
    ScriptError::Io {
        op: op.into(),
        path: path.into(),
        message,
    }
}

/// A root directory and the operations confined to it.
#[derive(Debug, Clone)]
pub struct FsRoot {
    root: PathBuf,
    max_bytes: usize,
}

impl FsRoot {
    /// A confined view of `root` (which need not exist yet); reads larger than `max_bytes`
    /// are refused.
    pub fn new(root: impl Into<PathBuf>, max_bytes: usize) -> Self {
        FsRoot {
            root: root.into(),
            max_bytes,
        }
    }

    /// The canonical root, created if missing when `create` is set.
    fn canonical_root(&self, create: bool, user: &str) -> Result<PathBuf, ScriptError> {
        if create && !self.root.exists() {
            std::fs::create_dir_all(&self.root).map_err(|e| io_err("mkdir", user, e))?;
        }
        self.root.canonicalize().map_err(|e| ScriptError::Io {
            op: "open root".into(),
            path: self.root.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Resolves a script path to a real path inside the root (see the module docs).
    /// The result may not exist. `create_root` creates the root directory when missing.
    pub fn resolve(&self, user: &str, create_root: bool) -> Result<PathBuf, ScriptError> {
        if user.contains('\0') {
            return Err(refused(user, "contains a NUL byte"));
        }
        // Lexical pass: drop `/`, `.` and empty parts, apply `..` without leaving the root.
        let mut parts: Vec<&str> = Vec::new();
        for part in user.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(refused(user, "'..' leads out of the root"));
                    }
                }
                p => {
                    // A part like `C:` would be a prefix on Windows; refuse it everywhere.
                    if Path::new(p)
                        .components()
                        .any(|c| !matches!(c, Component::Normal(_)))
                    {
                        return Err(refused(user, format!("'{p}' is not a plain name")));
                    }
                    parts.push(p);
                }
            }
        }
        let root = self.canonical_root(create_root, user)?;
        // Real pass: follow existing components (and symlinks) and check containment.
        let mut cur = root.clone();
        let mut rest = parts.iter();
        for part in rest.by_ref() {
            let next = cur.join(part);
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let real = match next.canonicalize() {
                        Ok(r) => r,
                        // A dangling link: refuse, its target could be anywhere.
                        Err(_) => return Err(refused(user, "a symlink with a missing target")),
                    };
                    if !real.starts_with(&root) {
                        return Err(refused(user, "a symlink leads out of the root"));
                    }
                    cur = real;
                }
                Ok(_) => cur = next,
                Err(_) => {
                    cur = next;
                    break;
                }
            }
        }
        for part in rest {
            cur.push(part);
        }
        if !cur.starts_with(&root) {
            return Err(refused(user, "resolves outside the root"));
        }
        Ok(cur)
    }

    fn is_root(&self, p: &Path) -> bool {
        self.root.canonicalize().map(|r| r == p).unwrap_or(false)
    }

    /// Reads a UTF-8 text file (invalid UTF-8 is replaced).
    pub fn read(&self, user: &str) -> Result<String, ScriptError> {
        let p = self.resolve(user, false)?;
        let meta = std::fs::metadata(&p).map_err(|e| io_err("read", user, e))?;
        if meta.is_dir() {
            return Err(ScriptError::Io {
                op: "read".into(),
                path: user.into(),
                message: "is a directory".into(),
            });
        }
        if meta.len() > self.max_bytes as u64 {
            return Err(ScriptError::ValueLimit {
                what: "string_size".into(),
                message: format!(
                    "file '{user}' has {} bytes, more than the {} allowed",
                    meta.len(),
                    self.max_bytes
                ),
            });
        }
        let bytes = std::fs::read(&p).map_err(|e| io_err("read", user, e))?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// Writes a whole file atomically, creating parent directories.
    pub fn write(&self, user: &str, content: &[u8]) -> Result<(), ScriptError> {
        let p = self.resolve(user, true)?;
        self.write_resolved(user, &p, content)
    }

    fn write_resolved(&self, user: &str, p: &Path, content: &[u8]) -> Result<(), ScriptError> {
        if self.is_root(p) || p.is_dir() {
            return Err(ScriptError::Io {
                op: "write".into(),
                path: user.into(),
                message: "is a directory".into(),
            });
        }
        let parent = p
            .parent()
            .ok_or_else(|| refused(user, "has no parent directory"))?;
        std::fs::create_dir_all(parent).map_err(|e| io_err("write", user, e))?;
        // The temp file lives in the target's directory so the rename cannot cross devices.
        let mut tmp =
            tempfile::NamedTempFile::new_in(parent).map_err(|e| io_err("write", user, e))?;
        tmp.write_all(content)
            .and_then(|_| tmp.as_file().sync_data())
            .map_err(|e| io_err("write", user, e))?;
        tmp.persist(p).map_err(|e| io_err("write", user, e.error))?;
        Ok(())
    }

    /// Appends to a file (created if missing) through the same temp-file-and-rename path,
    /// so a failure leaves the old content intact.
    pub fn append(&self, user: &str, content: &[u8]) -> Result<(), ScriptError> {
        let p = self.resolve(user, true)?;
        let mut old = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("append", user, e)),
        };
        if old.len() + content.len() > self.max_bytes {
            return Err(ScriptError::ValueLimit {
                what: "string_size".into(),
                message: format!("file '{user}' would exceed {} bytes", self.max_bytes),
            });
        }
        old.extend_from_slice(content);
        self.write_resolved(user, &p, &old)
    }

    /// Lists a directory: `[{name, type: "file"|"dir"|"symlink"|"other", size}]`, by name.
    pub fn list(&self, user: &str) -> Result<Value, ScriptError> {
        let p = self.resolve(user, false)?;
        let rd = std::fs::read_dir(&p).map_err(|e| io_err("list", user, e))?;
        let mut items = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| io_err("list", user, e))?;
            let ft = entry.file_type().map_err(|e| io_err("list", user, e))?;
            let kind = if ft.is_symlink() {
                "symlink"
            } else if ft.is_dir() {
                "dir"
            } else if ft.is_file() {
                "file"
            } else {
                "other"
            };
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            items.push((entry.file_name().to_string_lossy().into_owned(), kind, size));
        }
        items.sort();
        Ok(Value::Array(
            items
                .into_iter()
                .map(|(name, kind, size)| json!({"name": name, "type": kind, "size": size}))
                .collect(),
        ))
    }

    /// Removes a file or an empty directory.
    pub fn remove(&self, user: &str) -> Result<(), ScriptError> {
        let p = self.resolve(user, false)?;
        if self.is_root(&p) {
            return Err(refused(user, "is the root itself"));
        }
        let meta = std::fs::symlink_metadata(&p).map_err(|e| io_err("remove", user, e))?;
        if meta.is_dir() {
            std::fs::remove_dir(&p).map_err(|e| io_err("remove", user, e))
        } else {
            std::fs::remove_file(&p).map_err(|e| io_err("remove", user, e))
        }
    }

    /// Whether the path exists (refused paths are an error, not `false`).
    pub fn exists(&self, user: &str) -> Result<bool, ScriptError> {
        if !self.root.exists() {
            // Still check the path's shape so an escape is reported consistently.
            self.resolve_lexical_only(user)?;
            return Ok(false);
        }
        Ok(self.resolve(user, false)?.exists())
    }

    fn resolve_lexical_only(&self, user: &str) -> Result<(), ScriptError> {
        if user.contains('\0') {
            return Err(refused(user, "contains a NUL byte"));
        }
        let mut depth = 0usize;
        for part in user.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." if depth == 0 => return Err(refused(user, "'..' leads out of the root")),
                ".." => depth -= 1,
                _ => depth += 1,
            }
        }
        Ok(())
    }

    /// Creates a directory and its parents.
    pub fn mkdir(&self, user: &str) -> Result<(), ScriptError> {
        let p = self.resolve(user, true)?;
        std::fs::create_dir_all(&p).map_err(|e| io_err("mkdir", user, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, FsRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(&root).unwrap();
        let fs = FsRoot::new(&root, 1 << 20);
        (dir, fs)
    }

    #[test]
    fn chroot_style_paths() {
        let (_d, fs) = setup();
        let cases = [
            ("/logs/today.log", "logs/today.log"),
            ("logs/today.log", "logs/today.log"),
            ("./a/../b.txt", "b.txt"),
            ("a//b", "a/b"),
        ];
        let root = fs.root.canonicalize().unwrap();
        for (input, expected) in cases {
            assert_eq!(
                fs.resolve(input, false).unwrap(),
                root.join(expected),
                "{input}"
            );
        }
    }

    #[test]
    fn escapes_refused() {
        let (d, fs) = setup();
        std::fs::create_dir_all(d.path().join("ws-x")).unwrap();
        std::fs::write(d.path().join("secret"), "s").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.path(), fs.root.join("out")).unwrap();
            std::os::unix::fs::symlink(d.path().join("ws-x"), fs.root.join("sib")).unwrap();
        }
        let bad = [
            "../secret",
            "/../secret",
            "a/../../secret",
            "../ws-x/f",
            "a\0b",
            "out/secret",
            "sib/f",
        ];
        for input in bad {
            let err = fs.resolve(input, false).unwrap_err();
            assert_eq!(err.kind(), "path_refused", "{input}: {err}");
            assert!(fs.write(input, b"x").is_err(), "{input}");
        }
        assert_eq!(
            std::fs::read_to_string(d.path().join("secret")).unwrap(),
            "s"
        );
        assert!(!d.path().join("ws-x/f").exists());
    }

    #[test]
    fn symlink_inside_root_is_fine() {
        let (_d, fs) = setup();
        std::fs::create_dir_all(fs.root.join("real")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(fs.root.join("real"), fs.root.join("link")).unwrap();
        fs.write("link/f.txt", b"hi").unwrap();
        assert_eq!(fs.read("real/f.txt").unwrap(), "hi");
    }

    #[test]
    fn write_append_read_list_remove() {
        let (_d, fs) = setup();
        fs.write("/logs/today.log", b"one\n").unwrap();
        fs.append("/logs/today.log", b"two\n").unwrap();
        assert_eq!(fs.read("logs/today.log").unwrap(), "one\ntwo\n");
        fs.mkdir("a/b/c").unwrap();
        assert!(fs.exists("a/b/c").unwrap());
        let list = fs.list("/").unwrap();
        assert_eq!(list[0]["name"], "a");
        assert_eq!(list[1]["name"], "logs");
        assert_eq!(list[1]["type"], "dir");
        fs.remove("logs/today.log").unwrap();
        assert!(!fs.exists("logs/today.log").unwrap());
        assert_eq!(fs.remove("/").unwrap_err().kind(), "path_refused");
        // No temp files left behind.
        assert_eq!(fs.list("logs").unwrap(), json!([]));
    }

    #[test]
    fn root_created_on_first_write() {
        let d = tempfile::tempdir().unwrap();
        let fs = FsRoot::new(d.path().join("new/ws"), 100);
        assert!(!fs.exists("x").unwrap());
        fs.write("x", b"1").unwrap();
        assert_eq!(fs.read("/x").unwrap(), "1");
        assert_eq!(
            fs.append("x", &[b'a'; 200]).unwrap_err().kind(),
            "value_limit"
        );
        assert_eq!(fs.read("/x").unwrap(), "1");
    }
}
