//! Constrained calls (issue 38): the GBNF grammar an agent sends admits exactly a valid
//! call in its call format (checked by a GBNF recognizer written here from llama.cpp's
//! grammar syntax), and the request bodies a real loopback server receives carry the
//! constraint in the shape the settings ask for.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};
use tavern::internal::agent::llm::Constraint;
#[cfg(all(feature = "server", feature = "llm-http"))]
use tavern::internal::agent::llm::LlmSettings;
use tavern::internal::agent::{example, CallFormat};
use tavern::internal::tools::ToolDefinition;
use tavern::Engine;

#[cfg(all(feature = "server", feature = "llm-http"))]
use crate::agent_support::{serve, Reply};

// ---------------------------------------------------------------- a GBNF recognizer

#[derive(Debug, Clone)]
enum Node {
    Lit(Vec<char>),
    Class {
        neg: bool,
        ranges: Vec<(char, char)>,
    },
    Ref(String),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Rep(Box<Node>, usize, Option<usize>),
}

struct Grammar {
    rules: HashMap<String, Node>,
}

struct P<'a> {
    s: &'a [char],
    i: usize,
}

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && (self.s[self.i] == ' ' || self.s[self.i] == '\t') {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn escape(&mut self) -> char {
        let c = self.s[self.i];
        self.i += 1;
        let hex = |p: &mut Self, n: usize| {
            let h: String = p.s[p.i..p.i + n].iter().collect();
            p.i += n;
            char::from_u32(u32::from_str_radix(&h, 16).expect("hex escape")).expect("a char")
        };
        match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'x' => hex(self, 2),
            'u' => hex(self, 4),
            other => other,
        }
    }
    fn alt(&mut self) -> Node {
        let mut alts = vec![self.seq()];
        loop {
            self.ws();
            if self.peek() == Some('|') {
                self.i += 1;
                alts.push(self.seq());
            } else {
                break;
            }
        }
        if alts.len() == 1 {
            alts.pop().unwrap()
        } else {
            Node::Alt(alts)
        }
    }
    fn seq(&mut self) -> Node {
        let mut items = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                None | Some('|') | Some(')') => break,
                _ => {
                    let mut atom = self.atom();
                    loop {
                        match self.peek() {
                            Some('*') => atom = Node::Rep(Box::new(atom), 0, None),
                            Some('+') => atom = Node::Rep(Box::new(atom), 1, None),
                            Some('?') => atom = Node::Rep(Box::new(atom), 0, Some(1)),
                            _ => break,
                        }
                        self.i += 1;
                    }
                    items.push(atom);
                }
            }
        }
        Node::Seq(items)
    }
    fn atom(&mut self) -> Node {
        match self.peek().expect("an atom") {
            '"' => {
                self.i += 1;
                let mut out = Vec::new();
                while self.s[self.i] != '"' {
                    if self.s[self.i] == '\\' {
                        self.i += 1;
                        out.push(self.escape());
                    } else {
                        out.push(self.s[self.i]);
                        self.i += 1;
                    }
                }
                self.i += 1;
                Node::Lit(out)
            }
            '[' => {
                self.i += 1;
                let neg = self.peek() == Some('^');
                if neg {
                    self.i += 1;
                }
                let mut ranges = Vec::new();
                while self.s[self.i] != ']' {
                    let lo = if self.s[self.i] == '\\' {
                        self.i += 1;
                        self.escape()
                    } else {
                        self.i += 1;
                        self.s[self.i - 1]
                    };
                    let hi = if self.s[self.i] == '-' && self.s[self.i + 1] != ']' {
                        self.i += 1;
                        if self.s[self.i] == '\\' {
                            self.i += 1;
                            self.escape()
                        } else {
                            self.i += 1;
                            self.s[self.i - 1]
                        }
                    } else {
                        lo
                    };
                    ranges.push((lo, hi));
                }
                self.i += 1;
                Node::Class { neg, ranges }
            }
            '(' => {
                self.i += 1;
                let n = self.alt();
                self.ws();
                assert_eq!(self.peek(), Some(')'), "a closing parenthesis");
                self.i += 1;
                n
            }
            _ => {
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                {
                    self.i += 1;
                }
                assert!(self.i > start, "a rule name at {}", self.i);
                Node::Ref(self.s[start..self.i].iter().collect())
            }
        }
    }
}

impl Grammar {
    /// Parses GBNF (one rule per line, `#` comments).
    fn parse(text: &str) -> Grammar {
        let mut rules = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, body) = line.split_once("::=").expect("a rule");
            let chars: Vec<char> = body.chars().collect();
            let mut p = P { s: &chars, i: 0 };
            let node = p.alt();
            p.ws();
            assert_eq!(p.i, chars.len(), "rule {name} parsed to its end: {body}");
            assert!(
                rules.insert(name.trim().to_string(), node).is_none(),
                "rule {name} defined once"
            );
        }
        let g = Grammar { rules };
        for n in g.rules.values() {
            g.check_refs(n);
        }
        g
    }

    fn check_refs(&self, n: &Node) {
        match n {
            Node::Ref(r) => assert!(self.rules.contains_key(r), "rule {r} is defined"),
            Node::Seq(v) | Node::Alt(v) => v.iter().for_each(|x| self.check_refs(x)),
            Node::Rep(x, ..) => self.check_refs(x),
            _ => {}
        }
    }

    /// Every position where `n` can end, starting at `at`.
    fn ends(
        &self,
        n: &Node,
        t: &[char],
        at: usize,
        memo: &mut HashMap<(String, usize), BTreeSet<usize>>,
    ) -> BTreeSet<usize> {
        match n {
            Node::Lit(l) => {
                if t.len() >= at + l.len() && t[at..at + l.len()] == l[..] {
                    BTreeSet::from([at + l.len()])
                } else {
                    BTreeSet::new()
                }
            }
            Node::Class { neg, ranges } => match t.get(at) {
                Some(c) if ranges.iter().any(|(lo, hi)| lo <= c && c <= hi) != *neg => {
                    BTreeSet::from([at + 1])
                }
                _ => BTreeSet::new(),
            },
            Node::Ref(r) => {
                let key = (r.clone(), at);
                if let Some(e) = memo.get(&key) {
                    return e.clone();
                }
                let e = self.ends(&self.rules[r], t, at, memo);
                memo.insert(key, e.clone());
                e
            }
            Node::Seq(items) => {
                let mut here = BTreeSet::from([at]);
                for it in items {
                    let mut next = BTreeSet::new();
                    for p in here {
                        next.extend(self.ends(it, t, p, memo));
                    }
                    here = next;
                }
                here
            }
            Node::Alt(alts) => alts
                .iter()
                .flat_map(|a| self.ends(a, t, at, memo))
                .collect(),
            Node::Rep(x, min, max) => {
                let mut out = BTreeSet::new();
                let mut frontier = BTreeSet::from([at]);
                let mut seen = BTreeSet::new();
                let mut k = 0;
                loop {
                    if k >= *min {
                        out.extend(frontier.iter().copied());
                    }
                    if max.is_some_and(|m| k >= m) || frontier.is_empty() {
                        break;
                    }
                    let mut next = BTreeSet::new();
                    for p in &frontier {
                        for e in self.ends(x, t, *p, memo) {
                            if e > *p || k < *min {
                                next.insert(e);
                            }
                        }
                    }
                    next.retain(|p| k < *min || seen.insert(*p));
                    frontier = next;
                    k += 1;
                }
                out
            }
        }
    }

    fn accepts(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        let mut memo = HashMap::new();
        self.ends(&Node::Ref("root".into()), &t, 0, &mut memo)
            .contains(&t.len())
    }
}

#[test]
fn the_recognizer_reads_gbnf() {
    let g = Grammar::parse(
        "root ::= \"a\" ws (b | \"c\")* [^x\\n]? [0-9]+\nws ::= [ ]?\nb ::= \"\\x62\"\n",
    );
    assert!(g.accepts("a bcb7"));
    assert!(g.accepts("ac!12"));
    assert!(!g.accepts("a bx7"));
    assert!(!g.accepts("ab"));
}

// ---------------------------------------------------------------- the agent's grammar

fn forge_engine(profile: Value) -> (tempfile::TempDir, Engine) {
    let h = tempfile::tempdir().unwrap();
    std::fs::create_dir(h.path().join("agents")).unwrap();
    std::fs::write(h.path().join("agents/npc.json"), profile.to_string()).unwrap();
    let engine = Engine::builder()
        .home(h.path())
        .plugins(false)
        .workflows(false)
        .build()
        .unwrap();
    engine
        .tools()
        .register_fn(
            ToolDefinition::host(
                "Forge",
                "Forges a blade.",
                json!({"type": "object", "properties": {
                    "ore": {"type": "string", "enum": ["iron", "copper"]},
                    "heat": {"type": "integer", "minimum": 100, "maximum": 900},
                    "count": {"type": "integer", "minimum": 1, "maximum": 5},
                    "note": {"type": "string"},
                    "ratio": {"type": "number", "default": 0.5},
                    "rush": {"type": "boolean"}
                }, "required": ["ore", "heat"]}),
            ),
            |_, _| Ok(json!("a blade")),
        )
        .unwrap();
    (h, engine)
}

const INVENTORY: [&str; 3] = ["Forge", "system:get_current_time", "system:random_int"];

/// The grammar of agent `npc` in `cf`, with `constrain`.
fn grammar_of(cf: &str, constrain: &str) -> (Grammar, Constraint, Vec<String>) {
    let (_h, engine) = forge_engine(json!({
        "id": "npc", "tool_ids_inventory": INVENTORY, "call_format": cf,
        "llm": {"constrain": constrain}
    }));
    let rt = engine.agent("npc").unwrap().build().unwrap();
    let c = rt
        .constraint(false)
        .unwrap_or_else(|| panic!("{cf}: no constraint"))
        .clone();
    assert!(
        rt.constraint(true).is_none(),
        "{cf}: the turn after Observations is free"
    );
    let examples: Vec<String> = rt
        .inventory()
        .model_list()
        .iter()
        .map(|t| example(t, cf.parse::<CallFormat>().unwrap()))
        .collect();
    (Grammar::parse(&c.gbnf), c, examples)
}

/// The call formats tavern writes grammars for: every call format (the 12 older ones and
/// issue 33's 18 newer ones).
fn formats() -> Vec<&'static str> {
    let all: Vec<&'static str> = CallFormat::all().map(CallFormat::name).collect();
    assert!(all.len() >= 30, "{all:?}");
    all
}

#[test]
fn the_grammar_admits_each_tools_manual_example_in_every_format() {
    for cf in formats() {
        let (g, _, examples) = grammar_of(cf, "call");
        assert_eq!(examples.len(), 3);
        for ex in &examples {
            assert!(g.accepts(ex), "{cf}: the grammar refuses\n{ex}");
            // Nothing after the call, nothing before it.
            assert!(!g.accepts(&format!("{ex} And more.")), "{cf}: {ex}");
            assert!(!g.accepts(&format!("Sure. {ex}")), "{cf}: {ex}");
        }
        // A tool outside the inventory, written in the same format.
        let other = examples[0].replace("Forge", "Smelter");
        assert!(!g.accepts(&other), "{cf}: {other}");
        // Prose is no call.
        assert!(!g.accepts("The forge is hot."), "{cf}");
    }
}

#[test]
fn the_grammar_checks_arguments_against_the_schema() {
    let (g, _, _) = grammar_of("json", "call");
    let ok = [
        r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 500}}"#,
        r#"{"name": "Forge", "arguments": {"ore": "copper", "heat": 100, "count": 5, "note": "a \"fine\" one", "rush": false}}"#,
        r#"{"name": "system_random_int", "arguments": {"min": -3, "max": 12}}"#,
        r#"{"name": "system_get_current_time", "arguments": {}}"#,
    ];
    for t in ok {
        assert!(g.accepts(t), "refused a valid call: {t}");
    }
    let bad = [
        // not an enum member
        r#"{"name": "Forge", "arguments": {"ore": "gold", "heat": 500}}"#,
        // a required argument missing
        r#"{"name": "Forge", "arguments": {"ore": "iron"}}"#,
        // out of a small range
        r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 500, "count": 9}}"#,
        // a string for an integer
        r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": "hot"}}"#,
        // an argument the schema does not have
        r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 500, "mood": "x"}}"#,
        // a wire name in the wrong case (the reader forgives it; the grammar writes it right)
        r#"{"name": "forge", "arguments": {"ore": "iron", "heat": 500}}"#,
        // cut off
        r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 500}"#,
        // the wrong key for this format
        r#"{"name": "Forge", "parameters": {"ore": "iron", "heat": 500}}"#,
    ];
    for t in bad {
        assert!(!g.accepts(t), "admitted an invalid call: {t}");
    }
    let (g, _, _) = grammar_of("pythonic", "call");
    assert!(g.accepts("[Forge(ore='copper', heat=120, rush=True)]"));
    assert!(!g.accepts("[Forge(ore='copper')]"));
    assert!(
        !g.accepts("[Forge(heat=120, ore='copper')]"),
        "schema order"
    );
    let (g, _, _) = grammar_of("action", "call");
    assert!(g.accepts(
        "<ACTION>\n    <Forge>\n        <ore>iron</ore>\n        <heat>300</heat>\n    </Forge>\n</ACTION>"
    ));
    assert!(!g.accepts(
        "<ACTION>\n    <Forge>\n        <ore>tin</ore>\n        <heat>300</heat>\n    </Forge>\n</ACTION>"
    ));
}

/// Issue 33's formats check arguments too: each admits a valid Forge call written as its
/// model writes one, and refuses a wrong enum member, a missing required argument and a
/// wrong tool name.
#[test]
fn the_newer_formats_check_arguments_against_the_schema() {
    // (format, a valid call, the same with ore "gold", the same without heat)
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "qwen3_coder",
            "<tool_call>\n<function=Forge>\n<parameter=ore>\niron\n</parameter>\n<parameter=heat>\n300\n</parameter>\n</function>\n</tool_call>",
            "<tool_call>\n<function=Forge>\n<parameter=ore>\ngold\n</parameter>\n<parameter=heat>\n300\n</parameter>\n</function>\n</tool_call>",
            "<tool_call>\n<function=Forge>\n<parameter=ore>\niron\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            "glm45",
            "<tool_call>Forge\n<arg_key>ore</arg_key>\n<arg_value>iron</arg_value>\n<arg_key>heat</arg_key>\n<arg_value>300</arg_value>\n</tool_call>",
            "<tool_call>Forge\n<arg_key>ore</arg_key>\n<arg_value>gold</arg_value>\n<arg_key>heat</arg_key>\n<arg_value>300</arg_value>\n</tool_call>",
            "<tool_call>Forge\n<arg_key>ore</arg_key>\n<arg_value>iron</arg_value>\n</tool_call>",
        ),
        (
            "harmony",
            r#"<|channel|>commentary to=functions.Forge <|constrain|>json<|message|>{"ore": "iron", "heat": 300}<|call|>"#,
            r#"<|channel|>commentary to=functions.Forge <|constrain|>json<|message|>{"ore": "gold", "heat": 300}<|call|>"#,
            r#"<|channel|>commentary to=functions.Forge <|constrain|>json<|message|>{"ore": "iron"}<|call|>"#,
        ),
        (
            "kimi_k2",
            r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.Forge:0<|tool_call_argument_begin|>{"ore": "iron", "heat": 300}<|tool_call_end|><|tool_calls_section_end|>"#,
            r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.Forge:0<|tool_call_argument_begin|>{"ore": "gold", "heat": 300}<|tool_call_end|><|tool_calls_section_end|>"#,
            r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.Forge:0<|tool_call_argument_begin|>{"ore": "iron"}<|tool_call_end|><|tool_calls_section_end|>"#,
        ),
        (
            "minimax_m2",
            "<minimax:tool_call>\n<invoke name=\"Forge\">\n<parameter name=\"ore\">iron</parameter>\n<parameter name=\"heat\">300</parameter>\n</invoke>\n</minimax:tool_call>",
            "<minimax:tool_call>\n<invoke name=\"Forge\">\n<parameter name=\"ore\">gold</parameter>\n<parameter name=\"heat\">300</parameter>\n</invoke>\n</minimax:tool_call>",
            "<minimax:tool_call>\n<invoke name=\"Forge\">\n<parameter name=\"ore\">iron</parameter>\n</invoke>\n</minimax:tool_call>",
        ),
        (
            "gemma3",
            "```tool_code\nForge(ore='iron', heat=300, rush=True)\n```",
            "```tool_code\nForge(ore='gold', heat=300)\n```",
            "```tool_code\nForge(ore='iron')\n```",
        ),
        (
            "gemma4",
            "<|tool_call>call:Forge{ore:<|\"|>iron<|\"|>,heat:300,note:<|\"|>sharp<|\"|>}<tool_call|>",
            "<|tool_call>call:Forge{ore:<|\"|>gold<|\"|>,heat:300}<tool_call|>",
            "<|tool_call>call:Forge{ore:<|\"|>iron<|\"|>}<tool_call|>",
        ),
        (
            "lfm2",
            "<|tool_call_start|>[Forge(ore='copper', heat=120)]<|tool_call_end|>",
            "<|tool_call_start|>[Forge(ore='gold', heat=120)]<|tool_call_end|>",
            "<|tool_call_start|>[Forge(ore='copper')]<|tool_call_end|>",
        ),
        (
            "command_r",
            "Action: ```json\n[{\"tool_name\": \"Forge\", \"parameters\": {\"ore\": \"iron\", \"heat\": 300}}]\n```",
            "Action: ```json\n[{\"tool_name\": \"Forge\", \"parameters\": {\"ore\": \"gold\", \"heat\": 300}}]\n```",
            "Action: ```json\n[{\"tool_name\": \"Forge\", \"parameters\": {\"ore\": \"iron\"}}]\n```",
        ),
        (
            "apertus",
            r#"<|tools_prefix|>[{"Forge": {"ore": "iron", "heat": 300}}]<|tools_suffix|>"#,
            r#"<|tools_prefix|>[{"Forge": {"ore": "gold", "heat": 300}}]<|tools_suffix|>"#,
            r#"<|tools_prefix|>[{"Forge": {"ore": "iron"}}]<|tools_suffix|>"#,
        ),
        (
            "internlm2",
            "<|action_start|><|plugin|>\n{\"name\": \"Forge\", \"parameters\": {\"ore\": \"iron\", \"heat\": 300}}<|action_end|>",
            "<|action_start|><|plugin|>\n{\"name\": \"Forge\", \"parameters\": {\"ore\": \"gold\", \"heat\": 300}}<|action_end|>",
            "<|action_start|><|plugin|>\n{\"name\": \"Forge\", \"parameters\": {\"ore\": \"iron\"}}<|action_end|>",
        ),
    ];
    for (cf, ok, wrong_enum, missing) in cases {
        let (g, _, _) = grammar_of(cf, "call");
        assert!(g.accepts(ok), "{cf}: refused a valid call\n{ok}");
        assert!(
            !g.accepts(wrong_enum),
            "{cf}: admitted ore gold\n{wrong_enum}"
        );
        assert!(
            !g.accepts(missing),
            "{cf}: admitted a call without heat\n{missing}"
        );
        let other = ok.replace("Forge", "Smelter");
        assert!(!g.accepts(&other), "{cf}: admitted another tool\n{other}");
    }
    // Their stop sequences: where the model would start to invent the result.
    for (cf, stop) in [
        ("qwen3_coder", "<tool_response>"),
        ("glm45", "<|observation|>"),
        ("gemma3", "```tool_output"),
    ] {
        let (_h, engine) = forge_engine(json!({
            "id": "npc", "tool_ids_inventory": INVENTORY, "call_format": cf,
            "llm": {"constrain": "call"}
        }));
        let rt = engine.agent("npc").unwrap().build().unwrap();
        assert!(
            rt.stop_sequences().iter().any(|s| s == stop),
            "{cf}: {:?}",
            rt.stop_sequences()
        );
    }
}

#[test]
fn call_or_text_admits_a_call_or_prose_but_no_broken_call() {
    for cf in [
        "json",
        "hermes",
        "pythonic",
        "action",
        "qwen3_coder",
        "gemma4",
        "harmony",
    ] {
        let (g, c, examples) = grammar_of(cf, "call_or_text");
        assert!(c.json_schema.is_none(), "{cf}: prose has no JSON schema");
        assert!(g.accepts(&examples[0]), "{cf}");
        assert!(g.accepts("The forge is hot today."), "{cf}");
        let broken = &examples[0][..examples[0].len() - 2];
        assert!(!g.accepts(broken), "{cf}: {broken}");
    }
}

#[test]
fn the_json_schema_is_the_whole_call() {
    let (_, c, _) = grammar_of("json", "call");
    let schema = c.json_schema.expect("json answers are one JSON document");
    let forge = &schema["anyOf"][0];
    assert_eq!(forge["properties"]["name"]["const"], "Forge");
    assert_eq!(forge["required"], json!(["name", "arguments"]));
    assert_eq!(
        forge["properties"]["arguments"]["properties"]["ore"]["enum"],
        json!(["iron", "copper"])
    );
    let (_, c, _) = grammar_of("hermes", "call");
    assert!(c.json_schema.is_none(), "hermes wraps its JSON in tags");
}

#[test]
fn a_json_schema_shape_for_a_tagged_format_is_a_clear_error() {
    let (_h, engine) = forge_engine(json!({
        "id": "npc", "tool_ids_inventory": INVENTORY, "call_format": "hermes",
        "llm": {"constrain": "call", "constrain_shape": "json_schema"}
    }));
    let e = engine
        .agent("npc")
        .unwrap()
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("constrain_shape") && e.contains("grammar") && e.contains("hermes"),
        "{e}"
    );
    let (_h, engine) = forge_engine(json!({
        "id": "npc", "tool_ids_inventory": INVENTORY, "call_format": "hermes",
        "llm": {"constrain": "always"}
    }));
    // A mode that does not exist is a problem of the profile, at its line.
    let e = engine.agent("npc").err().expect("a load error").to_string();
    assert!(
        e.contains("npc.json:1") && e.contains("call_or_text"),
        "{e}"
    );
}

// ---------------------------------------------------------------- what the server receives

#[cfg(all(feature = "server", feature = "llm-http"))]
/// Runs agent `npc` (call format json) against a real loopback server with `llm` settings;
/// returns the request bodies.
async fn bodies(llm: Value, replies: Vec<Reply>) -> Vec<Value> {
    let server = serve(replies).await;
    let (_h, engine) = forge_engine(json!({
        "id": "npc", "tool_ids_inventory": INVENTORY, "call_format": "json", "llm": llm
    }));
    let mut rt = engine
        .agent("npc")
        .unwrap()
        .llm(LlmSettings {
            base_url: Some(server.base_url()),
            retries: Some(0),
            ..LlmSettings::default()
        })
        .build()
        .unwrap();
    let run = rt.run(Some("Forge me a blade.")).await;
    assert!(run.error.is_none(), "{:?}", run.error);
    server.requests()
}

#[cfg(all(feature = "server", feature = "llm-http"))]
fn call_then_answer() -> Vec<Reply> {
    vec![
        Reply::Text(r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 300}}"#.into()),
        Reply::Text("Here is your blade.".into()),
    ]
}

#[cfg(all(feature = "server", feature = "llm-http"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_bodies_carry_the_constraint_in_the_shape_asked() {
    // llama.cpp's grammar on the call turn, none on the answer turn; stop on both; the
    // extra body last.
    let b = bodies(
        json!({"constrain": "call", "extra_body": {"cache_prompt": true, "top_k": 1}}),
        call_then_answer(),
    )
    .await;
    assert_eq!(b.len(), 2, "{b:#?}");
    let g = b[0]["grammar"]
        .as_str()
        .expect("a grammar on the call turn");
    assert!(Grammar::parse(g)
        .accepts(r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 300}}"#));
    assert!(b[1].get("grammar").is_none(), "the answer turn is free");
    for r in &b {
        assert_eq!(r["stop"], json!(["\nObservation:"]));
        assert_eq!(r["cache_prompt"], true);
        assert_eq!(r["top_k"], 1);
        assert!(r.get("response_format").is_none());
    }
    // OpenAI's response_format.
    let b = bodies(
        json!({"constrain": "call", "constrain_shape": "json_schema"}),
        call_then_answer(),
    )
    .await;
    let rf = &b[0]["response_format"];
    assert_eq!(rf["type"], "json_schema");
    assert_eq!(
        rf["json_schema"]["schema"]["anyOf"][0]["properties"]["name"]["const"],
        "Forge"
    );
    assert!(b[0].get("grammar").is_none());
    assert!(b[1].get("response_format").is_none());
    // vLLM's guided_json.
    let b = bodies(
        json!({"constrain": "call", "constrain_shape": "guided_json"}),
        call_then_answer(),
    )
    .await;
    assert_eq!(
        b[0]["guided_json"]["anyOf"][2]["properties"]["name"]["const"],
        "system_random_int"
    );
    // The answer turn as prose only.
    let b = bodies(
        json!({"constrain": "call", "constrain_answer": "text"}),
        call_then_answer(),
    )
    .await;
    let g = Grammar::parse(b[1]["grammar"].as_str().expect("a prose grammar"));
    assert!(g.accepts("Here is your blade, forged hot."));
    assert!(!g.accepts(r#"{"name": "Forge", "arguments": {"ore": "iron", "heat": 300}}"#));
    assert!(!g.accepts(""), "an answer is not empty");
    assert!(
        !g.accepts(r#" {"name": "Forge", "arguments": {"ore": "iron", "heat": 300}}"#),
        "nor a call after a blank"
    );
    // Every turn constrained when answers do not follow calls.
    let b = bodies(
        json!({"constrain": "call_or_text", "answer_follows_calls": false}),
        call_then_answer(),
    )
    .await;
    assert!(b[0]["grammar"].is_string() && b[1]["grammar"].is_string());
    // Off: nothing is sent.
    let b = bodies(json!({}), call_then_answer()).await;
    for r in &b {
        for k in ["grammar", "stop", "response_format", "guided_json"] {
            assert!(r.get(k).is_none(), "{k} in {r}");
        }
    }
}
