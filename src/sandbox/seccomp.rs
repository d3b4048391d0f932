//! The seccomp socket filter: a process tool without `permissions.network` may open only
//! Unix sockets.

use std::sync::OnceLock;

/// The seccomp program that refuses `socket(2)` for every family but `AF_UNIX` (EACCES) and
/// `io_uring_setup` (whose operations bypass seccomp) — compiled once.
pub(super) fn socket_filter() -> Result<&'static seccompiler::BpfProgram, &'static String> {
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
