//! Constrained calls (issue 38): for an agent's call format and inventory, the grammar that
//! admits exactly one valid call (the tool names of the inventory, each tool's arguments as
//! its JSON schema allows) or, for [`Constrain::CallOrText`], such a call or prose; the
//! same call as a JSON schema where the format's answer is one JSON document; and the stop
//! sequences of the format.
//!
//! The grammar is GBNF, llama.cpp's grammar language (its server's `grammar` field and its
//! sampler's grammar), written here from the schemas: the `gbnf` crate converts only
//! objects whose properties are all required, and every call format needs its own frame
//! around the arguments anyway. What a schema says that GBNF cannot say cheaply (string
//! lengths, patterns, bounds of large ranges) is left to the tool's own validation, which
//! still runs on every call.
//!
//! [`Constrain::CallOrText`]: super::llm::Constrain::CallOrText

use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::{json, Value};

use super::call_format::{python_literal, CallFormat};
use super::llm::Constraint;

/// A tool as a call names it and its arguments' schema.
#[derive(Debug, Clone, Copy)]
pub struct ToolShape<'a> {
    /// The tool id (`forge:smelt`), written by `action`, `tam` and `vcp`.
    pub id: &'a str,
    /// The wire name (`forge_smelt`), written by the other formats.
    pub wire: &'a str,
    /// The JSON schema of its arguments (an object schema).
    pub params: &'a Value,
}

/// The stop sequences of a format: where a model that goes on after its call starts to
/// invent the result (an `Observation:` line, a Hermes `<tool_response>` …).
pub fn stop_sequences(calls: CallFormat) -> Vec<String> {
    let mut stop = vec!["\nObservation:".to_string()];
    match calls.name() {
        "hermes" => stop.push("<tool_response>".into()),
        "deepseek" => stop.push("<｜tool▁outputs▁begin｜>".into()),
        "llama_json" => stop.push("<|eom_id|>".into()),
        _ => {}
    }
    stop
}

/// What a constrained turn admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Exactly one valid call.
    Call,
    /// One valid call, or prose that does not open like a call.
    CallOrText,
    /// Only prose that does not open like a call (an answer after Observations).
    Text,
}

/// The constraint of a turn that admits `admit`, for the tools of `tools` written in
/// `calls`. `None` when there is no tool, or the format has no grammar here yet (the turn
/// then runs unconstrained).
pub fn build(calls: CallFormat, tools: &[ToolShape<'_>], admit: Admit) -> Option<Constraint> {
    if tools.is_empty() {
        return None;
    }
    let mut g = Gbnf::default();
    let mut alts = Vec::with_capacity(tools.len());
    let mut firsts = HashSet::new();
    for t in tools {
        let name = if calls.uses_wire_names() {
            t.wire
        } else {
            t.id
        };
        let (body, first) = g.call(calls, name, t.params)?;
        firsts.insert(first);
        alts.push((name, body));
    }
    if admit == Admit::Text {
        // Only the prose rule: the calls were written to learn how they open.
        g = Gbnf::default();
    }
    let call = if admit == Admit::Text {
        String::new()
    } else {
        let names: Vec<String> = alts
            .into_iter()
            .map(|(name, body)| g.rule(&format!("call-{name}"), body))
            .collect();
        g.rule("call", names.join(" | "))
    };
    let prose = |g: &mut Gbnf| {
        // Prose: anything that does not open like a call, nor with blanks before one.
        let mut not: Vec<char> = firsts
            .iter()
            .copied()
            .chain([' ', '\t', '\n', '\r'])
            .collect();
        not.sort_unstable();
        let class: String = not.iter().map(|c| class_char(*c)).collect();
        let any = g.shared("anychar");
        g.rule("prose", format!("[^{class}] {any}*"))
    };
    let root = match admit {
        Admit::Call => call,
        Admit::CallOrText => format!("{call} | {}", prose(&mut g)),
        Admit::Text => prose(&mut g),
    };
    let json_schema = match admit {
        Admit::Call => whole_json_schema(calls, tools),
        Admit::CallOrText | Admit::Text => None,
    };
    Some(Constraint {
        gbnf: g.render(&root),
        json_schema,
    })
}

/// The JSON schema of the whole answer, for the formats whose answer is one JSON document.
fn whole_json_schema(calls: CallFormat, tools: &[ToolShape<'_>]) -> Option<Value> {
    let key = match calls.name() {
        "json" => "arguments",
        "llama_json" => "parameters",
        _ => return None,
    };
    let one: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"name": {"const": t.wire}, key: t.params},
                "required": ["name", key],
                "additionalProperties": false
            })
        })
        .collect();
    Some(if one.len() == 1 {
        one.into_iter().next().unwrap_or_default()
    } else {
        json!({ "anyOf": one })
    })
}

/// How argument values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// JSON values.
    Json,
    /// Python literals (`pythonic`).
    Python,
    /// `<ACTION>` child-tag text (`<item>` lists, CDATA objects).
    Xml,
    /// TAM/VCP text between 「始」 and 「末」.
    Marked,
}

/// A GBNF grammar under construction: named rules, each written once.
#[derive(Default)]
struct Gbnf {
    rules: Vec<(String, String)>,
    names: HashSet<String>,
    /// Shared rules already added (`string`, `value` …).
    shared: HashSet<&'static str>,
    /// What ends a TAM (``) or VCP (`,`) value line before its newline.
    marked_sep: &'static str,
}

/// A GBNF string literal.
pub(crate) fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A character inside a GBNF character class.
fn class_char(c: char) -> String {
    match c {
        ']' | '[' | '^' | '-' | '\\' => format!("\\{c}"),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        c if (c as u32) < 0x20 => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
}

/// The shared rules, by name.
const SHARED: &[(&str, &str)] = &[
    ("ws", "[ ]?"),
    ("anychar", "[^\\x00]"),
    (
        "char",
        "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])",
    ),
    ("string", "\"\\\"\" char* \"\\\"\""),
    ("uint", "\"0\" | [1-9] [0-9]*"),
    ("integer", "\"-\"? uint"),
    ("number", "integer (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?"),
    ("boolean", "\"true\" | \"false\""),
    ("null", "\"null\""),
    (
        "value",
        "object | array | string | number | boolean | null",
    ),
    (
        "object",
        "\"{\" ws (string ws \":\" ws value (\",\" ws string ws \":\" ws value)*)? ws \"}\"",
    ),
    ("array", "\"[\" ws (value (\",\" ws value)*)? ws \"]\""),
    ("pystring", "\"'\" ([^'\\\\\\n] | \"\\\\\" [^\\n])* \"'\""),
    ("pybool", "\"True\" | \"False\""),
    (
        "pyvalue",
        "pystring | number | pybool | \"None\" | pylist | pydict",
    ),
    ("pylist", "\"[\" (pyvalue (\", \" pyvalue)*)? \"]\""),
    (
        "pydict",
        "\"{\" (pystring \": \" pyvalue (\", \" pystring \": \" pyvalue)*)? \"}\"",
    ),
    ("xmltext", "[^<&]*"),
    ("markedtext", "[^「」]*"),
];

/// The shared rules each shared rule uses.
fn uses(name: &str) -> &'static [&'static str] {
    match name {
        "string" => &["char"],
        "integer" => &["uint"],
        "number" => &["integer"],
        "value" => &["object", "array", "string", "number", "boolean", "null"],
        "object" => &["ws", "string", "value"],
        "array" => &["ws", "value"],
        "pyvalue" => &["pystring", "number", "pybool", "pylist", "pydict"],
        "pylist" => &["pyvalue"],
        "pydict" => &["pystring", "pyvalue"],
        _ => &[],
    }
}

impl Gbnf {
    /// Uses the shared rule `name` (adding it and what it uses once).
    fn shared(&mut self, name: &'static str) -> String {
        if self.shared.insert(name) {
            for dep in uses(name) {
                self.shared(dep);
            }
            if let Some((_, body)) = SHARED.iter().find(|(n, _)| *n == name) {
                self.names.insert(name.to_string());
                self.rules.push((name.to_string(), body.to_string()));
            }
        }
        name.to_string()
    }

    /// Adds a rule named after `base` (made unique) and returns its name.
    fn rule(&mut self, base: &str, body: String) -> String {
        let clean: String = base
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let clean = clean.trim_matches('-').to_ascii_lowercase();
        let clean = if clean.is_empty() { "r".into() } else { clean };
        let mut name = clean.clone();
        let mut n = 1;
        while SHARED.iter().any(|(s, _)| *s == name) || !self.names.insert(name.clone()) {
            n += 1;
            name = format!("{clean}-{n}");
        }
        self.rules.push((name.clone(), body));
        name
    }

    fn render(&self, root: &str) -> String {
        let mut s = format!("root ::= {root}\n");
        for (n, b) in &self.rules {
            let _ = writeln!(s, "{n} ::= {b}");
        }
        s
    }

    /// The body of one call of `name` in `calls`, and the first character it writes.
    fn call(&mut self, calls: CallFormat, name: &str, params: &Value) -> Option<(String, char)> {
        let quoted = Value::String(name.to_string()).to_string();
        let (prefix, body, suffix) = match calls.name() {
            "json" | "llama_json" | "hermes" | "mistral" | "granite" => {
                let key = if calls.name() == "llama_json" {
                    "parameters"
                } else {
                    "arguments"
                };
                let ws = self.shared("ws");
                let args = self.object(params, Syntax::Json, name);
                let obj = format!(
                    "\"{{\" {ws} \"\\\"name\\\"\" {ws} \":\" {ws} {} {ws} \",\" {ws} {} {ws} \":\" {ws} {args} {ws} \"}}\"",
                    lit(&quoted),
                    lit(&format!("\"{key}\"")),
                );
                let (pre, post) = match calls.name() {
                    "hermes" => ("<tool_call>\n", "\n</tool_call>"),
                    "mistral" => ("[TOOL_CALLS] [", "]"),
                    "granite" => ("<function_call> ", ""),
                    _ => ("", ""),
                };
                (pre.to_string(), obj, post.to_string())
            }
            "glm" => (
                format!("{name}\n"),
                self.object(params, Syntax::Json, name),
                String::new(),
            ),
            "functionary" => (
                format!("<function={name}>"),
                self.object(params, Syntax::Json, name),
                "</function>".into(),
            ),
            "deepseek" => (
                format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n"),
                self.object(params, Syntax::Json, name),
                "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>".into(),
            ),
            "pythonic" => (
                format!("[{name}("),
                self.members(params, Syntax::Python, name),
                ")]".into(),
            ),
            "action" => (
                format!("<ACTION>\n    <{name}>\n"),
                self.members(params, Syntax::Xml, name),
                format!("    </{name}>\n</ACTION>"),
            ),
            "tam" => (
                format!("<|[REQUEST_TOOL]|>\ncommand:「始」{name}「末」\n"),
                {
                    self.marked_sep = "";
                    self.members(params, Syntax::Marked, name)
                },
                "<|[END_TOOL]|>".into(),
            ),
            "vcp" => (
                format!("<<<[TOOL_REQUEST]>>>\ntool_name:「始」{name}「末」,\n"),
                {
                    self.marked_sep = ",";
                    self.members(params, Syntax::Marked, name)
                },
                "<<<[END_TOOL_REQUEST]>>>".into(),
            ),
            _ => return None,
        };
        let first = prefix.chars().next().unwrap_or('{');
        let mut parts = Vec::new();
        if !prefix.is_empty() {
            parts.push(lit(&prefix));
        }
        if !body.is_empty() {
            parts.push(body);
        }
        if !suffix.is_empty() {
            parts.push(lit(&suffix));
        }
        Some((parts.join(" "), first))
    }

    /// A JSON object of the schema's properties: required ones always, optional ones
    /// maybe, in the schema's order; no other key.
    fn object(&mut self, schema: &Value, syntax: Syntax, base: &str) -> String {
        let ws = self.shared("ws");
        let members = self.members(schema, syntax, base);
        if members.is_empty() {
            format!("\"{{\" {ws} \"}}\"")
        } else {
            format!("\"{{\" {ws} {members} {ws} \"}}\"")
        }
    }

    /// The members of an object schema (its properties, written as `syntax` writes a
    /// key and its value): an expression, empty when there are none.
    fn members(&mut self, schema: &Value, syntax: Syntax, base: &str) -> String {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let props: Vec<(&String, &Value)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        if props.is_empty() {
            return String::new();
        }
        let mut kvs = Vec::with_capacity(props.len());
        for (k, s) in &props {
            let v = self.value(s, syntax, &format!("{base}-{k}"));
            let kv = match syntax {
                Syntax::Json => {
                    let ws = self.shared("ws");
                    format!(
                        "{} {ws} \":\" {ws} {v}",
                        lit(&Value::String((*k).clone()).to_string())
                    )
                }
                Syntax::Python => format!("{} {v}", lit(&format!("{k}="))),
                Syntax::Xml => format!(
                    "{} {v} {}",
                    lit(&format!("        <{k}>")),
                    lit(&format!("</{k}>\n"))
                ),
                Syntax::Marked => format!(
                    "{} {v} {}",
                    lit(&format!("{k}:「始」")),
                    lit(&format!("「末」{}\n", self.marked_sep))
                ),
            };
            kvs.push((kv, required.contains(&k.as_str())));
        }
        if matches!(syntax, Syntax::Xml | Syntax::Marked) {
            // Tags and lines need no separator: each member is there or not.
            return kvs
                .into_iter()
                .map(|(kv, req)| if req { kv } else { format!("({kv})?") })
                .collect::<Vec<_>>()
                .join(" ");
        }
        let sep = if syntax == Syntax::Json {
            let ws = self.shared("ws");
            format!("\",\" {ws}")
        } else {
            lit(", ")
        };
        // after[i]: the members from i on when one is already written (each opens with the
        // separator); first: the members from i on when none is written yet ("" for none).
        let n = kvs.len();
        let mut after = vec![String::new(); n + 1];
        for i in (0..n).rev() {
            let (kv, req) = &kvs[i];
            let rest = &after[i + 1];
            let body = if *req {
                format!("{sep} {kv} {rest}")
            } else {
                format!("({sep} {kv})? {rest}")
            };
            after[i] = self.rule(&format!("{base}-after-{i}"), body.trim().to_string());
        }
        let mut first = String::new();
        for i in (0..n).rev() {
            let (kv, req) = &kvs[i];
            let rest = &after[i + 1];
            let body = if *req {
                format!("{kv} {rest}")
            } else if first.is_empty() {
                format!("({kv} {rest})?")
            } else {
                format!("{kv} {rest} | {first}")
            };
            first = self.rule(&format!("{base}-first-{i}"), body.trim().to_string());
        }
        first
    }

    /// A value of `schema` written in `syntax`.
    fn value(&mut self, schema: &Value, syntax: Syntax, base: &str) -> String {
        let scalar = |v: &Value| -> String {
            match syntax {
                Syntax::Json => lit(&v.to_string()),
                Syntax::Python => lit(&python_literal(v)),
                Syntax::Xml | Syntax::Marked => lit(&match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }),
            }
        };
        if let Some(e) = schema.get("enum").and_then(Value::as_array) {
            if !e.is_empty() {
                let alts: Vec<String> = e.iter().map(scalar).collect();
                return format!("({})", alts.join(" | "));
            }
        }
        if let Some(c) = schema.get("const") {
            return scalar(c);
        }
        for k in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = schema.get(k) {
                let alts: Vec<String> = options
                    .iter()
                    .enumerate()
                    .map(|(i, o)| self.value(o, syntax, &format!("{base}-{i}")))
                    .collect();
                if !alts.is_empty() {
                    return format!("({})", alts.join(" | "));
                }
            }
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if types.is_empty() {
            return self.any(syntax);
        }
        let alts: Vec<String> = types
            .iter()
            .map(|t| self.typed(t, schema, syntax, base))
            .collect();
        if alts.len() == 1 {
            alts.into_iter().next().unwrap_or_default()
        } else {
            format!("({})", alts.join(" | "))
        }
    }

    fn any(&mut self, syntax: Syntax) -> String {
        match syntax {
            Syntax::Json => self.shared("value"),
            Syntax::Python => self.shared("pyvalue"),
            Syntax::Xml => self.shared("xmltext"),
            Syntax::Marked => self.shared("markedtext"),
        }
    }

    fn typed(&mut self, ty: &str, schema: &Value, syntax: Syntax, base: &str) -> String {
        match ty {
            "integer" => {
                let lo = schema.get("minimum").and_then(Value::as_i64);
                let hi = schema.get("maximum").and_then(Value::as_i64);
                match (lo, hi) {
                    // A small range: its members.
                    (Some(lo), Some(hi)) if hi >= lo && hi - lo <= 64 => {
                        let alts: Vec<String> = (lo..=hi).map(|n| lit(&n.to_string())).collect();
                        format!("({})", alts.join(" | "))
                    }
                    (Some(lo), _) if lo >= 0 => self.shared("uint"),
                    _ => self.shared("integer"),
                }
            }
            "number" => self.shared("number"),
            "boolean" => match syntax {
                Syntax::Python => self.shared("pybool"),
                _ => self.shared("boolean"),
            },
            "null" => match syntax {
                Syntax::Python => lit("None"),
                Syntax::Json => self.shared("null"),
                _ => lit("null"),
            },
            "string" => match syntax {
                Syntax::Json => self.shared("string"),
                Syntax::Python => self.shared("pystring"),
                Syntax::Xml => self.shared("xmltext"),
                Syntax::Marked => self.shared("markedtext"),
            },
            "array" => {
                let items = schema.get("items").filter(|i| i.is_object());
                match syntax {
                    Syntax::Xml => {
                        let item = match items {
                            Some(i) => self.value(i, Syntax::Xml, &format!("{base}-item")),
                            None => self.shared("xmltext"),
                        };
                        format!("(\"<item>\" {item} \"</item>\")*")
                    }
                    Syntax::Python => {
                        let item = match items {
                            Some(i) => self.value(i, Syntax::Python, &format!("{base}-item")),
                            None => self.shared("pyvalue"),
                        };
                        self.rule(
                            &format!("{base}-list"),
                            format!("\"[\" ({item} (\", \" {item})*)? \"]\""),
                        )
                    }
                    Syntax::Json | Syntax::Marked => {
                        let item = match items {
                            Some(i) => self.value(i, Syntax::Json, &format!("{base}-item")),
                            None => self.shared("value"),
                        };
                        let ws = self.shared("ws");
                        self.rule(
                            &format!("{base}-list"),
                            format!("\"[\" {ws} ({item} (\",\" {ws} {item})*)? {ws} \"]\""),
                        )
                    }
                }
            }
            "object" => {
                let has_props = schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty());
                match syntax {
                    Syntax::Python => self.shared("pydict"),
                    Syntax::Xml => {
                        let obj = if has_props {
                            self.object(schema, Syntax::Json, base)
                        } else {
                            self.shared("object")
                        };
                        format!("\"<![CDATA[\" {obj} \"]]>\"")
                    }
                    Syntax::Json | Syntax::Marked => {
                        if has_props {
                            let body = self.object(schema, Syntax::Json, base);
                            self.rule(&format!("{base}-obj"), body)
                        } else {
                            self.shared("object")
                        }
                    }
                }
            }
            _ => self.any(syntax),
        }
    }
}
