//! A call's arguments: a JSON object that a reader may keep as the text it was written
//! in, checked, and build into a `Map` only when something looks at it.
//!
//! Why: building a `serde_json` tree costs several allocations per key and value, and
//! for the JSON-shaped native formats it was most of the reading time (issue 25). A
//! reader keeps a JSON object's text only when building it later cannot fail: the same
//! parser that would build it has walked it ([`Args::from_object_text`]), or it is valid
//! JSON too short and plain to fail (`surely_builds`).
//! A host that runs the call pays for the tree once, when the call's arguments are first
//! read; one that only counts or forwards calls never does. Arguments written in another
//! syntax (pythonic calls) are kept the same way, as their checked source text, with the
//! reader's function that writes that text as JSON ([`Args::from_source`]).
//!
//! Like `types.rs`, this file imports nothing else of `protocol`.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The arguments of one [`Call`](crate::Call): keys as written, values as read.
///
/// It dereferences to a `serde_json::Map`, so `args["path"]`, `args.get("path")`,
/// `args.iter()` and `args.remove("path")` work as on a map. Compare it with a map with
/// `==`; turn it into one with [`Args::into_map`] or `Value::from`.
pub struct Args {
    /// The object as it was written, checked to be one `Map` holds (see
    /// [`Args::from_object_text`]); `None` for arguments built as a map and once the map
    /// was changed through [`DerefMut`].
    text: Option<Arc<str>>,
    /// How `text` is read into the map: a reference to a static, so it costs a pointer.
    reading: &'static Reading,
    /// The map, built from `text` on first use when there is text. Boxed so a `Call`
    /// stays small to move while readers collect them.
    map: OnceLock<Box<Map<String, Value>>>,
}

/// How kept text is read into an [`Args`]' map.
pub(crate) struct Reading {
    /// Writes the kept text, source text of another syntax, as the JSON object it means
    /// (UTF-8); `None` when the text is JSON.
    to_json: Option<fn(&str) -> Vec<u8>>,
    /// True when the text is an object of strings each of which is a value written as
    /// text (see [`Args::from_texts`]): the map reads each one with [`typed`].
    values_as_text: bool,
}

impl Reading {
    /// Text of another syntax, which `to_json` writes as the JSON object it means. The
    /// function must accept every text its reader keeps ([`Args::from_source`]).
    pub(crate) const fn source(to_json: fn(&str) -> Vec<u8>) -> Reading {
        Reading {
            to_json: Some(to_json),
            values_as_text: false,
        }
    }
}

/// The text is the JSON object.
static JSON: Reading = Reading {
    to_json: None,
    values_as_text: false,
};

/// The text is a JSON object of values written as text.
static TEXTS: Reading = Reading {
    to_json: None,
    values_as_text: true,
};

impl Default for Args {
    fn default() -> Self {
        Args {
            text: None,
            reading: &JSON,
            map: OnceLock::new(),
        }
    }
}

impl Args {
    /// No arguments.
    pub fn new() -> Self {
        Args::default()
    }

    /// Arguments kept as the text of a JSON object, or `None` when `text` is not one
    /// that a `serde_json::Map` can hold (not an object, not JSON, nested deeper than
    /// serde_json's limit, a number out of range, a lone surrogate escape). The check
    /// runs serde_json's own parser over the text without building anything, so the
    /// map built later is exactly the one `serde_json::from_str` would give now.
    pub fn from_object_text(text: &str) -> Option<Args> {
        match serde_json::from_str::<Check>(text) {
            Ok(Check::Object) => Some(Args {
                text: Some(Arc::from(text)),
                reading: &JSON,
                map: OnceLock::new(),
            }),
            _ => None,
        }
    }

    /// Arguments kept as `text`, one valid JSON value (a `RawValue` serde_json has read,
    /// or what the tolerant reader wrote): `None` when it is not an object,
    /// or is one a `Map` cannot hold. Short text without a `\u` escape or an exponent
    /// skips [`from_object_text`](Self::from_object_text)'s check, which could not fail
    /// there (see `surely_builds`).
    pub(crate) fn from_read_json(text: &str) -> Option<Args> {
        if !text.starts_with('{') {
            return None;
        }
        if !surely_builds(text.as_bytes()) {
            return Args::from_object_text(text);
        }
        Some(Args {
            text: Some(Arc::from(text)),
            reading: &JSON,
            map: OnceLock::new(),
        })
    }

    /// Arguments kept as `source`, text of another syntax that a reader has checked,
    /// which `reading`'s function writes, when the map is first needed, as a JSON object
    /// a `Map` holds (the pythonic reader's literal writer: nested at most 101 deep,
    /// finite numbers, no lone surrogate). Reading only checks; writing JSON waits.
    pub(crate) fn from_source(source: &str, reading: &'static Reading) -> Args {
        debug_assert!(reading.to_json.is_some_and(|f| matches!(
            serde_json::from_slice::<Check>(&f(source)),
            Ok(Check::Object)
        )));
        Args {
            text: Some(Arc::from(source)),
            reading,
            map: OnceLock::new(),
        }
    }

    /// The arguments of a call whose values were written as text, kept as `object`: a
    /// JSON object of strings, each value as written (the caller wrote it, so it builds).
    /// The map reads each value with no schema ([`typed`]); [`Args::texts`] gives the
    /// values as written.
    pub(crate) fn from_texts(object: &str) -> Args {
        Args {
            text: Some(Arc::from(object)),
            reading: &TEXTS,
            map: OnceLock::new(),
        }
    }

    /// For arguments [`from_texts`](Self::from_texts): the values as written, sharing
    /// the text; `None` for any other arguments, and once the map was changed.
    pub(crate) fn texts(&self) -> Option<Args> {
        match &self.text {
            Some(t) if self.reading.values_as_text => Some(Args {
                text: Some(t.clone()),
                reading: &JSON,
                map: OnceLock::new(),
            }),
            _ => None,
        }
    }

    /// Reads the one JSON value at the start of `s` (text may follow it): `Some` of the
    /// arguments when it is an object a `Map` holds, else `None`; and where the value
    /// ends. `None` when serde_json cannot read a value there.
    pub(crate) fn read_value(s: &str) -> Option<(Option<Args>, usize)> {
        let mut de =
            serde_json::Deserializer::from_str(s).into_iter::<&serde_json::value::RawValue>();
        let raw = de.next()?.ok()?;
        let end = de.byte_offset();
        if !raw.get().starts_with('{') {
            return Some((None, end));
        }
        Some((Some(Args::from_read_json(raw.get())?), end))
    }

    /// The JSON text the arguments were read from, while they are kept as written (not
    /// for arguments written in another syntax, such as a pythonic call's).
    pub fn as_written(&self) -> Option<&str> {
        self.text
            .as_deref()
            .filter(|_| std::ptr::eq(self.reading, &JSON))
    }

    /// The arguments as a map.
    pub fn into_map(mut self) -> Map<String, Value> {
        match self.map.take() {
            Some(m) => *m,
            None => self.build(),
        }
    }

    /// The map of the kept text (empty when there is none).
    fn build(&self) -> Map<String, Value> {
        let Some(text) = self.text.as_deref() else {
            return Map::new();
        };
        let mut m = match self.reading.to_json {
            Some(to_json) => build_written(&to_json(text)),
            None => build(text),
        };
        if self.reading.values_as_text {
            for v in m.values_mut() {
                if let Value::String(s) = v {
                    if let Some(t) = typed(s) {
                        *v = t;
                    }
                }
            }
        }
        m
    }

    /// A copy of the arguments as a map: the built map's copy when it was built, else
    /// built from the text (and not kept).
    pub fn to_map(&self) -> Map<String, Value> {
        match self.map.get() {
            Some(m) => (**m).clone(),
            None => self.build(),
        }
    }
}

/// True when serde_json is sure to build a map from `t`, a valid JSON object. Building a value fails where merely reading one does not in only three
/// ways: nesting past 127 levels (at least 256 bytes of brackets), a number out of
/// `f64`'s range (an exponent, or over 300 digits), and a `\u` escape of a lone
/// surrogate. Text under 250 bytes with no `\u` and no digit followed by `e`/`E` has
/// none of them; anything else (strings that merely look so included) gets the full check.
fn surely_builds(t: &[u8]) -> bool {
    if t.len() >= 250 {
        return false;
    }
    if memchr::memchr_iter(b'\\', t).any(|i| t.get(i + 1) == Some(&b'u')) {
        return false;
    }
    !memchr::memchr2_iter(b'e', b'E', t)
        .any(|i| i > 0 && (t[i - 1].is_ascii_digit() || t[i - 1] == b'.'))
}

/// A value written as text, read with no schema: `Some` of the JSON literal it is
/// (number, `true`, `null`, object, array, quoted string), `None` when it is none (it
/// stays the string).
pub(crate) fn typed(t: &str) -> Option<Value> {
    match t.trim_start().as_bytes().first() {
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
            serde_json::from_str(t).ok()
        }
        _ => None,
    }
}

/// True when `t` is a JSON literal [`typed`] reads as a value, checked without building
/// it (except a string, rare in a bare value).
pub(crate) fn is_literal(t: &str) -> bool {
    match t.trim_start().as_bytes().first() {
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
            serde_json::from_str::<Check>(t).is_ok()
        }
        _ => false,
    }
}

/// The map of text [`Args::from_object_text`] or [`Args::from_read_json`] accepted.
fn build(text: &str) -> Map<String, Value> {
    // Cannot fail: `from_object_text` ran this parser over this text and it read an
    // object (every failure of `Value` parsing fails `Check` too), or it is valid JSON
    // and `surely_builds` holds.
    serde_json::from_str(text).expect("arguments text was checked when it was read")
}

/// The map of the JSON a source's reading wrote (see [`Args::from_source`]).
fn build_written(json: &[u8]) -> Map<String, Value> {
    // Cannot fail: `from_source` is given only text its reading writes as an object a
    // map holds.
    serde_json::from_slice(json).expect("a source's reading writes an object a map holds")
}

impl Deref for Args {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Map<String, Value> {
        self.map.get_or_init(|| Box::new(self.build()))
    }
}

impl DerefMut for Args {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        // Builds the map (through `Deref`) when only the text is there.
        let _: &Map<String, Value> = self;
        // The map is the truth from now on: the text would no longer match it.
        self.text = None;
        self.reading = &JSON;
        self.map
            .get_mut()
            .expect("the line above filled the map")
            .as_mut()
    }
}

impl Clone for Args {
    fn clone(&self) -> Self {
        match &self.text {
            // Sharing the text is cheaper than copying a built map; the copy builds its
            // own when it needs one.
            Some(t) => Args {
                text: Some(t.clone()),
                reading: self.reading,
                map: OnceLock::new(),
            },
            None => Args {
                text: None,
                reading: &JSON,
                map: self.map.clone(),
            },
        }
    }
}

impl fmt::Debug for Args {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.deref(), f)
    }
}

impl PartialEq for Args {
    fn eq(&self, other: &Args) -> bool {
        match (&self.text, &other.text) {
            (Some(a), Some(b)) if a == b && std::ptr::eq(self.reading, other.reading) => true,
            _ => self.deref() == other.deref(),
        }
    }
}

impl PartialEq<Map<String, Value>> for Args {
    fn eq(&self, other: &Map<String, Value>) -> bool {
        self.deref() == other
    }
}

impl From<Map<String, Value>> for Args {
    fn from(m: Map<String, Value>) -> Args {
        Args {
            text: None,
            reading: &JSON,
            map: OnceLock::from(Box::new(m)),
        }
    }
}

impl From<Args> for Map<String, Value> {
    fn from(a: Args) -> Self {
        a.into_map()
    }
}

impl From<Args> for Value {
    fn from(a: Args) -> Self {
        Value::Object(a.into_map())
    }
}

impl FromIterator<(String, Value)> for Args {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Args::from(Map::from_iter(iter))
    }
}

impl<'a> IntoIterator for &'a Args {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.deref().iter()
    }
}

impl IntoIterator for Args {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl Serialize for Args {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Through the map, so the output is the same whether the text was kept or not.
        self.deref().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Args {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Args::from)
    }
}

/// What a JSON value is, found by walking it with `deserialize_any` (which parses every
/// number and string and counts nesting exactly as building a `Value` does) while
/// keeping nothing.
enum Check {
    Object,
    Other,
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckVisitor)
    }
}

struct CheckVisitor;

impl<'de> serde::de::Visitor<'de> for CheckVisitor {
    type Value = Check;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Check, A::Error> {
        while m.next_key::<Key>()?.is_some() {
            m.next_value::<Check>()?;
        }
        Ok(Check::Object)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Check, A::Error> {
        while s.next_element::<Check>()?.is_some() {}
        Ok(Check::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Check, E> {
        Ok(Check::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Check, E> {
        Ok(Check::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Check, E> {
        Ok(Check::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Check, E> {
        Ok(Check::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Check, E> {
        Ok(Check::Other)
    }
    fn visit_unit<E>(self) -> Result<Check, E> {
        Ok(Check::Other)
    }
}

/// A map key, parsed (escapes and all) as `Map` parses keys, and dropped.
struct Key;

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, _: &str) -> Result<Key, E> {
                Ok(Key)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Text `from_object_text` keeps builds the map `serde_json` builds; text it
    /// refuses is text `serde_json` refuses as a map.
    #[test]
    fn kept_text_builds_what_serde_json_builds() {
        let deep = format!("{{\"a\": {}1{}}}", "[".repeat(200), "]".repeat(200));
        let long = format!("{{\"n\": 1{}}}", "0".repeat(400));
        let cases = [
            &long,
            r#"{"n": 1E400, "e": "1e400"}"#,
            r#"{"n": 1.5e3, "s": "\\u"}"#,
            r#"{"path": "/a", "n": 1, "r": 0.25, "ok": true, "t": ["a", "b"], "x": null}"#,
            r#"{"k": "esc\u00e9\n", "k": 2}"#,
            r#" { } "#,
            r#"{"n": 18446744073709551616}"#,
            r#"{"n": 1e400}"#,
            r#"{"s": "\ud800"}"#,
            r#"[1, 2]"#,
            r#""text""#,
            r#"{"a": }"#,
            &deep,
        ];
        for t in cases {
            let want = serde_json::from_str::<Map<String, Value>>(t).ok();
            let got = Args::from_object_text(t);
            assert_eq!(got.is_some(), want.is_some(), "{t}");
            // Text serde_json reads whole (as a `RawValue`) is kept exactly when the map
            // builds, with or without the full check.
            if serde_json::from_str::<&serde_json::value::RawValue>(t).is_ok() {
                let quick = Args::from_read_json(t.trim());
                assert_eq!(quick.is_some(), want.is_some(), "{t}");
                if let (Some(q), Some(w)) = (quick, &want) {
                    assert_eq!(*q, *w, "{t}");
                }
            }
            if let (Some(g), Some(w)) = (got, want) {
                assert_eq!(g.as_written(), Some(t));
                assert_eq!(*g, w, "{t}");
                assert_eq!(g.into_map(), w, "{t}");
            }
        }
    }

    #[test]
    fn read_value_reads_one_value_and_says_where_it_ends() {
        let (a, end) = Args::read_value(r#"{"a": [1, "}"]} tail"#).unwrap();
        assert_eq!(end, 15);
        assert_eq!(a.unwrap().as_written(), Some(r#"{"a": [1, "}"]}"#));
        assert!(matches!(Args::read_value("[1] x"), Some((None, 3))));
        assert!(Args::read_value(r#"{"a": 1e400}"#).is_none());
        assert!(Args::read_value(r#"{"a": "#).is_none());
    }

    /// Values written as text: the map reads each JSON literal as its value and anything
    /// else as the string; the texts stay as written; a change drops both the text and
    /// the texts.
    #[test]
    fn values_as_text_are_typed_when_read() {
        let a = Args::from_texts(
            r#"{"n":"42","b":"true","s":"iron","q":"\"x\"","l":"[1, 2]","big":"1e400","k":"1","k":"2"}"#,
        );
        assert_eq!(a.as_written(), None);
        assert_eq!(
            Value::from(a.clone()),
            json!({"n": 42, "b": true, "s": "iron", "q": "x", "l": [1, 2], "big": "1e400", "k": 2})
        );
        let t = a.texts().expect("texts of text values");
        assert_eq!(
            Value::from(t.clone()),
            json!({"n": "42", "b": "true", "s": "iron", "q": "\"x\"", "l": "[1, 2]", "big": "1e400", "k": "2"})
        );
        assert_ne!(t, a);
        assert!(t.texts().is_none());
        let mut changed = a.clone();
        changed.insert("z".into(), json!(0));
        assert!(changed.texts().is_none());
        assert_eq!(changed.to_map().len(), 8);
    }

    /// A test syntax: an object's inside, without its braces.
    fn braced(source: &str) -> Vec<u8> {
        format!("{{{source}}}").into_bytes()
    }
    static BRACED: Reading = Reading::source(braced);

    /// Arguments kept as source text read as the JSON their reading writes; they are not
    /// JSON as written; clones share the source and compare equal; a change drops it.
    #[test]
    fn source_text_is_written_as_json_when_read() {
        let a = Args::from_source(r#""n": 1, "s": "x""#, &BRACED);
        assert_eq!(a.as_written(), None);
        assert!(a.texts().is_none());
        let copy = a.clone();
        assert_eq!(copy, a);
        assert_eq!(Value::from(copy), json!({"n": 1, "s": "x"}));
        assert_eq!(a.to_map(), *json!({"n": 1, "s": "x"}).as_object().unwrap());
        assert_ne!(a, Args::from_source(r#""n": 2"#, &BRACED));
        // Equal as maps although kept as different texts.
        assert_eq!(a, Args::from_object_text(r#"{"n": 1, "s": "x"}"#).unwrap());
        let mut changed = a.clone();
        changed.insert("z".into(), json!(0));
        assert_eq!(changed.as_written(), None);
        assert_eq!(Value::from(changed), json!({"n": 1, "s": "x", "z": 0}));
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"n":1,"s":"x"}"#);
    }

    #[test]
    fn a_change_drops_the_text_and_clones_agree() {
        let mut a = Args::from_object_text(r#"{"a": 1, "b": [true]}"#).unwrap();
        let copy = a.clone();
        assert_eq!(copy, a);
        a.insert("c".into(), json!("x"));
        assert_eq!(a.as_written(), None);
        assert_eq!(
            Value::from(a.clone()),
            json!({"a": 1, "b": [true], "c": "x"})
        );
        assert_ne!(copy, a);
        assert_eq!(copy.as_written(), Some(r#"{"a": 1, "b": [true]}"#));
        assert_eq!(
            serde_json::to_string(&copy).unwrap(),
            r#"{"a":1,"b":[true]}"#
        );
        let back: Args = serde_json::from_str(r#"{"z": 0}"#).unwrap();
        assert_eq!(back, json!({"z": 0}).as_object().unwrap().clone());
        assert_eq!(format!("{back:?}"), format!("{:?}", back.to_map()));
    }
}
