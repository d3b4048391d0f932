//! `tavern parse [--format F] [FILE]`: read tool calls and print them as one JSON object.

use std::path::PathBuf;

use serde_json::{json, Map, Value};
use tavern::protocol::{self, Call, Format, OnError};

use super::{diagnostics_json, parse_format, print_json, read_input, Globals, FAILED, OK};

/// Read tool calls from model output (FILE or stdin) and print them as JSON.
#[derive(clap::Args)]
pub struct Args {
    /// Call format to look for: auto, tam, action, vcp or json.
    #[arg(long, default_value = "auto", value_parser = parse_format)]
    pub format: Format,
    /// File to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
}

/// One call as `tavern parse` prints it: `tool`, `args`, and where it came from.
pub fn call_json(c: &Call) -> Value {
    let mut m = Map::new();
    m.insert("tool".into(), json!(c.tool));
    m.insert("args".into(), Value::Object(c.args.clone()));
    m.insert("block".into(), json!(c.block));
    if let Some(step) = c.step {
        m.insert("step".into(), json!(step));
        let on_error = match c.on_error {
            OnError::Stop => "stop",
            OnError::Continue => "continue",
        };
        m.insert("on_error".into(), json!(on_error));
    }
    m.insert("line".into(), json!(c.span.line));
    m.insert("column".into(), json!(c.span.column));
    Value::Object(m)
}

/// Runs `tavern parse`.
pub async fn run(_globals: &Globals, args: Args) -> u8 {
    let text = match read_input(args.file.as_deref()) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let parsed = protocol::parse(&text, args.format);
    print_json(&json!({
        "response_text": parsed.response_text,
        "calls": parsed.calls.iter().map(call_json).collect::<Vec<_>>(),
        "diagnostics": diagnostics_json(&parsed.diagnostics),
    }));
    if parsed.has_errors() {
        FAILED
    } else {
        OK
    }
}
