//! The format table: one row per call format, each declared in its format's own file.
//!
//! A row (`ROW` in each file here) is everything the crate knows about a format, in one
//! place: what it is called (its name and aliases: the one list of names the CLI, REST
//! and docs use), how [`Format::Auto`] finds it, how it is read, how an agent's manual
//! teaches it (its [`Lesson`]: how one call is written and a paragraph on how to call)
//! and which rule of the reference grammar defines it ([`Grammar`]: a rule of
//! `grammar/tam.pest` or `grammar/native.pest`, or why no rule can). The scanner
//! (`scan.rs`), [`parse`](super::parse) and the [`StreamReader`](super::StreamReader)
//! dispatch through it, once per text or per block, never per byte; the agent's
//! `CallFormat` and manual, and the grammar reader's list of forms
//! ([`native_forms`](super::grammar::native_forms)), read the rows. Adding a format is its
//! file (its reader and its `ROW`, lesson and grammar rule included), its variant in
//! [`Format`], one line in [`FORMATS`], and its tests; `tests::every_row_is_complete`
//! fails for a row whose lesson or grammar rule is missing.
//!
//! The per-format files import the row types from here and the shared files of
//! `protocol` (`types.rs`, `lex.rs`, `locate.rs`, `block.rs`, `chain.rs`).
//!
//! What a row can say today: a tagged region opened at a `<` ([`Reader::Region`]: the
//! shape of `<tool_call>…</tool_call>` too), a whole-text document that `auto` takes
//! by its first byte ([`Reader::Document`] with [`Auto::Leading`]), or
//! `key:「始」value「末」` blocks of a kind the grammar defines ([`Reader::Pairs`]). A
//! shape none of these covers (a call list only at the start of an answer, a region
//! with no closing tag) is a new variant of [`Reader`] or [`Auto`] and its handling in
//! the scanner, once; formats of that shape are then rows again.

mod action;
mod apertus;
pub(crate) mod command_r;
mod deepseek;
mod functionary;
mod functools;
mod gemma3;
pub(crate) mod gemma4;
mod gigachat3;
mod glm;
pub(crate) mod glm45;
mod granite;
mod granite3;
pub(crate) mod harmony;
mod hermes;
mod internlm2;
mod json;
pub(crate) mod kimi_k2;
pub(crate) mod lead;
mod lfm2;
pub(crate) mod lit;
mod llama_json;
mod longcat;
mod minimax_m2;
mod mistral;
mod olmo3;
mod pythonic;
mod qwen3_coder;
mod step3;
mod tam;
pub(crate) mod teach;
pub(crate) mod text;
mod tool_calls;
mod vcp;

pub use action::MAX_XML_DEPTH;
pub(crate) use json::looks_like_json;

pub(crate) use teach::{Lesson, Naming};

use super::block::BlockKind;
use super::types::{Call, Format, Parsed, RawDiag, RawPair, Span};

/// Turns the pairs of one `key:「始」value「末」` block into calls (pushed onto the last
/// argument), its problems into the diagnostics.
pub(crate) type ReadPairs = fn(&str, &[RawPair], usize, Span, &mut Vec<RawDiag>, &mut Vec<Call>);

/// Reads the calls of one tagged region: the text, where its content starts, where its
/// closing tag starts, its block index and span, and the diagnostics; the calls are pushed
/// onto the last argument (no vector per region), none of them when the region has an
/// error.
pub(crate) type ReadRegion = fn(&str, usize, usize, usize, Span, &mut Vec<RawDiag>, &mut Vec<Call>);

/// The reader of a region that holds no calls: a family's reasoning markers (never run,
/// not response text, as `<think>`), or its answer's (with a `prose` start).
pub(crate) fn no_calls(
    _: &str,
    _: usize,
    _: usize,
    _: usize,
    _: Span,
    _: &mut Vec<RawDiag>,
    _: &mut Vec<Call>,
) {
}

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

/// How a region opens.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Open {
    /// A tag without its `>`, in lowercase (`<action`): matched case-insensitively, then
    /// optional blanks and `>`.
    Tag(&'static [u8]),
    /// A marker matched exactly (`[TOOL_CALLS]`, `<|python_tag|>`).
    Exact(&'static [u8]),
    /// A tag that names the tool (`<function=`, then the name, then `>`), matched
    /// case-insensitively.
    Named(&'static [u8]),
}

impl Open {
    /// The bytes the marker starts with (what the scanner looks for in prose).
    pub(crate) fn first_byte(self) -> u8 {
        match self {
            Open::Tag(p) | Open::Exact(p) | Open::Named(p) => p[0],
        }
    }

    /// True when both open the same way (rows sharing a tag).
    pub(crate) fn same(self, other: Open) -> bool {
        match (self, other) {
            (Open::Tag(a), Open::Tag(b))
            | (Open::Exact(a), Open::Exact(b))
            | (Open::Named(a), Open::Named(b)) => a == b,
            _ => false,
        }
    }
}

/// How a region ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Close {
    /// A closing tag, matched like [`Open::Tag`].
    Tag(&'static [u8]),
    /// A closing marker matched exactly.
    Exact(&'static [u8]),
    /// Any of these closing markers, matched exactly (harmony's `<|call|>`, `<|end|>`,
    /// `<|return|>`); every one starts with `<`.
    AnyExact(&'static [&'static [u8]]),
    /// With the bracketed value (`{…}` or `[…]`) that follows the opening marker, for
    /// formats with no closing tag (Granite's `<function_call>`, Mistral's
    /// `[TOOL_CALLS]`); `sep` joins several values (`;` after `<|python_tag|>`), and
    /// `name_then` allows a tool name and that marker before the value
    /// (`[TOOL_CALLS]name[ARGS]{…}`).
    Value {
        /// The separator between values, if several may follow.
        sep: Option<u8>,
        /// The marker between a tool name and its value (a value may also follow the
        /// name directly, `[TOOL_CALLS]name{…}`).
        name_then: Option<&'static [u8]>,
        /// A marker and an id that may stand between the name and `name_then`
        /// (Mistral's `[CALL_ID]id`).
        call_id: Option<&'static [u8]>,
        /// A closing tag that may follow the value (matched like [`Close::Tag`]),
        /// taken with the region when it does.
        trailer: Option<&'static [u8]>,
    },
}

/// A region in prose between an opening and a closing marker, found by the scanner.
#[derive(Debug)]
pub(crate) struct RegionSyntax {
    /// How it opens.
    pub open: Open,
    /// How it ends.
    pub close: Close,
    /// Sections (start, end; matched exactly) inside which the closing tag is content.
    pub opaque: &'static [(&'static [u8], &'static [u8])],
    /// Reads the content into calls.
    pub read: ReadRegion,
    /// How diagnostics name the region.
    pub shown_as: &'static str,
    /// The error (message, hint) for a region the text ends inside.
    pub unclosed: (&'static str, &'static str),
    /// True when a region the text ends inside is still read (its content up to the end
    /// of the text; the reader says when a value in it was cut off), with a warning for
    /// the missing closing tag; false: it is the `unclosed` error and nothing runs.
    pub reads_unclosed: bool,
    /// `Some(hint)`: only the first such region of a text runs, and the response text is
    /// the prose before it; a later one is a warning with this hint.
    pub only_first: Option<&'static str>,
    /// Where, inside a region read, response text starts (to the region's closing
    /// tag): harmony's `final` channel is the answer. `None` for the others.
    pub prose: Option<ProseIn>,
}

/// The start of the response text inside a region (text, content start, content end),
/// if it holds some.
pub(crate) type ProseIn = fn(&str, usize, usize) -> Option<usize>;

impl RegionSyntax {
    /// A region read also when the text ends inside it, with no opaque sections, every
    /// one running, holding no response text: what most native formats are.
    pub(crate) const fn new(
        open: Open,
        close: Close,
        read: ReadRegion,
        shown_as: &'static str,
        unclosed: (&'static str, &'static str),
    ) -> Self {
        RegionSyntax {
            open,
            close,
            opaque: &[],
            read,
            shown_as,
            unclosed,
            reads_unclosed: true,
            only_first: None,
            prose: None,
        }
    }
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
    /// Only its leading shape ([`FormatEntry::leading`]): nothing to find in prose.
    Leading,
}

/// Which rule of the reference grammar defines a format (`tavern parse --reader grammar`
/// reads the format with it; `tests/it/protocol_grammar_native.rs` holds the fast reader
/// to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grammar {
    /// A rule of `grammar/tam.pest`.
    Tam(&'static str),
    /// A rule of `grammar/native.pest`, named as the format is.
    Native(&'static str),
    /// No rule: why the grammar does not define the format.
    Absent(&'static str),
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
    /// True when its calls' keys must match parameter names exactly; otherwise they match
    /// case-, `_`- and `-`-insensitively (rule 3), each loose match a warning on the result.
    /// No format asks for exact keys: one rule for every format (issue 36), `<ACTION>` too.
    pub exact_keys: bool,
    /// Its shape that could also be prose, read only at the start of the answer or as a
    /// whole fenced block (`lead.rs`), by `auto` and by this format alike.
    pub leading: Option<lead::LeadRead>,
    /// Further region shapes of the same format, found in prose like its own
    /// ([`Reader::Region`]): a model's known mistakes (Hermes calls opened with
    /// `<|im_start|>`).
    pub also: &'static [RegionSyntax],
    /// True for the formats open models write natively: a tool name they write that
    /// names no tool exactly is also looked up ignoring ASCII case and `.`/`:`/`_`
    /// (`Forge:smelt` for `forge:smelt`), when exactly one tool matches.
    pub names_as_written: bool,
    /// How an agent's manual teaches it (`agent/call_format.rs`, `agent/manual.rs`).
    pub lesson: Lesson,
    /// The rule of the reference grammar that defines it.
    pub grammar: Grammar,
}

impl FormatEntry {
    /// A native format of open models: found by `auto` in text, keys matched loosely,
    /// tool names looked up as models write them, no leading shape, no other shapes.
    pub(crate) const fn native(
        format: Format,
        name: &'static str,
        aliases: &'static [&'static str],
        reader: Reader,
        lesson: Lesson,
        grammar: Grammar,
    ) -> Self {
        FormatEntry {
            format,
            name,
            aliases,
            auto: Auto::InText,
            reader,
            exact_keys: false,
            leading: None,
            also: &[],
            names_as_written: true,
            lesson,
            grammar,
        }
    }

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
    tam::ROW,
    action::ROW,
    vcp::ROW,
    json::ROW,
    hermes::ROW,
    pythonic::ROW,
    llama_json::ROW,
    mistral::ROW,
    granite::ROW,
    glm::ROW,
    deepseek::ROW,
    functionary::ROW,
    qwen3_coder::ROW,
    glm45::ROW,
    kimi_k2::ROW,
    harmony::ROW,
    minimax_m2::ROW,
    step3::ROW,
    gemma4::ROW,
    gemma3::ROW,
    lfm2::ROW,
    olmo3::ROW,
    granite3::ROW,
    tool_calls::ROW,
    internlm2::ROW,
    longcat::ROW,
    functools::ROW,
    gigachat3::ROW,
    command_r::ROW,
    apertus::ROW,
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

/// The lesson of `<ACTION>` (seed 002 §4.2's manual).
pub(crate) const ACTION_LESSON: &Lesson = &action::ROW.lesson;

/// The lesson of TAM (seed 000 §6.2's manual).
pub(crate) const TAM_LESSON: &Lesson = &tam::ROW.lesson;

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

/// The leading readers for `format`: its own, or for `auto` every row's, in table order.
/// `--format hermes` also reads untagged call objects (`hermes.rs`), which `auto` leaves
/// to the `json` and `llama_json` rows.
pub(crate) fn leading_for(format: Format) -> Vec<lead::LeadRead> {
    let mut readers: Vec<lead::LeadRead> = FORMATS
        .iter()
        .filter(|e| format == Format::Auto || e.format == format)
        .filter_map(|e| e.leading)
        .collect();
    if format == Format::Hermes {
        readers.push(hermes::untagged);
    }
    readers
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

/// Every region shape of a row: its own reader's, then its [`FormatEntry::also`] ones.
pub(crate) fn regions_of(e: &'static FormatEntry) -> impl Iterator<Item = &'static RegionSyntax> {
    let own = match &e.reader {
        Reader::Region(r) => Some(r),
        _ => None,
    };
    own.into_iter().chain(e.also.iter())
}

/// True when `auto` may read a text starting (after blanks) with `byte` as a document.
pub(crate) fn opens_document(byte: u8) -> bool {
    FORMATS
        .iter()
        .any(|e| matches!(e.auto, Auto::Leading { opens } if opens.contains(&byte)))
}

/// For a text starting (after blanks) with `rest`, whose first byte may open a
/// document: `Some(true)` when it starts with a region marker `auto` finds in text
/// (`[TOOL_CALLS]`), `None` when `rest` is too short to tell, `Some(false)` otherwise.
pub(crate) fn starts_with_marker(rest: &[u8]) -> Option<bool> {
    for e in FORMATS.iter().filter(|e| matches!(e.auto, Auto::InText)) {
        for r in regions_of(e) {
            if let Open::Exact(p) = r.open {
                if rest.starts_with(p) {
                    return Some(true);
                }
                if p.starts_with(rest) {
                    return None;
                }
            }
        }
    }
    Some(false)
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

    /// True when a tool name read in this format is also looked up as models write names
    /// (ignoring ASCII case and `.`/`:`/`_`): the native formats of open models.
    pub fn names_as_written(self) -> bool {
        entry(self).is_some_and(|e| e.names_as_written)
    }

    /// True when calls read in this format match parameter names exactly (`<ACTION>`);
    /// calls of the others, and calls built by code ([`Format::Auto`]), match loosely.
    pub fn keys_match_exactly(self) -> bool {
        entry(self).is_some_and(|e| e.exact_keys)
    }

    /// The format's other spellings, which `FromStr` also accepts (`xml` for `action`);
    /// none for [`Format::Auto`].
    pub fn aliases(self) -> &'static [&'static str] {
        entry(self).map_or(&[], |e| e.aliases)
    }

    /// How an agent's manual teaches the format; `None` for [`Format::Auto`].
    pub(crate) fn lesson(self) -> Option<&'static Lesson> {
        entry(self).map(|e| &e.lesson)
    }

    /// The rule of the reference grammar that defines the format; `None` for
    /// [`Format::Auto`].
    pub(crate) fn grammar(self) -> Option<Grammar> {
        entry(self).map(|e| e.grammar)
    }

    /// The names as a sentence: `auto, tam, …, deepseek or functionary`.
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
        assert_eq!(
            Format::NAMES,
            [
                "auto",
                "tam",
                "action",
                "vcp",
                "json",
                "hermes",
                "pythonic",
                "llama_json",
                "mistral",
                "granite",
                "glm",
                "deepseek",
                "functionary",
                "qwen3_coder",
                "glm45",
                "kimi_k2",
                "harmony",
                "minimax_m2",
                "step3",
                "gemma4",
                "gemma3",
                "lfm2",
                "olmo3",
                "granite3",
                "tool_calls",
                "internlm2",
                "longcat",
                "functools",
                "gigachat3",
                "command_r",
                "apertus"
            ]
        );
        assert_eq!(
            Format::names_text(),
            "auto, tam, action, vcp, json, hermes, pythonic, llama_json, mistral, granite, glm, deepseek, functionary, qwen3_coder, glm45, kimi_k2, harmony, minimax_m2, step3, gemma4, gemma3, lfm2, olmo3, granite3, tool_calls, internlm2, longcat, functools, gigachat3, command_r or apertus"
        );
        for (f, name) in Format::all().zip(Format::NAMES) {
            assert_eq!(f.name(), *name);
            assert_eq!(f.to_string(), *name);
            assert_eq!(name.parse::<Format>(), Ok(f));
            assert_eq!(name.to_uppercase().parse::<Format>(), Ok(f));
            assert_eq!(serde_json::to_value(f).unwrap(), *name);
            assert_eq!(serde_json::from_value::<Format>((*name).into()).unwrap(), f);
        }
        assert_eq!("XML".parse::<Format>(), Ok(Format::Action));
        // One rule for argument names in every format (issue 36).
        let exact: Vec<Format> = Format::all().filter(|f| f.keys_match_exactly()).collect();
        assert!(exact.is_empty(), "{exact:?}");
        assert_eq!(
            "yaml".parse::<Format>(),
            Err(format!(
                "unknown format 'yaml': expected {}",
                Format::names_text()
            ))
        );
        // Serde takes names only, as the derived impl did.
        let err = serde_json::from_value::<Format>("xml".into()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown variant `xml`, expected one of `auto`, `tam`, `action`, `vcp`, `json`, `hermes`, `pythonic`, `llama_json`, `mistral`, `granite`, `glm`, `deepseek`, `functionary`, `qwen3_coder`, `glm45`, `kimi_k2`, `harmony`, `minimax_m2`, `step3`, `gemma4`, `gemma3`, `lfm2`, `olmo3`, `granite3`, `tool_calls`, `internlm2`, `longcat`, `functools`, `gigachat3`, `command_r`, `apertus`"
        );
        assert_eq!("openai".parse::<Format>(), Ok(Format::Json));
        assert!(serde_json::from_value::<Format>("TAM".into()).is_err());
    }

    /// Every row is complete: a lesson the manual can teach and a rule of the reference
    /// grammar (or, where the grammar cannot define the format, the reason).
    #[test]
    fn every_row_is_complete() {
        let tam = include_str!("../../../grammar/tam.pest");
        let native = include_str!("../../../grammar/native.pest");
        let defines = |pest: &str, rule: &str| {
            pest.lines()
                .any(|l| l.split_once('=').is_some_and(|(n, _)| n.trim() == rule))
        };
        let args = [("ore", serde_json::json!("iron"))];
        for e in FORMATS {
            assert!(!e.lesson.how.trim().is_empty(), "{}: no lesson", e.name);
            let example = (e.lesson.example)("forge_smelt", &args);
            assert!(example.contains("iron"), "{}: {example}", e.name);
            match e.grammar {
                Grammar::Tam(rule) => assert!(defines(tam, rule), "{}: {rule}", e.name),
                Grammar::Native(rule) => {
                    assert_eq!(rule, e.name, "a native rule is named as its format");
                    assert!(
                        defines(native, rule),
                        "{}: native.pest lacks {rule}",
                        e.name
                    );
                }
                Grammar::Absent(why) => assert!(why.len() > 20, "{}: {why}", e.name),
            }
        }
        // Only the JSON document is outside the grammars.
        let absent: Vec<&str> = FORMATS
            .iter()
            .filter(|e| matches!(e.grammar, Grammar::Absent(_)))
            .map(|e| e.name)
            .collect();
        assert_eq!(absent, ["json"]);
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
