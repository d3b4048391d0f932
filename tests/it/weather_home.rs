//! The small agent home the real-model tests share (SmolLM2 on llama-server, and in the
//! process): the agent `guide` and its one tool, `Weather`.

use serde_json::{json, Value};
use tavern::internal::tools::ToolDefinition;
use tavern::Engine;

/// What `guide` is told to do with its tool.
pub const WEATHER_INSTRUCTIONS: &str =
    "Use the Weather tool to look up the weather, then tell the user what it is in one sentence.";

/// An engine whose home has the agent `guide` with one tool, `Weather`, a host tool.
pub fn weather_home() -> (tempfile::TempDir, Engine) {
    let h = tempfile::tempdir().unwrap();
    std::fs::create_dir(h.path().join("agents")).unwrap();
    let profile = json!({
        "id": "guide",
        "description": "You are a helpful assistant.",
        "instructions": WEATHER_INSTRUCTIONS,
        "tool_ids_inventory": ["Weather"],
        "call_format": "json",
        "manual_style": "short",
        "max_turns": 4
    });
    std::fs::write(h.path().join("agents/guide.json"), profile.to_string()).unwrap();
    let engine = Engine::builder()
        .home(h.path())
        .plugins(false)
        .workflows(false)
        .build()
        .unwrap();
    engine
        .tools()
        .register_fn(
            ToolDefinition::host(
                "Weather",
                "Returns the weather in a city.",
                json!({"type": "object", "properties": {
                    "city": {"type": "string", "description": "The city.", "examples": ["Paris"]}
                }, "required": ["city"]}),
            ),
            |_, args: Value| {
                let city = args["city"].as_str().unwrap_or("there");
                Ok(json!(format!("In {city} it is rainy and 12 degrees.")))
            },
        )
        .unwrap();
    (h, engine)
}
