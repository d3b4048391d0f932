//! The pre-exec glue: everything the kernel confinement of one call needs, made before fork
//! (Landlock ruleset fd, seccomp program, pids cgroup, rlimits), and the few system calls the
//! child makes with it between fork and exec (async-signal-safe: no allocation, no locks).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use super::cgroup::CallCgroup;
use super::confine::{ConfineError, Confinement};
use super::rlimits::Resource;
use super::support::support;

/// What one call's child gets from the kernel, made before fork; dropping it kills what is
/// left in the cgroup.
#[derive(Debug)]
pub(super) struct Kernel {
    landlock_fd: Option<OwnedFd>,
    seccomp: Option<&'static seccompiler::BpfProgram>,
    cgroup: Option<CallCgroup>,
    rlimits: [(Resource, u64, u64); 5],
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

impl Kernel {
    /// Builds what the kernel offers for `c` running `program`, with `tmp` writable.
    pub(super) fn prepare(
        c: &Confinement,
        program: &Path,
        tmp: &Path,
    ) -> Result<Kernel, ConfineError> {
        let s = support();
        let landlock_fd = if s.landlock_abi >= 1 {
            super::landlock::ruleset(c, program, tmp)?
        } else {
            None
        };
        let seccomp = if !c.network && s.seccomp {
            Some(super::seccomp::socket_filter().map_err(|e| ConfineError::Seccomp(e.clone()))?)
        } else {
            None
        };
        let cgroup = match &s.pids_cgroup {
            Some(base) => Some(CallCgroup::new(base, c.limits.processes)?),
            None => None,
        };
        let rlimits = super::rlimits::plan(&c.limits, program, cgroup.is_some());
        Ok(Kernel {
            landlock_fd,
            seccomp,
            cgroup,
            rlimits,
        })
    }

    /// Installs the confinement into `cmd`, to run in the child between fork and exec.
    pub(super) fn apply(&self, cmd: &mut tokio::process::Command) {
        let plan = ChildPlan {
            cgroup_procs: self.cgroup.as_ref().map_or(-1, |c| c.procs_fd()),
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
    pub(super) fn processes_refused(&self) -> u64 {
        self.cgroup.as_ref().map_or(0, CallCgroup::refused)
    }

    /// Kills every process the call left (cgroup members, whatever their process group).
    pub(super) fn kill_all(&self) {
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
