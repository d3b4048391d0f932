//! Permission checks at load: what a plugin's `permissions:` section grants, resolved and
//! made ready for the sandbox. Every refusal names the permission that is missing.

use serde_json::{Map, Value};

use super::manifest::ManifestSource;
use super::{absolute, Loader};
use crate::plugins::permissions::{self, Permissions};
use crate::problem::Problem;

impl Loader<'_> {
    /// Resolves the plugin's permissions (`{config.X}` substituted, roots absolute), creates
    /// its write roots and makes every root canonical. `None` when they cannot be resolved.
    pub(super) fn resolve_permissions(
        &self,
        src: &ManifestSource,
        cfg: &Map<String, Value>,
        problems: &mut Vec<Problem>,
    ) -> Option<Permissions> {
        let mut perms = match permissions::resolve(&src.manifest.permissions, cfg, &self.home) {
            Ok(p) => p,
            Err(errs) => {
                problems.extend(errs.into_iter().map(|e| src.key_at("fs", e.to_string())));
                return None;
            }
        };
        // Write roots are created on load, so a fresh workspace works on the first call; then
        // every root is made canonical (symlinks resolved) for the sandbox's containment checks.
        let dir = src.file.parent().unwrap_or(&self.home).to_path_buf();
        self.roots.apply(&mut perms, &dir);
        for root in perms.fs_write.iter().filter(|_| self.roots.creates()) {
            if let Err(e) = std::fs::create_dir_all(root) {
                problems.push(src.key_at(
                    "write",
                    format!("cannot create write root {}: {e}", root.display()),
                ));
            }
        }
        perms.fs_write = perms.fs_write.iter().map(|r| absolute(r)).collect();
        perms.fs_read = perms.fs_read.iter().map(|r| absolute(r)).collect();
        Some(perms)
    }
}
