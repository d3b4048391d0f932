//! The seam hooks and overrides plug into: the `tools` module knows only this trait, so it
//! depends on nothing above it (the `hooks` module implements it).

use std::sync::Arc;

use serde_json::Value;

use super::{CallContext, Tool, ToolFuture};

/// Runs around a call after its arguments passed validation: hook points, overrides,
/// auditing. Installed once per [`ToolManager`](super::ToolManager).
pub trait Interceptor: Send + Sync + 'static {
    /// Whether anything must run around a call to `tool_id`. Called on every call, so it must
    /// be cheap (an atomic load when nothing is registered).
    fn wants(&self, tool_id: &str) -> bool;

    /// Runs the call: hooks before, the tool's handler (or its overrides), hooks after.
    /// `args` has passed `tool`'s schema.
    fn intercept(&self, tool: Arc<Tool>, ctx: CallContext, args: Value) -> ToolFuture;

    /// For downcasting to the concrete type (`crate::hooks::Hooks`).
    fn as_any(&self) -> &dyn std::any::Any;
}
