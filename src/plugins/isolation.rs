//! What loading does with a plugin's declared fs roots: the engine creates missing write
//! roots; `plugin check` leaves the disk alone; `plugin test` maps every declared root to a
//! fresh directory under a temporary base, seeded from the plugin's `tests/fixtures/`, so a
//! test that writes and then reads passes on every run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::permissions::Permissions;

/// Directory of files copied into every mapped root before a test run.
pub const FIXTURES_DIR: &str = "tests/fixtures";

/// How loading treats declared fs roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RootPolicy {
    /// Use them as declared and create missing write roots (the engine).
    #[default]
    Create,
    /// Use them as declared and change nothing on disk (`plugin check`).
    LeaveAlone,
    /// Map each to `<base>/<plugin dir name>/root<N>` (created, seeded from
    /// `tests/fixtures/`), so tests never touch the real roots (`plugin test`).
    MapTo(PathBuf),
}

impl RootPolicy {
    /// Whether missing write roots are created.
    pub fn creates(&self) -> bool {
        !matches!(self, RootPolicy::LeaveAlone)
    }

    /// Rewrites `perms`' roots for plugin directory `plugin_dir` (only for `MapTo`).
    pub fn apply(&self, perms: &mut Permissions, plugin_dir: &Path) {
        let RootPolicy::MapTo(base) = self else {
            return;
        };
        let name = plugin_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plugin".into());
        let mut mapped: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
        let fixtures = plugin_dir.join(FIXTURES_DIR);
        let mut map = |root: &PathBuf| -> PathBuf {
            let n = mapped.len();
            mapped
                .entry(root.clone())
                .or_insert_with(|| {
                    let to = base.join(&name).join(format!("root{n}"));
                    // A failure here surfaces as the test's own I/O error on first use.
                    let _ = std::fs::create_dir_all(&to);
                    if fixtures.is_dir() {
                        let _ = copy_tree(&fixtures, &to);
                    }
                    to
                })
                .clone()
        };
        perms.fs_write = perms.fs_write.iter().map(&mut map).collect();
        perms.fs_read = perms.fs_read.iter().map(&mut map).collect();
    }
}

/// Copies the contents of `from` into `to`, recursively (symlinks are not followed).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir_all(&dest)?;
            copy_tree(&entry.path(), &dest)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_map_to_seeded_temp_dirs() {
        let plugin = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(plugin.path().join("tests/fixtures/sub")).unwrap();
        std::fs::write(plugin.path().join("tests/fixtures/sub/a.txt"), "hi").unwrap();
        let base = tempfile::tempdir().unwrap();
        let mut perms = Permissions {
            fs_read: vec!["/real/data".into(), "/real/ws".into()],
            fs_write: vec!["/real/ws".into()],
            ..Default::default()
        };
        RootPolicy::MapTo(base.path().into()).apply(&mut perms, plugin.path());
        assert!(perms.fs_write[0].starts_with(base.path()));
        assert_eq!(
            perms.fs_read[1], perms.fs_write[0],
            "one root, one temp dir"
        );
        assert_ne!(perms.fs_read[0], perms.fs_write[0]);
        for r in &perms.fs_read {
            assert_eq!(std::fs::read_to_string(r.join("sub/a.txt")).unwrap(), "hi");
        }
        assert!(!RootPolicy::LeaveAlone.creates());
        assert!(RootPolicy::Create.creates());
    }
}
