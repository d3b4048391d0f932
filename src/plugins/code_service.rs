//! Host service `code.execute`: runs model-written code in a fresh sandbox with strict
//! limits (seed 001 §4.3, `CodeInterpreter:execute`) and returns
//! `{"value": …, "output": "<what it printed>"}`.
//!
//! Lua and Rhai run in the engine's script sandbox. Python and JavaScript run as confined
//! child processes ([`crate::sandbox::code`]); only the languages this machine can run are
//! listed in the tool's `language` enum.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::host_services::{HostServices, ServiceFactory};
use super::scripts::effective_limits;
use crate::sandbox::code::{process_languages, CodeRunner};
use crate::sandbox::confine::{PartialProcessLimits, ProcessLimits};
use crate::script::{run_snippet, Lang, Limits};
use crate::tools::{CallContext, ToolDefinition, ToolError, ToolFuture, ToolHandler};

/// Name of the service.
pub const NAME: &str = "code.execute";

/// The languages `code.execute` runs on this machine.
pub fn languages() -> Vec<&'static str> {
    let mut v = vec!["lua", "rhai"];
    v.extend(process_languages());
    v
}

/// Keeps only the languages this machine runs in the definition's `language` enum.
fn adjust(def: &mut ToolDefinition) {
    let available = languages();
    if let Some(Value::Array(list)) = def.parameters.pointer_mut("/properties/language/enum") {
        list.retain(|v| v.as_str().is_some_and(|l| available.contains(&l)));
    }
}

struct CodeExecute {
    limits: Limits,
    runner: Arc<CodeRunner>,
}

impl ToolHandler for CodeExecute {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let limits = self.limits;
        let runner = self.runner.clone();
        let tool = ctx.tool_id.to_string();
        let language = args
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Box::pin(async move {
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
            if runner.runs(&language) {
                if let Some(r) = runner
                    .run(&tool, &language, code, inputs, ctx.cancel.clone())
                    .await
                {
                    return r;
                }
                return Err(ToolError::failed(&tool, "the interpreter went away"));
            }
            let Some(lang) = Lang::from_name(&language) else {
                return Err(ToolError::InvalidParameters {
                    tool,
                    problems: vec![format!(
                        "parameter 'language': '{language}' is not one of {}",
                        languages().join(", ")
                    )],
                });
            };
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

    fn describe_sandbox(&self) -> Option<Value> {
        self.runner.describe()
    }
}

/// Adds `code.execute` to `services`. Lua/Rhai snippets run with [`Limits::strict`], lowered
/// further by the binding plugin's `limits:` section; Python/JavaScript with
/// [`ProcessLimits::CODE`], lowered by its `processLimits:`.
pub fn register(services: &mut HostServices) {
    let f: ServiceFactory = Arc::new(|ctx| {
        let limits = effective_limits(ctx.limits.as_ref(), &Limits::strict())
            .unwrap_or_else(|_| Limits::strict());
        let process_limits = ProcessLimits::CODE.lowered_by(
            &PartialProcessLimits::parse(ctx.process_limits.as_ref()).unwrap_or_default(),
        );
        Arc::new(CodeExecute {
            limits,
            runner: Arc::new(CodeRunner::new(process_limits)),
        }) as Arc<dyn ToolHandler>
    });
    services.register(NAME, f);
    services.register_adjuster(NAME, adjust);
}
