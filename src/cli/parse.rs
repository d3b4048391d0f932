//! `tavern parse [--format F] [--reader fast|grammar] [FILE]`: read tool calls and print them
//! as one JSON object.

use std::path::PathBuf;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tavern::internal::protocol::{self, Call, Diagnostic, Format, OnError};

use super::{format_help, parse_format, read_input, Globals, FAILED, INTERNAL, OK};

/// Read tool calls from model output (FILE or stdin) and print them as JSON.
#[derive(clap::Args)]
pub struct Args {
    /// Call format to look for (the names of the protocol's format table).
    #[arg(long, default_value_t = Format::Auto, value_parser = parse_format, help = format_help())]
    pub format: Format,
    /// Which reader: `fast` (the production scanner) or `grammar` (the pest grammar in
    /// grammar/tam.pest: slow, the reference definition; prints the same JSON shape).
    #[arg(long, default_value = "fast", value_parser = ["fast", "grammar"])]
    pub reader: String,
    /// File to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
}

fn on_error_name(o: OnError) -> &'static str {
    match o {
        OnError::Stop => "stop",
        OnError::Continue => "continue",
    }
}

/// One call as `tavern parse` prints it: `tool`, `args`, `block`, `source` (the form it was
/// read in: tam, vcp, action or json), `step` and `on_error` for chain steps, `line`,
/// `column`, and its id as `id` and `call_id`; serialized straight from the call (no copy of the arguments).
struct CallView<'a>(&'a Call);

impl Serialize for CallView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("tool", &c.tool)?;
        m.serialize_entry("args", &c.args)?;
        m.serialize_entry("block", &c.block)?;
        m.serialize_entry("source", &c.source)?;
        if let Some(step) = c.step {
            m.serialize_entry("step", &step)?;
            m.serialize_entry("on_error", on_error_name(c.on_error))?;
        }
        m.serialize_entry("line", &c.span.line)?;
        m.serialize_entry("column", &c.span.column)?;
        // The call's id, under both names a client looks for (`id` as OpenAI's
        // `tool_calls[].id`, `call_id` as `tavern call`'s results).
        if let Some(id) = &c.id {
            m.serialize_entry("id", id)?;
            m.serialize_entry("call_id", id)?;
        }
        m.end()
    }
}

/// The printed object: `response_text`, `calls`, `diagnostics`.
#[derive(Serialize)]
struct Output<'a> {
    response_text: &'a str,
    #[serde(serialize_with = "calls_view")]
    calls: &'a [Call],
    diagnostics: &'a [Diagnostic],
}

fn calls_view<S: Serializer>(calls: &&[Call], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(calls.iter().map(CallView))
}

/// Runs `tavern parse`.
pub async fn run(_globals: &Globals, args: Args) -> u8 {
    let text = match read_input(args.file.as_deref()) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let parsed = if args.reader == "grammar" {
        match protocol::grammar::parse_reference(&text, args.format) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("tavern: the grammar reader could not read the input: {e}");
                return INTERNAL;
            }
        }
    } else {
        protocol::parse(&text, args.format)
    };
    super::write_json(&Output {
        response_text: &parsed.response_text,
        calls: &parsed.calls,
        diagnostics: &parsed.diagnostics,
    });
    let code = if parsed.has_errors() { FAILED } else { OK };
    // The process ends right after this: let the OS take back the input and the calls
    // instead of freeing them one by one (milliseconds for megabytes of calls).
    std::mem::forget(parsed);
    std::mem::forget(text);
    code
}
