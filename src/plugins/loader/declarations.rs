//! What a plugin declares: its tools (tool files, inline tools, VCP commands), its node files,
//! its workflow files and the scripts all of them need.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::inside;
use super::manifest::ManifestSource;
use crate::plugins::manifest::{Entry, ToolsSection};
use crate::plugins::nodes::{self, NodeFile};
use crate::plugins::tool_file;
use crate::problem::Problem;
use crate::tools::{Implementation, ToolDefinition};

/// A tool declaration and where it came from.
pub(super) struct Decl {
    pub def: ToolDefinition,
    pub file: PathBuf,
    pub text: String,
    /// Members added to the arguments of a process tool (VCP's `command`).
    pub extra: Map<String, Value>,
    /// Whether the declaration writes `parameters` (node/workflow tools infer them when not).
    pub has_parameters: bool,
}

impl Decl {
    fn new(def: ToolDefinition, file: &Path, text: &str) -> Self {
        Decl {
            def,
            file: file.to_path_buf(),
            text: text.to_string(),
            extra: Map::new(),
            has_parameters: true,
        }
    }
}

/// Every tool the plugin declares: inline in the manifest or in tool files (`tools: {entry}`,
/// default `./tools`), plus one per VCP command.
pub(super) fn tool_decls(
    dir: &Path,
    src: &ManifestSource,
    problems: &mut Vec<Problem>,
) -> Vec<Decl> {
    let mut defs: Vec<Decl> = Vec::new();
    match &src.manifest.tools {
        Some(ToolsSection::Inline(list)) => {
            for v in list {
                match serde_json::from_value::<ToolDefinition>(v.clone()) {
                    Ok(d) => {
                        let mut decl = Decl::new(d, &src.file, &src.text);
                        decl.has_parameters = v.get("parameters").is_some();
                        defs.push(decl)
                    }
                    Err(e) => {
                        problems.push(src.key_at("tools", format!("invalid inline tool: {e}")))
                    }
                }
            }
        }
        other => {
            let (entry, explicit) = match other {
                Some(ToolsSection::Entry(e)) => (e.entry.clone(), true),
                _ => ("./tools".to_string(), false),
            };
            match inside(dir, &entry) {
                None => problems.push(src.key_at(
                    "entry",
                    format!("tools entry '{entry}' leaves the plugin directory"),
                )),
                Some(tools_dir) if tools_dir.is_dir() => match tool_file::list(&tools_dir) {
                    Ok(files) => {
                        for f in files {
                            match tool_file::read(&f) {
                                Ok(tf) => {
                                    let mut decl = Decl::new(tf.definition, &tf.path, &tf.text);
                                    decl.has_parameters = serde_json::from_str::<Value>(&tf.text)
                                        .is_ok_and(|v| v.get("parameters").is_some());
                                    defs.push(decl)
                                }
                                Err(p) => problems.push(p),
                            }
                        }
                    }
                    Err(e) => problems.push(Problem::new(&tools_dir, format!("cannot read: {e}"))),
                },
                Some(tools_dir) if explicit => problems.push(src.key_at(
                    "entry",
                    format!("tools entry {} is not a directory", tools_dir.display()),
                )),
                Some(_) => {}
            }
        }
    }
    if let Some(v) = &src.vcp {
        for d in v.tools() {
            // VCP plugins with several commands read which one from `command`.
            let mut decl = Decl::new(d, &src.vcp_file, &src.vcp_text);
            decl.extra
                .insert("command".into(), Value::String(decl.def.id.clone()));
            defs.push(decl);
        }
    }
    defs
}

/// The directory of an `{entry}` section: the entry when written (a problem when it leaves
/// the plugin or is not a directory), else `default` when that directory exists.
pub(super) fn entry_dir(
    dir: &Path,
    section: Option<&Entry>,
    default: &str,
    what: &str,
    src: &ManifestSource,
    problems: &mut Vec<Problem>,
) -> Option<PathBuf> {
    match section {
        Some(e) => match inside(dir, &e.entry) {
            None => {
                problems.push(src.key_at(
                    what,
                    format!("{what} entry '{}' leaves the plugin directory", e.entry),
                ));
                None
            }
            Some(d) if d.is_dir() => Some(d),
            Some(d) => {
                problems.push(src.key_at(
                    what,
                    format!("{what} entry {} is not a directory", d.display()),
                ));
                None
            }
        },
        None => inside(dir, default).filter(|d| d.is_dir()),
    }
}

/// The node files in `nodes_dir` (none when there is no such directory).
pub(super) fn node_files(
    plugin: &str,
    nodes_dir: Option<&Path>,
    problems: &mut Vec<Problem>,
) -> Vec<NodeFile> {
    let mut out = Vec::new();
    if let Some(nd) = nodes_dir {
        match nodes::list(nd) {
            Ok(list) => {
                for f in list {
                    match nodes::read(plugin, &f) {
                        Ok(n) => out.push(n),
                        Err(p) => problems.push(p),
                    }
                }
            }
            Err(e) => problems.push(Problem::new(nd, format!("cannot read: {e}"))),
        }
    }
    out
}

/// The `*.json` workflow files in `dir`, sorted by name.
pub(super) fn workflow_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// The scripts that load into the plugin's sandbox, relative to `dir`: `main.lua` and
/// `main.rhai` when present, then every existing script a node or a service tool names.
pub(super) fn script_files(dir: &Path, node_files: &[NodeFile], defs: &[Decl]) -> Vec<PathBuf> {
    let mut files = main_scripts(dir);
    for n in node_files {
        if let Some(s) = &n.script {
            if inside(dir, s).is_some_and(|p| p.is_file()) {
                let p = PathBuf::from(s.trim_start_matches("./"));
                if !files.contains(&p) {
                    files.push(p);
                }
            }
        }
    }
    for d in defs {
        if let Implementation::Service {
            script: Some(s),
            function: Some(_),
        } = &d.def.implementation
        {
            if inside(dir, s).is_some() && dir.join(s).is_file() {
                let p = PathBuf::from(s.trim_start_matches("./"));
                if !files.contains(&p) {
                    files.push(p);
                }
            }
        }
    }
    files
}

/// Scripts run when the plugin loads: `main.lua` and `main.rhai`, when present.
fn main_scripts(dir: &Path) -> Vec<PathBuf> {
    ["main.lua", "main.rhai"]
        .iter()
        .map(PathBuf::from)
        .filter(|f| dir.join(f).is_file())
        .collect()
}
