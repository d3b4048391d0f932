//! The hook points: one table. A new point is one row of `points!` below (its name
//! constant, index constant, [`PointSpec`] and typed event struct come from that row) and
//! one call of its event's `fire` where it happens (see docs/hooks.md). The event structs
//! are the only way to fire a point from outside `hooks`: `Hooks::fire` and the positional
//! `Field`s it takes are private to this module.

use serde_json::Value;

use super::fire::{Field, Replaced};
use super::{Handlers, Hooks};
use crate::tools::{CallContext, ToolError};

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

/// Declares the points: per row a name constant, an index constant, the row of [`POINTS`]
/// and the point's typed event (its struct, one field per entry of `fields`, and its
/// firing functions), so a firing site builds the event by name and cannot pass a field of
/// the wrong kind, in the wrong place, or one too few.
///
/// A field's kind says how it goes into the event and comes back:
/// - `Str` (`&str`) and `Display` (`&dyn Display`, the caller): written as a string;
/// - `Value`: moved into the event and back out: after firing it holds the event's value
///   (a handler's replacement, or the value as it went in);
/// - `Maybe` (`Option<Value>`): `None` is not part of this event (`tool:after-invoke` has
///   `result` or `error`); after firing it is `Some` when it was given or a handler set it.
macro_rules! points {
    ($(
        $(#[doc = $d:literal])*
        $name:ident / $ix:ident / $ev:ident $(<$lt:lifetime>)? = $text:literal {
            before: $before:literal,
            fields: [$($f:literal $fid:ident: $kind:ident($ty:ty)),* $(,)?],
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

            #[doc = concat!("The event of `", $text, "` (", $doc, "), field by field as its row says.")]
            pub(crate) struct $ev $(<$lt>)? {
                $(
                    #[doc = concat!("`", $f, "` (", stringify!($kind), ").")]
                    pub(crate) $fid: $ty,
                )*
            }

            impl $(<$lt>)? $ev $(<$lt>)? {
                /// The field names, in the row's order.
                #[cfg(test)]
                pub(crate) const FIELDS: &'static [&'static str] = &[$(stringify!($fid)),*];

                #[doc = concat!("Fires `", $text, "` with this event (see `Hooks::fire`); its `Value` fields hold the event's values afterwards, replaced or not, vetoed or not.")]
                // Generated for every point; a point fired only over a snapshot (`node:before-execute`) does not use it.
                #[allow(dead_code)]
                pub(crate) async fn fire(
                    &mut self,
                    hooks: &Hooks,
                    ctx: &CallContext,
                ) -> Result<Replaced, ToolError> {
                    let mut fields = [$(event_field!(in $kind self.$fid)),*];
                    let fired = hooks.fire($ix, &mut fields, ctx).await;
                    let [$($fid),*] = &mut fields;
                    $( event_field!(out $kind self.$fid, $fid); )*
                    fired
                }

                #[doc = concat!("[`", stringify!($ev), "::fire`] over `handlers`, a snapshot of the point's handlers taken earlier.")]
                // Generated for every point; only a caller that looks at the handlers first uses it.
                #[allow(dead_code)]
                pub(crate) async fn fire_over(
                    &mut self,
                    hooks: &Hooks,
                    handlers: Handlers,
                    ctx: &CallContext,
                ) -> Result<Replaced, ToolError> {
                    let mut fields = [$(event_field!(in $kind self.$fid)),*];
                    let fired = hooks.fire_over($ix, handlers, &mut fields, ctx).await;
                    let [$($fid),*] = &mut fields;
                    $( event_field!(out $kind self.$fid, $fid); )*
                    fired
                }
            }
        )*

        #[cfg(test)]
        /// Each point's typed event and its row: (row name, the struct's field names).
        pub(crate) const EVENT_FIELDS: &[(&str, &[&str])] = &[$(($text, $ev::FIELDS)),*];
    };
}

/// How a typed event's field goes into the event (`in`) and comes back (`out`).
macro_rules! event_field {
    (in Str $v:expr) => {
        Field::Str($v)
    };
    (in Display $v:expr) => {
        Field::Display($v)
    };
    (in Value $v:expr) => {
        Field::Value(std::mem::take(&mut $v))
    };
    (in Maybe $v:expr) => {
        $v.take().map_or(Field::Absent, Field::Value)
    };
    (out Str $v:expr, $f:ident) => {
        let _ = $f;
    };
    (out Display $v:expr, $f:ident) => {
        let _ = $f;
    };
    (out Value $v:expr, $f:ident) => {
        $v = $f.take();
    };
    (out Maybe $v:expr, $f:ident) => {
        $v = match $f {
            Field::Value(v) => Some(std::mem::take(v)),
            _ => None,
        };
    };
}

points! {
    /// Fired after validation, before the tool's handler.
    TOOL_BEFORE / TOOL_BEFORE_IX / ToolBefore<'a> = "tool:before-invoke" {
        before: true,
        fields: [
            "tool" tool: Str(&'a str),
            "args" args: Value(Value),
            "caller" caller: Display(&'a (dyn std::fmt::Display + Sync)),
        ],
        replaceable: ["args"],
        doc: "after the arguments passed the tool's schema, before its handler runs",
    }
    /// Fired after the tool's handler returned.
    TOOL_AFTER / TOOL_AFTER_IX / ToolAfter<'a> = "tool:after-invoke" {
        before: false,
        fields: [
            "tool" tool: Str(&'a str),
            "args" args: Value(Value),
            "caller" caller: Display(&'a (dyn std::fmt::Display + Sync)),
            "ok" ok: Value(Value),
            "result" result: Maybe(Option<Value>),
            "error" error: Maybe(Option<Value>),
            "elapsed_ms" elapsed_ms: Value(Value),
        ],
        replaceable: ["result"],
        doc: "after the tool's handler returned (or failed)",
    }
    /// Fired before a workflow run starts.
    WORKFLOW_BEFORE / WORKFLOW_BEFORE_IX / WorkflowBefore<'a> = "workflow:before-execute" {
        before: true,
        fields: [
            "workflow" workflow: Str(&'a str),
            "inputs" inputs: Value(Value),
            "caller" caller: Display(&'a (dyn std::fmt::Display + Sync)),
        ],
        replaceable: ["inputs"],
        doc: "before a workflow run starts (CLI, tool call, agent or host)",
    }
    /// Fired when a workflow run ended.
    WORKFLOW_AFTER / WORKFLOW_AFTER_IX / WorkflowAfter<'a> = "workflow:after-execute" {
        before: false,
        fields: [
            "workflow" workflow: Str(&'a str),
            "inputs" inputs: Value(Value),
            "caller" caller: Display(&'a (dyn std::fmt::Display + Sync)),
            "outputs" outputs: Value(Value),
            "status" status: Value(Value),
        ],
        replaceable: ["outputs"],
        doc: "after a workflow run ended, whatever its status",
    }
    /// Fired before a node of a workflow runs.
    NODE_BEFORE / NODE_BEFORE_IX / NodeBefore<'a> = "node:before-execute" {
        before: true,
        fields: [
            "workflow" workflow: Str(&'a str),
            "node" node: Str(&'a str),
            "type" node_type: Str(&'a str),
            "inputs" inputs: Value(Value),
        ],
        replaceable: ["inputs"],
        doc: "before one node of a workflow runs",
    }
    /// Fired after a node of a workflow ran.
    NODE_AFTER / NODE_AFTER_IX / NodeAfter<'a> = "node:after-execute" {
        before: false,
        fields: [
            "workflow" workflow: Str(&'a str),
            "node" node: Str(&'a str),
            "type" node_type: Str(&'a str),
            "inputs" inputs: Value(Value),
            "outputs" outputs: Value(Value),
        ],
        replaceable: ["outputs"],
        doc: "after one node of a workflow succeeded",
    }
    /// Fired once per plugin, after it loaded.
    PLUGIN_LOADED / PLUGIN_LOADED_IX / PluginLoaded<'a> = "plugin:loaded" {
        before: false,
        fields: [
            "plugin" plugin: Str(&'a str),
            "tools" tools: Value(Value),
            "nodes" nodes: Value(Value),
            "workflows" workflows: Value(Value),
        ],
        replaceable: [],
        doc: "once per plugin, after every plugin loaded (in load order)",
    }
    /// Fired once, when the engine is built.
    ENGINE_READY / ENGINE_READY_IX / EngineReady = "engine:ready" {
        before: false,
        fields: [
            "tools" tools: Value(Value),
            "plugins" plugins: Value(Value),
            "workflows" workflows: Value(Value),
        ],
        replaceable: [],
        doc: "once, when the engine is built and every power-user script loaded",
    }
    /// Fired by the agent runtime before each deliberation workflow run.
    AGENT_BEFORE_DELIBERATE / AGENT_BEFORE_DELIBERATE_IX / AgentBeforeDeliberate<'a> = "agent:before-deliberate" {
        before: true,
        fields: [
            "agent" agent: Str(&'a str),
            "turn" turn: Value(Value),
            "inputs" inputs: Value(Value),
        ],
        replaceable: ["inputs"],
        doc: "before an agent's deliberation workflow runs (a veto fails the turn)",
    }
    /// Fired by the agent runtime after the model's output was read, before its calls run.
    AGENT_AFTER_PARSE / AGENT_AFTER_PARSE_IX / AgentAfterParse<'a> = "agent:after-parse" {
        before: true,
        fields: [
            "agent" agent: Str(&'a str),
            "turn" turn: Value(Value),
            "output" output: Str(&'a str),
            "response_text" response_text: Str(&'a str),
            "calls" calls: Value(Value),
        ],
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
        // Each typed event has the row's fields, in its order (`type` is `node_type`).
        assert_eq!(EVENT_FIELDS.len(), POINTS.len());
        for ((name, fields), p) in EVENT_FIELDS.iter().zip(POINTS) {
            assert_eq!(*name, p.name);
            let fields: Vec<&str> = fields
                .iter()
                .map(|f| if *f == "node_type" { "type" } else { f })
                .collect();
            assert_eq!(fields, p.fields, "{name}");
        }
        assert_eq!(POINTS[AGENT_AFTER_PARSE_IX].name, AGENT_AFTER_PARSE);
        assert_eq!(
            point("hook:client:node:before-execute").map(|p| p.name),
            Some(NODE_BEFORE)
        );
    }
}
