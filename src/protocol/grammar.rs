//! `grammar/tam.pest` as a reference reader, and the production scanner's view of the
//! same text, so tests (and users, with `tavern parse --reader grammar`) can check that
//! the two agree.
//!
//! The production reader does not run pest (pest over whole model outputs is slow, see
//! `ARCHITECTURE.md`); it implements the same grammar as a resumable scanner.
//! [`reference_blocks_in`] and [`scanned_blocks_in`] expose both readings in one shape,
//! block by block and pair by pair; [`reference_key`] splits a key the grammar's way and
//! [`reference_key_kind`] classifies it; [`parse_reference`] is a whole reader built on the
//! grammar that returns the same [`Parsed`] shape as [`parse`]: the grammar
//! finds reasoning regions, blocks, pairs, values, key structure (chain step numbers) and
//! `<ACTION>` extents; the meaning of a block's keys (calls, chains) and the XML inside
//! `<ACTION>` are then read by the same code as the fast reader.

use pest::iterators::Pairs;
use pest::{Parser, RuleType};

pub use super::block::BlockReading;
use super::block::{BlockKind, BodyEnd};
use super::formats;
use super::read::{finish_scanner, parse};
use super::scan::{Region, Scanner};
pub use super::types::RawPair;
use super::types::{Format, Parsed};

/// The rules of `grammar/tam.pest` that readings are built from (the four generated
/// parsers each have their own `Rule` type with these names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    TamStart,
    VcpStart,
    EndMarker,
    Block,
    Pair,
    Key,
    KeyBase,
    StepNumber,
    ValuePlain,
    ValueMarked,
    ValueOpen,
    Stray,
    Think,
    ThinkClose,
    ThinkStray,
    Action,
    ActionContent,
    ActionClose,
    ToolKey,
    OnErrorKey,
    CommonKey,
    MetaKey,
    KeyClass,
    Document,
}

macro_rules! grammar_parser {
    ($module:ident, $inline:tt) => {
        #[allow(missing_docs, clippy::all)]
        mod $module {
            #[derive(pest_derive::Parser)]
            #[grammar = "grammar/tam.pest"]
            #[grammar_inline = $inline]
            pub struct P;

            pub fn kind(r: Rule) -> Option<super::Kind> {
                use super::Kind::*;
                Some(match r {
                    Rule::tam_start => TamStart,
                    Rule::vcp_start => VcpStart,
                    Rule::end_marker => EndMarker,
                    Rule::block => Block,
                    Rule::pair => Pair,
                    Rule::key => Key,
                    Rule::key_base => KeyBase,
                    Rule::step_number => StepNumber,
                    Rule::value_plain => ValuePlain,
                    Rule::value_marked => ValueMarked,
                    Rule::value_open => ValueOpen,
                    Rule::stray => Stray,
                    Rule::think => Think,
                    Rule::think_close => ThinkClose,
                    Rule::think_stray => ThinkStray,
                    Rule::action => Action,
                    Rule::action_content => ActionContent,
                    Rule::action_close => ActionClose,
                    Rule::tool_key => ToolKey,
                    Rule::on_error_key => OnErrorKey,
                    Rule::common_key => CommonKey,
                    Rule::meta_key => MetaKey,
                    Rule::key_kind => KeyClass,
                    Rule::document => Document,
                    _ => return None,
                })
            }

            pub fn rule(k: super::Kind) -> Rule {
                match k {
                    super::Kind::Key => Rule::key,
                    super::Kind::KeyClass => Rule::key_kind,
                    _ => Rule::document,
                }
            }
        }
    };
}

grammar_parser!(
    tam_only,
    "block_start = _{ tam_start }\nany_start = _{ tam_start_text }\nitem = _{ !ANY ~ ANY }\n"
);
grammar_parser!(
    vcp_only,
    "block_start = _{ vcp_start }\nany_start = _{ vcp_start_text }\nitem = _{ !ANY ~ ANY }\n"
);
grammar_parser!(
    auto_all,
    "block_start = _{ tam_start | vcp_start }\nany_start = _{ tam_start_text | vcp_start_text }\nitem = _{ action }\n"
);
grammar_parser!(
    action_only,
    "block_start = _{ !ANY ~ ANY }\nany_start = _{ !ANY ~ ANY }\nitem = _{ action }\n"
);

/// A node of a grammar reading: a rule of interest and its byte range.
#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    start: usize,
    end: usize,
    children: Vec<Node>,
}

fn nodes<R: RuleType>(pairs: Pairs<'_, R>, kind: fn(R) -> Option<Kind>, out: &mut Vec<Node>) {
    for p in pairs {
        let span = p.as_span();
        match kind(p.as_rule()) {
            Some(k) => {
                let mut children = Vec::new();
                nodes(p.into_inner(), kind, &mut children);
                out.push(Node {
                    kind: k,
                    start: span.start(),
                    end: span.end(),
                    children,
                });
            }
            None => nodes(p.into_inner(), kind, out),
        }
    }
}

/// Why the grammar could not read a text (it reads any text, so this is a grammar bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrammarError {
    /// pest's error, with the line and column it stopped at.
    #[error("{0}")]
    Unreadable(String),
}

/// Reads `text` from rule `start` with the grammar for `format`.
fn read(format: Format, start: Kind, text: &str) -> Result<Vec<Node>, GrammarError> {
    fn go<R: RuleType, P: Parser<R>>(
        rule: R,
        kind: fn(R) -> Option<Kind>,
        text: &str,
    ) -> Result<Vec<Node>, GrammarError> {
        let pairs = P::parse(rule, text).map_err(|e| GrammarError::Unreadable(e.to_string()))?;
        let mut out = Vec::new();
        nodes(pairs, kind, &mut out);
        Ok(out)
    }
    match format {
        Format::Tam => go::<_, tam_only::P>(tam_only::rule(start), tam_only::kind, text),
        Format::Vcp => go::<_, vcp_only::P>(vcp_only::rule(start), vcp_only::kind, text),
        Format::Action => {
            go::<_, action_only::P>(action_only::rule(start), action_only::kind, text)
        }
        // `auto`, and formats the grammar does not define (read whole by `parse`).
        _ => go::<_, auto_all::P>(auto_all::rule(start), auto_all::kind, text),
    }
}

fn block_pairs(block: &Node) -> Vec<RawPair> {
    let mut pairs = Vec::new();
    for p in block.children.iter().filter(|n| n.kind == Kind::Pair) {
        let mut key = (0, 0);
        let mut value = (0, 0);
        let mut recovered = false;
        for part in &p.children {
            match part.kind {
                Kind::Key => key = (part.start, part.end),
                Kind::ValuePlain | Kind::ValueMarked => value = (part.start, part.end),
                Kind::ValueOpen => {
                    value = (part.start, part.end);
                    recovered = true;
                }
                _ => {}
            }
        }
        pairs.push(RawPair {
            key,
            value,
            recovered,
        });
    }
    pairs
}

fn top_level(format: Format, text: &str) -> Result<Vec<Node>, GrammarError> {
    let doc = read(format, Kind::Document, text)?;
    Ok(doc
        .into_iter()
        .find(|n| n.kind == Kind::Document)
        .map(|d| d.children)
        .unwrap_or_default())
}

/// Reads `text` with the pest grammar for `format` (TAM, VCP or both for `Auto`); returns
/// the TAM/VCP blocks found outside reasoning regions, in order.
pub fn reference_blocks_in(text: &str, format: Format) -> Result<Vec<BlockReading>, GrammarError> {
    Ok(top_level(format, text)?
        .iter()
        .filter(|n| n.kind == Kind::Block)
        .map(|b| BlockReading {
            start: b.start,
            end: b.end,
            terminated: b.children.iter().any(|c| c.kind == Kind::EndMarker),
            pairs: block_pairs(b),
        })
        .collect())
}

/// [`reference_blocks_in`] with TAM markers only (`Format::Tam`).
pub fn reference_blocks(text: &str) -> Result<Vec<BlockReading>, GrammarError> {
    reference_blocks_in(text, Format::Tam)
}

/// Reads `text` with the production scanner in `format` and reports its blocks in the
/// same shape as [`reference_blocks_in`].
pub fn scanned_blocks_in(text: &str, format: Format) -> Vec<BlockReading> {
    let mut sc = Scanner::new(format);
    sc.record_blocks();
    sc.run(text, true);
    sc.take_recorded()
}

/// [`scanned_blocks_in`] in `Format::Tam`.
pub fn scanned_blocks(text: &str) -> Vec<BlockReading> {
    scanned_blocks_in(text, Format::Tam)
}

/// A key split the grammar's way (`key = key_base? ~ step_suffix?`): the base name and the
/// step number's digits, if the key ends in one. `None` when `key` is not a key.
pub fn reference_key(key: &str) -> Option<(String, Option<String>)> {
    let nodes = read(Format::Tam, Kind::Key, key).ok()?;
    let k = nodes.iter().find(|n| n.kind == Kind::Key)?;
    if k.end != key.len() {
        return None;
    }
    let base = k
        .children
        .iter()
        .find(|n| n.kind == Kind::KeyBase)
        .map(|n| key[n.start..n.end].to_string())
        .unwrap_or_default();
    let step = k
        .children
        .iter()
        .find(|n| n.kind == Kind::StepNumber)
        .map(|n| key[n.start..n.end].to_string());
    Some((base, step))
}

/// The kind of a key by the grammar's `key_kind` rule: `"tool"` (`command`, `tool_name`),
/// `"on_error"`, `"common"`, `"meta"` (`request_id`, `comment`) or `"param"`.
pub fn reference_key_kind(key: &str) -> Option<&'static str> {
    let nodes = read(Format::Tam, Kind::KeyClass, key).ok()?;
    let kk = nodes.iter().find(|n| n.kind == Kind::KeyClass)?;
    Some(match kk.children.first().map(|n| n.kind) {
        Some(Kind::ToolKey) => "tool",
        Some(Kind::OnErrorKey) => "on_error",
        Some(Kind::CommonKey) => "common",
        Some(Kind::MetaKey) => "meta",
        _ => "param",
    })
}

/// Reads every call in `text` with the grammar (the reference reader behind
/// `tavern parse --reader grammar`): slow and exact. The result has the shape of
/// [`parse`]'s; a JSON call text is read by the JSON reader, as there.
/// Fails only if the grammar cannot read the text at all (it reads any text).
pub fn parse_reference(text: &str, format: Format) -> Result<Parsed, GrammarError> {
    if formats::document(format).is_some() {
        return Ok(parse(text, format));
    }
    if format == Format::Auto {
        if let Some(parsed) = formats::detect_document(text) {
            return Ok(parsed);
        }
    }
    let action = formats::region(Format::Action);
    let mut regions = Vec::new();
    for n in top_level(format, text)? {
        match n.kind {
            Kind::Think => regions.push(Region::Think {
                start: n.start,
                end: n.end,
                closed: n.children.iter().any(|c| c.kind == Kind::ThinkClose),
            }),
            Kind::ThinkStray => regions.push(Region::StrayThinkClose {
                start: n.start,
                end: n.end,
            }),
            Kind::Block => {
                let kind = if n.children.iter().any(|c| c.kind == Kind::VcpStart) {
                    BlockKind::Vcp
                } else {
                    BlockKind::Tam
                };
                let end = if n.children.iter().any(|c| c.kind == Kind::EndMarker) {
                    BodyEnd::Terminated(n.end)
                } else if n.end == text.len() {
                    BodyEnd::Eof(n.end)
                } else {
                    BodyEnd::AtStart(n.end)
                };
                let strays = n
                    .children
                    .iter()
                    .filter(|c| c.kind == Kind::Stray)
                    .map(|c| c.start)
                    .collect();
                regions.push(Region::Block {
                    kind,
                    start: n.start,
                    end,
                    pairs: block_pairs(&n),
                    strays,
                });
            }
            Kind::Action => {
                let content = n
                    .children
                    .iter()
                    .find(|c| c.kind == Kind::ActionContent)
                    .map_or(n.end, |c| c.start);
                let close = n
                    .children
                    .iter()
                    .find(|c| c.kind == Kind::ActionClose)
                    .map(|c| (c.start, c.end));
                // The grammar finds `<ACTION>` regions only where the format reads them.
                let Some(syntax) = action else { continue };
                regions.push(Region::Action {
                    syntax,
                    start: n.start,
                    content,
                    close,
                });
            }
            _ => {}
        }
    }
    let mut sc = Scanner::new(format);
    sc.replay(text, regions);
    Ok(finish_scanner(sc, text))
}
