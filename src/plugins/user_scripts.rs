//! Power-user scripts: `<home>/scripts/*.lua` and `*.rhai`, loaded after plugins. They are
//! the home owner's own, so they may use every hook point and override; files, processes and
//! tools beyond `system:*` only when `tavern.toml` grants them under
//! `[scripts.NAME.permissions]` (the shape of a plugin's `permissions:`). Their other
//! `[scripts.NAME]` keys are their settings (`api.config.get`); `enabled = false` leaves a
//! script unloaded. A script that fails to load fails closed (`scripts::guard_failed`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::manifest::PermissionsSpec;
use super::{permissions, scripts};
use crate::config::Settings;
use crate::hooks::Hooks;
use crate::problem::Problem;
use crate::script::{Limits, PluginScripts, ScriptEnv};
use crate::tools::ToolManager;

/// One loaded power-user script.
#[derive(Debug, Clone)]
pub struct UserScript {
    /// Its name (the file stem).
    pub name: String,
    /// Its file.
    pub file: PathBuf,
    /// Its loaded state (holding it keeps its hooks' state alive).
    pub scripts: PluginScripts,
}

/// Rebuilds `{a: {b: v}}` from dotted keys `a.b = v`.
fn nest(flat: impl IntoIterator<Item = (String, Value)>) -> Value {
    fn put(m: &mut Map<String, Value>, parts: &[&str], v: Value) {
        match parts {
            [] => {}
            [last] => {
                m.insert(last.to_string(), v);
            }
            [first, rest @ ..] => {
                let e = m
                    .entry(first.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !e.is_object() {
                    *e = Value::Object(Map::new());
                }
                if let Value::Object(inner) = e {
                    put(inner, rest, v);
                }
            }
        }
    }
    let mut root = Map::new();
    for (k, v) in flat {
        let parts: Vec<&str> = k.split('.').collect();
        put(&mut root, &parts, v);
    }
    Value::Object(root)
}

/// Loads every script in `<home>/scripts` (sorted by name). Problems never stop the others.
pub fn load(
    home: &Path,
    settings: &Settings,
    tools: &Arc<ToolManager>,
    hooks: Option<&Arc<Hooks>>,
    limits: Limits,
) -> (Vec<UserScript>, Vec<Problem>) {
    load_with(home, settings, tools, hooks, limits, true)
}

/// [`load`], creating granted write roots only when `create_roots` (`plugin check` writes
/// nothing).
pub fn load_with(
    home: &Path,
    settings: &Settings,
    tools: &Arc<ToolManager>,
    hooks: Option<&Arc<Hooks>>,
    limits: Limits,
    create_roots: bool,
) -> (Vec<UserScript>, Vec<Problem>) {
    let dir = home.join("scripts");
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for ext in [".lua", ".rhai"] {
        match super::files_ending_with(&dir, ext) {
            Ok(f) => files.extend(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), problems),
            Err(e) => {
                problems.push(Problem::new(&dir, format!("cannot read: {e}")));
                return (Vec::new(), problems);
            }
        }
    }
    files.sort();
    let settings_file = home.join("tavern.toml");
    let mut out = Vec::new();
    for file in files {
        let Some(name) = file
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        let owner = format!("script:{name}");
        let section = settings.section(&format!("scripts.{name}"));
        // The script's own settings may be any name, but one a letter away from `enabled`
        // or `permissions` is a slip that would silently leave the script as it is.
        for k in section.keys() {
            let head = k.split('.').next().unwrap_or(k);
            if head == "enabled" || head == "permissions" {
                continue;
            }
            if let Some(c) = crate::suggest::closest(head, &["enabled", "permissions"]) {
                let key = format!("scripts.{name}.{k}");
                let message = format!(
                    "unknown key `{head}` in [scripts.{name}], did you mean `{c}`? (other keys are the script's own settings)"
                );
                problems.push(match settings.origin(&key) {
                    Some(o) => o.problem(&key, message),
                    None => Problem::new(&settings_file, message),
                });
            }
        }
        // Every way a script does not load leaves its guard missing.
        let mut failed =
            |p: Problem| problems.push(scripts::guard_failed(hooks, settings, home, &owner, p));
        // `enabled = false` turns a script off: not loaded, so not a guard either.
        match section.get("enabled") {
            Some(Value::Bool(false)) => {
                let key = format!("scripts.{name}.enabled");
                let at = match settings.origin(&key) {
                    Some(o) => o.problem(&key, "").relative_to(home).to_string(),
                    None => "tavern.toml".into(),
                };
                let at = at.trim_end_matches(": ");
                tools.log().warn(
                    &owner,
                    &format!(
                        "scripts/{} is not loaded: {at} sets {key} = false (its hooks and overrides are off)",
                        file.file_name().unwrap_or_default().to_string_lossy()
                    ),
                );
                continue;
            }
            None | Some(Value::Bool(true)) => {}
            Some(other) => {
                let key = format!("scripts.{name}.enabled");
                let message = format!("{key}: expected true or false, got {other}");
                let p = match settings.origin(&key) {
                    Some(o) => o.problem(&key, message),
                    None => Problem::new(&settings_file, message),
                };
                failed(p);
                continue;
            }
        }
        let (perm_keys, config_keys): (Vec<_>, Vec<_>) = section
            .into_iter()
            .partition(|(k, _)| k.starts_with("permissions."));
        let spec_json = nest(
            perm_keys
                .into_iter()
                .map(|(k, v)| (k["permissions.".len()..].to_string(), v)),
        );
        let spec: PermissionsSpec = match serde_json::from_value(spec_json) {
            Ok(s) => s,
            Err(e) => {
                failed(Problem::new(
                    &settings_file,
                    format!("[scripts.{name}.permissions] is not a permissions table: {e}"),
                ));
                continue;
            }
        };
        let config: Map<String, Value> = config_keys.into_iter().collect();
        let resolved = match permissions::resolve(&spec, &config, home) {
            Ok(r) => r,
            Err(errs) => {
                for e in errs {
                    failed(Problem::new(
                        &settings_file,
                        format!("[scripts.{name}.permissions]: {e}"),
                    ));
                }
                continue;
            }
        };
        for root in resolved.fs_write.iter().filter(|_| create_roots) {
            let _ = std::fs::create_dir_all(root);
        }
        let mut perms = resolved.clone();
        // The home owner's own scripts: every hook point and every override.
        perms.hooks = vec!["*".into()];
        perms.services_override = vec!["*".into()];
        let mut env = ScriptEnv::new(format!("script-{name}"), &dir);
        env.owner = owner.clone();
        env.permissions = perms;
        env.config = config;
        env.limits = limits;
        env.tools = Some(Arc::downgrade(tools));
        env.hooks = hooks.map(Arc::downgrade);
        env.shown_dir = Some("scripts".into());
        let rel = PathBuf::from(file.file_name().unwrap_or_default());
        match PluginScripts::load(env, std::slice::from_ref(&rel)) {
            Ok(scripts) => out.push(UserScript {
                name,
                file,
                scripts,
            }),
            Err(e) => failed(scripts::load_problem(&dir, &rel, &e)),
        }
    }
    (out, problems)
}
