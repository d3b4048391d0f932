//! Overrides (layer 3): a stack of handlers per tool; the top one runs, `next` calls the one
//! below it, and the bottom of the stack is the tool's own handler.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::Hooks;
use crate::tools::{CallContext, KeyMatching, Tool, ToolError, ToolFuture};

/// An override: replaces a tool, and may call what was there before through `next`.
pub trait OverrideHandler: Send + Sync + 'static {
    /// Runs in place of the tool. `args` passed the tool's schema.
    fn call(&self, args: Value, ctx: CallContext, next: Next) -> ToolFuture;
}

struct FnOverride<F>(F);

impl<F, Fut> OverrideHandler for FnOverride<F>
where
    F: Fn(Value, CallContext, Next) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn call(&self, args: Value, ctx: CallContext, next: Next) -> ToolFuture {
        Box::pin((self.0)(args, ctx, next))
    }
}

struct OvEntry {
    owner: String,
    handler: Arc<dyn OverrideHandler>,
}

/// What was there before an override: call it to wrap rather than replace.
#[derive(Clone)]
pub struct Next {
    tool: Arc<Tool>,
    stack: Arc<[Arc<OvEntry>]>,
    /// How many stack entries lie below (0: the tool's own handler).
    below: usize,
}

impl std::fmt::Debug for Next {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next")
            .field("tool", &self.tool.id())
            .field("below", &self.below)
            .finish()
    }
}

impl Next {
    /// Calls the next override down (or the tool itself); `args` pass the schema again.
    pub fn call(&self, args: Value, ctx: CallContext) -> ToolFuture {
        let args = match self.tool.prepare(args, KeyMatching::Loose) {
            Ok(a) => a,
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        self.call_prepared(args, ctx)
    }

    fn call_prepared(&self, args: Value, ctx: CallContext) -> ToolFuture {
        if self.below == 0 {
            return self.tool.handler().invoke(ctx, args);
        }
        let e = self.stack[self.below - 1].clone();
        let next = Next {
            tool: self.tool.clone(),
            stack: self.stack.clone(),
            below: self.below - 1,
        };
        tracing::debug!(target: "tavern::audit", tool = %self.tool.id(), owner = %e.owner,
            "override runs");
        e.handler.call(args, ctx, next)
    }

    /// The tool's canonical id.
    pub fn tool_id(&self) -> &str {
        self.tool.id()
    }
}

/// One override, as listings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideInfo {
    /// The tool.
    pub tool: String,
    /// Owners, bottom of the stack first.
    pub owners: Vec<String>,
}

#[derive(Default)]
pub(super) struct Overrides {
    stacks: RwLock<HashMap<String, Arc<[Arc<OvEntry>]>>>,
    count: AtomicUsize,
}

impl Overrides {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<[Arc<OvEntry>]>>> {
        self.stacks.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn has(&self, tool: &str) -> bool {
        self.count.load(Ordering::Acquire) != 0 && self.read().contains_key(tool)
    }

    pub(super) fn top_owner(&self, tool: &str) -> Option<String> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.read()
            .get(tool)
            .and_then(|s| s.last())
            .map(|e| e.owner.clone())
    }

    pub(super) fn run(&self, tool: &Arc<Tool>, ctx: CallContext, args: Value) -> ToolFuture {
        let stack = if self.count.load(Ordering::Acquire) == 0 {
            None
        } else {
            self.read().get(tool.id()).cloned()
        };
        match stack {
            None => tool.handler().invoke(ctx, args),
            Some(stack) => Next {
                tool: tool.clone(),
                below: stack.len(),
                stack,
            }
            .call_prepared(args, ctx),
        }
    }
}

impl Hooks {
    /// Puts `handler` on top of `tool`'s override stack (a canonical tool id), on behalf of
    /// `owner`. Permission checks are the caller's.
    pub fn override_tool(&self, tool: &str, owner: &str, handler: Arc<dyn OverrideHandler>) {
        let mut stacks = self
            .overrides
            .stacks
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<Arc<OvEntry>> = stacks.get(tool).map(|s| s.to_vec()).unwrap_or_default();
        list.push(Arc::new(OvEntry {
            owner: owner.to_string(),
            handler,
        }));
        stacks.insert(tool.to_string(), list.into());
        self.overrides.count.fetch_add(1, Ordering::Release);
        tracing::info!(target: "tavern::audit", tool, owner, "override installed");
    }

    /// Overrides `tool` with an async Rust closure (owner `host`).
    pub fn override_fn<F, Fut>(&self, tool: &str, f: F)
    where
        F: Fn(Value, CallContext, Next) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.override_tool(tool, "host", Arc::new(FnOverride(f)));
    }

    /// Who overrides `tool`, bottom of the stack first (empty when nobody does).
    pub fn overridden_by(&self, tool: &str) -> Vec<String> {
        self.overrides
            .read()
            .get(tool)
            .map(|s| s.iter().map(|e| e.owner.clone()).collect())
            .unwrap_or_default()
    }

    /// Every overridden tool.
    pub fn overrides(&self) -> Vec<OverrideInfo> {
        let mut out: Vec<OverrideInfo> = self
            .overrides
            .read()
            .iter()
            .map(|(t, s)| OverrideInfo {
                tool: t.clone(),
                owners: s.iter().map(|e| e.owner.clone()).collect(),
            })
            .collect();
        out.sort_by(|a, b| a.tool.cmp(&b.tool));
        out
    }
}
