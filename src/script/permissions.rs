//! What a plugin declared in plugin.yaml `permissions`, already resolved by the loader
//! (`plugins::permissions::resolve`): the one permissions type of the crate, read by the
//! script sandbox (`api.fs`, hooks, overrides, `api.tools.call`) and by process tools
//! (file roots, network, environment).

use std::path::{Path, PathBuf};

use super::ScriptError;

/// A plugin's declared permissions. File roots are absolute paths (the loader resolves them
/// against the plugin directory or the engine home).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Permissions {
    /// Hook points the plugin may register handlers for.
    pub hooks: Vec<String>,
    /// Service ids the plugin may override.
    pub services_override: Vec<String>,
    /// Roots the plugin may read.
    pub fs_read: Vec<PathBuf>,
    /// Roots the plugin may read and write.
    pub fs_write: Vec<PathBuf>,
    /// Whether the plugin may start processes.
    pub processes: bool,
    /// Tools it may call through `api.tools.call` (globs like `FileOperator:*`; its own
    /// tools and `system:*` need no entry).
    pub tools: Vec<String>,
    /// Whether its process tools may use the network.
    pub network: bool,
    /// Host environment variables its process tools receive.
    pub env: Vec<String>,
    /// What `api.world` may do with the engine's live world (`permissions.world`).
    pub world: Option<WorldAccess>,
}

/// `permissions.world`: what a plugin may do with the engine's live world.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum WorldAccess {
    /// `api.world.get`.
    Read,
    /// `api.world.get` and `api.world.set`.
    Write,
}

impl WorldAccess {
    /// The permission as written in plugin.yaml and in error messages (`world: read`).
    pub fn permission(self) -> &'static str {
        match self {
            WorldAccess::Read => "world: read",
            WorldAccess::Write => "world: write",
        }
    }

    /// The value as written after `world:` (`read`, `write`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorldAccess::Read => "read",
            WorldAccess::Write => "write",
        }
    }
}

/// Which kind of file access an `api.fs` function needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsAccess {
    /// `read`, `list`, `exists`: needs `fs.read` or `fs.write`.
    Read,
    /// `write`, `append`, `remove`, `mkdir`: needs `fs.write`.
    Write,
}

impl FsAccess {
    /// The permission name as written in plugin.yaml and in error messages.
    pub fn permission(self) -> &'static str {
        match self {
            FsAccess::Read => "fs.read",
            FsAccess::Write => "fs.write",
        }
    }
}

impl Permissions {
    /// No permissions at all (the default for snippets).
    pub fn none() -> Self {
        Self::default()
    }

    /// The root every `api.fs` path is taken inside: the first write root, else the first
    /// read root.
    pub fn primary_root(&self) -> Option<&Path> {
        self.fs_write
            .first()
            .or_else(|| self.fs_read.first())
            .map(PathBuf::as_path)
    }

    /// The root for an access of this kind, or the permission error naming what is missing.
    pub fn fs_root(&self, access: FsAccess) -> Result<&Path, ScriptError> {
        let root = match access {
            FsAccess::Write => self.fs_write.first().map(PathBuf::as_path),
            FsAccess::Read => self.primary_root(),
        };
        root.ok_or_else(|| ScriptError::PermissionDenied {
            permission: access.permission().into(),
        })
    }

    /// Whether `api.world` may do what `need` allows (`write` includes `read`), or the
    /// permission error naming what to declare.
    pub fn world(&self, need: WorldAccess) -> Result<(), ScriptError> {
        match self.world {
            Some(have) if have >= need => Ok(()),
            _ => Err(ScriptError::PermissionDenied {
                permission: need.permission().into(),
            }),
        }
    }

    /// Whether a hook point was declared, in either written form (`workflow:before-execute`
    /// or the seed's `hook:client:workflow:before-execute`); `*` allows every point.
    pub fn may_hook(&self, hook: &str) -> bool {
        let bare = bare_point(hook);
        self.hooks.iter().any(|h| h == "*" || bare_point(h) == bare)
    }

    /// Whether `tool` (a canonical id) may be overridden: listed in
    /// `permissions.services.override` (globs allowed).
    pub fn may_override(&self, tool: &str) -> bool {
        self.services_override.iter().any(|g| glob_match(g, tool))
    }

    /// Whether `api.tools.call` may call `tool` (a canonical id) for plugin `plugin`: its own
    /// tools and `system:*` always; others when `permissions.tools` lists them (globs).
    pub fn may_call(&self, plugin: &str, tool: &str) -> bool {
        let ns = tool.split_once(':').map(|(n, _)| n);
        ns == Some(plugin) || ns == Some("system") || self.tools.iter().any(|g| glob_match(g, tool))
    }
}

/// `hook:client:<point>` and `hook:<point>` name `<point>`.
pub fn bare_point(name: &str) -> &str {
    name.strip_prefix("hook:client:")
        .or_else(|| name.strip_prefix("hook:"))
        .unwrap_or(name)
}

/// Glob match with `*` (any run of characters, `:` included) and `?` (one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_hook_forms() {
        for (pat, text, ok) in [
            ("FileOperator:*", "FileOperator:WriteFile", true),
            ("FileOperator:*", "Other:WriteFile", false),
            ("*", "a:b", true),
            ("a:?", "a:b", true),
            ("a:b", "a:bc", false),
            ("*:Read*", "FileOperator:ReadFile", true),
        ] {
            assert_eq!(glob_match(pat, text), ok, "{pat} vs {text}");
        }
        let p = Permissions {
            hooks: vec![
                "hook:client:workflow:before-execute".into(),
                "tool:after-invoke".into(),
            ],
            ..Default::default()
        };
        assert!(p.may_hook("workflow:before-execute"));
        assert!(p.may_hook("hook:client:tool:after-invoke"));
        assert!(!p.may_hook("tool:before-invoke"));
        assert!(p.may_call("me", "me:x") && p.may_call("me", "system:echo"));
        assert!(!p.may_call("me", "FileOperator:WriteFile"));
    }
}
