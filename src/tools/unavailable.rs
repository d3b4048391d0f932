//! Tools that exist on disk but failed to load. A call to one is `tool_unavailable` with the
//! load problem ("failed to load: plugins/Dice/main.lua:8: …"), not `unknown_tool`, so a
//! caller or model learns what to fix instead of that the tool does not exist.

use super::{Registry, ToolError, ToolManager};

/// What a failure covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pattern {
    /// One tool id (`Dice:roll`, `workflow:skill_check`).
    Tool(String),
    /// Every id in a namespace (`Dice:*`): the plugin did not load, or loaded in part.
    Namespace(String),
}

impl ToolManager {
    /// Records that tool `id` exists but failed to load because of `reason`.
    pub fn mark_unavailable(&self, id: impl Into<String>, reason: impl Into<String>) {
        self.write()
            .unavailable
            .push((Pattern::Tool(id.into()), reason.into()));
    }

    /// Records that plugin namespace `ns` failed to load (wholly or in part) because of
    /// `reason`: a call to any unregistered `ns:…` id reports it.
    pub fn mark_namespace_unavailable(&self, ns: impl Into<String>, reason: impl Into<String>) {
        self.write()
            .unavailable
            .push((Pattern::Namespace(ns.into()), reason.into()));
    }
}

impl Registry {
    /// The `tool_unavailable` error for an id that is not registered but failed to load.
    pub(super) fn unavailable_error(&self, id: &str) -> Option<ToolError> {
        let id = id.trim();
        // `Dice.roll` is the seeds' spelling of `Dice:roll`.
        let canon = if id.contains(':') {
            id.to_string()
        } else {
            id.replacen('.', ":", 1)
        };
        let ns = canon.split_once(':').map(|(n, _)| n);
        // `node:Dice:Advantage`, the tool of a node type of plugin `Dice`.
        let node_ns = canon
            .strip_prefix("node:")
            .and_then(|t| t.split_once(':'))
            .map(|(n, _)| n);
        let hit = |p: &Pattern| match p {
            Pattern::Tool(t) => *t == canon,
            Pattern::Namespace(n) => Some(n.as_str()) == ns || Some(n.as_str()) == node_ns,
        };
        // An exact tool beats its namespace.
        let found = self
            .unavailable
            .iter()
            .find(|(p, _)| matches!(p, Pattern::Tool(_)) && hit(p))
            .or_else(|| self.unavailable.iter().find(|(p, _)| hit(p)))?;
        Some(ToolError::Unavailable {
            tool: canon,
            reason: found.1.clone(),
        })
    }
}
