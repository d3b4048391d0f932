//! Property tests for the native formats: random calls rendered in each format read back
//! as the same calls (tool, arguments with their types, order, `source`), with `auto`
//! and with the format's own name, one-shot and streamed in random chunks.

use proptest::prelude::*;
use serde_json::{Map, Value};
use tavern::internal::protocol::{parse, Format, Severity, StreamReader};

const STRING_PIECES: &[&str] = &[
    "a",
    "iron",
    " ",
    "\n",
    "\r\n",
    "\t",
    "'",
    "\"",
    "\\",
    "\\_",
    "}",
    "]",
    ")",
    "{",
    "[",
    "(",
    ",",
    ";",
    "=",
    ":",
    "<",
    ">",
    "</tool_call>",
    "</function>",
    "[ARGS]",
    ">>>",
    "中文",
    "「末」",
    "True",
    "None",
    "#",
    "```",
];

fn string() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(STRING_PIECES), 0..6).prop_map(|v| v.concat())
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        string().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-4000i32..4000).prop_map(|n| Value::from(f64::from(n) / 8.0 + 0.5)),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z][a-z0-9_]{0,5}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn args() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-z_][a-z0-9_]{0,8}", value(), 0..4)
        .prop_map(|m| m.into_iter().collect())
}

fn tool() -> impl Strategy<Value = String> {
    "t[a-z0-9_]{0,8}(\\.[a-z][a-z0-9_]{0,8})?"
}

fn calls() -> impl Strategy<Value = Vec<(String, Map<String, Value>)>> {
    prop::collection::vec((tool(), args()), 1..4)
}

/// JSON with `</` written `<\/`, so no closing tag appears inside a value.
fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap().replace("</", "<\\/")
}

fn obj(name: &str, key: &str, a: &Map<String, Value>) -> Value {
    serde_json::json!({"name": name, key: a})
}

/// A Python literal.
fn py(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:?}"),
            _ => n.to_string(),
        },
        Value::String(s) => {
            let mut o = String::from("'");
            for c in s.chars() {
                match c {
                    '\\' => o.push_str("\\\\"),
                    '\'' => o.push_str("\\'"),
                    '\n' => o.push_str("\\n"),
                    '\r' => o.push_str("\\r"),
                    '\t' => o.push_str("\\t"),
                    c => o.push(c),
                }
            }
            o.push('\'');
            o
        }
        Value::Array(a) => format!("[{}]", a.iter().map(py).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", py(&Value::from(k.as_str())), py(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `calls` written in `format` (GLM writes one call).
fn render(format: Format, calls: &[(String, Map<String, Value>)], variant: bool) -> String {
    let mut out = String::new();
    match format {
        Format::Hermes => {
            for (t, a) in calls {
                out += &format!(
                    "<tool_call>\n{}\n</tool_call>\n",
                    json(&obj(t, "arguments", a))
                );
            }
        }
        Format::Pythonic => {
            let items: Vec<String> = calls
                .iter()
                .map(|(t, a)| {
                    let kw: Vec<String> = a.iter().map(|(k, v)| format!("{k}={}", py(v))).collect();
                    format!("{t}({})", kw.join(", "))
                })
                .collect();
            out = if variant {
                format!("```python\n    {}\n```", items.join("\n    "))
            } else {
                format!("[{}]", items.join(", "))
            };
        }
        Format::LlamaJson => {
            let items: Vec<String> = calls
                .iter()
                .map(|(t, a)| json(&obj(t, "parameters", a)))
                .collect();
            out = format!("<|python_tag|>{}", items.join("; "));
        }
        Format::Mistral => {
            if variant {
                for (t, a) in calls {
                    out += &format!("[TOOL_CALLS]{t}[ARGS]{}", json(&Value::Object(a.clone())));
                }
            } else {
                let items: Vec<Value> = calls.iter().map(|(t, a)| obj(t, "arguments", a)).collect();
                out = format!("[TOOL_CALLS] {}", json(&Value::Array(items)));
            }
        }
        Format::Json => {
            let items: Vec<Value> = calls
                .iter()
                .map(|(t, a)| serde_json::json!({"type": "function", "function": {"name": t, "arguments": json(&Value::Object(a.clone()))}}))
                .collect();
            out = json(&serde_json::json!({"tool_calls": items}));
        }
        Format::Granite => {
            for (t, a) in calls {
                out += &format!("<function_call> {}\n", json(&obj(t, "arguments", a)));
            }
        }
        Format::Glm => {
            let (t, a) = &calls[0];
            out = format!("{t}\n{}", json(&Value::Object(a.clone())));
        }
        Format::DeepSeek => {
            out += "<｜tool▁calls▁begin｜>";
            for (t, a) in calls {
                out += &format!(
                    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{t}\n```json\n{}\n```<｜tool▁call▁end｜>\n",
                    json(&Value::Object(a.clone()))
                );
            }
            out += "<｜tool▁calls▁end｜>";
        }
        Format::Functionary => {
            for (t, a) in calls {
                let args = json(&Value::Object(a.clone()));
                out += &if variant {
                    format!(">>>{t}\n{args}\n")
                } else {
                    format!("<function={t}>{args}</function>")
                };
            }
        }
        Format::KimiK2 => {
            out += "<|tool_calls_section_begin|>";
            for (i, (t, a)) in calls.iter().enumerate() {
                out += &format!(
                    "<|tool_call_begin|>functions.{t}:{i}<|tool_call_argument_begin|>{}<|tool_call_end|>",
                    json(&Value::Object(a.clone()))
                );
            }
            out += "<|tool_calls_section_end|>";
        }
        Format::Harmony => {
            for (t, a) in calls {
                out += &format!(
                    "<|start|>assistant<|channel|>commentary to=functions.{t} <|constrain|>json<|message|>{}<|call|>",
                    json(&Value::Object(a.clone()))
                );
            }
        }
        Format::Granite3 | Format::ToolCalls | Format::Functools | Format::Apertus => {
            let items: Vec<Value> = calls
                .iter()
                .map(|(t, a)| match format {
                    Format::Apertus => serde_json::json!({ t.as_str(): a }),
                    _ => obj(t, "arguments", a),
                })
                .collect();
            let list = json(&Value::Array(items));
            out = match format {
                Format::Granite3 => format!("<|tool_call|>{list}"),
                Format::ToolCalls => format!("<tool_calls>{list}</tool_calls>"),
                Format::Functools => format!("functools{list}"),
                _ => format!("<|tools_prefix|>{list}<|tools_suffix|>"),
            };
        }
        Format::Internlm2 | Format::Longcat => {
            for (t, a) in calls {
                out += &match format {
                    Format::Internlm2 => format!(
                        "<|action_start|><|plugin|>\n{}<|action_end|>\n",
                        json(&obj(t, "parameters", a))
                    ),
                    _ => format!(
                        "<longcat_tool_call>{}</longcat_tool_call>\n",
                        json(&obj(t, "arguments", a))
                    ),
                };
            }
        }
        Format::Lfm2 | Format::Olmo3 | Format::Gemma3 => {
            let items: Vec<String> = calls
                .iter()
                .map(|(t, a)| {
                    let kw: Vec<String> = a.iter().map(|(k, v)| format!("{k}={}", py(v))).collect();
                    format!("{t}({})", kw.join(", "))
                })
                .collect();
            out = match format {
                Format::Lfm2 => {
                    format!("<|tool_call_start|>[{}]<|tool_call_end|>", items.join(", "))
                }
                Format::Olmo3 => {
                    format!("<function_calls>\n{}\n</function_calls>", items.join("\n"))
                }
                _ => format!("```tool_code\n{}\n```", items.join("\n")),
            };
        }
        Format::Qwen3Coder => {
            for (t, a) in calls {
                out += &format!("<tool_call>\n<function={t}>\n");
                for (k, v) in a {
                    out += &format!("<parameter={k}>\n{}\n</parameter>\n", json(v));
                }
                out += "</function>\n</tool_call>\n";
            }
        }
        Format::Glm45 => {
            for (t, a) in calls {
                out += &format!("<tool_call>{t}\n");
                for (k, v) in a {
                    out += &format!(
                        "<arg_key>{k}</arg_key>\n<arg_value>{}</arg_value>\n",
                        json(v)
                    );
                }
                out += "</tool_call>\n";
            }
        }
        Format::MinimaxM2 | Format::Step3 => {
            let p = if format == Format::Step3 {
                "steptml:"
            } else {
                ""
            };
            let mut body = String::new();
            for (t, a) in calls {
                body += &format!("<{p}invoke name=\"{t}\">\n");
                for (k, v) in a {
                    body += &format!("<{p}parameter name=\"{k}\">{}</{p}parameter>\n", json(v));
                }
                body += &format!("</{p}invoke>\n");
            }
            out = if format == Format::Step3 {
                format!("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>{body}<｜tool_call_end｜><｜tool_calls_end｜>")
            } else {
                format!("<minimax:tool_call>\n{body}</minimax:tool_call>")
            };
        }
        Format::Gemma4 => {
            fn g(v: &Value) -> String {
                match v {
                    Value::String(s) => format!("<|\"|>{s}<|\"|>"),
                    Value::Array(a) => {
                        format!("[{}]", a.iter().map(g).collect::<Vec<_>>().join(","))
                    }
                    Value::Object(m) => format!(
                        "{{{}}}",
                        m.iter()
                            .map(|(k, v)| format!("{k}:{}", g(v)))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    other => other.to_string(),
                }
            }
            for (t, a) in calls {
                out += &format!(
                    "<|tool_call>call:{t}{}<tool_call|>",
                    g(&Value::Object(a.clone()))
                );
            }
        }
        _ => unreachable!("not a native format"),
    }
    out
}

const NATIVE: &[Format] = &[
    Format::Hermes,
    Format::Pythonic,
    Format::LlamaJson,
    Format::Mistral,
    Format::Json,
    Format::Granite,
    Format::Glm,
    Format::DeepSeek,
    Format::Functionary,
    Format::KimiK2,
    Format::Harmony,
    Format::Granite3,
    Format::ToolCalls,
    Format::Functools,
    Format::Apertus,
    Format::Internlm2,
    Format::Longcat,
    Format::Lfm2,
    Format::Olmo3,
    Format::Gemma3,
    Format::Qwen3Coder,
    Format::Glm45,
    Format::MinimaxM2,
    Format::Step3,
    Format::Gemma4,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rendered_calls_read_back(
        calls in calls(),
        variant in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        for &format in NATIVE {
            let want: Vec<_> = if format == Format::Glm { calls[..1].to_vec() } else { calls.clone() };
            let text = render(format, &want, variant);
            for read_as in [format, Format::Auto] {
                let p = parse(&text, read_as);
                prop_assert!(
                    !p.diagnostics.iter().any(|d| d.severity == Severity::Error),
                    "{format} as {read_as}: {text}\n{:?}", p.diagnostics
                );
                let got: Vec<_> = p.calls.iter().map(|c| (c.tool.clone(), c.args.to_map())).collect();
                prop_assert_eq!(&got, &want, "{} as {}: {}", format, read_as, text);
                for c in &p.calls {
                    let source = if format == Format::Json { Format::Json } else { format };
                    prop_assert_eq!(c.source, source);
                    prop_assert!(c.span.line >= 1 && c.span.column >= 1);
                }
                // Streamed in random chunks: the same result.
                let mut offs: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
                offs.sort_unstable();
                let mut r = StreamReader::new(read_as);
                let mut at = 0;
                for o in offs {
                    r.push_bytes(&text.as_bytes()[at..o.max(at)]);
                    at = o.max(at);
                }
                r.push_bytes(&text.as_bytes()[at..]);
                prop_assert_eq!(r.finish(), p);
            }
            // Cut anywhere inside the calls, nothing of the cut call runs.
            if let Some(i) = cuts.first() {
                let cut = i.index(text.len());
                if let Some(t) = text.get(..cut) {
                    let p = parse(t, format);
                    prop_assert!(p.calls.len() <= want.len());
                    for (c, w) in p.calls.iter().zip(&want) {
                        prop_assert_eq!(&c.tool, &w.0, "cut at {} of {:?}", cut, text);
                        prop_assert_eq!(&c.args, &w.1, "cut at {} of {:?}", cut, text);
                    }
                }
            }
        }
    }
}
