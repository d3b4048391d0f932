//! VCPToolBox manifests (`plugin-manifest.json`): synchronous stdio plugins run unchanged.
//! Each `capabilities.invocationCommands[]` entry becomes a process tool `name:commandIdentifier`.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::manifest::{ConfigOption, OptionType, PermissionsSpec, PluginManifest};
use crate::problem::Problem;
use crate::tools::{Implementation, ToolDefinition};

/// File name of a VCP manifest.
pub const VCP_FILE: &str = "plugin-manifest.json";

/// A parsed `plugin-manifest.json` (the fields tavern uses; others are ignored).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VcpManifest {
    /// Plugin name (tool namespace).
    pub name: String,
    /// Human title.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Version.
    #[serde(default)]
    pub version: Option<String>,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Only `synchronous` is supported.
    pub plugin_type: String,
    /// How to start it.
    pub entry_point: VcpEntryPoint,
    /// Protocol and timeout.
    #[serde(default)]
    pub communication: Option<VcpCommunication>,
    /// Settings: `KEY: "string"` or `KEY: {type, default, description}`.
    #[serde(default)]
    pub config_schema: Map<String, Value>,
    /// What it can do.
    #[serde(default)]
    pub capabilities: VcpCapabilities,
}

/// `entryPoint`.
#[derive(Debug, Clone, Deserialize)]
pub struct VcpEntryPoint {
    /// Runtime (`python`, `nodejs`), informational.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Command line, run in the plugin directory.
    pub command: String,
}

/// `communication`.
#[derive(Debug, Clone, Deserialize)]
pub struct VcpCommunication {
    /// Only `stdio` is supported.
    pub protocol: String,
    /// Milliseconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `capabilities`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VcpCapabilities {
    /// One tool each.
    #[serde(default)]
    pub invocation_commands: Vec<VcpCommand>,
}

/// One `invocationCommands` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VcpCommand {
    /// Tool name.
    #[serde(alias = "command")]
    pub command_identifier: String,
    /// Free text shown to models (VCP puts the parameter list here).
    #[serde(default)]
    pub description: String,
    /// An example call, kept for manuals.
    #[serde(default)]
    pub example: Option<String>,
    /// A JSON Schema for the arguments (a tavern extension; VCP has none).
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// The schema of a VCP command without `parameters`: any object (VCP describes parameters in
/// prose, so the engine cannot check them; the plugin does).
pub fn permissive_schema() -> Value {
    serde_json::json!({"type": "object", "additionalProperties": true})
}

/// Parses `plugin-manifest.json` text.
pub fn parse(text: &str, file: &Path) -> Result<VcpManifest, Problem> {
    let m: VcpManifest = serde_json::from_str(text).map_err(|e| {
        let mut msg = e.to_string();
        if let Some(i) = msg.find(" at line ") {
            msg.truncate(i);
        }
        let p = Problem::new(file, format!("invalid VCP manifest: {msg}"));
        if e.line() > 0 {
            p.at(e.line() as u32, Some(e.column() as u32))
        } else {
            p
        }
    })?;
    if !m.plugin_type.eq_ignore_ascii_case("synchronous") {
        return Err(super::tool_file::problem_at_key(
            file,
            text,
            "pluginType",
            format!(
                "VCP pluginType '{}' is not supported: tavern runs synchronous stdio plugins",
                m.plugin_type
            ),
        ));
    }
    if let Some(c) = &m.communication {
        if !c.protocol.eq_ignore_ascii_case("stdio") {
            return Err(super::tool_file::problem_at_key(
                file,
                text,
                "protocol",
                format!(
                    "VCP protocol '{}' is not supported: tavern speaks stdio",
                    c.protocol
                ),
            ));
        }
    }
    Ok(m)
}

fn option_type(v: &str) -> OptionType {
    match v.to_ascii_lowercase().as_str() {
        "integer" | "int" => OptionType::Integer,
        "number" | "float" => OptionType::Number,
        "boolean" | "bool" => OptionType::Boolean,
        _ => OptionType::String,
    }
}

impl VcpManifest {
    /// The equivalent plugin.yaml. A VCP plugin is a process by nature, so it may start
    /// processes; it gets no file roots and no network (its process is confined like any
    /// process tool: it reads its own directory; the host may grant the network with the
    /// `process.network_plugins` setting).
    pub fn to_manifest(&self) -> PluginManifest {
        let config_options = self
            .config_schema
            .iter()
            .map(|(k, v)| {
                let (kind, default, description) = match v {
                    Value::String(t) => (option_type(t), None, String::new()),
                    Value::Object(o) => (
                        o.get("type")
                            .and_then(Value::as_str)
                            .map(option_type)
                            .unwrap_or(OptionType::String),
                        o.get("default").cloned(),
                        o.get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    _ => (OptionType::String, None, String::new()),
                };
                ConfigOption {
                    id: Some(k.clone()),
                    key: None,
                    kind,
                    default,
                    display_name: None,
                    description,
                }
            })
            .collect();
        PluginManifest {
            instances: None,
            resources: None,
            resource_templates: None,
            prompts: None,
            name: self.name.clone(),
            display_name: self.display_name.clone(),
            version: self.version.clone(),
            description: self.description.clone(),
            tools: None,
            nodes: None,
            workflows: None,
            config_options,
            permissions: PermissionsSpec {
                processes: true,
                ..PermissionsSpec::default()
            },
            limits: None,
            process_limits: None,
        }
    }

    /// One tool per invocation command, ids not yet normalised (`commandIdentifier`).
    pub fn tools(&self) -> Vec<ToolDefinition> {
        let timeout_ms = self.communication.as_ref().and_then(|c| c.timeout);
        self.capabilities
            .invocation_commands
            .iter()
            .map(|c| ToolDefinition {
                id: c.command_identifier.clone(),
                display_name: None,
                description: if c.description.is_empty() {
                    self.description.clone()
                } else {
                    c.description.clone()
                },
                parameters: c.parameters.clone().unwrap_or_else(permissive_schema),
                implementation: Implementation::Script {
                    command: self.entry_point.command.clone(),
                    timeout_ms,
                    limits: None,
                },
                annotations: None,
                examples: c.example.iter().map(|e| Value::String(e.clone())).collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{
  "manifestVersion": "1.0.0",
  "name": "Randomness",
  "displayName": "Random",
  "version": "1.0.0",
  "description": "dice",
  "pluginType": "synchronous",
  "entryPoint": {"type": "python", "command": "python3 random_tool.py"},
  "communication": {"protocol": "stdio", "timeout": 5000},
  "configSchema": {"SEED": "integer", "MODE": {"type": "string", "default": "fair"}},
  "capabilities": {"invocationCommands": [
    {"commandIdentifier": "rollDice", "description": "Roll dice. Params: sides", "example": "..."},
    {"commandIdentifier": "pick"}
  ]}
}"#;

    #[test]
    fn commands_become_tools_and_config_options() {
        let m = parse(SAMPLE, Path::new(VCP_FILE)).unwrap();
        let tools = m.tools();
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].id, "rollDice");
        assert_eq!(tools[0].parameters, permissive_schema());
        assert_eq!(tools[1].description, "dice");
        assert!(
            matches!(&tools[0].implementation, Implementation::Script { command, timeout_ms: Some(5000), .. } if command == "python3 random_tool.py")
        );
        let pm = m.to_manifest();
        assert!(pm.permissions.processes);
        assert_eq!(pm.config_options.len(), 2);
        assert_eq!(pm.config_options[0].kind, OptionType::Integer);
        assert_eq!(pm.config_options[1].default, Some(Value::from("fair")));
    }

    #[test]
    fn unsupported_kinds_are_refused() {
        let t = SAMPLE.replace("\"synchronous\"", "\"asynchronous\"");
        let p = parse(&t, Path::new(VCP_FILE)).unwrap_err();
        assert!(p.message.contains("asynchronous"), "{p}");
        assert_eq!(p.line, Some(7));
    }
}
