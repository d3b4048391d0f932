//! What the platform offers for confinement, probed once: the Landlock ABI, seccomp, a
//! writable pids cgroup, whether the engine runs as root; and the rule that refuses a tool
//! whose confinement is incomplete unless the host allows it.
//!
//! Only Linux has these mechanisms; elsewhere every one is missing, so process tools run only
//! when the host sets `process.allow_unconfined = true`.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The setting that lets tools run when the kernel lacks a confinement mechanism.
pub const ALLOW_UNCONFINED: &str = "process.allow_unconfined";

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
    #[cfg(target_os = "linux")]
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
            pids_cgroup: super::cgroup::probe_pids_cgroup(),
            root,
        }
    }

    /// Elsewhere there is no Landlock, seccomp or cgroup.
    #[cfg(not(target_os = "linux"))]
    fn probe() -> Support {
        Support {
            landlock_abi: 0,
            seccomp: false,
            pids_cgroup: None,
            root: false,
        }
    }

    /// Mechanisms missing for a tool with (or without) network permission.
    pub fn missing(&self, network: bool) -> Vec<String> {
        let mut m = Vec::new();
        if cfg!(not(target_os = "linux")) {
            m.push(format!(
                "process confinement (Landlock, seccomp and cgroups are Linux-only; this is {})",
                std::env::consts::OS
            ));
            return m;
        }
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

/// Whether a tool (with or without network) may run on a kernel offering `s`: `Ok(true)`
/// fully confined, `Ok(false)` partly (the host allowed it), `Err` refused, naming what is
/// missing.
pub fn decide(s: &Support, network: bool, allow_unconfined: bool) -> Result<bool, String> {
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

/// The hint for a refused tool.
pub fn unconfined_hint() -> String {
    format!(
        "set `{ALLOW_UNCONFINED} = true` in tavern.toml to run such tools anyway — they could then read and write files or use the network beyond what they declare"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
