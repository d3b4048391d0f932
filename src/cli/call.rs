//! `tavern call [--format F] [FILE]`: parse, validate and run the calls; print the results.

use std::path::PathBuf;

use serde_json::{json, Value};
use tavern::protocol::Format;
use tavern::tools::{CallOutcome, Caller};

use super::{diagnostics_json, parse_format, print_json, read_input, Globals, FAILED, OK};

/// Run the tool calls in model output (FILE or stdin) and print the results as JSON.
#[derive(clap::Args)]
pub struct Args {
    /// Call format to look for: auto, tam, action, vcp or json.
    #[arg(long, default_value = "auto", value_parser = parse_format)]
    pub format: Format,
    /// File to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
}

/// One result as `tavern call` prints it (the library's [`tavern::embed::outcome_json`]).
pub fn outcome_json(o: &CallOutcome, step: Option<u32>) -> Value {
    tavern::embed::outcome_json(o, step)
}

/// Runs `tavern call`.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    let text = match read_input(args.file.as_deref()) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let engine = match globals.engine() {
        Ok(e) => e,
        Err(code) => return code,
    };
    let (parsed, outcomes) = engine.call_text(&text, args.format, Caller::Cli).await;
    let results: Vec<Value> = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| outcome_json(o, parsed.calls.get(i).and_then(|c| c.step)))
        .collect();
    print_json(&json!({
        "results": results,
        "diagnostics": diagnostics_json(&parsed.diagnostics),
    }));
    if parsed.has_errors() || outcomes.iter().any(|o| o.result.is_err()) {
        FAILED
    } else {
        OK
    }
}
