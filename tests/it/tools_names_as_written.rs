//! Names as models write them (issue 25 item 6): `forge.smelt`, `forge_smelt`,
//! `Forge:smelt`, `FORGE_SMELT`, a markdown-escaped `forge\_smelt`, in the native
//! formats, resolve to the tool `forge:smelt` like its wire name does, and the result's
//! `called_as` keeps what the model wrote.

use serde_json::json;
use tavern::internal::tools::{Caller, ToolDefinition};

fn engine() -> tavern::Engine {
    let engine = tavern::Engine::builder()
        .builtins(false)
        .plugins(false)
        .workflows(false)
        .home(tempfile::tempdir().unwrap().path())
        .build()
        .unwrap();
    for id in ["forge:smelt", "forge:cool", "Forge:cool"] {
        engine
            .tools()
            .register_fn(
                ToolDefinition::host(
                    id,
                    "Smelts ore.",
                    json!({"type": "object", "properties": {"ore": {"type": "string"}}}),
                ),
                |_, a| Ok(a["ore"].clone()),
            )
            .unwrap();
    }
    engine
}

#[tokio::test]
async fn names_as_written_resolve_and_keep_their_spelling() {
    let engine = engine();
    let cases = [
        ("[forge.smelt(ore='iron')]", "forge.smelt"),
        ("[forge\\_smelt(ore='iron')]", "forge_smelt"),
        ("<tool_call>{\"name\": \"Forge:smelt\", \"arguments\": {\"ore\": \"iron\"}}</tool_call>", "Forge:smelt"),
        ("[TOOL_CALLS]FORGE_SMELT[ARGS]{\"ore\": \"iron\"}", "FORGE_SMELT"),
        ("<function=Forge.Smelt>{\"ore\": \"iron\"}</function>", "Forge.Smelt"),
    ];
    for (text, written) in cases {
        let report = engine
            .run(tavern::Request::text(text).caller(Caller::Model(None)))
            .await
            .unwrap();
        let j = report.to_json();
        let r = &j["results"][0];
        assert_eq!(r["tool"], "forge:smelt", "{text}: {j}");
        assert_eq!(r["called_as"], written, "{text}: {j}");
        assert_eq!(r["ok"], true, "{text}: {j}");
        assert_eq!(r["value"], "iron", "{text}: {j}");
    }
}

#[tokio::test]
async fn a_spelling_two_tools_share_is_not_guessed() {
    let engine = engine();
    // `forge:cool` and `Forge:cool` both exist: exact spellings pick one, a third
    // spelling is ambiguous and is an unknown tool, not a guess.
    let report = engine
        .run(tavern::Request::text("[Forge:cool(ore='x')]").caller(Caller::Model(None)))
        .await
        .unwrap();
    assert_eq!(report.to_json()["results"][0]["tool"], "Forge:cool");
    let report = engine
        .run(tavern::Request::text("[FORGE:COOL(ore='x')]").caller(Caller::Model(None)))
        .await
        .unwrap();
    let j = report.to_json();
    assert_eq!(j["results"][0]["ok"], false, "{j}");
}
