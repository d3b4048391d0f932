//! VCP dispatch (rule 16, `tools::vcp`): VCP-style blocks read and run as VCP means them —
//! `tool_name` a tool; `tool_name` + `command` a tool; a numbered batch as a chain — with
//! the rule that applied recorded on each call, and unknown tools keeping did-you-mean.

use std::sync::Arc;

use serde_json::{json, Value};
use tavern::internal::protocol::{parse, Format};
use tavern::internal::tools::vcp::{RULE_TOOL_NAME, RULE_TOOL_NAME_BATCH, RULE_TOOL_NAME_COMMAND};
use tavern::internal::tools::{Caller, ToolDefinition, ToolError, ToolManager};

/// Tools that echo the arguments they receive, as a VCP plugin would see them.
fn manager() -> Arc<ToolManager> {
    let tools = ToolManager::new();
    let open = json!({"type": "object", "additionalProperties": true});
    for id in [
        "AICodeWorker",
        "FileOperator:WriteFile",
        "FileOperator:ReadFile",
    ] {
        tools
            .register_fn(
                ToolDefinition::host(id, "echoes", open.clone()),
                |ctx, a| Ok(json!({"tool": ctx.tool_id, "args": a})),
            )
            .unwrap();
    }
    tools
        .register_fn(
            ToolDefinition::host("FileOperator:Fail", "fails", open),
            |ctx, _| Err(ToolError::failed(&ctx.tool_id, "disk full")),
        )
        .unwrap();
    tools
}

const S: &str = "<<<[TOOL_REQUEST]>>>";
const E: &str = "<<<[END_TOOL_REQUEST]>>>";

/// Parses `text`, dispatches and runs it; returns (tool, rule, step, result) per call.
async fn run(
    text: &str,
) -> Vec<(
    String,
    Option<String>,
    Option<u32>,
    Result<Value, ToolError>,
)> {
    let tools = manager();
    let parsed = parse(text, Format::Auto);
    assert!(!parsed.has_errors(), "{:?}", parsed.diagnostics);
    let calls = tools.resolve_vcp(parsed.calls);
    let outcomes = tools.execute(&calls, Caller::Cli).await;
    assert_eq!(calls.len(), outcomes.len());
    calls
        .iter()
        .zip(outcomes)
        .map(|(c, o)| {
            assert_eq!(c.tool, o.tool);
            (c.tool.clone(), c.dispatch.clone(), c.step, o.result)
        })
        .collect()
}

#[tokio::test]
async fn tool_name_that_is_a_tool_gets_every_argument() {
    let text = format!(
        "{S}\ntool_name:「始」AICodeWorker「末」,\ncommand:「始」run「末」,\ntask:「始」写一个测试「末」\n{E}"
    );
    let got = run(&text).await;
    assert_eq!(got.len(), 1);
    let (tool, rule, step, result) = &got[0];
    assert_eq!(tool, "AICodeWorker");
    assert_eq!(rule.as_deref(), Some(RULE_TOOL_NAME));
    assert_eq!(*step, None);
    assert_eq!(
        result.as_ref().unwrap()["args"],
        json!({"command": "run", "task": "写一个测试"})
    );
}

#[tokio::test]
async fn tool_name_plus_command_names_the_tool() {
    let text = format!(
        "Saving.\n{S}\ntool_name:「始」FileOperator「末」,\ncommand:「始」 WriteFile 「末」,\nfilePath:「始」a.txt「末」,\ncontent:「始」line 1\nline 2「末」,\n{E}"
    );
    let got = run(&text).await;
    assert_eq!(got.len(), 1);
    let (tool, rule, _, result) = &got[0];
    assert_eq!(tool, "FileOperator:WriteFile");
    assert_eq!(rule.as_deref(), Some(RULE_TOOL_NAME_COMMAND));
    // `command` chose the tool, so it is not passed again.
    assert_eq!(
        result.as_ref().unwrap()["args"],
        json!({"filePath": "a.txt", "content": "line 1\nline 2"})
    );
}

#[tokio::test]
async fn chinese_keys_and_values_pass_unchanged() {
    let text = format!(
        "{S}\ntool_name:「始」FileOperator「末」,\ncommand:「始」WriteFile「末」,\n文件名:「始」日记.txt「末」,\n内容:「始」晴，微风。\n「末」\n{E}"
    );
    let got = run(&text).await;
    assert_eq!(got[0].0, "FileOperator:WriteFile");
    assert_eq!(
        got[0].3.as_ref().unwrap()["args"],
        json!({"文件名": "日记.txt", "内容": "晴，微风。\n"})
    );
}

#[tokio::test]
async fn numbered_batch_runs_as_a_chain_in_step_order() {
    let text = format!(
        "{S}\ntool_name:「始」FileOperator「末」,\ncommand2:「始」ReadFile「末」,\nfilePath2:「始」b.txt「末」,\ncommand1:「始」WriteFile「末」,\nfilePath1:「始」a.txt「末」,\ncontent1:「始」A「末」,\nencoding:「始」utf-8「末」\n{E}"
    );
    let got = run(&text).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "FileOperator:WriteFile");
    assert_eq!(got[0].2, Some(1));
    assert_eq!(got[0].1.as_deref(), Some(RULE_TOOL_NAME_BATCH));
    assert_eq!(
        got[0].3.as_ref().unwrap()["args"],
        json!({"filePath": "a.txt", "content": "A", "encoding": "utf-8"})
    );
    assert_eq!(got[1].0, "FileOperator:ReadFile");
    assert_eq!(got[1].2, Some(2));
    assert_eq!(
        got[1].3.as_ref().unwrap()["args"],
        json!({"filePath": "b.txt", "encoding": "utf-8"})
    );
}

#[tokio::test]
async fn a_failing_batch_step_stops_the_rest() {
    let text = format!(
        "{S}\ntool_name:「始」FileOperator「末」,\ncommand1:「始」Fail「末」,\ncommand2:「始」ReadFile「末」,\nfilePath2:「始」b.txt「末」\n{E}"
    );
    let got = run(&text).await;
    assert_eq!(got.len(), 2);
    assert!(got[0]
        .3
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("disk full"));
    assert_eq!(
        got[1].3.as_ref().unwrap_err().code(),
        "skipped",
        "{:?}",
        got[1]
    );
}

#[tokio::test]
async fn unknown_tool_keeps_did_you_mean() {
    let tools = manager();
    let text = format!("{S}\ntool_name:「始」AICodeWorkr「末」,\ntask:「始」x「末」\n{E}");
    let calls = tools.resolve_vcp(parse(&text, Format::Vcp).calls);
    assert_eq!(calls[0].dispatch, None);
    let out = tools.execute(&calls, Caller::Cli).await;
    match &out[0].result {
        Err(ToolError::UnknownTool { id, suggestion }) => {
            assert_eq!(id, "AICodeWorkr");
            assert_eq!(suggestion.as_deref(), Some("AICodeWorker"));
        }
        other => panic!("expected unknown_tool, got {other:?}"),
    }
    // An unknown sub-command stays an unknown tool_name, with its suggestion too.
    let text = format!("{S}\ntool_name:「始」FileOperater「末」,\ncommand:「始」Nope「末」\n{E}");
    let calls = tools.resolve_vcp(parse(&text, Format::Vcp).calls);
    let out = tools.execute(&calls, Caller::Cli).await;
    assert_eq!(out[0].result.as_ref().unwrap_err().code(), "unknown_tool");
}

#[tokio::test]
async fn execute_dispatches_unresolved_vcp_calls_itself() {
    let tools = manager();
    let text = format!(
        "{S}\ntool_name:「始」FileOperator「末」,\ncommand:「始」ReadFile「末」,\nfilePath:「始」a.txt「末」\n{E}"
    );
    let out = tools
        .execute(&parse(&text, Format::Vcp).calls, Caller::Cli)
        .await;
    assert_eq!(out[0].tool, "FileOperator:ReadFile");
    assert_eq!(
        out[0].result.as_ref().unwrap()["args"],
        json!({"filePath": "a.txt"})
    );
}

#[test]
fn tam_blocks_are_not_touched() {
    let tools = manager();
    let text = "<|[REQUEST_TOOL]|>\ncommand:「始」FileOperator.WriteFile「末」\nfilePath:「始」a「末」\n<|[END_TOOL]|>";
    let calls = tools.resolve_vcp(parse(text, Format::Auto).calls);
    assert_eq!(calls[0].tool, "FileOperator.WriteFile");
    assert_eq!(calls[0].dispatch, None);
}
