//! Confinement of process tools (issue 12, seed 001 §4.3/§9): every child a process tool
//! starts runs under the kernel's own mechanisms, applied between fork and exec.
//!
//! - **Files**: a Landlock ruleset (the `landlock` crate) that lets the child read the
//!   plugin's directory, the runtime's installation and the system paths in
//!   [`SYSTEM_READ`], read and write the plugin's `permissions.fs` roots and a private
//!   temporary directory (removed after the call), and nothing else.
//! - **Limits**: `setrlimit` for memory, CPU time and open files; a per-call pids cgroup for
//!   the number of processes (root ignores `RLIMIT_NPROC`, a cgroup holds for root too);
//!   every capability is dropped so a root child cannot raise its own limits back.
//! - **Network**: unless the plugin declares `permissions.network: true`, a seccomp filter
//!   refuses every socket family but `AF_UNIX`, and Landlock (ABI ≥ 4) refuses TCP bind and
//!   connect; abstract Unix sockets and signals outside the sandbox are scoped away (ABI ≥ 6).
//!
//! Everything is prepared before `fork`; the child only makes system calls
//! (async-signal-safe). Which mechanisms the kernel has is probed once ([`support`]); a tool
//! whose permissions cannot be enforced is refused at load unless the host sets
//! `process.allow_unconfined = true`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

pub use super::rlimits::{PartialProcessLimits, ProcessLimits};
pub use super::support::{decide, support, unconfined_hint, Support, ALLOW_UNCONFINED};

/// Paths every process tool may read (and execute): what a dynamically linked runtime needs
/// (programs, libraries, the loader's cache, locale and time zone data) and harmless devices.
/// Missing entries are skipped.
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/ssl/openssl.cnf",
    "/dev/urandom",
    "/dev/random",
];

/// Devices every process tool may read and write (`> /dev/null` must work).
pub const SYSTEM_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Extra paths readable when the plugin declares `permissions.network: true`: name
/// resolution and TLS certificates.
pub const NETWORK_READ: &[&str] = &[
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
];

/// Private temporary directories of one tool, kept between calls: a call takes one that no
/// other call holds, and returns it emptied (making and removing a directory can cost
/// milliseconds on a disk mounted with `discard`). They are removed with the tool.
#[derive(Debug, Clone, Default)]
pub struct TempPool(Arc<std::sync::Mutex<Vec<tempfile::TempDir>>>);

/// Directories kept per tool at most.
const POOL_MAX: usize = 8;

impl TempPool {
    fn take(&self) -> Result<PooledTmp, ConfineError> {
        let reused = self.0.lock().ok().and_then(|mut v| v.pop());
        let dir = match reused {
            Some(d) => d,
            None => tempfile::Builder::new()
                .prefix("tavern-tool-")
                .tempdir()
                .map_err(ConfineError::TempDir)?,
        };
        Ok(PooledTmp {
            dir: Some(dir),
            pool: self.clone(),
        })
    }
}

/// A temporary directory held by one call; emptied and given back when dropped.
#[derive(Debug)]
struct PooledTmp {
    dir: Option<tempfile::TempDir>,
    pool: TempPool,
}

impl PooledTmp {
    fn path(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }
}

impl Drop for PooledTmp {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        let emptied = std::fs::read_dir(dir.path()).and_then(|entries| {
            for e in entries {
                let p = e?.path();
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p)?,
                    _ => std::fs::remove_file(&p)?,
                }
            }
            Ok(())
        });
        // A directory that could not be emptied is removed (TempDir's drop) instead.
        if emptied.is_ok() {
            if let Ok(mut v) = self.pool.0.lock() {
                if v.len() < POOL_MAX {
                    v.push(dir);
                }
            }
        }
    }
}

/// How one process tool is confined (resolved at load).
#[derive(Debug, Clone)]
pub struct Confinement {
    /// The plugin's directory: readable, and the working directory. `None` runs the child in
    /// its private temporary directory.
    pub plugin_dir: Option<PathBuf>,
    /// Roots it may read (besides the system paths).
    pub read: Vec<PathBuf>,
    /// Roots it may read and write.
    pub write: Vec<PathBuf>,
    /// Whether it may use the network.
    pub network: bool,
    /// Its resource limits.
    pub limits: ProcessLimits,
    /// False when the host allowed running without a mechanism the kernel lacks.
    pub complete: bool,
    /// The tool's private temporary directories.
    pub temp_dirs: TempPool,
}

/// Why a call could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The private temporary directory could not be made.
    #[error("cannot create the tool's temporary directory: {0}")]
    TempDir(std::io::Error),
    /// The Landlock ruleset could not be built.
    #[error("cannot build the file sandbox: {0}")]
    #[cfg(target_os = "linux")]
    Landlock(#[from] ::landlock::RulesetError),
    /// The per-call pids cgroup could not be made.
    #[error("cannot create the process-limit cgroup {path}: {source}")]
    Cgroup {
        /// The cgroup directory.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The seccomp filter could not be compiled.
    #[error("cannot build the socket filter: {0}")]
    Seccomp(String),
}

impl Confinement {
    /// What `tavern plugin check` shows for the tool.
    pub fn describe(&self, timeout_ms: u64) -> Value {
        let l = &self.limits;
        json!({
            "read": self.plugin_dir.iter().chain(&self.read).map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "write": self.write.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "network": self.network,
            "limits": {
                "memoryMb": l.memory_mb, "cpuSeconds": l.cpu_seconds, "processes": l.processes,
                "openFiles": l.open_files, "outputBytes": l.output_bytes, "timeoutMs": timeout_ms,
            },
            "confined": self.complete,
        })
    }

    /// Builds everything the child needs, before fork. `program` is the resolved program
    /// (its installation becomes readable when it is outside the system paths).
    pub fn prepare(&self, program: &Path) -> Result<Prepared, ConfineError> {
        let tmp = self.temp_dirs.take()?;
        #[cfg(target_os = "linux")]
        let kernel = super::child::Kernel::prepare(self, program, tmp.path())?;
        #[cfg(not(target_os = "linux"))]
        let _ = program;
        Ok(Prepared {
            #[cfg(target_os = "linux")]
            kernel,
            tmp: Some(tmp),
        })
    }
}

/// Everything one call's child needs, made before fork; dropping it kills what is left in
/// the cgroup and removes the temporary directory.
#[derive(Debug)]
pub struct Prepared {
    /// The kernel's part (Linux only; elsewhere there is none).
    #[cfg(target_os = "linux")]
    kernel: super::child::Kernel,
    tmp: Option<PooledTmp>,
}

impl Prepared {
    /// The private temporary directory (read-write; `TMPDIR` and `HOME` point here).
    pub fn tmp(&self) -> &Path {
        self.tmp.as_ref().map_or(Path::new("/tmp"), |t| t.path())
    }

    /// Installs the confinement into `cmd`, to run in the child between fork and exec
    /// (nothing where the platform has no confinement).
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        #[cfg(target_os = "linux")]
        self.kernel.apply(cmd);
        #[cfg(not(target_os = "linux"))]
        let _ = cmd;
    }

    /// How often the process limit refused a fork.
    pub fn processes_refused(&self) -> u64 {
        #[cfg(target_os = "linux")]
        return self.kernel.processes_refused();
        #[cfg(not(target_os = "linux"))]
        0
    }

    /// Kills every process the call left (cgroup members, whatever their process group).
    pub fn kill_all(&self) {
        #[cfg(target_os = "linux")]
        self.kernel.kill_all();
    }
}

/// Builds the confinement of a plugin's process tool, or says why it must be refused.
#[allow(clippy::too_many_arguments)]
pub fn for_tool(
    plugin_dir: &Path,
    read: &[PathBuf],
    write: &[PathBuf],
    network: bool,
    host_caps: &ProcessLimits,
    plugin_limits: &PartialProcessLimits,
    tool_limits: &PartialProcessLimits,
    allow_unconfined: bool,
) -> Result<Confinement, String> {
    let complete = decide(support(), network, allow_unconfined)?;
    let limits = ProcessLimits::DEFAULT
        .capped_by(host_caps)
        .lowered_by(plugin_limits)
        .lowered_by(tool_limits);
    Ok(Confinement {
        plugin_dir: Some(plugin_dir.to_path_buf()),
        read: read.to_vec(),
        write: write.to_vec(),
        network,
        limits,
        complete,
        temp_dirs: TempPool::default(),
    })
}

/// Shared with the code interpreter: a confinement with no roots, no network and `limits`.
pub fn bare(limits: ProcessLimits) -> Arc<Confinement> {
    Arc::new(Confinement {
        plugin_dir: None,
        read: Vec::new(),
        write: Vec::new(),
        network: false,
        limits,
        complete: support().missing(false).is_empty(),
        temp_dirs: TempPool::default(),
    })
}

/// Where a bare program name resolves on `path` (`PATH`): an executable file (on Windows, a
/// file with or without one of the usual executable extensions).
pub fn which(program: &str, path: Option<&str>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path).find_map(|d| {
        #[cfg(unix)]
        let found = {
            use std::os::unix::fs::PermissionsExt;
            let p = d.join(program);
            std::fs::metadata(&p)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .then_some(p)
        };
        #[cfg(not(unix))]
        let found = ["", ".exe", ".cmd", ".bat"]
            .iter()
            .map(|ext| d.join(format!("{program}{ext}")))
            .find(|p| p.is_file());
        found
    })
}

/// The installation a program outside the system paths belongs to (`/root/.pyenv` for
/// `/root/.pyenv/shims/python3`, `/opt/node` for `/opt/node/bin/node`): readable, so the
/// runtime can load its own files. Never a directory with fewer than three components (no
/// `/`, `/root`, `/home`), where the program's own directory is used instead.
pub fn runtime_paths(program: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut consider = |p: &Path| {
        if SYSTEM_READ.iter().any(|s| p.starts_with(s)) {
            return;
        }
        let Some(dir) = p.parent() else { return };
        let prefix = match dir.file_name().and_then(|n| n.to_str()) {
            Some("bin" | "sbin" | "shims") => dir.parent().unwrap_or(dir),
            _ => dir,
        };
        let chosen = if prefix.components().count() >= 3 {
            prefix
        } else {
            dir
        };
        if chosen.components().count() >= 3 && !out.iter().any(|o: &PathBuf| o == chosen) {
            out.push(chosen.to_path_buf());
        }
    };
    if program.is_absolute() {
        consider(program);
        if let Ok(real) = std::fs::canonicalize(program) {
            consider(&real);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_prefixes() {
        assert_eq!(
            runtime_paths(Path::new("/root/.pyenv/shims/python3")),
            vec![PathBuf::from("/root/.pyenv")]
        );
        assert_eq!(
            runtime_paths(Path::new("/root/bin/tool")),
            vec![PathBuf::from("/root/bin")]
        );
        assert!(runtime_paths(Path::new("/usr/bin/python3")).is_empty());
        assert!(runtime_paths(Path::new("/x")).is_empty());
    }
}
