//! `ToolError`: one variant per way a call can fail, each renderable as an Observation.

use serde::Serialize;

/// Why a tool call did not produce a value.
///
/// `Display` is the sentence a person or model reads; [`ToolError::code`] is the stable
/// machine name printed by `tavern call`; [`ToolError::observation`] is the line fed back to a
/// model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolError {
    /// No tool has this id (or any accepted spelling of it).
    #[error("Unknown tool '{id}'{}", did_you_mean(suggestion))]
    UnknownTool {
        /// The id as written.
        id: String,
        /// The closest registered id, if one is close.
        suggestion: Option<String>,
    },
    /// The arguments do not fit the tool's schema (after type coercion).
    #[error("Invalid parameters for {tool}: {}", problems.join("; "))]
    InvalidParameters {
        /// Canonical tool id.
        tool: String,
        /// One sentence per problem, each naming the parameter.
        problems: Vec<String>,
    },
    /// The implementation ran and reported a failure.
    #[error("Tool {tool} failed: {message}")]
    Failed {
        /// Canonical tool id.
        tool: String,
        /// What the implementation said.
        message: String,
    },
    /// A script failed its call with a code of its own (`error({code = "bad_roll", message =
    /// "too high"})` in Lua, `throw #{code: …, message: …}` in Rhai).
    #[error("Tool {tool} failed: {message}")]
    Raised {
        /// Canonical tool id.
        tool: String,
        /// The script's code, kept as the call's error code.
        code: String,
        /// The script's error as text (`main.lua:3: bad_roll: too high`).
        message: String,
    },
    /// The call ran past its time limit and was stopped.
    #[error("Tool {tool} timed out after {after_ms} ms{}", stopped_at(.at))]
    Timeout {
        /// Canonical tool id.
        tool: String,
        /// The limit that was passed.
        after_ms: u64,
        /// Where a script was stopped (`plugins/Dice/main.lua:4`), when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        at: Option<String>,
    },
    /// A sandbox limit (instructions, memory, output size, depth …) was hit.
    #[error("Tool {tool} exceeded the {limit} limit: {message}")]
    LimitExceeded {
        /// Canonical tool id.
        tool: String,
        /// Which limit (`instructions`, `memory`, `output`, `depth`, `string_size` …).
        limit: String,
        /// Details.
        message: String,
    },
    /// The tool (or the plugin behind it) lacks a declared permission.
    #[error("Tool {tool} is not permitted to use {permission}: declare it under `permissions` in plugin.yaml")]
    PermissionDenied {
        /// Canonical tool id.
        tool: String,
        /// The missing permission, as it would be written in plugin.yaml.
        permission: String,
    },
    /// The call was cancelled by its caller.
    #[error("Tool {tool} was cancelled")]
    Cancelled {
        /// Canonical tool id.
        tool: String,
    },
    /// The call was not run because an earlier step of its chain failed (`on_error: stop`).
    #[error("Tool {tool} was skipped: {reason}")]
    Skipped {
        /// The tool id as written.
        tool: String,
        /// Why (names the failing step).
        reason: String,
    },
    /// Tools calling tools went deeper than the engine allows.
    #[error("Tool {tool} was not run: tool calls nested deeper than {limit} levels")]
    RecursionLimit {
        /// Canonical tool id.
        tool: String,
        /// The nesting limit.
        limit: u32,
    },
    /// The handler panicked. The panic was contained: the engine and the caller go on.
    #[error("Tool {tool} failed: it panicked ({message}); this is a bug in the tool")]
    Panicked {
        /// Canonical tool id.
        tool: String,
        /// The panic message, if it was a string.
        message: String,
    },
    /// The tool's caller policy does not allow this caller (see `CallerPolicy`).
    #[error("Tool {tool} may not be called by {caller}: its caller policy allows {allowed}")]
    NotPermitted {
        /// Canonical tool id.
        tool: String,
        /// Who asked (`model`, `plugin:<name>`, …).
        caller: String,
        /// The callers the policy allows (`host`, `host, plugin`, …).
        allowed: String,
    },
    /// The call was refused before running because its text had warnings and the call
    /// options asked to refuse them (`CallOptions::refuse_on_warnings`).
    #[error("Tool {tool} was not run: the text it came from has warnings ({warnings})")]
    RefusedWarnings {
        /// The tool id as written.
        tool: String,
        /// The warnings, joined with `; `.
        warnings: String,
    },
    /// An agent called a tool that exists but is not in its profile's inventory.
    #[error("Tool '{tool}' is not in the inventory of agent '{agent}' (call only the tools and skills in your manual){}", did_you_mean(suggestion))]
    NotInInventory {
        /// The tool id as written.
        tool: String,
        /// The agent's id.
        agent: String,
        /// The closest inventory id, if one is close.
        suggestion: Option<String>,
    },
    /// The tool exists on disk but failed to load (its plugin, file or script is broken).
    #[error("Tool {tool} is unavailable: failed to load: {reason}")]
    Unavailable {
        /// The id as written.
        tool: String,
        /// The load problem, `file:line:column: message`.
        reason: String,
    },
    /// A hook handler refused the call (a `before` point returned `false` or `{veto = …}`,
    /// or failed), or hooks nested past their limit.
    #[error("Tool {tool} was vetoed: {reason}")]
    Vetoed {
        /// Canonical tool id (or `workflow:<id>` for a workflow run).
        tool: String,
        /// Why, as the handler gave it (names the script when a handler failed).
        reason: String,
    },
    /// A definition could not be registered (bad id, duplicate, bad schema).
    #[error("Cannot register tool '{id}': {message}")]
    Registration {
        /// The id as given.
        id: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

fn stopped_at(at: &Option<String>) -> String {
    at.as_ref()
        .map(|a| format!(" (stopped at {a})"))
        .unwrap_or_default()
}

fn did_you_mean(s: &Option<String>) -> String {
    match s {
        Some(s) => format!(", did you mean '{s}'?"),
        None => String::new(),
    }
}

impl ToolError {
    /// Stable machine-readable code (`unknown_tool`, `invalid_parameters`, …).
    pub fn code(&self) -> &str {
        match self {
            ToolError::Raised { code, .. } => code,
            other => other.variant_code(),
        }
    }

    /// The code of the variant, `'static`: [`ToolError::code`] for every error but a
    /// script's own (`Raised`), which gives `execution_failed` here.
    pub fn variant_code(&self) -> &'static str {
        match self {
            ToolError::Raised { .. } => "execution_failed",
            ToolError::UnknownTool { .. } => "unknown_tool",
            ToolError::InvalidParameters { .. } => "invalid_parameters",
            ToolError::Failed { .. } => "execution_failed",
            ToolError::Timeout { .. } => "timeout",
            ToolError::LimitExceeded { .. } => "limit_exceeded",
            ToolError::PermissionDenied { .. } => "permission_denied",
            ToolError::Cancelled { .. } => "cancelled",
            ToolError::Skipped { .. } => "skipped",
            ToolError::RecursionLimit { .. } => "recursion_limit",
            ToolError::NotInInventory { .. } => "not_in_inventory",
            ToolError::Vetoed { .. } => "vetoed",
            ToolError::Registration { .. } => "registration",
            ToolError::Panicked { .. } => "panicked",
            ToolError::NotPermitted { .. } => "not_permitted",
            ToolError::RefusedWarnings { .. } => "refused_warnings",
            ToolError::Unavailable { .. } => "tool_unavailable",
        }
    }

    /// The line fed back to a model, e.g.
    /// `Observation: Error - Invalid parameters for GetPlayerInfo: unknown parameter 'playerId', did you mean 'player_id'?`
    /// Framed like every Observation ([`frame_observation`](super::frame_observation)):
    /// a message of several lines cannot pass for another Observation.
    pub fn observation(&self) -> String {
        super::listing::frame_observation(format!("Observation: Error - {self}"))
    }

    /// Shorthand for [`ToolError::Failed`].
    pub fn failed(tool: impl AsRef<str>, message: impl Into<String>) -> Self {
        ToolError::Failed {
            tool: tool.as_ref().to_string(),
            message: message.into(),
        }
    }
}
