//! The process sandbox: running a child process under the kernel's confinement, one file per
//! concern.
//!
//! - [`confine`]: how one tool is confined ([`confine::Confinement`]) and the per-call
//!   preparation ([`confine::Prepared`]);
//! - [`support`]: what the platform offers, probed once, and the refusal rule;
//! - [`rlimits`]: [`ProcessLimits`] and the `setrlimit` plan;
//! - `landlock`, `seccomp`, `cgroup`: the Linux mechanisms; `child`: the pre-exec glue that
//!   applies them between fork and exec (Linux only; elsewhere every mechanism is missing and
//!   a tool runs only when the host allows it unconfined);
//! - [`process`]: running a process tool (JSON on stdin, the answer on stdout);
//! - [`code`]: model-written Python and JavaScript run as confined children.
//!
//! Nothing here knows plugins or scripts: it uses `tools` (handlers, errors) and `config`.

#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod child;
pub mod code;
pub mod confine;
#[cfg(target_os = "linux")]
mod landlock;
pub mod process;
pub mod rlimits;
#[cfg(target_os = "linux")]
mod seccomp;
pub mod support;

pub use rlimits::{PartialProcessLimits, ProcessLimits};
