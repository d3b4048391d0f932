//! What a plugin's scripts use, read from their text (`api.hooks.on("…")`,
//! `api.services.override("…")`, `api.tools.call("…")` — from tokens, so `pcall(f, "…")`,
//! aliases and indexing count too, comments and strings do not — and `api.fs.*`), set beside
//! what its manifest declares. `tavern plugin check` prints both and names every undeclared use; the
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
    /// `hooks`, `services.override`, `tools`, `fs.read`, `fs.write` or `world`.
    pub kind: &'static str,
    /// The point, tool id or function (`api.fs.write`) used.
    pub target: String,
    /// Where.
    pub file: PathBuf,
    /// 1-based line.
    pub line: u32,
}

/// The `api.fs` and `api.world` functions used (a name is enough: the roots and the world
/// access are the manifest's). Hooks,
/// overrides and tool calls are found from tokens ([`api_calls`]), whatever the call form.
fn patterns() -> &'static [(&'static str, Regex)] {
    static P: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    P.get_or_init(|| {
        [
            (
                "fs.write",
                r"(api(?:\.|::)fs(?:\.|::)(?:write|append|remove|mkdir))\b".to_string(),
            ),
            (
                "fs.read",
                r"(api(?:\.|::)fs(?:\.|::)(?:read|list|exists))\b".to_string(),
            ),
            (
                "world",
                r"(api(?:\.|::)world(?:\.|::)(?:get|set))\b".to_string(),
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
        let mut found = Vec::new();
        for (i, line) in text.lines().enumerate() {
            for (kind, re) in patterns() {
                for c in re.captures_iter(line) {
                    found.push(Use {
                        kind,
                        target: c[1].to_string(),
                        file: f.clone(),
                        line: i as u32 + 1,
                    });
                }
            }
        }
        // Ids handed to the API, in every call form: direct, through `pcall`/`xpcall`,
        // aliases, indexing with strings, Lua's `f "x"` calls; not in comments or strings.
        for (kind, target, line) in api_calls(&tokens(&text)) {
            let u = Use {
                kind,
                target,
                file: f.clone(),
                line,
            };
            if !found.contains(&u) {
                found.push(u);
            }
        }
        // Line order; on one line, the order found.
        found.sort_by_key(|u| u.line);
        out.extend(found);
    }
    out
}

/// A token of a Lua or Rhai script, enough to follow the forms that hand an id to the API.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(&'static str),
    Other,
}

/// Tokens of `text` with their 1-based lines; comments dropped. Both languages' comments
/// and strings: `--`, `--[[ ]]`, `//`, `/* */`, `'…'`, `"…"`, `[[…]]`, `` `…` ``.
fn tokens(text: &str) -> Vec<(Tok, u32)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1u32);
    // The end of a Lua long bracket `[==[ … ]==]` starting at `at` (at `[`), if it is one.
    let long = |at: usize| -> Option<(usize, usize)> {
        let mut j = at + 1;
        while b.get(j) == Some(&b'=') {
            j += 1;
        }
        if b.get(j) != Some(&b'[') {
            return None;
        }
        let close = format!("]{}]", "=".repeat(j - at - 1));
        let end = text[j + 1..].find(&close).map_or(b.len(), |e| j + 1 + e);
        Some((j + 1, end))
    };
    while i < b.len() {
        let c = b[i];
        let start_line = line;
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            _ if c.is_ascii_whitespace() => i += 1,
            b'-' if b.get(i + 1) == Some(&b'-') => {
                let end = match (b.get(i + 2), long(i + 2)) {
                    (Some(b'['), Some((_, e))) => (e + 2).min(b.len()),
                    _ => text[i..].find('\n').map_or(b.len(), |e| i + e),
                };
                line += text[i..end].matches('\n').count() as u32;
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = text[i..].find('\n').map_or(b.len(), |e| i + e);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                line += text[i..end].matches('\n').count() as u32;
                i = end;
            }
            b'"' | b'\'' | b'`' => {
                let mut j = i + 1;
                let mut s = Vec::new();
                while j < b.len() && b[j] != c {
                    if b[j] == b'\\' && j + 1 < b.len() {
                        j += 1;
                    }
                    s.push(b[j]);
                    j += 1;
                }
                line += text[i..j.min(b.len())].matches('\n').count() as u32;
                out.push((
                    Tok::Str(String::from_utf8_lossy(&s).into_owned()),
                    start_line,
                ));
                i = j + 1;
            }
            b'[' if long(i).is_some() => {
                if let Some((from, end)) = long(i) {
                    out.push((Tok::Str(text[from..end].to_string()), start_line));
                    line += text[i..end].matches('\n').count() as u32;
                    i = text[end..].find(']').map_or(b.len(), |e| end + e + 1);
                    i = text[i..].find(']').map_or(b.len(), |e| i + e + 1);
                }
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                let mut j = i;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                out.push((Tok::Ident(text[i..j].to_string()), start_line));
                i = j;
            }
            _ => {
                let two = text.get(i..i + 2).unwrap_or("");
                let (t, n) = match two {
                    "::" => (Tok::Punct("::"), 2),
                    "==" => (Tok::Punct("=="), 2),
                    _ => match c {
                        b'.' => (Tok::Punct("."), 1),
                        b'(' => (Tok::Punct("("), 1),
                        b')' => (Tok::Punct(")"), 1),
                        b'[' => (Tok::Punct("["), 1),
                        b']' => (Tok::Punct("]"), 1),
                        b'{' => (Tok::Punct("{"), 1),
                        b'}' => (Tok::Punct("}"), 1),
                        b',' => (Tok::Punct(","), 1),
                        b'=' => (Tok::Punct("="), 1),
                        b';' => (Tok::Punct(";"), 1),
                        _ => (
                            Tok::Other,
                            text[i..].chars().next().map_or(1, char::len_utf8),
                        ),
                    },
                };
                out.push((t, start_line));
                i += n;
            }
        }
    }
    out
}

/// The API functions whose first argument is what a plugin must declare.
fn api_kind(path: &[String]) -> Option<&'static str> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["api", "tools", "call" | "invoke"] => Some("tools"),
        ["api", "hooks", "on"] => Some("hooks"),
        ["api", "services", "override"] => Some("services.override"),
        _ => None,
    }
}

/// A name path at `i` (`a.b`, `a::b`, `a["b"]`), its head resolved through `aliases`;
/// returns it and the index after it.
fn path_at(
    t: &[(Tok, u32)],
    i: usize,
    aliases: &std::collections::HashMap<String, Vec<String>>,
) -> Option<(Vec<String>, usize)> {
    let Tok::Ident(head) = &t.get(i)?.0 else {
        return None;
    };
    let mut path = aliases
        .get(head)
        .cloned()
        .unwrap_or_else(|| vec![head.clone()]);
    let mut j = i + 1;
    loop {
        match (
            t.get(j).map(|x| &x.0),
            t.get(j + 1).map(|x| &x.0),
            t.get(j + 2).map(|x| &x.0),
        ) {
            (Some(Tok::Punct("." | "::")), Some(Tok::Ident(n)), _) => {
                path.push(n.clone());
                j += 2;
            }
            (Some(Tok::Punct("[")), Some(Tok::Str(n)), Some(Tok::Punct("]"))) => {
                path.push(n.clone());
                j += 3;
            }
            _ => break,
        }
    }
    Some((path, j))
}

/// The index after the argument starting at `i` (up to a `,` or `)` at its own depth).
fn skip_argument(t: &[(Tok, u32)], mut i: usize) -> usize {
    let mut depth = 0i32;
    while let Some((tok, _)) = t.get(i) {
        match tok {
            Tok::Punct("(" | "[" | "{") => depth += 1,
            Tok::Punct(")" | "]" | "}") if depth == 0 => return i,
            Tok::Punct(")" | "]" | "}") => depth -= 1,
            Tok::Punct(",") if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Every (kind, target, line) handed to [`api_kind`]'s functions: called directly
/// (`f("x")`, `f "x"`), through `pcall(f, "x")` / `xpcall(f, handler, "x")`, or through a
/// local name (`local call = api.tools.call`, `local t = api.tools; t.call("x")`).
fn api_calls(t: &[(Tok, u32)]) -> Vec<(&'static str, String, u32)> {
    let mut aliases = std::collections::HashMap::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let prev_dot = i > 0 && matches!(t[i - 1].0, Tok::Punct("." | "::"));
        let Some((path, end)) = path_at(t, i, &aliases).filter(|_| !prev_dot) else {
            i += 1;
            continue;
        };
        // `NAME = api…` (Lua `local NAME = …`, Rhai `let NAME = …`): an alias.
        if let (Some((Tok::Punct("="), _)), Some((Tok::Ident(name), _))) =
            (t.get(i.wrapping_sub(1)), t.get(i.wrapping_sub(2)))
        {
            let called = matches!(
                t.get(end).map(|x| &x.0),
                Some(Tok::Punct("(") | Tok::Str(_))
            );
            if path.first().is_some_and(|h| h == "api") && !called {
                aliases.insert(name.clone(), path.clone());
            }
        }
        if let Some(kind) = api_kind(&path) {
            let arg = match (t.get(end), t.get(end + 1)) {
                (Some((Tok::Punct("("), _)), Some((Tok::Str(s), l))) => Some((s, *l)),
                (Some((Tok::Str(s), l)), _) => Some((s, *l)),
                // An argument of `pcall(f, …)` / `xpcall(f, h, …)`.
                (Some((Tok::Punct(","), _)), _) => {
                    let caller = match (t.get(i.wrapping_sub(1)), t.get(i.wrapping_sub(2))) {
                        (Some((Tok::Punct("("), _)), Some((Tok::Ident(f), _))) => f.as_str(),
                        _ => "",
                    };
                    let at = match caller {
                        "pcall" => Some(end + 1),
                        "xpcall" => Some(skip_argument(t, end + 1) + 1),
                        _ => None,
                    };
                    match at.and_then(|a| t.get(a)) {
                        Some((Tok::Str(s), l)) => Some((s, *l)),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some((s, l)) = arg {
                out.push((kind, s.clone(), l));
            }
        }
        i = end.max(i + 1);
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
        "world" => perms.world(world_need(&u.target)).is_ok(),
        _ => true,
    }
}

/// What an `api.world` function (`api.world.set`, `api::world::get`) needs.
fn world_need(function: &str) -> crate::script::WorldAccess {
    if function.ends_with("set") {
        crate::script::WorldAccess::Write
    } else {
        crate::script::WorldAccess::Read
    }
}

/// One permission of a plugin: what its manifest declares beside what its scripts use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PermissionRow {
    /// The permission as written in plugin.yaml (`hooks`, `services.override`, `tools`,
    /// `fs.read`, `fs.write`, `world`).
    pub permission: &'static str,
    /// What the manifest declares (roots as resolved paths; `read` or `write` for `world`).
    pub declared: Vec<String>,
    /// What the scripts use (points, tool ids, `api.fs` and `api.world` functions), in file
    /// order.
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
    /// The report with every root and file inside `home` named relative to it, as every
    /// other message names them (`data`, `plugins/Dice/main.lua`).
    pub fn relative_to(mut self, home: &std::path::Path) -> Self {
        for r in &mut self.permissions {
            if r.permission.starts_with("fs.") {
                for d in &mut r.declared {
                    *d = crate::problem::shown_path(std::path::Path::new(d.as_str()), home);
                }
            }
        }
        for u in &mut self.undeclared {
            if let Some(rel) = crate::problem::inside_home(&u.file, home) {
                u.file = rel.into();
            }
        }
        self
    }

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
        (
            "world",
            perms
                .world
                .map(|w| vec![w.as_str().to_string()])
                .unwrap_or_default(),
        ),
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
                "world" => format!(
                    "{} needs permission `{}`",
                    u.target,
                    world_need(&u.target).permission()
                ),
                k => format!(
                    "uses {k} '{}' but `permissions.{k}` does not list it",
                    u.target
                ),
            };
            problems.push(
                Problem::new(&u.file, format!("plugin '{}' {what}", plugin.name()))
                    .at(u.line, None)
                    .hint(match u.kind {
                        "world" => format!(
                            "add `{}` under `permissions` in plugin.yaml",
                            world_need(&u.target).permission()
                        ),
                        k => format!("add it under `permissions.{k}` in plugin.yaml"),
                    }),
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

    /// Issue 23 item 11: every tool id a script hands to the API, whatever the call form.
    #[test]
    fn finds_ids_through_pcall_aliases_and_indexing() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("main.lua"),
            [
                "local ok, e = pcall(api.tools.call, \"A:one\", {})",
                "local call = api.tools.call",
                "call(\"A:two\", {})",
                "local t = api.tools",
                "t.call('A:three')",
                "api[\"tools\"][\"call\"](\"A:four\")",
                "xpcall(api.tools.call, function(e) return e end, \"A:five\", {})",
                "api.tools.call \"A:six\"",
                "-- api.tools.call('Not:this')",
                "--[[ api.tools.call('Nor:this') ]]",
                "local on = api.hooks.on",
                "on('tool:after-invoke', function() end)",
                "local s = \"api.tools.call('Nor:that')\"",
            ]
            .join("\n"),
        )
        .unwrap();
        std::fs::write(
            d.path().join("x.rhai"),
            "// api::tools::invoke(\"No:pe\")\nlet r = api::tools::invoke(\n  \"B:c\", #{});\n",
        )
        .unwrap();
        let got: Vec<(&str, String, u32)> = scan(d.path())
            .into_iter()
            .map(|u| (u.kind, u.target, u.line))
            .collect();
        let want: Vec<(&str, String, u32)> = vec![
            ("tools", "A:one".into(), 1),
            ("tools", "A:two".into(), 3),
            ("tools", "A:three".into(), 5),
            ("tools", "A:four".into(), 6),
            ("tools", "A:five".into(), 7),
            ("tools", "A:six".into(), 8),
            ("hooks", "tool:after-invoke".into(), 12),
            ("tools", "B:c".into(), 3),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn every_pattern_compiles_and_finds_its_use() {
        assert_eq!(patterns().len(), 3);
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("main.lua"),
            "api.hooks.on('tool:before-invoke', f)\napi.tools.call(\"FileOperator:WriteFile\", {})\napi.fs.write('a', 'b')\nlocal w = api.world.get('weather')\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("x.rhai"),
            "api::services::override(\"A:b\", |a, c| 1);\napi::tools::invoke(\"B:c\", #{});\napi::world::set(\"a.b\", 1);\n",
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
                ("world", "api.world.get", 4),
                ("services.override", "A:b", 1),
                ("tools", "B:c", 2),
                ("world", "api::world::set", 3),
            ]
        );
    }
}
