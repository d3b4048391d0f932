//! `grammar/tam.pest` as a reference reader, and the production scanner's view of the
//! same text, so tests can prove the two agree.
//!
//! The production reader does not run pest (pest over whole model outputs is slow, see
//! `ARCHITECTURE.md`); it implements the same grammar as a resumable scanner. These two
//! functions expose both readings in one shape, block by block and pair by pair.

use pest::Parser;

pub use super::tam::RawPair;

#[allow(missing_docs)]
mod generated {
    /// The parser pest derives from `grammar/tam.pest`.
    #[derive(pest_derive::Parser)]
    #[grammar = "grammar/tam.pest"]
    pub struct TamGrammar;
}
use generated::{Rule, TamGrammar};

/// One TAM block as read by the grammar or the scanner (byte offsets into the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockReading {
    /// Offset of the start marker.
    pub start: usize,
    /// Offset one past the block (its end marker, or where it was cut off).
    pub end: usize,
    /// True when the block ended at its own end marker.
    pub terminated: bool,
    /// The pairs, in order.
    pub pairs: Vec<RawPair>,
}

/// Reads `text` with the pest grammar (TAM markers only, as `Format::Tam` does).
/// Returns the blocks found outside reasoning regions, in order.
pub fn reference_blocks(text: &str) -> Result<Vec<BlockReading>, String> {
    let doc = TamGrammar::parse(Rule::document, text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for top in doc.flatten() {
        if top.as_rule() != Rule::block {
            continue;
        }
        let span = top.as_span();
        let mut b = BlockReading {
            start: span.start(),
            end: span.end(),
            terminated: false,
            pairs: Vec::new(),
        };
        for inner in top.into_inner() {
            match inner.as_rule() {
                Rule::end_marker => b.terminated = true,
                Rule::pair => {
                    let mut key = (0, 0);
                    let mut value = (0, 0);
                    let mut recovered = false;
                    for part in inner.into_inner() {
                        let sp = part.as_span();
                        match part.as_rule() {
                            Rule::key => key = (sp.start(), sp.end()),
                            Rule::value_plain | Rule::value_marked => {
                                value = (sp.start(), sp.end())
                            }
                            Rule::value_open => {
                                value = (sp.start(), sp.end());
                                recovered = true;
                            }
                            _ => {}
                        }
                    }
                    b.pairs.push(RawPair {
                        key,
                        value,
                        recovered,
                    });
                }
                _ => {}
            }
        }
        out.push(b);
    }
    Ok(out)
}

/// Reads `text` with the production scanner in `Format::Tam` and reports its blocks in
/// the same shape as [`reference_blocks`].
pub fn scanned_blocks(text: &str) -> Vec<BlockReading> {
    let mut sc = super::scan::Scanner::new(super::Format::Tam);
    sc.record_blocks();
    sc.run(text, true);
    sc.take_recorded()
}
