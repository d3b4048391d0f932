//! `run_snippet`: model-written code in a fresh sandbox (`CodeInterpreter:execute`, workflow
//! `core:Script` nodes).

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use super::host::{ActiveCall, CallInfo, HostCore, Output, OutputBuffer, ScriptEnv};
use super::lua::LuaHost;
use super::rhai_host::RhaiHost;
use super::{Lang, Limits, ScriptError};

/// What a snippet produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnippetOutput {
    /// The chunk's `return` value (Lua) or the last expression (Rhai); `null` when none.
    pub value: Value,
    /// What the snippet printed (bounded by `max_output_bytes`).
    pub output: String,
}

/// Runs `code` in a fresh sandbox with no permissions: `inputs` is the global `inputs`,
/// `print` is captured. The state is dropped afterwards, so nothing leaks between runs.
pub fn run_snippet(
    lang: Lang,
    code: &str,
    inputs: Value,
    limits: &Limits,
) -> Result<SnippetOutput, ScriptError> {
    let buf = Arc::new(Mutex::new(OutputBuffer {
        max: limits.max_output_bytes,
        ..Default::default()
    }));
    let mut env = ScriptEnv::new("snippet", std::env::temp_dir());
    env.limits = *limits;
    let core = Arc::new(HostCore::new(env, Output::Buffer(buf.clone())));
    let info = CallInfo::host("snippet");
    let value = ActiveCall::new(&info, limits.wall_ms).run(|| match lang {
        Lang::Lua => {
            let host = LuaHost::new(core, *limits)?;
            host.eval_chunk("snippet", code, &inputs)
        }
        Lang::Rhai => {
            let host = RhaiHost::new(core, *limits, None)?;
            host.eval_snippet(code, &inputs)
        }
    })?;
    let output = std::mem::take(&mut buf.lock().unwrap_or_else(|p| p.into_inner()).text);
    Ok(SnippetOutput { value, output })
}
