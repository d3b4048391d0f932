//! Resource limits of a process tool: what a tool may use (memory, CPU time, processes, open
//! files, output) and, on Linux, the `setrlimit` values the child sets before exec.

#[cfg(target_os = "linux")]
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Settings;

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

/// A `setrlimit` resource number.
#[cfg(target_os = "linux")]
pub(super) type Resource = libc::__rlimit_resource_t;

/// The five `(resource, soft, hard)` limits the child sets for `limits`. `program` picks
/// the memory limit's kind (V8 runtimes reserve address space they never touch); without a
/// pids cgroup `RLIMIT_NPROC` bounds processes.
#[cfg(target_os = "linux")]
pub(super) fn plan(
    limits: &ProcessLimits,
    program: &Path,
    has_cgroup: bool,
) -> [(Resource, u64, u64); 5] {
    let mem = limits.memory_mb.saturating_mul(1 << 20);
    let v8 = program
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| matches!(n, "node" | "nodejs" | "deno" | "bun"));
    let cpu = limits.cpu_seconds;
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
        limits.open_files,
        limits.open_files,
    );
    rlimits[3] = (libc::RLIMIT_CORE as Resource, 0, 0);
    // Without a cgroup (not root), RLIMIT_NPROC holds; as root it is ignored but harmless.
    rlimits[4] = if has_cgroup {
        (libc::RLIMIT_CORE as Resource, 0, 0)
    } else {
        (
            libc::RLIMIT_NPROC as Resource,
            limits.processes,
            limits.processes,
        )
    };
    rlimits
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
