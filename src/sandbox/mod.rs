//! The process sandbox: confinement of child processes (Landlock, seccomp, rlimits, pids
//! cgroups), running process tools, and running model-written code.

pub mod code;
pub mod confine;
pub mod process;
