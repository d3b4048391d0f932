//! The typed errors that replaced `Result<_, String>` at the public boundary keep their
//! messages word for word (docs and users match on them), and each failure is its own
//! variant a host can match.

use serde_json::json;
use tavern::internal::agent::llm::{LlmSettings, LlmSettingsError};
use tavern::internal::agent::set_path;
use tavern::internal::config::Settings;
use tavern::internal::protocol::grammar::{parse_reference, reference_blocks};
use tavern::internal::workflow::{NodeDefinition, NodeTypeError};
use tavern::{Engine, EngineError, MemoryWorldState, SettingError, StateError, WorldState};

#[test]
fn state_errors_keep_their_messages() {
    let cases: &[(serde_json::Value, &str, StateError, &str)] = &[
        (
            json!({}),
            "  ",
            StateError::EmptyPath,
            "the path is empty; name a key such as `mood` or `quests.active`",
        ),
        (
            json!({}),
            "a..b",
            StateError::EmptyPart {
                path: "a..b".into(),
            },
            "path 'a..b' has an empty part",
        ),
        (
            json!({"party": [1, 2]}),
            "party.5.name",
            StateError::NotAnIndex {
                list: "party".into(),
                len: 2,
                part: "5".into(),
            },
            "'party' is a list of 2 items; '5' is not an index in it",
        ),
        (
            json!({"hp": 3}),
            "hp.max",
            StateError::NotAnObject {
                at: "hp".into(),
                value: "3".into(),
                part: "max".into(),
            },
            "'hp' holds 3, not an object, so 'max' cannot be set in it",
        ),
    ];
    for (root, path, variant, message) in cases {
        let mut root = root.clone();
        let e = set_path(&mut root, path, json!(1)).unwrap_err();
        assert_eq!(&e, variant, "{path}");
        assert_eq!(e.to_string(), *message, "{path}");
        // The world state a host gets by default fails the same way.
        let world = MemoryWorldState::new(root.clone());
        assert_eq!(world.set(path, json!(1)).unwrap_err(), e);
    }
    let mut root = json!({});
    set_path(&mut root, "a.b", json!(2)).unwrap();
    assert_eq!(root, json!({"a": {"b": 2}}));
}

#[test]
fn setting_errors_keep_their_messages() {
    let mut s = Settings::default();
    for bad in ["novalue", " =1"] {
        let e = s.set_override(bad).unwrap_err();
        assert_eq!(
            e,
            SettingError::Malformed {
                assignment: bad.into()
            }
        );
        assert_eq!(
            e.to_string(),
            format!("--set expects KEY=VALUE, got '{bad}'")
        );
    }
    let e = s.set_from_env("TAVERN_SET", "novalue").unwrap_err();
    assert!(matches!(e, SettingError::Malformed { .. }));
    s.set_override("a.b=42").unwrap();
    assert_eq!(s.get("a.b"), Some(&json!(42)));

    // Through the builder, the same error is EngineError::Override.
    let home = tempfile::tempdir().unwrap();
    let err = Engine::builder()
        .home(home.path())
        .set("oops")
        .build()
        .err()
        .expect("a malformed --set fails the build");
    assert!(
        matches!(&err, EngineError::Override(SettingError::Malformed { assignment }) if assignment == "oops"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "--set expects KEY=VALUE, got 'oops'");
}

#[test]
fn llm_settings_errors_keep_their_messages() {
    let e = LlmSettings::from_flags(Some("ftp://x"), None).unwrap_err();
    assert_eq!(e, LlmSettingsError::Backend("ftp://x".into()));
    assert_eq!(
        e.to_string(),
        "'ftp://x' is neither openai:BASE_URL (e.g. openai:http://127.0.0.1:8080/v1) nor scripted:FILE nor local:PATH.gguf"
    );
    let m = json!({"temperature": "hot"});
    let e = LlmSettings::from_map(m.as_object().unwrap()).unwrap_err();
    assert!(matches!(e, LlmSettingsError::Invalid(_)), "{e:?}");
    assert!(e.to_string().starts_with("llm settings: "), "{e}");

    let mut s = Settings::default();
    s.set_override("llm.max_tokens=lots").unwrap();
    let e = LlmSettings::from_settings(&s).unwrap_err();
    assert!(matches!(e, LlmSettingsError::Settings(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("tavern.toml [llm]: llm settings: "),
        "{e}"
    );
}

#[test]
fn node_type_without_namespace_is_a_typed_error() {
    let def = NodeDefinition::new("Shout", "x");
    let e = def.full_type().unwrap_err();
    assert_eq!(
        e,
        NodeTypeError::NoNamespace {
            node_type: "Shout".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "node type 'Shout' has no namespace: write `namespace:Type` or set `namespace`"
    );
}

#[test]
fn the_grammar_reads_any_text() {
    // The grammar's error exists for grammar bugs only: arbitrary text still reads.
    for text in [
        "",
        "plain prose",
        "<|[REQUEST_TOOL]|>\ncommand:「始」a:b",
        "\u{0}\u{ffff}",
    ] {
        assert!(reference_blocks(text).is_ok(), "{text:?}");
        assert!(
            parse_reference(text, tavern::Format::Auto).is_ok(),
            "{text:?}"
        );
    }
}
