//! Host service `code.execute`: runs model-written Lua or Rhai in a fresh sandbox with strict
//! limits (seed 001 §4.3, `CodeInterpreter:execute`) and returns
//! `{"value": …, "output": "<what it printed>"}`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::host_services::{HostServices, ServiceFactory};
use super::scripts::effective_limits;
use crate::script::{run_snippet, Lang, Limits};
use crate::tools::{CallContext, ToolError, ToolFuture, ToolHandler};

/// Name of the service.
pub const NAME: &str = "code.execute";

struct CodeExecute {
    limits: Limits,
}

impl ToolHandler for CodeExecute {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let limits = self.limits;
        Box::pin(async move {
            let tool = ctx.tool_id.clone();
            let language = args
                .get("language")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Some(lang) = Lang::from_name(language) else {
                return Err(ToolError::InvalidParameters {
                    tool,
                    problems: vec![format!(
                        "parameter 'language': '{language}' is not one of lua, rhai"
                    )],
                });
            };
            let Some(code) = args.get("code").and_then(Value::as_str).map(str::to_string) else {
                return Err(ToolError::InvalidParameters {
                    tool,
                    problems: vec!["parameter 'code' is required".into()],
                });
            };
            let inputs = args
                .get("inputs")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            // Script work never runs on the async workers; the sandbox bounds its time.
            let result =
                tokio::task::spawn_blocking(move || run_snippet(lang, &code, inputs, &limits))
                    .await
                    .map_err(|e| {
                        ToolError::failed(&tool, format!("the interpreter thread failed: {e}"))
                    })?;
            match result {
                Ok(out) => Ok(json!({"value": out.value, "output": out.output})),
                Err(e) => Err(e.into_tool_error(&tool)),
            }
        })
    }
}

/// Adds `code.execute` to `services`. Snippets run with [`Limits::strict`], lowered further
/// by the binding plugin's `limits:` section.
pub fn register(services: &mut HostServices) {
    let f: ServiceFactory = Arc::new(|ctx| {
        let limits = effective_limits(ctx.limits.as_ref(), &Limits::strict())
            .unwrap_or_else(|_| Limits::strict());
        Arc::new(CodeExecute { limits }) as Arc<dyn ToolHandler>
    });
    services.register(NAME, f);
}
