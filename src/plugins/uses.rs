//! What a plugin's scripts use, read from their text (`api.hooks.on("…")`,
//! `api.services.override("…")`, `api.tools.call("…")`, `api.fs.*`), set beside what its
//! manifest declares. `tavern plugin check` prints both and names every undeclared use; the
//! engine refuses the same uses at load (hooks, overrides registered while loading) or at
//! call time.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use super::loader::Plugin;
use crate::problem::Problem;
use crate::script::Permissions;
use crate::tools::ToolManager;

/// One use found in a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// `hooks`, `services.override`, `tools`, `fs.read` or `fs.write`.
    pub kind: &'static str,
    /// The point, tool id or function (`api.fs.write`) used.
    pub target: String,
    /// Where.
    pub file: PathBuf,
    /// 1-based line.
    pub line: u32,
}

fn patterns() -> &'static [(&'static str, Regex)] {
    static P: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    P.get_or_init(|| {
        let q = r#"\s*\(\s*["']([^"']+)["']"#;
        [
            ("hooks", format!(r"api(?:\.|::)hooks(?:\.|::)on{q}")),
            (
                "services.override",
                format!(r"api(?:\.|::)services(?:\.|::)override{q}"),
            ),
            (
                "tools",
                format!(r"api(?:\.|::)tools(?:\.|::)(?:call|invoke){q}"),
            ),
            (
                "fs.write",
                r"(api(?:\.|::)fs(?:\.|::)(?:write|append|remove|mkdir))\b".to_string(),
            ),
            (
                "fs.read",
                r"(api(?:\.|::)fs(?:\.|::)(?:read|list|exists))\b".to_string(),
            ),
        ]
        .into_iter()
        // The patterns are fixed text, checked by the unit test below.
        .filter_map(|(k, p)| Regex::new(&p).ok().map(|r| (k, r)))
        .collect()
    })
}

/// Every use in the `.lua` and `.rhai` files under `dir` (not following symlinks).
pub fn scan(dir: &Path) -> Vec<Use> {
    let mut files = Vec::new();
    collect(dir, 0, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            for (kind, re) in patterns() {
                for c in re.captures_iter(line) {
                    out.push(Use {
                        kind,
                        target: c[1].to_string(),
                        file: f.clone(),
                        line: i as u32 + 1,
                    });
                }
            }
        }
    }
    out
}

fn collect(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    if depth > 4 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            collect(&p, depth + 1, out);
        } else if ft.is_file() && p.extension().is_some_and(|x| x == "lua" || x == "rhai") {
            out.push(p);
        }
    }
}

/// Whether `u` is declared in `perms` for plugin `plugin` (tool ids resolved through `tools`).
pub fn declared(u: &Use, plugin: &str, perms: &Permissions, tools: &ToolManager) -> bool {
    let canonical = || {
        tools
            .get(&u.target)
            .map(|t| t.id().to_string())
            .unwrap_or_else(|_| u.target.clone())
    };
    match u.kind {
        "hooks" => perms.may_hook(&u.target),
        "services.override" => perms.may_override(&canonical()),
        "tools" => perms.may_call(plugin, &canonical()),
        "fs.write" => !perms.fs_write.is_empty(),
        "fs.read" => !perms.fs_read.is_empty() || !perms.fs_write.is_empty(),
        _ => true,
    }
}

/// One permission of a plugin: what its manifest declares beside what its scripts use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PermissionRow {
    /// The permission as written in plugin.yaml (`hooks`, `services.override`, `tools`,
    /// `fs.read`, `fs.write`).
    pub permission: &'static str,
    /// What the manifest declares (roots as resolved paths).
    pub declared: Vec<String>,
    /// What the scripts use (points, tool ids, `api.fs` functions), in file order.
    pub used: Vec<String>,
}

/// A use the manifest does not declare.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Undeclared {
    /// The permission it needs.
    pub permission: &'static str,
    /// The point, tool id or function used.
    pub target: String,
    /// Where.
    pub file: PathBuf,
    /// 1-based line.
    pub line: u32,
    /// What is wrong, in words.
    pub message: String,
}

/// The permissions report of one plugin, as data (`plugin check --json`) and as text
/// ([`PermissionReport::text`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PermissionReport {
    /// The plugin's name.
    pub plugin: String,
    /// Declared beside used, per permission that scripts use.
    pub permissions: Vec<PermissionRow>,
    /// `permissions.processes`.
    pub processes: bool,
    /// `permissions.network`.
    pub network: bool,
    /// `permissions.env`.
    pub env: Vec<String>,
    /// Every undeclared use.
    pub undeclared: Vec<Undeclared>,
}

impl PermissionReport {
    /// The table `tavern plugin check` prints.
    pub fn text(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(", ")
            }
        };
        let mut text = format!("plugin {}\n", self.plugin);
        for r in &self.permissions {
            text.push_str(&format!(
                "  {:<18} declared: {:<32} used: {}\n",
                r.permission,
                list(&r.declared),
                list(&r.used)
            ));
        }
        text.push_str(&format!(
            "  {:<18} declared: {}\n",
            "processes", self.processes
        ));
        text.push_str(&format!("  {:<18} declared: {}\n", "network", self.network));
        text.push_str(&format!("  {:<18} declared: {}\n", "env", list(&self.env)));
        for u in &self.undeclared {
            text.push_str(&format!(
                "  undeclared: {}:{}: {}\n",
                u.file.display(),
                u.line,
                u.message
            ));
        }
        text
    }
}

/// The permissions report of one plugin: declared beside used, and a problem for every
/// undeclared use.
pub fn report(plugin: &Plugin, tools: &ToolManager) -> (PermissionReport, Vec<Problem>) {
    let perms = plugin.permissions.clone();
    let uses = scan(&plugin.dir);
    let paths = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
    };
    let used = |kind: &str| {
        let mut v: Vec<String> = uses
            .iter()
            .filter(|u| u.kind == kind)
            .map(|u| u.target.clone())
            .collect();
        v.dedup();
        v
    };
    let permissions = [
        ("hooks", perms.hooks.clone()),
        ("services.override", perms.services_override.clone()),
        ("tools", perms.tools.clone()),
        ("fs.read", paths(&perms.fs_read)),
        ("fs.write", paths(&perms.fs_write)),
    ]
    .into_iter()
    .map(|(permission, declared)| PermissionRow {
        permission,
        declared,
        used: used(permission),
    })
    .collect();
    let mut undeclared = Vec::new();
    let mut problems = Vec::new();
    for u in &uses {
        if !declared(u, plugin.name(), &perms, tools) {
            let what = match u.kind {
                "fs.read" | "fs.write" => format!("{} needs permission `{}`", u.target, u.kind),
                k => format!(
                    "uses {k} '{}' but `permissions.{k}` does not list it",
                    u.target
                ),
            };
            problems.push(
                Problem::new(&u.file, format!("plugin '{}' {what}", plugin.name()))
                    .at(u.line, None)
                    .hint(format!(
                        "add it under `permissions.{}` in plugin.yaml",
                        u.kind
                    )),
            );
            undeclared.push(Undeclared {
                permission: u.kind,
                target: u.target.clone(),
                file: u.file.clone(),
                line: u.line,
                message: what,
            });
        }
    }
    let report = PermissionReport {
        plugin: plugin.name().to_string(),
        permissions,
        processes: perms.processes,
        network: perms.network,
        env: perms.env.clone(),
        undeclared,
    };
    (report, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles_and_finds_its_use() {
        assert_eq!(patterns().len(), 5);
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("main.lua"),
            "api.hooks.on('tool:before-invoke', f)\napi.tools.call(\"FileOperator:WriteFile\", {})\napi.fs.write('a', 'b')\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("x.rhai"),
            "api::services::override(\"A:b\", |a, c| 1);\napi::tools::invoke(\"B:c\", #{});\n",
        )
        .unwrap();
        let u = scan(d.path());
        let got: Vec<(&str, &str, u32)> = u
            .iter()
            .map(|u| (u.kind, u.target.as_str(), u.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("hooks", "tool:before-invoke", 1),
                ("tools", "FileOperator:WriteFile", 2),
                ("fs.write", "api.fs.write", 3),
                ("services.override", "A:b", 1),
                ("tools", "B:c", 2),
            ]
        );
    }
}
