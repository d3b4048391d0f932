//! LFM2: `<|tool_call_start|>[forge_smelt(ore='iron')]<|tool_call_end|>`, a pythonic list
//! inside; or, when its system prompt asks for JSON calls, JSON call objects
//! (`[{"name": …, "arguments": {…}}]`, or one object) in the same tags.

use super::{lit, pythonic, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::Lfm2,
    "lfm2",
    &["lfm", "liquid"],
    Reader::Region(RegionSyntax::new(
        Open::Exact(b"<|tool_call_start|>"),
        Close::Exact(b"<|tool_call_end|>"),
        read,
        "<|tool_call_start|>",
        (
            "<|tool_call_start|> has no <|tool_call_end|>; its complete calls were read up to the end of the text",
            "End the calls with <|tool_call_end|>.",
        ),
    )),
    super::Lesson::wire(
        |name, args| format!("<|tool_call_start|>[{}]<|tool_call_end|>", super::teach::python_call(name, args)),
        "To use tools or skills, write <|tool_call_start|>, a Python list of calls [tool_name(parameter=value, …), …] and <|tool_call_end|>. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("lfm2"),
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
    if json_inside(text.as_bytes(), content, close) {
        lit::read_json_calls(
            text,
            content,
            close,
            None,
            Format::Lfm2,
            block,
            span,
            diags,
            out,
        );
    } else {
        pythonic::read_region(text, content, close, Format::Lfm2, block, span, diags, out);
    }
}

/// True when the region holds JSON calls: its first byte (after blanks) opens an object,
/// or a list whose first item is one.
fn json_inside(s: &[u8], from: usize, to: usize) -> bool {
    let mut bytes = s[from..to.min(s.len())]
        .iter()
        .filter(|b| !b.is_ascii_whitespace());
    match bytes.next() {
        Some(b'{') => true,
        Some(b'[') => bytes.next() == Some(&b'{'),
        _ => false,
    }
}
