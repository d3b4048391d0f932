//! The web explorer's HTTP side against the real `tavern serve` (no browser): the pages and
//! their embedded assets, `Accept` negotiation on seed 004's `/tools/{id}`, and the JSON
//! endpoints the pages read (catalog, workflows, plugins and their reload stream, agents).

use crate::server_support;
use crate::web_support;

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::Server;
use web_support::web_home;

const BROWSER_ACCEPT: &str =
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

async fn get_json(url: &str) -> (StatusCode, Value) {
    let r = reqwest::Client::new().get(url).send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn every_page_path_answers_the_app_with_its_assets_embedded() {
    let home = web_home();
    let s = Server::start(home.path(), &[]);
    let c = reqwest::Client::new();
    for path in [
        "/",
        "/tools/Inn:room_price",
        "/workflows/slow_steps",
        "/plugins",
        "/audit",
        "/resources",
        "/prompts",
        "/agents",
        "/agents/host",
    ] {
        let r = c
            .get(format!("{}{path}", s.base))
            .header(ACCEPT, BROWSER_ACCEPT)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(
            r.headers()[CONTENT_TYPE],
            "text/html; charset=utf-8",
            "{path}"
        );
        let csp = r.headers()[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_string();
        assert!(csp.contains("default-src 'self'"), "{path}: {csp}");
        let body = r.text().await.unwrap();
        assert!(
            body.contains(r#"<script src="/assets/app.js" defer></script>"#),
            "{path}"
        );
        assert!(body.contains(r#"<link rel="stylesheet" href="/assets/app.css">"#));
    }
    for (path, ty) in [
        ("/assets/app.js", "text/javascript; charset=utf-8"),
        ("/assets/app.css", "text/css; charset=utf-8"),
    ] {
        let r = c.get(format!("{}{path}", s.base)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_TYPE], ty);
        let text = r.text().await.unwrap();
        // No CDN, no network: the only absolute URL is the SVG namespace name.
        let external: Vec<&str> = text
            .match_indices("://")
            .map(|(i, _)| &text[i.saturating_sub(5)..(i + 30).min(text.len())])
            .filter(|u| !u.contains("://www.w3.org/2000/svg"))
            .collect();
        assert!(external.is_empty(), "{path} reaches out: {external:?}");
    }
}

#[tokio::test]
async fn tools_id_answers_json_to_api_clients_and_the_page_to_browsers() {
    let home = web_home();
    let s = Server::start(home.path(), &[]);
    let c = reqwest::Client::new();
    let url = format!("{}/tools/Inn:room_price", s.base);
    let (_, api) = get_json(&format!("{}/api/tools/Inn:room_price", s.base)).await;
    for accept in [
        None,
        Some("*/*"),
        Some("application/json"),
        Some("application/json, text/html;q=0.5"),
    ] {
        let mut req = c.get(&url);
        if let Some(a) = accept {
            req = req.header(ACCEPT, a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(
            r.headers()[CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{accept:?}"
        );
        let v: Value = r.json().await.unwrap();
        assert_eq!(v, api, "Accept {accept:?}: seed 004's JSON alias");
    }
    let r = c
        .get(&url)
        .header(ACCEPT, BROWSER_ACCEPT)
        .send()
        .await
        .unwrap();
    assert!(r.headers()[CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    // An unknown tool still answers JSON errors to API clients.
    let (st, v) = get_json(&format!("{}/tools/Inn:room_prise", s.base)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "unknown_tool");
}

#[tokio::test]
async fn the_catalog_carries_kind_plugin_hints_and_the_manual_generators_output() {
    let home = web_home();
    let s = Server::start(home.path(), &[]);
    let (st, v) = get_json(&format!("{}/api/catalog", s.base)).await;
    assert_eq!(st, StatusCode::OK);
    let tools = v["tools"].as_array().unwrap();
    let find = |id: &str| {
        tools
            .iter()
            .find(|t| t["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} listed"))
    };
    let price = find("Inn:room_price");
    assert_eq!(price["kind"], "service");
    assert_eq!(price["plugin"], "Inn");
    assert_eq!(price["displayName"], "Room price");
    assert_eq!(price["hints"], json!(["readOnlyHint", "idempotentHint"]));
    assert_eq!(price["inputSchema"]["required"], json!(["nights", "room"]));
    assert_eq!(
        price["tamExample"],
        "<|[REQUEST_TOOL]|>\ncommand:「始」Inn:room_price「末」\nnights:「始」1「末」\nroom:「始」double「末」\nbreakfast:「始」false「末」\n<|[END_TOOL]|>"
    );
    assert!(price["actionExample"]
        .as_str()
        .unwrap()
        .starts_with("<ACTION>\n    <Inn:room_price>"));
    assert!(price["manual"]
        .as_str()
        .unwrap()
        .starts_with("- Tool ID: Inn:room_price\n"));
    let wf = find("workflow:slow_steps");
    assert_eq!(wf["kind"], "workflow");
    assert_eq!(wf["workflow"], "slow_steps");
    assert_eq!(find("system:echo")["plugin"], "system");
    // One tool, either spelling of its id; a typo gets suggestions.
    let (_, one) = get_json(&format!("{}/api/catalog/Inn_room_price", s.base)).await;
    assert_eq!(one, price);
    let (st, err) = get_json(&format!("{}/api/catalog/Inn:room_prise", s.base)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(err["error"]["code"], "unknown_tool");
    assert_eq!(err["error"]["suggestions"], json!(["Inn:room_price"]));
}

#[tokio::test]
async fn workflows_come_as_layered_graphs_with_their_interface() {
    let home = web_home();
    let s = Server::start(home.path(), &[]);
    let (_, list) = get_json(&format!("{}/api/workflows", s.base)).await;
    let ids: Vec<&str> = list["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["slow_steps", "text_stats"]);
    let (st, wf) = get_json(&format!("{}/api/workflows/slow_steps", s.base)).await;
    assert_eq!(st, StatusCode::OK);
    let layers: Vec<(String, u64)> = wf["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_string(),
                n["layer"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [
        ("in", 0),
        ("first", 1),
        ("second", 2),
        ("third", 3),
        ("out", 4),
    ]
    .iter()
    .map(|(n, l)| (n.to_string(), *l))
    .collect();
    assert_eq!(layers, want);
    assert_eq!(wf["nodes"][1]["type"], "core:Delay");
    assert_eq!(wf["edges"].as_array().unwrap().len(), 7);
    assert_eq!(
        wf["edges"][0],
        json!({"id": null, "source": "in", "sourceHandle": "text", "target": "first", "targetHandle": "value"})
    );
    assert_eq!(wf["tool"], "workflow:slow_steps");
    assert_eq!(wf["interfaceInputs"]["ms"]["dataFlowType"], "INTEGER");
    assert_eq!(wf["inputSchema"]["required"], json!(["text", "ms"]));
    // Branches that meet: text_stats' three splits share a layer.
    let (_, ts) = get_json(&format!("{}/api/workflows/workflow:text_stats", s.base)).await;
    let layer_of = |id: &str| {
        ts["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap()["layer"]
            .clone()
    };
    assert_eq!(
        (layer_of("words"), layer_of("lines"), layer_of("chars")),
        (json!(1), json!(1), json!(1))
    );
    assert_eq!(layer_of("out"), json!(4));
    let (st, err) = get_json(&format!("{}/api/workflows/slow_step", s.base)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(err["error"]["code"], "unknown_workflow");
    assert_eq!(err["error"]["suggestions"][0], "slow_steps");
}

/// Reads server-sent events from `r` until `n` events arrived; their (name, data) pairs.
async fn sse_events(r: &mut reqwest::Response, n: usize) -> Vec<(String, Value)> {
    let mut buf = String::new();
    let mut out = Vec::new();
    while out.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(30), r.chunk())
            .await
            .expect("an event within 30 s")
            .unwrap()
            .expect("the stream stays open");
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut name = String::from("message");
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                }
            }
            if !data.is_empty() {
                out.push((name, serde_json::from_str(&data).unwrap()));
            }
        }
    }
    out
}

#[tokio::test]
async fn plugins_show_failures_with_file_and_line_and_reloads_stream() {
    let home = web_home();
    let s = Server::start(home.path(), &["--watch"]);
    let (_, v) = get_json(&format!("{}/api/plugins", s.base)).await;
    assert_eq!(v["generation"], 0);
    let plugins = v["plugins"].as_array().unwrap();
    let names: Vec<&str> = plugins
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Broken", "Inn", "Notes"]);
    let broken = &plugins[0];
    assert_eq!(broken["status"], "failed");
    let problem = &broken["problems"][0];
    assert!(
        problem["file"]
            .as_str()
            .unwrap()
            .ends_with("plugins/Broken/plugin.yaml"),
        "{problem}"
    );
    assert_eq!(
        (problem["line"].clone(), problem["column"].clone()),
        (json!(7), json!(14))
    );
    assert!(
        problem["message"]
            .as_str()
            .unwrap()
            .contains("invalid boolean"),
        "{problem}"
    );
    let inn = &plugins[1];
    assert_eq!(inn["status"], "loaded");
    assert_eq!(inn["version"], "1.2.0");
    assert_eq!(inn["tools"], json!(["Inn:room_price", "Inn:slow_walk"]));
    assert_eq!(inn["permissions"]["tools"], json!(["workflow:slow_steps"]));
    assert_eq!(inn["problems"], json!([]));

    let mut events = reqwest::Client::new()
        .get(format!("{}/api/plugins/events", s.base))
        .send()
        .await
        .unwrap();
    assert!(events.headers()[CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let first = sse_events(&mut events, 1).await;
    assert_eq!(
        first,
        vec![(
            "engine".to_string(),
            json!({"generation": 0, "reloads": 0, "refused": null})
        )]
    );
    let dir = home.path().join("plugins/Bakery");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: Bakery\nversion: 1.0.0\ndescription: Bread.\n",
    )
    .unwrap();
    let next = sse_events(&mut events, 1).await;
    assert_eq!(
        next,
        vec![(
            "engine".to_string(),
            json!({"generation": 1, "reloads": 1, "refused": null})
        )]
    );
    let (_, v) = get_json(&format!("{}/api/plugins", s.base)).await;
    assert!(v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "Bakery"));
    assert_eq!(v["refusedReload"], Value::Null);

    // A change with a new problem is refused: the old engine serves on, and the explorer
    // says why.
    std::fs::write(dir.join("plugin.yaml"), "name: Bakery\nversion: [1\n").unwrap();
    let refused = sse_events(&mut events, 1).await;
    let (name, data) = &refused[0];
    assert_eq!(name, "engine");
    assert_eq!(
        (data["generation"].clone(), data["reloads"].clone()),
        (json!(1), json!(2))
    );
    let reasons = data["refused"]["reasons"].as_array().unwrap();
    assert!(
        reasons
            .iter()
            .any(|r| r.as_str().unwrap().contains("plugins/Bakery/plugin.yaml:")),
        "{reasons:?}"
    );
    let (_, v) = get_json(&format!("{}/api/plugins", s.base)).await;
    assert_eq!(v["refusedReload"], data["refused"]);
    assert!(v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "Bakery" && p["status"] == "loaded"));
}

#[tokio::test]
async fn agent_chat_turns_keep_a_session_and_show_calls_and_observations() {
    let home = web_home();
    let s = Server::start(home.path(), &[]);
    let c = reqwest::Client::new();
    let (_, list) = get_json(&format!("{}/api/agents", s.base)).await;
    assert_eq!(list["agents"][0]["id"], "host");
    assert_eq!(list["agents"][0]["name"], "Nob the host");
    let (_, agent) = get_json(&format!("{}/api/agents/host", s.base)).await;
    assert_eq!(agent["tools"], json!(["Inn:room_price", "system:echo"]));
    assert!(agent["manual"]
        .as_str()
        .unwrap()
        .contains("`<Inn:room_price>`"));

    let turn = |body: Value| {
        let c = c.clone();
        let url = format!("{}/api/agents/host/turn", s.base);
        async move {
            let r = c.post(url).json(&body).send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let (st, first) = turn(json!({"message": "Two nights in the suite?"})).await;
    assert_eq!(st, StatusCode::OK, "{first}");
    let session = first["session"].as_str().unwrap().to_string();
    assert_eq!(first["turn"]["index"], 1);
    assert_eq!(first["turn"]["input"], "Two nights in the suite?");
    let call = &first["turn"]["calls"][0];
    assert_eq!(call["tool"], "Inn:room_price");
    assert_eq!(call["args"], json!({"nights": "2", "room": "suite"}));
    assert_eq!(call["ok"], true);
    assert_eq!(call["value"]["total"], 180);
    assert!(call["observation"]
        .as_str()
        .unwrap()
        .starts_with("Observation: Tool Inn:room_price executed successfully."));
    assert_eq!(first["continue"], true);
    let (_, second) = turn(json!({"session": session, "message": null})).await;
    assert_eq!(second["session"], session.as_str());
    assert_eq!(second["turn"]["index"], 2);
    assert!(second["turn"]["input"]
        .as_str()
        .unwrap()
        .contains("Observation: Tool Inn:room_price"));
    assert_eq!(
        second["turn"]["output"],
        "Two nights in the suite cost 180 silver."
    );
    assert_eq!(second["continue"], false);

    // Errors: unknown agent (never read as a path), unknown session, bad body.
    for bad in ["nobody", "..%2Fagents%2Fhost", "hots"] {
        let r = c
            .post(format!("{}/api/agents/{bad}/turn", s.base))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{bad}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unknown_agent", "{bad}");
    }
    let (_, v) = get_json(&format!("{}/api/agents/hots", s.base)).await;
    assert_eq!(v["error"]["suggestions"], json!(["host"]));
    let (st, v) = turn(json!({"session": "nope", "message": "hi"})).await;
    assert_eq!(
        (st, v["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("unknown_session"))
    );
    let r = c
        .post(format!("{}/api/agents/host/turn", s.base))
        .header(CONTENT_TYPE, "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let (st, v) = turn(json!({"message": 5})).await;
    assert_eq!(
        (st, v["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("bad_request"))
    );
    // Ending a session.
    let end = c
        .delete(format!("{}/api/agents/host/sessions/{session}", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(end.status(), StatusCode::OK);
    let again = c
        .delete(format!("{}/api/agents/host/sessions/{session}", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn with_a_token_only_the_static_shell_and_assets_load_without_it() {
    let home = web_home();
    let s = Server::start(home.path(), &["--token", "t0ken"]);
    let c = reqwest::Client::new();
    let status = |path: &str, accept: Option<&str>, token: Option<&str>| {
        let mut req = c.get(format!("{}{path}", s.base));
        if let Some(a) = accept {
            req = req.header(ACCEPT, a);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap().status() }
    };
    let cases: &[(&str, Option<&str>, Option<&str>, StatusCode)] = &[
        ("/", Some(BROWSER_ACCEPT), None, StatusCode::OK),
        (
            "/tools/Inn:room_price",
            Some(BROWSER_ACCEPT),
            None,
            StatusCode::OK,
        ),
        ("/plugins", Some(BROWSER_ACCEPT), None, StatusCode::OK),
        ("/assets/app.js", None, None, StatusCode::OK),
        ("/assets/tam-markers.woff2", None, None, StatusCode::OK),
        (
            "/assets/tam-markers-license.txt",
            None,
            None,
            StatusCode::OK,
        ),
        ("/resources", Some(BROWSER_ACCEPT), None, StatusCode::OK),
        (
            "/api/resources",
            Some(BROWSER_ACCEPT),
            None,
            StatusCode::UNAUTHORIZED,
        ),
        // Data needs the token, whatever the Accept.
        (
            "/tools/Inn:room_price",
            None,
            None,
            StatusCode::UNAUTHORIZED,
        ),
        (
            "/api/catalog",
            Some(BROWSER_ACCEPT),
            None,
            StatusCode::UNAUTHORIZED,
        ),
        ("/api/plugins/events", None, None, StatusCode::UNAUTHORIZED),
        (
            "/api/catalog",
            None,
            Some("wrong"),
            StatusCode::UNAUTHORIZED,
        ),
        ("/api/catalog", None, Some("t0ken"), StatusCode::OK),
        ("/tools/Inn:room_price", None, Some("t0ken"), StatusCode::OK),
    ];
    for (path, accept, token, want) in cases {
        assert_eq!(
            status(path, *accept, *token).await,
            *want,
            "{path} {accept:?} {token:?}"
        );
    }
}

/// Issue 23 item 22: the agent page may pick one of the home's scripted models for a new
/// session, and only those.
#[tokio::test]
async fn a_chat_may_pick_a_scripted_model_of_the_home() {
    let home = web_home();
    // tavern.toml names no model: the session's model comes from the page.
    std::fs::write(home.path().join("tavern.toml"), "[llm]\nstream = false\n").unwrap();
    let s = Server::start(home.path(), &[]);
    let (_, agent) = get_json(&format!("{}/api/agents/host", s.base)).await;
    assert_eq!(
        agent["scriptedModels"],
        json!(["scripted:replies/host.json"]),
        "{agent}"
    );
    let c = reqwest::Client::new();
    let url = format!("{}/api/agents/host/turn", s.base);
    let r = c
        .post(&url)
        .json(&json!({"message": "Two nights in the suite?", "llm": "scripted:replies/host.json"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["turn"]["output"].as_str().is_some_and(|o| !o.is_empty()),
        "{v}"
    );
    // Any other file is refused, naming the ones offered.
    let r = c
        .post(&url)
        .json(&json!({"message": "hi", "llm": "scripted:/etc/passwd"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e["error"]["suggestions"],
        json!(["scripted:replies/host.json"]),
        "{e}"
    );
}
