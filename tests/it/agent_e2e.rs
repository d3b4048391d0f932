//! The agent runtime end to end against a real OpenAI-compatible server on 127.0.0.1:
//! manuals, self-correction, inventory refusal, the repeat guard and turn limit, malformed
//! output, retries, a dead server, and calls running while the model still streams.

use crate::agent_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_support::{action, serve, Reply, Server};
use serde_json::{json, Value};
use tavern::internal::agent::{AgentRun, ManualStyle, StopReason, WorldState};
use tavern::internal::tools::ToolDefinition;
use tavern::Engine;

struct Fixture {
    _dir: tempfile::TempDir,
    engine: Engine,
    /// How often GetPlayerInfo ran.
    player_calls: Arc<AtomicUsize>,
    /// How often Secret (registered, not in the inventory) ran.
    secret_calls: Arc<AtomicUsize>,
}

const INVENTORY: [&str; 3] = [
    "GetPlayerInfo",
    "ReadWorldStateTool",
    "UpdatePrivateStateTool",
];

fn fixture(server: &str, stream: bool, extra: Value) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let mut profile = json!({
        "id": "npc",
        "description": "You are a test NPC.",
        "initial_private_state_values": {"mood": "calm"},
        "tool_ids_inventory": INVENTORY,
        "tool_call_format": "action",
        "llm": {"base_url": server, "model": "test-model", "stream": stream,
                 "retries": 2, "retry_backoff_ms": 10, "timeout_ms": 20000}
    });
    for (k, v) in extra.as_object().unwrap() {
        profile[k] = v.clone();
    }
    std::fs::write(
        dir.path().join("agents/npc.json"),
        serde_json::to_string_pretty(&profile).unwrap(),
    )
    .unwrap();
    let engine = Engine::builder()
        .home(dir.path())
        .plugins(false)
        .workflows(false)
        .build()
        .unwrap();
    let player_calls = Arc::new(AtomicUsize::new(0));
    let pc = player_calls.clone();
    engine
        .tools()
        .register_fn(
            ToolDefinition::host(
                "GetPlayerInfo",
                "Information about a player.",
                json!({"type": "object", "properties": {
                    "player_id": {"type": "string", "description": "The player's id."}
                }, "required": ["player_id"]}),
            ),
            move |_, args| {
                pc.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"name": "Aria", "id": args["player_id"]}))
            },
        )
        .unwrap();
    let secret_calls = Arc::new(AtomicUsize::new(0));
    let sc = secret_calls.clone();
    engine
        .tools()
        .register_fn(
            ToolDefinition::host("Secret", "Not for agents.", json!({"type": "object"})),
            move |_, _| {
                sc.fetch_add(1, Ordering::SeqCst);
                Ok(json!("leaked"))
            },
        )
        .unwrap();
    Fixture {
        _dir: dir,
        engine,
        player_calls,
        secret_calls,
    }
}

async fn run(f: &Fixture, message: &str) -> AgentRun {
    let mut rt = f.engine.agent("npc").unwrap().build().unwrap();
    // A hang guard, not a timing assertion: every case here ends in well under a second.
    tokio::time::timeout(Duration::from_secs(60), rt.run(Some(message)))
        .await
        .expect("the run ends")
}

fn codes(run: &AgentRun) -> Vec<Vec<String>> {
    run.turns
        .iter()
        .map(|t| {
            t.results
                .iter()
                .map(|r| match &r.outcome.result {
                    Ok(_) => "ok".to_string(),
                    Err(e) => e.code().to_string(),
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manual_holds_exactly_the_inventory() {
    let server = serve(vec![Reply::Text("Nothing to do.".into())]).await;
    let f = fixture(&server.base_url(), false, json!({}));
    let rt = f.engine.agent("npc").unwrap().build().unwrap();
    // Text manual: one `<Id>` entry per inventory tool, nothing else.
    let manual = rt.manual().to_string();
    let entries: Vec<&str> = manual
        .lines()
        .filter_map(|l| l.strip_prefix("*   `<"))
        .filter_map(|l| l.split_once(">`").map(|(id, _)| id))
        .collect();
    assert_eq!(entries, INVENTORY, "{manual}");
    assert!(manual.contains("**Tools (direct function calls):**"));
    assert!(manual.contains("**Skills (workflow executions):**"));
    assert!(
        manual.contains("<ACTION>\n            <GetPlayerInfo>"),
        "{manual}"
    );
    for other in ["Secret", "system:echo", "system:uuid", "PublishEventTool"] {
        assert!(!manual.contains(other), "{other} leaked into the manual");
    }
    // JSON manuals name the same tools.
    for style in [ManualStyle::Openai, ManualStyle::Anthropic] {
        let v: Value = serde_json::from_str(&rt.manual_in(style)).unwrap();
        let names: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t["name"]
                    .as_str()
                    .or(t["function"]["name"].as_str())
                    .unwrap()
            })
            .collect();
        assert_eq!(names, INVENTORY);
    }
    // The model is sent that manual.
    let mut rt = rt;
    let r = rt.run(Some("hello")).await;
    assert_eq!(r.stop_reason, StopReason::NoCalls, "{:?}", r.error);
    assert!(server.system_message(0).contains(&manual));
}

async fn self_correction(stream: bool) {
    let server = serve(vec![
        Reply::Text(action(
            "I'll try to get the player's name.",
            "GetPlayerInfo",
            &[("plyer_id", "player123")],
        )),
        Reply::Text(action(
            "My apologies, I used the wrong parameter name.",
            "GetPlayerInfo",
            &[("player_id", "player123")],
        )),
        Reply::Text("Hello, Aria!".into()),
    ])
    .await;
    let f = fixture(&server.base_url(), stream, json!({}));
    let r = run(&f, "Who is player123?").await;
    assert_eq!(r.stop_reason, StopReason::NoCalls, "{:?}", r.error);
    assert_eq!(
        codes(&r),
        vec![vec!["invalid_parameters"], vec!["ok"], vec![]]
    );
    assert_eq!(r.turns.iter().all(|t| t.streamed), stream);
    // The error comes back in the next request, in the seed's words…
    let second = server.last_user_message(1);
    assert!(
        second.starts_with("Observation: Error - Invalid parameters for GetPlayerInfo:"),
        "{second}"
    );
    assert!(
        second.contains("'plyer_id'") && second.contains("did you mean 'player_id'?"),
        "{second}"
    );
    // …and the corrected call ran once, its result observed in the third request.
    assert_eq!(f.player_calls.load(Ordering::SeqCst), 1);
    let third = server.last_user_message(2);
    assert!(
        third.starts_with("Observation: Tool GetPlayerInfo executed successfully. Result: {"),
        "{third}"
    );
    assert!(third.contains("\"name\":\"Aria\""), "{third}");
    // The history holds the earlier output and Observation.
    let msgs = server.requests()[2]["messages"].as_array().unwrap().clone();
    assert!(msgs.iter().any(|m| m["content"] == json!(second)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_parameter_name_is_corrected_plain() {
    self_correction(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_parameter_name_is_corrected_streaming() {
    self_correction(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_the_inventory_is_refused() {
    let server = serve(vec![
        Reply::Text(action("Let me peek.", "Secret", &[])),
        Reply::Text(action("Or echo.", "system:echo", &[("text", "hi")])),
        Reply::Text("Fine.".into()),
    ])
    .await;
    let f = fixture(&server.base_url(), false, json!({}));
    let r = run(&f, "go").await;
    assert_eq!(
        codes(&r),
        vec![vec!["not_in_inventory"], vec!["not_in_inventory"], vec![]]
    );
    assert_eq!(
        f.secret_calls.load(Ordering::SeqCst),
        0,
        "Secret must not run"
    );
    let obs = server.last_user_message(1);
    assert!(
        obs.starts_with(
            "Observation: Error - Tool 'Secret' is not in the inventory of agent 'npc'"
        ),
        "{obs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repeat_guard_stops_a_loop() {
    let same = action("Again.", "GetPlayerInfo", &[("player_id", "p1")]);
    let server = serve(vec![Reply::Text(same); 6]).await;
    let f = fixture(&server.base_url(), false, json!({}));
    let r = run(&f, "loop").await;
    assert_eq!(r.stop_reason, StopReason::RepeatGuard);
    assert_eq!(r.turns.len(), 3);
    assert_eq!(f.player_calls.load(Ordering::SeqCst), 3);

    // Configurable: 2.
    let same = action("Again.", "GetPlayerInfo", &[("player_id", "p1")]);
    let server = serve(vec![Reply::Text(same); 6]).await;
    let f = fixture(&server.base_url(), false, json!({"repeat_limit": 2}));
    let r = run(&f, "loop").await;
    assert_eq!(r.stop_reason, StopReason::RepeatGuard);
    assert_eq!(f.player_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_limit_stops_a_run() {
    let replies = (0..5)
        .map(|i| {
            Reply::Text(action(
                "Next.",
                "GetPlayerInfo",
                &[("player_id", &format!("p{i}"))],
            ))
        })
        .collect();
    let server = serve(replies).await;
    let f = fixture(&server.base_url(), false, json!({"max_turns": 2}));
    let r = run(&f, "go").await;
    assert_eq!(r.stop_reason, StopReason::MaxTurns);
    assert_eq!(r.turns.len(), 2);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_budget_stops_a_run() {
    let replies = (0..5)
        .map(|i| {
            Reply::Text(action(
                "Next.",
                "GetPlayerInfo",
                &[("player_id", &format!("p{i}"))],
            ))
        })
        .collect();
    let server = serve(replies).await;
    let f = fixture(&server.base_url(), false, json!({"max_tool_calls": 2}));
    let r = run(&f, "go").await;
    assert_eq!(r.stop_reason, StopReason::ToolBudget);
    assert_eq!(f.player_calls.load(Ordering::SeqCst), 2);
    assert_eq!(codes(&r).last().unwrap(), &vec!["limit_exceeded"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_output_is_observed_and_runs_nothing() {
    let server = serve(vec![
        Reply::Text(
            "Let me look.\n<ACTION>\n  <GetPlayerInfo>\n    <player_id>p1</player_name>\n  </GetPlayerInfo>\n</ACTION>"
                .into(),
        ),
        Reply::Text("Sorry.".into()),
    ])
    .await;
    let f = fixture(&server.base_url(), false, json!({}));
    let r = run(&f, "go").await;
    assert_eq!(r.stop_reason, StopReason::NoCalls);
    assert_eq!(
        r.turns.len(),
        2,
        "a malformed turn is not a turn without calls"
    );
    assert!(r.turns[0].parsed.calls.is_empty());
    assert!(r.turns[0].results.is_empty());
    assert_eq!(f.player_calls.load(Ordering::SeqCst), 0);
    let obs = server.last_user_message(1);
    assert!(obs.starts_with("Observation: Error - "), "{obs}");
    assert_eq!(obs, r.turns[0].observations.join("\n"));
    assert!(obs.contains("line 4"), "the Observation says where: {obs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_then_200_is_retried() {
    let server = serve(vec![
        Reply::Status(500),
        Reply::Status(429),
        Reply::Text("Hi.".into()),
    ])
    .await;
    let f = fixture(&server.base_url(), false, json!({}));
    let r = run(&f, "hello").await;
    assert_eq!(r.stop_reason, StopReason::NoCalls, "{:?}", r.error);
    assert_eq!(r.turns[0].output, "Hi.");
    assert_eq!(server.requests().len(), 3);

    // Without retries left, the status is the error, with the server's message.
    let server = serve(vec![Reply::Status(503); 3]).await;
    let f = fixture(&server.base_url(), false, json!({}));
    let r = run(&f, "hello").await;
    assert_eq!(r.stop_reason, StopReason::Error);
    let e = r.error.unwrap().to_string();
    assert!(
        e.contains("HTTP 503") && e.contains("test server says 503"),
        "{e}"
    );
    assert!(e.contains("after 3 attempt(s)"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_is_a_clear_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let f = fixture(&url, true, json!({}));
    let r = run(&f, "hello").await;
    assert_eq!(r.stop_reason, StopReason::Error);
    assert!(r.turns.is_empty());
    let e = r.error.unwrap().to_string();
    assert!(e.contains("cannot reach the model at"), "{e}");
    assert!(
        e.contains(&format!("127.0.0.1:{port}/v1/chat/completions")),
        "{e}"
    );
    assert!(e.contains("agent 'npc', turn 1"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_starts_before_the_model_stops_writing() {
    let text = format!(
        "{}\nWhile that runs, let me tell you a long story about the road to Bree, the rain, the ponies and the old inn by the gate.",
        action("Checking.", "GetPlayerInfo", &[("player_id", "p1")])
    );
    let server = serve(vec![
        Reply::Slow {
            text,
            piece: 8,
            delay: Duration::from_millis(15),
        },
        Reply::Text("Done.".into()),
    ])
    .await;
    let f = fixture(&server.base_url(), true, json!({}));
    let r = run(&f, "go").await;
    assert_eq!(r.stop_reason, StopReason::NoCalls, "{:?}", r.error);
    let t = &r.turns[0];
    assert!(t.streamed);
    let started = t.results[0].started_ms.expect("the call ran");
    assert!(
        started < t.output_ended_ms,
        "the call started at {started} ms, after the output ended at {} ms",
        t.output_ended_ms
    );
    assert!(t.output.ends_with("by the gate."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_tools_read_and_write_state_and_events_are_published() {
    let server = serve(vec![
        Reply::Text(action(
            "Weather?",
            "ReadWorldStateTool",
            &[("path", "weather.now")],
        )),
        Reply::Text(action(
            "Noted.",
            "UpdatePrivateStateTool",
            &[("key", "notes.weather"), ("value", "wet")],
        )),
        Reply::Text("It rains.".into()),
    ])
    .await;
    let f = fixture(&server.base_url(), false, json!({}));
    let world = tavern::internal::agent::MemoryWorldState::new(json!({"weather": {"now": "rain"}}));
    let mut rt = f
        .engine
        .agent("npc")
        .unwrap()
        .world_state(world.clone())
        .build()
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    rt.events()
        .subscribe("agent:*", move |e| s.lock().unwrap().push(e.name.clone()));
    let r = rt.run(Some("go")).await;
    assert_eq!(r.stop_reason, StopReason::NoCalls, "{:?}", r.error);
    assert_eq!(
        r.turns[0].observations,
        vec!["Observation: Tool ReadWorldStateTool executed successfully. Result: rain"]
    );
    assert_eq!(rt.private_state().get("notes.weather"), Some(json!("wet")));
    assert_eq!(world.get("weather.now"), Some(json!("rain")));
    let names = seen.lock().unwrap().clone();
    assert_eq!(
        names,
        vec![
            "agent:tool-started",
            "agent:tool-finished",
            "agent:response",
            "agent:turn-finished",
            "agent:tool-started",
            "agent:tool-finished",
            "agent:response",
            "agent:turn-finished",
            "agent:response",
            "agent:turn-finished",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_inventory_id_is_a_load_problem_with_a_suggestion() {
    let f = fixture(
        "http://127.0.0.1:9/v1",
        false,
        json!({"tool_ids_inventory": ["GetPlayerInfo", "ReadWorldStatTool"]}),
    );
    let e = f
        .engine
        .agent("npc")
        .unwrap()
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("npc.json:"), "{e}");
    assert!(e.contains("unknown tool 'ReadWorldStatTool'"), "{e}");
    assert!(e.contains("did you mean 'ReadWorldStateTool'?"), "{e}");
    let _ = Server::base_url;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_see_the_agent_points() {
    use tavern::internal::hooks::HookReturn;
    let server = serve(vec![
        Reply::Text(action("Look.", "GetPlayerInfo", &[("player_id", "p1")])),
        Reply::Text("Fine.".into()),
    ])
    .await;
    let f = fixture(&server.base_url(), false, json!({}));
    // before-deliberate may rewrite the inputs: here, the user's message.
    f.engine
        .hooks()
        .on_fn("agent:before-deliberate", Default::default(), |_, ev| {
            let mut inputs = ev["inputs"].clone();
            let msgs = inputs["messages"].as_array_mut().unwrap();
            if ev["turn"] == json!(1) {
                msgs.last_mut().unwrap()["content"] = json!("REWRITTEN");
            }
            let mut m = serde_json::Map::new();
            m.insert("inputs".into(), inputs);
            HookReturn::Replace(m)
        })
        .unwrap();
    // after-parse may veto the calls it was shown.
    f.engine
        .hooks()
        .on_fn("agent:after-parse", Default::default(), |_, ev| {
            if ev["calls"].as_array().is_some_and(|c| !c.is_empty()) {
                HookReturn::Veto("no player lookups tonight".into())
            } else {
                HookReturn::Continue
            }
        })
        .unwrap();
    let r = run(&f, "original").await;
    assert_eq!(r.stop_reason, StopReason::NoCalls, "{:?}", r.error);
    assert_eq!(server.last_user_message(0), "REWRITTEN");
    assert_eq!(codes(&r), vec![vec!["vetoed"], vec![]]);
    assert_eq!(f.player_calls.load(Ordering::SeqCst), 0);
    assert!(server
        .last_user_message(1)
        .contains("no player lookups tonight"));
}
