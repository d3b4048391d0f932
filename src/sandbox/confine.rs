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

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::Settings;

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

/// The setting that lets tools run when the kernel lacks a confinement mechanism.
pub const ALLOW_UNCONFINED: &str = "process.allow_unconfined";

/// Resource limits of one process tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessLimits {
    /// Memory in MiB: the address space (`RLIMIT_AS`), or for V8 runtimes, which reserve
    /// address space they never touch, the data segment (`RLIMIT_DATA`).
    pub memory_mb: u64,
    /// CPU time in seconds (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Processes and threads at once (a pids cgroup; `RLIMIT_NPROC` when there is none).
    pub processes: u64,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Bytes on each of stdout and stderr.
    pub output_bytes: u64,
}

impl ProcessLimits {
    /// Defaults (and the host's caps unless it sets others).
    pub const DEFAULT: ProcessLimits = ProcessLimits {
        memory_mb: 512,
        cpu_seconds: 30,
        processes: 32,
        open_files: 256,
        output_bytes: 1 << 20,
    };

    /// Limits for model-written code (`CodeInterpreter:execute` in Python or JavaScript).
    pub const CODE: ProcessLimits = ProcessLimits {
        memory_mb: 256,
        cpu_seconds: 3,
        processes: 16,
        open_files: 64,
        output_bytes: 64 << 10,
    };

    /// Each limit no higher than `cap`'s.
    pub fn capped_by(self, cap: &ProcessLimits) -> ProcessLimits {
        ProcessLimits {
            memory_mb: self.memory_mb.min(cap.memory_mb),
            cpu_seconds: self.cpu_seconds.min(cap.cpu_seconds),
            processes: self.processes.min(cap.processes),
            open_files: self.open_files.min(cap.open_files),
            output_bytes: self.output_bytes.min(cap.output_bytes),
        }
    }

    /// Each limit lowered to `p`'s where it gives one (a higher value is ignored).
    pub fn lowered_by(self, p: &PartialProcessLimits) -> ProcessLimits {
        let low = |cur: u64, v: Option<u64>| v.map_or(cur, |v| v.min(cur));
        ProcessLimits {
            memory_mb: low(self.memory_mb, p.memory_mb),
            cpu_seconds: low(self.cpu_seconds, p.cpu_seconds),
            processes: low(self.processes, p.processes),
            open_files: low(self.open_files, p.open_files),
            output_bytes: low(self.output_bytes, p.output_bytes),
        }
    }

    /// The host's caps: `self`, with each `process.<limit>` setting (snake case) replacing
    /// the cap it names.
    pub(crate) fn with_settings(self, settings: &Settings) -> Result<ProcessLimits, String> {
        let mut out = self;
        for (key, slot) in [
            ("memory_mb", &mut out.memory_mb),
            ("cpu_seconds", &mut out.cpu_seconds),
            ("processes", &mut out.processes),
            ("open_files", &mut out.open_files),
            ("output_bytes", &mut out.output_bytes),
        ] {
            let full = format!("process.{key}");
            match settings.get(&full) {
                None => {}
                Some(v) => match v.as_u64() {
                    Some(n) if n > 0 => *slot = n,
                    _ => {
                        return Err(format!(
                            "setting {full} must be a positive integer, got {v}"
                        ))
                    }
                },
            }
        }
        Ok(out)
    }
}

/// Limits as written in plugin.yaml (`processLimits:`) or a tool's
/// `implementation.limits`; each may only lower the host's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(missing_docs)] // Each field mirrors the `ProcessLimits` field of the same name.
pub struct PartialProcessLimits {
    #[serde(alias = "memory_mb")]
    pub memory_mb: Option<u64>,
    #[serde(alias = "cpu_seconds")]
    pub cpu_seconds: Option<u64>,
    pub processes: Option<u64>,
    #[serde(alias = "open_files")]
    pub open_files: Option<u64>,
    #[serde(alias = "output_bytes")]
    pub output_bytes: Option<u64>,
}

impl PartialProcessLimits {
    /// Parses a written section; `null` or absent is no change. Zero is refused.
    pub(crate) fn parse(v: Option<&Value>) -> Result<PartialProcessLimits, String> {
        let p: PartialProcessLimits = match v {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| format!("invalid process limits: {e}"))?,
        };
        for (name, v) in [
            ("memoryMb", p.memory_mb),
            ("cpuSeconds", p.cpu_seconds),
            ("processes", p.processes),
            ("openFiles", p.open_files),
            ("outputBytes", p.output_bytes),
        ] {
            if v == Some(0) {
                return Err(format!("invalid process limits: {name} must be at least 1"));
            }
        }
        Ok(p)
    }
}

/// What the kernel offers, probed once per engine process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
    /// Directory under which per-call pids cgroups are made, when one is writable.
    pub pids_cgroup: Option<PathBuf>,
    /// Whether the engine runs as root (then `RLIMIT_NPROC` does not hold).
    pub root: bool,
}

/// The kernel's confinement mechanisms (probed on first use).
pub fn support() -> &'static Support {
    static S: OnceLock<Support> = OnceLock::new();
    S.get_or_init(|| {
        let s = Support::probe();
        match s.missing(false).as_slice() {
            [] => tracing::info!("process-tool confinement: {}", s.summary()),
            m => tracing::warn!(
                "process-tool confinement is incomplete: the kernel lacks {}; tools that need it are refused unless {ALLOW_UNCONFINED} = true",
                m.join(", ")
            ),
        }
        s
    })
}

impl Support {
    fn probe() -> Support {
        // SAFETY: landlock_create_ruleset with a NULL attribute, size 0 and the VERSION flag
        // only returns the ABI version (or -1); it touches no memory.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        let seccomp = std::fs::read_to_string("/proc/self/status")
            .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
            .unwrap_or(false);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        Support {
            landlock_abi: abi.max(0) as i32,
            seccomp,
            pids_cgroup: probe_pids_cgroup(),
            root,
        }
    }

    /// Mechanisms missing for a tool with (or without) network permission.
    pub fn missing(&self, network: bool) -> Vec<String> {
        let mut m = Vec::new();
        if self.landlock_abi < 1 {
            m.push("Landlock (file confinement)".to_string());
        }
        if !network && !self.seccomp {
            m.push("seccomp (refusing sockets)".to_string());
        }
        if self.root && self.pids_cgroup.is_none() {
            m.push("a writable pids cgroup (process limit as root)".to_string());
        }
        m
    }

    /// One line: what is used.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        match self.landlock_abi {
            0 => parts.push("no Landlock".to_string()),
            n => {
                let mut what = vec!["files"];
                if n >= 4 {
                    what.push("TCP");
                }
                if n >= 6 {
                    what.push("signal and abstract-socket scopes");
                }
                parts.push(format!("Landlock ABI {n} ({})", what.join(", ")));
            }
        }
        parts.push(if self.seccomp {
            "seccomp".into()
        } else {
            "no seccomp".into()
        });
        parts.push(match (&self.pids_cgroup, self.root) {
            (Some(p), _) => format!("pids cgroup under {}", p.display()),
            (None, false) => "RLIMIT_NPROC".into(),
            (None, true) => "no pids cgroup".into(),
        });
        parts.push("rlimits".into());
        parts.join(", ")
    }
}

/// Finds our pids cgroup (v1 `pids` hierarchy, or v2 with the pids controller) and checks
/// that a child cgroup can be made there.
fn probe_pids_cgroup() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut candidates = Vec::new();
    for line in mountinfo.lines() {
        // id parent major:minor root mountpoint opts... - fstype source superopts
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 5 || r.len() < 3 {
            continue;
        }
        let (root, mountpoint) = (l[3], l[4]);
        let (fstype, superopts) = (r[0], r[2]);
        let own = match fstype {
            "cgroup" if superopts.split(',').any(|o| o == "pids") => cgroups
                .lines()
                .find(|c| {
                    c.split(':')
                        .nth(1)
                        .is_some_and(|s| s.split(',').any(|x| x == "pids"))
                })
                .and_then(|c| c.splitn(3, ':').nth(2)),
            "cgroup2" => cgroups
                .lines()
                .find(|c| c.starts_with("0::"))
                .map(|c| &c[3..]),
            _ => None,
        };
        let Some(own) = own else { continue };
        let rel = own
            .strip_prefix(root)
            .unwrap_or(own)
            .trim_start_matches('/');
        let base = Path::new(mountpoint).join(rel);
        if fstype == "cgroup2" {
            let has = std::fs::read_to_string(base.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|x| x == "pids"));
            if !has {
                continue;
            }
            // Children get pids.max only when the controller is enabled for the subtree.
            let _ = std::fs::write(base.join("cgroup.subtree_control"), "+pids");
        }
        candidates.push(base);
    }
    candidates.into_iter().find(|base| {
        let probe = base.join(format!("tavern-{}-probe", std::process::id()));
        let ok = std::fs::create_dir(&probe).is_ok()
            && std::fs::write(probe.join("pids.max"), "1").is_ok();
        let _ = std::fs::remove_dir(&probe);
        ok
    })
}

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
    Landlock(#[from] landlock::RulesetError),
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
        let s = support();
        let tmp = self.temp_dirs.take()?;
        let landlock_fd = if s.landlock_abi >= 1 {
            self.ruleset(program, tmp.path())?
        } else {
            None
        };
        let seccomp = if !self.network && s.seccomp {
            Some(socket_filter().map_err(|e| ConfineError::Seccomp(e.clone()))?)
        } else {
            None
        };
        let cgroup = match &s.pids_cgroup {
            Some(base) => Some(CallCgroup::new(base, self.limits.processes)?),
            None => None,
        };
        let mem = self.limits.memory_mb.saturating_mul(1 << 20);
        let v8 = program
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| matches!(n, "node" | "nodejs" | "deno" | "bun"));
        let cpu = self.limits.cpu_seconds;
        let mut rlimits = [(0 as Resource, 0u64, 0u64); 5];
        rlimits[0] = if v8 {
            (libc::RLIMIT_DATA as Resource, mem, mem)
        } else {
            (libc::RLIMIT_AS as Resource, mem, mem)
        };
        // SIGXCPU at the soft limit, SIGKILL a second later if it is ignored.
        rlimits[1] = (libc::RLIMIT_CPU as Resource, cpu, cpu + 1);
        rlimits[2] = (
            libc::RLIMIT_NOFILE as Resource,
            self.limits.open_files,
            self.limits.open_files,
        );
        rlimits[3] = (libc::RLIMIT_CORE as Resource, 0, 0);
        // Without a cgroup (not root), RLIMIT_NPROC holds; as root it is ignored but harmless.
        rlimits[4] = if cgroup.is_none() {
            (
                libc::RLIMIT_NPROC as Resource,
                self.limits.processes,
                self.limits.processes,
            )
        } else {
            (libc::RLIMIT_CORE as Resource, 0, 0)
        };
        Ok(Prepared {
            landlock_fd,
            seccomp,
            cgroup,
            rlimits,
            tmp: Some(tmp),
        })
    }

    fn ruleset(&self, program: &Path, tmp: &Path) -> Result<Option<OwnedFd>, ConfineError> {
        // Target the newest ABI this code knows; the crate drops what the kernel lacks.
        let abi = ABI::V6;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?;
        if !self.network {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        let ruleset = ruleset.scope(Scope::from_all(abi))?;
        let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        if self.network {
            read.extend(NETWORK_READ.iter().map(PathBuf::from));
        }
        read.extend(runtime_paths(program));
        read.extend(self.plugin_dir.iter().cloned());
        read.extend(self.read.iter().cloned());
        let mut write: Vec<PathBuf> = vec![tmp.to_path_buf()];
        write.extend(self.write.iter().cloned());
        let dev = AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate;
        let created = ruleset
            .create()?
            .add_rules(path_beneath_rules(&read, AccessFs::from_read(abi)))?
            .add_rules(path_beneath_rules(SYSTEM_WRITE, dev))?
            .add_rules(path_beneath_rules(&write, AccessFs::from_all(abi)))?;
        Ok(created.into())
    }
}

/// Where a bare program name resolves on `path` (`PATH`).
pub fn which(program: &str, path: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = path?;
    std::env::split_paths(path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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

type Resource = libc::__rlimit_resource_t;

/// The seccomp program that refuses `socket(2)` for every family but `AF_UNIX` (EACCES) and
/// `io_uring_setup` (whose operations bypass seccomp) — compiled once.
fn socket_filter() -> Result<&'static seccompiler::BpfProgram, &'static String> {
    static F: OnceLock<Result<seccompiler::BpfProgram, String>> = OnceLock::new();
    F.get_or_init(|| {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule, TargetArch,
        };
        let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
        let not_unix = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?;
        let rules = [
            (
                libc::SYS_socket,
                vec![SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?],
            ),
            (libc::SYS_io_uring_setup, vec![]),
        ]
        .into_iter()
        .collect();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
            arch,
        )
        .map_err(|e| e.to_string())?;
        filter
            .try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())
    })
    .as_ref()
}

/// A per-call pids cgroup: the child joins it before exec; it is emptied and removed after.
#[derive(Debug)]
pub struct CallCgroup {
    dir: PathBuf,
    procs: OwnedFd,
}

impl CallCgroup {
    fn new(base: &Path, max: u64) -> Result<CallCgroup, ConfineError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = base.join(format!(
            "tavern-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let err = |source| ConfineError::Cgroup {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir(&dir).map_err(err)?;
        let made = (|| {
            std::fs::write(dir.join("pids.max"), max.to_string())?;
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
        })();
        match made {
            Ok(f) => Ok(CallCgroup {
                dir: dir.clone(),
                procs: f.into(),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(err(e))
            }
        }
    }

    /// How often a fork was refused for the limit.
    fn refused(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("pids.events"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("max ").map(|n| n.trim().parse().ok()))
            })
            .flatten()
            .unwrap_or(0)
    }

    /// Kills every process in the cgroup (even ones that left the process group).
    fn kill_all(&self) {
        for _ in 0..50 {
            let Ok(text) = std::fs::read_to_string(self.dir.join("cgroup.procs")) else {
                return;
            };
            let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for p in pids {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        self.kill_all();
        // Killed processes leave the cgroup once reaped; retry briefly, then leave it (an
        // empty cgroup costs nothing and the name is never reused).
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        tracing::debug!("could not remove cgroup {}", self.dir.display());
    }
}

/// Everything one call's child needs, made before fork; dropping it kills what is left in
/// the cgroup and removes the temporary directory.
#[derive(Debug)]
pub struct Prepared {
    landlock_fd: Option<OwnedFd>,
    seccomp: Option<&'static seccompiler::BpfProgram>,
    cgroup: Option<CallCgroup>,
    rlimits: [(Resource, u64, u64); 5],
    tmp: Option<PooledTmp>,
}

/// What the child does between fork and exec: plain values only.
#[derive(Clone, Copy)]
struct ChildPlan {
    cgroup_procs: i32,
    landlock: i32,
    seccomp: Option<(*const libc::sock_filter, u16)>,
    rlimits: [(Resource, u64, u64); 5],
}

// SAFETY: the filter pointer refers to a program in a process-wide static that is never
// freed; the plan is only read.
unsafe impl Send for ChildPlan {}
// SAFETY: as above; the plan is immutable.
unsafe impl Sync for ChildPlan {}

impl Prepared {
    /// The private temporary directory (read-write; `TMPDIR` and `HOME` point here).
    pub fn tmp(&self) -> &Path {
        self.tmp.as_ref().map_or(Path::new("/tmp"), |t| t.path())
    }

    /// Installs the confinement into `cmd`, to run in the child between fork and exec.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        let plan = ChildPlan {
            cgroup_procs: self.cgroup.as_ref().map_or(-1, |c| c.procs.as_raw_fd()),
            landlock: self.landlock_fd.as_ref().map_or(-1, |f| f.as_raw_fd()),
            seccomp: self.seccomp.map(|p| {
                (
                    p.as_ptr().cast::<libc::sock_filter>(),
                    p.len().min(u16::MAX as usize) as u16,
                )
            }),
            rlimits: self.rlimits,
        };
        // SAFETY: `in_child` makes only async-signal-safe system calls on values prepared
        // before fork; the fds stay open until `self` is dropped, after the spawn.
        unsafe {
            cmd.pre_exec(move || in_child(&plan));
        }
    }

    /// How often the process limit refused a fork.
    pub fn processes_refused(&self) -> u64 {
        self.cgroup.as_ref().map_or(0, CallCgroup::refused)
    }

    /// Kills every process the call left (cgroup members, whatever their process group).
    pub fn kill_all(&self) {
        if let Some(c) = &self.cgroup {
            c.kill_all();
        }
    }
}

/// Runs in the forked child. Order matters: join the cgroup while we may, lower the limits,
/// drop every capability (a root child could otherwise raise its limits back), then
/// Landlock and seccomp (both need `no_new_privs`).
fn in_child(plan: &ChildPlan) -> std::io::Result<()> {
    let err = std::io::Error::last_os_error;
    // SAFETY (whole block): raw system calls on plain values and fds prepared before fork;
    // no allocation, no locks.
    unsafe {
        if plan.cgroup_procs >= 0 && libc::write(plan.cgroup_procs, b"0".as_ptr().cast(), 1) < 0 {
            return Err(err());
        }
        for &(res, soft, hard) in &plan.rlimits {
            let r = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(res, &r) != 0 {
                return Err(err());
            }
        }
        // Bounding set first (needs CAP_SETPCAP), then the process's own sets; errors mean
        // there was nothing to drop (an unprivileged engine).
        for cap in 0..64 {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        #[repr(C)]
        struct CapHeader {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        struct CapData {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let hdr = CapHeader {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [
            CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &hdr, data.as_ptr()) != 0 {
            return Err(err());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(err());
        }
        if plan.landlock >= 0
            && libc::syscall(libc::SYS_landlock_restrict_self, plan.landlock, 0u32) != 0
        {
            return Err(err());
        }
        if let Some((filter, len)) = plan.seccomp {
            let prog = libc::sock_fprog {
                len,
                filter: filter.cast_mut(),
            };
            if libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &prog as *const libc::sock_fprog,
            ) != 0
            {
                return Err(err());
            }
        }
    }
    Ok(())
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

/// Whether a tool (with or without network) may run on a kernel offering `s`: `Ok(true)`
/// fully confined, `Ok(false)` partly (the host allowed it), `Err` refused, naming what is
/// missing.
pub(crate) fn decide(s: &Support, network: bool, allow_unconfined: bool) -> Result<bool, String> {
    let missing = s.missing(network);
    if missing.is_empty() {
        Ok(true)
    } else if allow_unconfined {
        Ok(false)
    } else {
        Err(format!(
            "cannot be confined here: the kernel lacks {}",
            missing.join(", ")
        ))
    }
}

/// Confines a plugin's process tool `spec`: the plugin's roots, network permission and
/// environment, its limits lowered from the host's caps (`caps`, then `process.*`
/// settings) by `processLimits:` and the tool's own `limits`. On refusal, the message and
/// its hint.
pub fn confine_spec(
    spec: &mut super::process::ProcessSpec,
    settings: &Settings,
    caps: &ProcessLimits,
    bind: &crate::plugins::host_services::BindContext,
    perms: &crate::plugins::permissions::ResolvedPermissions,
    tool_limits: Option<&Value>,
) -> Result<(), (String, String)> {
    let fix_settings = "fix the setting in tavern.toml".to_string();
    let caps = caps
        .with_settings(settings)
        .map_err(|e| (e, fix_settings))?;
    let plugin = PartialProcessLimits::parse(bind.process_limits.as_ref()).map_err(|e| {
        (
            format!("cannot run: plugin.yaml processLimits: {e}"),
            "known limits: memoryMb, cpuSeconds, processes, openFiles, outputBytes".to_string(),
        )
    })?;
    let tool = PartialProcessLimits::parse(tool_limits).map_err(|e| {
        (
            format!("cannot run: implementation.limits: {e}"),
            "known limits: memoryMb, cpuSeconds, processes, openFiles, outputBytes".to_string(),
        )
    })?;
    let allow_unconfined = settings.get(ALLOW_UNCONFINED) == Some(&Value::Bool(true));
    let network = perms.network
        || settings
            .get("process.network_plugins")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(bind.plugin.as_str())));
    for name in &perms.env {
        if let Ok(v) = std::env::var(name) {
            spec.env.insert(name.clone(), v);
        }
    }
    let c = for_tool(
        &bind.dir,
        &perms.fs_read,
        &perms.fs_write,
        network,
        &caps,
        &plugin,
        &tool,
        allow_unconfined,
    )
    .map_err(|e| (e, unconfined_hint()))?;
    spec.output_cap = usize::try_from(c.limits.output_bytes).unwrap_or(usize::MAX);
    spec.confine = Some(Arc::new(c));
    Ok(())
}

/// What `tavern plugin check` prints about process tools: the kernel's mechanisms once,
/// then one line per process tool with what it will be allowed.
pub fn check_lines(report: &crate::plugins::check::CheckReport) -> Vec<String> {
    let mut lines = Vec::new();
    for p in &report.plugins {
        for id in &p.tools {
            let Some(d) = report
                .tools
                .get(id)
                .ok()
                .and_then(|t| t.handler().describe_sandbox())
            else {
                continue;
            };
            let list = |v: &Value| {
                let items: Vec<&str> = v
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if items.is_empty() {
                    "none".to_string()
                } else {
                    items.join(", ")
                }
            };
            let l = &d["limits"];
            lines.push(format!(
                "process tool {id}: read {} (+ system paths); write {}; network {}; memory {} MiB, cpu {} s, processes {}, open files {}, output {} bytes, timeout {} ms{}",
                list(&d["read"]),
                list(&d["write"]),
                if d["network"] == Value::Bool(true) { "yes" } else { "no" },
                l["memoryMb"],
                l["cpuSeconds"],
                l["processes"],
                l["openFiles"],
                l["outputBytes"],
                l["timeoutMs"],
                if d["confined"] == Value::Bool(true) { "" } else { " (UNCONFINED: process.allow_unconfined)" },
            ));
        }
    }
    if !lines.is_empty() {
        let s = support();
        let head = match s.missing(false).as_slice() {
            [] => format!("process-tool confinement: {}", s.summary()),
            m => format!(
                "process-tool confinement: {}; the kernel lacks {}",
                s.summary(),
                m.join(", ")
            ),
        };
        lines.insert(0, head);
    }
    lines
}

/// The hint for a refused tool.
pub fn unconfined_hint() -> String {
    format!(
        "set `{ALLOW_UNCONFINED} = true` in tavern.toml to run such tools anyway — they could then read and write files or use the network beyond what they declare"
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_lower_and_cap() {
        let host = ProcessLimits {
            memory_mb: 256,
            ..ProcessLimits::DEFAULT
        };
        let p =
            PartialProcessLimits::parse(Some(&json!({"memoryMb": 1024, "processes": 4}))).unwrap();
        let l = ProcessLimits::DEFAULT.capped_by(&host).lowered_by(&p);
        assert_eq!(l.memory_mb, 256, "a plugin cannot raise past the host");
        assert_eq!(l.processes, 4);
        assert!(PartialProcessLimits::parse(Some(&json!({"memory": 1}))).is_err());
        assert!(PartialProcessLimits::parse(Some(&json!({"processes": 0}))).is_err());
    }

    #[test]
    fn missing_mechanisms_are_named() {
        let s = Support {
            landlock_abi: 0,
            seccomp: false,
            pids_cgroup: None,
            root: true,
        };
        let m = s.missing(false).join("; ");
        assert!(
            m.contains("Landlock") && m.contains("seccomp") && m.contains("pids"),
            "{m}"
        );
        let full = Support {
            landlock_abi: 6,
            seccomp: true,
            pids_cgroup: Some("/x".into()),
            root: true,
        };
        assert!(full.missing(false).is_empty());
        let user = Support {
            pids_cgroup: None,
            root: false,
            ..full
        };
        assert!(
            user.missing(true).is_empty(),
            "RLIMIT_NPROC holds for a user"
        );
        // A tool is refused unless the host opts out; then it runs marked incomplete.
        let err = decide(&s, false, false).unwrap_err();
        assert!(
            err.contains("cannot be confined here") && err.contains("Landlock"),
            "{err}"
        );
        assert_eq!(decide(&s, false, true), Ok(false));
        assert_eq!(decide(&full, false, false), Ok(true));
        let no_seccomp = Support {
            seccomp: false,
            ..full.clone()
        };
        assert!(decide(&no_seccomp, false, false).is_err());
        assert_eq!(
            decide(&no_seccomp, true, false),
            Ok(true),
            "with network allowed, no socket filter is needed"
        );
    }

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
