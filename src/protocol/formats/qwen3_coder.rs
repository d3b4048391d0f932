//! Qwen3-Coder, Qwen3.5, Step-3.5 and Seed-OSS: `<tool_call>` `<function=NAME>`
//! `<parameter=KEY>` value `</parameter>` … `</function>` `</tool_call>` (Seed-OSS writes
//! `<seed:tool_call>`), each part on its own line or not. The `<tool_call>` tag is
//! Hermes' too, and the bare `<function=NAME>` functionary's: their readers hand a
//! content that starts with `<function=` or `<parameter=` here. Values are text
//! (`text.rs`).

use super::{text, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// Seed-OSS' tags.
const SEED_OPEN: &[u8] = b"<seed:tool_call";
const SEED_CLOSE: &[u8] = b"</seed:tool_call";
const UNCLOSED: (&str, &str) = (
    "<tool_call> has no closing </tool_call>; its calls were read up to the end of the text",
    "End every call with </function></tool_call>.",
);

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    also: &[
        RegionSyntax::new(
            Open::Tag(SEED_OPEN),
            Close::Tag(SEED_CLOSE),
            read_seed,
            "<seed:tool_call>",
            UNCLOSED,
        ),
        RegionSyntax::new(
            Open::Named(super::functionary::OPEN),
            Close::Tag(super::functionary::CLOSE),
            super::functionary::read,
            super::functionary::SHOWN_AS,
            super::functionary::UNCLOSED,
        ),
    ],
    ..FormatEntry::native(
        Format::Qwen3Coder,
        "qwen3_coder",
        &["qwen3_5", "qwen35", "seed_oss", "step3_5"],
        Reader::Region(RegionSyntax::new(
            Open::Tag(super::hermes::OPEN),
            Close::Tag(super::hermes::CLOSE),
            super::hermes::read,
            super::hermes::SHOWN_AS,
            super::hermes::UNCLOSED,
        )),
        super::Lesson::wire(
            |name, args| {
                let params =
                    super::teach::text_params(args, |k| format!("<parameter={k}>\n"), "\n</parameter>");
                format!("<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>")
            },
            "To use a tool or skill, write <tool_call>, then <function=tool_name>, one <parameter=name>value</parameter> per parameter (values as plain text; objects and lists as JSON), then </function> and </tool_call>, once per call. If no action is needed, answer in plain text.",
        ),
        super::Grammar::Native("qwen3_coder"),
    )
};

/// The reader of a tag's content holding `<function=…>` calls.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    text::read_param_calls(
        text,
        content,
        close,
        None,
        Format::Qwen3Coder,
        block,
        span,
        diags,
        out,
    );
}

/// The reader of a `<seed:tool_call>`'s content: its values are trimmed as Seed-OSS writes
/// them (`text::trim_seed_value`).
fn read_seed(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    text::read_seed_param_calls(
        text,
        content,
        close,
        Format::Qwen3Coder,
        block,
        span,
        diags,
        out,
    );
}
