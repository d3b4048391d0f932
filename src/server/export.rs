//! Every outside shape of a tool list, generated in one place from the tool definitions:
//! tavern's own (`GET /api/tools`), MCP `tools/list`, OpenAI function calling and Anthropic
//! tool use. `tavern tools --format …`, the REST API and the MCP server all call these. The
//! OpenAI and Anthropic entries are written by `agent::provider_tool_json`, the one writer
//! of those two shapes (agents' native tool lists use it too, without the `server` feature).

use std::str::FromStr;

use serde_json::{json, Map, Value};

use crate::agent::{provider_tool_json, ProviderShape};
use crate::tools::Tool;

/// Which shape a tool list is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFormat {
    /// `{id, name, title, description, inputSchema, annotations}` (seed 000 §6.1).
    #[default]
    Tavern,
    /// MCP `tools/list` entries: `{name, title, description, inputSchema, annotations}`.
    Mcp,
    /// OpenAI function calling: `{"type": "function", "function": {name, description,
    /// parameters}}`.
    OpenAi,
    /// Anthropic tool use: `{name, description, input_schema}`.
    Anthropic,
}

impl FromStr for ExportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tavern" | "" => Ok(ExportFormat::Tavern),
            "mcp" => Ok(ExportFormat::Mcp),
            "openai" => Ok(ExportFormat::OpenAi),
            "anthropic" => Ok(ExportFormat::Anthropic),
            other => Err(format!(
                "unknown tool list format '{other}' (expected openai, anthropic or mcp)"
            )),
        }
    }
}

/// The tool's parameter schema as sent to clients: `additionalProperties: false` is written
/// when the engine treats the schema as closed (it has properties and says nothing about
/// extra keys), so clients and the engine agree on what is refused.
pub fn input_schema(tool: &Tool) -> Value {
    let mut schema = tool.definition.parameters.clone();
    if let Value::Object(m) = &mut schema {
        let has_props = m
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if has_props
            && !m.contains_key("additionalProperties")
            && !m.contains_key("patternProperties")
        {
            m.insert("additionalProperties".into(), Value::Bool(false));
        }
        m.entry("type").or_insert_with(|| json!("object"));
    }
    schema
}

/// The MCP `title`: the tool's display name, else its canonical id (the id is in
/// `_meta["tavern/id"]`; callers may send the id or the wire name).
pub fn title(tool: &Tool) -> String {
    tool.definition
        .display_name
        .clone()
        .unwrap_or_else(|| tool.id().to_string())
}

/// The tools a list in `format` shows: every tool for tavern's own shape (the web explorer
/// sets node tools aside itself), the model-facing list
/// ([`ToolManager::model_list`](crate::tools::ToolManager::model_list)) for MCP, OpenAI and
/// Anthropic.
pub fn tools_for(
    tools: &crate::tools::ToolManager,
    format: ExportFormat,
) -> Vec<std::sync::Arc<Tool>> {
    match format {
        ExportFormat::Tavern => tools.list(),
        _ => tools.model_list(),
    }
}

/// MCP annotations: the tool's own hints, with the human display name (else the id) as
/// `title`.
pub fn annotations(tool: &Tool) -> Value {
    let mut m = match &tool.definition.annotations {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    m.entry("title").or_insert_with(|| {
        json!(tool
            .definition
            .display_name
            .clone()
            .unwrap_or_else(|| tool.id().to_string()))
    });
    Value::Object(m)
}

/// One tool in the given shape.
pub fn tool_json(tool: &Tool, format: ExportFormat) -> Value {
    let d = &tool.definition;
    match format {
        ExportFormat::Tavern => json!({
            "id": d.id,
            "name": tool.wire_name(),
            // tavern's own shape keeps the canonical id here (`displayName` is in the
            // annotations' `title`).
            "title": d.id,
            "description": d.description,
            "inputSchema": input_schema(tool),
            "annotations": annotations(tool),
        }),
        ExportFormat::Mcp => json!({
            "name": tool.wire_name(),
            "title": title(tool),
            "description": d.description,
            "inputSchema": input_schema(tool),
            "annotations": annotations(tool),
            "_meta": {"tavern/id": d.id},
        }),
        ExportFormat::OpenAi => provider_tool_json(tool, ProviderShape::OpenAi, input_schema(tool)),
        ExportFormat::Anthropic => {
            provider_tool_json(tool, ProviderShape::Anthropic, input_schema(tool))
        }
    }
}

/// A whole list: `{"tools": [...]}` in the given shape (for OpenAI and Anthropic the array is
/// exactly the request's `tools` field; for MCP it is the `tools/list` result).
pub fn tools_json(tools: &[std::sync::Arc<Tool>], format: ExportFormat) -> Value {
    json!({"tools": tools.iter().map(|t| tool_json(t, format)).collect::<Vec<_>>()})
}
