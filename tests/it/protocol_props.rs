//! Property tests: render → parse round trips; no input makes any reader panic;
//! streaming with any chunking equals one-shot parsing.

use proptest::prelude::*;
use serde_json::{Map, Value};
use tavern::internal::protocol::{
    parse, render_tam, try_render_tam, Call, Format, OnError, RenderError, StreamReader,
};

const VALUE_PIECES: &[&str] = &[
    "a",
    "text",
    " ",
    "  ",
    "\t",
    "\n",
    "\n",
    "\r\n",
    "\r",
    "#",
    "# heading",
    "「末」 mid-line",
    "「末」",
    "「始」",
    ",",
    "：",
    ":",
    "中文",
    "<|[END_TOOL]|>",
    "\n<|[END_TOOL]|>\n",
    "\n  <|[end_tool]|>",
    "\n<|[REQUEST_TOOL]|>\n",
    "<<<[TOOL_REQUEST]>>>",
    "<think>",
    "</ACTION>",
    "x:「始」",
    "\nkey:「始」",
    "「末」\n",
    "{\"json\": [1, 2]}",
];

fn value() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(VALUE_PIECES), 0..8).prop_map(|v| v.concat())
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z_][a-zA-Z0-9_.-]{0,10}",
        "[a-z]{1,4}[0-9]{1,3}",
        Just("文件路径".to_string()),
        Just("sha256".to_string()),
        Just("x_".to_string()),
        Just("common_lang".to_string()),
    ]
}

fn tool() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9_]{0,8}([.:][A-Za-z][A-Za-z0-9_]{0,8})?"
}

/// Keys that name different parameters: a block that names one parameter twice (`X` and
/// `x_` match the same one, case and `_` ignored) runs nothing, so it cannot round-trip.
fn args() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((key(), value()), 0..5).prop_map(|kv| {
        let mut seen = std::collections::HashSet::new();
        kv.into_iter()
            .filter(|(k, _)| {
                seen.insert(
                    k.chars()
                        .filter(|c| !matches!(c, '_' | '-' | '.'))
                        .flat_map(char::to_lowercase)
                        .collect::<String>(),
                )
            })
            .map(|(k, v)| (k, Value::String(v)))
            .collect()
    })
}

/// Blocks of calls: a plain call, or a chain of steps with increasing numbers.
fn calls() -> impl Strategy<Value = Vec<Call>> {
    let block = prop_oneof![
        (tool(), args()).prop_map(|(t, a)| vec![(t, a, None, false)]),
        prop::collection::vec((tool(), args(), 1u32..4, any::<bool>()), 1..4).prop_map(|steps| {
            let mut n = 0;
            steps
                .into_iter()
                .map(|(t, a, gap, cont)| {
                    n += gap;
                    (t, a, Some(n), cont)
                })
                .collect()
        }),
    ];
    prop::collection::vec(block, 1..4).prop_map(|blocks| {
        let mut out = Vec::new();
        for (b, steps) in blocks.into_iter().enumerate() {
            for (t, a, step, cont) in steps {
                let mut c = Call::new(t, a);
                c.block = b;
                c.step = step;
                c.on_error = if cont {
                    OnError::Continue
                } else {
                    OnError::Stop
                };
                out.push(c);
            }
        }
        out
    })
}

fn same(a: &[Call], b: &[Call]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.tool == y.tool
                && x.args == y.args
                && x.step == y.step
                && x.block == y.block
                && x.on_error == y.on_error
                && x.args.keys().eq(y.args.keys())
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// parse(render(calls)) == calls for every call TAM can carry; and when the
    /// renderer refuses a value, writing it anyway really does not read back.
    #[test]
    fn render_then_parse_round_trips(calls in calls()) {
        match try_render_tam(&calls) {
            Ok(text) => {
                let parsed = parse(&text, Format::Tam);
                prop_assert!(parsed.diagnostics.is_empty(), "{:?}\n{}", parsed.diagnostics, text);
                prop_assert!(same(&parsed.calls, &calls), "text:\n{}\nparsed: {:#?}\nwant: {:#?}", text, parsed.calls, calls);
                prop_assert_eq!(parse(&text, Format::Auto).calls, parsed.calls);
            }
            Err(RenderError::Value { call, key, .. }) => {
                // The refused value alone, written anyway, must fail to read back.
                let c = &calls[call];
                let v = if key == "command" { c.tool.clone() } else { c.args[&key].as_str().unwrap().to_string() };
                let mut args = Map::new();
                args.insert("v".into(), Value::String(v.clone()));
                let probe = if key == "command" { Call::new(v, Map::new()) } else { Call::new("T", args) };
                let text = render_tam(std::slice::from_ref(&probe));
                let parsed = parse(&text, Format::Tam);
                prop_assert!(!same(&parsed.calls, std::slice::from_ref(&probe)) || !parsed.diagnostics.is_empty(),
                    "renderer refused a value that reads back: {:?}", probe);
            }
            Err(_) => {}
        }
    }

    /// Values from the renderer's own alphabet, one pair at a time: most are carried.
    #[test]
    fn single_values_round_trip(v in value()) {
        let mut args = Map::new();
        args.insert("body".into(), Value::String(v.clone()));
        let calls = vec![Call::new("Doc.Save", args)];
        if let Ok(text) = try_render_tam(&calls) {
            let parsed = parse(&text, Format::Tam);
            prop_assert!(same(&parsed.calls, &calls), "value {:?}\ntext:\n{}", v, text);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        for f in [Format::Auto, Format::Tam, Format::Vcp, Format::Action, Format::Json] {
            let p = parse(&text, f);
            for d in &p.diagnostics {
                prop_assert!(d.line >= 1 && d.column >= 1);
            }
        }
    }

    #[test]
    fn protocol_soup_never_panics_and_streams_equal(
        pieces in prop::collection::vec(prop::sample::select(SOUP), 0..60),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let text = pieces.concat();
        for f in [Format::Auto, Format::Tam, Format::Vcp, Format::Action, Format::Json] {
            let one = parse(&text, f);
            // Random chunk boundaries, snapped to char boundaries.
            let mut at: Vec<usize> = cuts.iter().map(|i| {
                let mut p = i.index(text.len() + 1);
                while !text.is_char_boundary(p) { p -= 1; }
                p
            }).collect();
            at.push(0);
            at.push(text.len());
            at.sort_unstable();
            let mut r = StreamReader::new(f);
            let mut early = Vec::new();
            for w in at.windows(2) {
                early.extend(r.push(&text[w[0]..w[1]]));
            }
            let fin = r.finish();
            prop_assert_eq!(&fin, &one, "format {:?} text {:?}", f, text);
            prop_assert!(one.calls.starts_with(&early));
        }
    }

    #[test]
    fn arbitrary_bytes_stream_like_lossy_text(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let lossy = String::from_utf8_lossy(&bytes).into_owned();
        let one = parse(&lossy, Format::Auto);
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.push(0);
        at.push(bytes.len());
        at.sort_unstable();
        let mut r = StreamReader::new(Format::Auto);
        for w in at.windows(2) {
            r.push_bytes(&bytes[w[0]..w[1]]);
        }
        prop_assert_eq!(r.finish(), one);
    }

    #[test]
    fn utf8_split_inside_chars_streams_equal(text in "[a-z「始」「末」中文:\n<|\\[\\]>A-Z_]{0,60}", cut in any::<prop::sample::Index>()) {
        let text = format!("<|[REQUEST_TOOL]|>\ncommand:「始」T「末」\nk:「始」{text}「末」\n<|[END_TOOL]|>");
        let b = text.as_bytes();
        let c = cut.index(b.len() + 1);
        let mut r = StreamReader::new(Format::Auto);
        r.push_bytes(&b[..c]);
        r.push_bytes(&b[c..]);
        prop_assert_eq!(r.finish(), parse(&text, Format::Auto));
    }
}

const SOUP: &[&str] = &[
    "<|[REQUEST_TOOL]|>",
    "<|[END_TOOL]|>",
    "<<<[TOOL_REQUEST]>>>",
    "<<<[END_TOOL_REQUEST]>>>",
    "<ACTION>",
    "</ACTION>",
    "<action >",
    "<Tool>",
    "</Tool>",
    "<p>",
    "</p>",
    "<x/>",
    "<![CDATA[",
    "]]>",
    "<!--",
    "-->",
    "&amp;",
    "&",
    "&#x41;",
    "<think>",
    "</think>",
    "<thinking>",
    "command:「始」",
    "command1:「始」",
    "x2:「始」",
    "common_a:「始」",
    "on_error_1:「始」",
    "「末」",
    "「始」",
    "tool_name:",
    "a",
    " ",
    "\n",
    "\r\n",
    "\r",
    ",",
    "#",
    "```",
    "{\"name\":\"a\",\"arguments\":{}}",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "中",
];
