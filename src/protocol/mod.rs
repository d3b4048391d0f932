//! Reading and writing tool calls: TAM, VCP, `<ACTION>` XML and JSON call forms.
//!
//! This module knows nothing of tools: it turns model output into a [`Parsed`] value
//! (prose, calls in execution order, diagnostics with places) and back into TAM text.
//! Parsing never executes anything, never panics, and takes time linear in the text.
//!
//! # Formats
//! - **TAM** (`<|[REQUEST_TOOL]|>` … `<|[END_TOOL]|>`) and **VCP**
//!   (`<<<[TOOL_REQUEST]>>>` … `<<<[END_TOOL_REQUEST]>>>`): `key:「始」value「末」` pairs,
//!   defined formally by `grammar/tam.pest` (markers, pairs, values, and the key structure
//!   chains use: base name, optional `_`, step number) and read by a resumable scanner that
//!   the tests prove equal to the grammar ([`grammar`]; [`grammar::parse_reference`] is
//!   the grammar as a whole reader, `tavern parse --reader grammar`).
//! - **VCP blocks mean what VCP means** (rule 16): `tool_name` names the tool and every
//!   other key — `command` (the plugin's sub-command), `command1`, `filePath1`, … — is an
//!   argument with its name unchanged; chain rules do not apply, so a VCP block is always
//!   one [`Call`] with [`Format::Vcp`] as its `source`. Which tool finally runs
//!   (`tool_name`, `tool_name:command`, or a numbered batch as a chain) is decided by the
//!   ToolManager, which knows the tools (`tools::vcp`; the rule is in `Call::dispatch`).
//! - **`<ACTION>` XML**, read with quick-xml. Only the first `<ACTION>` block of a text
//!   runs (seed 002 §3.2.1, §3.3 step 4); a later one is a warning ("only the first
//!   `<ACTION>` block runs") and its calls are not returned.
//! - **JSON**: MCP `tools/call` params or request, OpenAI function call(s) (alias
//!   `openai`).
//! - **Native formats of open models** (`docs/formats.md`): `hermes` (`<tool_call>`),
//!   `pythonic` call lists, `llama_json`, `mistral` (`[TOOL_CALLS]`), `granite`
//!   (`<function_call>`), `glm`, `deepseek`, `functionary`. Their JSON may be
//!   Python-dict-like; one tolerant literal reader (`formats/lit.rs`) serves them all,
//!   and evaluates nothing.
//!
//! [`Format::Auto`] finds TAM, VCP, `<ACTION>` blocks and the tagged native forms in one
//! text; a text whose first non-blank character is `{` or `[` and that is a JSON call is
//! read as JSON; shapes that could be prose (a pythonic list, a GLM name line) are taken
//! only as the whole answer, at its start, or as a whole fenced block (`formats/lead.rs`).
//!
//! # Layout
//! Each format is one file in `formats/` and one row of the format table
//! (`formats/mod.rs`: its name and aliases, how `auto` finds it, its reader); the
//! scanner, [`parse`] and [`StreamReader`] dispatch through the table, and the one list of
//! names ([`Format::NAMES`], with `FromStr`, `Display` and serde built on it) is what
//! the CLI, REST and the docs show. `types.rs` holds the shared types, raw ones
//! included, and imports nothing else of the module; no file imports one that imports
//! it back.
//!
//! # Response text
//! `response_text` is the prose outside blocks and outside `<think>` regions (rule 11a);
//! when the text has an `<ACTION>` block, only the prose before the first one (rule 17).
//! Each stretch of prose between two removed regions is trimmed; non-empty stretches
//! are joined with one `\n`. A Markdown fence line that directly wraps a block
//! (```` ``` ```` before it and after it) is removed with the block. For JSON input it
//! is the assistant message's `content`, if any.
//!
//! # Decisions where the rules are silent
//! - A start marker is recognised anywhere in a line. Rule 9 is read locally: the first
//!   thing after the marker (past blank lines and `#` comment lines on later lines) must
//!   be a pair, or the marker is prose.
//! - A block without its end marker ends at the next start marker (outside values) or
//!   at the end of the text, with a warning (rule 8).
//! - An unterminated value (rule 6) also ends before a start-marker line. A value the end
//!   of the text cuts off (no `「末」`, no end marker, nothing after it but a line break)
//!   is not recovered: the output was cut off, the block is an error and none of its
//!   calls run (issue 24). The same holds in every format: a native call whose JSON,
//!   tag or fence the text ends inside is an error, never a guess.
//! - `<think>` regions are recognised only in prose, never inside block values. A
//!   `</think>` without an opening tag is dropped from the prose with a warning.
//! - In TAM blocks `command` and `tool_name` both name the tool; in VCP blocks only
//!   `tool_name` does. In a plain block every other key is an argument (`request_id`
//!   and `comment` included). A VCP block without `tool_name` is an error (its hint says
//!   that `command` is an argument there).
//! - A TAM or VCP block that names a key twice (by rule 3; in a chain, per step) is an
//!   error naming both lines, and none of its calls run: a value is one value, so no text
//!   can add a second reading of an argument.
//!   An `on_error_N` value other than `stop`/`continue` is a warning and means `stop`;
//!   `common_on_error` sets the default for every step.
//! - Every call of one `<ACTION>` block shares its `block` index; JSON calls get one
//!   index each. XML attributes become string fields; an element with attributes and
//!   text keeps the text under `#text`. Nesting deeper than [`MAX_XML_DEPTH`] is an
//!   error.

mod args;
mod block;
mod chain;
mod error;
mod formats;
pub mod grammar;
pub mod input;
mod lex;
mod locate;
mod read;
mod render;
mod scan;
mod stream;
mod types;

pub use args::Args;
pub use block::BlockKind;
pub use error::RenderError;
pub(crate) use formats::teach::{python_literal, Arg};
pub use formats::MAX_XML_DEPTH;
pub(crate) use formats::{Lesson, Naming, ACTION_LESSON, TAM_LESSON};
pub use read::parse;
pub use render::{render_tam, try_render_tam};
pub use stream::StreamReader;
pub use types::{Call, Diagnostic, Format, OnError, Parsed, Severity, Span};

/// True when the first non-blank character opens a JSON object or array (for readers of
/// request bodies beside the format table).
// `input.rs` (reading request bodies) uses it at this path.
pub(crate) use formats::looks_like_json;

/// Splits a chain step number off a key: `content2` → (`content`, `Some(2)`), `command_10`
/// → (`command`, `Some(10)`); `None` when the key does not end in ASCII digits, and
/// `Some((base, None))` when the number does not fit a `u32`. Used by the ToolManager to
/// run VCP batches (rule 16) with the same numbering as TAM chains (rule 13).
pub fn split_step_key(key: &str) -> Option<(&str, Option<u32>)> {
    chain::split_step(key)
}
