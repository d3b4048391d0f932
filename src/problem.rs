//! `Problem`: a load-time failure with its file and place (plugins, workflows, config).
//!
//! Loaders build problems with the paths they read; whoever collects them for people and
//! models ([`Problem::relative_to`]: the engine's build, `plugin check`, the reasons of
//! unavailable tools and workflows) names files relative to the home, so no absolute path
//! reaches a model and every problem uses one path style.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Something wrong in a file the engine loads, reported with where it is and how to fix it.
/// Loading goes on past a problem: one broken plugin or workflow never stops the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file at fault.
    pub file: PathBuf,
    /// 1-based line, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Problem {
    /// A problem with a file and message only.
    pub fn new(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Problem {
            file: file.into(),
            line: None,
            column: None,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds a line (and column) to the problem.
    pub fn at(mut self, line: u32, column: Option<u32>) -> Self {
        self.line = Some(line);
        self.column = column;
        self
    }

    /// The problem with its file, and any path inside the home its message or hint
    /// mentions, relative to `home` (`plugins/Dice/plugin.yaml`). Paths outside the home
    /// stay as they are.
    pub fn relative_to(mut self, home: &Path) -> Self {
        let bases = home_forms(home);
        for base in &bases {
            if let Ok(rel) = self.file.strip_prefix(base) {
                if !rel.as_os_str().is_empty() {
                    self.file = rel.to_path_buf();
                }
                break;
            }
        }
        self.message = strip_home(&self.message, &bases);
        self.hint = self.hint.map(|h| strip_home(&h, &bases));
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The spellings of `home` a path may start with: as given and canonical (the loaders
/// canonicalize some paths), `./` dropped.
fn home_forms(home: &Path) -> Vec<PathBuf> {
    let mut out = vec![home.to_path_buf()];
    if let Ok(c) = home.canonicalize() {
        if c != home {
            out.push(c);
        }
    }
    if home == Path::new(".") || home.as_os_str().is_empty() {
        // `./plugins/x` and `plugins/x`: already relative.
        out.push(PathBuf::from("."));
    }
    out
}

/// `text` with every `<home>/` of an absolute home removed (so `declared in
/// /srv/home/plugins/A/plugin.yaml` reads `declared in plugins/A/plugin.yaml`).
fn strip_home(text: &str, bases: &[PathBuf]) -> String {
    let mut out = text.to_string();
    for b in bases.iter().filter(|b| b.is_absolute()) {
        let mut prefix = b.to_string_lossy().into_owned();
        if !prefix.ends_with(std::path::MAIN_SEPARATOR) {
            prefix.push(std::path::MAIN_SEPARATOR);
        }
        if out.contains(&prefix) {
            out = out.replace(&prefix, "");
        }
    }
    out
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " ({h})")?;
        }
        Ok(())
    }
}
