//! The hook points: one table, so a new point (the agent loop's `agent:*`) is one row.

/// One hook point.
#[derive(Debug, Clone, Copy)]
pub struct PointSpec {
    /// Its name (`tool:before-invoke`).
    pub name: &'static str,
    /// Whether handlers run before the work (and so may veto it).
    pub before: bool,
    /// The event's fields, as documented.
    pub fields: &'static [&'static str],
    /// The fields a handler may replace by returning a table of them.
    pub replaceable: &'static [&'static str],
    /// When it fires.
    pub doc: &'static str,
}

/// Fired after validation, before the tool's handler.
pub const TOOL_BEFORE: &str = "tool:before-invoke";
/// Fired after the tool's handler returned.
pub const TOOL_AFTER: &str = "tool:after-invoke";
/// Fired before a workflow run starts.
pub const WORKFLOW_BEFORE: &str = "workflow:before-execute";
/// Fired when a workflow run ended.
pub const WORKFLOW_AFTER: &str = "workflow:after-execute";
/// Fired before a node of a workflow runs.
pub const NODE_BEFORE: &str = "node:before-execute";
/// Fired after a node of a workflow ran.
pub const NODE_AFTER: &str = "node:after-execute";
/// Fired once per plugin, after it loaded.
pub const PLUGIN_LOADED: &str = "plugin:loaded";
/// Fired once, when the engine is built.
pub const ENGINE_READY: &str = "engine:ready";

/// Fired by the agent runtime before each deliberation workflow run.
pub const AGENT_BEFORE_DELIBERATE: &str = "agent:before-deliberate";
/// Fired by the agent runtime after the model's output was read, before its calls run.
pub const AGENT_AFTER_PARSE: &str = "agent:after-parse";

/// Every hook point.
pub const POINTS: &[PointSpec] = &[
    PointSpec {
        name: TOOL_BEFORE,
        before: true,
        fields: &["tool", "args", "caller"],
        replaceable: &["args"],
        doc: "after the arguments passed the tool's schema, before its handler runs",
    },
    PointSpec {
        name: TOOL_AFTER,
        before: false,
        fields: &[
            "tool",
            "args",
            "caller",
            "ok",
            "result",
            "error",
            "elapsed_ms",
        ],
        replaceable: &["result"],
        doc: "after the tool's handler returned (or failed)",
    },
    PointSpec {
        name: WORKFLOW_BEFORE,
        before: true,
        fields: &["workflow", "inputs", "caller"],
        replaceable: &["inputs"],
        doc: "before a workflow run starts (CLI, tool call, agent or host)",
    },
    PointSpec {
        name: WORKFLOW_AFTER,
        before: false,
        fields: &["workflow", "inputs", "caller", "outputs", "status"],
        replaceable: &["outputs"],
        doc: "after a workflow run ended, whatever its status",
    },
    PointSpec {
        name: NODE_BEFORE,
        before: true,
        fields: &["workflow", "node", "type", "inputs"],
        replaceable: &["inputs"],
        doc: "before one node of a workflow runs",
    },
    PointSpec {
        name: NODE_AFTER,
        before: false,
        fields: &["workflow", "node", "type", "inputs", "outputs"],
        replaceable: &["outputs"],
        doc: "after one node of a workflow succeeded",
    },
    PointSpec {
        name: PLUGIN_LOADED,
        before: false,
        fields: &["plugin", "tools", "nodes", "workflows"],
        replaceable: &[],
        doc: "once per plugin, after every plugin loaded (in load order)",
    },
    PointSpec {
        name: ENGINE_READY,
        before: false,
        fields: &["tools", "plugins", "workflows"],
        replaceable: &[],
        doc: "once, when the engine is built and every power-user script loaded",
    },
    PointSpec {
        name: AGENT_BEFORE_DELIBERATE,
        before: true,
        fields: &["agent", "turn", "inputs"],
        replaceable: &["inputs"],
        doc: "before an agent's deliberation workflow runs (a veto fails the turn)",
    },
    PointSpec {
        name: AGENT_AFTER_PARSE,
        before: true,
        fields: &["agent", "turn", "output", "response_text", "calls"],
        replaceable: &[],
        doc: "after an agent's output was read, before its calls run (a veto refuses the calls not yet started)",
    },
];

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

/// Index of [`TOOL_BEFORE`] in [`POINTS`].
pub(crate) const TOOL_BEFORE_IX: usize = const_index(TOOL_BEFORE);
/// Index of [`TOOL_AFTER`] in [`POINTS`].
pub(crate) const TOOL_AFTER_IX: usize = const_index(TOOL_AFTER);
/// Index of [`NODE_BEFORE`] in [`POINTS`].
pub(crate) const NODE_BEFORE_IX: usize = const_index(NODE_BEFORE);
/// Index of [`NODE_AFTER`] in [`POINTS`].
pub(crate) const NODE_AFTER_IX: usize = const_index(NODE_AFTER);

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
