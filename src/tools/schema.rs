//! A tool's parameter schema, compiled once at registration: the `jsonschema` validator plus a
//! precomputed view of the properties (names, normalized names, types, defaults) that drives
//! key matching and string conversion on every call without touching the schema again.
//!
//! Decisions (the issue leaves these open):
//! - Key matching: a key equal to a property name wins; otherwise, in [`KeyMatching::Loose`]
//!   mode, keys are compared lower-cased with `_` and `-` removed (`file_path`, `filePath`,
//!   `FILE-PATH` are one parameter). Two keys naming one property is an error.
//! - An object schema with `properties` and no `additionalProperties` (and no
//!   `patternProperties`) is closed: unknown keys are errors with a suggestion. Models misspell
//!   parameters far more often than they mean to pass extras; `"additionalProperties": true`
//!   opens it.
//! - String conversion (rule 21) is done only where the schema does not accept a string:
//!   integers (`"42"`, `"42.0"`), numbers, booleans (`true`/`false`/`yes`/`no`, any case),
//!   `null`, JSON text for objects and arrays. A lone value where an array is expected becomes
//!   a one-element array (an XML tag written once). Numbers and booleans given for a string
//!   become their text. Surrounding whitespace is ignored when converting.
//! - `default` (and seed 001's `defaultValue`) fills missing optional parameters.

use std::collections::HashMap;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::Validator;
use serde_json::{Map, Number, Value};

/// How argument keys are matched onto the schema's property names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyMatching {
    /// Case-, `_`- and `-`-insensitive (TAM rule 3): `filePath` finds `file_path`.
    #[default]
    Loose,
    /// Names must be written as the schema spells them (seed 002 §5.5: `<ACTION>` XML);
    /// a near miss is refused with a suggestion.
    Exact,
}

const NULL: u8 = 1;
const BOOL: u8 = 2;
const INT: u8 = 4;
const NUM: u8 = 8;
const STR: u8 = 16;
const ARR: u8 = 32;
const OBJ: u8 = 64;

/// What a value should look like, as far as conversion cares. `types == 0` means any.
#[derive(Debug, Default)]
struct Shape {
    types: u8,
    object: Option<Box<ObjectSpec>>,
    items: Option<Box<Shape>>,
}

#[derive(Debug)]
struct Prop {
    name: String,
    shape: Shape,
    default: Option<Value>,
}

/// Ambiguity marker in the loose map: two properties normalize to the same key.
const AMBIGUOUS: usize = usize::MAX;

#[derive(Debug, Default)]
struct ObjectSpec {
    props: Vec<Prop>,
    exact: HashMap<String, usize>,
    loose: HashMap<String, usize>,
    closed: bool,
}

/// A compiled parameter schema.
pub(crate) struct ArgSchema {
    validator: Validator,
    root: ObjectSpec,
}

impl std::fmt::Debug for ArgSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgSchema")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Lower-cases and drops `_` and `-`.
pub fn normalize_key(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    for c in k.chars() {
        if c == '_' || c == '-' {
            continue;
        }
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

fn type_bits(name: &str) -> u8 {
    match name {
        "null" => NULL,
        "boolean" => BOOL,
        "integer" => INT,
        "number" => NUM,
        "string" => STR,
        "array" => ARR,
        "object" => OBJ,
        _ => 0,
    }
}

fn value_bits(v: &Value) -> u8 {
    match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOL,
        Value::Number(n) if n.is_i64() || n.is_u64() => INT,
        Value::Number(_) => NUM,
        Value::String(_) => STR,
        Value::Array(_) => ARR,
        Value::Object(_) => OBJ,
    }
}

fn types_text(bits: u8) -> String {
    let names = [
        (INT, "an integer"),
        (NUM, "a number"),
        (BOOL, "a boolean (true or false)"),
        (STR, "a string"),
        (OBJ, "an object (JSON text like {\"k\": 1})"),
        (ARR, "an array (JSON text like [1, 2])"),
        (NULL, "null"),
    ];
    let parts: Vec<&str> = names
        .iter()
        .filter(|(b, _)| bits & b != 0 && !(*b == INT && bits & NUM != 0))
        .map(|(_, n)| *n)
        .collect();
    match parts.len() {
        0 => "a value".into(),
        1 => parts[0].into(),
        _ => {
            let (last, rest) = parts.split_last().unwrap_or((&"", &[]));
            format!("{} or {last}", rest.join(", "))
        }
    }
}

impl Shape {
    fn from_schema(s: &Value, depth: u32) -> Shape {
        let Some(obj) = s.as_object() else {
            return Shape::default();
        };
        // Deeply nested schemas stop being converted (they are still validated).
        if depth > 32 || obj.contains_key("$ref") {
            return Shape::default();
        }
        let mut shape = Shape::default();
        match obj.get("type") {
            Some(Value::String(t)) => shape.types = type_bits(t),
            Some(Value::Array(ts)) => {
                shape.types = ts
                    .iter()
                    .filter_map(Value::as_str)
                    .map(type_bits)
                    .fold(0, |a, b| a | b)
            }
            _ => {}
        }
        if shape.types == 0 {
            if let Some(Value::Array(branches)) = obj.get("anyOf").or_else(|| obj.get("oneOf")) {
                let mut bits = 0;
                let mut any = false;
                for b in branches {
                    let sub = Shape::from_schema(b, depth + 1);
                    if sub.types == 0 {
                        any = true;
                    }
                    bits |= sub.types;
                    if shape.object.is_none() {
                        shape.object = sub.object;
                    }
                    if shape.items.is_none() {
                        shape.items = sub.items;
                    }
                }
                if !any {
                    shape.types = bits;
                }
            } else if let Some(vals) = obj
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .or_else(|| obj.get("const").map(|c| vec![c.clone()]))
            {
                shape.types = vals.iter().map(value_bits).fold(0, |a, b| a | b);
                if shape.types & INT != 0 {
                    shape.types |= NUM;
                }
            } else if obj.contains_key("properties") {
                shape.types = OBJ;
            } else if obj.contains_key("items") {
                shape.types = ARR;
            }
        }
        if shape.types & INT != 0 && shape.types & NUM == 0 {
            // Keep `INT` alone: "4.5" must not pass for an integer.
        }
        if obj.contains_key("properties") || shape.types & OBJ != 0 {
            if let Some(spec) = ObjectSpec::from_schema(obj, depth + 1) {
                shape.object = Some(Box::new(spec));
            }
        }
        if let Some(items) = obj.get("items") {
            if items.is_object() {
                shape.items = Some(Box::new(Shape::from_schema(items, depth + 1)));
            }
        }
        shape
    }
}

impl ObjectSpec {
    fn from_schema(obj: &Map<String, Value>, depth: u32) -> Option<ObjectSpec> {
        let props = obj.get("properties")?.as_object()?;
        let mut spec = ObjectSpec {
            closed: match obj.get("additionalProperties") {
                None => !props.is_empty() && !obj.contains_key("patternProperties"),
                Some(Value::Bool(b)) => !b,
                Some(_) => false,
            },
            ..ObjectSpec::default()
        };
        for (i, (name, ps)) in props.iter().enumerate() {
            let default = ps
                .get("default")
                .or_else(|| ps.get("defaultValue"))
                .cloned();
            spec.props.push(Prop {
                name: name.clone(),
                shape: Shape::from_schema(ps, depth),
                default,
            });
            spec.exact.insert(name.clone(), i);
            spec.loose
                .entry(normalize_key(name))
                .and_modify(|e| *e = AMBIGUOUS)
                .or_insert(i);
        }
        Some(spec)
    }
}

/// Why a schema cannot be registered.
fn schema_problem(parameters: &Value) -> Option<String> {
    let Some(obj) = parameters.as_object() else {
        return Some(format!(
            "`parameters` must be a JSON Schema object like {{\"type\": \"object\", \"properties\": {{…}}}}, got {}",
            brief(parameters)
        ));
    };
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(Value::Array(ts)) if ts.iter().any(|t| t == "object") => {}
        Some(t) => {
            return Some(format!(
                "`parameters` must describe an object (\"type\": \"object\"), found \"type\": {t}"
            ))
        }
    }
    if let (Some(Value::Array(req)), Some(Value::Object(props))) =
        (obj.get("required"), obj.get("properties"))
    {
        for r in req {
            if let Some(r) = r.as_str() {
                if !props.contains_key(r) {
                    return Some(format!(
                        "required parameter '{r}' is not declared under `properties`"
                    ));
                }
            }
        }
    }
    None
}

impl ArgSchema {
    /// The top-level keys of `args` that name a parameter only loosely (`guestName` for
    /// `guest_name`): (as written, the parameter's name). Empty when every key is written
    /// as the schema spells it.
    pub fn loose_keys(&self, args: &Value) -> Vec<(String, String)> {
        let (Some(m), spec) = (args.as_object(), &self.root) else {
            return Vec::new();
        };
        m.keys()
            .filter(|k| spec.exact_index(k).is_none())
            .filter_map(|k| match spec.loose.get(&normalize_key(k)) {
                Some(&i) if i != AMBIGUOUS => Some((k.clone(), spec.props[i].name.clone())),
                _ => None,
            })
            .collect()
    }

    /// Compiles a parameter schema; the error says what is wrong with it.
    pub(crate) fn compile(parameters: &Value) -> Result<ArgSchema, String> {
        if let Some(p) = schema_problem(parameters) {
            return Err(p);
        }
        let validator = jsonschema::options().build(parameters).map_err(|e| {
            let at = e.instance_path().as_str();
            if at.is_empty() {
                format!("invalid JSON Schema in `parameters`: {e}")
            } else {
                format!("invalid JSON Schema in `parameters` at '{at}': {e}")
            }
        })?;
        let root = parameters
            .as_object()
            .and_then(|o| ObjectSpec::from_schema(o, 0))
            .unwrap_or_default();
        Ok(ArgSchema { validator, root })
    }

    /// Matches keys, converts strings, fills defaults and validates. The result is the
    /// arguments object a handler sees; the error is one sentence per problem.
    pub fn prepare(&self, args: Value, mode: KeyMatching) -> Result<Value, Vec<String>> {
        let map = match args {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            Value::String(s) if s.trim().is_empty() => Map::new(),
            Value::String(s) => match serde_json::from_str::<Value>(&s) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return Err(vec![format!(
                        "the arguments must be a JSON object, got {}",
                        brief(&Value::String(s))
                    )])
                }
            },
            other => {
                return Err(vec![format!(
                    "the arguments must be a JSON object, got {}",
                    brief(&other)
                )])
            }
        };
        let mut cx = Cx {
            mode,
            problems: Vec::new(),
            reported: Vec::new(),
            suggested: Vec::new(),
        };
        let value = Value::Object(coerce_object(map, &self.root, &Path::Root, &mut cx));
        if self.validator.is_valid(&value) {
            if cx.problems.is_empty() {
                return Ok(value);
            }
            return Err(cx.problems);
        }
        for err in self.validator.iter_errors(&value) {
            let at = path_text(err.instance_path().iter());
            if cx.reported.iter().any(|r| {
                at == *r || at.starts_with(&format!("{r}.")) || at.starts_with(&format!("{r}["))
            }) {
                continue;
            }
            let msg = match err.kind() {
                ValidationErrorKind::Required { property } => {
                    let name = property
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| property.to_string());
                    let full = join_path(&at, &name);
                    if cx.suggested.contains(&full) {
                        continue;
                    }
                    format!("missing required parameter '{full}'")
                }
                ValidationErrorKind::AdditionalProperties { unexpected } => {
                    if !cx.problems.is_empty() {
                        continue;
                    }
                    let names: Vec<String> = unexpected
                        .iter()
                        .map(|u| format!("'{}'", join_path(&at, u)))
                        .collect();
                    format!("unknown parameter {}", names.join(", "))
                }
                ValidationErrorKind::Type { kind } => {
                    let bits = match kind {
                        TypeKind::Single(t) => type_bits(t.as_str()),
                        TypeKind::Multiple(set) => set
                            .iter()
                            .map(|t| type_bits(t.as_str()))
                            .fold(0, |a, b| a | b),
                    };
                    format!(
                        "{} must be {}, got {}",
                        subject(&at),
                        types_text(bits),
                        brief(err.instance())
                    )
                }
                ValidationErrorKind::Enum { options } => format!(
                    "{} must be one of {}, got {}",
                    subject(&at),
                    brief(options),
                    brief(err.instance())
                ),
                ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
                    format!(
                        "{} does not match any of the allowed forms, got {}",
                        subject(&at),
                        brief(err.instance())
                    )
                }
                _ => format!("{}: {}", subject(&at), truncate(&err.to_string(), 160)),
            };
            if !cx.problems.contains(&msg) {
                cx.problems.push(msg);
            }
        }
        if cx.problems.is_empty() {
            // The validator said no but every error was folded into an earlier one.
            cx.problems
                .push("the arguments do not match the tool's schema".into());
        }
        Err(cx.problems)
    }
}

struct Cx {
    mode: KeyMatching,
    problems: Vec<String>,
    /// Parameter paths already reported (their validator errors are dropped).
    reported: Vec<String>,
    /// Properties offered as "did you mean": a missing-required error for them is the same
    /// mistake and is not repeated.
    suggested: Vec<String>,
}

/// Where a value sits, as a linked list on the stack: building it costs nothing; it is
/// only turned into text (`meta.tags[0]`) when there is a problem to report.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn text(&self) -> String {
        match self {
            Path::Root => String::new(),
            Path::Key(parent, k) => join_path(&parent.text(), k),
            Path::Index(parent, i) => format!("{}[{i}]", parent.text()),
        }
    }
}

fn path_text<'a>(segs: impl Iterator<Item = LocationSegment<'a>>) -> String {
    let mut s = String::new();
    for seg in segs {
        match seg {
            LocationSegment::Property(p) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(&p);
            }
            LocationSegment::Index(i) => {
                s.push('[');
                s.push_str(&i.to_string());
                s.push(']');
            }
        }
    }
    s
}

fn join_path(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

fn subject(at: &str) -> String {
    if at.is_empty() {
        "the arguments".into()
    } else {
        format!("parameter '{at}'")
    }
}

/// Cuts text to `max` characters, marking the cut.
pub fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// A value as compact JSON, cut to 80 characters, for messages.
pub fn brief(v: &Value) -> String {
    truncate(&v.to_string(), 80)
}

impl ObjectSpec {
    /// The property a key names exactly. Small objects are scanned (cheaper than hashing).
    fn exact_index(&self, k: &str) -> Option<usize> {
        if self.props.len() <= 8 {
            self.props.iter().position(|p| p.name == k)
        } else {
            self.exact.get(k).copied()
        }
    }
}

fn coerce_object(
    mut map: Map<String, Value>,
    spec: &ObjectSpec,
    path: &Path<'_>,
    cx: &mut Cx,
) -> Map<String, Value> {
    // Fast path: every key is written as the schema spells it, or is an extra key an open
    // object accepts as it is; values are converted in place and the map is kept.
    let fast = map.keys().all(|k| {
        spec.exact_index(k).is_some()
            || (!spec.closed
                && (cx.mode == KeyMatching::Exact || !spec.loose.contains_key(&normalize_key(k))))
    });
    if fast {
        for (k, v) in map.iter_mut() {
            if let Some(i) = spec.exact_index(k) {
                let prop = &spec.props[i];
                let child = Path::Key(path, &prop.name);
                *v = coerce(std::mem::take(v), &prop.shape, &child, cx);
            }
        }
        fill_defaults(&mut map, spec);
        return map;
    }
    let mut out = Map::with_capacity(map.len().max(spec.props.len()));
    // For each property: the key that named it, when one did.
    let mut seen: Vec<Option<String>> = vec![None; spec.props.len()];
    let mut unknown: Vec<String> = Vec::new();
    for (k, v) in map {
        let idx = match spec.exact_index(&k) {
            Some(i) => Some(i),
            None if cx.mode == KeyMatching::Loose && !spec.props.is_empty() => {
                spec.loose.get(&normalize_key(&k)).copied()
            }
            None => None,
        };
        match idx {
            Some(AMBIGUOUS) => {
                let norm = normalize_key(&k);
                let names: Vec<String> = spec
                    .props
                    .iter()
                    .filter(|p| normalize_key(&p.name) == norm)
                    .map(|p| format!("'{}'", p.name))
                    .collect();
                let at = Path::Key(path, &k).text();
                cx.problems.push(format!(
                    "parameter '{at}' could mean {}; write one of them exactly",
                    names.join(" or ")
                ));
                cx.reported.push(at);
            }
            Some(i) => {
                let prop = &spec.props[i];
                let child = Path::Key(path, &prop.name);
                if let Some(first) = &seen[i] {
                    let at = child.text();
                    cx.problems.push(format!(
                        "parameters '{first}' and '{k}' both name '{at}'; give it once"
                    ));
                    cx.reported.push(at);
                    continue;
                }
                let v = coerce(v, &prop.shape, &child, cx);
                out.insert(prop.name.clone(), v);
                seen[i] = Some(k);
            }
            None if spec.closed => unknown.push(k),
            None => {
                out.insert(k, v);
            }
        }
    }
    for k in unknown {
        let given = |name: &str| out.contains_key(name);
        let suggestion = suggest(
            &k,
            spec.props
                .iter()
                .map(|p| p.name.as_str())
                .filter(|n| !given(n)),
        );
        let at = Path::Key(path, &k).text();
        let msg = match &suggestion {
            Some(s) => {
                cx.suggested.push(Path::Key(path, s).text());
                format!("unknown parameter '{at}', did you mean '{s}'?")
            }
            None => {
                let names: Vec<&str> = spec.props.iter().map(|p| p.name.as_str()).collect();
                format!(
                    "unknown parameter '{at}' (this tool takes: {})",
                    names.join(", ")
                )
            }
        };
        cx.problems.push(msg);
        cx.reported.push(at);
    }
    fill_defaults(&mut out, spec);
    out
}

fn fill_defaults(map: &mut Map<String, Value>, spec: &ObjectSpec) {
    for p in &spec.props {
        if let Some(d) = &p.default {
            if !map.contains_key(&p.name) {
                map.insert(p.name.clone(), d.clone());
            }
        }
    }
}

/// The candidate closest to `key`, if one is close enough to be worth suggesting.
/// (The crate-wide rule lives in [`crate::suggest`].)
pub fn suggest<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    crate::suggest::closest(key, candidates)
}

fn problem_type(value: &Value, shape: &Shape, path: &Path<'_>, cx: &mut Cx) {
    let at = path.text();
    cx.problems.push(format!(
        "parameter '{at}' must be {}, got {}",
        types_text(shape.types),
        brief(value)
    ));
    cx.reported.push(at);
}

/// Reads a number, with one float parse at most: `"42"`, `"42.0"` and `"1e3"` are integers;
/// `"4.5"` is read only when the schema allows any number (`num`).
fn parse_number(t: &str, num: bool) -> Option<Number> {
    if let Ok(i) = t.parse::<i64>() {
        return Some(i.into());
    }
    if let Ok(u) = t.parse::<u64>() {
        return Some(u.into());
    }
    let f = t.parse::<f64>().ok().filter(|f| f.is_finite())?;
    // Whole numbers stay integers so `integer`-typed branches still match.
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        return Some((f as i64).into());
    }
    if num {
        return Number::from_f64(f);
    }
    None
}

fn parse_bool(t: &str) -> Option<bool> {
    if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if t.eq_ignore_ascii_case("false") || t.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

fn coerce(value: Value, shape: &Shape, path: &Path<'_>, cx: &mut Cx) -> Value {
    let t = shape.types;
    match value {
        Value::String(s) => {
            if t == 0 || t & STR != 0 {
                return Value::String(s);
            }
            let trimmed = s.trim();
            if t & (INT | NUM) != 0 {
                if let Some(n) = parse_number(trimmed, t & NUM != 0) {
                    return Value::Number(n);
                }
            }
            if t & BOOL != 0 {
                if let Some(b) = parse_bool(trimmed) {
                    return Value::Bool(b);
                }
            }
            if t & NULL != 0 && (trimmed.eq_ignore_ascii_case("null") || trimmed.is_empty()) {
                return Value::Null;
            }
            let opens = trimmed.as_bytes().first().copied();
            if (t & OBJ != 0 && opens == Some(b'{')) || (t & ARR != 0 && opens == Some(b'[')) {
                if let Ok(parsed) = serde_json::from_str::<Value>(trimmed) {
                    if value_bits(&parsed) & (OBJ | ARR) != 0 {
                        return coerce(parsed, shape, path, cx);
                    }
                }
            }
            if t & ARR != 0 && opens != Some(b'[') {
                return wrap(Value::String(s), shape, path, cx);
            }
            let v = Value::String(s);
            problem_type(&v, shape, path, cx);
            v
        }
        Value::Object(m) => {
            if t == 0 || t & OBJ != 0 {
                match &shape.object {
                    Some(spec) => Value::Object(coerce_object(m, spec, path, cx)),
                    None => Value::Object(m),
                }
            } else if t & ARR != 0 {
                wrap(Value::Object(m), shape, path, cx)
            } else {
                Value::Object(m)
            }
        }
        Value::Array(items) => match &shape.items {
            Some(item) if t == 0 || t & ARR != 0 => {
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.into_iter().enumerate() {
                    out.push(coerce(v, item, &Path::Index(path, i), cx));
                }
                Value::Array(out)
            }
            _ => Value::Array(items),
        },
        Value::Number(n) => {
            let bits = if n.is_i64() || n.is_u64() {
                INT | NUM
            } else {
                NUM
            };
            if t == 0 || t & bits != 0 {
                Value::Number(n)
            } else if t & STR != 0 {
                Value::String(n.to_string())
            } else if t & ARR != 0 {
                wrap(Value::Number(n), shape, path, cx)
            } else {
                Value::Number(n)
            }
        }
        Value::Bool(b) => {
            if t == 0 || t & BOOL != 0 {
                Value::Bool(b)
            } else if t & STR != 0 {
                Value::String(b.to_string())
            } else if t & ARR != 0 {
                wrap(Value::Bool(b), shape, path, cx)
            } else {
                Value::Bool(b)
            }
        }
        Value::Null => Value::Null,
    }
}

/// A single value where an array is expected: `[value]` (converted as an item).
fn wrap(v: Value, shape: &Shape, path: &Path<'_>, cx: &mut Cx) -> Value {
    let item = match &shape.items {
        Some(item) => coerce(v, item, &Path::Index(path, 0), cx),
        None => v,
    };
    Value::Array(vec![item])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalizes() {
        assert_eq!(normalize_key("File_Path"), normalize_key("filePath"));
        assert_eq!(normalize_key("FILE-PATH"), "filepath");
    }

    #[test]
    fn bad_schemas() {
        assert!(ArgSchema::compile(&json!("x")).is_err());
        assert!(ArgSchema::compile(&json!({"type": "string"})).is_err());
        let e = ArgSchema::compile(&json!({"type":"object","properties":{"a":{"type":"strin"}}}))
            .unwrap_err();
        assert!(e.contains("/properties/a/type"), "{e}");
        let e = ArgSchema::compile(&json!({"properties":{"a":{}},"required":["b"]})).unwrap_err();
        assert!(e.contains("'b'"), "{e}");
    }
}
