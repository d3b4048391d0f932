//! `api.fs`: file access confined to a plugin's root, as in a chroot.
//!
//! Every path is taken inside the root: `/logs/today.log` and `logs/today.log` both mean
//! `<root>/logs/today.log`. `..` is applied to the written path first and may not climb above
//! the root; NUL bytes and drive prefixes are refused. Then every file and directory is opened
//! relative to a directory handle of the root with `cap-std`, so the kernel itself
//! (`openat2` with `RESOLVE_BENEATH` on Linux, a component-by-component walk elsewhere)
//! refuses any step out of it: a symlink leading out (or an absolute one) is refused when it
//! is used, and swapping a directory for such a symlink mid-call gains nothing. Only regular
//! files and directories are opened: a FIFO, socket or device is an error at once (files are
//! opened non-blocking and checked through the handle before reading). Writes go to a temp
//! file beside the target, created through the handle of the target's directory, then
//! renamed into place, so no reader ever sees half a file. A temp file left by a killed
//! process (`.tavern-tmp.<pid>.<random>`) is removed when the plugin loads
//! ([`remove_stale_temp_files`]).

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};
use serde_json::{json, Value};

use super::ScriptError;

/// The name prefix of our temp files (`.tavern-tmp.<pid>.<random>`).
const TMP_PREFIX: &str = ".tavern-tmp.";

fn refused(path: &str, reason: impl Into<String>) -> ScriptError {
    ScriptError::PathRefused {
        path: path.to_string(),
        reason: reason.into(),
    }
}

fn not_regular(op: &str, path: &str) -> ScriptError {
    ScriptError::Io {
        op: op.into(),
        path: path.into(),
        message: "is not a regular file (a FIFO, socket or device); only files and directories are opened".into(),
    }
}

fn is_dir_err(op: &str, path: &str) -> ScriptError {
    ScriptError::Io {
        op: op.into(),
        path: path.into(),
        message: "is a directory".into(),
    }
}

/// Whether `e` is cap-std's refusal of a path that leaves the directory handle (a `..` or a
/// symlink pointing out, or an absolute symlink).
fn is_escape(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied
        && e.to_string().contains("outside of the filesystem")
}

fn io_err(op: &str, path: &str, e: std::io::Error) -> ScriptError {
    if is_escape(&e) {
        return refused(path, "a symlink leads out of the root");
    }
    #[cfg(unix)]
    match e.raw_os_error() {
        // Opening a socket, or a FIFO for writing with no reader.
        Some(libc::ENXIO) => return not_regular(op, path),
        Some(libc::ELOOP) => return refused(path, "too many levels of symlinks"),
        _ => {}
    }
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

/// The written path made relative to the root: `/`, `.` and empty parts dropped, `..`
/// applied without leaving the root. Empty means the root itself.
fn relative(user: &str) -> Result<PathBuf, ScriptError> {
    if user.contains('\0') {
        return Err(refused(user, "contains a NUL byte"));
    }
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
    Ok(parts.iter().collect())
}

/// `rel`, or `.` for the root itself (cap-std wants a path).
fn or_dot(rel: &Path) -> &Path {
    if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    }
}

/// Opens `rel` (beneath `dir`) for reading if it is a regular file: non-blocking, so a FIFO
/// cannot hold the call, and checked through the handle, so what is read is what was checked.
fn open_regular(
    dir: &Dir,
    rel: &Path,
    op: &str,
    user: &str,
) -> Result<(cap_std::fs::File, u64), ScriptError> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = dir.open_with(rel, &opts).map_err(|e| io_err(op, user, e))?;
    let meta = file.metadata().map_err(|e| io_err(op, user, e))?;
    if meta.is_dir() {
        return Err(is_dir_err(op, user));
    }
    if !meta.is_file() {
        return Err(not_regular(op, user));
    }
    Ok((file, meta.len()))
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

    /// The handle of the root, which is created if missing when `create` is set. The root
    /// itself is the plugin's configuration, trusted; everything under it is not.
    fn open_root(&self, create: bool, user: &str) -> Result<Dir, ScriptError> {
        if create && !self.root.exists() {
            std::fs::create_dir_all(&self.root).map_err(|e| io_err("mkdir", user, e))?;
        }
        Dir::open_ambient_dir(&self.root, cap_std::ambient_authority()).map_err(|e| {
            ScriptError::Io {
                op: "open root".into(),
                path: self.root.display().to_string(),
                message: e.to_string(),
            }
        })
    }

    /// Reads a UTF-8 text file (invalid UTF-8 is replaced).
    pub fn read(&self, user: &str) -> Result<String, ScriptError> {
        let rel = relative(user)?;
        let dir = self.open_root(false, user)?;
        if rel.as_os_str().is_empty() {
            return Err(is_dir_err("read", user));
        }
        let bytes = self.read_bytes(&dir, &rel, "read", user)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    fn read_bytes(
        &self,
        dir: &Dir,
        rel: &Path,
        op: &str,
        user: &str,
    ) -> Result<Vec<u8>, ScriptError> {
        let (file, len) = open_regular(dir, rel, op, user)?;
        let too_big = |n: u64| ScriptError::ValueLimit {
            what: "string_size".into(),
            message: format!(
                "file '{user}' has {n} bytes, more than the {} allowed",
                self.max_bytes
            ),
        };
        if len > self.max_bytes as u64 {
            return Err(too_big(len));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        // One byte past the limit tells a file that grew meanwhile.
        file.take(self.max_bytes as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io_err(op, user, e))?;
        if bytes.len() > self.max_bytes {
            return Err(too_big(bytes.len() as u64));
        }
        Ok(bytes)
    }

    /// Where a write of `rel` goes: `rel` itself, or the file a symlink there points to
    /// (inside the root). Refuses directories and anything but regular files.
    fn write_target(
        &self,
        dir: &Dir,
        rel: &Path,
        op: &str,
        user: &str,
    ) -> Result<PathBuf, ScriptError> {
        if rel.as_os_str().is_empty() {
            return Err(is_dir_err(op, user));
        }
        match dir.symlink_metadata(rel) {
            Ok(m) if m.is_symlink() => {
                let real = dir.canonicalize(rel).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        refused(user, "a symlink with a missing target")
                    }
                    _ => io_err(op, user, e),
                })?;
                // Check what it points to (beneath the root, as everything).
                self.write_target_kind(dir, &real, op, user)?;
                Ok(real)
            }
            Ok(_) => {
                self.write_target_kind(dir, rel, op, user)?;
                Ok(rel.to_path_buf())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(rel.to_path_buf()),
            Err(e) => Err(io_err(op, user, e)),
        }
    }

    fn write_target_kind(
        &self,
        dir: &Dir,
        rel: &Path,
        op: &str,
        user: &str,
    ) -> Result<(), ScriptError> {
        match dir.symlink_metadata(rel) {
            Ok(m) if m.is_dir() => Err(is_dir_err(op, user)),
            Ok(m) if !m.is_file() => Err(not_regular(op, user)),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(op, user, e)),
        }
    }

    /// Writes `content` to `target` (beneath `dir`): a temp file created beside it through
    /// the handle of its directory, synced, then renamed over it within that same handle.
    fn replace(
        &self,
        dir: &Dir,
        target: &Path,
        content: &[u8],
        op: &str,
        user: &str,
    ) -> Result<(), ScriptError> {
        let name = target
            .file_name()
            .ok_or_else(|| refused(user, "has no file name"))?;
        let parent = target.parent().unwrap_or(Path::new(""));
        let pdir = if parent.as_os_str().is_empty() {
            dir.try_clone().map_err(|e| io_err(op, user, e))?
        } else {
            dir.create_dir_all(parent)
                .map_err(|e| io_err(op, user, e))?;
            dir.open_dir(parent).map_err(|e| io_err(op, user, e))?
        };
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let (tmp_name, mut tmp) = loop {
            let n = format!(
                "{TMP_PREFIX}{}.{:016x}",
                std::process::id(),
                fastrand::u64(..)
            );
            match pdir.open_with(&n, &opts) {
                Ok(f) => break (n, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err(op, user, e)),
            }
        };
        let written = tmp
            .write_all(content)
            .and_then(|_| tmp.sync_data())
            .and_then(|_| {
                drop(tmp);
                pdir.rename(&tmp_name, &pdir, name)
            });
        if let Err(e) = written {
            let _ = pdir.remove_file(&tmp_name);
            return Err(io_err(op, user, e));
        }
        Ok(())
    }

    /// Writes a whole file atomically, creating parent directories.
    pub fn write(&self, user: &str, content: &[u8]) -> Result<(), ScriptError> {
        let rel = relative(user)?;
        let dir = self.open_root(true, user)?;
        let target = self.write_target(&dir, &rel, "write", user)?;
        self.replace(&dir, &target, content, "write", user)
    }

    /// Appends to a file (created if missing) through the same temp-file-and-rename path,
    /// so a failure leaves the old content intact.
    pub fn append(&self, user: &str, content: &[u8]) -> Result<(), ScriptError> {
        let rel = relative(user)?;
        let dir = self.open_root(true, user)?;
        let target = self.write_target(&dir, &rel, "append", user)?;
        let mut old = match self.read_bytes(&dir, &target, "append", user) {
            Ok(b) => b,
            Err(ScriptError::Io { message, .. }) if message == "no such file or directory" => {
                Vec::new()
            }
            Err(ScriptError::ValueLimit { .. }) => return Err(self.append_limit(user)),
            Err(e) => return Err(e),
        };
        if old.len() + content.len() > self.max_bytes {
            return Err(self.append_limit(user));
        }
        old.extend_from_slice(content);
        self.replace(&dir, &target, &old, "append", user)
    }

    fn append_limit(&self, user: &str) -> ScriptError {
        ScriptError::ValueLimit {
            what: "string_size".into(),
            message: format!("file '{user}' would exceed {} bytes", self.max_bytes),
        }
    }

    /// Lists a directory: `[{name, type: "file"|"dir"|"symlink"|"other", size}]`, by name.
    pub fn list(&self, user: &str) -> Result<Value, ScriptError> {
        let rel = relative(user)?;
        let dir = self.open_root(false, user)?;
        let rd = dir
            .read_dir(or_dot(&rel))
            .map_err(|e| io_err("list", user, e))?;
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

    /// Removes a file or an empty directory. A symlink is removed itself, and only when it
    /// leads somewhere inside the root.
    pub fn remove(&self, user: &str) -> Result<(), ScriptError> {
        let rel = relative(user)?;
        if rel.as_os_str().is_empty() {
            return Err(refused(user, "is the root itself"));
        }
        let dir = self.open_root(false, user)?;
        let meta = dir
            .symlink_metadata(&rel)
            .map_err(|e| io_err("remove", user, e))?;
        if meta.is_symlink() {
            dir.metadata(&rel).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => refused(user, "a symlink with a missing target"),
                _ => io_err("remove", user, e),
            })?;
        }
        if meta.is_dir() {
            dir.remove_dir(&rel).map_err(|e| io_err("remove", user, e))
        } else {
            dir.remove_file(&rel).map_err(|e| io_err("remove", user, e))
        }
    }

    /// Whether the path exists (refused paths are an error, not `false`).
    pub fn exists(&self, user: &str) -> Result<bool, ScriptError> {
        let rel = relative(user)?;
        if !self.root.exists() {
            return Ok(false);
        }
        let dir = self.open_root(false, user)?;
        match dir.metadata(or_dot(&rel)) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_err("exists", user, e)),
        }
    }

    /// Creates a directory and its parents.
    pub fn mkdir(&self, user: &str) -> Result<(), ScriptError> {
        let rel = relative(user)?;
        let dir = self.open_root(true, user)?;
        if rel.as_os_str().is_empty() {
            return Ok(());
        }
        dir.create_dir_all(&rel)
            .map_err(|e| io_err("mkdir", user, e))
    }
}

/// Whether process `pid` still runs (a temp file of a live process is in use).
fn alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// The pid in one of our temp file names (`.tavern-tmp.<pid>.<random>`).
fn temp_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TMP_PREFIX)?;
    let (pid, tail) = rest.split_once('.')?;
    if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    pid.parse().ok()
}

/// Removes the temp files a killed write left under `root` (ours by name, of a process no
/// longer running), walking at most `limit` entries without following symlinks. Returns how
/// many it removed; a root that cannot be read removes nothing.
pub fn remove_stale_temp_files(root: &Path, limit: usize) -> usize {
    let Ok(dir) = Dir::open_ambient_dir(root, cap_std::ambient_authority()) else {
        return 0;
    };
    let mut budget = limit;
    let mut removed = 0;
    let mut stack = vec![(dir, 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = dir.entries() else { continue };
        for entry in rd.flatten() {
            if budget == 0 {
                return removed;
            }
            budget -= 1;
            let Ok(ft) = entry.file_type() else { continue };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if ft.is_dir() && depth < 64 {
                if let Ok(sub) = entry.open_dir() {
                    stack.push((sub, depth + 1));
                }
            } else if ft.is_file()
                && temp_owner(&name).is_some_and(|pid| !alive(pid))
                && dir.remove_file(&*name).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
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
        for (input, expected) in cases {
            assert_eq!(relative(input).unwrap(), Path::new(expected), "{input}");
            fs.write(input, input.as_bytes()).unwrap();
            assert_eq!(
                std::fs::read_to_string(fs.root.join(expected)).unwrap(),
                input
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
            std::os::unix::fs::symlink("../secret", fs.root.join("rel-out")).unwrap();
        }
        let bad = [
            "../secret",
            "/../secret",
            "a/../../secret",
            "../ws-x/f",
            "a\0b",
            "out/secret",
            "sib/f",
            "rel-out",
        ];
        for input in bad {
            let err = fs.read(input).unwrap_err();
            assert_eq!(err.kind(), "path_refused", "{input}: {err}");
            assert!(fs.write(input, b"x").is_err(), "{input}");
            assert!(fs.append(input, b"x").is_err(), "{input}");
            assert!(fs.remove(input).is_err(), "{input}");
            assert_eq!(
                fs.exists(input).unwrap_err().kind(),
                "path_refused",
                "{input}"
            );
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
        // Relative: an absolute target is refused even when it points inside (the kernel
        // resolves beneath the root's handle, where `/` is out).
        #[cfg(unix)]
        std::os::unix::fs::symlink("real", fs.root.join("link")).unwrap();
        fs.write("link/f.txt", b"hi").unwrap();
        assert_eq!(fs.read("real/f.txt").unwrap(), "hi");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("real/f.txt", fs.root.join("flink")).unwrap();
            fs.append("flink", b"!").unwrap();
            assert_eq!(fs.read("real/f.txt").unwrap(), "hi!");
            assert!(
                fs.root.join("flink").is_symlink(),
                "a write through a link keeps the link"
            );
        }
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
        assert!(fs.read("/").unwrap_err().to_string().contains("directory"));
        assert!(
            fs.write("a", b"x").is_err(),
            "a directory is not overwritten"
        );
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

    #[test]
    fn temp_names_are_told_apart() {
        assert_eq!(temp_owner(".tavern-tmp.42.00ff"), Some(42));
        for other in [
            ".tavern-tmp.42.",
            ".tavern-tmp.x.1",
            ".tavern-tmp-42.1",
            "a.txt",
        ] {
            assert_eq!(temp_owner(other), None, "{other}");
        }
        let (_d, fs) = setup();
        fs.write("mine", b"1").unwrap();
        let live = fs
            .root
            .join(format!("{TMP_PREFIX}{}.abc", std::process::id()));
        std::fs::write(&live, "in use").unwrap();
        assert_eq!(remove_stale_temp_files(&fs.root, 1000), 0);
        assert!(live.exists(), "a live process's temp file stays");
    }
}
