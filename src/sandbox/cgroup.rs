//! Per-call pids cgroups: the number of processes a tool may run at once holds for root too
//! (root ignores `RLIMIT_NPROC`), and everything a call started can be killed after it,
//! whatever its process group.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::confine::ConfineError;

/// Finds our pids cgroup (v1 `pids` hierarchy, or v2 with the pids controller) and checks
/// that a child cgroup can be made there.
pub(super) fn probe_pids_cgroup() -> Option<PathBuf> {
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

/// A per-call pids cgroup: the child joins it before exec; it is emptied and removed after.
#[derive(Debug)]
pub struct CallCgroup {
    dir: PathBuf,
    procs: OwnedFd,
}

impl CallCgroup {
    /// The open `cgroup.procs` file the child writes itself into.
    pub(super) fn procs_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.procs.as_raw_fd()
    }

    pub(super) fn new(base: &Path, max: u64) -> Result<CallCgroup, ConfineError> {
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
    pub(super) fn refused(&self) -> u64 {
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
    pub(super) fn kill_all(&self) {
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
