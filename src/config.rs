//! Settings: `tavern.toml` in the engine's home, overridden by `--set KEY=VALUE`.
//!
//! Keys are dotted paths (`extensions.FileOperator.root`); a TOML table nests them.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::problem::Problem;

/// Environment variable with settings, `KEY=VALUE;KEY=VALUE` (like repeated `--set`).
pub const ENV_SET: &str = "TAVERN_SET";

/// Flat map of dotted keys to values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    values: BTreeMap<String, Value>,
    /// Where each value came from, so a problem with it points there.
    origins: BTreeMap<String, Origin>,
}

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of a `tavern.toml`.
    File {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line of the key, when found.
        line: Option<u32>,
    },
    /// `--set KEY=VALUE` on the command line.
    Set,
    /// An environment variable (its name).
    Env(String),
}

impl Origin {
    /// A problem about the setting `key`, placed where it came from.
    pub fn problem(&self, key: &str, message: impl Into<String>) -> Problem {
        match self {
            Origin::File { path, line } => {
                let p = Problem::new(path, message);
                match line {
                    Some(l) => p.at(*l, None),
                    None => p,
                }
            }
            Origin::Set => Problem::new(format!("--set {key}"), message),
            Origin::Env(var) => Problem::new(format!("environment {var} ({key})"), message),
        }
    }
}

/// Why a `KEY=VALUE` setting (`--set`, [`EngineBuilder::set`](crate::EngineBuilder::set),
/// the `TAVERN_SET` environment variable) could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingError {
    /// No `=`, or nothing before it.
    #[error("--set expects KEY=VALUE, got '{assignment}'")]
    Malformed {
        /// The assignment as written.
        assignment: String,
    },
    /// An assignment taken from an environment variable was malformed.
    #[error("{var}: {source}")]
    Env {
        /// The variable (`TAVERN_SET`).
        var: String,
        /// What was wrong with the assignment.
        source: Box<SettingError>,
    },
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
        let mut s = Self::from_toml(&text).map_err(|(msg, line)| {
            let p = Problem::new(&path, msg);
            match line {
                Some(l) => p.at(l, None),
                None => p,
            }
        })?;
        let lines = key_lines(&text);
        for k in s.values.keys() {
            s.origins.insert(
                k.clone(),
                Origin::File {
                    path: path.clone(),
                    line: lines.get(k).copied(),
                },
            );
        }
        Ok(s)
    }

    /// Where `key`'s value came from (`None` for values set through the API).
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.origins.get(key)
    }

    /// Applies the assignments of environment variable [`ENV_SET`] (`KEY=VALUE`, several
    /// separated by `;`), each remembered as coming from the environment. Between
    /// `tavern.toml` and `--set` in precedence.
    pub fn apply_env(&mut self) -> Result<(), SettingError> {
        let Some(v) = std::env::var_os(ENV_SET) else {
            return Ok(());
        };
        let v = v.to_string_lossy().into_owned();
        for a in v.split(';').map(str::trim).filter(|a| !a.is_empty()) {
            self.set_from_env(ENV_SET, a)
                .map_err(|e| SettingError::Env {
                    var: ENV_SET.to_string(),
                    source: Box::new(e),
                })?;
        }
        Ok(())
    }

    /// Like [`Settings::set_override`], recording that the value came from environment
    /// variable `var`.
    pub fn set_from_env(&mut self, var: &str, assignment: &str) -> Result<(), SettingError> {
        self.set_override(assignment)?;
        if let Some((k, _)) = assignment.split_once('=') {
            self.origins
                .insert(k.trim().to_string(), Origin::Env(var.to_string()));
        }
        Ok(())
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
    pub fn set_override(&mut self, assignment: &str) -> Result<(), SettingError> {
        let malformed = || SettingError::Malformed {
            assignment: assignment.to_string(),
        };
        let (k, v) = assignment.split_once('=').ok_or_else(malformed)?;
        let k = k.trim();
        if k.is_empty() {
            return Err(malformed());
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
        self.origins.insert(k.to_string(), Origin::Set);
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

/// The type a built-in setting takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text.
    String,
    /// A whole number, 0 or more.
    Integer,
    /// A whole number, 1 or more.
    Positive,
    /// Any number.
    Number,
    /// `true` or `false`.
    Bool,
    /// A list of strings.
    Strings,
}

impl Kind {
    /// What a value of this kind looks like, for messages.
    pub fn wants(self) -> &'static str {
        match self {
            Kind::String => "a string (in quotes)",
            Kind::Integer => "a whole number (0 or more)",
            Kind::Positive => "a whole number (1 or more)",
            Kind::Number => "a number",
            Kind::Bool => "true or false",
            Kind::Strings => "a list of strings ([\"a\", \"b\"])",
        }
    }

    /// Whether `v` is of this kind.
    pub fn accepts(self, v: &Value) -> bool {
        match self {
            Kind::String => v.is_string(),
            Kind::Integer => v.is_u64(),
            Kind::Positive => v.as_u64().is_some_and(|n| n > 0),
            Kind::Number => v.is_number(),
            Kind::Bool => v.is_boolean(),
            Kind::Strings => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        }
    }
}

/// Every built-in setting with its type: the keys of `tavern.toml` outside the sections
/// that belong to plugins and scripts ([`OPEN_SECTIONS`]). `plugin check` and the engine's
/// build check every setting against it ([`Settings::check_known`]); a unit test checks the
/// `[llm]` keys against the LLM settings' own list.
pub const KNOWN: &[(&str, Kind)] = &[
    ("llm.base_url", Kind::String),
    ("llm.model", Kind::String),
    ("llm.temperature", Kind::Number),
    ("llm.max_tokens", Kind::Integer),
    ("llm.stream", Kind::Bool),
    ("llm.api_key_env", Kind::String),
    ("llm.timeout_ms", Kind::Integer),
    ("llm.connect_timeout_ms", Kind::Integer),
    ("llm.retries", Kind::Integer),
    ("llm.retry_backoff_ms", Kind::Integer),
    ("llm.constrain", Kind::String),
    ("llm.constrain_shape", Kind::String),
    ("llm.answer_follows_calls", Kind::Bool),
    ("llm.constrain_answer", Kind::String),
    ("llm.seed", Kind::Integer),
    ("llm.threads", Kind::Positive),
    ("llm.context_size", Kind::Positive),
    // Not a model setting: the call format of every agent without its own
    // (`agent::runtime::llm_call_format` reads it).
    ("llm.call_format", Kind::String),
    ("process.memory_mb", Kind::Positive),
    ("process.cpu_seconds", Kind::Positive),
    ("process.processes", Kind::Positive),
    ("process.open_files", Kind::Positive),
    ("process.output_bytes", Kind::Positive),
    ("process.allow_unconfined", Kind::Bool),
    ("process.network_plugins", Kind::Strings),
    ("audit.file", Kind::String),
    ("tools.list_nodes", Kind::Bool),
];

/// Tables of built-in sections whose keys are free: `[llm.extra_body]` (fields added to
/// every model request as they are).
pub const OPEN_TABLES: &[&str] = &["llm.extra_body"];

/// Sections whose keys are declared elsewhere: `extensions.<plugin>.*` by each plugin's
/// `configOptions` (checked by the plugin loader), `scripts.*` by the power-user scripts.
pub const OPEN_SECTIONS: &[&str] = &["extensions", "scripts"];

impl Settings {
    /// Takes the relative paths among the built-in settings from `home`: `audit.file`, and
    /// the FILE of `llm.base_url = "scripted:FILE"` or `"local:PATH.gguf"`.
    pub fn resolve_paths(&mut self, home: &Path) {
        if let Some(Value::String(f)) = self.values.get_mut("audit.file") {
            *f = home.join(&*f).to_string_lossy().into_owned();
        }
        if let Some(Value::String(u)) = self.values.get_mut("llm.base_url") {
            for prefix in ["scripted:", "local:"] {
                if let Some(f) = u.strip_prefix(prefix) {
                    *u = format!("{prefix}{}", home.join(f.trim()).display());
                    break;
                }
            }
        }
    }

    /// Every built-in setting ([`KNOWN`]) of the wrong type, and every key of a built-in
    /// section that tavern does not know (with a did-you-mean), each placed where the
    /// value came from (`tavern.toml:LINE`, `--set`, the environment).
    pub fn check_known(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let sections: Vec<&str> = KNOWN
            .iter()
            .filter_map(|(k, _)| k.split('.').next())
            .chain(OPEN_SECTIONS.iter().copied())
            .collect();
        for (key, value) in &self.values {
            let section = key.split('.').next().unwrap_or(key);
            if OPEN_SECTIONS.contains(&section)
                || OPEN_TABLES
                    .iter()
                    .any(|t| key.strip_prefix(t).is_some_and(|r| r.starts_with('.')))
            {
                continue;
            }
            let place = |message: String| match self.origins.get(key) {
                Some(o) => o.problem(key, message),
                None => Problem::new("tavern.toml", message),
            };
            match KNOWN.iter().find(|(k, _)| k == key) {
                Some((_, kind)) if !kind.accepts(value) => problems.push(
                    place(format!(
                        "setting {key}: expected {}, got {value}",
                        kind.wants()
                    ))
                    .hint(format!("write {key} as {}", kind.wants())),
                ),
                Some(_) => {}
                None => {
                    let known: Vec<&str> = if sections.contains(&section) {
                        KNOWN.iter().map(|(k, _)| *k).collect()
                    } else {
                        sections.clone()
                    };
                    let wanted = if sections.contains(&section) {
                        key.as_str()
                    } else {
                        section
                    };
                    let mut p = place(format!("unknown setting {key}; the setting is ignored"));
                    match crate::suggest::closest(wanted, &known) {
                        Some(d) if sections.contains(&section) => {
                            p = p.hint(format!("did you mean {d}?"))
                        }
                        Some(d) => p = p.hint(format!("did you mean [{d}]?")),
                        None => {
                            let here: Vec<&str> = KNOWN
                                .iter()
                                .map(|(k, _)| *k)
                                .filter(|k| k.starts_with(&format!("{section}.")))
                                .collect();
                            p = p.hint(if here.is_empty() {
                                format!("the sections are {}", sections_text(&sections))
                            } else {
                                format!("[{section}] knows {}", here.join(", "))
                            });
                        }
                    }
                    problems.push(p);
                }
            }
        }
        problems
    }
}

fn sections_text(sections: &[&str]) -> String {
    let mut v: Vec<&str> = sections.to_vec();
    v.sort();
    v.dedup();
    v.iter()
        .map(|s| format!("[{s}]"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The 1-based line of every `key = value` of TOML `text`, by full dotted key (table headers
/// applied). A plain line scan: enough to point at a setting.
fn key_lines(text: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let mut table = String::new();
    let unquote = |s: &str| -> String {
        s.split('.')
            .map(|p| p.trim().trim_matches('"').trim_matches('\''))
            .collect::<Vec<_>>()
            .join(".")
    };
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(h) = t.strip_prefix('[') {
            table = unquote(h.trim_start_matches('[').split(']').next().unwrap_or(""));
            continue;
        }
        let Some((k, _)) = t.split_once('=') else {
            continue;
        };
        if t.starts_with('#') || k.trim().is_empty() {
            continue;
        }
        let k = unquote(k);
        let full = if table.is_empty() {
            k
        } else {
            format!("{table}.{k}")
        };
        out.entry(full).or_insert(i as u32 + 1);
    }
    out
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
    fn built_in_settings_are_checked_by_type_and_name() {
        let text = "[llm]\nmodel = 5\nmodle = \"x\"\nstream = true\n[proces]\nmemory_mb = 1\n[process]\nprocesses = 0\n[extensions.X]\nanything = 1\n";
        let mut s = Settings::from_toml(text).unwrap();
        let lines = key_lines(text);
        for (k, l) in &lines {
            s.origins.insert(
                k.clone(),
                Origin::File {
                    path: "tavern.toml".into(),
                    line: Some(*l),
                },
            );
        }
        let got: Vec<String> = s.check_known().iter().map(|p| p.to_string()).collect();
        let want = [
            "tavern.toml:2: setting llm.model: expected a string (in quotes), got 5",
            "tavern.toml:3: unknown setting llm.modle; the setting is ignored (did you mean llm.model?)",
            "tavern.toml:8: setting process.processes: expected a whole number (1 or more), got 0",
            "tavern.toml:6: unknown setting proces.memory_mb; the setting is ignored (did you mean [process]?)",
        ];
        for w in want {
            assert!(got.iter().any(|g| g.starts_with(w)), "{w}\n{got:#?}");
        }
        assert_eq!(got.len(), 4, "{got:#?}");
    }

    #[test]
    fn llm_call_format_is_a_known_setting() {
        // Issue 38: it is applied to every agent, so it must not be warned about.
        let s = Settings::from_toml("[llm]\ncall_format = \"json\"\n").unwrap();
        assert!(s.check_known().is_empty(), "{:?}", s.check_known());
        let s = Settings::from_toml(
            "[llm]\nconstrain = \"call\"\n[llm.extra_body]\ncache_prompt = true\ntop_k = 1\n",
        )
        .unwrap();
        assert!(s.check_known().is_empty(), "{:?}", s.check_known());
        let got = crate::agent::llm::LlmSettings::from_settings(&s).unwrap();
        assert_eq!(
            got.extra_body.unwrap()["top_k"],
            serde_json::json!(1),
            "[llm.extra_body] is read as a table"
        );
        let s = Settings::from_toml("[llm]\ncall_format = 3\n").unwrap();
        let got: Vec<String> = s.check_known().iter().map(|p| p.to_string()).collect();
        assert!(
            got[0].contains("setting llm.call_format: expected a string"),
            "{got:?}"
        );
    }

    #[test]
    fn the_llm_keys_are_the_llm_settings_fields() {
        let mut known: Vec<&str> = KNOWN
            .iter()
            .filter_map(|(k, _)| k.strip_prefix("llm."))
            .filter(|k| *k != "call_format")
            .chain(OPEN_TABLES.iter().filter_map(|t| t.strip_prefix("llm.")))
            .collect();
        known.sort();
        let mut fields = crate::strict::fields_of::<crate::agent::llm::LlmSettings>().to_vec();
        fields.sort();
        assert_eq!(known, fields);
    }

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
    fn origins_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tavern.toml"),
            "top = 1\n\n[extensions.P]\n# c\nroot = \"x\"\n",
        )
        .unwrap();
        let mut s = Settings::load(dir.path()).unwrap();
        let file = dir.path().join("tavern.toml");
        assert_eq!(
            s.origin("extensions.P.root"),
            Some(&Origin::File {
                path: file.clone(),
                line: Some(5)
            })
        );
        assert_eq!(
            s.origin("top"),
            Some(&Origin::File {
                path: file,
                line: Some(1)
            })
        );
        s.set_override("extensions.P.root=y").unwrap();
        assert_eq!(s.origin("extensions.P.root"), Some(&Origin::Set));
        s.set_from_env("TAVERN_X", "a.b=1").unwrap();
        assert_eq!(s.origin("a.b"), Some(&Origin::Env("TAVERN_X".into())));
    }

    #[test]
    fn bad_toml_reports_line() {
        let err = Settings::from_toml("a = 1\nb = = 2\n").unwrap_err();
        assert_eq!(err.1, Some(2));
    }
}
