//! Strict manifests: every key a modder writes in `plugin.yaml`, `*.tool.json`, `*.node.json`,
//! a workflow file or an agent profile must be one the engine reads. An unknown key is a
//! [`Problem`] at the key's own line and column, with a did-you-mean from [`crate::suggest`].
//!
//! The known keys come from the serde structs themselves ([`fields_of`] asks a struct's
//! `Deserialize` impl for its field names, renames applied), so a field added to a struct is
//! known here at once; only hand-parsed formats (workflow files) list their keys by hand.
//!
//! **Forward compatibility.** A document whose top level says `formatVersion: N` (YAML) or
//! `"formatVersion": N` (JSON) with `N` greater than [`FORMAT_VERSION`] was written for a newer
//! tavern: its unknown keys are not problems (they are meant for that newer engine).
//! `formatVersion` itself is always a known key.

use std::path::Path;

use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::problem::Problem;

/// The manifest format version this engine reads. A document declaring a higher
/// `formatVersion` is read tolerantly (unknown keys ignored).
pub const FORMAT_VERSION: u64 = 1;

/// The top-level key that opts into tolerance.
pub const VERSION_KEY: &str = "formatVersion";

// ---------------------------------------------------------------------------------------------
// Field names from a serde struct.

/// The field names a `#[derive(Deserialize)]` struct reads (after `rename`/`rename_all`).
/// Empty for a type that is not a plain struct (maps, enums, `flatten`ed structs).
pub fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

/// A deserializer that answers nothing and only records the field list serde passes to
/// `deserialize_struct`.
struct FieldProbe<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct ProbeDone;

impl std::fmt::Display for ProbeDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field probe")
    }
}
impl std::error::Error for ProbeDone {}
impl de::Error for ProbeDone {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        ProbeDone
    }
}

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = ProbeDone;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, ProbeDone> {
        Err(ProbeDone)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, ProbeDone> {
        *self.0 = fields;
        Err(ProbeDone)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

// ---------------------------------------------------------------------------------------------
// What a document may hold.

/// The shape of the keys a document may hold.
#[derive(Debug, Clone)]
pub enum Shape {
    /// Anything (free-form values such as JSON Schemas, config values).
    Any,
    /// A mapping with these keys; the named ones are checked further.
    Keys {
        /// Every key that may appear.
        known: Vec<&'static str>,
        /// Keys whose values have a shape of their own.
        children: Vec<(&'static str, Shape)>,
    },
    /// A list whose items have this shape.
    Seq(Box<Shape>),
    /// A mapping with free keys whose values have this shape.
    Values(Box<Shape>),
    /// A mapping whose allowed keys depend on the value of its `tag` key (serde's internally
    /// tagged enums): `(tag value, keys besides the tag)`. An unknown tag value is left to
    /// the typed parse, which names the valid ones.
    Tagged {
        /// The key holding the variant name (`type`).
        tag: &'static str,
        /// Each variant's name and keys.
        variants: Vec<(&'static str, Vec<&'static str>)>,
    },
    /// A mapping ([`Shape::Keys`], [`Shape::Values`], [`Shape::Tagged`]) or a list
    /// ([`Shape::Seq`]), whichever the document holds (serde's untagged enums).
    Either(Box<Shape>, Box<Shape>),
}

impl Shape {
    /// The keys of struct `T` (see [`fields_of`]), nothing checked below them yet.
    pub fn of<T: DeserializeOwned>() -> Shape {
        Shape::keys(fields_of::<T>())
    }

    /// A mapping with these keys.
    pub fn keys(known: &[&'static str]) -> Shape {
        Shape::Keys {
            known: known.to_vec(),
            children: Vec::new(),
        }
    }

    /// Adds keys (for fields a struct reads by hand, e.g. through an untagged enum).
    pub fn also(mut self, more: &[&'static str]) -> Shape {
        if let Shape::Keys { known, .. } = &mut self {
            known.extend_from_slice(more);
        }
        self
    }

    /// Checks key `key`'s value against `shape`.
    pub fn child(mut self, key: &'static str, shape: Shape) -> Shape {
        if let Shape::Keys { children, .. } = &mut self {
            children.push((key, shape));
        }
        self
    }

    /// A list of items of this shape.
    pub fn seq(self) -> Shape {
        Shape::Seq(Box::new(self))
    }
}

// ---------------------------------------------------------------------------------------------
// A document with the place of every key.

/// A parsed document keeping each mapping key's 1-based line and column.
#[derive(Debug, Clone, PartialEq)]
pub enum Located {
    /// A mapping: key, line, column, value.
    Map(Vec<(String, u32, u32, Located)>),
    /// A sequence.
    Seq(Vec<Located>),
    /// A number, string, boolean or null (the text of numbers and strings is kept).
    Scalar(Option<String>),
}

impl Located {
    /// The value at top-level key `key`.
    pub fn get(&self, key: &str) -> Option<&Located> {
        match self {
            Located::Map(m) => m.iter().find(|e| e.0 == key).map(|e| &e.3),
            _ => None,
        }
    }

    /// Line and column of key `key` of this mapping.
    #[cfg(test)]
    pub fn key_at(&self, key: &str) -> Option<(u32, u32)> {
        match self {
            Located::Map(m) => m.iter().find(|e| e.0 == key).map(|e| (e.1, e.2)),
            _ => None,
        }
    }

    /// Line and column where the value at `path` starts: for a mapping entry, its key; for a
    /// list item, its first key (or the list's key when the item has none).
    pub fn place(&self, path: &[PathStep<'_>]) -> Option<(u32, u32)> {
        let mut here = self;
        let mut last = None;
        for step in path {
            match (step, here) {
                (PathStep::Key(k), Located::Map(m)) => {
                    let e = m.iter().find(|e| e.0 == *k)?;
                    last = Some((e.1, e.2));
                    here = &e.3;
                }
                (PathStep::Index(i), Located::Seq(items)) => {
                    here = items.get(*i)?;
                    if let Located::Map(m) = here {
                        if let Some(e) = m.first() {
                            last = Some((e.1, e.2));
                        }
                    }
                }
                _ => return last,
            }
        }
        last
    }
}

/// One step of a path into a [`Located`] document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStep<'a> {
    /// A mapping key.
    Key(&'a str),
    /// A list index.
    Index(usize),
}

/// Parses YAML with every key's place. `None` when the YAML does not parse (the typed parse
/// reports that).
pub fn locate_yaml(text: &str) -> Option<Located> {
    serde_saphyr::from_str::<YamlTree>(text).ok().map(|t| t.0)
}

struct YamlTree(Located);

/// A map key as text, whatever its scalar type.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a scalar key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for YamlTree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = YamlTree;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<YamlTree, E> {
                Ok(YamlTree(Located::Scalar(Some(v.to_string()))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<YamlTree, E> {
                Ok(YamlTree(Located::Scalar(Some(v.to_string()))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<YamlTree, E> {
                Ok(YamlTree(Located::Scalar(Some(v.to_string()))))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<YamlTree, E> {
                Ok(YamlTree(Located::Scalar(Some(v.to_string()))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<YamlTree, E> {
                Ok(YamlTree(Located::Scalar(Some(v.to_string()))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<YamlTree, E> {
                Ok(YamlTree(Located::Scalar(None)))
            }
            fn visit_none<E: de::Error>(self) -> Result<YamlTree, E> {
                Ok(YamlTree(Located::Scalar(None)))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<YamlTree, D::Error> {
                YamlTree::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<YamlTree, A::Error> {
                let mut items = Vec::new();
                while let Some(YamlTree(v)) = a.next_element()? {
                    items.push(v);
                }
                Ok(YamlTree(Located::Seq(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<YamlTree, A::Error> {
                let mut entries = Vec::new();
                while let Some(k) = a.next_key::<serde_saphyr::Spanned<KeyText>>()? {
                    let YamlTree(v) = a.next_value()?;
                    let (l, c) = (k.referenced.line(), k.referenced.column());
                    entries.push((k.value.0, l as u32, c as u32, v));
                }
                Ok(YamlTree(Located::Map(entries)))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses JSON with every key's place. `None` when the text is not JSON.
pub fn locate_json(text: &str) -> Option<Located> {
    let mut p = JsonScan {
        s: text.as_bytes(),
        i: 0,
        text,
    };
    let v = p.value(0)?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

/// 1-based line and column (in characters) of byte offset `at` (a char boundary) in `text`.
fn line_col(text: &str, at: usize) -> (u32, u32) {
    let before = &text[..at];
    let line = before.matches('\n').count() as u32 + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, text[start..at].chars().count() as u32 + 1)
}

struct JsonScan<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl JsonScan<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Option<Located> {
        // Deeper than any manifest: refuse rather than recurse without bound.
        if depth > 256 {
            return None;
        }
        self.ws();
        match *self.s.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut entries = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Some(Located::Map(entries));
                }
                loop {
                    self.ws();
                    let at = self.i;
                    let key = self.string()?;
                    let (l, c) = line_col(self.text, at);
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return None;
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    entries.push((key, l, c, v));
                    self.ws();
                    match self.s.get(self.i)? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(Located::Map(entries));
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Some(Located::Seq(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.s.get(self.i)? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(Located::Seq(items));
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(|s| Located::Scalar(Some(s))),
            _ => {
                let start = self.i;
                while self.i < self.s.len()
                    && !matches!(
                        self.s[self.i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.i += 1;
                }
                let word = self.text.get(start..self.i)?;
                match word {
                    "" => None,
                    "null" => Some(Located::Scalar(None)),
                    w => Some(Located::Scalar(Some(w.to_string()))),
                }
            }
        }
    }

    /// A JSON string at `self.i`, unescaped through serde_json.
    fn string(&mut self) -> Option<String> {
        if self.s.get(self.i) != Some(&b'"') {
            return None;
        }
        let start = self.i;
        self.i += 1;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return serde_json::from_str(self.text.get(start..self.i)?).ok();
                }
                _ => self.i += 1,
            }
        }
        None
    }
}

// ---------------------------------------------------------------------------------------------
// The check.

/// An unknown key found by [`unknown_keys`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// Dotted path of the mapping holding it (`permissions`, `configOptions[0]`), empty at top.
    pub parent: String,
    /// The key as written.
    pub key: String,
    /// 1-based line and column of the key.
    pub line: u32,
    /// See `line`.
    pub column: u32,
    /// The closest known key, if one is close.
    pub suggestion: Option<String>,
    /// Every key allowed there.
    pub known: Vec<&'static str>,
}

/// Whether the document opts into tolerance (`formatVersion` above [`FORMAT_VERSION`]).
pub fn tolerant(doc: &Located) -> bool {
    matches!(doc.get(VERSION_KEY), Some(Located::Scalar(Some(v)))
        if v.parse::<u64>().is_ok_and(|n| n > FORMAT_VERSION))
}

/// Every key of `doc` that `shape` does not allow (none when the document is [`tolerant`]).
pub fn unknown_keys(doc: &Located, shape: &Shape) -> Vec<UnknownKey> {
    let mut out = Vec::new();
    if !tolerant(doc) {
        walk(doc, shape, String::new(), true, &mut out);
    }
    out
}

fn walk(doc: &Located, shape: &Shape, path: String, top: bool, out: &mut Vec<UnknownKey>) {
    match (shape, doc) {
        (Shape::Keys { known, children }, Located::Map(entries)) => {
            for (k, line, column, v) in entries {
                if top && k == VERSION_KEY {
                    continue;
                }
                if !known.iter().any(|n| n == k) {
                    out.push(UnknownKey {
                        parent: path.clone(),
                        key: k.clone(),
                        line: *line,
                        column: *column,
                        suggestion: crate::suggest::closest(k, known),
                        known: known.clone(),
                    });
                    continue;
                }
                if let Some((_, s)) = children.iter().find(|(n, _)| n == k) {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(v, s, p, false, out);
                }
            }
        }
        (Shape::Seq(s), Located::Seq(items)) => {
            for (i, v) in items.iter().enumerate() {
                walk(v, s, format!("{path}[{i}]"), false, out);
            }
        }
        (Shape::Tagged { tag, variants }, Located::Map(entries)) => {
            let Some(Located::Scalar(Some(name))) = doc.get(tag) else {
                return;
            };
            let Some((_, keys)) = variants.iter().find(|(v, _)| v == name) else {
                return;
            };
            let mut known = keys.clone();
            known.push(tag);
            walk(
                doc,
                &Shape::Keys {
                    known,
                    children: Vec::new(),
                },
                path,
                false,
                out,
            );
            let _ = entries;
        }
        (Shape::Either(a, b), _) => {
            let is_seq = matches!(doc, Located::Seq(_));
            let pick = if matches!(**a, Shape::Seq(_)) == is_seq {
                a
            } else {
                b
            };
            walk(doc, pick, path, top, out);
        }
        (Shape::Values(s), Located::Map(entries)) => {
            for (k, _, _, v) in entries {
                walk(v, s, format!("{path}.{k}"), false, out);
            }
        }
        _ => {}
    }
}

impl UnknownKey {
    /// This key as a [`Problem`] in `file`; `what` names the document (`plugin.yaml`).
    pub fn problem(&self, file: &Path, what: &str) -> Problem {
        let place = if self.parent.is_empty() {
            what.to_string()
        } else {
            format!("{what} `{}`", self.parent)
        };
        let mut p = Problem::new(file, format!("unknown key `{}` in {place}", self.key))
            .at(self.line, Some(self.column));
        let mut known: Vec<&str> = self.known.clone();
        known.sort_unstable();
        known.dedup();
        let list = known.join(", ");
        p = match &self.suggestion {
            Some(s) => p.hint(format!("did you mean `{s}`? known keys: {list}")),
            None => p.hint(format!(
                "known keys: {list}; a file written for a newer tavern may declare `{VERSION_KEY}: {}` to have unknown keys ignored",
                FORMAT_VERSION + 1
            )),
        };
        p
    }
}

/// Checks JSON `text` against `shape`: one problem per unknown key.
pub fn check_json(text: &str, file: &Path, what: &str, shape: &Shape) -> Vec<Problem> {
    match locate_json(text) {
        Some(doc) => unknown_keys(&doc, shape)
            .iter()
            .map(|u| u.problem(file, what))
            .collect(),
        None => Vec::new(),
    }
}

/// Every top-level key of an agent profile (`agents/*.json`): tavern's fields and the rest of
/// seed 002's (`version`, `subscribed_event_types` …, kept but not acted on). Anything else
/// is a problem with its line, column and a did-you-mean, like a typo in `plugin.yaml`.
pub const AGENT_PROFILE_KEYS: &[&str] = &[
    "id",
    "name",
    "description",
    "core_deliberation_workflow_id",
    "initial_private_state_values",
    "tool_ids_inventory",
    "skill_workflow_ids_inventory",
    "instructions",
    "tool_call_format",
    "call_format",
    "manual_style",
    "llm",
    "max_turns",
    "max_tool_calls",
    "repeat_limit",
    // The seed's profile fields tavern keeps but does not act on.
    "version",
    "schema_version",
    "initial_private_state_schema",
    "knowledge_base_references",
    "subscribed_event_types",
    "initial_goals_reference",
];

/// The types JSON Schema knows.
pub const SCHEMA_TYPES: &[&str] = &[
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// Every `type` in the JSON Schema at `path` of `doc` that names no JSON Schema type, as a
/// problem at that `type` key listing the valid types (and the closest one).
pub fn schema_type_problems(doc: &Located, path: &[PathStep<'_>], file: &Path) -> Vec<Problem> {
    let mut here = doc;
    for step in path {
        let next = match (step, here) {
            (PathStep::Key(k), Located::Map(_)) => here.get(k),
            (PathStep::Index(i), Located::Seq(items)) => items.get(*i),
            _ => None,
        };
        match next {
            Some(n) => here = n,
            None => return Vec::new(),
        }
    }
    let mut out = Vec::new();
    schema_walk(here, file, &mut out);
    out
}

fn schema_walk(node: &Located, file: &Path, out: &mut Vec<Problem>) {
    match node {
        Located::Map(entries) => {
            for (k, line, column, v) in entries {
                // Values, not schemas: a `type` key inside them is data.
                if matches!(k.as_str(), "default" | "const" | "enum" | "examples") {
                    continue;
                }
                if k == "type" {
                    let names: Vec<&str> = match v {
                        Located::Scalar(Some(t)) => vec![t.as_str()],
                        Located::Seq(items) => items
                            .iter()
                            .filter_map(|i| match i {
                                Located::Scalar(Some(t)) => Some(t.as_str()),
                                _ => None,
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    for t in names {
                        if !SCHEMA_TYPES.contains(&t) {
                            let mut hint = format!("valid types: {}", SCHEMA_TYPES.join(", "));
                            if let Some(s) = crate::suggest::closest(t, SCHEMA_TYPES) {
                                hint = format!("did you mean '{s}'? {hint}");
                            }
                            out.push(
                                Problem::new(
                                    file,
                                    format!("schema type '{t}' is not a JSON Schema type"),
                                )
                                .at(*line, Some(*column))
                                .hint(hint),
                            );
                        }
                    }
                    continue;
                }
                schema_walk(v, file, out);
            }
        }
        Located::Seq(items) => items.iter().for_each(|i| schema_walk(i, file, out)),
        Located::Scalar(_) => {}
    }
}

/// A YAML key indented unlike its siblings (a one-space slip), which YAML silently reads as
/// part of the previous value or refuses with a message about something else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndentSlip {
    /// The key as written.
    pub key: String,
    /// 1-based line of the slipped key.
    pub line: u32,
    /// 1-based column where it starts.
    pub column: u32,
    /// 1-based column where its siblings start.
    pub expected: u32,
    /// The line of the value YAML took it to continue.
    pub previous_line: u32,
    /// The key is indented with a tab (YAML indents with spaces only).
    pub tab: bool,
}

/// Finds the first key of block YAML `text` that is indented like no open mapping and follows
/// a key with a value on the line before (so it cannot open a nested mapping).
pub fn yaml_indent_slip(text: &str) -> Option<IndentSlip> {
    // Open key columns (0-based), innermost last.
    let mut open: Vec<usize> = Vec::new();
    // The previous key line: its number and whether its value is on the line (a scalar).
    let mut prev: Option<(u32, bool)> = None;
    // Inside a `|` / `>` block scalar owned by a key at this column.
    let mut block: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i as u32 + 1;
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if let Some(b) = block {
            if indent > b {
                continue;
            }
            block = None;
        }
        // `- - key:` items: the key starts after the dashes.
        let mut rest = trimmed;
        let mut dashed = false;
        while let Some(r) = rest.strip_prefix("- ") {
            dashed = true;
            rest = r.trim_start();
        }
        let col = line.len() - rest.len();
        if line[..col].contains('\t') {
            // YAML refuses tabs in indentation, whatever the key.
            let key = yaml_key_line(rest).map_or(rest, |(k, _)| k);
            return Some(IndentSlip {
                key: key.to_string(),
                line: n,
                column: col as u32 + 1,
                expected: open.last().map_or(1, |&c| c as u32 + 1),
                previous_line: prev.map_or(n, |(l, _)| l),
                tab: true,
            });
        }
        let Some((key, value)) = yaml_key_line(rest) else {
            prev = None;
            continue;
        };
        let mut popped = None;
        while open.last().is_some_and(|&c| c > col) {
            popped = open.pop();
        }
        if open.last() != Some(&col) {
            if let (Some((pl, true)), false) = (prev, dashed) {
                let expected = popped.or(open.last().copied()).unwrap_or(0);
                return Some(IndentSlip {
                    key: key.to_string(),
                    line: n,
                    column: col as u32 + 1,
                    expected: expected as u32 + 1,
                    previous_line: pl,
                    tab: false,
                });
            }
            open.push(col);
        }
        let v = value.trim();
        if v.starts_with('|') || v.starts_with('>') {
            block = Some(col);
        }
        prev = Some((n, !v.is_empty() && !v.starts_with('#')));
    }
    None
}

/// `key: value` → (key, value) for a plain or quoted key.
fn yaml_key_line(s: &str) -> Option<(&str, &str)> {
    let end = if s.starts_with('"') || s.starts_with('\'') {
        let q = s.as_bytes()[0] as char;
        s[1..].find(q)? + 2
    } else {
        s.find(|c: char| c == ':' || c.is_whitespace())?
    };
    let (key, after) = s.split_at(end);
    let after = after.trim_start();
    let value = after.strip_prefix(':')?;
    if !(value.is_empty() || value.starts_with(' ') || value.starts_with('\t')) {
        return None;
    }
    Some((key.trim_matches(|c| c == '"' || c == '\''), value))
}

impl IndentSlip {
    /// The slip as a problem in `file`; `parser_said` is the YAML or shape error it caused.
    pub fn problem(&self, file: &Path, parser_said: &str) -> Problem {
        if self.tab {
            return Problem::new(
                file,
                format!(
                    "`{}` is indented with a tab; YAML indents with spaces only",
                    self.key
                ),
            )
            .at(self.line, Some(self.column))
            .hint(format!(
                "replace the tab on line {} with spaces; the YAML parser reports: {parser_said}",
                self.line
            ));
        }
        let (got, want) = (self.column - 1, self.expected - 1);
        Problem::new(
            file,
            format!(
                "`{}` is indented {got} space{} but the keys beside it are indented {want}, so YAML does not read it as their sibling",
                self.key,
                if got == 1 { "" } else { "s" },
            ),
        )
        .at(self.line, Some(self.column))
        .hint(format!(
            "indent line {} like the keys above it (column {}); as written YAML reads it as part of the value on line {} and then reports: {parser_said}",
            self.line, self.expected, self.previous_line
        ))
    }
}

/// Several problems of one file as one (for loaders that keep one problem per file): the
/// first, with the places of the others added to its hint.
pub fn merge(mut problems: Vec<Problem>) -> Option<Problem> {
    if problems.is_empty() {
        return None;
    }
    let first = problems.remove(0);
    if problems.is_empty() {
        return Some(first);
    }
    let rest: Vec<String> = problems
        .iter()
        .map(|p| match p.line {
            Some(l) => format!("line {l}: {}", p.message),
            None => p.message.clone(),
        })
        .collect();
    let hint = match &first.hint {
        Some(h) => format!("{h}; also {}", rest.join("; ")),
        None => format!("also {}", rest.join("; ")),
    };
    Some(first.hint(hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Sample {
        display_name: String,
        #[serde(rename = "type")]
        kind: String,
        plain: u8,
    }

    #[test]
    fn fields_come_from_the_struct() {
        assert_eq!(fields_of::<Sample>(), &["displayName", "type", "plain"]);
        assert!(fields_of::<serde_json::Value>().is_empty());
    }

    #[test]
    fn yaml_keys_have_places() {
        let y = "a: 1\nb:\n  c: x\n  d: [1, 2]\n";
        let doc = locate_yaml(y).unwrap();
        assert_eq!(doc.key_at("b"), Some((2, 1)));
        assert_eq!(doc.get("b").unwrap().key_at("d"), Some((4, 3)));
    }

    #[test]
    fn json_keys_have_places() {
        let j = "{\n  \"a\": 1,\n  \"b\": {\"c\": [1, {\"d\": \"x\\\"\"}]}\n}";
        let doc = locate_json(j).unwrap();
        assert_eq!(doc.key_at("b"), Some((3, 3)));
        assert_eq!(
            doc.place(&[PathStep::Key("b"), PathStep::Key("c"), PathStep::Index(1)]),
            Some((3, 19))
        );
        assert!(locate_json("{\"a\": }").is_none());
    }

    #[test]
    fn unknown_keys_are_found_with_suggestions_and_tolerance() {
        let shape = Shape::keys(&["name", "permissions"])
            .child("permissions", Shape::keys(&["processes", "fs"]));
        let y = "name: x\npermissions:\n  proceses: true\nextra: 1\n";
        let doc = locate_yaml(y).unwrap();
        let u = unknown_keys(&doc, &shape);
        assert_eq!(u.len(), 2, "{u:?}");
        assert_eq!(
            (u[0].key.as_str(), u[0].line, u[0].column),
            ("proceses", 3, 3)
        );
        assert_eq!(u[0].suggestion.as_deref(), Some("processes"));
        assert_eq!(u[0].parent, "permissions");
        assert_eq!(u[1].suggestion, None);
        let p = u[0]
            .problem(Path::new("plugin.yaml"), "plugin.yaml")
            .to_string();
        assert!(
            p.starts_with("plugin.yaml:3:3: unknown key `proceses` in plugin.yaml `permissions`"),
            "{p}"
        );
        assert!(p.contains("did you mean `processes`?"), "{p}");
        let newer = format!("{VERSION_KEY}: 2\n{y}");
        assert!(unknown_keys(&locate_yaml(&newer).unwrap(), &shape).is_empty());
        let same = format!("{VERSION_KEY}: 1\n{y}");
        assert_eq!(unknown_keys(&locate_yaml(&same).unwrap(), &shape).len(), 2);
    }
}

#[cfg(test)]
mod slip_tests {
    use super::*;

    #[test]
    fn one_space_slips_are_found_and_good_yaml_is_left_alone() {
        // (yaml, (key, line, column, expected column) of the slip).
        type Want = Option<(&'static str, u32, u32, u32)>;
        let cases: &[(&str, Want)] = &[
            ("name: x\nconfigOptions:\n  - id: root\n   type: string\n", Some(("type", 4, 4, 5))),
            ("name: x\nconfigOptions:\n  - id: root\n     type: string\n", Some(("type", 4, 6, 5))),
            ("a:\n  b: 1\n   c: 2\n", Some(("c", 3, 4, 3))),
            ("a:\n  fs:\n    read: []\n   write: []\n", Some(("write", 4, 4, 5))),
            ("name: x\nconfigOptions:\n  - id: root\n    type: string\n  - id: b\n    type: integer\n", None),
            ("a: |\n  text: with colon\n   more: x\nb: 1\n", None),
            ("a:\n  b:\n    c: 1\nd: 2\n", None),
            ("- a: 1\n  b: 2\n- - c: 3\n    d: 4\n", None),
        ];
        for (y, want) in cases {
            let got = yaml_indent_slip(y).map(|s| (s.key.clone(), s.line, s.column, s.expected));
            let got = got.as_ref().map(|(k, l, c, e)| (k.as_str(), *l, *c, *e));
            assert_eq!(got, *want, "{y}");
        }
    }
}
