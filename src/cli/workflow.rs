//! `tavern workflow run|graph|schema|list`: run a workflow with a progress display, draw it,
//! print the tool schema it becomes.

use std::io::IsTerminal;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tavern::internal::tools::KeyMatching;
use tavern::internal::workflow::{
    render_graph, workflow_tool_id, workflow_tool_schema_with, CompiledWorkflow, TOOL_SCHEMA, GraphFormat,
    NodeStatus, RunStatus, WorkflowError, WorkflowEvent,
};
use tavern::Engine;

use super::{print_json, print_text, Globals, FAILED, OK, USAGE};

/// Run, draw or inspect workflows (files or ids from <home>/workflows).
#[derive(clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: WorkflowCommand,
}

/// `tavern workflow` subcommands.
#[derive(clap::Subcommand)]
pub enum WorkflowCommand {
    /// Run a workflow and print its outputs.
    Run {
        /// A workflow file, or the id of a workflow in <home>/workflows.
        target: String,
        /// An argument `key=value`; the value is read as JSON when it parses, else as text
        /// (repeatable).
        #[arg(long = "input", short = 'i', value_name = "KEY=VALUE")]
        inputs: Vec<String>,
        /// Print one JSON object: status, outputs and per-node status.
        #[arg(long)]
        json: bool,
        /// Limit for the whole run, in milliseconds.
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Limit for each node, in milliseconds.
        #[arg(long, value_name = "MS")]
        node_timeout_ms: Option<u64>,
        /// Most nodes running at once.
        #[arg(long, value_name = "N")]
        max_concurrency: Option<usize>,
    },
    /// Print the graph as Mermaid or Graphviz DOT.
    Graph {
        /// A workflow file or id.
        target: String,
        /// `mermaid` or `dot`.
        #[arg(long, default_value = "mermaid")]
        format: GraphFormat,
    },
    /// Print the tool schema the workflow becomes (`workflow:<id>`, seed 003).
    Schema {
        /// A workflow file or id.
        target: String,
    },
    /// List the loaded workflows.
    List,
}

/// Runs `tavern workflow …`.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    let engine = match globals.engine() {
        Ok(e) => e,
        Err(code) => return code,
    };
    match args.command {
        WorkflowCommand::Run {
            target,
            inputs,
            json,
            timeout_ms,
            node_timeout_ms,
            max_concurrency,
        } => {
            let Some(wf) = resolve(&engine, &target, json) else {
                return USAGE;
            };
            let mut args = Map::new();
            for i in &inputs {
                match parse_input(i) {
                    Ok((k, v)) => {
                        args.insert(k, v);
                    }
                    Err(msg) => {
                        eprintln!("tavern: {msg}");
                        return USAGE;
                    }
                }
            }
            let limits = Limits {
                timeout_ms,
                node_timeout_ms,
                max_concurrency,
            };
            run_workflow(&engine, &wf, args, json, limits).await
        }
        WorkflowCommand::Graph { target, format } => match resolve(&engine, &target, false) {
            Some(wf) => {
                print_text(&render_graph(&wf.workflow, format));
                OK
            }
            None => USAGE,
        },
        WorkflowCommand::Schema { target } => match resolve(&engine, &target, false) {
            Some(wf) => {
                // The registered tool's schema (with defaults), as every tool list shows it.
                print_json(&workflow_tool_schema_with(&wf.workflow, TOOL_SCHEMA));
                OK
            }
            None => USAGE,
        },
        WorkflowCommand::List => {
            let mut text = String::new();
            for c in engine.workflows().list() {
                let w = &c.workflow;
                text.push_str(&format!(
                    "{}  ({} nodes){}\n",
                    workflow_tool_id(&w.id),
                    w.nodes.len(),
                    if w.description.is_empty() {
                        String::new()
                    } else {
                        format!("  {}", w.description)
                    }
                ));
            }
            if text.is_empty() {
                text.push_str("No workflows are loaded.\n");
            }
            print_text(&text);
            OK
        }
    }
}

struct Limits {
    timeout_ms: Option<u64>,
    node_timeout_ms: Option<u64>,
    max_concurrency: Option<usize>,
}

/// `key=value` → (key, JSON value or text).
fn parse_input(s: &str) -> Result<(String, Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("--input expects KEY=VALUE, got '{s}'"))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(format!("--input expects KEY=VALUE, got '{s}'"));
    }
    let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
    Ok((k.to_string(), value))
}

fn resolve(engine: &Engine, target: &str, json: bool) -> Option<std::sync::Arc<CompiledWorkflow>> {
    // A relative FILE is taken from the home, like every relative path in the command line.
    let file = engine.home().join(target);
    let lookup = if file.is_file() {
        file.to_string_lossy().into_owned()
    } else {
        target.to_string()
    };
    match engine.workflows().resolve(&lookup) {
        Ok(wf) => Some(wf),
        Err(e) => {
            // A file given from an absolute home is named from the home.
            let rel = |t: String| tavern::Problem::new("", t).relative_to(engine.home()).message;
            if json {
                let problems: Vec<String> = match &e {
                    WorkflowError::Load(p) => p
                        .iter()
                        .map(|p| rel(p.to_string()))
                        .collect(),
                    other => vec![rel(other.to_string())],
                };
                print_json(&json!({"workflow": target, "status": "invalid", "problems": problems}));
            } else {
                match &e {
                    WorkflowError::Load(p) => {
                        for p in p {
                            eprintln!("error: {}", rel(p.to_string()));
                        }
                    }
                    other => eprintln!("tavern: {}", rel(other.to_string())),
                }
            }
            None
        }
    }
}

async fn run_workflow(
    engine: &Engine,
    wf: &CompiledWorkflow,
    args: Map<String, Value>,
    json: bool,
    limits: Limits,
) -> u8 {
    // A registered workflow gets the ToolManager's key matching and conversions, like any
    // `workflow:<id>` call; a file gets the engine's own conversions.
    let args = match engine.tools().get(&workflow_tool_id(&wf.workflow.id)) {
        Ok(tool)
            if engine
                .workflows()
                .get(&wf.workflow.id)
                .is_some_and(|c| c.workflow.source == wf.workflow.source) =>
        {
            let args = Value::Object(args);
            for w in tool.loose_warnings(&args) {
                eprintln!("warning: {w}");
            }
            match tool.prepare(args, KeyMatching::Loose) {
                Ok(Value::Object(m)) => m,
                Ok(_) => Map::new(),
                Err(e) => return report_error(&wf.workflow.id, &e.to_string(), json),
            }
        }
        _ => args,
    };
    let mut opts = engine.workflows().defaults().options();
    if let Some(ms) = limits.timeout_ms {
        opts.timeout = Some(Duration::from_millis(ms));
    }
    if let Some(ms) = limits.node_timeout_ms {
        opts.node_timeout = Some(Duration::from_millis(ms));
    }
    if let Some(n) = limits.max_concurrency {
        opts.concurrency = n;
    }
    opts.tools = Some(engine.tools().clone());
    opts.hooks = Some(engine.hooks().clone());
    opts.caller = tavern::internal::tools::Caller::Cli;
    opts.node_report = true;
    let progress = std::io::stderr().is_terminal().then(|| {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        opts.events = Some(tx);
        tokio::spawn(show_progress(rx, wf.plan.len() as u64))
    });
    // Ctrl-C cancels the run: running nodes see the token, the report says `cancelled`.
    let cancel = opts.cancel.clone();
    let on_interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let result = wf.plan.run(args, opts).await;
    on_interrupt.abort();
    if let Some(p) = progress {
        // The sender was dropped with the options; the display task ends by itself.
        let _ = p.await;
    }
    let report = match result {
        Ok(r) => r,
        Err(e) => return report_error(&wf.workflow.id, &e.to_string(), json),
    };
    let ok = report.status == RunStatus::Succeeded;
    if json {
        let mut v = serde_json::to_value(&report).unwrap_or(Value::Null);
        if let (false, Value::Object(m)) = (ok, &mut v) {
            let err = report.clone().into_outputs().err().map(|e| e.to_string());
            m.insert("error".into(), json!(err));
        }
        print_json(&v);
    } else {
        if !report.outputs.is_empty() || ok {
            print_json(&Value::Object(report.outputs.clone()));
        }
        if !ok {
            for n in &report.nodes {
                match &n.status {
                    NodeStatus::Failed { error } => {
                        eprintln!("failed:  {} ({}): {error}", n.id, n.node_type)
                    }
                    NodeStatus::Skipped { reason } => eprintln!("skipped: {} ({reason})", n.id),
                    _ => {}
                }
            }
            if let Err(e) = report.into_outputs() {
                eprintln!("tavern: {e}");
            }
        }
    }
    if ok {
        OK
    } else {
        FAILED
    }
}

fn report_error(workflow: &str, msg: &str, json: bool) -> u8 {
    if json {
        print_json(&json!({"workflow": workflow, "status": "invalid_arguments", "error": msg}));
    } else {
        eprintln!("tavern: {msg}");
    }
    USAGE
}

/// A progress bar on stderr fed by the run's events.
async fn show_progress(mut rx: tokio::sync::mpsc::UnboundedReceiver<WorkflowEvent>, nodes: u64) {
    let bar = indicatif::ProgressBar::new(nodes);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} nodes {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    while let Some(ev) = rx.recv().await {
        match ev {
            WorkflowEvent::NodeStarted { node, node_type } => {
                bar.set_message(format!("{node} ({node_type})"))
            }
            WorkflowEvent::NodeFinished { .. } | WorkflowEvent::NodeSkipped { .. } => bar.inc(1),
            WorkflowEvent::NodeFailed { node, error, .. } => {
                bar.inc(1);
                bar.println(format!("failed: {node}: {error}"));
            }
            WorkflowEvent::WorkflowFinished { status, elapsed } => {
                bar.finish_and_clear();
                eprintln!("{status:?} in {:.1} ms", elapsed.as_secs_f64() * 1000.0);
            }
            WorkflowEvent::WorkflowStarted { .. } => {}
        }
    }
}
