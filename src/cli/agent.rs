//! `tavern agent run|manual|list`: run an agent's deliberation loop, print its manual.

use std::path::PathBuf;

use serde_json::{json, Value};
use tavern::internal::agent::llm::LlmSettings;
use tavern::internal::agent::{AgentError, AgentRun, Event, ManualStyle, MemoryWorldState};

use tavern::internal::engine::outcome_json;
use super::{print_json, print_text, Globals, FAILED, OK, USAGE};

/// Run an agent (profile in agents/ID.json) or print its manual.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Run the deliberation loop: model output → tool calls → Observations → next turn.
    Run(RunArgs),
    /// Print the manual the model is given (only the agent's inventory).
    Manual(ManualArgs),
    /// List the agents in <home>/agents.
    List,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Agent id (agents/ID.json) or a profile file (relative to the home).
    agent: String,
    /// The model: openai:BASE_URL (an OpenAI-compatible server, e.g.
    /// openai:http://127.0.0.1:8080/v1), scripted:FILE (a JSON list of replies) or
    /// local:PATH.gguf (a GGUF model run in this process; a build with the llm-local
    /// feature). FILE and PATH are taken from the home.
    #[arg(long, value_name = "openai:BASE_URL|scripted:FILE|local:PATH.gguf")]
    llm: Option<String>,
    /// Model name sent to the server.
    #[arg(long)]
    model: Option<String>,
    /// The user's message for the first turn.
    #[arg(long)]
    message: Option<String>,
    /// Most turns.
    #[arg(long)]
    max_turns: Option<u32>,
    /// World state to start from (JSON object, relative to the home; default
    /// <home>/world.json when present).
    #[arg(long, value_name = "FILE")]
    world: Option<PathBuf>,
    /// Print one JSON object {"turns": [...], "stop_reason": ...} instead of the conversation.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ManualArgs {
    /// Agent id (agents/ID.json) or a profile file.
    agent: String,
    /// tam, action, openai, anthropic or short (default: the profile's style).
    #[arg(long, value_parser = parse_style)]
    style: Option<ManualStyle>,
}

fn parse_style(s: &str) -> Result<ManualStyle, String> {
    s.parse()
}

/// Runs `tavern agent`.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    match args.command {
        Sub::Run(a) => run_agent(globals, a).await,
        Sub::Manual(a) => manual(globals, a),
        Sub::List => {
            let ids = tavern::internal::agent::list_ids(&globals.home);
            print_text(&ids.iter().map(|i| format!("{i}\n")).collect::<String>());
            OK
        }
    }
}

fn report(globals: &Globals, e: &AgentError) -> u8 {
    // A profile given as a path from an absolute home is named from the home.
    eprintln!("tavern: {}", globals.relative_text(&e.to_string()));
    match e {
        AgentError::NotFound { .. } => USAGE,
        _ => FAILED,
    }
}

fn manual(globals: &Globals, a: ManualArgs) -> u8 {
    let engine = match globals.engine() {
        Ok(e) => e,
        Err(code) => return code,
    };
    let rt = match engine.agent(&globals.target(&a.agent)).and_then(|b| b.build()) {
        Ok(rt) => rt,
        Err(e) => return report(globals, &e),
    };
    let text = match a.style {
        Some(s) => rt.manual_in(s),
        None => rt.manual().to_string(),
    };
    print_text(&format!("{}\n", text.trim_end()));
    OK
}

fn load_world(globals: &Globals, file: Option<&PathBuf>) -> Result<Option<Value>, u8> {
    // Without --world the engine's own world (<home>/world.json) applies.
    let path = match file {
        Some(f) => globals.path(f),
        None => return Ok(None),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        eprintln!("tavern: cannot read {}: {e}", globals.shown(&path));
        USAGE
    })?;
    match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        Ok(_) => {
            eprintln!("tavern: {}: the world state must be a JSON object", globals.shown(&path));
            Err(USAGE)
        }
        Err(e) => {
            eprintln!(
                "tavern: {}:{}:{}: not JSON: {e}",
                globals.shown(&path),
                e.line(),
                e.column()
            );
            Err(USAGE)
        }
    }
}

async fn run_agent(globals: &Globals, a: RunArgs) -> u8 {
    // `scripted:FILE` and `local:PATH` are taken from the home, like every relative path in
    // a flag; made absolute, so the agent (which takes relative model paths from the home
    // too) does not join a relative home twice.
    let cwd = std::env::current_dir().unwrap_or_default();
    let llm = a.llm.as_deref().map(|l| {
        let l = l.trim();
        for prefix in ["scripted:", "local:"] {
            if let Some(f) = l.strip_prefix(prefix) {
                let path = cwd.join(globals.path(std::path::Path::new(f.trim())));
                return format!("{prefix}{}", path.display());
            }
        }
        l.to_string()
    });
    let overrides = match LlmSettings::from_flags(llm.as_deref(), a.model.as_deref()) {
        Ok(o) => o,
        Err(m) => {
            eprintln!("tavern: --llm: {m}");
            return USAGE;
        }
    };
    let world = match load_world(globals, a.world.as_ref()) {
        Ok(w) => w,
        Err(code) => return code,
    };
    // `--world FILE` is the engine's live world (scripts' `api.world` see it too).
    let engine = match globals.engine_with(|b| match world {
        Some(w) => b.world_state(MemoryWorldState::new(w)),
        None => b,
    }) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let mut b = match engine.agent(&globals.target(&a.agent)) {
        Ok(b) => b.llm(overrides),
        Err(e) => return report(globals, &e),
    };
    if let Some(n) = a.max_turns {
        b = b.max_turns(n);
    }
    let mut rt = match b.build() {
        Ok(rt) => rt,
        Err(e) => return report(globals, &e),
    };
    if !a.json {
        // The conversation, each turn as it ends.
        rt.events().subscribe(tavern::internal::agent::TURN_FINISHED, |e| print_text(&turn_text(e)));
    }
    let result = rt.run(a.message.as_deref()).await;
    if a.json {
        print_json(&run_json(&result));
    } else {
        // The error itself goes to stderr once, below.
        print_text(&format!(
            "── stop: {} after {} turn(s)\n",
            result.stop_reason.as_str(),
            result.turns.len()
        ));
    }
    if let Some(e) = &result.error {
        eprintln!("tavern: {e}");
        FAILED
    } else {
        OK
    }
}

fn turn_text(e: &Event) -> String {
    let p = &e.payload;
    let get = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
    let mut s = format!("── {} · turn {} ──\n", e.agent, p["turn"]);
    for l in get("input").lines() {
        s.push_str(&format!("> {l}\n"));
    }
    s.push_str(get("output").trim_end());
    s.push('\n');
    let ended = p["output_ended_ms"].as_f64().unwrap_or(0.0);
    for c in p["calls"].as_array().into_iter().flatten() {
        let when = match c["started_ms"].as_f64() {
            Some(ms) => format!("started at {ms:.1} ms, model output ended at {ended:.1} ms"),
            None => "not run".into(),
        };
        s.push_str(&format!("  · {} [{when}]\n", c["tool"].as_str().unwrap_or("")));
    }
    for o in p["observations"].as_array().into_iter().flatten() {
        s.push_str(&format!("  {}\n", o.as_str().unwrap_or("")));
    }
    s
}

/// `{"turns": [{"output", "calls", "results", "diagnostics", "observations"}],
/// "stop_reason"}` (plus `error` when a turn failed); results as `tavern call` prints them,
/// diagnostics as `tavern parse` does.
fn run_json(r: &AgentRun) -> Value {
    let turns: Vec<Value> = r
        .turns
        .iter()
        .map(|t| {
            json!({
                "output": t.output,
                "calls": t.parsed.calls.iter().map(|c| json!({"tool": c.tool, "args": c.args})).collect::<Vec<_>>(),
                "results": t.results.iter().map(|c| outcome_json(&c.outcome, Some(&c.call))).collect::<Vec<_>>(),
                // What the text mode shows under the turn: malformed output and warnings,
                // and the Observation lines the next turn is given.
                "diagnostics": t.parsed.diagnostics,
                "observations": t.observations,
            })
        })
        .collect();
    let mut v = json!({"turns": turns, "stop_reason": r.stop_reason.as_str()});
    if let Some(e) = &r.error {
        v["error"] = json!(e.to_string());
    }
    v
}
