//! After loading: every tool of a plugin that failed to load (wholly or in part) becomes
//! `tool_unavailable` in the registry, with the load problem as its reason, so a caller or a
//! model calling `Dice:roll` hears "failed to load: plugins/Dice/main.lua:8: …" instead of
//! "unknown tool".

use std::path::Path;
use std::sync::Arc;

use super::loader::Plugin;
use super::manifest::MANIFEST_FILE;
use crate::problem::Problem;
use crate::tools::ToolManager;

/// Marks in `tools` what the problems of loading `plugins_dir` made unavailable:
/// - a plugin that did not load: its whole namespace;
/// - a tool file that did not load: `plugin:<file stem>`;
/// - a problem in a loaded plugin's manifest or scripts: its namespace (ids not registered).
///
/// Problem files may be absolute or relative to `home`; a reason names paths inside the
/// home relative to it (`plugins/Dice/main.lua:8: …`).
pub fn mark(
    tools: &ToolManager,
    home: &Path,
    plugins_dir: &Path,
    loaded: &[Arc<Plugin>],
    problems: &[Problem],
) {
    let plugins_dir = plugins_dir
        .canonicalize()
        .unwrap_or(plugins_dir.to_path_buf());
    // Script problems first: a tool whose script did not compile reports the script's
    // problem, not the consequence ("its script did not load").
    let is_script = |p: &&Problem| {
        p.file
            .extension()
            .is_some_and(|e| e == "lua" || e == "rhai")
    };
    let (scripts, rest): (Vec<&Problem>, Vec<&Problem>) = problems.iter().partition(is_script);
    let mut script_broken: Vec<String> = Vec::new();
    for p in scripts.into_iter().chain(rest) {
        let file = home.join(&p.file);
        let file = file.canonicalize().unwrap_or(file);
        let Ok(rel) = file.strip_prefix(&plugins_dir) else {
            continue;
        };
        let Some(first) = rel.components().next() else {
            continue;
        };
        let dir = plugins_dir.join(first);
        let in_plugin = file.strip_prefix(&dir).unwrap_or(&file).to_path_buf();
        // The problem as every other message names it, relative to the home.
        let reason = p.clone().relative_to(home).to_string();
        let plugin = loaded
            .iter()
            .find(|l| l.dir.canonicalize().is_ok_and(|d| d == dir));
        let Some(plugin) = plugin else {
            tools.mark_namespace_unavailable(manifest_name(&dir), reason);
            continue;
        };
        let name = in_plugin.to_string_lossy();
        if name.ends_with(".lua") || name.ends_with(".rhai") {
            script_broken.push(plugin.name().to_string());
            tools.mark_namespace_unavailable(plugin.name(), reason);
        } else if script_broken.iter().any(|n| n == plugin.name()) {
            // Covered by the script's problem.
        } else if let Some(stem) = name
            .rsplit('/')
            .next()
            .and_then(|n| n.strip_suffix(super::tool_file::TOOL_SUFFIX))
        {
            tools.mark_unavailable(format!("{}:{stem}", plugin.name()), reason);
        } else if name == MANIFEST_FILE {
            tools.mark_namespace_unavailable(plugin.name(), reason);
        }
    }
}

/// The name a plugin directory's manifest gives (read loosely), else the directory name.
pub(crate) fn manifest_name(dir: &Path) -> String {
    let from_manifest = std::fs::read_to_string(dir.join(MANIFEST_FILE))
        .ok()
        .and_then(|t| crate::strict::locate_yaml(&t))
        .and_then(|doc| match doc.get("name") {
            Some(crate::strict::Located::Scalar(Some(n))) => Some(n.clone()),
            _ => None,
        });
    from_manifest.unwrap_or_else(|| {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}
