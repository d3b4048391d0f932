//! `tavern tools [--json]`: list the registered tools.

use tavern::internal::server::export::{tools_for, tools_json, ExportFormat};
use tavern::internal::tools::is_node_tool;

use super::{print_json, print_text, Globals, OK};

/// List the registered tools with their parameters, node tools apart (or as JSON).
#[derive(clap::Args)]
pub struct Args {
    /// Print the list as JSON (id, wireName, displayName, description, parameters, …).
    #[arg(long)]
    pub json: bool,
    /// Print the list as a client expects it: openai, anthropic or mcp (the model-facing
    /// list: node:* tools only with tools.list_nodes = true), or tavern (the
    /// `GET /api/tools` shape, every tool).
    #[arg(long, value_parser = |s: &str| s.parse::<ExportFormat>())]
    pub format: Option<ExportFormat>,
}

/// Runs `tavern tools`.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    let engine = match globals.engine() {
        Ok(e) => e,
        Err(code) => return code,
    };
    let tools = engine.tools();
    if let Some(format) = args.format {
        print_json(&tools_json(&tools_for(tools, format), format));
    } else if args.json {
        let mut list = tools.list_json();
        // `overriddenBy`: who replaced the tool (bottom of the stack first).
        if let serde_json::Value::Array(items) = &mut list {
            for item in items {
                let id = item.get("id").and_then(|v| v.as_str()).unwrap_or_default();
                let by = engine.hooks().overridden_by(id);
                if !by.is_empty() {
                    item["overriddenBy"] = serde_json::json!(by);
                }
            }
        }
        print_json(&list);
    } else {
        let mut text = String::new();
        let (nodes, others): (Vec<_>, Vec<_>) =
            tools.list().into_iter().partition(|t| is_node_tool(t.id()));
        for t in others {
            text.push_str(&t.manual_entry());
            if t.wire_name() != t.id() {
                text.push_str(&format!("  - Wire name: {}\n", t.wire_name()));
            }
            let by = engine.hooks().overridden_by(t.id());
            if !by.is_empty() {
                text.push_str(&format!("  - Overridden by: {}\n", by.join(", ")));
            }
        }
        // Node tools apart, one line each: callable, but not in the lists a model reads
        // unless `tools.list_nodes = true`.
        if !nodes.is_empty() {
            text.push_str(&format!(
                "\nNode tools ({}; callable, {} model-facing lists{}):\n",
                nodes.len(),
                if tools.lists_nodes() { "listed in" } else { "left out of" },
                if tools.lists_nodes() { "" } else { " unless tools.list_nodes = true" },
            ));
            for t in nodes {
                let first = t.definition.description.lines().next().unwrap_or_default();
                text.push_str(&format!("- {}: {first}\n", t.id()));
            }
        }
        if text.is_empty() {
            text.push_str("No tools are registered.\n");
        }
        print_text(&text);
    }
    OK
}
