//! Permissions: what `permissions:` in plugin.yaml asks for, with `{config.X}` substituted and
//! file roots made absolute, as the one [`Permissions`] type (`script::permissions`) the
//! script sandbox and process tools read.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use super::manifest::PermissionsSpec;
pub use crate::script::Permissions;

/// Why a permission could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermissionError {
    /// `{config.X}` names an option the plugin does not declare (or that has no value).
    #[error("permissions.fs root '{root}' uses {{config.{option}}}, but option '{option}' is not declared or has no value{suggestion}")]
    UnknownOption {
        /// The root as written.
        root: String,
        /// The option named.
        option: String,
        /// `, did you mean 'x'?` for the closest option, or empty.
        suggestion: String,
    },
    /// The substituted value is not text.
    #[error("permissions.fs root '{root}': option '{option}' must be a string")]
    NotText {
        /// The root as written.
        root: String,
        /// The option named.
        option: String,
    },
    /// An unclosed `{`, or an empty root.
    #[error("permissions.fs root '{root}' is malformed: {why}")]
    Malformed {
        /// The root as written.
        root: String,
        /// What is wrong.
        why: String,
    },
}

/// Substitutes `{config.X}` in `root` and makes it absolute (relative roots are taken from
/// `home`), normalised lexically (`.` and `..` folded; symlinks are the sandbox's concern).
pub fn resolve_root(
    root: &str,
    config: &Map<String, Value>,
    home: &Path,
) -> Result<PathBuf, PermissionError> {
    let mut out = String::new();
    let mut rest = root;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('}') else {
            return Err(PermissionError::Malformed {
                root: root.into(),
                why: "unclosed '{'".into(),
            });
        };
        let inner = &after[..j];
        let Some(option) = inner.strip_prefix("config.") else {
            // `{confg.folder}`: say what was meant.
            let meant = match inner.split_once('.') {
                Some((head, tail)) if crate::suggest::closest(head, ["config"]).is_some() => {
                    format!(", did you mean '{{config.{tail}}}'?")
                }
                _ => String::new(),
            };
            return Err(PermissionError::Malformed {
                root: root.into(),
                why: format!("'{{{inner}}}' is not {{config.<option>}}{meant}"),
            });
        };
        match config.get(option) {
            Some(Value::String(s)) => out.push_str(s),
            Some(_) => {
                return Err(PermissionError::NotText {
                    root: root.into(),
                    option: option.into(),
                })
            }
            None => {
                return Err(PermissionError::UnknownOption {
                    root: root.into(),
                    option: option.into(),
                    suggestion: crate::suggest::did_you_mean(option, config.keys()),
                })
            }
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    if out.trim().is_empty() {
        return Err(PermissionError::Malformed {
            root: root.into(),
            why: "the root is empty".into(),
        });
    }
    let p = Path::new(&out);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        home.join(p)
    };
    Ok(normalize(&abs))
}

/// Folds `.` and `..` without touching the file system.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Resolves a whole `permissions:` section. `home` must be absolute.
pub fn resolve(
    spec: &PermissionsSpec,
    config: &Map<String, Value>,
    home: &Path,
) -> Result<Permissions, Vec<PermissionError>> {
    let mut errors = Vec::new();
    let mut roots = |list: &[String]| {
        list.iter()
            .filter_map(|r| {
                resolve_root(r, config, home)
                    .map_err(|e| errors.push(e))
                    .ok()
            })
            .collect::<Vec<_>>()
    };
    let fs_read = roots(&spec.fs.read);
    let fs_write = roots(&spec.fs.write);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Permissions {
        hooks: spec.hooks.clone(),
        services_override: spec.services.override_.clone(),
        fs_read,
        fs_write,
        processes: spec.processes,
        tools: spec.tools.clone(),
        network: spec.network,
        env: spec.env.clone(),
        world: spec.world,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_substitute_and_resolve() {
        let mut cfg = Map::new();
        cfg.insert("root".into(), Value::from("./workspace"));
        cfg.insert("n".into(), Value::from(3));
        let home = Path::new("/h");
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("{config.root}", Ok("/h/workspace")),
            ("/abs/{config.root}/x", Ok("/abs/workspace/x")),
            ("data/../logs", Ok("/h/logs")),
            ("{config.nope}", Err("not declared")),
            ("{config.n}", Err("must be a string")),
            ("{config.root", Err("unclosed")),
            ("{env.HOME}", Err("is not {config.<option>}")),
            ("{config.rot}", Err("did you mean 'root'?")),
            ("{confg.root}", Err("did you mean '{config.root}'?")),
        ];
        for (root, want) in cases {
            match (resolve_root(root, &cfg, home), want) {
                (Ok(p), Ok(w)) => assert_eq!(p, PathBuf::from(w), "{root}"),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{root}: {e}"),
                (got, _) => panic!("{root}: {got:?}"),
            }
        }
    }
}
