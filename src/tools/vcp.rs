//! Dispatch of VCP-form calls (TAM rule 16): which tool a `<<<[TOOL_REQUEST]>>>` block runs.
//!
//! The reader passes a VCP block through as VCP means it: `tool_name` is [`Call::tool`] and
//! every other key (`command`, `command1`, `filePath1`, …) is an argument. Which tool runs
//! depends on what is registered, so it is settled here, by the first rule that applies:
//!
//! 1. **`tool_name`**: `tool_name` is a tool (a VCP-manifest plugin, or any registered id):
//!    it is called with all the arguments, `command` and numbered keys included (the plugin
//!    reads its own sub-command and batch).
//! 2. **`tool_name+command`**: it is not, but `tool_name:command` is (`FileOperator` +
//!    `WriteFile` → `FileOperator:WriteFile`): that tool is called with the other arguments.
//! 3. **`tool_name+commandN`**: it is not, the block has numbered commands (`command1`,
//!    `command2`, …) and at least one `tool_name:commandN` is a tool: the block runs as a
//!    chain, step N calling `tool_name:commandN` with the keys numbered N (number removed)
//!    plus the block's unnumbered keys; steps run in numeric order and a failing step stops
//!    the rest, as in a TAM chain.
//! 4. Otherwise the call stays as written and fails as an unknown tool with its
//!    did-you-mean suggestion.
//!
//! The rule that applied is recorded in [`Call::dispatch`] (printed by `tavern call`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::ToolManager;
use crate::protocol::{split_step_key, Call, Format, OnError};

/// [`Call::dispatch`] when `tool_name` itself is a tool.
pub const RULE_TOOL_NAME: &str = "tool_name";
/// [`Call::dispatch`] when `tool_name:command` is the tool.
pub const RULE_TOOL_NAME_COMMAND: &str = "tool_name+command";
/// [`Call::dispatch`] for a step of a numbered batch run as a chain.
pub const RULE_TOOL_NAME_BATCH: &str = "tool_name+commandN";

fn is_command(key: &str) -> bool {
    crate::tools::normalize_key(key) == "command"
}

impl ToolManager {
    /// Settles the tool of every VCP call not resolved yet (see the module docs); other
    /// calls pass through unchanged. A numbered batch becomes several calls, so callers that
    /// pair results with calls resolve first and pair with the returned list.
    pub fn resolve_vcp(&self, calls: Vec<Call>) -> Vec<Call> {
        if !calls
            .iter()
            .any(|c| c.source == Format::Vcp && c.dispatch.is_none())
        {
            return calls;
        }
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            if call.source != Format::Vcp || call.dispatch.is_some() {
                out.push(call);
                continue;
            }
            self.resolve_one(call, &mut out);
        }
        out
    }

    fn resolve_one(&self, mut call: Call, out: &mut Vec<Call>) {
        let reg = self.read();
        if let Some(t) = reg.resolve(&call.tool) {
            call.tool = t.id().to_string();
            call.dispatch = Some(RULE_TOOL_NAME.into());
            out.push(call);
            return;
        }
        // Rule 2: a plain `command` sub-command.
        let command = call
            .args
            .iter()
            .find(|(k, _)| is_command(k))
            .map(|(k, v)| (k.clone(), v.as_str().map(str::trim).map(str::to_string)));
        if let Some((key, Some(cmd))) = command {
            if let Some(t) = reg.resolve(&format!("{}:{cmd}", call.tool)) {
                call.tool = t.id().to_string();
                call.args.remove(&key);
                call.dispatch = Some(RULE_TOOL_NAME_COMMAND.into());
            }
            out.push(call);
            return;
        }
        // Rule 3: a numbered batch.
        let mut steps: BTreeMap<u32, (Option<String>, Map<String, Value>)> = BTreeMap::new();
        let mut common = Map::new();
        for (k, v) in &call.args {
            match split_step_key(k) {
                Some((base, Some(n))) if !base.is_empty() => {
                    let st = steps.entry(n).or_default();
                    if is_command(base) {
                        st.0 = v.as_str().map(|s| s.trim().to_string());
                    } else {
                        st.1.insert(base.to_string(), v.clone());
                    }
                }
                _ => {
                    common.insert(k.clone(), v.clone());
                }
            }
        }
        let batch: Vec<(u32, String, Map<String, Value>)> = steps
            .into_iter()
            .filter_map(|(n, (cmd, args))| cmd.map(|c| (n, c, args)))
            .collect();
        let resolved = |cmd: &str| reg.resolve(&format!("{}:{cmd}", call.tool));
        if batch.is_empty() || !batch.iter().any(|(_, c, _)| resolved(c).is_some()) {
            out.push(call);
            return;
        }
        for (n, cmd, mut args) in batch {
            for (k, v) in &common {
                args.entry(k.clone()).or_insert_with(|| v.clone());
            }
            let tool = match resolved(&cmd) {
                Some(t) => t.id().to_string(),
                None => format!("{}:{cmd}", call.tool),
            };
            out.push(Call {
                tool,
                args: args.into(),
                step: Some(n),
                on_error: OnError::Stop,
                dispatch: Some(RULE_TOOL_NAME_BATCH.into()),
                ..call.clone()
            });
        }
    }
}
