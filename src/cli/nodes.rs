//! `tavern nodes [--long|--json|--markdown]`: the node types a workflow can use (built-in
//! `core:*`, `core:GroupInput`/`core:GroupOutput` and the home's plugin nodes), one line
//! each, or with inputs, outputs and config.

use tavern::internal::workflow::catalogue;

use super::{print_json, print_text, Globals, OK};

/// List the node types workflows can use, one line each (--long: with inputs, outputs and
/// config).
#[derive(clap::Args)]
pub struct Args {
    /// Every node type with its inputs, outputs and config.
    #[arg(long, conflicts_with_all = ["json", "markdown"])]
    pub long: bool,
    /// Print the catalogue as JSON (type, category, description, inputs, outputs, config).
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the catalogue as the Markdown of docs/workflows.md (what --long prints).
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
    } else if args.long || args.markdown {
        print_text(&catalogue::markdown(registry));
    } else {
        print_text(&catalogue::lines(registry));
    }
    OK
}
