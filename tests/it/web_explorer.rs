//! The web explorer's second round (issue 36 item 8, issue 34 item 9), in headless Chromium
//! against a real `tavern serve`: multi-line fields for long text (Enter adds a line,
//! Ctrl+Enter runs), the request as curl with its status, headers and time (the curl is run
//! and must give the same answer), the MCP view of a call (JSON-RPC messages, progress and
//! log notifications), the bundled TAM-marker font, the tool index grouped by plugin (short
//! with the bundled home), recent audit records on open, resources and prompts.
//!
//! Like `web_e2e`, missing Chromium or chromedriver FAILS these tests with the apt line;
//! only `TAVERN_SKIP_BROWSER=1` skips them. They share `web_e2e`'s one-browser-at-a-time lock.

use std::path::Path;

use serde_json::{json, Value};

use crate::server_support::copy_dir;
use crate::web_e2e::{Case, ONE_AT_A_TIME};

#[tokio::test]
async fn long_text_gets_a_textarea_where_enter_adds_a_line_and_ctrl_enter_runs() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/tools/Notes:write")).await;
    let fields = b
        .js(
            "return [document.getElementById('p-title').tagName, document.getElementById('p-content').tagName,
                     document.getElementById('p-content-hint').textContent]",
            json!([]),
        )
        .await;
    assert_eq!(fields[0], json!("INPUT"), "a title of at most 60: one line");
    assert_eq!(fields[1], json!("TEXTAREA"), "content: many lines");
    assert!(
        fields[2].as_str().unwrap().contains("Ctrl+Enter"),
        "the field says how to run: {fields}"
    );
    // The rule, case by case (the page's own function).
    let rule = b
        .js(
            "return [['x', {format: 'markdown'}], ['x', {contentMediaType: 'text/html'}], ['x', {default: 'a\\nb'}],
                     ['x', {maxLength: 500}], ['notes', {maxLength: 500}], ['body', {maxLength: 50}],
                     ['systemPrompt', {}], ['file_content', {}], ['filePath', {}], ['message_id', {}], ['guestName', {}]]
                    .map(([n, s]) => isLongString(n, s))",
            json!([]),
        )
        .await;
    assert_eq!(
        rule,
        json!([true, true, true, true, true, false, true, true, false, false, false])
    );
    let title = b.find("#p-title").await;
    b.type_into(&title, "Shopping").await;
    let content = b.find("#p-content").await;
    // Real key events: "\n" is the Enter key.
    b.type_into(&content, "bread\nale\ncheese").await;
    let state = b
        .js(
            "return [document.getElementById('p-content').value, document.getElementById('result').textContent]",
            json!([]),
        )
        .await;
    assert_eq!(
        state,
        json!(["bread\nale\ncheese", ""]),
        "Enter added lines and ran nothing"
    );
    // Ctrl+Enter from the textarea runs the form.
    b.click(&content).await;
    b.chord(&["\u{E009}", "\u{E007}"]).await;
    let shown = b.wait_text("#result", "Succeeded").await;
    assert!(shown.contains("\"lines\": 3"), "{shown}");

    // Beside the answer: status, time, headers and the request as curl.
    let status = b.wait_text("#http-status", "200").await;
    assert_eq!(status, "200 OK");
    let time = b.text_of("#http-time").await;
    let ms: f64 = time
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a time in ms: {time}"));
    assert!(ms > 0.0 && time.contains(" ms"), "{time}");
    let headers = b
        .js(
            "return document.getElementById('response-headers').textContent",
            json!([]),
        )
        .await;
    let headers = headers.as_str().unwrap().to_ascii_lowercase();
    assert!(
        headers.contains("content-type") && headers.contains("application/json"),
        "{headers}"
    );
    let curl = b
        .js(
            "return document.getElementById('curl').textContent",
            json!([]),
        )
        .await;
    let curl = curl.as_str().unwrap().to_string();
    assert!(
        curl.starts_with("curl ") && curl.contains("/api/invoke"),
        "{curl}"
    );
    // The curl command is real: run by a shell, it makes the same call.
    let out = std::process::Command::new("sh")
        .args(["-c", &curl])
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "{curl}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(
        answer["results"][0]["value"],
        json!({"title": "Shopping", "lines": 3})
    );
    // The Copy button copies it (or selects it where the clipboard is refused).
    b.click(&b.find("#copy-curl").await).await;
    let copied = b.wait_text("#copy-state", ".").await;
    assert!(
        copied == "Copied." || copied.starts_with("Select"),
        "{copied}"
    );
    c.shot("tool-long-text").await;
    c.end().await;
}

#[tokio::test]
async fn the_mcp_view_shows_the_json_rpc_messages_and_notifications_of_a_call() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/tools/Notes:write")).await;
    let title = b.find("#p-title").await;
    b.type_into(&title, "Cellar").await;
    let content = b.find("#p-content").await;
    b.type_into(&content, "wine\nmore wine").await;
    b.click(&b.find("#run-mcp").await).await;
    b.wait_text("#mcp-summary", "The tool succeeded.").await;
    let log = b
        .js(
            "return [...document.querySelectorAll('#mcp-log li.mcp-msg')].map(li => [li.classList[1], li.dataset.method, li.textContent])",
            json!([]),
        )
        .await;
    let rows = log.as_array().unwrap();
    let methods: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str().unwrap(), r[1].as_str().unwrap()))
        .collect();
    let pos = |dir: &str, m: &str| {
        methods
            .iter()
            .position(|x| *x == (dir, m))
            .unwrap_or_else(|| panic!("no {dir} {m} in {log}"))
    };
    // The handshake, the call, its notifications and its result, in order.
    let init = pos("mcp-out", "initialize");
    let inited = pos("mcp-out", "notifications/initialized");
    let call = pos("mcp-out", "tools/call");
    let progress = pos("mcp-in", "notifications/progress");
    assert!(init < inited && inited < call && call < progress, "{log}");
    let reports = methods
        .iter()
        .filter(|x| **x == ("mcp-in", "notifications/progress"))
        .count();
    assert_eq!(reports, 2, "the tool reports twice: {log}");
    let results: Vec<usize> = methods
        .iter()
        .enumerate()
        .filter(|(_, x)| **x == ("mcp-in", "result"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(results.len(), 2, "initialize's and the call's: {log}");
    assert!(results[1] > progress, "the result comes after the progress");
    // The tool's log line came as a notification.
    let logged = rows
        .iter()
        .find(|r| r[1] == json!("notifications/message"))
        .unwrap_or_else(|| panic!("a log notification: {log}"));
    assert!(
        logged[2]
            .as_str()
            .unwrap()
            .contains("writing the note Cellar"),
        "{logged}"
    );
    let last = rows.last().unwrap()[2].as_str().unwrap();
    assert!(last.contains("DELETE /mcp"), "the session is ended: {last}");
    // The call's result holds the tool's answer.
    let answer = b
        .js(
            "const li = [...document.querySelectorAll('#mcp-log li.mcp-in[data-method=result]')].pop();
             return JSON.parse(li.querySelector('pre').textContent)",
            json!([]),
        )
        .await;
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"title": "Cellar", "lines": 2, "call_id": "call_0"}),
        "{answer}"
    );
    c.shot("mcp").await;
    c.end().await;
}

#[tokio::test]
async fn the_tam_markers_have_their_own_small_font() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    // Served from the binary, without a token, a small WOFF2 with its license.
    let http = reqwest::Client::new();
    let font = http
        .get(c.url("/assets/tam-markers.woff2"))
        .send()
        .await
        .unwrap();
    assert_eq!(font.headers()["content-type"], "font/woff2");
    let bytes = font.bytes().await.unwrap();
    assert!(bytes.starts_with(b"wOF2"), "a WOFF2 file");
    assert!(bytes.len() < 8 * 1024, "a subset: {} bytes", bytes.len());
    let license = http
        .get(c.url("/assets/tam-markers-license.txt"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(license.contains("SIL OPEN FONT LICENSE Version 1.1"));

    let b = &c.browser;
    b.goto(&c.url("/tools/Inn:room_price")).await;
    b.js(
        "window.__font = null;
         document.fonts.load('16px \"TAM markers\"', '「始」末').then(
           (f) => { window.__font = f.map((x) => [x.family.replace(/\"/g, ''), x.status, x.unicodeRange.toUpperCase()]); },
           (e) => { window.__font = String(e); });",
        json!([]),
    )
    .await;
    b.wait_js("return window.__font !== null", "the font to load")
        .await;
    let font = b.js("return window.__font", json!([])).await;
    assert_eq!(
        font,
        json!([["TAM markers", "loaded", "U+300C-300D, U+59CB, U+672B"]]),
        "{font}"
    );
    // The markers are drawn from it (full-width, 1em), in the TAM example too.
    let shown = b
        .js(
            "const ctx = document.createElement('canvas').getContext('2d');
             ctx.font = '16px \"TAM markers\"';
             return { width: ['「', '」', '始', '末'].map((ch) => Math.round(ctx.measureText(ch).width)),
                      check: document.fonts.check('16px \"TAM markers\"', '「始」末'),
                      family: getComputedStyle(document.querySelector('pre.tam')).fontFamily,
                      tam: document.querySelector('pre.tam').textContent.includes('「始」') }",
            json!([]),
        )
        .await;
    assert_eq!(shown["width"], json!([16, 16, 16, 16]), "{shown}");
    assert_eq!(shown["check"], json!(true));
    assert!(
        shown["family"]
            .as_str()
            .unwrap()
            .starts_with("\"TAM markers\""),
        "{shown}"
    );
    assert_eq!(shown["tam"], json!(true));
    c.end().await;
}

/// A writable copy of the repository's own home (its plugins, workflows, agents, scripts).
fn bundled_home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for d in ["plugins", "workflows", "agents", "scripts", "config"] {
        copy_dir(&root.join(d), &dir.path().join(d));
    }
    std::fs::copy(root.join("world.json"), dir.path().join("world.json")).expect("world.json");
    dir
}

#[tokio::test]
async fn the_index_groups_tools_by_plugin_and_stays_short_with_the_bundled_home() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start_in(bundled_home(), &[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/")).await;
    let page = b
        .js(
            "return { height: document.documentElement.scrollHeight,
                      groups: [...document.querySelectorAll('#results details.group')].map(d => [d.dataset.group, d.open]),
                      tools: document.querySelectorAll('#results [data-tool]').length }",
            json!([]),
        )
        .await;
    let groups = page["groups"].as_array().unwrap();
    let names: Vec<&str> = groups.iter().map(|g| g[0].as_str().unwrap()).collect();
    for plugin in [
        "CodeInterpreter",
        "FileOperator",
        "PyStats",
        "TextTools",
        "system",
    ] {
        assert!(names.contains(&plugin), "a group for {plugin}: {page}");
    }
    assert!(page["tools"].as_u64().unwrap() > 12, "{page}");
    assert!(
        groups.iter().all(|g| g[1] == json!(false)),
        "many tools: the groups start closed: {page}"
    );
    let height = page["height"].as_u64().unwrap();
    assert!(height < 1600, "the index is short: {height} px");
    c.shot("index-bundled").await;

    // A group opens on a click.
    b.click(&b.find("details.group[data-group=TextTools] summary").await)
        .await;
    let open = b
        .js(
            "return document.querySelector('details.group[data-group=TextTools]').open",
            json!([]),
        )
        .await;
    assert_eq!(open, json!(true));
    // The filter box: matching groups open, the others go.
    let q = b.find("#q").await;
    b.type_into(&q, "write file").await;
    b.wait_text("#count", "1 of").await;
    let shown = b
        .js(
            "return [...document.querySelectorAll('#results details.group')].map(d => [d.dataset.group, d.open,
                      [...d.querySelectorAll('[data-tool]')].map(e => e.dataset.tool)])",
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!([["FileOperator", true, ["FileOperator:WriteFile"]]])
    );
    // Expand all / Collapse all.
    b.type_into(&q, "").await;
    b.wait_js(
        "return document.querySelectorAll('#results details.group').length > 4",
        "all groups back",
    )
    .await;
    b.click(&b.find("#expand-all").await).await;
    let all_open = b
        .js(
            "return [...document.querySelectorAll('#results details.group')].every(d => d.open)",
            json!([]),
        )
        .await;
    assert_eq!(all_open, json!(true));
    b.click(&b.find("#collapse-all").await).await;
    let none_open = b
        .js(
            "return [...document.querySelectorAll('#results details.group')].some(d => d.open)",
            json!([]),
        )
        .await;
    assert_eq!(none_open, json!(false));
    // The bundled file tool's content is a multi-line field, its path one line.
    b.goto(&c.url("/tools/FileOperator:WriteFile")).await;
    let tags = b
        .js(
            "return [document.getElementById('p-filePath').tagName, document.getElementById('p-content').tagName]",
            json!([]),
        )
        .await;
    assert_eq!(tags, json!(["INPUT", "TEXTAREA"]));
    c.end().await;
}

#[tokio::test]
async fn the_audit_page_shows_recent_records_when_it_opens() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let http = reqwest::Client::new();
    // Calls made before anyone watches.
    for text in ["first", "second"] {
        http.post(c.url("/api/invoke"))
            .json(&json!({"tool": "system:echo", "args": {"text": text}}))
            .send()
            .await
            .unwrap();
    }
    http.post(c.url("/api/invoke"))
        .json(&json!({"tool": "Inn:room_price", "args": {"nights": 2, "room": "single"}}))
        .send()
        .await
        .unwrap();
    let b = &c.browser;
    b.goto(&c.url("/audit")).await;
    b.wait_text("#audit-state", "Live").await;
    b.wait_js(
        "return document.querySelectorAll('#audit-rows tr').length >= 3",
        "the recent records",
    )
    .await;
    let tools = b
        .js(
            "return [...document.querySelectorAll('#audit-rows tr')].map(r => r.children[2].textContent)",
            json!([]),
        )
        .await;
    assert_eq!(
        tools,
        json!(["Inn:room_price", "system:echo", "system:echo"]),
        "newest first"
    );
    // Then live, above them.
    http.post(c.url("/api/invoke"))
        .json(&json!({"tool": "Inn:room_price", "args": {"nights": 3, "room": "double"}}))
        .send()
        .await
        .unwrap();
    b.wait_js(
        "return document.querySelectorAll('#audit-rows tr').length === 4",
        "the live record",
    )
    .await;
    // A count that is not a number is refused with a clear error.
    let r = http
        .get(c.url("/api/audit/events?recent=lots"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("?recent=lots"),
        "{body}"
    );
    c.end().await;
}

#[tokio::test]
async fn resources_and_prompts_are_listed_and_read() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/resources")).await;
    let listed = b
        .js(
            "return { resources: [...document.querySelectorAll('#resources [data-uri]')].map(e => e.dataset.uri),
                      templates: [...document.querySelectorAll('#templates [data-template]')].map(e => e.dataset.template) }",
            json!([]),
        )
        .await;
    let resources = listed["resources"].as_array().unwrap();
    assert!(
        resources.contains(&json!("tavern://workflows/slow_steps")),
        "{listed}"
    );
    assert!(
        resources.contains(&json!("tavern://agents/host/manual")),
        "{listed}"
    );
    assert!(
        listed["templates"]
            .as_array()
            .unwrap()
            .contains(&json!("tavern://jobs/{id}")),
        "{listed}"
    );
    b.click(
        &b.find("[data-uri='tavern://workflows/slow_steps'] button.read")
            .await,
    )
    .await;
    let text = b.wait_text("#resource-content", "core:Delay").await;
    assert!(text.contains("tavern://workflows/slow_steps"), "{text}");
    // A template: its variable is a field.
    let job: Value = reqwest::Client::new()
        .post(c.url("/api/jobs"))
        .json(&json!({"tool": "system:echo", "args": {"text": "kept"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = job["id"].as_str().unwrap();
    let field = b
        .find("[data-template='tavern://jobs/{id}'] input[name=id]")
        .await;
    b.type_into(&field, id).await;
    b.click(
        &b.find("[data-template='tavern://jobs/{id}'] button[type=submit]")
            .await,
    )
    .await;
    b.wait_text("#resource-content", id).await;
    // An unknown uri shows the server's error.
    b.type_into(&field, "no-such-job").await;
    b.click(
        &b.find("[data-template='tavern://jobs/{id}'] button[type=submit]")
            .await,
    )
    .await;
    b.wait_text("#resource-content .error-box", "unknown_resource")
        .await;
    c.shot("resources").await;

    b.goto(&c.url("/prompts")).await;
    let msg = b
        .find("[data-prompt=agent_host] textarea[name=message]")
        .await;
    b.type_into(&msg, "A room for the night, please.").await;
    b.click(&b.find("[data-prompt=agent_host] button[type=submit]").await)
        .await;
    let messages = b
        .wait_text("#prompt-messages", "A room for the night, please.")
        .await;
    assert!(
        messages.contains("Inn:room_price"),
        "the manual: {messages}"
    );
    let roles = b
        .js(
            "return [...document.querySelectorAll('#prompt-messages [data-role]')].map(e => e.dataset.role)",
            json!([]),
        )
        .await;
    assert!(
        roles
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r == "user" || r == "assistant"),
        "{roles}"
    );
    assert_eq!(roles.as_array().unwrap().last(), Some(&json!("user")));
    c.shot("prompts").await;
    c.end().await;
}

#[tokio::test]
async fn a_cancelled_workflow_run_shows_its_nodes_cancelled_not_failed() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/workflows/slow_steps")).await;
    let text = b.find("#p-text").await;
    b.type_into(&text, "a guest").await;
    let ms = b.find("#p-ms").await;
    b.type_into(&ms, "1500").await;
    b.click(&b.find("#run").await).await;
    b.wait_js(
        "return document.querySelector('#nodes tr[data-node=first]').dataset.status === 'running'",
        "the first step to run",
    )
    .await;
    // The job's request is shown beside it.
    b.wait_text("#http-status", "20").await;
    assert!(b.text_of("#curl").await.contains("/api/jobs"));
    b.click(&b.find("#cancel").await).await;
    b.wait_text("#job-status", "cancelled").await;
    b.wait_text("#result", "Cancelled").await;
    let states = b
        .js(
            "return Object.fromEntries([...document.querySelectorAll('#nodes tr[data-node]')].map(r => [r.dataset.node, r.dataset.status || '']))",
            json!([]),
        )
        .await;
    let values: Vec<&str> = states
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!values.contains(&"failed"), "nothing failed: {states}");
    assert_eq!(states["in"], json!("succeeded"), "{states}");
    assert_eq!(
        states["first"],
        json!("cancelled"),
        "the step the cancel stopped: {states}"
    );
    let bar = b
        .js(
            "const p = document.getElementById('job-progress'); return [p.className, p.value < p.max]",
            json!([]),
        )
        .await;
    assert_eq!(bar, json!(["cancelled", true]));
    c.end().await;
}

/// The first `n` `audit` records of `GET /api/audit/events?recent=…` (`path`), calling
/// `live` once the stream is open.
async fn first_audit_records(base: &str, path: &str, n: usize, live: Value) -> Vec<Value> {
    use futures_util::StreamExt;
    let http = reqwest::Client::new();
    let r = http.get(format!("{base}{path}")).send().await.unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    http.post(format!("{base}/api/invoke"))
        .json(&live)
        .send()
        .await
        .unwrap();
    let mut body = r.bytes_stream();
    let mut text = String::new();
    let mut records = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while records.len() < n {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .unwrap_or_else(|_| panic!("{n} audit records in time; got {text}"))
            .expect("the stream stays open")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
        records = text
            .split("\n\n")
            .filter(|e| e.contains("event: audit"))
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
    }
    records.truncate(n);
    records
}

#[tokio::test]
async fn recent_audit_records_are_replayed_first_unless_the_server_keeps_none() {
    let before = json!({"tool": "Inn:room_price", "args": {"nights": 1, "room": "single"}});
    let live = json!({"tool": "system:echo", "args": {"text": "live"}});
    for (flags, expected) in [
        (&[][..], &["Inn:room_price", "system:echo"][..]),
        (&["--audit-recent", "0"][..], &["system:echo"][..]),
    ] {
        let home = crate::web_support::web_home();
        let s = crate::server_support::Server::start(home.path(), flags);
        reqwest::Client::new()
            .post(format!("{}/api/invoke", s.base))
            .json(&before)
            .send()
            .await
            .unwrap();
        let records = first_audit_records(
            &s.base,
            "/api/audit/events?recent=10",
            expected.len(),
            live.clone(),
        )
        .await;
        let tools: Vec<&str> = records
            .iter()
            .map(|r| r["tool"].as_str().unwrap())
            .collect();
        assert_eq!(tools, expected, "{flags:?}: {records:?}");
    }
}
