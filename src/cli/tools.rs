//! `tavern tools [--json]`: list the registered tools.

use tavern::internal::server::export::{tools_json, ExportFormat};

use super::{print_json, print_text, Globals, OK};

/// List the registered tools with their parameters (or as JSON).
#[derive(clap::Args)]
pub struct Args {
    /// Print the list as JSON (id, wireName, displayName, description, parameters, …).
    #[arg(long)]
    pub json: bool,
    /// Print the list as a client expects it: openai, anthropic or mcp (or tavern, the
    /// `GET /api/tools` shape).
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
        print_json(&tools_json(&tools.list(), format));
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
        for t in tools.list() {
            text.push_str(&t.manual_entry());
            if t.wire_name() != t.id() {
                text.push_str(&format!("  - Wire name: {}\n", t.wire_name()));
            }
            let by = engine.hooks().overridden_by(t.id());
            if !by.is_empty() {
                text.push_str(&format!("  - Overridden by: {}\n", by.join(", ")));
            }
        }
        if text.is_empty() {
            text.push_str("No tools are registered.\n");
        }
        print_text(&text);
    }
    OK
}
