//! The format table: one row per call format, and one file per format beside it.
//!
//! A row says what a format is called (its name and aliases: the one list of names the
//! CLI, REST and docs use), how [`Format::Auto`] finds it, and how it is read. The scanner
//! (`scan.rs`), [`parse`](super::parse) and the [`StreamReader`](super::StreamReader)
//! dispatch through it, once per text or per block, never per byte. Adding a format is a
//! file here, its variant in [`Format`] and its row below (and tests).
//!
//! The per-format files import only the shared files of `protocol` (`types.rs`,
//! `lex.rs`, `locate.rs`, `block.rs`, `chain.rs`), never this table, so the module has no
//! import cycle.
//!
//! What a row can say today: a tagged region opened at a `<` ([`Reader::Region`]: the
//! shape of `<tool_call>…</tool_call>` too), a whole-text document that `auto` takes
//! by its first byte ([`Reader::Document`] with [`Auto::Leading`]), or
//! `key:「始」value「末」` blocks of a kind the grammar defines ([`Reader::Pairs`]). A
//! shape none of these covers (a call list only at the start of an answer, a region
//! with no closing tag) is a new variant of [`Reader`] or [`Auto`] and its handling in
//! the scanner, once; formats of that shape are then rows again.

mod action;
mod json;
mod tam;
mod vcp;

pub use action::MAX_XML_DEPTH;
pub(crate) use json::looks_like_json;

use super::block::BlockKind;
use super::types::{Call, Format, Parsed, RawDiag, RawPair, Span};

/// Turns the pairs of one `key:「始」value「末」` block into calls (pushed onto the last
/// argument), its problems into the diagnostics.
pub(crate) type ReadPairs = fn(&str, &[RawPair], usize, Span, &mut Vec<RawDiag>, &mut Vec<Call>);

/// Reads the calls of one tagged region: the text, where its content starts, where its
/// closing tag starts, its block index and span, and the diagnostics.
pub(crate) type ReadRegion = fn(&str, usize, usize, usize, Span, &mut Vec<RawDiag>) -> Vec<Call>;

/// How [`Format::Auto`] finds a format.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Auto {
    /// Wherever its blocks stand in the text: the scanner looks for them.
    InText,
    /// When the text's first non-blank byte is one of `opens` and the format's `detect`
    /// finds calls in the whole text; otherwise the text is read for the `InText` formats.
    Leading {
        /// The bytes such a document starts with.
        opens: &'static [u8],
    },
}

/// A region in prose between an opening and a closing tag, found by the scanner at a `<`.
#[derive(Debug)]
pub(crate) struct RegionSyntax {
    /// The opening tag without its `>`, in lowercase: matched case-insensitively, then
    /// optional blanks and `>`.
    pub open: &'static [u8],
    /// The closing tag, matched the same way.
    pub close: &'static [u8],
    /// Sections (start, end; matched exactly) inside which the closing tag is content.
    pub opaque: &'static [(&'static [u8], &'static [u8])],
    /// Reads the content into calls.
    pub read: ReadRegion,
    /// How diagnostics name the region.
    pub shown_as: &'static str,
    /// The error (message, hint) for a region the text ends inside.
    pub unclosed: (&'static str, &'static str),
    /// `Some(hint)`: only the first such region of a text runs, and the response text is
    /// the prose before it; a later one is a warning with this hint.
    pub only_first: Option<&'static str>,
}

/// A format read from the whole text at once.
#[derive(Debug)]
pub(crate) struct DocumentReader {
    /// The calls when the text is a call document of this format, else `None`.
    pub detect: fn(&str) -> Option<Parsed>,
    /// The text read as this format; what is wrong with it becomes diagnostics.
    pub read: fn(&str) -> Parsed,
}

/// How a format is read.
#[derive(Debug)]
pub(crate) enum Reader {
    /// `key:「始」value「末」` blocks between `kind`'s markers: the shared block scanner
    /// (`block.rs`; the grammar gives TAM and VCP blocks one structure) reads the pairs,
    /// `read` gives them the format's meaning.
    Pairs {
        /// The markers.
        kind: BlockKind,
        /// The meaning of the pairs.
        read: ReadPairs,
    },
    /// A tagged region in prose.
    Region(RegionSyntax),
    /// The whole text is one document.
    Document(DocumentReader),
}

/// One row of the table.
#[derive(Debug)]
pub(crate) struct FormatEntry {
    /// The variant.
    pub format: Format,
    /// Its name (`--format`, `?format=`, `tool_call_format`, a call's `source`).
    pub name: &'static str,
    /// Other spellings `FromStr` accepts.
    pub aliases: &'static [&'static str],
    /// How `auto` finds it.
    pub auto: Auto,
    /// How it is read.
    pub reader: Reader,
    /// True when its calls' keys must match parameter names exactly (`<ACTION>`: seed
    /// 002 §3.2.3, §5.5); otherwise they match case-, `_`- and `-`-insensitively (rule 3).
    pub exact_keys: bool,
}

impl FormatEntry {
    /// True when the [`StreamReader`](super::StreamReader) yields this format's calls as
    /// their blocks close; a document format is read whole at `finish`.
    pub(crate) fn streams(&self) -> bool {
        !matches!(self.reader, Reader::Document(_))
    }
}

/// The name of [`Format::Auto`], which is every row whose `auto` says so.
const AUTO: &str = "auto";

/// The table. Its order is the order of [`Format::NAMES`] (after `auto`).
pub(crate) const FORMATS: &[FormatEntry] = &[
    FormatEntry {
        format: Format::Tam,
        name: "tam",
        aliases: &[],
        auto: Auto::InText,
        reader: Reader::Pairs {
            kind: BlockKind::Tam,
            read: tam::read_block,
        },
        exact_keys: false,
    },
    FormatEntry {
        format: Format::Action,
        name: "action",
        aliases: &["xml"],
        auto: Auto::InText,
        reader: Reader::Region(RegionSyntax {
            open: action::OPEN_TAG,
            close: action::CLOSE_TAG,
            opaque: action::OPAQUE,
            read: action::parse_action,
            shown_as: action::SHOWN_AS,
            unclosed: action::UNCLOSED,
            only_first: Some(action::LATER_HINT),
        }),
        exact_keys: true,
    },
    FormatEntry {
        format: Format::Vcp,
        name: "vcp",
        aliases: &[],
        auto: Auto::InText,
        reader: Reader::Pairs {
            kind: BlockKind::Vcp,
            read: vcp::read_block,
        },
        exact_keys: false,
    },
    FormatEntry {
        format: Format::Json,
        name: "json",
        aliases: &[],
        auto: Auto::Leading { opens: json::OPENS },
        reader: Reader::Document(DocumentReader {
            detect: json::detect,
            read: json::read_document,
        }),
        exact_keys: false,
    },
];

const NAME_COUNT: usize = FORMATS.len() + 1;

/// `auto`, then every row's name in table order.
const NAME_LIST: [&str; NAME_COUNT] = {
    let mut names = [AUTO; NAME_COUNT];
    let mut i = 0;
    while i < FORMATS.len() {
        names[i + 1] = FORMATS[i].name;
        i += 1;
    }
    names
};

/// The row of `format`; `None` for [`Format::Auto`].
pub(crate) fn entry(format: Format) -> Option<&'static FormatEntry> {
    FORMATS.iter().find(|e| e.format == format)
}

/// The rows a reader for `format` reads: its own, or for `auto` every row `auto` finds.
pub(crate) fn readers_for(format: Format) -> impl Iterator<Item = &'static FormatEntry> {
    FORMATS.iter().filter(move |e| {
        e.format == format || (format == Format::Auto && matches!(e.auto, Auto::InText))
    })
}

/// The pair reader for blocks of `kind`.
pub(crate) fn pairs_reader(kind: BlockKind) -> Option<ReadPairs> {
    FORMATS.iter().find_map(|e| match e.reader {
        Reader::Pairs { kind: k, read } if k == kind => Some(read),
        _ => None,
    })
}

/// The region syntax of `format`, if it is read as a tagged region.
pub(crate) fn region(format: Format) -> Option<&'static RegionSyntax> {
    match &entry(format)?.reader {
        Reader::Region(r) => Some(r),
        _ => None,
    }
}

/// The whole-text reader of `format`, if it is a document format.
pub(crate) fn document(format: Format) -> Option<&'static DocumentReader> {
    match &entry(format)?.reader {
        Reader::Document(d) => Some(d),
        _ => None,
    }
}

/// True when `auto` may read a text starting (after blanks) with `byte` as a document.
pub(crate) fn opens_document(byte: u8) -> bool {
    FORMATS
        .iter()
        .any(|e| matches!(e.auto, Auto::Leading { opens } if opens.contains(&byte)))
}

/// `auto`'s document reading: the calls of the first document format whose opening
/// bytes start the text (after blanks) and that finds calls in it.
pub(crate) fn detect_document(text: &str) -> Option<Parsed> {
    let first = *text.trim_start().as_bytes().first()?;
    FORMATS.iter().find_map(|e| match (&e.auto, &e.reader) {
        (Auto::Leading { opens }, Reader::Document(d)) if opens.contains(&first) => {
            (d.detect)(text)
        }
        _ => None,
    })
}

impl Format {
    /// Every format's name, `auto` first, in table order: what `--format`, `?format=`
    /// and an agent's `tool_call_format` accept (besides aliases such as `xml`).
    pub const NAMES: &'static [&'static str] = &NAME_LIST;

    /// Every format, [`Format::Auto`] first, in the order of [`Format::NAMES`].
    pub fn all() -> impl Iterator<Item = Format> {
        std::iter::once(Format::Auto).chain(FORMATS.iter().map(|e| e.format))
    }

    /// The format's name (`auto`, `tam`, …), as `Display` and serde write it.
    pub fn name(self) -> &'static str {
        entry(self).map_or(AUTO, |e| e.name)
    }

    /// True when calls read in this format match parameter names exactly (`<ACTION>`);
    /// calls of the others, and calls built by code ([`Format::Auto`]), match loosely.
    pub fn keys_match_exactly(self) -> bool {
        entry(self).is_some_and(|e| e.exact_keys)
    }

    /// The names as a sentence: `auto, tam, action, vcp or json`.
    pub fn names_text() -> String {
        match Self::NAMES.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => Self::NAMES.join(""),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    /// A name or alias, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        if lower == AUTO {
            return Ok(Format::Auto);
        }
        FORMATS
            .iter()
            .find(|e| e.name == lower || e.aliases.contains(&lower.as_str()))
            .map(|e| e.format)
            .ok_or_else(|| {
                format!(
                    "unknown format '{lower}': expected {}",
                    Format::names_text()
                )
            })
    }
}

impl serde::Serialize for Format {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Format {
    /// Exactly a name (case and aliases as a derived enum would: neither).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Names;
        impl serde::de::Visitor<'_> for Names {
            type Value = Format;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("variant identifier")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Format, E> {
                Format::all()
                    .find(|f| f.name() == v)
                    .ok_or_else(|| E::unknown_variant(v, Format::NAMES))
            }
        }
        d.deserialize_str(Names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_table() {
        assert_eq!(Format::NAMES, ["auto", "tam", "action", "vcp", "json"]);
        assert_eq!(Format::names_text(), "auto, tam, action, vcp or json");
        for (f, name) in Format::all().zip(Format::NAMES) {
            assert_eq!(f.name(), *name);
            assert_eq!(f.to_string(), *name);
            assert_eq!(name.parse::<Format>(), Ok(f));
            assert_eq!(name.to_uppercase().parse::<Format>(), Ok(f));
            assert_eq!(serde_json::to_value(f).unwrap(), *name);
            assert_eq!(serde_json::from_value::<Format>((*name).into()).unwrap(), f);
        }
        assert_eq!("XML".parse::<Format>(), Ok(Format::Action));
        let exact: Vec<Format> = Format::all().filter(|f| f.keys_match_exactly()).collect();
        assert_eq!(exact, [Format::Action]);
        assert_eq!(
            "yaml".parse::<Format>(),
            Err("unknown format 'yaml': expected auto, tam, action, vcp or json".to_string())
        );
        // Serde takes names only, as the derived impl did.
        let err = serde_json::from_value::<Format>("xml".into()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown variant `xml`, expected one of `auto`, `tam`, `action`, `vcp`, `json`"
        );
        assert!(serde_json::from_value::<Format>("TAM".into()).is_err());
    }

    #[test]
    fn rows_are_distinct() {
        for (i, e) in FORMATS.iter().enumerate() {
            assert_ne!(
                e.format,
                Format::Auto,
                "auto is every InText row, not a row"
            );
            for o in &FORMATS[i + 1..] {
                assert_ne!(e.format, o.format);
                assert_ne!(e.name, o.name);
            }
        }
    }
}
