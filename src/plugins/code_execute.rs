//! Host service `code.execute`: runs model-written Lua or Rhai in a fresh sandbox with strict
//! limits (seed 001 §4.3, `CodeInterpreter:execute`).

use std::sync::Arc;

use super::host_services::{HostServices, ServiceFactory};
use crate::tools::{CallContext, ToolError, ToolFuture, ToolHandler};
use serde_json::Value;

/// Name of the service.
pub const NAME: &str = "code.execute";

struct CodeExecute;

impl ToolHandler for CodeExecute {
    fn invoke(&self, ctx: CallContext, _args: Value) -> ToolFuture {
        Box::pin(async move {
            Err(ToolError::failed(
                ctx.tool_id,
                "code.execute is not available in this build",
            ))
        })
    }
}

/// Adds `code.execute` to `services`.
pub fn register(services: &mut HostServices) {
    let f: ServiceFactory = Arc::new(|_ctx| Arc::new(CodeExecute) as Arc<dyn ToolHandler>);
    services.register(NAME, f);
}
