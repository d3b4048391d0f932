//! `tavern nodes [--json] [--markdown]`: the node types a workflow can use (built-in `core:*`
//! plus the home's plugin nodes), with inputs, outputs and config.

use tavern::internal::workflow::catalogue;

use super::{print_json, print_text, Globals, OK};

/// List the node types workflows can use, with inputs, outputs and config.
#[derive(clap::Args)]
pub struct Args {
    /// Print the catalogue as JSON (type, category, description, inputs, outputs, config).
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the catalogue as the Markdown of docs/workflows.md.
    #[arg(long)]
    pub markdown: bool,
}

/// Runs `tavern nodes`.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    let engine = match globals.engine() {
        Ok(e) => e,
        Err(code) => return code,
    };
    let registry = engine.workflows().registry();
    if args.json {
        print_json(&catalogue::json(registry));
    } else {
        print_text(&catalogue::markdown(registry));
    }
    OK
}
