//! `tavern plugin new`: a working plugin to start from — manifest, one tool, its Lua or Rhai
//! handler, and a test file that `tavern plugin test` runs.

use std::path::{Path, PathBuf};

use super::manifest::valid_name;

/// Script language of a new plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Lua 5.4.
    Lua,
    /// Rhai.
    Rhai,
}

impl Lang {
    /// File extension.
    pub fn ext(self) -> &'static str {
        match self {
            Lang::Lua => "lua",
            Lang::Rhai => "rhai",
        }
    }
}

impl std::str::FromStr for Lang {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "lua" => Ok(Lang::Lua),
            "rhai" => Ok(Lang::Rhai),
            other => Err(format!("unknown language '{other}': use lua or rhai")),
        }
    }
}

/// Why a plugin could not be scaffolded.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name is not a valid plugin name.
    #[error(
        "'{0}' is not a valid plugin name: start with a letter; use letters, digits, '_' or '-'"
    )]
    BadName(String),
    /// The directory exists.
    #[error("{0} already exists; choose another name or remove it")]
    Exists(PathBuf),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The files of a new plugin, relative to its directory.
pub fn files(name: &str, lang: Lang) -> Vec<(String, String)> {
    let ext = lang.ext();
    let manifest = format!(
        r#"# {name}: a tavern plugin. See docs/plugins.md for every field (unknown keys are errors).
name: {name}
displayName: {name}
version: 0.1.0
description: Greets people. A starting point to rename and extend.

tools:
  entry: ./tools

configOptions:
  - id: greeting
    type: string
    default: Hello
    description: The word used to greet (setting extensions.{name}.greeting).

# Ask only for what the plugin uses. None of these is needed to greet.
permissions:
  hooks: []
  services: {{ override: [] }}
  tools: []
  fs: {{ read: [], write: [] }}
  processes: false

# Limits may only lower the engine's defaults.
limits: {{}}
"#
    );
    let tool = format!(
        r#"{{
  "id": "{name}:greet",
  "displayName": "Greet",
  "description": "Greets someone by name.",
  "parameters": {{
    "type": "object",
    "properties": {{
      "name": {{ "type": "string", "description": "Who to greet." }}
    }},
    "required": ["name"]
  }},
  "implementation": {{ "type": "service", "script": "main.{ext}", "function": "greet" }},
  "annotations": {{ "readOnlyHint": true }}
}}
"#
    );
    let script = match lang {
        Lang::Lua => {
            r#"-- Tool handlers get the validated arguments and a context (tool id, caller, the
-- plugin's config, a logger). Return a value, or call error("...") to fail the call.
function greet(args, ctx)
  local word = ctx.config.greeting or "Hello"
  return word .. ", " .. args.name .. "!"
end
"#
            .to_string()
        }
        Lang::Rhai => {
            r#"// Tool handlers get the validated arguments and a context map (tool_id, caller, the
// plugin's config; log with api::log::info). Return a value, or `throw "..."` to fail the
// call. The whole Rhai API: docs/rhai.md.
fn greet(args, ctx) {
    let word = ctx.config.greeting ?? "Hello";
    `${word}, ${args.name}!`
}
"#
            .to_string()
        }
    };
    let tests = format!(
        r#"{{
  "cases": [
    {{ "name": "greets by name", "call": "{name}:greet", "args": {{ "name": "Ada" }}, "expect": "Hello, Ada!" }},
    {{ "name": "the dotted id works too", "call": "{name}.greet", "args": {{ "name": "Bo" }}, "expect": "Hello, Bo!" }},
    {{ "name": "a name is required", "call": "{name}:greet", "args": {{}}, "expectError": "invalid_parameters" }}
  ]
}}
"#
    );
    vec![
        ("plugin.yaml".into(), manifest),
        ("tools/greet.tool.json".into(), tool),
        (format!("main.{ext}"), script),
        ("tests/greet.test.json".into(), tests),
    ]
}

/// Writes a new plugin `name` into `parent/name`. Refuses to touch an existing directory.
pub fn create(parent: &Path, name: &str, lang: Lang) -> Result<PathBuf, ScaffoldError> {
    if !valid_name(name) {
        return Err(ScaffoldError::BadName(name.into()));
    }
    let dir = parent.join(name);
    if dir.exists() {
        return Err(ScaffoldError::Exists(dir));
    }
    for (rel, text) in files(name, lang) {
        let path = dir.join(&rel);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).map_err(|source| ScaffoldError::Io {
                path: p.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| ScaffoldError::Io {
            path: path.clone(),
            source,
        })?;
    }
    Ok(dir)
}
