//! `*.tool.json` files: reading them with line/column errors, normalising ids into the
//! plugin's namespace, and checking parameter schemas before registration.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::locate;
use crate::problem::Problem;
use crate::tools::ToolDefinition;

/// Suffix of tool definition files.
pub const TOOL_SUFFIX: &str = ".tool.json";

/// Why a tool id does not fit its plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The tool part is not a valid name.
    #[error("tool id '{id}' is not valid: a tool name starts with a letter or '_' and holds only letters, digits, '_' or '-' (at most 64)")]
    BadName {
        /// The id as written.
        id: String,
    },
    /// The id names another plugin's namespace.
    #[error("tool id '{id}' is outside plugin '{plugin}''s namespace: write '{plugin}:{name}' or just '{name}'")]
    OutsideNamespace {
        /// The id as written.
        id: String,
        /// The plugin declaring it.
        plugin: String,
        /// The tool part.
        name: String,
    },
}

/// True for a valid tool name (the part after `plugin:`).
pub fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Normalises an id written in a plugin's tool file to `plugin:tool`. Accepted spellings:
/// `plugin:tool`, `plugin.tool` (the seeds' form) and bare `tool`. A dot or colon always
/// separates namespace from name, so tool names never contain them.
pub fn normalise_id(plugin: &str, raw: &str) -> Result<String, IdError> {
    let raw = raw.trim();
    let (ns, name) = match raw.split_once(':').or_else(|| raw.split_once('.')) {
        Some((ns, name)) => (Some(ns), name),
        None => (None, raw),
    };
    if !valid_tool_name(name) {
        return Err(IdError::BadName { id: raw.into() });
    }
    match ns {
        Some(ns) if ns != plugin => Err(IdError::OutsideNamespace {
            id: raw.into(),
            plugin: plugin.into(),
            name: name.into(),
        }),
        _ => Ok(format!("{plugin}:{name}")),
    }
}

/// Checks a tool's parameter schema: a JSON object schema that the validator can compile.
pub(crate) fn check_schema(schema: &Value) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Err(format!(
            "`parameters` must be a JSON Schema object, got {schema}"
        ));
    };
    if let Some(t) = map.get("type") {
        if t != "object" {
            return Err(format!(
                "`parameters` must describe an object (\"type\": \"object\"), got \"type\": {t}"
            ));
        }
    }
    if let Err(e) = jsonschema::meta::validate(schema) {
        let at = e.instance_path().to_string();
        let at = if at.is_empty() {
            String::new()
        } else {
            format!(" at {at}")
        };
        return Err(format!("`parameters` is not a valid JSON Schema{at}: {e}"));
    }
    if let Err(e) = jsonschema::validator_for(schema) {
        return Err(format!("`parameters` cannot be compiled: {e}"));
    }
    Ok(())
}

/// A tool file as read from disk.
#[derive(Debug, Clone)]
pub struct ToolFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its text (to place later problems).
    pub text: String,
    /// The definition, id not yet normalised.
    pub definition: ToolDefinition,
}

/// A problem at `key` in a JSON file (line of the key when found).
pub fn problem_at_key(path: &Path, text: &str, key: &str, message: impl Into<String>) -> Problem {
    let p = Problem::new(path, message);
    match locate::json_key(text, key) {
        Some((l, c)) => p.at(l, Some(c)),
        None => p,
    }
}

/// Reads and parses one tool file. JSON and shape errors carry line and column.
pub fn read(path: &Path) -> Result<ToolFile, Problem> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Problem::new(path, format!("cannot read: {e}")))?;
    let definition = parse(&text, path)?;
    Ok(ToolFile {
        path: path.to_path_buf(),
        text,
        definition,
    })
}

/// Parses tool.json text. Unknown keys (strict, see `src/strict.rs`) and misspelt schema
/// types are reported at their own line before the typed parse.
pub fn parse(text: &str, path: &Path) -> Result<ToolDefinition, Problem> {
    if let Some(doc) = crate::strict::locate_json(text) {
        let mut ps: Vec<Problem> = crate::strict::unknown_keys(&doc, &crate::tools::tool_shape())
            .iter()
            .map(|u| u.problem(path, "tool definition"))
            .collect();
        ps.extend(crate::strict::schema_type_problems(
            &doc,
            &[crate::strict::PathStep::Key("parameters")],
            path,
        ));
        if let Some(p) = crate::strict::merge(ps) {
            return Err(p);
        }
    }
    serde_json::from_str::<ToolDefinition>(text).map_err(|e| {
        let mut msg = e.to_string();
        if let Some(i) = msg.find(" at line ") {
            msg.truncate(i);
        }
        let p = Problem::new(path, format!("invalid tool definition: {msg}"));
        let p = if e.line() > 0 { p.at(e.line() as u32, Some(e.column() as u32)) } else { p };
        if msg.contains("implementation") || msg.contains("unknown variant") {
            p.hint("implementation is {\"type\": \"service\", \"script\": \"main.lua\", \"function\": \"f\"} or {\"type\": \"script\", \"command\": \"python3 x.py\"}")
        } else {
            p
        }
    })
}

/// The `*.tool.json` files in `dir`, sorted by name (so loading is deterministic).
pub fn list(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    super::files_ending_with(dir, TOOL_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_normalise_into_the_namespace() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("FileOperator:WriteFile", Ok("FileOperator:WriteFile")),
            ("FileOperator.WriteFile", Ok("FileOperator:WriteFile")),
            ("WriteFile", Ok("FileOperator:WriteFile")),
            ("Other:WriteFile", Err("outside plugin 'FileOperator'")),
            ("Other.WriteFile", Err("outside plugin 'FileOperator'")),
            ("Write File", Err("is not valid")),
            ("FileOperator:", Err("is not valid")),
            ("a.b.c", Err("is not valid")),
        ];
        for (raw, want) in cases {
            match (normalise_id("FileOperator", raw), want) {
                (Ok(g), Ok(w)) => assert_eq!(&g, w),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{raw}: {e}"),
                (g, w) => panic!("{raw}: {g:?} vs {w:?}"),
            }
        }
    }

    #[test]
    fn schemas_are_checked() {
        assert!(
            check_schema(&json!({"type": "object", "properties": {"a": {"type": "string"}}}))
                .is_ok()
        );
        assert!(check_schema(&json!({"type": "string"}))
            .unwrap_err()
            .contains("object"));
        assert!(
            check_schema(&json!({"type": "object", "properties": {"a": {"type": "strin"}}}))
                .is_err()
        );
        assert!(check_schema(&json!({"type": "object", "required": "a"})).is_err());
        assert!(check_schema(&json!(3)).is_err());
    }

    #[test]
    fn json_errors_have_places() {
        let p = parse(
            "{\n  \"id\": \"x\",\n  \"implementation\": {\"type\": \"servce\"}\n}",
            Path::new("t.tool.json"),
        )
        .unwrap_err();
        assert_eq!(p.line, Some(3), "{p}");
        let p = parse("{\n  \"id\": \"x\",\n", Path::new("t.tool.json")).unwrap_err();
        assert!(p.line.is_some(), "{p}");
    }
}
