//! Gemma 3: a fenced `tool_code` block holding pythonic calls.

use super::{pythonic, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::Gemma3,
    "gemma3",
    &["tool_code"],
    Reader::Region(RegionSyntax::new(
        Open::Exact(b"```tool_code"),
        Close::Exact(b"\n```"),
        read,
        "```tool_code",
        (
            "```tool_code has no closing tag; its complete calls were read up to the end of the text",
            "Close the calls as the format does.",
        ),
    )),
    super::Lesson::wire(
        |name, args| format!("```tool_code\n{}\n```", super::teach::python_call(name, args)),
        "To use tools or skills, write a ```tool_code fenced block holding the Python calls, tool_name(parameter=value, …), one a line, with Python literals. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("gemma3"),
);

/// The region's reader.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    pythonic::read_region(
        text,
        content,
        close,
        Format::Gemma3,
        block,
        span,
        diags,
        out,
    );
}
