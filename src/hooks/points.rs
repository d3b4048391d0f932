//! The hook points: one table. A new point is one row of `points!` below (its name
//! constant, index constant and [`PointSpec`] come from that row) and one call of
//! `Hooks::fire` where it happens, with the row's fields in order (see docs/hooks.md).

/// One hook point.
#[derive(Debug, Clone, Copy)]
pub struct PointSpec {
    /// Its name (`tool:before-invoke`).
    pub name: &'static str,
    /// Whether handlers run before the work (and so may veto it).
    pub before: bool,
    /// The event's fields, in this order: a firing site passes one value per entry.
    pub fields: &'static [&'static str],
    /// The fields a handler may replace by returning a table of them (each one of
    /// `fields`); a returned field not listed here is ignored with a warning.
    pub replaceable: &'static [&'static str],
    /// When it fires.
    pub doc: &'static str,
}

/// Declares the points: per row a name constant, an index constant (what firing sites
/// pass) and the row of [`POINTS`].
macro_rules! points {
    ($(
        $(#[doc = $d:literal])*
        $name:ident / $ix:ident = $text:literal {
            before: $before:literal,
            fields: [$($f:literal),* $(,)?],
            replaceable: [$($r:literal),* $(,)?],
            doc: $doc:literal $(,)?
        }
    )*) => {
        $( $(#[doc = $d])* pub const $name: &str = $text; )*

        /// Every hook point.
        pub const POINTS: &[PointSpec] = &[$(PointSpec {
            name: $name,
            before: $before,
            fields: &[$($f),*],
            replaceable: &[$($r),*],
            doc: $doc,
        }),*];

        $(
            #[doc = concat!("Index of [`", stringify!($name), "`] in [`POINTS`].")]
            pub(crate) const $ix: usize = const_index($name);
        )*
    };
}

points! {
    /// Fired after validation, before the tool's handler.
    TOOL_BEFORE / TOOL_BEFORE_IX = "tool:before-invoke" {
        before: true,
        fields: ["tool", "args", "caller"],
        replaceable: ["args"],
        doc: "after the arguments passed the tool's schema, before its handler runs",
    }
    /// Fired after the tool's handler returned.
    TOOL_AFTER / TOOL_AFTER_IX = "tool:after-invoke" {
        before: false,
        fields: ["tool", "args", "caller", "ok", "result", "error", "elapsed_ms"],
        replaceable: ["result"],
        doc: "after the tool's handler returned (or failed)",
    }
    /// Fired before a workflow run starts.
    WORKFLOW_BEFORE / WORKFLOW_BEFORE_IX = "workflow:before-execute" {
        before: true,
        fields: ["workflow", "inputs", "caller"],
        replaceable: ["inputs"],
        doc: "before a workflow run starts (CLI, tool call, agent or host)",
    }
    /// Fired when a workflow run ended.
    WORKFLOW_AFTER / WORKFLOW_AFTER_IX = "workflow:after-execute" {
        before: false,
        fields: ["workflow", "inputs", "caller", "outputs", "status"],
        replaceable: ["outputs"],
        doc: "after a workflow run ended, whatever its status",
    }
    /// Fired before a node of a workflow runs.
    NODE_BEFORE / NODE_BEFORE_IX = "node:before-execute" {
        before: true,
        fields: ["workflow", "node", "type", "inputs"],
        replaceable: ["inputs"],
        doc: "before one node of a workflow runs",
    }
    /// Fired after a node of a workflow ran.
    NODE_AFTER / NODE_AFTER_IX = "node:after-execute" {
        before: false,
        fields: ["workflow", "node", "type", "inputs", "outputs"],
        replaceable: ["outputs"],
        doc: "after one node of a workflow succeeded",
    }
    /// Fired once per plugin, after it loaded.
    PLUGIN_LOADED / PLUGIN_LOADED_IX = "plugin:loaded" {
        before: false,
        fields: ["plugin", "tools", "nodes", "workflows"],
        replaceable: [],
        doc: "once per plugin, after every plugin loaded (in load order)",
    }
    /// Fired once, when the engine is built.
    ENGINE_READY / ENGINE_READY_IX = "engine:ready" {
        before: false,
        fields: ["tools", "plugins", "workflows"],
        replaceable: [],
        doc: "once, when the engine is built and every power-user script loaded",
    }
    /// Fired by the agent runtime before each deliberation workflow run.
    AGENT_BEFORE_DELIBERATE / AGENT_BEFORE_DELIBERATE_IX = "agent:before-deliberate" {
        before: true,
        fields: ["agent", "turn", "inputs"],
        replaceable: ["inputs"],
        doc: "before an agent's deliberation workflow runs (a veto fails the turn)",
    }
    /// Fired by the agent runtime after the model's output was read, before its calls run.
    AGENT_AFTER_PARSE / AGENT_AFTER_PARSE_IX = "agent:after-parse" {
        before: true,
        fields: ["agent", "turn", "output", "response_text", "calls"],
        replaceable: [],
        doc: "after an agent's output was read, before its calls run (a veto refuses the calls not yet started)",
    }
}

/// The position of point `name` (its bare form) in [`POINTS`]: the index of the hook
/// registry's per-point lists.
#[inline]
pub(crate) fn index(name: &str) -> Option<usize> {
    POINTS
        .iter()
        .position(|p| std::ptr::eq(p.name, name) || p.name == name)
}

const fn const_index(name: &str) -> usize {
    let mut i = 0;
    while i < POINTS.len() {
        let (a, b) = (POINTS[i].name.as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("not a hook point")
}

/// The point named `name`, accepting the seed's written form `hook:client:<point>` (and
/// `hook:<point>`) as well as the bare point.
pub fn point(name: &str) -> Option<&'static PointSpec> {
    let bare = name
        .strip_prefix("hook:client:")
        .or_else(|| name.strip_prefix("hook:"))
        .unwrap_or(name);
    POINTS.iter().find(|p| p.name == bare)
}

/// Every point name, for error messages.
pub fn names() -> String {
    POINTS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_consistent() {
        for (i, p) in POINTS.iter().enumerate() {
            assert_eq!(index(p.name), Some(i), "{}", p.name);
            // Firing hands replacements back by position: each is a field of the event.
            for r in p.replaceable {
                assert!(p.fields.contains(r), "{}: '{r}' is not a field", p.name);
            }
            assert!(p.fields.len() <= 64, "{}: Replaced holds 64 fields", p.name);
        }
        assert_eq!(POINTS[TOOL_AFTER_IX].name, TOOL_AFTER);
        assert_eq!(POINTS[AGENT_AFTER_PARSE_IX].name, AGENT_AFTER_PARSE);
        assert_eq!(
            point("hook:client:node:before-execute").map(|p| p.name),
            Some(NODE_BEFORE)
        );
    }
}
