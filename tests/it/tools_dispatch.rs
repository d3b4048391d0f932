//! Dispatch: chains and `on_error`, nesting depth, async tools, cancellation, Observations.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Map, Value};
use tavern::internal::protocol::{Call, OnError};
use tavern::internal::tools::{
    key_matching_for, success_observation, CallContext, Caller, KeyMatching, ToolDefinition,
    ToolError, ToolManager,
};

fn manager() -> Arc<ToolManager> {
    let tools = ToolManager::new();
    tools
        .register_fn(
            ToolDefinition::host(
                "t:ok",
                "returns n",
                json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            ),
            |_, a| Ok(a["n"].clone()),
        )
        .unwrap();
    tools
        .register_fn(
            ToolDefinition::host("t:fail", "always fails", json!({"type": "object"})),
            |ctx, _| Err(ToolError::failed(&ctx.tool_id, "boom")),
        )
        .unwrap();
    tools
}

fn call(tool: &str, args: Value, block: usize, step: Option<u32>, on_error: OnError) -> Call {
    let mut c = Call::new(tool, args.as_object().cloned().unwrap_or_default());
    c.block = block;
    c.step = step;
    c.on_error = on_error;
    c
}

fn summary(outcomes: &[tavern::internal::tools::CallOutcome]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| match &o.result {
            Ok(v) => format!("{} ok {v}", o.tool),
            Err(e) => format!("{} {}", o.tool, e.code()),
        })
        .collect()
}

#[tokio::test]
async fn chains_honour_on_error() {
    let tools = manager();
    use OnError::{Continue, Stop};
    let cases: Vec<(Vec<Call>, Vec<&str>)> = vec![
        (
            vec![
                call("t:ok", json!({"n": "1"}), 0, Some(1), Stop),
                call("t:fail", json!({}), 0, Some(2), Stop),
                call("t:ok", json!({"n": 3}), 0, Some(3), Stop),
                call("t:ok", json!({"n": 4}), 0, Some(4), Stop),
            ],
            vec![
                "t:ok ok 1",
                "t:fail execution_failed",
                "t:ok skipped",
                "t:ok skipped",
            ],
        ),
        (
            vec![
                call("t:fail", json!({}), 0, Some(1), Continue),
                call("t:ok", json!({"n": 2}), 0, Some(2), Stop),
            ],
            vec!["t:fail execution_failed", "t:ok ok 2"],
        ),
        (
            // Separate blocks are independent.
            vec![
                call("t:fail", json!({}), 0, Some(1), Stop),
                call("t:ok", json!({"n": 2}), 0, Some(2), Stop),
                call("t:ok", json!({"n": 3}), 1, None, Stop),
            ],
            vec!["t:fail execution_failed", "t:ok skipped", "t:ok ok 3"],
        ),
        (
            // A validation failure stops a chain like any other failure.
            vec![
                call("t:ok", json!({"n": "x"}), 0, Some(1), Stop),
                call("t:nope", json!({}), 0, Some(2), Stop),
            ],
            vec!["t:ok invalid_parameters", "t:nope skipped"],
        ),
    ];
    for (calls, want) in cases {
        let got = tools.execute(&calls, Caller::Cli).await;
        assert_eq!(summary(&got), want);
    }
    let got = tools
        .execute(
            &[
                call("t:fail", json!({}), 0, Some(2), Stop),
                call("t:ok", json!({"n": 1}), 0, Some(3), Stop),
            ],
            Caller::Cli,
        )
        .await;
    assert_eq!(
        got[1].result.as_ref().unwrap_err().to_string(),
        "Tool t:ok was skipped: step 2 (t:fail) failed and its on_error is stop: execution_failed"
    );
}

#[tokio::test]
async fn recursion_is_limited() {
    let tools = ToolManager::with_max_depth(5);
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    tools
        .register_async_fn(
            ToolDefinition::host("t:recurse", "calls itself", json!({"type": "object"})),
            move |ctx: CallContext, _| {
                let s = s.clone();
                async move {
                    s.fetch_add(1, Ordering::SeqCst);
                    ctx.call("t:recurse", json!({})).await
                }
            },
        )
        .unwrap();
    let err = tools
        .invoke("t:recurse", json!({}), Caller::Host)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "recursion_limit");
    assert_eq!(
        err.to_string(),
        "Tool t:recurse was not run: tool calls nested deeper than 5 levels"
    );
    // Depths 0..=5 ran; depth 6 was refused.
    assert_eq!(seen.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn async_tools_and_nested_calls() {
    let tools = manager();
    tools
        .register_async_fn(
            ToolDefinition::host(
                "t:double",
                "doubles n after a pause, via t:ok",
                json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
            ),
            |ctx: CallContext, args: Value| async move {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                assert_eq!(ctx.depth, 0);
                let n = ctx.call("t.ok", json!({"N": args["n"].to_string()})).await?;
                Ok(json!(n.as_i64().unwrap_or(0) * 2))
            },
        )
        .unwrap();
    assert_eq!(
        tools
            .invoke("t:double", json!({"n": "21"}), Caller::Host)
            .await,
        Ok(json!(42))
    );
}

#[tokio::test]
async fn cancelled_calls_do_not_run() {
    let tools = manager();
    let token = tokio_util::sync::CancellationToken::new();
    token.cancel();
    let err = tools
        .invoke(
            "t:ok",
            json!({"n": 1}),
            tavern::internal::tools::Invocation::new(Caller::Host).cancel(token),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "cancelled");
}

const SEED_002_5_5: &str = "I'll try to get the player's name.\n<ACTION>\n    <GetPlayerInfo>\n        <playerId>player123</playerId> <!-- 假设正确的参数名是 player_id -->\n    </GetPlayerInfo>\n</ACTION>\n";

/// Seed 002 §5.5's call with a name no loose reading makes right (issue 36: `playerId` is
/// read as `player_id` in every format, with a warning; a misspelling is the error).
fn misspelled() -> String {
    SEED_002_5_5.replace("playerId", "plyer_id")
}

fn player_tools() -> Arc<ToolManager> {
    let tools = ToolManager::new();
    tools
        .register_fn(
            ToolDefinition::host(
                "GetPlayerInfo",
                "Looks a player up.",
                json!({"type": "object", "properties": {"player_id": {"type": "string"}}, "required": ["player_id"]}),
            ),
            |_, a| Ok(json!({"name": format!("Name of {}", a["player_id"].as_str().unwrap_or(""))})),
        )
        .unwrap();
    tools
}

#[tokio::test]
async fn seed_002_5_5_observation_for_an_action_call() {
    // The call as the XML reader produces it (source: Action).
    let parsed =
        tavern::internal::protocol::parse(SEED_002_5_5, tavern::internal::protocol::Format::Auto);
    assert_eq!(parsed.calls.len(), 1);
    let c = parsed.calls[0].clone();
    assert_eq!(c.source, tavern::internal::protocol::Format::Action);
    assert_eq!(key_matching_for(&c), KeyMatching::Loose);
    let tools = player_tools();
    // One rule in every format (issue 36): read loosely, with a warning on the result.
    for source in [
        tavern::internal::protocol::Format::Action,
        tavern::internal::protocol::Format::Tam,
        tavern::internal::protocol::Format::Json,
    ] {
        let mut call = c.clone();
        call.source = source;
        let out = tools.execute(&[call], Caller::Model(None)).await;
        assert_eq!(out[0].result, Ok(json!({"name": "Name of player123"})));
        assert_eq!(
            out[0].warnings,
            ["argument 'playerId' read as 'player_id'"],
            "{source}"
        );
    }
    // A name no loose reading fits keeps its did-you-mean, in every format too.
    let parsed =
        tavern::internal::protocol::parse(&misspelled(), tavern::internal::protocol::Format::Auto);
    for source in [
        tavern::internal::protocol::Format::Action,
        tavern::internal::protocol::Format::Tam,
    ] {
        let mut call = parsed.calls[0].clone();
        call.source = source;
        let out = tools.execute(&[call], Caller::Model(None)).await;
        assert_eq!(
            out[0].observation(),
            "Observation: Error - Invalid parameters for GetPlayerInfo: unknown parameter 'plyer_id', did you mean 'player_id'?"
        );
    }
}

#[tokio::test]
async fn seed_002_5_5_through_the_engine() {
    let engine = tavern::Engine::builder()
        .builtins(false)
        .plugins(false)
        .workflows(false)
        .home(tempfile::tempdir().unwrap().path())
        .build()
        .unwrap();
    engine
        .tools()
        .register_fn(
            ToolDefinition::host(
                "GetPlayerInfo",
                "Looks a player up.",
                json!({"type": "object", "properties": {"player_id": {"type": "string"}}, "required": ["player_id"]}),
            ),
            |_, a| Ok(a["player_id"].clone()),
        )
        .unwrap();
    let (parsed, out) = engine
        .run(
            tavern::Request::text(misspelled())
                .format(tavern::internal::protocol::Format::Auto)
                .caller(Caller::Model(None)),
        )
        .await
        .map(|r| (r.parsed, r.outcomes))
        .unwrap();
    assert_eq!(
        parsed.calls.len(),
        1,
        "the parser finds the <ACTION> call: {parsed:?}"
    );
    assert_eq!(
        out[0].observation(),
        "Observation: Error - Invalid parameters for GetPlayerInfo: unknown parameter 'plyer_id', did you mean 'player_id'?"
    );
    let fixed = SEED_002_5_5.replace("playerId", "player_id");
    let (_, out) = engine
        .run(
            tavern::Request::text(&fixed)
                .format(tavern::internal::protocol::Format::Auto)
                .caller(Caller::Model(None)),
        )
        .await
        .map(|r| (r.parsed, r.outcomes))
        .unwrap();
    assert_eq!(out[0].result, Ok(json!("player123")));
}

#[test]
fn success_observations() {
    assert_eq!(
        success_observation("ReadWorldStateTool", &json!("sunny")),
        "Observation: Tool ReadWorldStateTool executed successfully. Result: sunny"
    );
    assert_eq!(
        success_observation("t:x", &json!({"a": [1, 2]})),
        "Observation: Tool t:x executed successfully. Result: {\"a\":[1,2]}"
    );
}

#[test]
fn key_matching_by_source() {
    use tavern::internal::protocol::{parse, Format};
    let text = "<|[REQUEST_TOOL]|>\ncommand:「始」a「末」\n<|[END_TOOL]|>\n<<<[TOOL_REQUEST]>>>\ntool_name:「始」b「末」\n<<<[END_TOOL_REQUEST]>>>\n```\n<ACTION><c/></ACTION>\n```";
    let parsed = parse(text, Format::Auto);
    let modes: Vec<_> = parsed.calls.iter().map(key_matching_for).collect();
    assert_eq!(
        modes,
        [KeyMatching::Loose, KeyMatching::Loose, KeyMatching::Loose]
    );
    let json = parse(r#"{"name":"a","arguments":{}}"#, Format::Auto);
    assert_eq!(key_matching_for(&json.calls[0]), KeyMatching::Loose);
    assert_eq!(
        key_matching_for(&Call::new("a", Map::new())),
        KeyMatching::Loose
    );
}
