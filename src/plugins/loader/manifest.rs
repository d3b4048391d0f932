//! Step one of loading a plugin: find and read its manifest (`plugin.yaml`, a VCP
//! `plugin-manifest.json`, or both), then claim its name.

use std::path::{Path, PathBuf};

use super::Loader;
use crate::plugins::locate;
use crate::plugins::manifest::{self, PluginManifest, MANIFEST_FILE};
use crate::plugins::vcp::{self, VcpManifest, VCP_FILE};
use crate::problem::Problem;

/// A plugin's manifest and the text it was read from, so that later steps can point a
/// problem at the key that caused it.
pub(super) struct ManifestSource {
    /// The manifest (converted from VCP when that is all the plugin has).
    pub manifest: PluginManifest,
    /// The file the manifest came from.
    pub file: PathBuf,
    /// That file's text.
    pub text: String,
    /// The VCP manifest, when the plugin has one (alone or beside `plugin.yaml`).
    pub vcp: Option<VcpManifest>,
    /// The VCP manifest's file.
    pub vcp_file: PathBuf,
    /// The VCP manifest's text (empty when there is none).
    pub vcp_text: String,
    is_yaml: bool,
}

impl ManifestSource {
    /// Reads the manifest of the plugin in `dir`. Problems that do not stop the plugin (a VCP
    /// manifest beside `plugin.yaml` that does not parse or names another plugin) go into
    /// `problems`; `None` means the plugin cannot load.
    pub fn read(dir: &Path, problems: &mut Vec<Problem>) -> Option<Self> {
        let yaml_file = dir.join(MANIFEST_FILE);
        let vcp_file = dir.join(VCP_FILE);
        if yaml_file.is_file() {
            let text = match std::fs::read_to_string(&yaml_file) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(Problem::new(&yaml_file, format!("cannot read: {e}")));
                    return None;
                }
            };
            let m = match manifest::parse(&text, &yaml_file) {
                Ok(m) => m,
                Err(p) => {
                    problems.push(p);
                    return None;
                }
            };
            let mut vcp_text = String::new();
            let vcp = if vcp_file.is_file() {
                match std::fs::read_to_string(&vcp_file)
                    .map_err(|e| Problem::new(&vcp_file, format!("cannot read: {e}")))
                    .and_then(|t| {
                        let v = vcp::parse(&t, &vcp_file);
                        vcp_text = t;
                        v
                    }) {
                    Ok(v) if v.name != m.name => {
                        problems.push(Problem::new(
                            &vcp_file,
                            format!(
                                "VCP manifest names plugin '{}' but {} names it '{}'",
                                v.name,
                                yaml_file.display(),
                                m.name
                            ),
                        ));
                        None
                    }
                    Ok(v) => Some(v),
                    Err(p) => {
                        problems.push(p);
                        None
                    }
                }
            } else {
                None
            };
            Some(ManifestSource {
                manifest: m,
                file: yaml_file,
                text,
                vcp,
                vcp_file,
                vcp_text,
                is_yaml: true,
            })
        } else if vcp_file.is_file() {
            let text = match std::fs::read_to_string(&vcp_file) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(Problem::new(&vcp_file, format!("cannot read: {e}")));
                    return None;
                }
            };
            match vcp::parse(&text, &vcp_file) {
                Ok(v) => Some(ManifestSource {
                    manifest: v.to_manifest(),
                    file: vcp_file.clone(),
                    text: text.clone(),
                    vcp: Some(v),
                    vcp_file,
                    vcp_text: text,
                    is_yaml: false,
                }),
                Err(p) => {
                    problems.push(p);
                    None
                }
            }
        } else {
            problems.push(
                Problem::new(
                    dir,
                    format!("not a plugin: no {MANIFEST_FILE} (or {VCP_FILE})"),
                )
                .hint("add a plugin.yaml, or move the directory out of plugins/"),
            );
            None
        }
    }

    /// A problem in the manifest, placed at `key` when the key can be found.
    pub fn key_at(&self, key: &str, msg: String) -> Problem {
        let p = Problem::new(&self.file, msg);
        let loc = if self.is_yaml {
            locate::yaml_key(&self.text, key)
        } else {
            locate::json_key(&self.text, key)
        };
        match loc {
            Some((l, c)) => p.at(l, Some(c)),
            None => p,
        }
    }
}

impl Loader<'_> {
    /// Checks the plugin's name and claims it; a second plugin with the same name is refused
    /// (naming the first one's manifest).
    pub(super) fn claim_name(&mut self, src: &ManifestSource) -> Result<String, Problem> {
        let name = src.manifest.name.clone();
        if !manifest::valid_name(&name) {
            return Err(src
                .key_at("name", format!("plugin name '{name}' is not valid"))
                .hint("a plugin name starts with a letter and holds only letters, digits, '_' or '-' (at most 64); it is the namespace of its tools"));
        }
        if let Some(first) = self.names.get(&name) {
            return Err(src.key_at(
                "name",
                format!(
                    "plugin name '{name}' is already used by {}; this plugin is not loaded",
                    first.display()
                ),
            ));
        }
        self.names.insert(name.clone(), src.file.clone());
        Ok(name)
    }
}
