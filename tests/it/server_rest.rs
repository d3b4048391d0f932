//! The REST API of `tavern serve` with a real HTTP client (reqwest) against the real binary:
//! tool lists in every shape, invoke answering what `tavern call` prints, and the guards
//! (foreign Origin 403, token 401, body limit 413).

use crate::server_support;

use std::process::Command;

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{fixture_home, tavern, Server};

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

#[tokio::test]
async fn tool_lists_in_every_shape() {
    let s = Server::start(&fixture_home(), &[]);
    let c = client();
    let v: Value = c
        .get(format!("{}/api/tools", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tools = v["tools"].as_array().expect("tools array");
    let shout = tools
        .iter()
        .find(|t| t["id"] == "LuaDemo:shout")
        .expect("LuaDemo:shout listed");
    assert_eq!(shout["name"], "LuaDemo_shout");
    assert_eq!(shout["title"], "LuaDemo:shout");
    assert_eq!(shout["inputSchema"]["additionalProperties"], json!(false));
    assert_eq!(shout["annotations"]["readOnlyHint"], json!(true));
    for key in [
        "id",
        "name",
        "title",
        "description",
        "inputSchema",
        "annotations",
    ] {
        assert!(
            tools.iter().all(|t| t.get(key).is_some()),
            "every tool has {key}"
        );
    }
    // Seed 004's alias answers the same list.
    let alias: Value = c
        .get(format!("{}/tools", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(alias, v);

    let oa: Value = c
        .get(format!("{}/api/tools?format=openai", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let f = &oa["tools"][0];
    assert_eq!(f["type"], "function");
    assert!(f["function"]["name"]
        .as_str()
        .is_some_and(|n| n.len() <= 64));
    assert!(f["function"]["parameters"].is_object());
    let an: Value = c
        .get(format!("{}/api/tools?format=anthropic", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(an["tools"][0]["input_schema"].is_object());
    assert!(an["tools"][0].get("inputSchema").is_none());
    let mcp: Value = c
        .get(format!("{}/api/tools?format=mcp", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(mcp["tools"][0]["inputSchema"].is_object());
    assert!(mcp["tools"][0].get("id").is_none());

    // `tavern tools --format openai` prints the same export.
    let out = Command::new(tavern())
        .arg("--home")
        .arg(fixture_home())
        .args(["tools", "--format", "openai"])
        .output()
        .unwrap();
    let cli: Value =
        serde_json::from_slice(&out.stdout).expect("tools --format openai prints JSON");
    assert_eq!(cli, oa);

    let bad = c
        .get(format!("{}/api/tools?format=xml", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let e: Value = bad.json().await.unwrap();
    assert_eq!(e["error"]["code"], "bad_format");
    assert!(e["error"]["suggestions"]
        .as_array()
        .is_some_and(|s| !s.is_empty()));
}

#[tokio::test]
async fn one_tool_and_unknown_tool() {
    let s = Server::start(&fixture_home(), &[]);
    let c = client();
    let r = c
        .get(format!("{}/api/tools/LuaDemo:shout", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["id"], "LuaDemo:shout");
    // The wire name finds it too.
    let v2: Value = c
        .get(format!("{}/api/tools/LuaDemo_shout", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v2, v);
    let r = c
        .get(format!("{}/api/tools/LuaDemo:shot", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "unknown_tool");
    assert_eq!(e["error"]["suggestions"], json!(["LuaDemo:shout"]));
}

#[tokio::test]
async fn invoke_answers_what_tavern_call_prints() {
    let s = Server::start(&fixture_home(), &[]);
    let c = client();
    let tam = "<|[REQUEST_TOOL]|>\ncommand:「始」RhaiDemo:add「末」\na:「始」2「末」\nb:「始」40「末」\n<|[END_TOOL]|>\n";
    let r = c
        .post(format!("{}/api/invoke", s.base))
        .header("content-type", "text/plain")
        .body(tam)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let rest: Value = r.json().await.unwrap();
    assert_eq!(rest["results"][0]["value"], json!(42));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("call.tam");
    std::fs::write(&file, tam).unwrap();
    let out = Command::new(tavern())
        .arg("--home")
        .arg(fixture_home())
        .arg("call")
        .arg(&file)
        .output()
        .unwrap();
    let cli: Value = serde_json::from_slice(&out.stdout).expect("tavern call prints JSON");
    assert_eq!(rest, cli, "REST invoke and tavern call agree");

    // One JSON call, in tavern's and in MCP's spelling, and a list of calls.
    let one: Value = c
        .post(format!("{}/api/invoke", s.base))
        .json(&json!({"tool": "LuaDemo:shout", "args": {"text": "hey"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["results"][0]["value"], "HEY!");
    assert_eq!(one["results"][0]["ok"], true);
    let list: Value = c
        .post(format!("{}/invoke", s.base))
        .json(&json!([
            {"name": "RhaiDemo_add", "arguments": {"a": 1, "b": 2}},
            {"tool": "RhaiDemo:add", "args": {"a": "x", "b": 2}}
        ]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["results"][0]["value"], json!(3));
    assert_eq!(list["results"][1]["ok"], json!(false));
    assert_eq!(list["results"][1]["error"]["code"], "invalid_parameters");
    assert!(list["results"][1]["observation"]
        .as_str()
        .unwrap()
        .starts_with("Observation: Error - "));
    // A config-driven tool through REST.
    let cfg: Value = c
        .post(format!("{}/api/invoke", s.base))
        .json(&json!({"name": "txt2img_portrait", "arguments": {"positive": "owl", "seed": 7}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        cfg["results"][0]["value"],
        "portrait: owl | avoid: blurry, low quality | seed 7"
    );
}

#[tokio::test]
async fn foreign_origin_is_forbidden() {
    let s = Server::start(&fixture_home(), &[]);
    let c = client();
    for path in ["/api/tools", "/mcp"] {
        let r = c
            .get(format!("{}{path}", s.base))
            .header("origin", "https://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let e: Value = c
        .get(format!("{}/api/tools", s.base))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(e["error"]["code"], "forbidden_origin");
    let ok = c
        .get(format!("{}/api/tools", s.base))
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
}

#[tokio::test]
async fn token_is_required_when_set() {
    let s = Server::start_env(&fixture_home(), &[], &[("TAVERN_TOKEN", "s3cret")]);
    let c = client();
    for path in ["/api/tools", "/mcp"] {
        let r = c.get(format!("{}{path}", s.base)).send().await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::UNAUTHORIZED,
            "{path} without a token"
        );
    }
    let r = c
        .get(format!("{}/api/tools", s.base))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "unauthorized");
    let r = c
        .get(format!("{}/api/tools", s.base))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn oversized_bodies_and_arguments_get_413() {
    let s = Server::start(
        &fixture_home(),
        &["--max-body-bytes", "2000", "--max-args-bytes", "500"],
    );
    let c = client();
    let big = "x".repeat(5000);
    let r = c
        .post(format!("{}/api/invoke", s.base))
        .json(&json!({"tool": "LuaDemo:echo", "args": {"text": big}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "payload_too_large");
    let r = c
        .post(format!("{}/mcp", s.base))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": big}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE, "/mcp");
    // Under the body limit but over the arguments limit.
    let mid = "y".repeat(1000);
    let r = c
        .post(format!("{}/api/invoke", s.base))
        .json(&json!({"tool": "LuaDemo:echo", "args": {"text": mid}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "arguments_too_large");
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_lets_calls_in_flight_finish() {
    let s = Server::start(&fixture_home(), &[]);
    let c = client();
    let url = format!("{}/api/invoke", s.base);
    let call = tokio::spawn(async move {
        c.post(url)
            .json(&json!({"tool": "workflow:slow_echo", "args": {"text": "done", "ms": 800}}))
            .send()
            .await
            .map(|r| r.status())
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // SAFETY-free: kill(2) with a pid we started.
    let rc = unsafe { libc::kill(s.pid() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = call
        .await
        .unwrap()
        .expect("the call in flight got its answer");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        s.wait(std::time::Duration::from_secs(10)),
        Some(0),
        "exits 0 after draining"
    );
}
