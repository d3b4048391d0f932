//! VCP (`<<<[TOOL_REQUEST]>>>` … `<<<[END_TOOL_REQUEST]>>>`, rule 16): the meaning of a
//! block's keys. The block itself is read by the shared block scanner (`block.rs`: the
//! grammar gives TAM and VCP blocks one structure); this file turns its pairs into the
//! one call VCP means.

use super::{Auto, FormatEntry, Reader};
use crate::protocol::block::BlockKind;
use crate::protocol::chain::{key_is, read_pairs, repeated_keys, Named};
use crate::protocol::types::{Call, Format, RawDiag, RawPair, Span};

/// The format table's reader for VCP blocks: at most one call per block.
pub(crate) fn read_block(
    s: &str,
    pairs: &[RawPair],
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    if let Some(call) = build_vcp(s, pairs, block, span, diags) {
        out.push(call);
    }
}

/// Rule 16: a VCP block as VCP reads it. `tool_name` names the tool; every other key
/// (`command`, `command1`, `filePath1`, …) is an argument passed through with its name
/// unchanged; no chain rules. Resolving `tool_name` + `command` to a tool, and numbered
/// batches to chains, is the ToolManager's business (it knows which tools exist).
fn build_vcp(
    s: &str,
    pairs: &[RawPair],
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
) -> Option<Call> {
    if repeated_keys(s, pairs, span, false, diags) {
        return None;
    }
    let (tool, args, failed) = read_pairs(
        s,
        pairs,
        diags,
        |k| key_is(k, "toolname"),
        |key, first| {
            (
            format!("'{key}' names a second tool in one VCP block (the first was '{first}'); this block's call does not run"),
            "Write one tool_name per <<<[TOOL_REQUEST]>>> block.".into(),
        )
        },
    );
    let Some((tool, at)) = tool else {
        let hint = if args.keys().any(|k| key_is(k, "command")) {
            "In a <<<[TOOL_REQUEST]>>> block the tool is named by tool_name:「始」ToolName「末」 and 'command' is the tool's sub-command argument; add tool_name, or use a <|[REQUEST_TOOL]|> block where command names the tool."
        } else {
            "Add tool_name:「始」ToolName「末」 as the first line of the block."
        };
        diags.push(RawDiag::error(
            span.start,
            "VCP block has no 'tool_name' key, so it names no tool; it was not executed".into(),
            hint.into(),
        ));
        return None;
    };
    let named = Named {
        key: "tool_name",
        noun: "name",
        example: "tool_name:「始」FileOperator「末」",
        source: Format::Vcp,
    };
    named.single_call(tool, at, args, failed, span, block, diags)
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Vcp,
    name: "vcp",
    aliases: &[],
    auto: Auto::InText,
    reader: Reader::Pairs {
        kind: BlockKind::Vcp,
        read: read_block,
    },
    exact_keys: false,
    leading: None,
    names_as_written: false,
    also: &[],
    lesson: super::Lesson {
        naming: super::Naming::Id,
        example: |name, args| {
            let mut s = format!("<<<[TOOL_REQUEST]>>>\ntool_name:「始」{name}「末」,\n");
            for (k, v) in args {
                s.push_str(&format!("{k}:「始」{}「末」,\n", super::teach::text_of(v)));
            }
            s.push_str("<<<[END_TOOL_REQUEST]>>>");
            s
        },
        how: "When you decide to use a tool or skill, first explain your reasoning, then output a <<<[TOOL_REQUEST]>>> block: `tool_name:「始」ToolID「末」,` and one `name:「始」value「末」,` line per parameter, closed by <<<[END_TOOL_REQUEST]>>>; write one block per call. If no action is needed, just provide your textual response.",
    },
    grammar: super::Grammar::Tam("vcp_start"),
};
