//! Tool definitions as seed 001 §6.3 writes them (`*.tool.json`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a tool is carried out (seed 001 §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Implementation {
    /// A function: a Rust host function (no `script`), or a Lua/Rhai function in a plugin.
    Service {
        /// Script file, relative to the plugin directory (`main.lua`, `tools.rhai`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        script: Option<String>,
        /// Function name inside the script.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        function: Option<String>,
    },
    /// An external process speaking JSON on stdin/stdout (VCPToolBox's stdio contract).
    Script {
        /// Command line, run in the plugin directory (`python3 scripts/x.py`).
        command: String,
        /// Wall-clock limit; the process tree is killed when it passes.
        #[serde(
            default,
            rename = "timeout_ms",
            alias = "timeoutMs",
            skip_serializing_if = "Option::is_none"
        )]
        timeout_ms: Option<u64>,
        /// Process limits for this tool (`memoryMb`, `cpuSeconds`, `processes`, `openFiles`,
        /// `outputBytes`); each may only lower the plugin's and the host's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limits: Option<Value>,
    },
    /// One node run alone as a micro-workflow (seed 001 §4.1.2).
    Node {
        /// Node type, `namespace:Type`.
        #[serde(rename = "nodeType", alias = "node_type")]
        node_type: String,
    },
    /// A whole workflow (seed 003).
    Workflow {
        /// Workflow id or file path.
        #[serde(rename = "workflowId", alias = "workflow_id")]
        workflow_id: String,
    },
}

impl Implementation {
    /// Each `type` and the keys it reads besides `type` (aliases included), for the strict
    /// manifest check. Kept next to the enum; `implementation_keys_parse` tests it.
    pub const KEYS: &'static [(&'static str, &'static [&'static str])] = &[
        ("service", &["script", "function"]),
        ("script", &["command", "timeout_ms", "timeoutMs", "limits"]),
        ("node", &["nodeType", "node_type"]),
        ("workflow", &["workflowId", "workflow_id"]),
    ];

    /// The `type` string as written in tool.json.
    pub fn kind(&self) -> &'static str {
        match self {
            Implementation::Service { .. } => "service",
            Implementation::Script { .. } => "script",
            Implementation::Node { .. } => "node",
            Implementation::Workflow { .. } => "workflow",
        }
    }

    /// A host (Rust) service with no script behind it.
    pub fn host() -> Self {
        Implementation::Service {
            script: None,
            function: None,
        }
    }
}

/// The keys a tool definition may hold (`*.tool.json`, inline `tools:` items), for
/// `src/strict.rs`: the struct's fields, `implementation` by its `type`.
pub fn tool_shape() -> crate::strict::Shape {
    use crate::strict::Shape;
    Shape::of::<ToolDefinition>().child(
        "implementation",
        Shape::Tagged {
            tag: "type",
            variants: Implementation::KEYS
                .iter()
                .map(|(t, k)| (*t, k.to_vec()))
                .collect(),
        },
    )
}

/// Everything a caller needs to know to call a tool, and the engine to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition {
    /// Canonical id, namespaced `plugin:tool` (`system:echo`, `workflow:summarize_text`).
    pub id: String,
    /// Human title; defaults to the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the tool does and when to use it (shown to models).
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// How the tool is carried out.
    pub implementation: Implementation,
    /// MCP-style hints (`readOnlyHint`, `destructiveHint`, …), passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Example calls, passed through to manuals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Value>,
}

/// `{"type":"object","properties":{}}`: the schema of a tool that takes no arguments.
pub fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

impl ToolDefinition {
    /// A host tool with the given id, description and parameter schema.
    pub fn host(id: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolDefinition {
            id: id.into(),
            display_name: None,
            description: description.into(),
            parameters,
            implementation: Implementation::host(),
            annotations: None,
            examples: Vec::new(),
        }
    }

    /// The namespace part of the id (`system` for `system:echo`), if any.
    pub fn namespace(&self) -> Option<&str> {
        self.id.split_once(':').map(|(ns, _)| ns)
    }
}
