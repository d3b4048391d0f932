//! How a [`CallContext`] is made: a top-level call's, then narrowed with the builder
//! methods; a nested call's from the enclosing one. Every context outside the manager's own
//! dispatch is made here, so a new field has one place to get its default.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{CallContext, Caller, Observer, ToolManager};

impl CallContext {
    /// The context of a top-level call to `tool_id` (or of the hook points of a subject
    /// such as `workflow:<id>`): depth 0, a fresh cancel token, no deadline, no observer.
    pub fn top(tool_id: impl Into<Arc<str>>, caller: Caller, manager: Arc<ToolManager>) -> Self {
        Self::within(tool_id, caller, manager, 0, CancellationToken::new())
    }

    /// The context of work `depth` tool calls deep that `cancel` stops, such as a workflow
    /// run's hook points (subject `workflow:<id>`) or a script node's function: no deadline,
    /// no observer.
    pub fn within(
        tool_id: impl Into<Arc<str>>,
        caller: Caller,
        manager: Arc<ToolManager>,
        depth: u32,
        cancel: CancellationToken,
    ) -> Self {
        CallContext {
            tool_id: tool_id.into(),
            caller,
            manager,
            depth,
            cancel,
            deadline: None,
            observer: None,
            call_id: None,
        }
    }

    /// The context of a call to `tool_id` made from inside this one: one level deeper,
    /// with the same caller, manager, cancel token, deadline and observer.
    pub fn nested(&self, tool_id: impl Into<Arc<str>>) -> Self {
        CallContext {
            tool_id: tool_id.into(),
            depth: self.depth + 1,
            call_id: None,
            ..self.clone()
        }
    }

    /// This context with the deadline `deadline`.
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// This context watched by `observer`.
    pub fn with_observer(mut self, observer: Observer) -> Self {
        self.observer = observer;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_top_context_narrows_and_nests() {
        let m = ToolManager::new();
        let cancel = CancellationToken::new();
        let deadline = Instant::now();
        let top = CallContext::top("workflow:w", Caller::Cli, m.clone());
        assert_eq!((&*top.tool_id, top.depth), ("workflow:w", 0));
        assert!(top.deadline.is_none() && top.observer.is_none());
        assert!(!top.cancel.is_cancelled());
        let ctx = CallContext::within("workflow:w", Caller::Cli, m.clone(), 2, cancel.clone())
            .with_deadline(Some(deadline));
        let inner = ctx.nested("a:b");
        assert_eq!((&*inner.tool_id, inner.depth), ("a:b", 3));
        assert_eq!(inner.caller, Caller::Cli);
        assert_eq!(inner.deadline, Some(deadline));
        assert!(Arc::ptr_eq(&inner.manager, &m));
        cancel.cancel();
        assert!(
            inner.cancel.is_cancelled(),
            "the token is the enclosing call's"
        );
    }
}
