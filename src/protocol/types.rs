//! The one result type every call format parses into, and the raw types readers share.
//!
//! These types are the contract between `protocol` and everything above it: the
//! ToolManager consumes [`Call`]s, the CLI prints [`Parsed`], the agent turns
//! [`Diagnostic`]s into Observations. They know nothing of tools. `RawDiag` and
//! `RawPair` are what every reader builds before places are known. This file is the
//! leaf of the module: it imports nothing else of `protocol` but `args.rs` (itself a leaf),
//! so every reader can use it.

use crate::protocol::args::Args;
use serde::{Deserialize, Serialize};

/// Which call formats a reader looks for.
///
/// The variants only name the formats: each one's name, how [`Format::Auto`] finds it and
/// its reader are a row of the format table (`formats/mod.rs`), which also gives `Format`
/// its `FromStr`, `Display` and serde (by name) impls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// TAM, VCP and `<ACTION>` blocks in the same text; a text that is one JSON call
    /// (MCP `tools/call` params or OpenAI function calls) is read as JSON.
    #[default]
    Auto,
    /// `<|[REQUEST_TOOL]|>` … `<|[END_TOOL]|>` blocks only.
    Tam,
    /// `<ACTION>` … `</ACTION>` XML only.
    Action,
    /// VCP `<<<[TOOL_REQUEST]>>>` … `<<<[END_TOOL_REQUEST]>>>` blocks only.
    Vcp,
    /// One JSON document: MCP `tools/call` params or OpenAI function call(s)
    /// (`{"tool_calls": …}`, a bare list), also the alias `openai`.
    Json,
    /// Hermes / Qwen / Nous `<tool_call>{…}</tool_call>` tags.
    Hermes,
    /// A pythonic call list `[tool(a=1), other(b='x')]`, at the start of the answer or
    /// as a whole fenced block.
    Pythonic,
    /// Llama 3.1 JSON `{"name": …, "parameters": …}`, after `<|python_tag|>` or at the
    /// start, several joined by `;`.
    LlamaJson,
    /// Mistral `[TOOL_CALLS] [{…}]` and `[TOOL_CALLS]name[ARGS]{…}`.
    Mistral,
    /// IBM Granite `<function_call> {…}`, no closing tag.
    Granite,
    /// GLM-4: the tool name on a line, then its JSON arguments, as the whole answer.
    Glm,
    /// DeepSeek V3 `<｜tool▁calls▁begin｜>` … `<｜tool▁calls▁end｜>`.
    DeepSeek,
    /// functionary `>>>name\n{…}` and `<function=name>{…}</function>`.
    Functionary,
    /// Qwen3-Coder / Qwen3.5 / Seed-OSS `<function=name><parameter=key>value</parameter>`.
    Qwen3Coder,
    /// GLM-4.5 and later: `<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>`.
    Glm45,
    /// Kimi K2 `<|tool_calls_section_begin|>` … `<|tool_calls_section_end|>`.
    KimiK2,
    /// gpt-oss (OpenAI harmony) `<|channel|>commentary to=functions.name …<|call|>`.
    Harmony,
    /// MiniMax-M2 `<minimax:tool_call><invoke name=…>`.
    MinimaxM2,
    /// Step-3 `<｜tool_calls_begin｜>` with `<steptml:invoke>` elements.
    Step3,
    /// Gemma 4 `<|tool_call>call:name{…}<tool_call|>`.
    Gemma4,
    /// Gemma 3: a fenced `tool_code` block holding a pythonic call.
    Gemma3,
    /// LFM2 `<|tool_call_start|>[…]<|tool_call_end|>` (pythonic inside).
    Lfm2,
    /// OLMo 3 `<function_calls>…</function_calls>` (pythonic calls, one a line).
    Olmo3,
    /// Granite 3.x `<|tool_call|>[{…}]`.
    Granite3,
    /// Jamba, Hunyuan, Apriel `<tool_calls>[{…}]</tool_calls>`.
    ToolCalls,
    /// InternLM2 `<|action_start|><|plugin|>{…}<|action_end|>`.
    Internlm2,
    /// LongCat `<longcat_tool_call>{…}</longcat_tool_call>`.
    Longcat,
    /// Phi-4-mini, FireFunction v2 `functools[{…}]`.
    Functools,
    /// GigaChat 3 `function call<|role_sep|>{…}`.
    Gigachat3,
    /// Command R / R+ `Action:` and a JSON fence of `{"tool_name", "parameters"}`.
    CommandR,
    /// Apertus `<|tools_prefix|>[{"name": {…}}]<|tools_suffix|>`.
    Apertus,
}

/// How bad a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something could not be read; nothing from the affected block runs.
    Error,
    /// Something was recovered; the calls still run.
    Warning,
}

/// A problem found while reading, with its place and a way to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong, in one sentence.
    pub message: String,
    /// 1-based line in the input.
    pub line: u32,
    /// 1-based column in the input, counted in characters.
    pub column: u32,
    /// How to fix it, when there is something useful to say.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hint: Option<String>,
}

impl Diagnostic {
    /// Renders the diagnostic as one line a model can act on.
    pub fn observation(&self) -> String {
        let kind = match self.severity {
            Severity::Error => "Error",
            Severity::Warning => "Warning",
        };
        match &self.hint {
            Some(h) => format!(
                "Observation: {kind} - {} (line {}, column {}). {h}",
                self.message, self.line, self.column
            ),
            None => format!(
                "Observation: {kind} - {} (line {}, column {})",
                self.message, self.line, self.column
            ),
        }
    }
}

/// A byte range in the input with the 1-based line/column of its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
    /// 1-based line of `start`.
    pub line: u32,
    /// 1-based column (characters) of `start`.
    pub column: u32,
}

/// What a failing step of a chain does to the steps after it (`on_error_N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Skip the rest of the chain (the default).
    #[default]
    Stop,
    /// Run the next steps anyway.
    Continue,
}

/// One tool call, in execution order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The tool id exactly as written (trimmed), e.g. `FileOperator.WriteFile`.
    pub tool: String,
    /// Arguments with keys as written (chain suffix removed) and values as parsed:
    /// strings from TAM/VCP, strings/objects/arrays from XML, any JSON from JSON calls.
    /// A map to read and change; a JSON object is kept as written until first read
    /// ([`Args`]).
    pub args: Args,
    /// Where the call was written (the whole block for TAM/VCP/XML steps).
    pub span: Span,
    /// Index of the block the call came from, in reading order; steps of one chain share it.
    pub block: usize,
    /// The chain step number (`command3` → 3), `None` for a plain call.
    pub step: Option<u32>,
    /// What a failure of this call does to the later steps of the same block.
    pub on_error: OnError,
    /// The format the call was read from (its row of the format table:
    /// [`Format::Tam`], [`Format::Hermes`], …); [`Format::Auto`] for calls built by code.
    /// The ToolManager matches `<ACTION>` parameter names exactly (seed 002 §5.5) and the
    /// others case- and underscore-insensitively (rule 3).
    pub source: Format,
    /// How the tool was chosen when that took more than reading the text: set by the
    /// ToolManager's VCP dispatch (`tool_name`, `tool_name+command` or `tool_name+commandN`,
    /// see `tools::vcp`); `None` for calls not dispatched that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<String>,
    /// The call's id: as the input gave it (OpenAI `tool_calls[].id`, Anthropic
    /// `tool_use.id`, Kimi's `functions.NAME:N`, Mistral's `[CALL_ID]`), else `call_N`
    /// for the N-th call of the answer (0-based), given by [`parse`](super::parse) and
    /// the [`StreamReader`](super::StreamReader). Results carry it as `call_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// For calls whose values were written as text (the XML-parameter and `arg_key`
    /// forms): each such value exactly as written. [`Call::args`] holds them read
    /// without a schema (a JSON literal as its value, anything else a string); the
    /// ToolManager converts these texts by the tool's schema instead, so a string
    /// parameter keeps the text as written.
    #[serde(skip)]
    pub texts: Option<Args>,
}

impl Call {
    /// A plain call with no place (for calls built by code rather than parsed).
    pub fn new(tool: impl Into<String>, args: impl Into<Args>) -> Self {
        Call {
            tool: tool.into(),
            args: args.into(),
            span: Span::default(),
            block: 0,
            step: None,
            on_error: OnError::Stop,
            source: Format::Auto,
            dispatch: None,
            id: None,
            texts: None,
        }
    }

    /// The arguments a tool with a schema is given: the values as written where they
    /// were written as text ([`Call::texts`]), for the schema to convert; else
    /// [`Call::args`].
    pub fn args_for_schema(&self) -> serde_json::Value {
        // One copy of the arguments: the texts alone while the arguments are the ones
        // read from them (same keys), else the map with the texts over it.
        if let Some(t) = &self.texts {
            if self.args.texts().is_some() {
                return serde_json::Value::Object(t.to_map());
            }
            let mut m = self.args.to_map();
            for (k, text) in t.iter() {
                m.insert(k.clone(), text.clone());
            }
            return serde_json::Value::Object(m);
        }
        serde_json::Value::Object(self.args.to_map())
    }
}

/// Gives every call from index `from` on that has no id the id `call_N`, N its index
/// in the answer.
pub(crate) fn give_ids(calls: &mut [Call], from: usize) {
    for (i, c) in calls.iter_mut().enumerate().skip(from) {
        if c.id.is_none() {
            c.id = Some(call_id(i));
        }
    }
}

/// `call_N`, written without the formatting machinery (it runs once per call read).
fn call_id(n: usize) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut id = String::with_capacity(5 + digits.len() - at);
    id.push_str("call_");
    // ASCII digits: never an error, and checking a few ASCII bytes is one pass with no
    // per-character encoding.
    id.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
    id
}

/// Everything read from one model output.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Parsed {
    /// Prose outside blocks and outside reasoning regions.
    pub response_text: String,
    /// Calls in execution order (chains sorted by step number).
    pub calls: Vec<Call>,
    /// Every problem found, errors and recoveries, in input order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Parsed {
    /// True when any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// A diagnostic before its line and column are known.
#[derive(Debug, Clone)]
pub(crate) struct RawDiag {
    pub offset: usize,
    pub severity: Severity,
    pub message: String,
    pub hint: Option<String>,
}

impl RawDiag {
    pub(crate) fn warning(offset: usize, message: String, hint: String) -> Self {
        RawDiag {
            offset,
            severity: Severity::Warning,
            message,
            hint: Some(hint),
        }
    }
    pub(crate) fn error(offset: usize, message: String, hint: String) -> Self {
        RawDiag {
            offset,
            severity: Severity::Error,
            message,
            hint: Some(hint),
        }
    }
}

/// One `key:「始」value「末」` pair as byte ranges into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPair {
    /// The key's byte range.
    pub key: (usize, usize),
    /// The value's byte range (without `「始」`/`「末」`).
    pub value: (usize, usize),
    /// True when the value had no proper closing `「末」` and was cut (rule 6).
    pub recovered: bool,
}

#[cfg(test)]
mod tests {
    #[test]
    fn call_ids_are_call_and_the_index() {
        for n in [0, 7, 10, 99, 1234, usize::MAX] {
            assert_eq!(super::call_id(n), format!("call_{n}"));
        }
    }
}
