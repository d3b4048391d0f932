//! Issue 38: what a trial with small local models found, each as a test on the real binary
//! (`tavern agent run`, `tavern agent manual`) in a fresh home.

use std::path::Path;

use crate::cli_support::{home, tavern};
use serde_json::Value;

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A home with one agent `clock` (the tools given, `call_format` when given) and the
/// model's replies in replies.json.
fn clock_home(tools: &[&str], call_format: Option<&str>, replies: &[&str]) -> tempfile::TempDir {
    let h = home();
    let mut profile = serde_json::json!({
        "id": "clock",
        "description": "You keep the time.",
        "tool_ids_inventory": tools,
    });
    if let Some(cf) = call_format {
        profile["call_format"] = Value::String(cf.into());
    }
    write(h.path(), "agents/clock.json", &profile.to_string());
    write(
        h.path(),
        "replies.json",
        &serde_json::to_string(replies).unwrap(),
    );
    h
}

fn run_json(dir: &Path) -> (Value, String) {
    let r = tavern(
        dir,
        &[
            "agent",
            "run",
            "clock",
            "--llm",
            "scripted:replies.json",
            "--message",
            "What time is it?",
            "--json",
        ],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    (r.json(), r.stderr)
}

#[test]
fn a_json_call_names_its_tool_in_any_case() {
    // docs/formats.md: names are resolved ignoring case; the trial's model wrote this.
    let h = clock_home(
        &["system:get_current_time"],
        Some("json"),
        &[
            r#"{"name": "System_get_current_time", "arguments": {}}"#,
            "It is late.",
        ],
    );
    let (v, _) = run_json(h.path());
    let first = &v["turns"][0];
    assert_eq!(first["calls"][0]["tool"], "System_get_current_time");
    assert_eq!(first["results"][0]["ok"], true, "{first}");
    assert!(
        first["observations"][0]
            .as_str()
            .unwrap()
            .contains("executed successfully"),
        "{first}"
    );
    assert_eq!(v["stop_reason"], "no_calls");
}

#[test]
fn a_cut_off_json_call_is_explained_in_the_json_agents_own_shape() {
    let h = clock_home(
        &["system:get_current_time"],
        Some("json"),
        &[
            r#"{"name": "system_get_current_time", "arguments": {"format": "rfc"#,
            "Sorry.",
        ],
    );
    let (v, _) = run_json(h.path());
    let first = &v["turns"][0];
    // `--json` carries what the text mode shows: the diagnostic and the Observation.
    let diag = &first["diagnostics"][0];
    assert_eq!(diag["severity"], "error", "{first}");
    assert!(
        diag["message"].as_str().unwrap().contains("cut off"),
        "{diag}"
    );
    let obs = first["observations"][0].as_str().unwrap();
    assert!(obs.starts_with("Observation: Error - "), "{obs}");
    assert!(obs.contains("\"arguments\""), "{obs}");
    assert!(!obs.contains("\"parameters\""), "{obs}");
    // The manual teaches the same key.
    let r = tavern(h.path(), &["agent", "manual", "clock"], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\"arguments\""), "{}", r.stdout);
    assert!(!r.stdout.contains("\"parameters\""), "{}", r.stdout);
}

#[test]
fn llm_call_format_in_tavern_toml_is_known_and_applied() {
    let h = clock_home(
        &["system:get_current_time"],
        None,
        &[
            "<tool_call>\n{\"name\": \"system_get_current_time\", \"arguments\": {}}\n</tool_call>",
            "Done.",
        ],
    );
    write(h.path(), "tavern.toml", "[llm]\ncall_format = \"hermes\"\n");
    let (v, stderr) = run_json(h.path());
    assert!(!stderr.contains("unknown setting"), "{stderr}");
    assert!(!stderr.contains("call_format"), "{stderr}");
    assert_eq!(v["turns"][0]["results"][0]["ok"], true, "{v}");
    let r = tavern(h.path(), &["agent", "manual", "clock"], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("unknown setting"), "{}", r.stderr);
    assert!(r.stdout.contains("<tool_call>"), "{}", r.stdout);
}

#[test]
fn the_dice_example_is_a_real_range() {
    let h = clock_home(&["system:random_int"], Some("pythonic"), &["ok"]);
    let r = tavern(h.path(), &["agent", "manual", "clock"], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("system_random_int("))
        .unwrap_or_else(|| panic!("no example call:\n{}", r.stdout));
    let num = |key: &str| -> i64 {
        let at = line.find(&format!("{key}=")).unwrap() + key.len() + 1;
        let digits: String = line[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        digits.parse().unwrap()
    };
    let (min, max) = (num("min"), num("max"));
    assert!(max > min, "{line}");
    assert_ne!(max, 1, "{line}");
}

// ---------------------------------------------------------------- manuals for small models

use serde_json::json;
use tavern::internal::agent::{CallFormat, ManualStyle};
use tavern::internal::tools::ToolDefinition;
use tavern::Engine;

/// An engine on a fresh home with the agent `npc` (the profile given) and a host tool
/// `Forge` whose schema has an enum, bounds, unbounded numbers and a default.
fn forge_home(profile: Value) -> (tempfile::TempDir, Engine) {
    let h = home();
    write(h.path(), "agents/npc.json", &profile.to_string());
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
                "Forge",
                "Forges a blade. It takes a while.",
                json!({"type": "object", "properties": {
                    "ore": {"type": "string", "enum": ["iron", "copper"]},
                    "heat": {"type": "integer", "minimum": 100, "maximum": 900},
                    "count": {"type": "integer"},
                    "limit": {"type": "integer"},
                    "ratio": {"type": "number", "default": 0.5},
                    "rush": {"type": "boolean"}
                }, "required": ["ore", "heat", "count"]}),
            ),
            |_, _| Ok(json!("a blade")),
        )
        .unwrap();
    (h, engine)
}

#[test]
fn examples_are_built_from_the_schemas_own_values() {
    let (_h, engine) = forge_home(json!({
        "id": "npc", "tool_ids_inventory": ["Forge"], "call_format": "json"
    }));
    let rt = engine.agent("npc").unwrap().build().unwrap();
    // The enum's first member, the lower bound, two unbounded integers that differ, the
    // default.
    assert!(
        rt.manual().contains(
            r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 100, "count": 10, "limit": 3, "ratio": 0.5, "rush": true}}"#
        ),
        "{}",
        rt.manual()
    );
}

/// Roughly the tokens of an English or code text for the small models' tokenizers: a
/// token per 3.5 characters is on the long side for these texts.
fn tokens(s: &str) -> usize {
    s.chars().count() * 2 / 7 + 1
}

#[test]
fn the_short_manual_fits_in_a_few_hundred_tokens() {
    let inventory = [
        "Forge",
        "system:get_current_time",
        "system:random_int",
        "ReadWorldStateTool",
        "UpdatePrivateStateTool",
    ];
    let mut formats = 0;
    for cf in CallFormat::all() {
        let (_h, engine) = forge_home(json!({
            "id": "npc", "tool_ids_inventory": inventory,
            "call_format": cf.name(), "manual_style": "short"
        }));
        let rt = engine.agent("npc").unwrap().build().unwrap();
        let short = rt.manual().to_string();
        let full = rt.manual_in(ManualStyle::Tam);
        // Every tool has its line, and there is one example call in the agent's format.
        for t in [
            "Forge",
            "get_current_time",
            "random_int",
            "ReadWorldStateTool",
        ] {
            assert!(short.contains(t), "{cf}: {short}");
        }
        assert!(short.contains("Example call:"), "{cf}: {short}");
        assert!(
            // "A few hundred tokens": the XML-shaped formats (step3's markers) are the longest.
            tokens(&short) <= 450 && short.len() <= 1700,
            "{cf}: {} chars, ~{} tokens:\n{short}",
            short.len(),
            tokens(&short)
        );
        assert!(short.len() * 2 < full.len(), "{cf}: {short}\n---\n{full}");
        formats += 1;
    }
    assert!(formats >= 12, "{formats}");
}
