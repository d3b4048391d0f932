//! What a plugin declared in plugin.yaml `permissions`, already resolved by the loader.

use std::path::{Path, PathBuf};

use super::ScriptError;

/// A plugin's declared permissions. File roots are absolute paths (the loader resolves them
/// against the plugin directory or the engine home).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

    /// Whether a hook point was declared.
    pub fn may_hook(&self, hook: &str) -> bool {
        self.hooks.iter().any(|h| h == hook)
    }
}
