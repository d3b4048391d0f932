//! The web explorer end to end: headless Chromium (through chromedriver) against a real
//! `tavern serve` child process on a free loopback port, over a temp home with a Lua plugin,
//! a broken plugin, workflows of three and more nodes, a slow Lua tool and an agent whose
//! model is scripted. Each case also writes the screenshot of its page (docs/screenshots/
//! with `TAVERN_UPDATE_SCREENSHOTS=1`).
//!
//! Missing Chromium or chromedriver FAILS these tests with the apt line to install them;
//! only `TAVERN_SKIP_BROWSER=1` skips them, on purpose.

use crate::server_support;
use crate::web_support;

use serde_json::{json, Value};
use server_support::Server;
use web_support::{require_browser, screenshot_dir, web_home, Browser, Driver};

/// One browser at a time: the cases share a 2-core CI machine.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A served temp home, chromedriver and a browser session, for one case.
pub(crate) struct Case {
    pub server: Server,
    pub home: tempfile::TempDir,
    pub browser: Browser,
    _driver: Driver,
}

impl Case {
    pub async fn start(extra: &[&str]) -> Option<Case> {
        Self::start_in(web_home(), extra).await
    }

    /// A case serving `home`.
    pub async fn start_in(home: tempfile::TempDir, extra: &[&str]) -> Option<Case> {
        if !require_browser() {
            return None;
        }
        let server = Server::start(home.path(), extra);
        let driver = Driver::start().await;
        let browser = driver.browser().await;
        Some(Case {
            server,
            home,
            browser,
            _driver: driver,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base)
    }

    pub async fn shot(&self, name: &str) {
        let p = self.browser.screenshot(&screenshot_dir(), name).await;
        eprintln!("screenshot: {}", p.display());
    }

    pub async fn end(self) {
        self.browser.quit().await;
    }
}

#[tokio::test]
async fn search_finds_a_tool_by_id_plugin_kind_and_annotation() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/")).await;
    let all = b.text_of("#count").await;
    assert!(all.contains(" tools"), "{all}");

    // Free text.
    let q = b.find("#q").await;
    b.type_into(&q, "room price").await;
    b.wait_text("#count", "1 of").await;
    let ids = b
        .js(
            "return [...document.querySelectorAll('#results [data-tool]')].map(e => e.dataset.tool)",
            json!([]),
        )
        .await;
    assert_eq!(ids, json!(["Inn:room_price"]));
    // The card shows the generated parameters and the TAM example.
    let card = b.text_of("[data-tool='Inn:room_price']").await;
    assert!(
        card.contains("nights") && card.contains("required"),
        "{card}"
    );
    let tam = b
        .js(
            "return document.querySelector(\"[data-tool='Inn:room_price'] pre.tam\").textContent",
            json!([]),
        )
        .await;
    assert!(
        tam.as_str()
            .unwrap()
            .contains("command:「始」Inn:room_price「末」"),
        "{tam}"
    );

    // Plugin, kind and annotation filters.
    b.type_into(&q, "").await;
    b.select("#plugin", "Inn").await;
    b.wait_text("#count", "2 of").await;
    let groups = b
        .js(
            "return [...document.querySelectorAll('#results details.group')].map(d => [d.dataset.group, d.open])",
            json!([]),
        )
        .await;
    assert_eq!(groups, json!([["Inn", true]]), "one open group per plugin");
    b.select("#kind", "service").await;
    b.select("#hint", "idempotentHint").await;
    b.wait_text("#count", "1 of").await;
    let only = b.text_of("#results").await;
    assert!(only.contains("Inn:room_price") && !only.contains("Inn:slow_walk"));
    b.select("#plugin", "all").await;
    b.select("#hint", "all").await;
    b.select("#kind", "workflow").await;
    b.wait_text("#results", "workflow:slow_steps").await;
    let kinds = b
        .js(
            "return [...document.querySelectorAll('#results [data-tool]')].every(e => e.dataset.tool.startsWith('workflow:'))",
            json!([]),
        )
        .await;
    assert_eq!(kinds, json!(true), "the kind filter shows workflows only");
    // The filter is in the address, so a search can be bookmarked.
    let url = b.js("return location.search", json!([])).await;
    assert_eq!(url, json!("?kind=workflow"));
    b.select("#kind", "all").await;
    b.select("#plugin", "Inn").await;
    // The TAM example opens from the keyboard-reachable summary.
    b.click(&b.find("[data-tool='Inn:room_price'] summary").await)
        .await;
    let tam = b.text_of("[data-tool='Inn:room_price'] pre.tam").await;
    assert!(tam.contains("<|[END_TOOL]|>"), "{tam}");
    c.shot("index").await;
    c.end().await;
}

#[tokio::test]
async fn the_form_of_a_lua_tool_runs_it_and_shows_the_result() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/tools/Inn:room_price")).await;
    // Generated from the schema: enum as choices with its default chosen, required marked.
    let form = b
        .js(
            "const f = id => document.getElementById(id); return {
               room: [...f('p-room').options].map(o => o.text),
               chosen: f('p-room').selectedOptions[0].text,
               nightsRequired: f('p-nights').getAttribute('aria-required'),
               nightsType: f('p-nights').type,
               breakfast: f('p-breakfast').selectedOptions[0].text,
               star: document.querySelector('label[for=p-nights] .req') !== null }",
            json!([]),
        )
        .await;
    assert_eq!(
        form,
        json!({"room": ["single", "double", "suite"], "chosen": "double", "nightsRequired": "true",
               "nightsType": "number", "breakfast": "false", "star": true})
    );
    let nights = b.find("#p-nights").await;
    b.type_into(&nights, "2").await;
    b.select("#p-room", "suite").await;
    b.select("#p-breakfast", "true").await;
    b.click(&b.find("#run").await).await;
    let shown = b.wait_text("#result", "Succeeded").await;
    assert!(shown.contains("196"), "90×2 + 8×2 silver: {shown}");
    assert!(
        shown.contains("Observation: Tool Inn:room_price executed successfully."),
        "{shown}"
    );
    c.shot("tool").await;
    c.end().await;
}

#[tokio::test]
async fn a_wrong_value_shows_the_validation_error_and_its_observation() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/tools/Inn:room_price")).await;
    let nights = b.find("#p-nights").await;
    b.type_into(&nights, "0").await;
    b.click(&b.find("#run").await).await;
    let shown = b.wait_text("#result", "Failed").await;
    assert!(shown.contains("invalid_parameters"), "{shown}");
    // The Observation is exactly what a model is told for the same call.
    let report: Value = reqwest::Client::new()
        .post(c.url("/api/invoke"))
        .json(&json!({"tool": "Inn:room_price", "args": {"nights": 0, "room": "double", "breakfast": false}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expected = report["results"][0]["observation"].as_str().unwrap();
    assert!(expected.starts_with("Observation: Error"), "{expected}");
    let observed = b.text_of("#result pre.observation").await;
    assert_eq!(observed.trim(), expected.trim());
    c.end().await;
}

#[tokio::test]
async fn pages_work_with_the_keyboard() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/tools/Inn:room_price")).await;
    // Tab reaches the skip link first, Enter moves to the content.
    b.keys("\u{E004}").await;
    let first = b
        .js("return document.activeElement.textContent", json!([]))
        .await;
    assert_eq!(first, json!("Skip to content"));
    // Every form control has a label.
    let unlabelled = b
        .js(
            "return [...document.querySelectorAll('#tool-form input, #tool-form select, #tool-form textarea')]
               .filter(e => !e.labels || !e.labels.length).map(e => e.id)",
            json!([]),
        )
        .await;
    assert_eq!(unlabelled, json!([]));
    // The focus ring is visible (an outline, not `none`).
    let nights = b.find("#p-nights").await;
    b.click(&nights).await;
    b.keys("\u{E004}").await;
    let outline = b
        .js(
            "const s = getComputedStyle(document.activeElement); return [document.activeElement.id, s.outlineStyle]",
            json!([]),
        )
        .await;
    assert_eq!(outline[0], json!("p-room"));
    assert_ne!(outline[1], json!("none"), "focus is visible");
    // Fill and run the form by keyboard only: type, Tab to the Run button, Enter.
    b.click(&nights).await;
    b.keys("3").await;
    b.js("document.getElementById('run').focus()", json!([]))
        .await;
    b.keys("\u{E007}").await;
    b.wait_text("#result", "Succeeded").await;
    c.end().await;
}

#[tokio::test]
async fn a_workflow_run_shows_its_nodes_turning_succeeded() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/workflows/slow_steps")).await;
    // The graph: every node with its id and type, edges joining the slots they name.
    let graph = b
        .js(
            "return { nodes: [...document.querySelectorAll('.graph g.node')].map(g => g.dataset.node),
                      types: [...document.querySelectorAll('.graph g.node .ntype')].map(t => t.textContent),
                      edges: [...document.querySelectorAll('.graph path.edge')].map(p => p.dataset.edge),
                      firstIn: [...document.querySelectorAll('.graph g.node[data-node=first] .slot-in')].map(t => t.textContent) }",
            json!([]),
        )
        .await;
    assert_eq!(
        graph["nodes"],
        json!(["in", "first", "second", "third", "out"])
    );
    assert_eq!(graph["types"][1], json!("core:Delay"));
    assert_eq!(graph["edges"].as_array().unwrap().len(), 7);
    assert!(graph["edges"]
        .as_array()
        .unwrap()
        .contains(&json!("first.value->second.value")));
    assert_eq!(graph["firstIn"], json!(["value", "ms"]));
    let iface = b.text_of("main").await;
    assert!(iface.contains("Inputs") && iface.contains("Milliseconds each step waits."));
    let text = b.find("#p-text").await;
    b.type_into(&text, "a guest").await;
    let ms = b.find("#p-ms").await;
    b.type_into(&ms, "700").await;
    b.click(&b.find("#run").await).await;
    // Live: a node is seen running while later ones still wait, then all succeed.
    b.wait_js(
        "return document.querySelector('.graph g.node[data-node=first]').dataset.status === 'running'
             || document.querySelector('.graph g.node[data-node=second]').dataset.status === 'running'",
        "a node to be running",
    )
    .await;
    let later = b
        .js(
            "return document.querySelector('.graph g.node[data-node=third]').dataset.status",
            json!([]),
        )
        .await;
    assert_eq!(later, json!("pending"), "the last step waits its turn");
    for node in ["in", "first", "second", "third", "out"] {
        b.wait_js(
            &format!("return document.querySelector('#nodes tr[data-node={node}]').dataset.status === 'succeeded'"),
            &format!("node {node} to succeed"),
        )
        .await;
    }
    let time = b.text_of("#nodes tr[data-node=second] .time").await;
    assert!(time.ends_with(" ms"), "each node shows its time: {time}");
    b.wait_text("#result", "Succeeded").await;
    let result = b.text_of("#result").await;
    assert!(result.contains("a guest"), "{result}");
    c.shot("workflow").await;
    c.end().await;
}

#[tokio::test]
async fn a_job_streams_progress_and_can_be_cancelled() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/tools/Inn:slow_walk")).await;
    b.click(&b.find("#run-job").await).await;
    b.wait_text("#job-status", "running").await;
    // Progress streams in: the slow Lua tool's nested workflow reports its nodes.
    b.wait_js(
        "return document.getElementById('job-message').textContent !== ''",
        "a progress message",
    )
    .await;
    let job_id = b.text_of("#job-id").await;
    c.shot("job").await;
    b.click(&b.find("#cancel").await).await;
    b.wait_text("#job-status", "cancelled").await;
    // The server agrees.
    let job: Value = reqwest::Client::new()
        .get(c.url(&format!("/api/jobs/{job_id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(job["status"], json!("cancelled"), "{job}");
    // The cancel reached the work: the slow Lua tool's nested workflow call was cancelled.
    assert_eq!(
        job["result"]["results"][0]["error"]["code"],
        json!("cancelled"),
        "{job}"
    );
    b.wait_text("#result", "cancelled").await;
    // A cancelled job is not a failure: no red "Failed" box (issue 23 item 22).
    let shown = b
        .js(
            "const r = document.getElementById('result'); return [r.className, r.querySelector('h2') && r.querySelector('h2').textContent, !!r.querySelector('.error-box')]",
            json!([]),
        )
        .await;
    assert_eq!(shown, json!(["result cancelled", "Cancelled", false]));
    // Nor does the job panel look failed: the bar stays where the cancel found it (greyed),
    // the message says cancelled, and the nested call the cancel stopped reads "cancelled".
    let panel = b
        .js(
            "const p = document.getElementById('job-progress'); return {
               cls: p.className, full: p.hasAttribute('value') && p.value >= p.max,
               message: document.getElementById('job-message').textContent,
               calls: document.getElementById('job-calls').textContent }",
            json!([]),
        )
        .await;
    assert_eq!(panel["cls"], json!("cancelled"), "{panel}");
    assert_eq!(panel["full"], json!(false), "no full bar: {panel}");
    assert!(
        panel["message"].as_str().unwrap().starts_with("Cancelled"),
        "{panel}"
    );
    assert!(
        !panel["calls"].as_str().unwrap().contains("failed"),
        "{panel}"
    );
    // The server's record agrees: its progress did not run to the end either.
    let p = &job["progress"];
    assert!(
        p["done"].as_f64().unwrap() < p["total"].as_f64().unwrap(),
        "the job's progress stops at the cancel: {job}"
    );
    c.end().await;
}

/// Issue 23 item 22: a parameter without a type is sent as JSON when its text parses as
/// JSON, else as text; the tool index has a compact view and sets the node tools aside.
#[tokio::test]
async fn untyped_parameters_are_json_and_the_index_sets_node_tools_aside() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/tools/node:core.JsonStringify")).await;
    let value = b.find("#p-value").await;
    b.type_into(&value, "[1, 2]").await;
    b.click(&b.find("#run").await).await;
    // An array was sent: its JSON text is `[1,2]` (a string would come back quoted).
    let result = b.wait_text("#result", "Succeeded").await;
    assert!(
        result.contains("[1,2]") && !result.contains(r#""[1, 2]""#),
        "{result}"
    );
    b.type_into(&value, "plain words").await;
    b.click(&b.find("#run").await).await;
    b.wait_text("#result", r#""plain words""#).await;

    b.goto(&c.url("/")).await;
    b.wait_text("#node-tools summary", "Node tools (").await;
    let listed = b
        .js(
            "return [...document.querySelectorAll('#results [data-tool]')].some(e => e.dataset.tool.startsWith('node:'))",
            json!([]),
        )
        .await;
    assert_eq!(listed, json!(false), "node tools are set aside");
    b.click(&b.find("#compact").await).await;
    let compact = b
        .js(
            "const r = document.getElementById('results'); return [r.className, r.querySelectorAll('li[data-tool] a').length > 0, location.search]",
            json!([]),
        )
        .await;
    assert_eq!(
        compact,
        json!(["compact", true, "?view=compact"]),
        "{compact}"
    );
    c.end().await;
}

#[tokio::test]
async fn plugins_list_the_broken_one_with_its_problem_and_update_after_a_reload() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&["--watch"]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/plugins")).await;
    let broken = b.text_of("[data-plugin=Broken]").await;
    assert!(broken.contains("failed"), "{broken}");
    assert!(
        broken.contains("plugin.yaml:7:14"),
        "file, line and column: {broken}"
    );
    assert!(
        broken.contains("invalid boolean"),
        "the problem text: {broken}"
    );
    let status = b
        .js(
            "return document.querySelector('[data-plugin=Broken]').dataset.status",
            json!([]),
        )
        .await;
    assert_eq!(status, json!("failed"));
    let inn = b.text_of("[data-plugin=Inn]").await;
    assert!(
        inn.contains("loaded") && inn.contains("Inn:room_price"),
        "{inn}"
    );
    assert!(
        inn.contains("workflow:slow_steps"),
        "declared permissions: {inn}"
    );

    // A new plugin appears without reloading the page.
    let dir = c.home.path().join("plugins/Bakery");
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::write(
        dir.join("main.lua"),
        "function bread(args, ctx) return 'bread' end\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("tools/bread.tool.json"),
        r#"{"id": "Bakery:bread", "description": "Bakes bread.",
            "implementation": {"type": "service", "script": "main.lua", "function": "bread"}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: Bakery\nversion: 1.0.0\ndescription: Bread.\n",
    )
    .unwrap();
    b.wait_js(
        "return document.querySelector('[data-plugin=Bakery]') !== null",
        "the new plugin to appear",
    )
    .await;
    b.wait_text("#reload-status", "Updated after a reload")
        .await;

    // A plugin added with a mistake is refused (the running version keeps serving); the
    // page says so, with the file, line and problem.
    let cellar = c.home.path().join("plugins/Cellar");
    std::fs::create_dir_all(&cellar).unwrap();
    std::fs::write(
        cellar.join("plugin.yaml"),
        "name: Cellar\nversion: 1.0.0\npermissions:\n  network: often\n",
    )
    .unwrap();
    let refused = b.wait_text("#refused", "Cellar/plugin.yaml:4").await;
    assert!(refused.contains("A reload was refused"), "{refused}");
    b.wait_text("#reload-status", "refused").await;
    c.shot("plugins").await;
    c.end().await;
}

#[tokio::test]
async fn the_audit_page_streams_calls_live() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/audit")).await;
    b.wait_text("#audit-state", "Live").await;
    let http = reqwest::Client::new();
    for (tool, args) in [
        ("Inn:room_price", json!({"nights": 1, "room": "single"})),
        ("Inn:room_price", json!({"nights": 0, "room": "single"})),
        ("system:echo", json!({"text": "SHOUT"})),
        ("system:echo", json!({"text": "hello"})),
    ] {
        http.post(c.url("/api/invoke"))
            .json(&json!({"tool": tool, "args": args}))
            .send()
            .await
            .unwrap();
    }
    b.wait_text("#audit-rows", "no shouting in the inn").await;
    b.wait_js(
        "return document.querySelectorAll('#audit-rows tr').length >= 4",
        "four audit rows",
    )
    .await;
    let rows = b.text_of("#audit-rows").await;
    assert!(rows.contains("Inn:room_price"), "{rows}");
    assert!(rows.contains("veto"), "the hook's veto is listed: {rows}");
    c.shot("audit").await;
    c.end().await;
}

#[tokio::test]
async fn the_agent_chat_shows_each_turn_with_its_calls_and_observations() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&[]).await else {
        return;
    };
    let b = &c.browser;
    b.goto(&c.url("/agents")).await;
    b.wait_text("main", "Nob the host").await;
    b.goto(&c.url("/agents/host")).await;
    let msg = b.find("#message").await;
    b.type_into(&msg, "How much are two nights in the suite?")
        .await;
    b.click(&b.find("#send").await).await;
    let chat = b
        .wait_text(
            "#chat",
            "Observation: Tool Inn:room_price executed successfully.",
        )
        .await;
    assert!(chat.contains("Turn 1"), "{chat}");
    assert!(chat.contains("\"total\":180"), "the call's value: {chat}");
    // The model saw Observations: continue feeds them back.
    b.click(&b.find("#continue").await).await;
    b.wait_text("#chat", "Two nights in the suite cost 180 silver.")
        .await;
    let cont = b
        .js(
            "return document.getElementById('continue').disabled",
            json!([]),
        )
        .await;
    assert_eq!(cont, json!(true), "a turn without calls ends the exchange");
    c.shot("agent").await;
    c.end().await;
}

#[tokio::test]
async fn a_server_with_a_token_asks_for_it_once_and_streams_with_it() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(c) = Case::start(&["--token", "s3cret-token"]).await else {
        return;
    };
    let b = &c.browser;
    // The shell loads without the token; the data does not.
    b.goto(&c.url("/")).await;
    b.wait_text("main h1", "This server needs a token").await;
    let wrong = b.find("#token").await;
    b.type_into(&wrong, "nope").await;
    b.click(&b.find("#save-token").await).await;
    b.wait_text("main", "the bearer token is wrong").await;
    let right = b.find("#token").await;
    b.type_into(&right, "s3cret-token").await;
    b.click(&b.find("#save-token").await).await;
    b.wait_text("#count", " tools").await;
    // The curl line beside an answer names the token's variable, never the token.
    b.goto(&c.url("/tools/system:echo")).await;
    b.click(&b.find("#run").await).await;
    b.wait_text("#http-status", "200").await;
    let curl = b.text_of("#curl").await;
    assert!(
        curl.contains("Authorization: Bearer $TAVERN_TOKEN") && !curl.contains("s3cret"),
        "{curl}"
    );
    // Streams carry the token too (EventSource could not).
    b.goto(&c.url("/audit")).await;
    b.wait_text("#audit-state", "Live").await;
    reqwest::Client::new()
        .post(c.url("/api/invoke"))
        .bearer_auth("s3cret-token")
        .json(&json!({"tool": "system:echo", "args": {"text": "hi"}}))
        .send()
        .await
        .unwrap();
    b.wait_text("#audit-rows", "system:echo").await;
    // API clients without the token are still refused.
    let r = reqwest::Client::new()
        .get(c.url("/api/catalog"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::UNAUTHORIZED);
    c.end().await;
}
