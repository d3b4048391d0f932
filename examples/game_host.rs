//! A small game host: a fixed-step loop (60 ticks a second) that owns a world state, offers
//! it to models and mods through seed-002-style host tools (`ReadWorldStateTool`,
//! `PublishEventTool`), loads a Lua mod that adds a tool of its own (`weather:forecast`, which
//! reads the world through the host tool), and drives model output through
//! `submit` / `pump` / `take` so no frame waits on a script for more than its budget.
//!
//! The world is the game thread's alone (`Rc<RefCell<…>>`, no mutex): the two world tools
//! are main-thread tools, so their handlers run only inside `pump`, on this thread, between
//! simulation steps. A mod calling them waits (parked) until the next frame's pump runs
//! them, then resumes. The mod's `print` and `api.log` lines reach the host through the log
//! callback.
//!
//! Run: `cargo run --example game_host`. No tokio runtime in sight: the engine owns its own.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tavern::{CallOptions, Caller, Engine, ToolDefinition};

/// The game's state, shared with the host tools.
#[derive(Default)]
struct World {
    state: Value,
    events: Vec<(String, Value)>,
}

const WEATHER_MOD: &str = r#"
api.tools.register({
  id = "forecast",
  description = "Tells the weather tomorrow from today's (reads the world state).",
  handler = function(args)
    local today = api.tools.call("ReadWorldStateTool",
      {path = "environment.weather", default_value = "unknown"})
    local next = ({sunny = "cloudy", cloudy = "rain", rain = "sunny"})[today] or "unknown"
    api.tools.call("PublishEventTool", {event_type = "weather.forecast", payload = {tomorrow = next}})
    api.log.info("forecast: " .. today .. " then " .. next)
    return {today = today, tomorrow = next}
  end,
})
"#;

fn read_path(state: &Value, path: &str) -> Option<Value> {
    path.split('.')
        .try_fold(state, |v, key| v.get(key))
        .cloned()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A home with one Lua mod (a real game would point at its mods directory).
    let home = tempfile::tempdir()?;
    let dir = home.path().join("plugins/weather");
    std::fs::create_dir_all(&dir)?;
    // The mod may call the two host tools it uses, and nothing else of the host's.
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: weather\nversion: 1.0.0\npermissions:\n  tools: [ReadWorldStateTool, PublishEventTool]\n",
    )?;
    std::fs::write(dir.join("main.lua"), WEATHER_MOD)?;

    // The game thread's world: no lock, not `Send`.
    let world = Rc::new(RefCell::new(World {
        state: json!({"environment": {"weather": "sunny", "time": {"current_hour": 9}}}),
        events: Vec::new(),
    }));
    let (w1, w2) = (world.clone(), world.clone());
    let engine = Engine::builder()
        .home(home.path())
        // Mods' `print` / `api.log` lines and the engine's warnings, with their source.
        .log_callback(|r| println!("[{:?}] {}: {}", r.level, r.source, r.message))
        // Main-thread tools: run inside `engine.pump` on this thread only.
        .main_thread_tool(
            ToolDefinition::host(
                "ReadWorldStateTool",
                "Reads a value from the shared world state.",
                json!({"type": "object",
                       "properties": {"path": {"type": "string"}, "default_value": {}},
                       "required": ["path"]}),
            ),
            move |_ctx, args| {
                let w = w1.borrow();
                let path = args["path"].as_str().unwrap_or_default();
                Ok(read_path(&w.state, path)
                    .unwrap_or_else(|| args.get("default_value").cloned().unwrap_or(Value::Null)))
            },
        )
        .main_thread_tool(
            ToolDefinition::host(
                "PublishEventTool",
                "Publishes an event to the event bus.",
                json!({"type": "object",
                       "properties": {"event_type": {"type": "string"}, "payload": {"type": "object"}},
                       "required": ["event_type"]}),
            ),
            move |ctx, args| {
                let mut w = w2.borrow_mut();
                let kind = args["event_type"].as_str().unwrap_or_default().to_string();
                w.events.push((format!("{kind} (from {})", ctx.caller), args["payload"].clone()));
                Ok(json!(true))
            },
        )
        .build()?;
    for p in engine.problems() {
        eprintln!("warning: {p}");
    }

    // What a model said this turn (seed 002's <ACTION> form, then a TAM call of the mod's tool).
    let model_turns = [
        "Let me look outside.\n<ACTION>\n  <ReadWorldStateTool>\n    <path>environment.weather</path>\n  </ReadWorldStateTool>\n</ACTION>",
        "<|[REQUEST_TOOL]|>\ncommand:「始」weather:forecast「末」\n<|[END_TOOL]|>",
    ];
    // Built once, cloned per call: the 2 s count from each call's start.
    let opts = CallOptions::new()
        .caller(Caller::Model(Some("npc-1".into())))
        .timeout(Duration::from_secs(2));
    let mut tickets: Vec<_> = model_turns
        .iter()
        .map(|t| engine.submit_with(t, opts.clone()))
        .collect::<Result<_, _>>()?;

    // The fixed-step loop: simulate, then give the engine at most 1 ms of the frame (the
    // world tools the calls reach run inside that pump; it returns as soon as that is done,
    // with the tickets that finished).
    let step = Duration::from_micros(16_667);
    let mut worst_pump = Duration::ZERO;
    for tick in 0..600u32 {
        let frame = Instant::now();
        world.borrow_mut().state["environment"]["time"]["current_hour"] = json!(9 + tick / 60);
        let t0 = Instant::now();
        let finished = engine.pump(Duration::from_millis(1));
        worst_pump = worst_pump.max(t0.elapsed());
        for t in finished {
            tickets.retain(|&x| x != t);
            match engine.take(t) {
                Some(Ok(report)) => {
                    for o in &report.outcomes {
                        println!(
                            "tick {tick}: {} -> {}",
                            o.id.as_deref().unwrap_or(&o.tool),
                            o.observation()
                        );
                    }
                }
                Some(Err(e)) => eprintln!("tick {tick}: call lost: {e}"),
                None => {}
            }
        }
        if tickets.is_empty() {
            break;
        }
        std::thread::sleep(step.saturating_sub(frame.elapsed()));
    }
    let w = world.borrow();
    for (kind, payload) in &w.events {
        println!("event {kind}: {payload}");
    }
    println!("longest pump: {worst_pump:?}");
    Ok(())
}
