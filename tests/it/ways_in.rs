//! Every way in reads and runs a body the same way (issue 22): each case of
//! `tests/data/ways_in/cases.json` goes through `tavern call` (the binary), `POST /api/invoke`
//! (as text and, for JSON bodies, as JSON), a job (`POST /api/jobs`, then `GET` until it
//! ends) and, for single calls, MCP `tools/call`. The binary's results must match the case's
//! `expect` (tool, called_as, step, ok, value, error code, dispatch), and every other way
//! must answer exactly the binary's JSON. Every parse case of `tests/data/*.jsonl` goes
//! through the binary, invoke and a job too. The C ABI leg is `capi/tests/ways_in.rs`.

use crate::{cli_support, server_support};

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

/// The cases, each `{name, body (text or JSON), mcp?: {name, arguments}, expect: [...]}`.
pub fn cases() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ways_in/cases.json");
    let text = std::fs::read_to_string(path).expect("read the ways-in cases");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("the cases are JSON");
    assert!(
        !cases.is_empty(),
        "{path} holds no case: the test would prove nothing"
    );
    cases
}

/// The body as sent: text as is, JSON serialized.
fn body_text(case: &Value) -> String {
    match &case["body"] {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// What a result is compared on: tool, called_as, step, ok, value, error code, dispatch.
pub fn project(result: &Value) -> Value {
    let mut m = Map::new();
    for k in ["tool", "called_as", "step", "ok", "value", "dispatch"] {
        if let Some(v) = result.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    if let Some(code) = result.get("error").and_then(|e| e.get("code")) {
        m.insert("error".into(), code.clone());
    }
    Value::Object(m)
}

fn projected(report: &Value) -> Value {
    Value::Array(
        report["results"]
            .as_array()
            .unwrap_or_else(|| panic!("no results in {report}"))
            .iter()
            .map(project)
            .collect(),
    )
}

async fn post(c: &reqwest::Client, url: &str, case: &Value, as_json: bool) -> reqwest::Response {
    let ct = if as_json {
        "application/json"
    } else {
        "text/plain"
    };
    c.post(url)
        .header("content-type", ct)
        .body(body_text(case))
        .send()
        .await
        .unwrap()
}

async fn job(c: &reqwest::Client, base: &str, case: &Value, as_json: bool) -> Value {
    let r = post(c, &format!("{base}/api/jobs"), case, as_json).await;
    assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    let v: Value = r.json().await.unwrap();
    let id = v["id"].as_str().expect("job id").to_string();
    wait_job(c, base, &id).await
}

/// The `result` of job `id` once it ended.
async fn wait_job(c: &reqwest::Client, base: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let j: Value = c
            .get(format!("{base}/api/jobs/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if j["status"] != "queued" && j["status"] != "running" {
            return j["result"].clone();
        }
        assert!(Instant::now() < deadline, "job {id} did not end: {j}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The MCP answer to one `tools/call`, as the fields it has: `ok` and `value`, or the
/// Observation text, or the JSON-RPC error's code.
fn mcp_view(response: &Value) -> Value {
    if let Some(e) = response.get("error") {
        return json!({"rpc_error": e["data"]["code"]});
    }
    let r = &response["result"];
    if r["isError"] == json!(true) {
        return json!({"ok": false, "observation": r["content"][0]["text"]});
    }
    let value = match r.get("structuredContent") {
        // The call's id rides along (`call_id`); the value is the rest.
        Some(Value::Object(m)) => {
            let mut m = m.clone();
            assert!(m.remove("call_id").is_some(), "{response}");
            Value::Object(m)
        }
        Some(v) => v.clone(),
        None => {
            let text = r["content"][0]["text"].as_str().unwrap_or_default();
            // A string value is sent as its text, anything else as JSON text.
            serde_json::from_str::<Value>(text)
                .ok()
                .filter(|v| !v.is_string())
                .unwrap_or_else(|| json!(text))
        }
    };
    json!({"ok": true, "value": value})
}

/// What MCP must answer for the binary's one result.
fn mcp_expected(result: &Value) -> Value {
    if result["ok"] == json!(true) {
        return json!({"ok": true, "value": result["value"]});
    }
    if result["error"]["code"] == "unknown_tool" {
        return json!({"rpc_error": "unknown_tool"});
    }
    json!({"ok": false, "observation": result["observation"]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_in_answers_the_same() {
    let cases = cases();
    let home = tempfile::tempdir().unwrap();
    let server = server_support::Server::start(home.path(), &[]);
    let c = reqwest::Client::new();
    let (mut mcp_child, mut mcp_in, mcp_out) = server_support::spawn_mcp(home.path());
    writeln!(
        mcp_in,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "ways-in", "version": "1"}}})
    )
    .unwrap();
    writeln!(
        mcp_in,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let mut mcp_id = 0;
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("a case has a name");
        let text = body_text(case);
        let is_json = !case["body"].is_string();

        let cli = cli_support::tavern(home.path(), &["call"], text.as_bytes());
        cli.assert_no_panic();
        let cli_json = cli.json();
        assert_eq!(
            projected(&cli_json),
            case["expect"],
            "{name}: tavern call answered {cli_json}"
        );
        let all_ok = cli_json["results"]
            .as_array()
            .is_some_and(|r| r.iter().all(|x| x["ok"] == json!(true)));
        assert_eq!(cli.code, if all_ok { 0 } else { 1 }, "{name}: exit code");

        let mut ways = vec![(false, "invoke (text)")];
        if is_json {
            ways.push((true, "invoke (JSON)"));
        }
        for (as_json, way) in ways {
            let r = post(&c, &format!("{}/api/invoke", server.base), case, as_json).await;
            let got: Value = r.json().await.unwrap();
            assert_eq!(got, cli_json, "{name}: {way} differs from tavern call");
            let got = job(&c, &server.base, case, as_json).await;
            assert_eq!(
                got, cli_json,
                "{name}: job ({way}) differs from tavern call"
            );
        }

        if let Some(call) = case.get("mcp") {
            mcp_id += 1;
            writeln!(
                mcp_in,
                "{}",
                json!({"jsonrpc": "2.0", "id": mcp_id, "method": "tools/call", "params": call})
            )
            .unwrap();
            mcp_in.flush().unwrap();
            let response = loop {
                let v = mcp_out
                    .recv_timeout(Duration::from_secs(30))
                    .expect("an MCP response within 30 s");
                if v.get("id") == Some(&json!(mcp_id)) {
                    break v;
                }
            };
            let results = cli_json["results"].as_array().unwrap();
            assert_eq!(results.len(), 1, "{name}: an MCP case is a single call");
            assert_eq!(
                mcp_view(&response),
                mcp_expected(&results[0]),
                "{name}: MCP tools/call answered {response}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, cases.len());
    let _ = mcp_child.kill();
    let _ = mcp_child.wait();
}

/// Every parse case of `tests/data/parse_cases*.jsonl` (model output of every format, with
/// its prose, diagnostics and chains; no tool in the home, so calls fail as unknown):
/// `tavern call`, `POST /api/invoke` and a job answer the same JSON, one result per call
/// the case expects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_parse_case_answers_the_same_everywhere() {
    let mut cases = Vec::new();
    for file in ["parse_cases.jsonl", "parse_cases_tavern.jsonl"] {
        let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("read the parse cases");
        cases.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str::<Value>(l).expect("a parse case is JSON")),
        );
    }
    assert!(
        !cases.is_empty(),
        "no parse case: the test would prove nothing"
    );
    let home = tempfile::tempdir().unwrap();
    let server = server_support::Server::start(home.path(), &[]);
    let c = reqwest::Client::new();
    for case in &cases {
        let name = case["name"].as_str().expect("a case has a name");
        let format = case["format"].as_str().unwrap_or("auto");
        let input = case["input"].as_str().expect("a case has an input");
        let cli = cli_support::tavern(home.path(), &["call", "--format", format], input.as_bytes());
        let cli_json = cli.json();
        if let Some(calls) = case["calls"].as_array() {
            assert_eq!(
                cli_json["results"].as_array().map(Vec::len),
                Some(calls.len()),
                "{name}: one result per call: {cli_json}"
            );
        }
        let body = json!({"body": input});
        let url = format!("{}/api/invoke?format={format}", server.base);
        let got: Value = post(&c, &url, &body, false).await.json().await.unwrap();
        assert_eq!(
            got, cli_json,
            "{name}: POST /api/invoke differs from tavern call"
        );
        let r = post(
            &c,
            &format!("{}/api/jobs?format={format}", server.base),
            &body,
            false,
        )
        .await;
        assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED, "{name}");
        let id = r.json::<Value>().await.unwrap()["id"]
            .as_str()
            .expect("job id")
            .to_string();
        let got = wait_job(&c, &server.base, &id).await;
        assert_eq!(got, cli_json, "{name}: the job differs from tavern call");
    }
}
