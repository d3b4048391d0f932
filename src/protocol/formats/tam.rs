//! TAM (`<|[REQUEST_TOOL]|>` … `<|[END_TOOL]|>`, rules 1–15): the meaning of a block's
//! keys. The block itself is read by the shared block scanner (`block.rs`: the grammar
//! gives TAM and VCP blocks one structure); its pairs become a plain call or a chain by
//! the chain rules (`chain.rs`, which `render_tam` shares for the way back).

use super::{Auto, FormatEntry, Reader};
use crate::protocol::block::BlockKind;
use crate::protocol::chain;
use crate::protocol::types::Format;
use crate::protocol::types::{Call, RawDiag, RawPair, Span};

/// The format table's reader for TAM blocks: a plain call or the steps of a chain.
pub(crate) fn read_block(
    s: &str,
    pairs: &[RawPair],
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    chain::build_calls(s, pairs, block, span, BlockKind::Tam, diags, out);
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Tam,
    name: "tam",
    aliases: &[],
    auto: Auto::InText,
    reader: Reader::Pairs {
        kind: BlockKind::Tam,
        read: read_block,
    },
    exact_keys: false,
    leading: None,
    names_as_written: false,
    also: &[],
    lesson: super::Lesson {
        naming: super::Naming::Id,
        example: |name, args| {
            let mut s = format!("<|[REQUEST_TOOL]|>\ncommand:「始」{name}「末」\n");
            for (k, v) in args {
                s.push_str(&format!("{k}:「始」{}「末」\n", super::teach::text_of(v)));
            }
            s.push_str("<|[END_TOOL]|>");
            s
        },
        how: "When you decide to use a tool or skill, first explain your reasoning, then output a <|[REQUEST_TOOL]|> block: `command:「始」ToolID「末」` and one `name:「始」value「末」` line per parameter, closed by <|[END_TOOL]|>. If no action is needed, just provide your textual response.",
    },
    grammar: super::Grammar::Tam("tam_start"),
};
