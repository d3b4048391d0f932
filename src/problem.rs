//! `Problem`: a load-time failure with its file and place (plugins, workflows, config).

use std::fmt;
use std::path::PathBuf;

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

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
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
