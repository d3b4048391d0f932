//! Errors of the protocol module. Parsing itself never fails (problems are
//! [`Diagnostic`](super::Diagnostic)s); only rendering can refuse a call.

/// Why a call cannot be written as TAM text that reads back the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The tool id is empty or has spaces at its ends (tool ids are trimmed when read).
    #[error("call {call}: tool id {tool:?} is empty or has surrounding whitespace, which TAM trims")]
    ToolId {
        /// Index of the call in the input slice.
        call: usize,
        /// The tool id.
        tool: String,
    },
    /// The key is empty or has a character outside letters, digits, `_`, `-`, `.`.
    #[error("call {call}: key {key:?} is not a TAM key (letters, digits, '_', '-', '.')")]
    Key {
        /// Index of the call in the input slice.
        call: usize,
        /// The key.
        key: String,
    },
    /// The key would be read as something else (`command`, `tool_name`, `on_error_N`, a
    /// numbered command in a plain block).
    #[error("call {call}: key {key:?} would be read as {reads_as}")]
    ReservedKey {
        /// Index of the call in the input slice.
        call: usize,
        /// The key.
        key: String,
        /// What TAM would read it as.
        reads_as: &'static str,
    },
    /// The value holds text that TAM cannot carry (see [`render_tam`](super::render_tam)).
    #[error("call {call}: value of {key:?} cannot be carried by TAM: {why}")]
    Value {
        /// Index of the call in the input slice.
        call: usize,
        /// The key (`command` for the tool id).
        key: String,
        /// What in the value is the problem.
        why: &'static str,
    },
    /// A chain's steps are not strictly increasing.
    #[error("call {call}: chain step {step} does not follow the previous step")]
    StepOrder {
        /// Index of the call in the input slice.
        call: usize,
        /// The step number.
        step: u32,
    },
    /// An argument value is not a string (TAM values are strings).
    #[error("call {call}: value of {key:?} is not a string; TAM carries strings only")]
    NotString {
        /// Index of the call in the input slice.
        call: usize,
        /// The key.
        key: String,
    },
}
