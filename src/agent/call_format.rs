//! An agent's call format: the format its model writes calls in (`call_format` in a
//! profile, `[llm] call_format` in `tavern.toml`, or [`AgentRuntimeBuilder::call_format`]).
//! The manual teaches it and the loop reads it first, then every other format.
//!
//! One table, [`LESSONS`]: a row per format a manual can teach, named as the protocol's
//! format table names it (`protocol::Format`), with how one call is written and a
//! paragraph saying how to call. Examples are built from the tools' own definitions (the
//! parameters' defaults, enums, examples or placeholders of their types), never written
//! per tool. A name is a call format when it has a row here and a reader in the protocol;
//! adding a format to a manual is one row.
//!
//! [`AgentRuntimeBuilder::call_format`]: super::AgentRuntimeBuilder::call_format

use std::fmt::Write as _;

use serde_json::Value;

use crate::protocol::Format;

/// How a format writes a tool's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Naming {
    /// The tool id as registered (`forge:smelt`, `FileOperator.WriteFile`).
    Id,
    /// The wire name (`forge_smelt`): letters, digits and `_`, what models trained on
    /// function calling write, and a valid identifier for the pythonic form.
    Wire,
}

/// One example argument: the parameter's name and its example value.
pub(crate) type Arg<'a> = (&'a str, Value);

/// How the manual teaches one call format.
pub(crate) struct Lesson {
    /// The format's name in the protocol's table.
    pub name: &'static str,
    /// How tool names are written.
    pub naming: Naming,
    /// One call of the tool `name` with `args`, as the model should write it.
    pub example: fn(name: &str, args: &[Arg<'_>]) -> String,
    /// How to call, in a paragraph (several calls, where they go, what else).
    pub how: &'static str,
}

impl std::fmt::Debug for Lesson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every format a manual can teach. `action` and `tam` are seed 002 §4.2's and seed 000
/// §6.2's manuals; the rest are the formats open models are trained on
/// (`shared notes: native-formats`).
pub(crate) const LESSONS: &[Lesson] = &[
    Lesson {
        name: "action",
        naming: Naming::Id,
        example: action_call,
        how: "When you decide to use a tool or skill, first explain your reasoning, then output the <ACTION> block with the chosen tool/skill ID as the main tag, and its parameters as child tags (use <![CDATA[...]]> for values with <, > or &). If no action is needed, just provide your textual response.",
    },
    Lesson {
        name: "tam",
        naming: Naming::Id,
        example: tam_call,
        how: "When you decide to use a tool or skill, first explain your reasoning, then output a <|[REQUEST_TOOL]|> block: `command:「始」ToolID「末」` and one `name:「始」value「末」` line per parameter, closed by <|[END_TOOL]|>. If no action is needed, just provide your textual response.",
    },
    Lesson {
        name: "vcp",
        naming: Naming::Id,
        example: vcp_call,
        how: "When you decide to use a tool or skill, first explain your reasoning, then output a <<<[TOOL_REQUEST]>>> block: `tool_name:「始」ToolID「末」,` and one `name:「始」value「末」,` line per parameter, closed by <<<[END_TOOL_REQUEST]>>>; write one block per call. If no action is needed, just provide your textual response.",
    },
    Lesson {
        name: "json",
        naming: Naming::Wire,
        example: json_call,
        how: "To use a tool or skill, answer with only a JSON object {\"name\": <tool name>, \"arguments\": {<parameter>: <value>, …}}, or a JSON list of such objects for several calls, with nothing before or after it. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "hermes",
        naming: Naming::Wire,
        example: hermes_call,
        how: "To use a tool or skill, write the call as a JSON object with \"name\" and \"arguments\" inside <tool_call></tool_call> tags, one pair of tags per call. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "pythonic",
        naming: Naming::Wire,
        example: pythonic_call,
        how: "To use tools or skills, begin your answer with a Python list of calls, [tool_name(parameter=value, …), …], with keyword arguments and Python literals (strings in quotes, numbers, True, False, None, lists, dicts); an explanation may follow on the next lines. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "llama_json",
        naming: Naming::Wire,
        example: llama_json_call,
        how: "To use a tool or skill, answer with only a JSON object {\"name\": <tool name>, \"parameters\": {<parameter>: <value>, …}}; separate several calls with `;`. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "mistral",
        naming: Naming::Wire,
        example: mistral_call,
        how: "To use tools or skills, write [TOOL_CALLS] followed by a JSON list of calls, each an object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "granite",
        naming: Naming::Wire,
        example: granite_call,
        how: "To use a tool or skill, write <function_call> followed by a JSON object with \"name\" and \"arguments\"; write <function_call> again before each further call. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "glm",
        naming: Naming::Wire,
        example: glm_call,
        how: "To use a tool or skill, answer with only the tool's name on the first line and its arguments as a JSON object on the next line; one call per answer. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "deepseek",
        naming: Naming::Wire,
        example: deepseek_call,
        how: "To use tools or skills, write <｜tool▁calls▁begin｜>, then per call <｜tool▁call▁begin｜>function<｜tool▁sep｜> with the tool name, its arguments as JSON in a ```json fence and <｜tool▁call▁end｜>, and close with <｜tool▁calls▁end｜>. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "functionary",
        naming: Naming::Wire,
        example: functionary_call,
        how: "To use a tool or skill, write <function=tool_name> followed by its arguments as a JSON object and </function>, once per call. If no action is needed, answer in plain text.",
    },    Lesson {
        name: "qwen3_coder",
        naming: Naming::Wire,
        example: qwen3_coder_call,
        how: "To use a tool or skill, write <tool_call>, then <function=tool_name>, one <parameter=name>value</parameter> per parameter (values as plain text; objects and lists as JSON), then </function> and </tool_call>, once per call. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "glm45",
        naming: Naming::Wire,
        example: glm45_call,
        how: "To use a tool or skill, write <tool_call> followed by the tool name, then one <arg_key>name</arg_key><arg_value>value</arg_value> pair per parameter, then </tool_call>, once per call. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "kimi_k2",
        naming: Naming::Wire,
        example: kimi_k2_call,
        how: "To use tools or skills, write <|tool_calls_section_begin|>, then per call <|tool_call_begin|>functions.tool_name:N (N counts calls from 0), <|tool_call_argument_begin|>, its arguments as a JSON object and <|tool_call_end|>, and close with <|tool_calls_section_end|>. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "harmony",
        naming: Naming::Wire,
        example: harmony_call,
        how: "To use a tool or skill, write a commentary message addressed to it: <|channel|>commentary to=functions.tool_name <|constrain|>json<|message|> followed by its arguments as a JSON object and <|call|>. Write your answer to the user in the final channel. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "minimax_m2",
        naming: Naming::Wire,
        example: minimax_m2_call,
        how: "To use tools or skills, write <minimax:tool_call>, then per call <invoke name=\"tool_name\"> with one <parameter name=\"name\">value</parameter> per parameter and </invoke>, and close with </minimax:tool_call>. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "step3",
        naming: Naming::Wire,
        example: step3_call,
        how: "To use tools or skills, write <｜tool_calls_begin｜>, then per call <｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"tool_name\"> with one <steptml:parameter name=\"name\">value</steptml:parameter> per parameter, </steptml:invoke><｜tool_call_end｜>, and close with <｜tool_calls_end｜>. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "gemma4",
        naming: Naming::Wire,
        example: gemma4_call,
        how: "To use a tool or skill, write <|tool_call>call:tool_name{name:value,…}<tool_call|>, strings between <|\"|> tokens, numbers and true/false bare, once per call. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "gemma3",
        naming: Naming::Wire,
        example: gemma3_call,
        how: "To use tools or skills, write a ```tool_code fenced block holding the Python calls, tool_name(parameter=value, …), one a line, with Python literals. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "lfm2",
        naming: Naming::Wire,
        example: lfm2_call,
        how: "To use tools or skills, write <|tool_call_start|>, a Python list of calls [tool_name(parameter=value, …), …] and <|tool_call_end|>. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "olmo3",
        naming: Naming::Wire,
        example: olmo3_call,
        how: "To use tools or skills, write <function_calls>, one Python call tool_name(parameter=value, …) a line, and </function_calls>. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "granite3",
        naming: Naming::Wire,
        example: granite3_call,
        how: "To use tools or skills, write <|tool_call|> followed by a JSON list of calls, each an object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "tool_calls",
        naming: Naming::Wire,
        example: tool_calls_call,
        how: "To use tools or skills, write <tool_calls>, a JSON list of calls, each an object with \"name\" and \"arguments\", and </tool_calls>. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "internlm2",
        naming: Naming::Wire,
        example: internlm2_call,
        how: "To use a tool or skill, write <|action_start|><|plugin|>, a JSON object with \"name\" and \"parameters\", and <|action_end|>, once per call. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "longcat",
        naming: Naming::Wire,
        example: longcat_call,
        how: "To use a tool or skill, write <longcat_tool_call>, a JSON object with \"name\" and \"arguments\", and </longcat_tool_call>, once per call. If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "functools",
        naming: Naming::Wire,
        example: functools_call,
        how: "To use tools or skills, begin your answer with functools followed by a JSON list of calls, each an object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "gigachat3",
        naming: Naming::Wire,
        example: gigachat3_call,
        how: "To use a tool or skill, answer with function call<|role_sep|> followed by one JSON object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "command_r",
        naming: Naming::Wire,
        example: command_r_call,
        how: "To use tools or skills, write Action: followed by a ```json fenced block holding a JSON list of calls, each an object with \"tool_name\" and \"parameters\". If no action is needed, answer in plain text.",
    },
    Lesson {
        name: "apertus",
        naming: Naming::Wire,
        example: apertus_call,
        how: "To use tools or skills, write <|tools_prefix|>, a JSON list of objects each with the tool name as its one key and the arguments as its value, and <|tools_suffix|>. If no action is needed, answer in plain text.",
    },
];

/// The format an agent's model writes calls in: a row of the manual's lessons whose name the
/// protocol reads.
#[derive(Debug, Clone, Copy)]
pub struct CallFormat {
    format: Format,
    lesson: &'static Lesson,
}

impl PartialEq for CallFormat {
    fn eq(&self, other: &Self) -> bool {
        self.format == other.format
    }
}

impl Eq for CallFormat {}

impl CallFormat {
    /// `<ACTION>` (seed 002 §4.2's manual).
    pub const ACTION: CallFormat = CallFormat {
        format: Format::Action,
        lesson: &LESSONS[0],
    };

    /// TAM (seed 000 §6.2's manual).
    pub const TAM: CallFormat = CallFormat {
        format: Format::Tam,
        lesson: &LESSONS[1],
    };

    /// The protocol format it is read with.
    pub fn format(self) -> Format {
        self.format
    }

    /// Its name (`tam`, `action`, `hermes` …).
    pub fn name(self) -> &'static str {
        self.lesson.name
    }

    /// Every call format, in the order of the protocol's table: each format of
    /// [`Format::NAMES`] that a manual can teach (all but `auto`).
    pub fn all() -> impl Iterator<Item = CallFormat> {
        Format::all().filter_map(Self::of)
    }

    /// The call format of a protocol format, if a manual can teach it.
    pub fn of(format: Format) -> Option<CallFormat> {
        let name = format.name();
        LESSONS
            .iter()
            .find(|l| l.name == name)
            .map(|lesson| CallFormat { format, lesson })
    }

    /// The names as a sentence: `tam, action, vcp or json`.
    pub fn names_text() -> String {
        let names: Vec<&str> = Self::all().map(Self::name).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }

    pub(crate) fn lesson(self) -> &'static Lesson {
        self.lesson
    }

    /// One call of a tool named `id` (wire name `wire`) with `args`, in this format.
    pub(crate) fn example(self, id: &str, wire: &str, args: &[Arg<'_>]) -> String {
        let name = match self.lesson.naming {
            Naming::Id => id,
            Naming::Wire => wire,
        };
        (self.lesson.example)(name, args)
    }

    /// True when the format writes tools by their wire names.
    pub(crate) fn uses_wire_names(self) -> bool {
        self.lesson.naming == Naming::Wire
    }
}

impl std::fmt::Display for CallFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CallFormat {
    type Err = String;

    /// A format name or alias (`xml` is `action`), in any case; `auto` and unknown names
    /// are refused with the closest name and the list.
    fn from_str(s: &str) -> Result<Self, String> {
        let wanted = s.trim();
        if let Some(cf) = wanted.parse::<Format>().ok().and_then(Self::of) {
            return Ok(cf);
        }
        let names: Vec<&str> = Self::all().map(Self::name).collect();
        let why = if wanted.eq_ignore_ascii_case("auto") {
            "'auto' is how output is read, not a format to teach; name the format the model writes"
                .to_string()
        } else {
            format!(
                "unknown call format '{wanted}'{}",
                crate::suggest::did_you_mean(wanted, &names)
            )
        };
        Err(format!("{why} (call formats: {})", Self::names_text()))
    }
}

impl serde::Serialize for CallFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for CallFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------- writing calls

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn xml_value(v: &Value) -> String {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| format!("<item>{}</item>", xml_value(i)))
            .collect(),
        Value::Object(_) => format!("<![CDATA[{v}]]>"),
        other => text_of(other),
    }
}

/// `{"name": "x", "<key>": {…}}`, spaced as models write it.
fn json_call_with(name: &str, key: &str, args: &[Arg<'_>]) -> String {
    format!(
        "{{\"name\": {}, \"{key}\": {}}}",
        Value::String(name.into()),
        pretty_inline(args)
    )
}

/// The arguments as one-line JSON with a space after `:` and `,`.
fn pretty_inline(args: &[Arg<'_>]) -> String {
    if args.is_empty() {
        return "{}".into();
    }
    let inner: Vec<String> = args
        .iter()
        .map(|(k, v)| format!("{}: {}", Value::String((*k).into()), v))
        .collect();
    format!("{{{}}}", inner.join(", "))
}

fn action_call(name: &str, args: &[Arg<'_>]) -> String {
    let mut s = format!("<ACTION>\n    <{name}>\n");
    for (k, v) in args {
        let _ = writeln!(s, "        <{k}>{}</{k}>", xml_value(v));
    }
    let _ = write!(s, "    </{name}>\n</ACTION>");
    s
}

fn tam_call(name: &str, args: &[Arg<'_>]) -> String {
    let mut s = format!("<|[REQUEST_TOOL]|>\ncommand:「始」{name}「末」\n");
    for (k, v) in args {
        let _ = writeln!(s, "{k}:「始」{}「末」", text_of(v));
    }
    s.push_str("<|[END_TOOL]|>");
    s
}

fn vcp_call(name: &str, args: &[Arg<'_>]) -> String {
    let mut s = format!("<<<[TOOL_REQUEST]>>>\ntool_name:「始」{name}「末」,\n");
    for (k, v) in args {
        let _ = writeln!(s, "{k}:「始」{}「末」,", text_of(v));
    }
    s.push_str("<<<[END_TOOL_REQUEST]>>>");
    s
}

/// One `<tag name>value</tag>` line per argument, values as text.
fn text_params(args: &[Arg<'_>], open: impl Fn(&str) -> String, close: &str) -> String {
    args.iter()
        .map(|(k, v)| format!("{}{}{close}\n", open(k), text_of(v)))
        .collect()
}

fn qwen3_coder_call(name: &str, args: &[Arg<'_>]) -> String {
    let params = text_params(args, |k| format!("<parameter={k}>\n"), "\n</parameter>");
    format!("<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>")
}

fn glm45_call(name: &str, args: &[Arg<'_>]) -> String {
    let pairs = text_params(
        args,
        |k| format!("<arg_key>{k}</arg_key>\n<arg_value>"),
        "</arg_value>",
    );
    format!("<tool_call>{name}\n{pairs}</tool_call>")
}

fn kimi_k2_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
        pretty_inline(args)
    )
}

fn harmony_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{}<|call|>",
        pretty_inline(args)
    )
}

fn minimax_m2_call(name: &str, args: &[Arg<'_>]) -> String {
    let params = text_params(
        args,
        |k| format!("<parameter name=\"{k}\">"),
        "</parameter>",
    );
    format!(
        "<minimax:tool_call>\n<invoke name=\"{name}\">\n{params}</invoke>\n</minimax:tool_call>"
    )
}

fn step3_call(name: &str, args: &[Arg<'_>]) -> String {
    let params = text_params(
        args,
        |k| format!("<steptml:parameter name=\"{k}\">"),
        "</steptml:parameter>",
    );
    format!("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"{name}\">\n{params}</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>")
}

fn gemma_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("<|\"|>{s}<|\"|>"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(gemma_value).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", gemma_value(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

fn gemma4_call(name: &str, args: &[Arg<'_>]) -> String {
    let inner: Vec<String> = args
        .iter()
        .map(|(k, v)| format!("{k}:{}", gemma_value(v)))
        .collect();
    format!("<|tool_call>call:{name}{{{}}}<tool_call|>", inner.join(","))
}

fn gemma3_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("```tool_code\n{}\n```", python_call(name, args))
}

fn lfm2_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<|tool_call_start|>[{}]<|tool_call_end|>",
        python_call(name, args)
    )
}

fn olmo3_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<function_calls>\n{}\n</function_calls>",
        python_call(name, args)
    )
}

fn granite3_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("<|tool_call|>[{}]", json_call(name, args))
}

fn tool_calls_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("<tool_calls>[{}]</tool_calls>", json_call(name, args))
}

fn internlm2_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<|action_start|><|plugin|>\n{}<|action_end|>",
        json_call_with(name, "parameters", args)
    )
}

fn longcat_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<longcat_tool_call>{}</longcat_tool_call>",
        json_call(name, args)
    )
}

fn functools_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("functools[{}]", json_call(name, args))
}

fn gigachat3_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("function call<|role_sep|>\n{}", json_call(name, args))
}

fn command_r_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "Action: ```json\n[{{\"tool_name\": {}, \"parameters\": {}}}]\n```",
        Value::String(name.into()),
        pretty_inline(args)
    )
}

fn apertus_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<|tools_prefix|>[{{{}: {}}}]<|tools_suffix|>",
        Value::String(name.into()),
        pretty_inline(args)
    )
}

fn json_call(name: &str, args: &[Arg<'_>]) -> String {
    json_call_with(name, "arguments", args)
}

fn hermes_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("<tool_call>\n{}\n</tool_call>", json_call(name, args))
}

fn llama_json_call(name: &str, args: &[Arg<'_>]) -> String {
    json_call_with(name, "parameters", args)
}

fn mistral_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("[TOOL_CALLS] [{}]", json_call(name, args))
}

fn granite_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("<function_call> {}", json_call(name, args))
}

fn glm_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("{name}\n{}", pretty_inline(args))
}

fn deepseek_call(name: &str, args: &[Arg<'_>]) -> String {
    format!(
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        pretty_inline(args)
    )
}

fn functionary_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("<function={name}>{}</function>", pretty_inline(args))
}

fn pythonic_call(name: &str, args: &[Arg<'_>]) -> String {
    format!("[{}]", python_call(name, args))
}

/// One call `name(k=v, …)` with Python literals.
fn python_call(name: &str, args: &[Arg<'_>]) -> String {
    let inner: Vec<String> = args
        .iter()
        .map(|(k, v)| format!("{k}={}", python_literal(v)))
        .collect();
    format!("{name}({})", inner.join(", "))
}

/// A JSON value as the Python literal a model would write.
pub(crate) fn python_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut out = String::with_capacity(s.len() + 2);
            out.push('\'');
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("\\'"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c => out.push(c),
                }
            }
            out.push('\'');
            out
        }
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(python_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!(
                    "{}: {}",
                    python_literal(&Value::String(k.clone())),
                    python_literal(v)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_format_of_the_protocol_can_be_taught() {
        // A format added to the protocol's table needs its row in LESSONS.
        for f in Format::all().filter(|f| *f != Format::Auto) {
            assert!(
                CallFormat::of(f).is_some(),
                "format '{f}' has no row in agent::call_format::LESSONS"
            );
        }
        let names: Vec<&str> = CallFormat::all().map(CallFormat::name).collect();
        assert_eq!(names, &Format::NAMES[1..]);
        assert_eq!(CallFormat::ACTION.name(), "action");
        assert_eq!(CallFormat::TAM.name(), "tam");
        for (i, l) in LESSONS.iter().enumerate() {
            assert!(LESSONS[i + 1..].iter().all(|o| o.name != l.name), "{l:?}");
        }
    }

    #[test]
    fn every_example_reads_back_as_its_call() {
        // What the manual teaches, the protocol reads: each format's example, read in
        // that format, is the one call it shows.
        let args: Vec<Arg<'_>> = vec![("ore", json!("iron")), ("note", json!("a b"))];
        for cf in CallFormat::all() {
            let text = cf.example("forge:smelt", "forge_smelt", &args);
            let p = crate::protocol::parse(&text, cf.format());
            assert_eq!(p.calls.len(), 1, "{cf}: {text}\n{p:?}");
            let want = if cf.uses_wire_names() {
                "forge_smelt"
            } else {
                "forge:smelt"
            };
            assert_eq!(p.calls[0].tool, want, "{cf}");
            assert_eq!(p.calls[0].args["ore"], "iron", "{cf}");
            assert_eq!(p.calls[0].args["note"], "a b", "{cf}");
            assert!(!p.has_errors(), "{cf}: {:?}", p.diagnostics);
        }
    }

    #[test]
    fn names_parse_with_a_did_you_mean() {
        assert_eq!("TAM".parse::<CallFormat>().unwrap().format(), Format::Tam);
        assert_eq!("xml".parse::<CallFormat>().unwrap().name(), "action");
        let e = "actoin".parse::<CallFormat>().unwrap_err();
        assert!(
            e.starts_with("unknown call format 'actoin', did you mean 'action'?"),
            "{e}"
        );
        assert!(e.contains(&CallFormat::names_text()), "{e}");
        let e = "auto".parse::<CallFormat>().unwrap_err();
        assert!(e.contains("not a format to teach"), "{e}");
        assert_eq!(
            serde_json::to_value("vcp".parse::<CallFormat>().unwrap()).unwrap(),
            "vcp"
        );
    }

    #[test]
    fn examples_are_written_from_the_arguments() {
        let args: Vec<Arg<'_>> = vec![("ore", json!("iron")), ("amount", json!(4))];
        let row = |n: &str| LESSONS.iter().find(|l| l.name == n).unwrap();
        let ex = |n: &str| (row(n).example)("forge_smelt", &args);
        assert_eq!(ex("pythonic"), "[forge_smelt(ore='iron', amount=4)]");
        assert_eq!(
            ex("hermes"),
            "<tool_call>\n{\"name\": \"forge_smelt\", \"arguments\": {\"ore\": \"iron\", \"amount\": 4}}\n</tool_call>"
        );
        assert_eq!(
            ex("llama_json"),
            "{\"name\": \"forge_smelt\", \"parameters\": {\"ore\": \"iron\", \"amount\": 4}}"
        );
        assert_eq!(
            ex("functionary"),
            "<function=forge_smelt>{\"ore\": \"iron\", \"amount\": 4}</function>"
        );
        assert_eq!(ex("glm"), "forge_smelt\n{\"ore\": \"iron\", \"amount\": 4}");
        assert_eq!(
            python_literal(&json!({"a": [true, null, "it's"]})),
            "{'a': [True, None, 'it\\'s']}"
        );
    }
}
