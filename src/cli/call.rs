//! `tavern call [--format F] [FILE]`: parse, validate and run the calls; print the results.

use std::path::PathBuf;

use tavern::internal::protocol::Format;
use tavern::internal::tools::Caller;
use tavern::Request;

use super::{format_help, parse_format, print_json, read_input, Globals, FAILED, INTERNAL, OK};

/// Run the tool calls in model output (FILE or stdin) and print the results as JSON.
#[derive(clap::Args)]
pub struct Args {
    /// Call format to look for (the names of the protocol's format table).
    #[arg(long, default_value_t = Format::Auto, value_parser = parse_format, help = format_help())]
    pub format: Format,
    /// File to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
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
    let req = Request::text(text).format(args.format).caller(Caller::Cli);
    let report = match engine.run(req).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return INTERNAL;
        }
    };
    print_json(&report.to_json());
    if report.failed() {
        FAILED
    } else {
        OK
    }
}
