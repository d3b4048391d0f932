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
];

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
