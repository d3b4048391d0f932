//! The `system:*` tools.

use std::sync::Arc;

use serde_json::json;
use tavern::internal::tools::{builtin, Caller, ToolManager};

fn tools() -> Arc<ToolManager> {
    let t = ToolManager::new();
    builtin::register(&t).unwrap();
    t
}

#[tokio::test]
async fn builtins() {
    let t = tools();
    let ids: Vec<String> = t.list().iter().map(|x| x.id().to_string()).collect();
    assert_eq!(
        ids,
        [
            "system:get_current_time",
            "system:echo",
            "system:uuid",
            "system:random_int"
        ]
    );
    for tool in t.list() {
        assert!(!tool.definition.description.is_empty());
        assert!(tool.definition.annotations.is_some());
    }

    let now = t
        .invoke("system:get_current_time", json!({}), Caller::Cli)
        .await
        .unwrap();
    let parsed = chrono::DateTime::parse_from_rfc3339(now.as_str().unwrap()).unwrap();
    assert_eq!(parsed.offset().local_minus_utc(), 0);
    let d = t
        .invoke(
            "system.get_current_time",
            json!({"format": "%Y", "timezone": "+08:00"}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert_eq!(d.as_str().unwrap().len(), 4);
    let unix = t
        .invoke(
            "system:get_current_time",
            json!({"format": "unix"}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert!(unix.as_i64().unwrap() > 1_700_000_000);
    let at = t
        .invoke(
            "system:get_current_time",
            json!({"timezone": "+05:30"}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert!(at.as_str().unwrap().ends_with("+05:30"), "{at}");
    for (args, want) in [
        (
            json!({"timezone": "Mars/Olympus"}),
            "unknown timezone 'Mars/Olympus'",
        ),
        (json!({"format": "%Q%"}), "invalid time format '%Q%'"),
    ] {
        let e = t
            .invoke("system:get_current_time", args, Caller::Cli)
            .await
            .unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
    }

    assert_eq!(
        t.invoke("system:echo", json!({"text": "hi"}), Caller::Cli)
            .await,
        Ok(json!("hi"))
    );
    assert_eq!(
        t.invoke("system:echo", json!({"text": "hi", "n": 1}), Caller::Cli)
            .await,
        Ok(json!({"text": "hi", "n": 1}))
    );
    assert_eq!(
        t.invoke("system:echo", json!({"TEXT": 5}), Caller::Cli)
            .await,
        Ok(json!("5"))
    );

    let a = t
        .invoke("system:uuid", json!({}), Caller::Cli)
        .await
        .unwrap();
    let b = t
        .invoke("system_uuid", json!(null), Caller::Cli)
        .await
        .unwrap();
    let u = uuid::Uuid::parse_str(a.as_str().unwrap()).unwrap();
    assert_eq!(u.get_version_num(), 4);
    assert_ne!(a, b);

    for _ in 0..50 {
        let n = t
            .invoke(
                "system:random_int",
                json!({"min": "1", "max": "6"}),
                Caller::Cli,
            )
            .await
            .unwrap()
            .as_i64()
            .unwrap();
        assert!((1..=6).contains(&n));
    }
    assert_eq!(
        t.invoke(
            "system:random_int",
            json!({"min": 3, "max": 3}),
            Caller::Cli
        )
        .await,
        Ok(json!(3))
    );
    let e = t
        .invoke(
            "system:random_int",
            json!({"min": 5, "max": 3}),
            Caller::Cli,
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Tool system:random_int failed: min (5) is greater than max (3); swap them"
    );
    let e = t
        .invoke("system:random_int", json!({"min": 1}), Caller::Cli)
        .await
        .unwrap_err();
    assert_eq!(
        e.observation(),
        "Observation: Error - Invalid parameters for system:random_int: missing required parameter 'max'"
    );
}
