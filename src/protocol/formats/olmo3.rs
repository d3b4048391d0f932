//! OLMo 3: `<function_calls>forge_smelt(ore='iron')</function_calls>`, one pythonic call a line.

use super::{pythonic, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::Olmo3,
    "olmo3",
    &["olmo"],
    Reader::Region(RegionSyntax::new(
        Open::Tag(b"<function_calls"),
        Close::Tag(b"</function_calls"),
        read,
        "<function_calls>",
        (
            "<function_calls> has no closing tag; its complete calls were read up to the end of the text",
            "Close the calls as the format does.",
        ),
    )),
    super::Lesson::wire(
        |name, args| format!("<function_calls>\n{}\n</function_calls>", super::teach::python_call(name, args)),
        "To use tools or skills, write <function_calls>, one Python call tool_name(parameter=value, …) a line, and </function_calls>. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("olmo3"),
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
    pythonic::read_region(text, content, close, Format::Olmo3, block, span, diags, out);
}
