//! The seam hooks and overrides plug into: the `tools` module knows only this trait, so it
//! depends on nothing above it (the `hooks` module implements it).

use std::sync::Arc;

use serde_json::Value;

use super::{CallContext, Caller, Tool, ToolError, ToolFuture};

/// Runs around a call after its arguments passed validation: hook points, overrides,
/// auditing. Installed once per [`ToolManager`](super::ToolManager).
pub trait Interceptor: Send + Sync + 'static {
    /// Whether anything must run around a call to `tool_id`. Called on every call, so it must
    /// be cheap (an atomic load when nothing is registered).
    fn wants(&self, tool_id: &str) -> bool;

    /// Runs the call: hooks before, the tool's handler (or its overrides), hooks after.
    /// `args` has passed `tool`'s schema. The manager hands over its own reference to the
    /// interceptor, so the future can own it.
    fn intercept(self: Arc<Self>, tool: Arc<Tool>, ctx: CallContext, args: Value) -> ToolFuture;

    /// Told of a call refused before it ran (unknown tool, caller policy, depth limit,
    /// invalid arguments, already cancelled or past its deadline), so an audit sees every
    /// call that was asked for, not only those that ran. `tool_id` is the canonical id when
    /// the tool resolved, else the id as asked; `call_id` is the id of the call it came
    /// from, when it came from a parsed call. Nothing by default.
    fn refused(
        &self,
        tool_id: &str,
        caller: &Caller,
        depth: u32,
        call_id: Option<&str>,
        error: &ToolError,
    ) {
        let _ = (tool_id, caller, depth, call_id, error);
    }
}
