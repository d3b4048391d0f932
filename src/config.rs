//! Settings: `tavern.toml` in the engine's home, overridden by `--set KEY=VALUE`.
//!
//! Keys are dotted paths (`extensions.FileOperator.root`); a TOML table nests them.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::problem::Problem;

/// Flat map of dotted keys to values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    values: BTreeMap<String, Value>,
}

impl Settings {
    /// Reads `<home>/tavern.toml` if present. A missing file is an empty configuration.
    pub fn load(home: &Path) -> Result<Settings, Problem> {
        let path = home.join("tavern.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
            Err(e) => return Err(Problem::new(&path, format!("cannot read: {e}"))),
        };
        Self::from_toml(&text).map_err(|(msg, line)| {
            let p = Problem::new(&path, msg);
            match line {
                Some(l) => p.at(l, None),
                None => p,
            }
        })
    }

    /// Parses TOML text; errors carry the 1-based line when known.
    pub fn from_toml(text: &str) -> Result<Settings, (String, Option<u32>)> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() as u32 + 1);
            (e.message().to_string(), line)
        })?;
        let mut s = Settings::default();
        flatten("", &toml::Value::Table(table), &mut s.values);
        Ok(s)
    }

    /// Applies one `KEY=VALUE` override. The value is read as TOML when it parses as a
    /// scalar or array (`42`, `true`, `[1,2]`), otherwise taken as a string.
    pub fn set_override(&mut self, assignment: &str) -> Result<(), String> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| format!("--set expects KEY=VALUE, got '{assignment}'"))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("--set expects KEY=VALUE, got '{assignment}'"));
        }
        let parsed = format!("v = {v}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"));
        let value = match parsed {
            Some(tv) => toml_to_json(&tv),
            None => Value::String(v.to_string()),
        };
        self.values.insert(k.to_string(), value);
        Ok(())
    }

    /// Sets a value directly.
    pub fn set(&mut self, key: impl Into<String>, value: Value) {
        self.values.insert(key.into(), value);
    }

    /// Looks a dotted key up.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// Every value whose key starts with `prefix.`, with the prefix removed.
    pub fn section(&self, prefix: &str) -> BTreeMap<String, Value> {
        let p = format!("{prefix}.");
        self.values
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(&p).map(|r| (r.to_string(), v.clone())))
            .collect()
    }
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, Value>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), toml_to_json(other));
        }
    }
}

fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_tables_flatten_to_dotted_keys() {
        let s = Settings::from_toml("[extensions.FileOperator]\nroot = \"ws\"\n").unwrap();
        assert_eq!(
            s.get("extensions.FileOperator.root"),
            Some(&Value::String("ws".into()))
        );
    }

    #[test]
    fn overrides_read_scalars_and_fall_back_to_strings() {
        let mut s = Settings::default();
        s.set_override("a.b=42").unwrap();
        s.set_override("a.c=hello world").unwrap();
        assert_eq!(s.get("a.b"), Some(&Value::from(42)));
        assert_eq!(s.get("a.c"), Some(&Value::String("hello world".into())));
        assert!(s.set_override("novalue").is_err());
    }

    #[test]
    fn bad_toml_reports_line() {
        let err = Settings::from_toml("a = 1\nb = = 2\n").unwrap_err();
        assert_eq!(err.1, Some(2));
    }
}
