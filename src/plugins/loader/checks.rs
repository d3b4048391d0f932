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
        problems.extend(hook_point_problems(src));
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

/// Every `permissions.hooks` entry that names no hook point (`tool:befor-invoke`), at the
/// entry, with a did-you-mean (or the list of points). `*` grants every point; the
/// `hook:` and `hook:client:` prefixes of ComfyTavern manifests are read as the bare point.
fn hook_point_problems(src: &ManifestSource) -> Vec<Problem> {
    let names: Vec<&str> = crate::hooks::points::POINTS
        .iter()
        .map(|p| p.name)
        .collect();
    let mut out = Vec::new();
    for h in &src.manifest.permissions.hooks {
        if h == "*" || crate::hooks::point(h).is_some() {
            continue;
        }
        let bare = h
            .strip_prefix("hook:client:")
            .or_else(|| h.strip_prefix("hook:"))
            .unwrap_or(h);
        let message = match crate::suggest::closest(bare, &names) {
            Some(c) => {
                format!("unknown hook point '{h}' in `permissions.hooks`, did you mean '{c}'?")
            }
            None => format!(
                "unknown hook point '{h}' in `permissions.hooks` (points: {})",
                names.join(", ")
            ),
        };
        // At the entry itself: its text after the `hooks` key.
        let p = src.key_at("hooks", message);
        let after = match p.line {
            Some(l) => src
                .text
                .split_inclusive('\n')
                .take(l as usize - 1)
                .map(str::len)
                .sum(),
            None => 0,
        };
        out.push(match src.text[after..].find(h.as_str()) {
            Some(i) => {
                let (l, c) = crate::plugins::locate::line_col(&src.text, after + i);
                Problem {
                    line: Some(l),
                    column: Some(c),
                    ..p
                }
            }
            None => p,
        });
    }
    out
}
