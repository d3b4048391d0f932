//! Plugin settings: `configOptions` declare them, `tavern.toml` and `--set` give values under
//! `extensions.<plugin>.<option>`, and every value is checked against the declared type before
//! the plugin sees it.

use std::path::Path;

use serde_json::{Map, Value};

use super::locate;
use super::manifest::{ConfigOption, OptionType};
use crate::config::Settings;
use crate::problem::Problem;

/// The settings key of a plugin option.
pub fn full_key(plugin: &str, option: &str) -> String {
    format!("extensions.{plugin}.{option}")
}

/// The short option name of a declared option (`id`, or `key` without its
/// `extensions.<plugin>.` prefix).
pub(crate) fn option_id(plugin: &str, opt: &ConfigOption) -> Result<String, String> {
    if let Some(id) = &opt.id {
        return Ok(id.clone());
    }
    let Some(key) = &opt.key else {
        return Err("a config option needs `id` (or the full `key`)".into());
    };
    let prefix = format!("extensions.{plugin}.");
    match key.strip_prefix(&prefix) {
        Some(rest) if !rest.is_empty() => Ok(rest.to_string()),
        _ if !key.contains('.') => Ok(key.clone()),
        _ => Err(format!("config key '{key}' must start with '{prefix}'")),
    }
}

/// Checks `value` against `kind`. Numbers and booleans given for a string option (as `--set`
/// produces them) are taken as their text.
pub fn coerce(kind: OptionType, value: &Value) -> Option<Value> {
    match (kind, value) {
        (OptionType::String, Value::String(_)) => Some(value.clone()),
        (OptionType::String, Value::Number(n)) => Some(Value::String(n.to_string())),
        (OptionType::String, Value::Bool(b)) => Some(Value::String(b.to_string())),
        (OptionType::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => Some(value.clone()),
        (OptionType::Integer, Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| Value::from(f as i64)),
        (OptionType::Number, Value::Number(_)) => Some(value.clone()),
        (OptionType::Boolean, Value::Bool(_)) => Some(value.clone()),
        _ => None,
    }
}

fn describe(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// What a value of `kind` looks like, for the hint of a bad setting.
fn wants(kind: OptionType) -> &'static str {
    match kind {
        OptionType::String => "text",
        OptionType::Integer => "a whole number (e.g. 3)",
        OptionType::Number => "a number (e.g. 0.5)",
        OptionType::Boolean => "true or false",
    }
}

/// Resolves every declared option: setting, else default, else absent. Returns the option →
/// value object the plugin's scripts and processes see, or every problem found.
///
/// `manifest_file`/`manifest_text` place problems in a default; `settings_file` is where a bad
/// setting came from (`tavern.toml`, or a `--set`).
pub fn resolve(
    plugin: &str,
    options: &[ConfigOption],
    settings: &Settings,
    manifest_file: &Path,
    manifest_text: &str,
    settings_file: &Path,
) -> Result<Map<String, Value>, Vec<Problem>> {
    let mut out = Map::new();
    let mut problems = Vec::new();
    let mut declared = Vec::new();
    for opt in options {
        let id = match option_id(plugin, opt) {
            Ok(id) => id,
            Err(msg) => {
                let p = Problem::new(manifest_file, msg);
                let p = match locate::yaml_key(manifest_text, "configOptions") {
                    Some((l, c)) => p.at(l, Some(c)),
                    None => p,
                };
                problems.push(p);
                continue;
            }
        };
        declared.push(id.clone());
        let key = full_key(plugin, &id);
        // A default is checked against its type even when a setting overrides it: it is
        // what the plugin gets the day the setting goes.
        let default = match &opt.default {
            Some(d) => match coerce(opt.kind, d) {
                Some(v) => Some(v),
                None => {
                    let p = Problem::new(
                        manifest_file,
                        format!(
                            "config option '{id}': default {} is not a {}",
                            describe(d),
                            opt.kind.name()
                        ),
                    );
                    let p = match default_place(manifest_text, &id) {
                        Some((l, c)) => p.at(l, Some(c)),
                        None => p,
                    };
                    problems.push(p);
                    None
                }
            },
            None => None,
        };
        if let Some(v) = settings.get(&key) {
            match coerce(opt.kind, v) {
                Some(v) => {
                    out.insert(id, v);
                }
                None => problems.push(
                    {
                        let msg = format!(
                            "setting {key}: expected {}, got {}",
                            opt.kind.name(),
                            describe(v)
                        );
                        match settings.origin(&key) {
                            Some(o) => o.problem(&key, msg),
                            None => Problem::new(settings_file, msg),
                        }
                    }
                    .hint(format!(
                        "{key} wants {}; set one in tavern.toml or with --set {key}=…",
                        wants(opt.kind)
                    )),
                ),
            }
            continue;
        }
        if let Some(v) = default {
            out.insert(id, v);
        }
    }
    // Settings for undeclared options are reported by `undeclared` and ignored here: a
    // typo disables only itself, never the plugin.
    let _ = &declared;
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// Line and column of the `default` key of option `id` in a YAML manifest: the first
/// `default` after the option's `id`, else the first in the file.
fn default_place(text: &str, id: &str) -> Option<(u32, u32)> {
    let start = [
        format!("id: {id}"),
        format!("id: \"{id}\""),
        format!("id: '{id}'"),
    ]
    .iter()
    .filter_map(|pat| text.find(pat.as_str()))
    .min();
    if let Some(at) = start {
        if let Some(i) = text[at..].find("default") {
            return Some(locate::line_col(text, at + i));
        }
    }
    locate::yaml_key(text, "default")
}

/// [`undeclared`] for every loaded plugin.
pub fn undeclared_all(
    plugins: &[std::sync::Arc<super::Plugin>],
    settings: &Settings,
    settings_file: &Path,
) -> Vec<Problem> {
    plugins
        .iter()
        .flat_map(|p| {
            undeclared(
                p.name(),
                &p.manifest.config_options,
                settings,
                settings_file,
            )
        })
        .collect()
}

/// A problem for every setting under `extensions.<plugin>.` that names no option the plugin
/// declares, placed where the setting came from (`--set`, environment, `tavern.toml:line`)
/// with a did-you-mean. Such a setting is ignored; the plugin loads without it.
pub fn undeclared(
    plugin: &str,
    options: &[ConfigOption],
    settings: &Settings,
    settings_file: &Path,
) -> Vec<Problem> {
    let declared: Vec<String> = options
        .iter()
        .filter_map(|o| option_id(plugin, o).ok())
        .collect();
    let mut problems = Vec::new();
    for (k, _) in settings.section(&format!("extensions.{plugin}")) {
        if declared.iter().any(|d| d == &k) {
            continue;
        }
        let key = format!("extensions.{plugin}.{k}");
        let message = format!(
            "setting {key}: plugin {plugin} declares no option '{k}'; the setting is ignored"
        );
        let mut p = match settings.origin(&key) {
            Some(o) => o.problem(&key, message),
            None => Problem::new(settings_file, message),
        };
        if let Some(d) = crate::suggest::closest(&k, &declared) {
            p = p.hint(format!("did you mean extensions.{plugin}.{d}?"));
        } else if declared.is_empty() {
            p = p.hint(format!("plugin {plugin} declares no configOptions"));
        } else {
            p = p.hint(format!("its options: {}", declared.join(", ")));
        }
        problems.push(p);
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(id: &str, kind: OptionType, default: Option<Value>) -> ConfigOption {
        ConfigOption {
            id: Some(id.into()),
            key: None,
            kind,
            default,
            display_name: None,
            description: String::new(),
        }
    }

    #[test]
    fn coercion_table() {
        use serde_json::json;
        let cases = [
            (OptionType::String, json!("a"), Some(json!("a"))),
            (OptionType::String, json!(42), Some(json!("42"))),
            (OptionType::Integer, json!(42), Some(json!(42))),
            (OptionType::Integer, json!(4.0), Some(json!(4))),
            (OptionType::Integer, json!(4.5), None),
            (OptionType::Integer, json!("42"), None),
            (OptionType::Number, json!(4.5), Some(json!(4.5))),
            (OptionType::Boolean, json!(true), Some(json!(true))),
            (OptionType::Boolean, json!("true"), None),
        ];
        for (k, v, want) in cases {
            assert_eq!(coerce(k, &v), want, "{k:?} {v}");
        }
    }

    #[test]
    fn settings_override_defaults_and_are_type_checked() {
        let opts = vec![
            opt("root", OptionType::String, Some(Value::from("./workspace"))),
            opt("max", OptionType::Integer, Some(Value::from(3))),
        ];
        let mut s = Settings::default();
        s.set_override("extensions.P.root=/tmp/x").unwrap();
        let f = Path::new("plugin.yaml");
        let t = Path::new("tavern.toml");
        let got = resolve("P", &opts, &s, f, "", t).unwrap();
        assert_eq!(got["root"], Value::from("/tmp/x"));
        assert_eq!(got["max"], Value::from(3));

        s.set_override("extensions.P.max=lots").unwrap();
        let probs = resolve("P", &opts, &s, f, "", t).unwrap_err();
        assert!(
            probs[0].message.contains("extensions.P.max"),
            "{}",
            probs[0]
        );
        assert!(
            probs[0].message.contains("expected integer"),
            "{}",
            probs[0]
        );
        assert!(probs[0].message.contains("\"lots\""), "{}", probs[0]);
    }

    #[test]
    fn unknown_setting_suggests() {
        let opts = vec![opt("root", OptionType::String, None)];
        let mut s = Settings::default();
        s.set_override("extensions.P.roots=x").unwrap();
        // The plugin still resolves (the typo disables only itself) …
        assert!(resolve("P", &opts, &s, Path::new("p"), "", Path::new("t")).is_ok());
        // … and the typo is reported against `--set`, with a suggestion.
        let probs = undeclared("P", &opts, &s, Path::new("t"));
        assert_eq!(probs.len(), 1);
        assert_eq!(
            probs[0].hint.as_deref(),
            Some("did you mean extensions.P.root?")
        );
        assert!(
            probs[0].to_string().starts_with("--set extensions.P.roots: setting extensions.P.roots: plugin P declares no option 'roots'"),
            "{}",
            probs[0]
        );
    }

    #[test]
    fn full_keys_are_accepted() {
        let mut o = opt("x", OptionType::String, None);
        o.id = None;
        o.key = Some("extensions.P.root".into());
        assert_eq!(option_id("P", &o).unwrap(), "root");
        o.key = Some("extensions.Q.root".into());
        assert!(option_id("P", &o).is_err());
    }
}
