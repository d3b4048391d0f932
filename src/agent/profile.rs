//! Agent profiles: `<home>/agents/<id>.json` with seed 002/003's fields, and the inventory
//! they name.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::call_format::CallFormat;
use super::llm::LlmSettings;
use super::manual::ManualStyle;
use super::tools::{agent_tool_definition, agent_tool_handler, AgentTools, Forward, AGENT_TOOLS};
use super::AgentError;
use crate::problem::Problem;
use crate::protocol::Format;
use crate::tools::ToolManager;

/// `agent_profile.json` (seed 002 §7, seed 003 §2.2) plus tavern's run settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentProfile {
    /// The agent's id (default: the file name without `.json`).
    #[serde(default)]
    pub id: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who the agent is; opens its system prompt.
    #[serde(default)]
    pub description: String,
    /// The workflow that deliberates (its output is the model's text); `None`: the bundled
    /// default (messages → `llm:Chat` → text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_deliberation_workflow_id: Option<String>,
    /// The private state the agent starts with.
    #[serde(default)]
    pub initial_private_state_values: Map<String, Value>,
    /// Tools the agent may call: engine tool ids (`system:get_current_time`,
    /// `FileOperator.ReadFile`), `workflow:<id>`, or an agent tool
    /// (`ReadPrivateStateTool` …).
    #[serde(default)]
    pub tool_ids_inventory: Vec<String>,
    /// Skills: workflow ids (`greet_guest` or `workflow:greet_guest`).
    #[serde(default)]
    pub skill_workflow_ids_inventory: Vec<String>,
    /// Extra system-prompt text after the description (persona, rules of the scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How the model's output is read: `auto` (default), `action`, `tam`, `vcp`, `json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_format: Option<Format>,
    /// The format the model writes calls in (`tam`, `action`, `hermes`, `pythonic` …): the
    /// manual teaches it and the loop reads it first, then every other format. Wins over
    /// `[llm] call_format` in `tavern.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_format: Option<CallFormat>,
    /// How the manual is written: `action` (default), `tam`, `openai`, `anthropic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_style: Option<ManualStyle>,
    /// The model (`base_url`, `model`, `temperature`, `max_tokens`, `stream` …).
    #[serde(default)]
    pub llm: LlmSettings,
    /// Most deliberation turns per run (default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Most tool calls per run (default 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// How often the same tool with the same arguments may run in one run (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_limit: Option<u32>,
    /// Other fields of the seed's profile (`avatar_url`, `subscribed_event_types` …), kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// The file the profile came from (empty when built in code).
    #[serde(skip)]
    pub origin: PathBuf,
    /// The file's text, for pointing problems at lines.
    #[serde(skip)]
    source: String,
}

impl AgentProfile {
    /// A profile with an id and nothing else (for hosts building profiles in code).
    pub fn new(id: impl Into<String>) -> Self {
        AgentProfile {
            id: id.into(),
            name: None,
            description: String::new(),
            core_deliberation_workflow_id: None,
            initial_private_state_values: Map::new(),
            tool_ids_inventory: Vec::new(),
            skill_workflow_ids_inventory: Vec::new(),
            instructions: None,
            tool_call_format: None,
            call_format: None,
            manual_style: None,
            llm: LlmSettings::default(),
            max_turns: None,
            max_tool_calls: None,
            repeat_limit: None,
            extra: Map::new(),
            origin: PathBuf::new(),
            source: String::new(),
        }
    }

    /// Every top-level key a profile may have ([`crate::strict::AGENT_PROFILE_KEYS`]).
    pub const KNOWN_KEYS: &'static [&'static str] = crate::strict::AGENT_PROFILE_KEYS;

    /// Reads a profile from JSON text; `origin` names it in problems.
    pub fn from_json(text: &str, origin: &Path) -> Result<Self, AgentError> {
        // Every problem at once: unknown keys, the call format, each field of a wrong type.
        let mut problems = crate::strict::check_json(
            text,
            origin,
            "agent profile",
            &crate::strict::Shape::keys(Self::KNOWN_KEYS),
        );
        problems.extend(call_format_problem(text, origin));
        let parsed = serde_json::from_str::<AgentProfile>(text);
        if let Err(e) = &parsed {
            let fields = field_problems(text, origin);
            if fields.is_empty() {
                problems.push(
                    Problem::new(origin, format!("agent profile: {e}"))
                        .at(e.line() as u32, Some(e.column() as u32))
                        .hint(
                            "an agent profile is a JSON object with `id`, `tool_ids_inventory` …",
                        ),
                );
            }
            for f in fields {
                if !problems
                    .iter()
                    .any(|q| q.line == f.line && q.column == f.column)
                {
                    problems.push(f);
                }
            }
        }
        let mut p = match parsed {
            Ok(p) if problems.is_empty() => p,
            _ => return Err(AgentError::Load(problems)),
        };
        if p.id.trim().is_empty() {
            p.id = origin
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "agent".into());
        }
        p.origin = origin.to_path_buf();
        p.source = text.to_string();
        Ok(p)
    }

    /// Loads `target`: a profile file, or an id looked up as `<home>/agents/<id>.json`.
    pub fn load(home: &Path, target: &str) -> Result<Self, AgentError> {
        let as_path = Path::new(target);
        let path = if as_path.is_file() {
            as_path.to_path_buf()
        } else {
            home.join("agents").join(format!("{target}.json"))
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_json(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let known = list_ids(home);
                let hint = if known.is_empty() {
                    format!("create {} (see agents/innkeeper.json)", path.display())
                } else {
                    format!(
                        "agents in {}: {}",
                        home.join("agents").display(),
                        known.join(", ")
                    )
                };
                Err(AgentError::NotFound {
                    target: target.to_string(),
                    hint,
                })
            }
            Err(e) => Err(AgentError::Load(vec![Problem::new(
                &path,
                format!("cannot read the agent profile: {e}"),
            )])),
        }
    }

    /// The line (1-based) where `needle` appears quoted in the profile file, if it does.
    pub(crate) fn line_of(&self, needle: &str) -> Option<u32> {
        let quoted = format!("\"{needle}\"");
        let at = self.source.find(&quoted)?;
        Some(self.source[..at].matches('\n').count() as u32 + 1)
    }
}

/// Each field of the profile in `text` whose value has the wrong type, by its path
/// (`max_turns`, `llm.temperature`), at its key: every one, not only serde's first.
fn field_problems(text: &str, origin: &Path) -> Vec<Problem> {
    let Ok(Value::Object(doc)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let fails = |v: Value| serde_json::from_value::<AgentProfile>(v).err();
    let mut out = Vec::new();
    for (key, value) in &doc {
        if !AgentProfile::KNOWN_KEYS.contains(&key.as_str()) {
            continue;
        }
        let Some(e) = fails(serde_json::json!({ key: value })) else {
            continue;
        };
        // A nested object (`llm`): name the inner field that is wrong.
        let inner: Vec<(String, String)> = match value {
            Value::Object(m) => m
                .iter()
                .filter_map(|(k, v)| {
                    fails(serde_json::json!({ key: { k: v } }))
                        .map(|e| (format!("{key}.{k}"), serde_message(&e)))
                })
                .collect(),
            _ => Vec::new(),
        };
        let found = if inner.is_empty() {
            vec![(key.clone(), serde_message(&e))]
        } else {
            inner
        };
        for (path, why) in found {
            let last = path.rsplit('.').next().unwrap_or(&path);
            let mut p = Problem::new(origin, format!("agent profile: `{path}`: {why}"));
            if let Some(at) = text.find(&format!("\"{last}\"")) {
                let (l, c) = line_col(text, at);
                p = p.at(l, Some(c));
            }
            out.push(p);
        }
    }
    out
}

/// serde_json's message without its ` at line L column C` (the place is the key's).
fn serde_message(e: &serde_json::Error) -> String {
    let m = e.to_string();
    match m.find(" at line ") {
        Some(i) => m[..i].to_string(),
        None => m,
    }
}

fn line_col(text: &str, at: usize) -> (u32, u32) {
    let line = text[..at].matches('\n').count() as u32 + 1;
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    (line, text[start..at].chars().count() as u32 + 1)
}

/// What a profile names that the engine does not have: every inventory id that names no
/// tool (with its line and a did-you-mean), a `scripted:FILE` model whose file is
/// missing (relative to `home`), and a `local:PATH.gguf` model that is missing or that
/// this build cannot run (no `llm-local`). `plugin check` reports them; `build_inventory` refuses them.
pub fn reference_problems(
    profile: &AgentProfile,
    engine: &ToolManager,
    home: &Path,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let entries = profile
        .tool_ids_inventory
        .iter()
        .map(|i| (i.trim().to_string(), false, "tool_ids_inventory"))
        .chain(profile.skill_workflow_ids_inventory.iter().map(|i| {
            let i = i.trim();
            let id = if i.starts_with("workflow:") {
                i.to_string()
            } else {
                format!("workflow:{i}")
            };
            (id, true, "skill_workflow_ids_inventory")
        }));
    for (id, is_skill, field) in entries {
        if agent_tool_definition(&id).is_some() || engine.get(&id).is_ok() {
            continue;
        }
        problems.push(unknown_inventory_id(profile, engine, &id, is_skill, field));
    }
    if let Some(file) = profile
        .llm
        .base_url
        .as_deref()
        .and_then(|u| u.trim().strip_prefix("scripted:"))
    {
        if !home.join(file).is_file() {
            let mut p = Problem::new(
                &profile.origin,
                format!(
                    "agent '{}': llm.base_url names the scripted model file '{file}', which does not exist",
                    profile.id
                ),
            )
            .hint("scripted:FILE is taken from the home: give the path of a JSON list of replies");
            if let Some(line) = profile.line_of(&format!("scripted:{file}")) {
                p = p.at(line, None);
            }
            problems.push(p);
        }
    }
    if let Some(file) = profile
        .llm
        .base_url
        .as_deref()
        .and_then(|u| u.trim().strip_prefix(crate::agent::llm::LOCAL))
    {
        let why = if !cfg!(feature = "llm-local") {
            Some((
                "this build of tavern runs no model in-process",
                "build tavern with `--features llm-local`, or serve the model with llama-server and use openai:http://…",
            ))
        } else if !home.join(file.trim()).is_file() {
            Some((
                "which does not exist",
                "local:PATH.gguf is taken from the home: give the path of a GGUF model file",
            ))
        } else {
            None
        };
        if let Some((why, hint)) = why {
            let mut p = Problem::new(
                &profile.origin,
                format!(
                    "agent '{}': llm.base_url names the local model '{file}', {why}",
                    profile.id
                ),
            )
            .hint(hint);
            if let Some(line) = profile.line_of(&format!("local:{file}")) {
                p = p.at(line, None);
            }
            problems.push(p);
        }
    }
    problems
}

/// The problem for inventory entry `id` (of `field`) that names no tool.
fn unknown_inventory_id(
    profile: &AgentProfile,
    engine: &ToolManager,
    id: &str,
    is_skill: bool,
    field: &str,
) -> Problem {
    let ids: Vec<String> = engine.list().iter().map(|t| t.id().to_string()).collect();
    let cands = ids.iter().map(String::as_str).chain(AGENT_TOOLS);
    let shown = if is_skill {
        id.trim_start_matches("workflow:")
    } else {
        id
    };
    let mut p = Problem::new(
        &profile.origin,
        format!(
            "agent '{}': {field} names unknown tool '{shown}'",
            profile.id
        ),
    );
    if let Some(line) = profile.line_of(shown) {
        p = p.at(line, None);
    }
    match closest(id, cands) {
        Some(c) => p.hint(format!("did you mean '{c}'?")),
        None => p.hint(
            "list the tools with `tavern tools`; workflows need an interface to be `workflow:<id>` tools",
        ),
    }
}

/// A `call_format` that names no call format, as a problem at its value's line and column
/// with the closest name (serde's own error would name neither).
fn call_format_problem(text: &str, origin: &Path) -> Option<Problem> {
    let v: Value = serde_json::from_str(text).ok()?;
    let name = v.get("call_format")?;
    let why = match name {
        Value::String(s) => s.parse::<CallFormat>().err()?,
        Value::Null => return None,
        other => format!("call_format must be a format name, not {other}"),
    };
    // The value's place: the first value after the key.
    let key = text.find("\"call_format\"")?;
    let after = key + "\"call_format\"".len();
    let colon = after + text[after..].find(':')?;
    let value = colon + 1 + text[colon + 1..].len() - text[colon + 1..].trim_start().len();
    let line = text[..value].matches('\n').count() as u32 + 1;
    let line_start = text[..value].rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..value].chars().count() as u32 + 1;
    Some(
        Problem::new(origin, format!("agent profile: {why}"))
            .at(line, Some(column))
            .hint("call_format is the format the model writes calls in; leave it out to teach <ACTION> (or the manual_style's own format)"),
    )
}

/// The ids of `<home>/agents/*.json`, sorted.
pub fn list_ids(home: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(home.join("agents"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// The agent's callable tools: a manager holding exactly the inventory, and which of them
/// are skills (workflows).
pub struct Inventory {
    /// The inventory as a tool manager (engine tools forward to the engine's manager).
    pub manager: Arc<ToolManager>,
    /// Canonical ids of the skills (workflow tools).
    pub skills: HashSet<String>,
}

fn closest<'a>(want: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let w = want.to_ascii_lowercase();
    candidates
        .map(|c| (strsim::jaro_winkler(&w, &c.to_ascii_lowercase()), c))
        .filter(|(s, _)| *s >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Resolves every inventory id against the engine's tools and the agent tools. Every
/// unknown id is a problem (with its line in the profile and a did-you-mean); nothing is
/// built unless all resolve.
pub fn build_inventory(
    profile: &AgentProfile,
    engine: &Arc<ToolManager>,
    env: &AgentTools,
) -> Result<Inventory, AgentError> {
    let manager = ToolManager::with_max_depth(engine.max_depth());
    let mut skills = HashSet::new();
    let mut problems = Vec::new();
    let mut seen = HashSet::new();
    let entries = profile
        .tool_ids_inventory
        .iter()
        .map(|i| (i.trim().to_string(), false, "tool_ids_inventory"))
        .chain(profile.skill_workflow_ids_inventory.iter().map(|i| {
            let i = i.trim();
            let id = if i.starts_with("workflow:") {
                i.to_string()
            } else {
                format!("workflow:{i}")
            };
            (id, true, "skill_workflow_ids_inventory")
        }));
    for (id, is_skill, field) in entries {
        let registered = if let (Some(def), Some(h)) =
            (agent_tool_definition(&id), agent_tool_handler(&id, env))
        {
            if !seen.insert(def.id.clone()) {
                continue;
            }
            manager.register(def, h)
        } else {
            match engine.get(&id) {
                Ok(tool) => {
                    let def = tool.definition.clone();
                    if !seen.insert(def.id.clone()) {
                        continue;
                    }
                    if is_skill || def.implementation.kind() == "workflow" {
                        skills.insert(def.id.clone());
                    }
                    let h = Arc::new(Forward {
                        engine: engine.clone(),
                        id: def.id.clone(),
                    });
                    manager.register(def, h)
                }
                Err(_) => {
                    problems.push(unknown_inventory_id(profile, engine, &id, is_skill, field));
                    continue;
                }
            }
        };
        if let Err(e) = registered {
            problems.push(Problem::new(&profile.origin, e.to_string()));
        }
    }
    if problems.is_empty() {
        Ok(Inventory { manager, skills })
    } else {
        Err(AgentError::Load(problems))
    }
}
