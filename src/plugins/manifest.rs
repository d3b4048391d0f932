//! `plugin.yaml` (seed 001 §6.2): the plugin's name, metadata, where its tools and nodes are,
//! its settings, the permissions it asks for and the limits it wants.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::problem::Problem;
use crate::strict::Shape;

/// File name of the manifest.
pub const MANIFEST_FILE: &str = "plugin.yaml";

/// A parsed `plugin.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginManifest {
    /// Unique plugin name; the namespace of its tools (`name:tool`).
    pub name: String,
    /// Human title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Version as written (`1.0.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What the plugin does.
    #[serde(default)]
    pub description: String,
    /// Where its `*.tool.json` files are (`./tools` when absent), or tools written inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsSection>,
    /// Where its node definitions (`*.node.json`) are (`./nodes` when absent and present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Entry>,
    /// Where its workflow files (`*.json`) are (`./workflows` when absent and present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows: Option<Entry>,
    /// Settings the plugin reads, keyed `extensions.<name>.<option>`.
    #[serde(default)]
    pub config_options: Vec<ConfigOption>,
    /// What the plugin may use.
    #[serde(default)]
    pub permissions: PermissionsSpec,
    /// Script limits, as written (each may only lower the engine's limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Value>,
    /// Limits of the plugin's process tools, as written (`memoryMb`, `cpuSeconds`,
    /// `processes`, `openFiles`, `outputBytes`); each may only lower the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_limits: Option<Value>,
    /// How many Lua states serve its calls at once, as written (1 to [`MAX_INSTANCES`]; 1
    /// when absent; checked by [`instances`]). Only for plugins whose scripts keep no state
    /// shared between calls: each instance has globals of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<Value>,
    /// MCP resources the plugin serves (`tavern serve`/`tavern mcp`), as written: `{uri,
    /// name, title?, description?, mimeType?}` with `text`, `blob` (base64) or `tool` (a
    /// tool of this plugin that reads it). Read by the server (src/server/catalog.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Value>,
    /// MCP resource templates, as written: `{uriTemplate, name, …, tool, complete?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_templates: Option<Value>,
    /// MCP prompts, as written: `{name, title?, description?, arguments?, messages | tool}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Value>,
}

/// The number of Lua states `instances:` asks for, or what is wrong with it.
pub fn instances(written: Option<&Value>) -> Result<usize, String> {
    let Some(v) = written else {
        return Ok(1);
    };
    match v.as_u64() {
        Some(n) if (1..=u64::from(MAX_INSTANCES)).contains(&n) => Ok(n as usize),
        _ => Err(format!(
            "instances: {v} is not a whole number from 1 to {MAX_INSTANCES}: write how many calls the plugin's scripts may serve at once (each instance is a Lua state of its own)"
        )),
    }
}

/// The most `instances:` a plugin may ask for.
pub const MAX_INSTANCES: u32 = 64;

/// `tools:` — a directory entry (seed 001) or a list of inline definitions (seed 000 §5.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolsSection {
    /// `tools: { entry: ./tools }`.
    Entry(Entry),
    /// `tools: [ {id, description, parameters, implementation}, … ]`.
    Inline(Vec<Value>),
}

/// `{ entry: ./dir }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Directory relative to the plugin directory.
    pub entry: String,
}

/// Type of a config option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionType {
    /// Any text.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
}

impl OptionType {
    /// The name as written in plugin.yaml.
    pub fn name(self) -> &'static str {
        match self {
            OptionType::String => "string",
            OptionType::Integer => "integer",
            OptionType::Number => "number",
            OptionType::Boolean => "boolean",
        }
    }
}

/// One entry of `configOptions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigOption {
    /// Short option name (`root`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Full key (`extensions.FileOperator.root`), the seed's spelling; `id` wins when both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Value type.
    #[serde(rename = "type")]
    pub kind: OptionType,
    /// Value used when neither tavern.toml nor `--set` gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Human title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the option does.
    #[serde(default)]
    pub description: String,
}

/// `permissions:` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionsSpec {
    /// Hook names the plugin may register handlers for.
    pub hooks: Vec<String>,
    /// Services it may override.
    pub services: ServicesSpec,
    /// File roots it may read or write (`{config.X}` substitutes a setting; relative roots are
    /// taken from the engine home).
    pub fs: FsSpec,
    /// Whether it may start processes (script tools).
    pub processes: bool,
    /// Tools it may call through `api.tools.call` (globs like `FileOperator:*`); its own
    /// tools and `system:*` need no entry.
    pub tools: Vec<String>,
    /// Whether its process tools may use the network (off: no sockets but Unix ones).
    pub network: bool,
    /// Host environment variables passed to its process tools (besides `PATH` and its
    /// config values).
    pub env: Vec<String>,
    /// What `api.world` may do with the engine's live world: `read` or `write`.
    pub world: Option<crate::script::WorldAccess>,
}

/// `permissions.services`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServicesSpec {
    /// Service names it may replace.
    #[serde(rename = "override")]
    pub override_: Vec<String>,
}

/// `permissions.fs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FsSpec {
    /// Roots it may read.
    pub read: Vec<String>,
    /// Roots it may write (writing implies reading).
    pub write: Vec<String>,
}

/// Keys of seed 001's plugin.yaml that belong to ComfyTavern's frontend: accepted (so a seed
/// manifest loads) and ignored.
pub const FRONTEND_KEYS: &[&str] = &["frontend"];
/// `permissions` keys for the frontend (`ui: {wrap, inject}`), accepted and ignored.
pub const FRONTEND_PERMISSIONS: &[&str] = &["ui"];

/// The keys plugin.yaml may hold, from the structs above (see `src/strict.rs`).
pub fn shape() -> Shape {
    let entry = Shape::of::<Entry>();
    Shape::of::<PluginManifest>()
        .also(FRONTEND_KEYS)
        .child(
            "tools",
            Shape::Either(
                Box::new(crate::tools::tool_shape().seq()),
                Box::new(entry.clone()),
            ),
        )
        .child("nodes", entry.clone())
        .child("workflows", entry)
        .child("configOptions", Shape::of::<ConfigOption>().seq())
        .child(
            "permissions",
            Shape::of::<PermissionsSpec>()
                .also(FRONTEND_PERMISSIONS)
                .child("services", Shape::of::<ServicesSpec>())
                .child("fs", Shape::of::<FsSpec>()),
        )
        .child("limits", Shape::of::<crate::script::PartialLimits>())
        .child("resources", Shape::keys(RESOURCE_KEYS).seq())
        .child("resourceTemplates", Shape::keys(TEMPLATE_KEYS).seq())
        .child(
            "prompts",
            Shape::keys(PROMPT_KEYS)
                .child("arguments", Shape::keys(PROMPT_ARGUMENT_KEYS).seq())
                .seq(),
        )
}

/// The keys of one `resources:` entry (read by the MCP server, src/server/catalog.rs).
pub const RESOURCE_KEYS: &[&str] = &[
    "uri",
    "name",
    "title",
    "description",
    "mimeType",
    "text",
    "blob",
    "tool",
];
/// The keys of one `resourceTemplates:` entry.
pub const TEMPLATE_KEYS: &[&str] = &[
    "uriTemplate",
    "name",
    "title",
    "description",
    "mimeType",
    "tool",
    "complete",
];
/// The keys of one `prompts:` entry.
pub const PROMPT_KEYS: &[&str] = &[
    "name",
    "title",
    "description",
    "arguments",
    "messages",
    "tool",
];
/// The keys of one argument of a prompt.
pub const PROMPT_ARGUMENT_KEYS: &[&str] = &["name", "title", "description", "required", "complete"];

/// Parses plugin.yaml text; a YAML or shape error becomes a [`Problem`] with line and column.
/// Unknown keys are problems at their own line (the first, with the others in its hint); a
/// key indented one space off is reported as that, not as what YAML then makes of it.
pub fn parse(text: &str, file: &Path) -> Result<PluginManifest, Problem> {
    if let Some(doc) = crate::strict::locate_yaml(text) {
        let ps: Vec<Problem> = crate::strict::unknown_keys(&doc, &shape())
            .iter()
            .map(|u| u.problem(file, MANIFEST_FILE))
            .collect();
        if let Some(p) = crate::strict::merge(ps) {
            return Err(p);
        }
    }
    serde_saphyr::from_str::<PluginManifest>(text).map_err(|e| {
        let mut p = yaml_problem(&e, file);
        // A bracket left open: the parser stops far below it; say where it opened.
        if let Some(b) = crate::problem::unclosed_bracket(text, crate::problem::Syntax::Yaml) {
            p.message = format!("{} ({b})", p.message);
        }
        match crate::strict::yaml_indent_slip(text) {
            Some(slip) => slip.problem(file, &p.message),
            None => p,
        }
    })
}

/// A serde-saphyr error as a [`Problem`].
pub fn yaml_problem(e: &serde_saphyr::Error, file: &Path) -> Problem {
    let plain = e.without_snippet();
    let mut message = plain.to_string();
    // The plain message may still end with " at line X column Y": the Problem carries those.
    if let Some(i) = message.find(" at line ") {
        message.truncate(i);
    }
    let p = Problem::new(file, format!("invalid plugin.yaml: {}", message.trim()));
    match plain.location() {
        Some(l) if l.line() > 0 => p.at(l.line() as u32, Some(l.column() as u32)),
        _ => p,
    }
}

/// True for a valid plugin name: a letter, then letters, digits, `_` or `-` (at most 64).
/// Dots and colons are refused because they separate namespace and tool in ids.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_manifest_parses() {
        let y = r#"
name: FileOperator
displayName: Files
version: 1.0.0
description: files
tools: { entry: ./tools }
configOptions:
  - id: root
    type: string
    default: ./workspace
permissions:
  hooks: ["tool:before-invoke"]
  services: { override: [] }
  fs: { read: ["{config.root}"], write: ["{config.root}"] }
  processes: false
limits:
  instructions: 1000
"#;
        let m = parse(y, Path::new("plugin.yaml")).unwrap();
        assert_eq!(m.name, "FileOperator");
        assert_eq!(m.version.as_deref(), Some("1.0.0"));
        assert_eq!(m.config_options[0].kind, OptionType::String);
        assert_eq!(m.permissions.fs.write, vec!["{config.root}".to_string()]);
        assert_eq!(m.permissions.hooks, vec!["tool:before-invoke".to_string()]);
        assert!(matches!(m.tools, Some(ToolsSection::Entry(_))));
    }

    #[test]
    fn unknown_keys_point_at_themselves() {
        let cases = [
            (
                "name: x\nconfigOption:\n  - id: a\n    type: string\n",
                2,
                1,
                "configOption",
                Some("configOptions"),
            ),
            (
                "name: x\npermissions:\n  proceses: true\n",
                3,
                3,
                "proceses",
                Some("processes"),
            ),
            (
                "name: x\nconfigOptions:\n  - id: a\n    typ: string\n",
                4,
                5,
                "typ",
                Some("type"),
            ),
            (
                "name: x\ntools:\n  - id: t\n    params: {}\n    implementation: {type: service}\n",
                4,
                5,
                "params",
                Some("parameters"),
            ),
            (
                "name: x\ntools:\n  - id: t\n    implementation: {type: service, fuction: f}\n",
                4,
                37,
                "fuction",
                Some("function"),
            ),
            (
                "name: x\ntools: {entyr: ./t}\n",
                2,
                9,
                "entyr",
                Some("entry"),
            ),
            (
                "name: x\nlimits:\n  instuctions: 5\n",
                3,
                3,
                "instuctions",
                Some("instructions"),
            ),
            ("name: x\nzebra: 1\n", 2, 1, "zebra", None),
        ];
        for (y, line, col, key, sugg) in cases {
            let p = parse(y, Path::new("plugin.yaml")).unwrap_err();
            assert_eq!((p.line, p.column), (Some(line), Some(col)), "{y}: {p}");
            assert!(p.message.contains(&format!("unknown key `{key}`")), "{p}");
            match sugg {
                Some(s) => assert!(
                    p.to_string().contains(&format!("did you mean `{s}`?")),
                    "{p}"
                ),
                None => assert!(!p.to_string().contains("did you mean"), "{p}"),
            }
        }
        // A manifest for a newer format is read tolerantly.
        let m = parse(
            "formatVersion: 2\nname: x\nzebra: 1\n",
            Path::new("plugin.yaml"),
        )
        .unwrap();
        assert_eq!(m.name, "x");
    }

    #[test]
    fn the_seed_manifest_is_accepted() {
        let y = "name: my-awesome-plugin\ndisplayName: x\nversion: 1.0.0\ndescription: d\nnodes:\n  entry: ./nodes\ntools:\n  entry: ./tools\nfrontend:\n  build:\n    entry: dist/index.js\n    styles: [dist/style.css]\npermissions:\n  hooks: [\"hook:client:workflow:before-execute\"]\n  ui:\n    wrap: [\"ui:BaseNode\"]\n    inject: [\"node:header:right\"]\n  services:\n    override: []\n";
        let m = parse(y, Path::new("plugin.yaml")).unwrap();
        assert_eq!(m.name, "my-awesome-plugin");
    }

    #[test]
    fn a_one_space_slip_is_named_as_such() {
        let y = "name: x\nconfigOptions:\n  - id: root\n   type: string\n";
        let p = parse(y, Path::new("plugin.yaml")).unwrap_err();
        let text = p.to_string();
        assert_eq!((p.line, p.column), (Some(4), Some(4)), "{text}");
        assert!(
            p.message
                .starts_with("`type` is indented 3 spaces but the keys beside it are indented 4"),
            "{text}"
        );
        assert!(!p.message.contains("missing field"), "{text}");
    }

    #[test]
    fn bad_yaml_has_a_line() {
        let y = "name: x\ndescription: [unclosed\nversion: 1\n";
        let p = parse(y, Path::new("plugin.yaml")).unwrap_err();
        assert!(p.line.is_some(), "{p}");
    }

    #[test]
    fn names() {
        for (n, ok) in [
            ("FileOperator", true),
            ("a-b_c9", true),
            ("9x", false),
            ("a.b", false),
            ("a:b", false),
            ("", false),
        ] {
            assert_eq!(valid_name(n), ok, "{n}");
        }
    }
}
