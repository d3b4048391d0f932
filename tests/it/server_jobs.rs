//! Jobs on the real `tavern serve` binary over loopback HTTP (reqwest): results, progress and
//! node events, replay to late subscribers, cancellation that really stops a looping Lua
//! tool and a sleeping process, expiry and the count bound, a restart (410 `job_lost`), and
//! the audit event stream. No timing assertions: only generous "within N s" guards.

use crate::server_support;

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{get_job, temp_home, wait_status, Server};

/// A plugin with a Lua tool that loops until stopped (appending to `jobs_out/ticks.txt`), a
/// process tool that sleeps, and a tool its own hook always vetoes.
fn add_jobs_plugin(home: &Path) {
    let dir = home.join("plugins/JobsDemo");
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: JobsDemo\nversion: 1.0.0\ndescription: Tools for the jobs tests.\n\
         tools:\n  entry: ./tools\n\
         permissions:\n  hooks: [\"tool:before-invoke\"]\n  fs:\n    write: [\"./jobs_out\"]\n  processes: true\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.lua"),
        r#"
api.tools.register{ id = "spin", description = "Loops until stopped, appending to ticks.txt.",
  handler = function()
    local n = 0
    while true do
      n = n + 1
      if n % 2000 == 0 then api.fs.append("/ticks.txt", "x") end
    end
  end }
api.tools.register{ id = "forbidden", description = "Always vetoed by this plugin's hook.",
  handler = function() return "ran" end }
api.hooks.on("tool:before-invoke", function(ev)
  if ev.tool == "JobsDemo:forbidden" then return false, "forbidden by the jobs test" end
end)
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("tools/sleeper.tool.json"),
        r#"{"id": "JobsDemo:sleeper", "description": "Sleeps (a process tool).",
            "parameters": {"type": "object", "properties": {}},
            "implementation": {"type": "script", "command": "sleep 31.4159", "timeout_ms": 120000}}"#,
    )
    .unwrap();
}

fn home() -> tempfile::TempDir {
    let h = temp_home();
    add_jobs_plugin(h.path());
    h
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    event: String,
    id: Option<String>,
    data: Value,
}

fn parse_sse(text: &str) -> Vec<Sse> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut id = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(v).expect("event data is JSON"));
                }
            }
            Some(Sse {
                event: event?,
                id,
                data: data?,
            })
        })
        .collect()
}

async fn post_job(c: &reqwest::Client, base: &str, body: Value) -> Value {
    let r = c
        .post(format!("{base}/api/jobs"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let v: Value = r.json().await.unwrap();
    let id = v["id"].as_str().expect("job id").to_string();
    assert!(id.starts_with("job-"), "{id}");
    assert_eq!(v["href"], format!("/api/jobs/{id}"));
    assert!(v["status"] == "queued" || v["status"] == "running", "{v}");
    v
}

/// Reads a job's whole event stream (it closes after `end`), within `max`.
async fn all_events(c: &reqwest::Client, base: &str, id: &str, max: Duration) -> Vec<Sse> {
    let r = c
        .get(format!("{base}/api/jobs/{id}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let text = tokio::time::timeout(max, r.text())
        .await
        .expect("the event stream closes after `end`")
        .unwrap();
    parse_sse(&text)
}

async fn wait_final(c: &reqwest::Client, base: &str, id: &str, max: Duration) -> Value {
    wait_status(c, base, id, &["succeeded", "failed", "cancelled"], max).await
}

#[tokio::test]
async fn a_workflow_job_streams_nodes_progress_and_its_result() {
    let h = home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let body = json!({"tool": "workflow:slow_echo", "args": {"text": "hi", "ms": 300}});
    let job = post_job(&c, &s.base, body.clone()).await;
    let id = job["id"].as_str().unwrap();
    let events = all_events(&c, &s.base, id, Duration::from_secs(30)).await;

    // Status: queued first, end last, with the result.
    assert_eq!(events[0].event, "status");
    assert_eq!(events[0].data, json!({"status": "queued"}));
    let end = events.last().unwrap();
    assert_eq!(end.event, "end");
    assert_eq!(end.data["status"], "succeeded");
    assert_eq!(end.data["error"], Value::Null);
    assert_eq!(end.data["result"]["results"][0]["value"], "hi");
    assert_eq!(
        events.iter().filter(|e| e.event == "end").count(),
        1,
        "one end event"
    );
    // Ids count up from 0.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.id.as_deref(), Some(i.to_string().as_str()));
    }

    // Every node: pending, then running, then succeeded, in that order.
    let nodes: Vec<&Sse> = events.iter().filter(|e| e.event == "node").collect();
    for node in ["in", "wait", "out"] {
        let states: Vec<&str> = nodes
            .iter()
            .filter(|e| e.data["node"] == node)
            .map(|e| e.data["status"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["pending", "running", "succeeded"], "node {node}");
    }
    let wait = nodes
        .iter()
        .find(|e| e.data["node"] == "wait" && e.data["status"] == "succeeded")
        .unwrap();
    assert_eq!(wait.data["workflow"], "slow_echo");
    assert_eq!(wait.data["type"], "core:Delay");
    assert!(wait.data["elapsed_ms"].as_f64().unwrap() > 0.0);
    // Every node is announced before any runs.
    let first_running = nodes
        .iter()
        .position(|e| e.data["status"] == "running")
        .unwrap();
    assert_eq!(first_running, 3);

    // The call event, and progress that only goes up and ends complete.
    let calls: Vec<&Sse> = events.iter().filter(|e| e.event == "call").collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].data["tool"], "workflow:slow_echo");
    assert_eq!(calls[0].data["ok"], true);
    let progress: Vec<&Sse> = events.iter().filter(|e| e.event == "progress").collect();
    assert!(progress.len() >= 4);
    let mut last = 0;
    for p in &progress {
        let d = p.data["done"].as_u64().unwrap();
        assert!(d >= last, "progress went backwards: {:?}", p.data);
        last = d;
    }
    let fin = &progress.last().unwrap().data;
    assert_eq!(fin["done"], fin["total"]);
    assert_eq!(fin["total"], 4, "1 call + 3 nodes");

    // The job itself, and its result is exactly what /api/invoke answers.
    let (st, j) = get_job(&c, &s.base, id).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(j["status"], "succeeded");
    for k in ["created_ms", "started_ms", "ended_ms", "elapsed_ms"] {
        assert!(j[k].is_u64(), "{k}: {j}");
    }
    assert!(j["ended_ms"].as_u64() >= j["started_ms"].as_u64());
    assert_eq!(j["progress"]["done"], 4);
    let direct: Value = c
        .post(format!("{}/api/invoke", s.base))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(j["result"], direct);

    // A late subscriber gets the same events, replayed.
    let again = all_events(&c, &s.base, id, Duration::from_secs(10)).await;
    assert_eq!(again, events);
    // ...and one resuming after event 5 gets the rest.
    let resumed = c
        .get(format!("{}/api/jobs/{id}/events", s.base))
        .header("Last-Event-ID", "5")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(parse_sse(&resumed), events[6..].to_vec());
}

#[tokio::test]
async fn text_bodies_failures_and_the_list() {
    let h = home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    // A TAM text body, like /api/invoke takes.
    let tam = "<|[REQUEST_TOOL]|>\ncommand:「始」LuaDemo:shout「末」\ntext:「始」hey「末」\n<|[END_TOOL]|>\n";
    let r = c
        .post(format!("{}/api/jobs", s.base))
        .header("content-type", "text/plain")
        .body(tam)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let a: Value = r.json().await.unwrap();
    let a_id = a["id"].as_str().unwrap().to_string();
    let ja = wait_final(&c, &s.base, &a_id, Duration::from_secs(30)).await;
    assert_eq!(ja["status"], "succeeded", "{ja}");
    assert_eq!(ja["result"]["results"][0]["value"], "HEY!");

    // A failing tool: the job fails with the call's error.
    let b = post_job(
        &c,
        &s.base,
        json!({"tool": "LuaDemo:fail", "args": {"why": "testing"}}),
    )
    .await;
    let b_id = b["id"].as_str().unwrap().to_string();
    let jb = wait_final(&c, &s.base, &b_id, Duration::from_secs(30)).await;
    assert_eq!(jb["status"], "failed");
    assert!(jb["error"]["code"].is_string(), "{jb}");
    assert!(jb["error"]["message"].as_str().unwrap().contains("testing"));
    assert_eq!(jb["result"]["results"][0]["ok"], false);

    // A request /api/invoke refuses with 4xx is refused the same way, and makes no job.
    let bad = c
        .post(format!("{}/api/jobs?format=bogus", s.base))
        .body(tam)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let e: Value = bad.json().await.unwrap();
    assert_eq!(e["error"]["code"], "bad_format");

    // Newest first.
    let list: Value = c
        .get(format!("{}/api/jobs", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [b_id.as_str(), a_id.as_str()]);

    // DELETE of a finished job changes nothing; unknown ids are 404 everywhere.
    let d = c
        .delete(format!("{}/api/jobs/{a_id}", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(d.status(), StatusCode::OK);
    let dj: Value = d.json().await.unwrap();
    assert_eq!(dj, get_job(&c, &s.base, &a_id).await.1);
    assert_eq!(dj["status"], "succeeded");
    for (method, path) in [
        ("GET", "/api/jobs/job-nope-1"),
        ("DELETE", "/api/jobs/job-nope-1"),
        ("GET", "/api/jobs/job-nope-1/events"),
    ] {
        let r = c
            .request(method.parse().unwrap(), format!("{}{path}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{method} {path}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "unknown_job");
    }
}

fn ticks(home: &Path) -> usize {
    std::fs::metadata(home.join("jobs_out/ticks.txt"))
        .map(|m| m.len() as usize)
        .unwrap_or(0)
}

#[tokio::test]
async fn cancel_stops_a_looping_lua_tool() {
    let h = home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let job = post_job(&c, &s.base, json!({"tool": "JobsDemo:spin", "args": {}})).await;
    let id = job["id"].as_str().unwrap();
    // Wait until the loop is visibly running.
    let deadline = Instant::now() + Duration::from_secs(20);
    while ticks(h.path()) < 3 {
        assert!(Instant::now() < deadline, "the Lua loop never wrote");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t0 = Instant::now();
    let d = c
        .delete(format!("{}/api/jobs/{id}", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(d.status(), StatusCode::OK);
    let j: Value = d.json().await.unwrap();
    assert_eq!(j["status"], "cancelled", "{j}");
    assert_eq!(j["error"]["code"], "cancelled");
    // The tool itself ended on the cancellation (within the grace), so the partial report
    // is kept.
    assert_eq!(
        j["result"]["results"][0]["error"]["code"], "cancelled",
        "{j}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "DELETE answers promptly"
    );
    // The script really stopped: no more writes after the job ended.
    let n = ticks(h.path());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(ticks(h.path()), n, "the Lua loop kept running after cancel");
    // The events end with the cancellation.
    let events = all_events(&c, &s.base, id, Duration::from_secs(10)).await;
    let end = events.last().unwrap();
    assert_eq!(end.event, "end");
    assert_eq!(end.data["status"], "cancelled");
}

/// Pids whose command line holds `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                out.push(pid);
            }
        }
    }
    out
}

#[tokio::test]
async fn cancel_kills_a_sleeping_process_tool() {
    let h = home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let job = post_job(&c, &s.base, json!({"tool": "JobsDemo:sleeper", "args": {}})).await;
    let id = job["id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while pids_with("sleep 31.4159").is_empty() {
        let (_, j) = get_job(&c, &s.base, id).await;
        // Queued until a worker takes it, then running: anything else means it ended.
        assert!(
            matches!(j["status"].as_str(), Some("queued" | "running")),
            "the process tool ended early: {j}"
        );
        assert!(Instant::now() < deadline, "the process never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let d = c
        .delete(format!("{}/api/jobs/{id}", s.base))
        .send()
        .await
        .unwrap();
    let j: Value = d.json().await.unwrap();
    assert_eq!(j["status"], "cancelled", "{j}");
    assert_eq!(
        j["result"]["results"][0]["error"]["code"], "cancelled",
        "{j}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pids_with("sleep 31.4159").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the process outlived its cancelled job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn finished_jobs_expire_and_the_count_is_bounded() {
    let h = home();
    let s = Server::start(h.path(), &["--job-ttl", "1", "--max-jobs", "2"]);
    let c = reqwest::Client::new();
    let echo = |t: &str| json!({"tool": "LuaDemo:echo", "args": {"text": t}});
    // Count: the third job evicts the oldest finished one.
    let mut ids = Vec::new();
    for t in ["a", "b", "c"] {
        let j = post_job(&c, &s.base, echo(t)).await;
        let id = j["id"].as_str().unwrap().to_string();
        wait_final(&c, &s.base, &id, Duration::from_secs(20)).await;
        ids.push(id);
    }
    let (st, e) = get_job(&c, &s.base, &ids[0]).await;
    assert_eq!(st, StatusCode::GONE);
    assert_eq!(e["error"]["code"], "job_expired");
    let list: Value = c
        .get(format!("{}/api/jobs", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["jobs"].as_array().unwrap().len(), 2);
    // Time: past the 1 s ttl the others are gone too.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (st, e) = get_job(&c, &s.base, &ids[2]).await;
        if st == StatusCode::GONE {
            assert_eq!(e["error"]["code"], "job_expired");
            break;
        }
        assert_eq!(st, StatusCode::OK);
        assert!(Instant::now() < deadline, "the job never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = c
        .get(format!("{}/api/jobs/{}/events", s.base, ids[1]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::GONE);
}

#[tokio::test]
async fn a_restart_answers_410_job_lost_for_earlier_ids() {
    let h = home();
    let c = reqwest::Client::new();
    let old = {
        let s = Server::start(h.path(), &[]);
        let j = post_job(
            &c,
            &s.base,
            json!({"tool": "LuaDemo:echo", "args": {"text": "x"}}),
        )
        .await;
        let id = j["id"].as_str().unwrap().to_string();
        wait_final(&c, &s.base, &id, Duration::from_secs(20)).await;
        id
    };
    let s = Server::start(h.path(), &[]);
    let (st, e) = get_job(&c, &s.base, &old).await;
    assert_eq!(st, StatusCode::GONE);
    assert_eq!(e["error"]["code"], "job_lost");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("restarted"), "{msg}");
    assert!(msg.contains("created at"), "{msg}");
    for (method, path) in [
        ("DELETE", format!("/api/jobs/{old}")),
        ("GET", format!("/api/jobs/{old}/events")),
    ] {
        let r = c
            .request(method.parse().unwrap(), format!("{}{path}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::GONE, "{method} {path}");
    }
    // An id never issued is not "lost": 404.
    let (st, e) = get_job(&c, &s.base, "job-000000000000-1").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(e["error"]["code"], "unknown_job");
    // A new job on the restarted server has a new boot part.
    let j = post_job(
        &c,
        &s.base,
        json!({"tool": "LuaDemo:echo", "args": {"text": "y"}}),
    )
    .await;
    let new_boot = j["id"].as_str().unwrap().rsplit_once('-').unwrap().0;
    assert_ne!(new_boot, old.rsplit_once('-').unwrap().0);
}

#[tokio::test]
async fn a_home_that_cannot_be_written_still_serves_jobs() {
    let h = home();
    // A file where the state directory should be: the journal cannot be created.
    std::fs::write(h.path().join(".tavern"), "not a directory").unwrap();
    let c = reqwest::Client::new();
    let old = {
        let s = Server::start(h.path(), &[]);
        let j = post_job(
            &c,
            &s.base,
            json!({"tool": "LuaDemo:echo", "args": {"text": "x"}}),
        )
        .await;
        let id = j["id"].as_str().unwrap().to_string();
        let fin = wait_final(&c, &s.base, &id, Duration::from_secs(20)).await;
        assert_eq!(fin["status"], "succeeded");
        id
    };
    let s = Server::start(h.path(), &[]);
    let (st, e) = get_job(&c, &s.base, &old).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{e}");
}

/// Reads SSE from `r` until `pred` holds for the events so far (or `max` passes).
async fn read_until(
    r: &mut reqwest::Response,
    max: Duration,
    pred: impl Fn(&[Sse]) -> bool,
) -> Vec<Sse> {
    let mut buf = String::new();
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let events = parse_sse(&buf);
        if pred(&events) {
            return events;
        }
        let chunk = tokio::time::timeout_at(deadline, r.chunk())
            .await
            .unwrap_or_else(|_| panic!("stream did not show what was expected: {events:?}"))
            .unwrap()
            .expect("the stream stays open");
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test]
async fn the_audit_stream_shows_calls_and_vetoes() {
    let h = home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let mut stream = c
        .get(format!("{}/api/audit/events", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    // The subscription is live once the response headers arrived; give the server a beat
    // anyway by retrying the calls until the records show up.
    let invoke = |body: Value| {
        let c = c.clone();
        let url = format!("{}/api/invoke", s.base);
        async move { c.post(url).json(&body).send().await.unwrap() }
    };
    invoke(json!({"tool": "LuaDemo:echo", "args": {"text": "audited"}})).await;
    let r: Value = invoke(json!({"tool": "JobsDemo:forbidden", "args": {}}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r["results"][0]["error"]["code"], "vetoed", "{r}");
    let events = read_until(&mut stream, Duration::from_secs(20), |evs| {
        let call = evs.iter().any(|e| {
            e.data["event"] == "call"
                && e.data["tool"] == "LuaDemo:echo"
                && e.data["outcome"] == "ok"
        });
        let veto = evs.iter().any(|e| {
            e.data["event"] == "decision"
                && e.data["tool"] == "JobsDemo:forbidden"
                && e.data["outcome"] == "vetoed"
        });
        call && veto
    })
    .await;
    assert!(events.iter().all(|e| e.event == "audit"));
    let call = events
        .iter()
        .find(|e| e.data["tool"] == "LuaDemo:echo")
        .unwrap();
    assert_eq!(call.data["caller"], "remote:rest");
    assert!(call.data["ts"].is_string());
    assert!(call.data["duration_ms"].is_number());
    let veto = events
        .iter()
        .find(|e| e.data["event"] == "decision")
        .unwrap();
    assert!(veto.data["reason"]
        .as_str()
        .unwrap()
        .contains("forbidden by the jobs test"));
}

/// Issue 24 item 3: finished jobs past `--max-job-bytes` are evicted oldest first (410
/// `job_expired`), the list leaves results out unless asked and pages, and while running
/// jobs alone pass the budget a new job is refused with 503 `job_budget_exceeded`.
#[tokio::test]
async fn the_job_byte_budget_evicts_finished_jobs_and_refuses_when_running_ones_fill_it() {
    let h = home();
    let s = Server::start(h.path(), &["--max-job-bytes", "180000"]);
    let c = reqwest::Client::new();
    let big = |t: &str| json!({"tool": "LuaDemo:echo", "args": {"text": t.repeat(100_000)}});
    let mut ids = Vec::new();
    for t in ["a", "b"] {
        let j = post_job(&c, &s.base, big(t)).await;
        let id = j["id"].as_str().unwrap().to_string();
        let done = wait_final(&c, &s.base, &id, Duration::from_secs(20)).await;
        assert_eq!(done["status"], "succeeded", "{}", done["error"]);
        ids.push(id);
    }
    // Each result holds the text twice (value and Observation) but counts it once
    // (issue 35): one fits in 180 kB, two do not.
    let (st, e) = get_job(&c, &s.base, &ids[0]).await;
    assert_eq!(st, StatusCode::GONE, "{e}");
    assert_eq!(e["error"]["code"], "job_expired");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("bytes"),
        "{e}"
    );
    let (st, j) = get_job(&c, &s.base, &ids[1]).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(j["result"]["results"][0]["value"], "b".repeat(100_000));

    // The list: no results unless ?results=1; pages with ?limit= and next_cursor.
    for t in ["c", "d"] {
        let j = post_job(
            &c,
            &s.base,
            json!({"tool": "LuaDemo:echo", "args": {"text": t}}),
        )
        .await;
        wait_final(
            &c,
            &s.base,
            j["id"].as_str().unwrap(),
            Duration::from_secs(20),
        )
        .await;
    }
    let get = |q: &str| {
        let url = format!("{}/api/jobs{q}", s.base);
        let c = c.clone();
        async move {
            let r = c.get(url).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            let text = r.text().await.unwrap();
            (text.len(), serde_json::from_str::<Value>(&text).unwrap())
        }
    };
    let (small, list) = get("").await;
    let jobs = list["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3, "{list}");
    assert!(jobs.iter().all(|j| j["result"].is_null()), "{list}");
    assert!(
        small < 10_000,
        "the list without results is small: {small} bytes"
    );
    assert_eq!(list["next_cursor"], Value::Null);
    let (large, with) = get("?results=1").await;
    assert!(large > 200_000, "{large}");
    assert_eq!(
        with["jobs"][2]["result"]["results"][0]["value"],
        "b".repeat(100_000)
    );
    let (_, p1) = get("?limit=2").await;
    assert_eq!(p1["jobs"].as_array().unwrap().len(), 2);
    let cursor = p1["next_cursor"].as_str().expect("a next page").to_string();
    let (_, p2) = get(&format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(p2["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(p2["jobs"][0]["id"], ids[1].as_str());
    assert_eq!(p2["next_cursor"], Value::Null);
    let r = c
        .get(format!("{}/api/jobs?limit=0", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    drop(s);

    // Running jobs alone past a tiny budget: the next job is refused, saying which flag.
    let s = Server::start(h.path(), &["--max-job-bytes", "2000"]);
    // A connection per request: a pooled keep-alive connection may meet the server's idle
    // close while this loop waits on a loaded machine, which is not what is tested here.
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let spin = json!({"tool": "JobsDemo:spin", "args": {}});
    let mut running = Vec::new();
    let refusal = loop {
        let r = c
            .post(format!("{}/api/jobs", s.base))
            .json(&spin)
            .send()
            .await
            .unwrap();
        if r.status() != StatusCode::ACCEPTED {
            break (r.status(), r.json::<Value>().await.unwrap());
        }
        let id = r.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        // A job retains bytes once it has started (its events): wait for that, so the
        // budget fills however slowly the machine starts jobs.
        let deadline = Instant::now() + Duration::from_secs(20);
        while get_job(&c, &s.base, &id).await.1["status"] == "queued" {
            assert!(Instant::now() < deadline, "job {id} never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        running.push(id);
        assert!(running.len() < 30, "never refused");
    };
    assert_eq!(refusal.0, StatusCode::SERVICE_UNAVAILABLE, "{}", refusal.1);
    assert_eq!(refusal.1["error"]["code"], "job_budget_exceeded");
    assert!(
        refusal.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-job-bytes"),
        "{}",
        refusal.1
    );
    // (A job that waited too long for the busy plugin may have ended and been evicted.)
    for id in &running {
        let r = c
            .delete(format!("{}/api/jobs/{id}", s.base))
            .send()
            .await
            .unwrap();
        assert!(
            [StatusCode::OK, StatusCode::GONE].contains(&r.status()),
            "{}",
            r.status()
        );
    }
}
