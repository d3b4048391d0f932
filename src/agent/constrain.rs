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
        // Qwen's templates give results in `<tool_response>`, GLM-4.5's in an
        // `<|observation|>` turn, Gemma 3's in a ```` ```tool_output ```` fence.
        "hermes" | "qwen3_coder" => stop.push("<tool_response>".into()),
        "glm45" => stop.push("<|observation|>".into()),
        "gemma3" => stop.push("```tool_output".into()),
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
    /// Text between a tag per argument and its closing tag (TAM/VCP's 「始」…「末」,
    /// `<parameter=k>…</parameter>` …): strings as they are, other values as JSON. The tags
    /// and the string rule are the grammar's [`TextTags`].
    Text,
    /// Gemma 4's values: strings in `<|"|>` quotes, unquoted keys, no spaces.
    Gemma,
}

/// How [`Syntax::Text`] writes one argument: `open` with `{k}` for its name, the value,
/// then `close`; strings match the shared rule `string`.
#[derive(Clone, Copy)]
struct TextTags {
    open: &'static str,
    close: &'static str,
    string: &'static str,
}

impl Default for TextTags {
    fn default() -> Self {
        TextTags {
            open: "{k}:「始」",
            close: "「末」\n",
            string: "markedtext",
        }
    }
}

/// A GBNF grammar under construction: named rules, each written once.
#[derive(Default)]
struct Gbnf {
    rules: Vec<(String, String)>,
    names: HashSet<String>,
    /// Shared rules already added (`string`, `value` …).
    shared: HashSet<&'static str>,
    /// How [`Syntax::Text`] arguments are written in the format at hand.
    tags: TextTags,
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
    ("tagtext", "[^<]*"),
    ("gemmastring", "\"<|\\\"|>\" [^<]* \"<|\\\"|>\""),
    (
        "gemmavalue",
        "gemmastring | number | boolean | null | gemmalist | gemmaobject",
    ),
    ("gemmalist", "\"[\" (gemmavalue (\",\" gemmavalue)*)? \"]\""),
    (
        "gemmaobject",
        "\"{\" ([a-zA-Z_] [a-zA-Z0-9_]* \":\" gemmavalue (\",\" [a-zA-Z_] [a-zA-Z0-9_]* \":\" gemmavalue)*)? \"}\"",
    ),
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
        "gemmavalue" => &[
            "gemmastring",
            "number",
            "boolean",
            "null",
            "gemmalist",
            "gemmaobject",
        ],
        "gemmalist" => &["gemmavalue"],
        "gemmaobject" => &["gemmavalue"],
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

    /// `{"<name_key>": "<name>", "<args_key>": {…}}` with the arguments of `params`.
    fn json_call(&mut self, name_key: &str, name: &str, args_key: &str, params: &Value) -> String {
        let ws = self.shared("ws");
        let args = self.object(params, Syntax::Json, name);
        format!(
            "\"{{\" {ws} {} {ws} \":\" {ws} {} {ws} \",\" {ws} {} {ws} \":\" {ws} {args} {ws} \"}}\"",
            lit(&Value::String(name_key.into()).to_string()),
            lit(&Value::String(name.into()).to_string()),
            lit(&Value::String(args_key.into()).to_string()),
        )
    }

    /// The arguments of `params` in [`Syntax::Text`], each between the tags of `tags`.
    fn tagged(&mut self, params: &Value, name: &str, tags: TextTags) -> String {
        self.tags = tags;
        self.members(params, Syntax::Text, name)
    }

    /// The body of one call of `name` in `calls`, and the first character it writes.
    fn call(&mut self, calls: CallFormat, name: &str, params: &Value) -> Option<(String, char)> {
        let (prefix, body, suffix) = match calls.name() {
            "json" | "llama_json" | "hermes" | "mistral" | "granite" | "granite3"
            | "tool_calls" | "internlm2" | "longcat" | "functools" | "gigachat3" => {
                let key = match calls.name() {
                    "llama_json" | "internlm2" => "parameters",
                    _ => "arguments",
                };
                let obj = self.json_call("name", name, key, params);
                let (pre, post) = match calls.name() {
                    "hermes" => ("<tool_call>\n", "\n</tool_call>"),
                    "mistral" => ("[TOOL_CALLS] [", "]"),
                    "granite" => ("<function_call> ", ""),
                    "granite3" => ("<|tool_call|>[", "]"),
                    "tool_calls" => ("<tool_calls>[", "]</tool_calls>"),
                    "internlm2" => ("<|action_start|><|plugin|>\n", "<|action_end|>"),
                    "longcat" => ("<longcat_tool_call>", "</longcat_tool_call>"),
                    "functools" => ("functools[", "]"),
                    "gigachat3" => ("function call<|role_sep|>\n", ""),
                    _ => ("", ""),
                };
                (pre.to_string(), obj, post.to_string())
            }
            "command_r" => (
                "Action: ```json\n[".into(),
                self.json_call("tool_name", name, "parameters", params),
                "]\n```".into(),
            ),
            "apertus" => {
                let ws = self.shared("ws");
                let args = self.object(params, Syntax::Json, name);
                (
                    "<|tools_prefix|>[".into(),
                    format!(
                        "\"{{\" {ws} {} {ws} \":\" {ws} {args} {ws} \"}}\"",
                        lit(&Value::String(name.into()).to_string())
                    ),
                    "]<|tools_suffix|>".into(),
                )
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
            "kimi_k2" => (
                format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0<|tool_call_argument_begin|>"),
                self.object(params, Syntax::Json, name),
                "<|tool_call_end|><|tool_calls_section_end|>".into(),
            ),
            "harmony" => (
                format!("<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"),
                self.object(params, Syntax::Json, name),
                "<|call|>".into(),
            ),
            "qwen3_coder" => (
                format!("<tool_call>\n<function={name}>\n"),
                self.tagged(
                    params,
                    name,
                    TextTags {
                        open: "<parameter={k}>\n",
                        close: "\n</parameter>\n",
                        string: "tagtext",
                    },
                ),
                "</function>\n</tool_call>".into(),
            ),
            "glm45" => (
                format!("<tool_call>{name}\n"),
                self.tagged(
                    params,
                    name,
                    TextTags {
                        open: "<arg_key>{k}</arg_key>\n<arg_value>",
                        close: "</arg_value>\n",
                        string: "tagtext",
                    },
                ),
                "</tool_call>".into(),
            ),
            "minimax_m2" => (
                format!("<minimax:tool_call>\n<invoke name=\"{name}\">\n"),
                self.tagged(
                    params,
                    name,
                    TextTags {
                        open: "<parameter name=\"{k}\">",
                        close: "</parameter>\n",
                        string: "tagtext",
                    },
                ),
                "</invoke>\n</minimax:tool_call>".into(),
            ),
            "step3" => (
                format!("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"{name}\">\n"),
                self.tagged(
                    params,
                    name,
                    TextTags {
                        open: "<steptml:parameter name=\"{k}\">",
                        close: "</steptml:parameter>\n",
                        string: "tagtext",
                    },
                ),
                "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>".into(),
            ),
            "gemma4" => (
                format!("<|tool_call>call:{name}{{"),
                self.members(params, Syntax::Gemma, name),
                "}<tool_call|>".into(),
            ),
            "pythonic" | "gemma3" | "lfm2" | "olmo3" => {
                let (pre, post) = match calls.name() {
                    "gemma3" => ("```tool_code\n", "\n```"),
                    "lfm2" => ("<|tool_call_start|>[", "]<|tool_call_end|>"),
                    "olmo3" => ("<function_calls>\n", "\n</function_calls>"),
                    _ => ("[", "]"),
                };
                (
                    format!("{pre}{name}("),
                    self.members(params, Syntax::Python, name),
                    format!("){post}"),
                )
            }
            "action" => (
                format!("<ACTION>\n    <{name}>\n"),
                self.members(params, Syntax::Xml, name),
                format!("    </{name}>\n</ACTION>"),
            ),
            "tam" => (
                format!("<|[REQUEST_TOOL]|>\ncommand:「始」{name}「末」\n"),
                self.tagged(params, name, TextTags::default()),
                "<|[END_TOOL]|>".into(),
            ),
            "vcp" => (
                format!("<<<[TOOL_REQUEST]>>>\ntool_name:「始」{name}「末」,\n"),
                self.tagged(
                    params,
                    name,
                    TextTags {
                        close: "「末」,\n",
                        ..TextTags::default()
                    },
                ),
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
                Syntax::Text => format!(
                    "{} {v} {}",
                    lit(&self.tags.open.replace("{k}", k)),
                    lit(self.tags.close)
                ),
                Syntax::Gemma => format!("{} {v}", lit(&format!("{k}:"))),
            };
            kvs.push((kv, required.contains(&k.as_str())));
        }
        if matches!(syntax, Syntax::Xml | Syntax::Text) {
            // Tags and lines need no separator: each member is there or not.
            return kvs
                .into_iter()
                .map(|(kv, req)| if req { kv } else { format!("({kv})?") })
                .collect::<Vec<_>>()
                .join(" ");
        }
        let sep = match syntax {
            Syntax::Json => {
                let ws = self.shared("ws");
                format!("\",\" {ws}")
            }
            Syntax::Gemma => lit(","),
            _ => lit(", "),
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
                Syntax::Xml | Syntax::Text => lit(&match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }),
                Syntax::Gemma => lit(&match v {
                    Value::String(s) => format!("<|\"|>{s}<|\"|>"),
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
            Syntax::Text => self.shared(self.tags.string),
            Syntax::Gemma => self.shared("gemmavalue"),
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
                Syntax::Text => self.shared(self.tags.string),
                Syntax::Gemma => self.shared("gemmastring"),
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
                    Syntax::Gemma => {
                        let item = match items {
                            Some(i) => self.value(i, Syntax::Gemma, &format!("{base}-item")),
                            None => self.shared("gemmavalue"),
                        };
                        self.rule(
                            &format!("{base}-list"),
                            format!("\"[\" ({item} (\",\" {item})*)? \"]\""),
                        )
                    }
                    Syntax::Json | Syntax::Text => {
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
                    Syntax::Gemma => {
                        if has_props {
                            let members = self.members(schema, Syntax::Gemma, base);
                            self.rule(&format!("{base}-obj"), format!("\"{{\" {members} \"}}\""))
                        } else {
                            self.shared("gemmaobject")
                        }
                    }
                    Syntax::Json | Syntax::Text => {
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
