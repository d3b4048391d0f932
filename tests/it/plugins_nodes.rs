//! Plugin nodes and workflows wired into the workflow engine, end to end through real plugin
//! directories, real Lua and Rhai, and the engine's tool registry: `nodes/*.node.json`,
//! plugin `workflows/*.json`, and tool files of type `node` and `workflow`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tavern::internal::protocol::Format;
use tavern::internal::tools::Caller;
use tavern::internal::workflow::{NodeError, RunOptions, RunStatus, WorkflowError};
use tavern::Engine;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const MIX_LUA: &str = r#"
function shout(node, ctx)
  return { text = string.upper(node.inputs.text) .. node.config.suffix }
end
function plain(node) return node.inputs.text end
"#;

const MIX_RHAI: &str = r#"
fn count(node, ctx) {
    let t = node.inputs.text;
    #{ words: t.split(" ").len(), chars: t.len() }
}
"#;

/// Plugin `Mix`: a Lua node `Mix:Shout` (with a config entry) and a Rhai node `Mix:Count`,
/// a node tool with inferred parameters, a plugin workflow and two workflow tools.
fn mix_plugin(home: &Path) {
    let dir = home.join("plugins/Mix");
    write(&dir.join("plugin.yaml"), "name: Mix\ndescription: nodes\n");
    write(&dir.join("main.lua"), MIX_LUA);
    write(&dir.join("count.rhai"), MIX_RHAI);
    write(
        &dir.join("nodes/shout.node.json"),
        &json!({
            "type": "Shout", "displayName": "Shout", "description": "Upper-cases a text.",
            "inputs": {"text": {"dataFlowType": "STRING", "required": true, "description": "What to shout."}},
            "outputs": {"text": {"dataFlowType": "STRING"}},
            "configSchema": {"suffix": {"dataFlowType": "STRING", "config": {"default": "!"}}},
            "script": "main.lua", "function": "shout"
        })
        .to_string(),
    );
    write(
        &dir.join("nodes/count.node.json"),
        &json!({
            "type": "Mix:Count", "description": "Counts words and characters.",
            "inputs": {"text": {"dataFlowType": "STRING", "required": true}},
            "outputs": {"words": {"dataFlowType": "INTEGER"}, "chars": {"dataFlowType": "INTEGER"}},
            "script": "count.rhai", "function": "count"
        })
        .to_string(),
    );
    write(
        &dir.join("tools/shout.tool.json"),
        r#"{"id": "shout", "implementation": {"type": "node", "nodeType": "Shout"}}"#,
    );
    write(
        &dir.join("workflows/loud.json"),
        &json!({
            "id": "loud", "description": "Shouts and counts.",
            "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
            "interfaceOutputs": {"loud": {"dataFlowType": "STRING"}, "words": {"dataFlowType": "INTEGER"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "s", "type": "Mix:Shout", "configValues": {"suffix": "?!"}},
                {"id": "c", "type": "Mix:Count"},
                {"id": "out", "type": "core:GroupOutput"}
            ],
            "edges": [
                {"source": "in", "sourceHandle": "text", "target": "s", "targetHandle": "text"},
                {"source": "s", "sourceHandle": "text", "target": "c", "targetHandle": "text"},
                {"source": "s", "sourceHandle": "text", "target": "out", "targetHandle": "loud"},
                {"source": "c", "sourceHandle": "words", "target": "out", "targetHandle": "words"}
            ]
        })
        .to_string(),
    );
    write(
        &dir.join("tools/loud_by_path.tool.json"),
        r#"{"id": "loud_by_path", "implementation": {"type": "workflow", "workflowId": "workflows/loud.json"}}"#,
    );
    write(
        &dir.join("tools/loud_by_id.tool.json"),
        r#"{"id": "loud_by_id", "description": "Mine.", "implementation": {"type": "workflow", "workflowId": "loud"}}"#,
    );
}

/// A home workflow using both plugin nodes in two independent branches.
fn branches_workflow(home: &Path) {
    write(
        &home.join("workflows/both.json"),
        &json!({
            "id": "both",
            "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
            "interfaceOutputs": {"loud": {"dataFlowType": "STRING"}, "chars": {"dataFlowType": "INTEGER"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "lua", "type": "Mix:Shout"},
                {"id": "rhai", "type": "Mix:Count"},
                {"id": "out", "type": "core:GroupOutput"}
            ],
            "edges": [
                {"source": "in", "sourceHandle": "text", "target": "lua", "targetHandle": "text"},
                {"source": "in", "sourceHandle": "text", "target": "rhai", "targetHandle": "text"},
                {"source": "lua", "sourceHandle": "text", "target": "out", "targetHandle": "loud"},
                {"source": "rhai", "sourceHandle": "chars", "target": "out", "targetHandle": "chars"}
            ]
        })
        .to_string(),
    );
}

fn engine(home: &Path) -> Engine {
    let e = Engine::builder().home(home).build().unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_and_rhai_plugin_nodes_run_inside_workflows() {
    let t = tempfile::tempdir().unwrap();
    mix_plugin(t.path());
    branches_workflow(t.path());
    let e = engine(t.path());
    let mix = e.plugins().get("Mix").unwrap();
    assert_eq!(mix.nodes, vec!["Mix:Count", "Mix:Shout"]);
    assert!(e.workflows().registry().get("Mix:Shout").is_some());

    // input → (expected outputs) through the home workflow `both` (config default "!").
    let cases = [
        ("hi there", json!({"loud": "HI THERE!", "chars": 8})),
        ("a", json!({"loud": "A!", "chars": 1})),
    ];
    for (text, want) in cases {
        let got = e
            .tools()
            .invoke("workflow:both", json!({ "text": text }), Caller::Cli)
            .await
            .unwrap();
        assert_eq!(got, want, "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_tool_infers_its_parameters_and_runs_from_tam() {
    let t = tempfile::tempdir().unwrap();
    mix_plugin(t.path());
    let e = engine(t.path());
    let def = e.tools().get("Mix:shout").unwrap().definition.clone();
    assert_eq!(
        def.parameters,
        json!({"type": "object",
               "properties": {"text": {"type": "string", "description": "What to shout."}},
               "required": ["text"]})
    );
    assert_eq!(def.description, "Upper-cases a text.");

    let text =
        "<|[REQUEST_TOOL]|>\ncommand1:「始」Mix.shout「末」\ntext1:「始」quiet please「末」\n\
                command2:「始」Mix:shout「末」\ntxt2:「始」typo「末」\n<|[END_TOOL]|>\n";
    let (parsed, outcomes) = e
        .run(
            tavern::Request::text(text)
                .format(Format::Auto)
                .caller(Caller::Cli),
        )
        .await
        .map(|r| (r.parsed, r.outcomes))
        .unwrap();
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert_eq!(outcomes.len(), 2);
    assert_eq!(
        outcomes[0].result.as_ref().unwrap(),
        &json!("QUIET PLEASE!")
    );
    let err = outcomes[1].result.as_ref().unwrap_err();
    assert_eq!(err.code(), "invalid_parameters", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_workflow_is_a_workflow_tool_and_binds_workflow_tools() {
    let t = tempfile::tempdir().unwrap();
    mix_plugin(t.path());
    let e = engine(t.path());
    assert_eq!(e.plugins().get("Mix").unwrap().workflows, vec!["loud"]);
    let want = json!({"loud": "NO WAY?!", "words": 2});
    for id in ["workflow:loud", "Mix:loud_by_path", "Mix:loud_by_id"] {
        let text = format!(
            "<|[REQUEST_TOOL]|>\ncommand:「始」{id}「末」\ntext:「始」no way「末」\n<|[END_TOOL]|>"
        );
        let (_, outcomes) = e
            .run(
                tavern::Request::text(&text)
                    .format(Format::Auto)
                    .caller(Caller::Cli),
            )
            .await
            .map(|r| (r.parsed, r.outcomes))
            .unwrap();
        assert_eq!(outcomes[0].result.as_ref().unwrap(), &want, "{id}");
    }
    let by_id = e.tools().get("Mix:loud_by_id").unwrap().definition.clone();
    assert_eq!(by_id.description, "Mine.");
    assert_eq!(by_id.parameters["required"], json!(["text"]));
    let by_path = e
        .tools()
        .get("Mix:loud_by_path")
        .unwrap()
        .definition
        .clone();
    assert_eq!(by_path.description, "Shouts and counts.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_node_files_are_reported_with_their_file_and_the_rest_serves() {
    let t = tempfile::tempdir().unwrap();
    mix_plugin(t.path());
    let dir = t.path().join("plugins/Broken");
    write(&dir.join("plugin.yaml"), "name: Broken\n");
    write(
        &dir.join("main.lua"),
        "function ok(node) return {v = 1} end\n",
    );
    write(
        &dir.join("nodes/a_bad_json.node.json"),
        "{\n  \"type\": \"Bad\",\n  \"function\": \"ok\"\n  \"outputs\": {}\n}",
    );
    write(
        &dir.join("nodes/b_missing_fn.node.json"),
        "{\n  \"type\": \"Missing\",\n  \"script\": \"main.lua\",\n  \"function\": \"nope\"\n}",
    );
    write(
        &dir.join("nodes/c_outside.node.json"),
        "{\n  \"type\": \"Mix:Stolen\",\n  \"function\": \"ok\"\n}",
    );
    write(
        &dir.join("nodes/d_good.node.json"),
        r#"{"type": "Good", "outputs": {"v": {"dataFlowType": "INTEGER"}}, "function": "ok"}"#,
    );
    write(
        &dir.join("tools/e_ghost.tool.json"),
        "{\n  \"id\": \"ghost\",\n  \"implementation\": {\"type\": \"node\", \"nodeType\": \"Missing\"}\n}",
    );
    write(
        &dir.join("tools/f_nowf.tool.json"),
        "{\n  \"id\": \"nowf\",\n  \"implementation\": {\"type\": \"workflow\", \"workflowId\": \"workflows/none.json\"}\n}",
    );
    let e = Engine::builder().home(t.path()).build().unwrap();
    // (file, message part, line)
    let want: &[(&str, &str, Option<u32>)] = &[
        ("a_bad_json.node.json", "invalid node definition", Some(4)),
        ("b_missing_fn.node.json", "no function 'nope'", Some(4)),
        ("c_outside.node.json", "outside plugin 'Broken'", Some(2)),
        (
            "e_ghost.tool.json",
            "no node type 'Broken:Missing'",
            Some(3),
        ),
        ("f_nowf.tool.json", "does not exist", Some(3)),
    ];
    assert_eq!(e.problems().len(), want.len(), "{:?}", e.problems());
    for (file, part, line) in want {
        let p = e
            .problems()
            .iter()
            .find(|p| p.file.ends_with(file))
            .unwrap_or_else(|| panic!("no problem for {file}: {:?}", e.problems()));
        assert!(p.message.contains(part), "{p} vs {part}");
        assert_eq!(p.line, *line, "{p}");
    }
    // The good node of the broken plugin and every other plugin still serve.
    assert!(e.workflows().registry().get("Broken:Good").is_some());
    assert_eq!(
        e.tools()
            .invoke("Mix:shout", json!({"text": "ok"}), Caller::Cli)
            .await
            .unwrap(),
        json!("OK!")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_nodes_end_in_typed_errors_within_budget() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("plugins/Evil");
    write(
        &dir.join("plugin.yaml"),
        "name: Evil\nlimits:\n  instructions: 2000000\n  wallMs: 2000\n",
    );
    write(
        &dir.join("main.lua"),
        "function spin() while true do end end\nfunction ok(n) return n.inputs.x + 1 end\n",
    );
    write(&dir.join("spin.rhai"), "fn rspin(n, c) { loop { } }\n");
    for (ty, script, f) in [
        ("LuaSpin", "main.lua", "spin"),
        ("RhaiSpin", "spin.rhai", "rspin"),
    ] {
        write(
            &dir.join(format!("nodes/{ty}.node.json")),
            &json!({"type": ty, "outputs": {"v": {"dataFlowType": "WILDCARD"}}, "script": script, "function": f})
                .to_string(),
        );
    }
    write(
        &dir.join("nodes/ok.node.json"),
        r#"{"type": "Ok", "inputs": {"x": {"dataFlowType": "INTEGER", "required": true}},
            "outputs": {"v": {"dataFlowType": "INTEGER"}}, "function": "ok"}"#,
    );
    let e = engine(t.path());
    for ty in ["Evil:LuaSpin", "Evil:RhaiSpin"] {
        let wf = json!({"id": "evil", "nodes": [{"id": "n", "type": ty}], "edges": []});
        let path = t.path().join("evil.json");
        write(&path, &wf.to_string());
        let start = Instant::now();
        let report = e
            .workflows()
            .run(path.to_str().unwrap(), Map::new(), Default::default())
            .await
            .unwrap();
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(2000 + 1000),
            "{ty}: took {took:?}"
        );
        assert_eq!(report.status, RunStatus::Failed, "{ty}");
        match report.into_outputs() {
            Err(WorkflowError::NodeFailed { error, .. }) => match *error {
                NodeError::Tool(t) => assert!(
                    ["limit_exceeded", "timeout"].contains(&t.code()),
                    "{ty}: {t}"
                ),
                other => panic!("{ty}: {other}"),
            },
            other => panic!("{ty}: {other:?}"),
        }
        // The host and the plugin still serve.
        assert_eq!(
            e.tools()
                .invoke("system:echo", json!({"text": "alive"}), Caller::Cli)
                .await
                .unwrap(),
            json!("alive")
        );
        let ok = json!({"id": "ok", "interfaceOutputs": {"v": {"dataFlowType": "INTEGER"}},
            "nodes": [{"id": "n", "type": "Evil:Ok", "inputValues": {"x": 41}}, {"id": "out", "type": "core:GroupOutput"}],
            "edges": [{"source": "n", "sourceHandle": "v", "target": "out", "targetHandle": "v"}]});
        let okp = t.path().join("ok.json");
        write(&okp, &ok.to_string());
        let out = e
            .workflows()
            .run(okp.to_str().unwrap(), Map::new(), Default::default())
            .await
            .unwrap()
            .into_outputs()
            .unwrap();
        assert_eq!(Value::Object(out), json!({"v": 42}), "{ty}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_and_rhai_nodes_run_at_the_same_time_in_two_branches() {
    // Each node leaves a mark, then waits for the other's: only nodes that really run at the
    // same time both finish (one after the other, the first would spin out its budget).
    let t = tempfile::tempdir().unwrap();
    // Two plugins: one plugin's Lua state and Rhai engine share its lock, so its own Lua and
    // Rhai calls take turns.
    for (plugin, file, text, ty, f) in [
        (
            "MeetLua",
            "main.lua",
            "function lua_side(n)\n  api.fs.write('lua', 'x')\n  while not api.fs.exists('rhai') do end\n  return {done = 'lua'}\nend\n",
            "L",
            "lua_side",
        ),
        (
            "MeetRhai",
            "main.rhai",
            "fn rhai_side(n, c) {\n  api::fs::write(\"rhai\", \"x\");\n  loop { if api::fs::exists(\"lua\") { break; } }\n  #{ done: \"rhai\" }\n}\n",
            "R",
            "rhai_side",
        ),
    ] {
        let dir = t.path().join("plugins").join(plugin);
        write(
            &dir.join("plugin.yaml"),
            &format!("name: {plugin}\npermissions:\n  fs:\n    write: [\"./meet\"]\nlimits:\n  wallMs: 4000\n"),
        );
        write(&dir.join(file), text);
        write(
            &dir.join(format!("nodes/{ty}.node.json")),
            &json!({"type": ty, "outputs": {"done": {"dataFlowType": "STRING"}}, "function": f})
                .to_string(),
        );
    }
    write(
        &t.path().join("workflows/meet.json"),
        &json!({
            "id": "meet",
            "interfaceOutputs": {"a": {"dataFlowType": "STRING"}, "b": {"dataFlowType": "STRING"}},
            "nodes": [
                {"id": "l", "type": "MeetLua:L"}, {"id": "r", "type": "MeetRhai:R"},
                {"id": "out", "type": "core:GroupOutput"}
            ],
            "edges": [
                {"source": "l", "sourceHandle": "done", "target": "out", "targetHandle": "a"},
                {"source": "r", "sourceHandle": "done", "target": "out", "targetHandle": "b"}
            ]
        })
        .to_string(),
    );
    let e = engine(t.path());
    let got = e
        .tools()
        .invoke("workflow:meet", json!({}), Caller::Cli)
        .await
        .unwrap();
    assert_eq!(got, json!({"a": "lua", "b": "rhai"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_node_timeout_stops_a_plugin_node_and_the_plugin_serves_again() {
    // The plugin's own budget (engine defaults: 5 s, 50M instructions; each instruction of
    // this loop upper-cases 20 kB) is far above the node timeout: the node must end at the
    // timeout, and its script must stop soon after.
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("plugins/Slow");
    write(&dir.join("plugin.yaml"), "name: Slow\n");
    write(
        &dir.join("main.lua"),
        "function spin() local s = string.rep('a', 20000) while true do s:upper() end end\nfunction ok() return 7 end\n",
    );
    for (ty, f) in [("Spin", "spin"), ("Ok", "ok")] {
        write(
            &dir.join(format!("nodes/{ty}.node.json")),
            &json!({"type": ty, "outputs": {"v": {"dataFlowType": "WILDCARD"}}, "function": f})
                .to_string(),
        );
    }
    let e = engine(t.path());
    let run = |ty: &str| {
        let path = t.path().join(format!("{ty}.json"));
        let wf = json!({"id": ty, "interfaceOutputs": {"v": {"dataFlowType": "WILDCARD"}},
            "nodes": [{"id": "n", "type": format!("Slow:{ty}")}, {"id": "out", "type": "core:GroupOutput"}],
            "edges": [{"source": "n", "sourceHandle": "v", "target": "out", "targetHandle": "v"}]});
        write(&path, &wf.to_string());
        let wfs = e.workflows().clone();
        async move {
            let opts = RunOptions {
                node_timeout: Some(Duration::from_millis(300)),
                ..Default::default()
            };
            wfs.run(path.to_str().unwrap(), Map::new(), opts)
                .await
                .unwrap()
                .into_outputs()
        }
    };
    let start = Instant::now();
    let r = run("Spin").await;
    assert!(
        start.elapsed() < Duration::from_millis(300 + 1000),
        "{:?}",
        start.elapsed()
    );
    match r {
        Err(WorkflowError::NodeFailed { error, .. }) => {
            assert!(matches!(*error, NodeError::Timeout(300)), "{error}")
        }
        other => panic!("{other:?}"),
    }
    // The cancelled script lets go of the plugin: its next node runs well within the budget.
    let start = Instant::now();
    let out = run("Ok").await.unwrap();
    assert_eq!(Value::Object(out), json!({"v": 7}));
    assert!(
        start.elapsed() < Duration::from_millis(300 + 1000),
        "{:?}",
        start.elapsed()
    );
}
