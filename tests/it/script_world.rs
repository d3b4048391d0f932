//! `api.world` for Lua and Rhai plugins: the engine's live world (`Engine::world_state`),
//! read and changed by scripts as `permissions.world` allows, shared with the host and the
//! engine's agents. (`server_world.rs` shows the changes reaching MCP subscribers.)

use std::path::Path;

use serde_json::{json, Value};
use tavern::internal::tools::Caller;
use tavern::{Engine, MemoryWorldState, WorldState};

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

const LUA_TOOLS: &str = r#"
api.tools.register{ id = "set", description = "changes the world", handler = function(args)
  api.world.set(args.path, args.value) return api.world.get(args.path) end }
api.tools.register{ id = "get", description = "reads the world", handler = function(args)
  local v = api.world.get(args.path) if v == nil then return "nil" end return v end }
api.tools.register{ id = "try_set", description = "catches the error", handler = function(args)
  local ok, e = pcall(api.world.set, args.path, args.value)
  if ok then return "ok" end return {code = e.code, message = e.message} end }
"#;

const RHAI_TOOLS: &str = r#"
fn set(args, ctx) { api::world::set(args.path, args.value); api::world::get(args.path) }
fn get(args, ctx) { let v = api::world::get(args.path); if v == () { "nil" } else { v } }
api::tools::register(#{ id: "set", description: "changes the world", handler: "set" });
api::tools::register(#{ id: "get", description: "reads the world", handler: "get" });
"#;

/// A home with `world.json` and plugins `W` (Lua, `world: write`), `R` (Lua, `world: read`),
/// `N` (Lua, no world permission) and `X` (Rhai, `world: write`).
fn home() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    write(
        &t.path().join("world.json"),
        r#"{"weather": {"now": "rain"}, "party": [{"name": "Aria"}]}"#,
    );
    for (name, perms) in [
        ("W", "permissions:\n  world: write\n"),
        ("R", "permissions:\n  world: read\n"),
        ("N", ""),
    ] {
        write(
            &t.path().join(format!("plugins/{name}/plugin.yaml")),
            &format!("name: {name}\n{perms}"),
        );
        write(
            &t.path().join(format!("plugins/{name}/main.lua")),
            LUA_TOOLS,
        );
    }
    write(
        &t.path().join("plugins/X/plugin.yaml"),
        "name: X\npermissions:\n  world: write\n",
    );
    write(&t.path().join("plugins/X/main.rhai"), RHAI_TOOLS);
    t
}

async fn call(e: &Engine, tool: &str, args: Value) -> Result<Value, tavern::ToolError> {
    e.tools().invoke(tool, args, Caller::Cli).await
}

#[tokio::test(flavor = "multi_thread")]
async fn lua_and_rhai_read_and_change_the_engines_live_world() {
    let t = home();
    let e = Engine::builder().home(t.path()).build().unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    // world.json is what the world starts from; dotted paths, list items by index.
    assert_eq!(
        call(&e, "W:get", json!({"path": "weather.now"}))
            .await
            .unwrap(),
        json!("rain")
    );
    assert_eq!(
        call(&e, "X:get", json!({"path": "party.0.name"}))
            .await
            .unwrap(),
        json!("Aria")
    );
    // A missing value is nil in Lua and () in Rhai.
    assert_eq!(
        call(&e, "W:get", json!({"path": "weather.tomorrow"}))
            .await
            .unwrap(),
        json!("nil")
    );
    assert_eq!(
        call(&e, "X:get", json!({"path": "nope.nothing"}))
            .await
            .unwrap(),
        json!("nil")
    );
    // Lua sets, Rhai and the host see it; Rhai sets (objects made on the way), Lua sees it.
    assert_eq!(
        call(&e, "W:set", json!({"path": "weather.now", "value": "sun"}))
            .await
            .unwrap(),
        json!("sun")
    );
    assert_eq!(
        call(&e, "X:get", json!({"path": "weather.now"}))
            .await
            .unwrap(),
        json!("sun")
    );
    assert_eq!(e.world_state().get("weather.now"), Some(json!("sun")));
    let quest = json!({"name": "the lost ring", "step": 2});
    assert_eq!(
        call(
            &e,
            "X:set",
            json!({"path": "quests.active", "value": quest.clone()})
        )
        .await
        .unwrap(),
        quest
    );
    assert_eq!(
        call(&e, "R:get", json!({"path": "quests.active.step"}))
            .await
            .unwrap(),
        json!(2)
    );
    // The host changes it through the engine; scripts read the change.
    e.world_state()
        .set("weather.now", json!("snow"))
        .expect("the host sets");
    assert_eq!(
        call(&e, "R:get", json!({"path": "weather.now"}))
            .await
            .unwrap(),
        json!("snow")
    );
    // world.json itself is left alone.
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("world.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk["weather"]["now"], json!("rain"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_permission_api_world_is_refused_naming_what_to_declare() {
    let t = home();
    let e = Engine::builder().home(t.path()).build().unwrap();
    for (tool, args, permission) in [
        ("N:get", json!({"path": "weather.now"}), "world: read"),
        (
            "N:set",
            json!({"path": "weather.now", "value": "sun"}),
            "world: write",
        ),
        (
            "R:set",
            json!({"path": "weather.now", "value": "sun"}),
            "world: write",
        ),
    ] {
        let err = call(&e, tool, args).await.unwrap_err();
        assert_eq!(err.code(), "permission_denied", "{tool}: {err}");
        let text = err.to_string();
        assert!(
            text.contains(permission) && text.contains("plugin.yaml"),
            "{tool}: {text}"
        );
    }
    // A script catches it as a value with a code.
    let caught = call(
        &e,
        "R:try_set",
        json!({"path": "weather.now", "value": "sun"}),
    )
    .await
    .unwrap();
    assert_eq!(caught["code"], json!("permission_denied"), "{caught}");
    assert!(
        caught["message"]
            .as_str()
            .unwrap_or_default()
            .contains("world: write"),
        "{caught}"
    );
    // Nothing changed.
    assert_eq!(e.world_state().get("weather.now"), Some(json!("rain")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_that_cannot_be_set_is_a_clear_script_error() {
    let t = home();
    let e = Engine::builder().home(t.path()).build().unwrap();
    for (path, says) in [
        (
            "weather.now.wind",
            "api.world.set: 'weather.now' holds \"rain\", not an object, so 'wind' cannot be set in it",
        ),
        (
            "party.5.name",
            "api.world.set: 'party' is a list of 1 items; '5' is not an index in it",
        ),
        ("weather..now", "api.world.set: path 'weather..now' has an empty part"),
        ("", "api.world.set: the path is empty"),
    ] {
        let err = call(&e, "W:set", json!({"path": path, "value": 1}))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "execution_failed", "{path}: {err}");
        assert!(err.to_string().contains(says), "{path}: {err}");
        let caught = call(&e, "W:try_set", json!({"path": path, "value": 1}))
            .await
            .unwrap();
        assert!(
            caught["message"].as_str().unwrap_or_default().contains(says),
            "{path}: {caught}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hosts_world_is_the_one_scripts_and_agents_use() {
    let t = home();
    let world = MemoryWorldState::new(json!({"weather": {"now": "fog"}}));
    let e = Engine::builder()
        .home(t.path())
        .world_state(world.clone())
        .build()
        .unwrap();
    // The host's world wins over world.json.
    assert_eq!(
        call(&e, "W:get", json!({"path": "weather.now"}))
            .await
            .unwrap(),
        json!("fog")
    );
    call(&e, "X:set", json!({"path": "weather.now", "value": "hail"}))
        .await
        .unwrap();
    assert_eq!(world.get("weather.now"), Some(json!("hail")));
    // world.json is still what the home says.
    assert_eq!(e.world().unwrap()["weather"]["now"], json!("rain"));
}

#[test]
fn changes_through_the_engine_are_announced_as_tavern_world() {
    let t = home();
    let e = Engine::builder().home(t.path()).build().unwrap();
    let mut rx = tavern::internal::tools::resource_updates().subscribe();
    // A failed set announces nothing; a successful one announces `tavern://world` (other
    // tests of this process may announce too, so the set's announcement is looked for).
    assert!(e.world_state().set("weather.now.x", json!(1)).is_err());
    e.world_state()
        .set("weather.now", json!("sun"))
        .expect("the host sets");
    let mut seen = Vec::new();
    while let Ok(uri) = rx.try_recv() {
        seen.push(uri);
    }
    assert!(seen.iter().any(|u| u == "tavern://world"), "{seen:?}");
}
