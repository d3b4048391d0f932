//! `ScriptError`: one variant per way a script call can fail.

use crate::tools::ToolError;

/// Why a script (plugin function, registered handler or snippet) did not produce a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The script text does not parse.
    #[error("syntax error in {file}:{line}: {message}")]
    Syntax {
        /// Script file (relative to the plugin directory) or chunk name.
        file: String,
        /// 1-based line (0 when unknown).
        line: u32,
        /// 1-based column (0 when the parser does not say; Lua's does not).
        column: u32,
        /// The parser's message.
        message: String,
    },
    /// The script raised an error (or a runtime fault such as indexing nil).
    #[error("{}", runtime_text(.message, .file, .line))]
    Runtime {
        /// The error message (bounded in size).
        message: String,
        /// Script file, when known.
        file: Option<String>,
        /// Line, when known.
        line: Option<u32>,
    },
    /// The script raised a table (Lua) or threw a map (Rhai) with a `code` and a `message`
    /// (`error({code = "bad_roll", message = "too high"})`): the caller sees that code.
    #[error("{}", runtime_text(&format!("{code}: {message}"), .file, .line))]
    Raised {
        /// The script's code (a word: letters, digits, `_`, `-`, `.`; see `is_raised_code`).
        code: String,
        /// The script's message (bounded in size).
        message: String,
        /// Script file, when known.
        file: Option<String>,
        /// Line, when known.
        line: Option<u32>,
    },
    /// The instruction / operation budget ran out.
    #[error("instruction limit of {limit} exceeded{}", stopped_at(.at))]
    InstructionLimit {
        /// The budget.
        limit: u64,
        /// Where the script was stopped (`main.lua:6`), when known.
        at: Option<String>,
    },
    /// The script's memory limit was reached.
    #[error("memory limit of {limit} bytes exceeded")]
    MemoryLimit {
        /// The limit.
        limit: usize,
    },
    /// The wall-clock budget ran out.
    #[error("timed out after {after_ms} ms{}", stopped_at(.at))]
    Timeout {
        /// The budget.
        after_ms: u64,
        /// Where the script was stopped (`plugins/Dice/main.lua:6`), when known.
        at: Option<String>,
    },
    /// The caller cancelled the call while the script ran.
    #[error("cancelled by the caller")]
    Cancelled,
    /// The script used an API that its plugin did not declare.
    #[error("permission '{permission}' not declared in plugin.yaml")]
    PermissionDenied {
        /// The permission as written in plugin.yaml (`fs.write`, `processes`, …).
        permission: String,
    },
    /// A value or structure passed a size/depth limit (string size, value depth, stack
    /// depth, collection size, output size …).
    #[error("{what} limit exceeded: {message}")]
    ValueLimit {
        /// Which limit (`value_depth`, `value_bytes`, `string_size`, `call_depth`, `cycle` …).
        what: String,
        /// Details (where in the value, how big).
        message: String,
    },
    /// The function to call does not exist in the plugin's scripts.
    #[error("no function '{function}' in the plugin's scripts")]
    UnknownFunction {
        /// The name asked for.
        function: String,
    },
    /// A value could not be converted between the script and JSON.
    #[error("cannot convert value at {path}: {message}")]
    Conversion {
        /// JSON-pointer-like path inside the value (`$`, `$.items[3]`).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A path given to `api.fs` is refused (escape, NUL, symlink out of the root).
    #[error("path '{path}' refused: {reason}")]
    PathRefused {
        /// The path as the script wrote it.
        path: String,
        /// Why.
        reason: String,
    },
    /// A file operation failed (not found, not a directory …).
    #[error("{op} '{path}': {message}")]
    Io {
        /// `read`, `write`, `list` …
        op: String,
        /// The path as the script wrote it.
        path: String,
        /// The OS error.
        message: String,
    },
    /// A tool called from the script (`api.tools.call`) failed; kept typed so the caller
    /// sees the original error.
    #[error("{0}")]
    Tool(ToolError),
    /// The plugin's state is in use by another thread that is waiting on this one.
    #[error("plugin '{plugin}' is busy: {message}")]
    Busy {
        /// Plugin name.
        plugin: String,
        /// Details.
        message: String,
    },
    /// A bug in the engine (a caught panic, a broken invariant). Logged.
    #[error("internal error: {0}")]
    Internal(String),
}

fn stopped_at(at: &Option<String>) -> String {
    at.as_ref()
        .map(|a| format!(" (stopped at {a})"))
        .unwrap_or_default()
}

fn runtime_text(message: &str, file: &Option<String>, line: &Option<u32>) -> String {
    match (file, line) {
        (Some(f), Some(l)) => format!("{f}:{l}: {message}"),
        (Some(f), None) => format!("{f}: {message}"),
        _ => message.to_string(),
    }
}

impl ScriptError {
    /// A runtime error without a place.
    pub fn runtime(message: impl Into<String>) -> Self {
        ScriptError::Runtime {
            message: message.into(),
            file: None,
            line: None,
        }
    }

    /// The error with its file named relative to the plugin directory again when messages
    /// named it under `shown_dir` (`plugins/Dice/main.lua` → `main.lua`).
    pub(crate) fn file_within(mut self, shown_dir: Option<&str>) -> Self {
        let Some(dir) = shown_dir.filter(|d| !d.is_empty()) else {
            return self;
        };
        let strip = |f: &mut String| {
            if let Some(rest) = f
                .strip_prefix(dir.trim_end_matches('/'))
                .and_then(|r| r.strip_prefix('/'))
            {
                *f = rest.to_string();
            }
        };
        match &mut self {
            ScriptError::Syntax { file, .. } => strip(file),
            ScriptError::Runtime { file: Some(f), .. }
            | ScriptError::Raised { file: Some(f), .. } => strip(f),
            _ => {}
        }
        self
    }

    /// A runtime error without a place gets `file`/`line` (where the script called the
    /// function that failed); anything else stays as it is.
    pub(crate) fn placed(self, file: Option<String>, line: Option<u32>) -> Self {
        match self {
            ScriptError::Runtime {
                message,
                file: None,
                line: None,
            } if line.is_some() => ScriptError::Runtime {
                message,
                file,
                line,
            },
            ScriptError::Raised {
                code,
                message,
                file: None,
                line: None,
            } if line.is_some() => ScriptError::Raised {
                code,
                message,
                file,
                line,
            },
            other => other,
        }
    }

    /// Stable short name of the variant (for tests and logs).
    pub fn kind(&self) -> &'static str {
        match self {
            ScriptError::Syntax { .. } => "syntax",
            ScriptError::Runtime { .. } => "runtime",
            ScriptError::Raised { .. } => "raised",
            ScriptError::InstructionLimit { .. } => "instruction_limit",
            ScriptError::MemoryLimit { .. } => "memory_limit",
            ScriptError::Timeout { .. } => "timeout",
            ScriptError::Cancelled => "cancelled",
            ScriptError::PermissionDenied { .. } => "permission_denied",
            ScriptError::ValueLimit { .. } => "value_limit",
            ScriptError::UnknownFunction { .. } => "unknown_function",
            ScriptError::Conversion { .. } => "conversion",
            ScriptError::PathRefused { .. } => "path_refused",
            ScriptError::Io { .. } => "io",
            ScriptError::Tool(_) => "tool",
            ScriptError::Busy { .. } => "busy",
            ScriptError::Internal(_) => "internal",
        }
    }

    /// The code a script reads in a caught error's `code` (`e.code`), the same code a caller
    /// sees when the script lets the error through (`permission_denied`, `timeout`,
    /// `limit_exceeded`, a nested call's own code, a raised table's or map's own `code`, else
    /// `execution_failed`).
    pub fn code(&self) -> &str {
        match self {
            ScriptError::InstructionLimit { .. }
            | ScriptError::MemoryLimit { .. }
            | ScriptError::ValueLimit { .. } => "limit_exceeded",
            ScriptError::Timeout { .. } => "timeout",
            ScriptError::Cancelled => "cancelled",
            ScriptError::PermissionDenied { .. } => "permission_denied",
            ScriptError::Tool(e) => e.code(),
            ScriptError::Raised { code, .. } => code,
            _ => "execution_failed",
        }
    }

    /// The error as the value a script catches: `{code, message}` (see `nested_error.rs`).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::json!({"code": self.code(), "message": self.to_string()})
    }

    /// The tool error a caller of tool `tool_id` sees.
    pub fn into_tool_error(self, tool_id: &str) -> ToolError {
        let tool = tool_id.to_string();
        match self {
            ScriptError::InstructionLimit { limit, at } => ToolError::LimitExceeded {
                tool,
                limit: "instructions".into(),
                message: format!("more than {limit} instructions{}", stopped_at(&at)),
            },
            ScriptError::MemoryLimit { limit } => ToolError::LimitExceeded {
                tool,
                limit: "memory".into(),
                message: format!("more than {limit} bytes"),
            },
            ScriptError::ValueLimit { what, message } => ToolError::LimitExceeded {
                tool,
                limit: what,
                message,
            },
            ScriptError::Timeout { after_ms, at } => ToolError::Timeout { tool, after_ms, at },
            ScriptError::Cancelled => ToolError::Cancelled { tool },
            ScriptError::PermissionDenied { permission } => {
                ToolError::PermissionDenied { tool, permission }
            }
            ScriptError::Tool(e) => e,
            ScriptError::Raised { ref code, .. } => ToolError::Raised {
                tool,
                code: code.clone(),
                message: self.to_string(),
            },
            other => ToolError::Failed {
                tool,
                message: other.to_string(),
            },
        }
    }
}

/// Whether `code`, the `code` of a table or map a script raised, is kept as the caller's error
/// code: a word of 1 to 64 ASCII letters, digits, `_`, `-` or `.` (anything else leaves the
/// error `execution_failed`, its content in the message).
pub(crate) fn is_raised_code(code: &str) -> bool {
    (1..=64).contains(&code.len())
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Cuts `s` to at most `max` bytes on a char boundary, marking the cut.
pub(crate) fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &s[..end], s.len() - end)
}
