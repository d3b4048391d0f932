//! Sandbox limits: engine defaults, per-plugin lowering, host caps.
//!
//! A plugin may only *lower* a limit ([`Limits::lowered_by`]); the host may cap every limit
//! ([`Limits::capped_by`]). Both are a field-wise minimum, so the order does not matter.

use serde::{Deserialize, Serialize};

/// Resource limits for one script call (or one snippet run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// VM instructions (Lua) or operations (Rhai) per call; pattern-matching steps count too.
    pub instructions: u64,
    /// Lua heap size of the plugin's state, in bytes (Rhai: not applicable, see the size
    /// limits below).
    pub memory_bytes: usize,
    /// Wall-clock time per call, in milliseconds.
    pub wall_ms: u64,
    /// Nested function calls (Rhai `max_call_levels`; Lua: C stack guard is Lua's own).
    pub max_call_depth: usize,
    /// Nesting depth of values crossing into the host, and Rhai expression depth.
    pub max_value_depth: usize,
    /// Total size of a value crossing into the host, in bytes (strings + 16 bytes per item).
    pub max_value_bytes: usize,
    /// Largest string a script may build with `string.rep` or a Rhai string operation.
    pub max_string_bytes: usize,
    /// Bytes of `print` output kept per call (the rest is dropped and marked as truncated).
    pub max_output_bytes: usize,
    /// Largest Rhai array / map (items).
    pub max_collection_items: usize,
    /// Rhai modules a script may import.
    pub max_modules: usize,
}

impl Limits {
    /// The engine's defaults for plugin code.
    pub const fn engine_default() -> Self {
        Limits {
            instructions: 50_000_000,
            memory_bytes: 64 * 1024 * 1024,
            wall_ms: 5_000,
            max_call_depth: 200,
            max_value_depth: 64,
            max_value_bytes: 16 * 1024 * 1024,
            max_string_bytes: 16 * 1024 * 1024,
            max_output_bytes: 64 * 1024,
            max_collection_items: 1_000_000,
            max_modules: 16,
        }
    }

    /// Tight limits for code written by a model (`CodeInterpreter:execute`, script nodes).
    pub const fn strict() -> Self {
        Limits {
            instructions: 5_000_000,
            memory_bytes: 16 * 1024 * 1024,
            wall_ms: 2_000,
            max_call_depth: 100,
            max_value_depth: 32,
            max_value_bytes: 1024 * 1024,
            max_string_bytes: 1024 * 1024,
            max_output_bytes: 16 * 1024,
            max_collection_items: 100_000,
            max_modules: 0,
        }
    }

    /// These limits, with every limit the plugin set lowered to the plugin's value (a plugin
    /// can never raise a limit).
    pub fn lowered_by(&self, plugin: &PartialLimits) -> Limits {
        let mut out = *self;
        macro_rules! low {
            ($($f:ident),*) => {$(
                if let Some(v) = plugin.$f { out.$f = out.$f.min(v); }
            )*};
        }
        low!(
            instructions,
            memory_bytes,
            wall_ms,
            max_call_depth,
            max_value_depth,
            max_value_bytes,
            max_string_bytes,
            max_output_bytes,
            max_collection_items,
            max_modules
        );
        out
    }

    /// Field-wise minimum with the host's caps.
    pub fn capped_by(&self, host: &Limits) -> Limits {
        Limits {
            instructions: self.instructions.min(host.instructions),
            memory_bytes: self.memory_bytes.min(host.memory_bytes),
            wall_ms: self.wall_ms.min(host.wall_ms),
            max_call_depth: self.max_call_depth.min(host.max_call_depth),
            max_value_depth: self.max_value_depth.min(host.max_value_depth),
            max_value_bytes: self.max_value_bytes.min(host.max_value_bytes),
            max_string_bytes: self.max_string_bytes.min(host.max_string_bytes),
            max_output_bytes: self.max_output_bytes.min(host.max_output_bytes),
            max_collection_items: self.max_collection_items.min(host.max_collection_items),
            max_modules: self.max_modules.min(host.max_modules),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::engine_default()
    }
}

/// The `limits:` section of plugin.yaml: every key optional, camelCase
/// (`instructions`, `memoryBytes`, `wallMs`, `maxCallDepth`, …). Unknown keys are refused so a
/// typo does not silently leave a limit unset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(missing_docs)] // Each field mirrors the `Limits` field of the same name.
pub struct PartialLimits {
    pub instructions: Option<u64>,
    pub memory_bytes: Option<usize>,
    pub wall_ms: Option<u64>,
    pub max_call_depth: Option<usize>,
    pub max_value_depth: Option<usize>,
    pub max_value_bytes: Option<usize>,
    pub max_string_bytes: Option<usize>,
    pub max_output_bytes: Option<usize>,
    pub max_collection_items: Option<usize>,
    pub max_modules: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_can_only_lower() {
        let p: PartialLimits =
            serde_json::from_str(r#"{"instructions": 10, "wallMs": 999999999}"#).unwrap();
        let l = Limits::engine_default().lowered_by(&p);
        assert_eq!(l.instructions, 10);
        assert_eq!(l.wall_ms, Limits::engine_default().wall_ms);
    }

    #[test]
    fn host_caps() {
        let l = Limits::engine_default().capped_by(&Limits::strict());
        assert_eq!(l, Limits::strict());
    }

    #[test]
    fn unknown_key_refused() {
        assert!(serde_json::from_str::<PartialLimits>(r#"{"instrutions": 1}"#).is_err());
    }
}
