//! `grammar/tam.pest` as a reference reader, and the production scanner's view of the
//! same text, so tests (and users, with `tavern parse --reader grammar`) can check that
//! the two agree.
//!
//! The production reader does not run pest (pest over whole model outputs is slow, see
//! `ARCHITECTURE.md`); it implements the same grammar as a resumable scanner.
//! [`reference_blocks_in`] and [`scanned_blocks_in`] expose both readings in one shape,
//! block by block and pair by pair; [`reference_key`] splits a key the grammar's way and
//! [`reference_key_kind`] classifies it; [`parse_reference`] is a whole reader built on the
//! grammar that returns the same [`Parsed`] shape as [`parse`]: the grammar
//! finds reasoning regions, blocks, pairs, values, key structure (chain step numbers) and
//! `<ACTION>` extents; the meaning of a block's keys (calls, chains) and the XML inside
//! `<ACTION>` are then read by the same code as the fast reader.
//!
//! `grammar/native.pest` defines the call forms open models write natively, every family
//! the format table reads but JSON documents (the pythonic call list; the tag-wrapped JSON
//! forms — Hermes, also opened with `<|im_start|>` by mistake, Granite, functionary,
//! Mistral, Llama's `<|python_tag|>`, DeepSeek; Llama JSON and functionary's `>>>` at the
//! start of the answer; GLM's name line; and the families of 2025–26, the tag-per-argument
//! forms, Kimi K2's sections, harmony's messages and Gemma 4's calls included) and where
//! `auto` takes them; [`parse_native`] reads them. A form is read under its format's name
//! ([`native_forms`]: the rows of the format table whose `grammar` names a rule of
//! `native.pest`): `parse_reference` with that format, or with `auto`. The meaning of a
//! value written as text is `formats/text.rs`'s, as the meaning of TAM keys is the fast
//! reader's.

use pest::iterators::Pairs;
use pest::{Parser, RuleType};

pub use super::block::BlockReading;
use super::block::{BlockKind, BodyEnd};
use super::formats;
use super::read::{finish_scanner, parse};
use super::scan::{Region, Scanner};
pub use super::types::RawPair;
use super::types::{Format, Parsed};

/// The rules of `grammar/tam.pest` that readings are built from (the four generated
/// parsers each have their own `Rule` type with these names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    TamStart,
    VcpStart,
    EndMarker,
    Block,
    Pair,
    Key,
    KeyBase,
    StepNumber,
    ValuePlain,
    ValueMarked,
    ValueOpen,
    Stray,
    Think,
    ThinkClose,
    ThinkStray,
    Action,
    ActionContent,
    ActionClose,
    ToolKey,
    OnErrorKey,
    CommonKey,
    MetaKey,
    KeyClass,
    Document,
}

macro_rules! grammar_parser {
    ($module:ident, $inline:tt) => {
        #[allow(missing_docs, clippy::all)]
        mod $module {
            #[derive(pest_derive::Parser)]
            #[grammar = "grammar/tam.pest"]
            #[grammar_inline = $inline]
            pub struct P;

            pub fn kind(r: Rule) -> Option<super::Kind> {
                use super::Kind::*;
                Some(match r {
                    Rule::tam_start => TamStart,
                    Rule::vcp_start => VcpStart,
                    Rule::end_marker => EndMarker,
                    Rule::block => Block,
                    Rule::pair => Pair,
                    Rule::key => Key,
                    Rule::key_base => KeyBase,
                    Rule::step_number => StepNumber,
                    Rule::value_plain => ValuePlain,
                    Rule::value_marked => ValueMarked,
                    Rule::value_open => ValueOpen,
                    Rule::stray => Stray,
                    Rule::think => Think,
                    Rule::think_close => ThinkClose,
                    Rule::think_stray => ThinkStray,
                    Rule::action => Action,
                    Rule::action_content => ActionContent,
                    Rule::action_close => ActionClose,
                    Rule::tool_key => ToolKey,
                    Rule::on_error_key => OnErrorKey,
                    Rule::common_key => CommonKey,
                    Rule::meta_key => MetaKey,
                    Rule::key_kind => KeyClass,
                    Rule::document => Document,
                    _ => return None,
                })
            }

            pub fn rule(k: super::Kind) -> Rule {
                match k {
                    super::Kind::Key => Rule::key,
                    super::Kind::KeyClass => Rule::key_kind,
                    _ => Rule::document,
                }
            }
        }
    };
}

grammar_parser!(
    tam_only,
    "block_start = _{ tam_start }\nany_start = _{ tam_start_text }\nitem = _{ !ANY ~ ANY }\n"
);
grammar_parser!(
    vcp_only,
    "block_start = _{ vcp_start }\nany_start = _{ vcp_start_text }\nitem = _{ !ANY ~ ANY }\n"
);
grammar_parser!(
    auto_all,
    "block_start = _{ tam_start | vcp_start }\nany_start = _{ tam_start_text | vcp_start_text }\nitem = _{ action }\n"
);
grammar_parser!(
    action_only,
    "block_start = _{ !ANY ~ ANY }\nany_start = _{ !ANY ~ ANY }\nitem = _{ action }\n"
);

/// A node of a grammar reading: a rule of interest and its byte range.
#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    start: usize,
    end: usize,
    children: Vec<Node>,
}

fn nodes<R: RuleType>(pairs: Pairs<'_, R>, kind: fn(R) -> Option<Kind>, out: &mut Vec<Node>) {
    for p in pairs {
        let span = p.as_span();
        match kind(p.as_rule()) {
            Some(k) => {
                let mut children = Vec::new();
                nodes(p.into_inner(), kind, &mut children);
                out.push(Node {
                    kind: k,
                    start: span.start(),
                    end: span.end(),
                    children,
                });
            }
            None => nodes(p.into_inner(), kind, out),
        }
    }
}

/// Why the grammar could not read a text (it reads any text, so this is a grammar bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrammarError {
    /// pest's error, with the line and column it stopped at.
    #[error("{0}")]
    Unreadable(String),
}

/// Reads `text` from rule `start` with the grammar for `format`.
fn read(format: Format, start: Kind, text: &str) -> Result<Vec<Node>, GrammarError> {
    fn go<R: RuleType, P: Parser<R>>(
        rule: R,
        kind: fn(R) -> Option<Kind>,
        text: &str,
    ) -> Result<Vec<Node>, GrammarError> {
        let pairs = P::parse(rule, text).map_err(|e| GrammarError::Unreadable(e.to_string()))?;
        let mut out = Vec::new();
        nodes(pairs, kind, &mut out);
        Ok(out)
    }
    match format {
        Format::Tam => go::<_, tam_only::P>(tam_only::rule(start), tam_only::kind, text),
        Format::Vcp => go::<_, vcp_only::P>(vcp_only::rule(start), vcp_only::kind, text),
        Format::Action => {
            go::<_, action_only::P>(action_only::rule(start), action_only::kind, text)
        }
        // `auto`, and formats the grammar does not define (read whole by `parse`).
        _ => go::<_, auto_all::P>(auto_all::rule(start), auto_all::kind, text),
    }
}

fn block_pairs(block: &Node) -> Vec<RawPair> {
    let mut pairs = Vec::new();
    for p in block.children.iter().filter(|n| n.kind == Kind::Pair) {
        let mut key = (0, 0);
        let mut value = (0, 0);
        let mut recovered = false;
        for part in &p.children {
            match part.kind {
                Kind::Key => key = (part.start, part.end),
                Kind::ValuePlain | Kind::ValueMarked => value = (part.start, part.end),
                Kind::ValueOpen => {
                    value = (part.start, part.end);
                    recovered = true;
                }
                _ => {}
            }
        }
        pairs.push(RawPair {
            key,
            value,
            recovered,
        });
    }
    pairs
}

fn top_level(format: Format, text: &str) -> Result<Vec<Node>, GrammarError> {
    let doc = read(format, Kind::Document, text)?;
    Ok(doc
        .into_iter()
        .find(|n| n.kind == Kind::Document)
        .map(|d| d.children)
        .unwrap_or_default())
}

/// Reads `text` with the pest grammar for `format` (TAM, VCP or both for `Auto`); returns
/// the TAM/VCP blocks found outside reasoning regions, in order.
pub fn reference_blocks_in(text: &str, format: Format) -> Result<Vec<BlockReading>, GrammarError> {
    Ok(top_level(format, text)?
        .iter()
        .filter(|n| n.kind == Kind::Block)
        .map(|b| BlockReading {
            start: b.start,
            end: b.end,
            terminated: b.children.iter().any(|c| c.kind == Kind::EndMarker),
            pairs: block_pairs(b),
        })
        .collect())
}

/// [`reference_blocks_in`] with TAM markers only (`Format::Tam`).
pub fn reference_blocks(text: &str) -> Result<Vec<BlockReading>, GrammarError> {
    reference_blocks_in(text, Format::Tam)
}

/// Reads `text` with the production scanner in `format` and reports its blocks in the
/// same shape as [`reference_blocks_in`].
pub fn scanned_blocks_in(text: &str, format: Format) -> Vec<BlockReading> {
    let mut sc = Scanner::new(format);
    sc.record_blocks();
    sc.run(text, true);
    sc.take_recorded()
}

/// [`scanned_blocks_in`] in `Format::Tam`.
pub fn scanned_blocks(text: &str) -> Vec<BlockReading> {
    scanned_blocks_in(text, Format::Tam)
}

/// A key split the grammar's way (`key = key_base? ~ step_suffix?`): the base name and the
/// step number's digits, if the key ends in one. `None` when `key` is not a key.
pub fn reference_key(key: &str) -> Option<(String, Option<String>)> {
    let nodes = read(Format::Tam, Kind::Key, key).ok()?;
    let k = nodes.iter().find(|n| n.kind == Kind::Key)?;
    if k.end != key.len() {
        return None;
    }
    let base = k
        .children
        .iter()
        .find(|n| n.kind == Kind::KeyBase)
        .map(|n| key[n.start..n.end].to_string())
        .unwrap_or_default();
    let step = k
        .children
        .iter()
        .find(|n| n.kind == Kind::StepNumber)
        .map(|n| key[n.start..n.end].to_string());
    Some((base, step))
}

/// The kind of a key by the grammar's `key_kind` rule: `"tool"` (`command`, `tool_name`),
/// `"on_error"`, `"common"`, `"meta"` (`request_id`, `comment`) or `"param"`.
pub fn reference_key_kind(key: &str) -> Option<&'static str> {
    let nodes = read(Format::Tam, Kind::KeyClass, key).ok()?;
    let kk = nodes.iter().find(|n| n.kind == Kind::KeyClass)?;
    Some(match kk.children.first().map(|n| n.kind) {
        Some(Kind::ToolKey) => "tool",
        Some(Kind::OnErrorKey) => "on_error",
        Some(Kind::CommonKey) => "common",
        Some(Kind::MetaKey) => "meta",
        _ => "param",
    })
}

/// Reads every call in `text` with the grammar (the reference reader behind
/// `tavern parse --reader grammar`): slow and exact. The result has the shape of
/// [`parse`]'s; a JSON call text is read by the JSON reader, as there.
/// Fails only if the grammar cannot read the text at all (it reads any text).
pub fn parse_reference(text: &str, format: Format) -> Result<Parsed, GrammarError> {
    let mut p = reference(text, format)?;
    super::types::give_ids(&mut p.calls, 0);
    Ok(p)
}

fn reference(text: &str, format: Format) -> Result<Parsed, GrammarError> {
    if native_form(format).is_some() {
        if let Some(p) = native_reference(text, format)? {
            return Ok(p);
        }
    }
    if formats::document(format).is_some() {
        return Ok(parse(text, format));
    }
    if format == Format::Auto {
        if let Some(parsed) = formats::detect_document(text) {
            return Ok(parsed);
        }
        if let Some(parsed) = native_reference(text, format)? {
            return Ok(parsed);
        }
    }
    let action = formats::region(Format::Action);
    let mut regions = Vec::new();
    for n in top_level(format, text)? {
        match n.kind {
            Kind::Think => regions.push(Region::Think {
                start: n.start,
                end: n.end,
                closed: n.children.iter().any(|c| c.kind == Kind::ThinkClose),
            }),
            Kind::ThinkStray => regions.push(Region::StrayThinkClose {
                start: n.start,
                end: n.end,
            }),
            Kind::Block => {
                let kind = if n.children.iter().any(|c| c.kind == Kind::VcpStart) {
                    BlockKind::Vcp
                } else {
                    BlockKind::Tam
                };
                let end = if n.children.iter().any(|c| c.kind == Kind::EndMarker) {
                    BodyEnd::Terminated(n.end)
                } else if n.end == text.len() {
                    BodyEnd::Eof(n.end)
                } else {
                    BodyEnd::AtStart(n.end)
                };
                let strays = n
                    .children
                    .iter()
                    .filter(|c| c.kind == Kind::Stray)
                    .map(|c| c.start)
                    .collect();
                regions.push(Region::Block {
                    kind,
                    start: n.start,
                    end,
                    pairs: block_pairs(&n),
                    strays,
                });
            }
            Kind::Action => {
                let content = n
                    .children
                    .iter()
                    .find(|c| c.kind == Kind::ActionContent)
                    .map_or(n.end, |c| c.start);
                let close = n
                    .children
                    .iter()
                    .find(|c| c.kind == Kind::ActionClose)
                    .map(|c| (c.start, c.end));
                // The grammar finds `<ACTION>` regions only where the format reads them.
                let Some(syntax) = action else { continue };
                regions.push(Region::Action {
                    syntax,
                    start: n.start,
                    content,
                    close,
                });
            }
            _ => {}
        }
    }
    let mut sc = Scanner::new(format);
    sc.replay(text, regions);
    Ok(finish_scanner(sc, text))
}

// ---------------------------------------------------------------- native forms

/// The native call forms `grammar/native.pest` defines, by the names the format table
/// gives them (`hermes`, `pythonic`, …): every row whose `grammar` is a rule of
/// `native.pest` (each row names its rule, in its format's file). A form is read as a
/// `--format` choice and under `auto`.
pub fn native_forms() -> impl Iterator<Item = &'static str> {
    formats::FORMATS
        .iter()
        .filter(|e| matches!(e.grammar, formats::Grammar::Native(_)))
        .map(|e| e.name)
}

#[allow(missing_docs, clippy::all)]
mod native_grammar {
    #[derive(pest_derive::Parser)]
    #[grammar = "grammar/native.pest"]
    pub struct P;
}

use native_grammar::{Rule as N, P as NativeParser};
use serde_json::{Map, Value};

use super::locate::{locate_diags, Locator};
use super::types::{Call, RawDiag, Span};

/// The form a rule of `native.pest` reads, and whether it is a broken opening tag.
fn form_of(r: N) -> Option<(&'static str, bool)> {
    Some(match r {
        N::hermes => ("hermes", false),
        N::hermes_broken => ("hermes", true),
        N::hermes_im_start => ("hermes", false),
        N::hermes_lead => ("hermes", false),
        N::hermes_im_start_broken => ("hermes", true),
        N::deepseek => ("deepseek", false),
        N::deepseek_broken => ("deepseek", true),
        N::granite => ("granite", false),
        N::granite_broken => ("granite", true),
        N::functionary => ("functionary", false),
        N::functionary_broken => ("functionary", true),
        N::mistral => ("mistral", false),
        N::mistral_broken => ("mistral", true),
        N::llama_json => ("llama_json", false),
        N::llama_json_broken => ("llama_json", true),
        N::leading | N::fence => ("pythonic", false),
        N::leading_broken => ("pythonic", true),
        N::llama_lead | N::llama_fence => ("llama_json", false),
        N::llama_lead_broken => ("llama_json", true),
        N::functionary_lead => ("functionary", false),
        N::glm => ("glm", false),
        N::tool_calls => ("tool_calls", false),
        N::longcat => ("longcat", false),
        N::internlm2 => ("internlm2", false),
        N::granite3 => ("granite3", false),
        N::lfm2 | N::lfm2_json => ("lfm2", false),
        N::olmo3 => ("olmo3", false),
        N::llama4 => ("pythonic", false),
        N::gemma3 => ("gemma3", false),
        N::glm_broken => ("glm", true),
        N::qwen3_coder | N::qwen3_bare => ("qwen3_coder", false),
        N::glm45 => ("glm45", false),
        N::glm45_broken => ("glm45", true),
        N::kimi_k2 => ("kimi_k2", false),
        N::harmony => ("harmony", false),
        N::minimax_m2 => ("minimax_m2", false),
        N::step3 => ("step3", false),
        N::deepseek_dsml => ("deepseek", false),
        N::gemma4 => ("gemma4", false),
        N::gemma4_broken | N::function_gemma_broken => ("gemma4", true),
        N::function_gemma | N::g4_thought => ("gemma4", false),
        N::apertus_inner => ("apertus", false),
        N::functools => ("functools", false),
        N::gigachat3 => ("gigachat3", false),
        N::command_r | N::cr_fenced | N::cr_tag | N::cr_thinking | N::cr_response => {
            ("command_r", false)
        }
        N::command_r_broken | N::cr_fenced_broken | N::cr_tag_broken => ("command_r", true),
        N::apertus => ("apertus", false),
        N::apertus_broken => ("apertus", true),
        _ => return None,
    })
}

/// The format named `form` in the table, or [`Format::Auto`] while it has none.
fn source_of(form: &str) -> Format {
    form.parse().unwrap_or(Format::Auto)
}

/// The native form `format` names, if the grammar defines it.
pub fn native_form(format: Format) -> Option<&'static str> {
    matches!(format.grammar(), Some(formats::Grammar::Native(_))).then(|| format.name())
}

/// A string literal's content with its escapes read (JSON's and Python's; a Markdown
/// `\_` is `_`; an unknown escape is kept as written).
fn unquote(lit: &str) -> String {
    let inner = &lit[1..lit.len() - 1];
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            '0' => out.push('\0'),
            '\\' | '\'' | '"' | '/' | '_' => out.push(e),
            'u' | 'x' => {
                let n = if e == 'u' { 4 } else { 2 };
                let hex: String = chars.clone().take(n).collect();
                match u32::from_str_radix(&hex, 16) {
                    Ok(mut code) if hex.len() == n => {
                        for _ in 0..n {
                            chars.next();
                        }
                        // A JSON surrogate pair.
                        if (0xD800..0xDC00).contains(&code) {
                            let rest: String = chars.clone().take(6).collect();
                            if let Some(low) = rest
                                .strip_prefix("\\u")
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .filter(|l| (0xDC00..0xE000).contains(l))
                            {
                                for _ in 0..6 {
                                    chars.next();
                                }
                                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            }
                        }
                        out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    }
                    _ => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// The value a `value` node of the grammar stands for.
fn value_of(p: pest::iterators::Pair<'_, N>) -> Value {
    match p.as_rule() {
        N::string => unquote(p.as_str()).into(),
        N::number => {
            let s = p.as_str().trim_start_matches('+');
            let s = if s.ends_with('.') {
                format!("{s}0")
            } else {
                s.to_string()
            };
            serde_json::from_str(&s).unwrap_or(Value::String(s))
        }
        N::true_lit => Value::Bool(true),
        N::false_lit => Value::Bool(false),
        N::null_lit => Value::Null,
        N::list | N::tuple | N::set => Value::Array(p.into_inner().map(value_of).collect()),
        N::dict => {
            let mut m = Map::new();
            for member in p.into_inner() {
                let mut parts = member.into_inner();
                if let (Some(k), Some(v)) = (parts.next(), parts.next()) {
                    m.insert(unquote(k.as_str()), value_of(v));
                }
            }
            Value::Object(m)
        }
        // `source_arg`: the argument's source text.
        _ => Value::String(p.as_str().trim_end().to_string()),
    }
}

/// A call's name as written, Markdown-escaped underscores read.
fn name_of(s: &str) -> String {
    formats::lit::unescape_name(s)
}

/// Reads `text` with `grammar/native.pest`: the native calls of the forms in `forms`
/// (every form the grammar defines when `None`), placed as the note's reading rules
/// say, with the prose outside them as the response text. A form not asked for is prose.
/// Slow and exact: the reference for the fast readers.
pub fn parse_native(text: &str, forms: Option<&[&str]>) -> Result<Parsed, GrammarError> {
    let doc = NativeParser::parse(N::document, text)
        .map_err(|e| GrammarError::Unreadable(e.to_string()))?;
    let wanted = |f: &str| forms.is_none_or(|fs| fs.contains(&f));
    let every_form = forms.is_none_or(|fs| fs.len() > 1);
    let mut calls = Vec::new();
    let mut raw = Vec::new();
    // Byte ranges taken out of the prose: calls, broken tags, reasoning.
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut block = 0usize;
    let mut loc = Locator::default();
    let bytes = text.as_bytes();
    let mut span_of = |start: usize, end: usize| {
        let (line, column) = loc.locate(bytes, start);
        Span {
            start,
            end,
            line,
            column,
        }
    };
    let items = doc
        .flatten()
        .filter(|p| matches!(p.as_rule(), N::think) || form_of(p.as_rule()).is_some());
    // `flatten` yields nested nodes too; keep only the outermost of each range.
    let mut last_end = 0usize;
    for p in items {
        let (start, end) = (p.as_span().start(), p.as_span().end());
        if start < last_end {
            continue;
        }
        if p.as_rule() == N::think {
            cut.push((start, end));
            last_end = end;
            continue;
        }
        let Some((form, broken)) = form_of(p.as_rule()) else {
            continue;
        };
        // The `hermes` row reads Llama's untagged call objects too (`formats/hermes.rs`).
        let untagged = matches!(
            p.as_rule(),
            N::llama_lead | N::llama_fence | N::llama_lead_broken
        );
        // `--format granite3` reads `<tool_call>` (the `hermes` rule) as Granite 3.1's.
        let form = if untagged && !wanted(form) && wanted("hermes") {
            "hermes"
        } else if p.as_rule() == N::hermes && !wanted(form) && wanted("granite3") {
            "granite3"
        } else {
            form
        };
        if !wanted(form) {
            continue;
        }
        last_end = end;
        cut.push((start, end));
        if broken {
            if let Some(plan) = p.clone().into_inner().find(|c| c.as_rule() == N::cr_plan) {
                plan_cut(plan, end, &mut cut);
            }
            raw.push(RawDiag::error(
                start,
                format!("a {form} call that is cut off or not a call: the output ends or the tag holds no complete call"),
                "write the whole call, its JSON object complete (and its closing tag, where the form has one)".into(),
            ));
            continue;
        }
        let span = span_of(start, end);
        let rule = p.as_rule();
        let mut push =
            |tool: String, args: Map<String, Value>, source: Format, calls: &mut Vec<Call>| {
                calls.push(formats::lit::call(tool, args, source, span, block));
                block += 1;
            };
        let own = source_of(form);
        match p.as_rule() {
            N::leading | N::fence | N::gemma3 | N::lfm2 | N::olmo3 | N::llama4 => {
                for c in p
                    .into_inner()
                    .flatten()
                    .filter(|c| matches!(c.as_rule(), N::call | N::bad_call))
                {
                    if c.as_rule() == N::bad_call {
                        raw.push(RawDiag::error(
                            c.as_span().start(),
                            "a pythonic call could not be read (keyword arguments only)".into(),
                            "write tool_name(param=value, …)".into(),
                        ));
                        continue;
                    }
                    let mut parts = c.into_inner();
                    let Some(name) = parts.next() else { continue };
                    let mut args = Map::new();
                    for kw in parts {
                        let mut kv = kw.into_inner();
                        if let (Some(k), Some(v)) = (kv.next(), kv.next()) {
                            args.insert(name_of(k.as_str()), value_of(v));
                        }
                    }
                    push(name_of(name.as_str()), args, own, &mut calls);
                }
            }
            N::deepseek => {
                for c in p
                    .into_inner()
                    .filter(|c| matches!(c.as_rule(), N::deepseek_call | N::ds_short_call))
                {
                    let mut parts = c.into_inner();
                    if let (Some(name), Some(args)) = (parts.next(), parts.next()) {
                        if let Value::Object(a) = value_of(args) {
                            push(name_of(name.as_str().trim()), a, own, &mut calls);
                        }
                    }
                }
            }
            N::functionary_lead => {
                for c in p
                    .into_inner()
                    .filter(|c| matches!(c.as_rule(), N::fx_call | N::fx_first))
                {
                    let mut parts = c.into_inner();
                    if let (Some(name), Some(args)) = (parts.next(), parts.next()) {
                        if let Value::Object(a) = value_of(args) {
                            push(name_of(name.as_str()), a, own, &mut calls);
                        }
                    }
                }
            }
            N::glm | N::functionary | N::mistral_one => {
                let id = p
                    .clone()
                    .into_inner()
                    .find(|p| p.as_rule() == N::call_id)
                    .map(|p| p.as_str().to_string());
                let mut parts = p.into_inner().filter(|p| p.as_rule() != N::call_id);
                if let (Some(name), Some(args)) = (parts.next(), parts.next()) {
                    if let Value::Object(a) = value_of(args) {
                        push(name_of(name.as_str()), a, own, &mut calls);
                        with_id(&mut calls, id);
                    }
                }
            }
            N::qwen3_coder | N::qwen3_bare => {
                let seed = p
                    .as_str()
                    .as_bytes()
                    .get(..6)
                    .is_some_and(|h| h.eq_ignore_ascii_case(b"<seed:"));
                for f in p.into_inner() {
                    match f.as_rule() {
                        N::q_function => match q_function(f, seed) {
                            Some((tool, args)) => push(tool, args, own, &mut calls),
                            None => raw.push(call_error(start, form)),
                        },
                        N::q_function_broken => raw.push(call_error(f.as_span().start(), form)),
                        _ => {}
                    }
                }
            }
            N::glm45 => {
                let mut parts = p.into_inner();
                let Some(name) = parts.next() else { continue };
                let pairs: Vec<_> = parts
                    .filter_map(|pair| {
                        let mut kv = pair.into_inner();
                        let key = kv.next()?.as_str();
                        Some((key, formats::glm45::value_text(kv.next()?.as_str())))
                    })
                    .collect();
                push(
                    name_of(formats::glm45::name_of(name.as_str())),
                    text_args(pairs.iter().map(|(k, v)| (*k, v.as_ref()))),
                    own,
                    &mut calls,
                );
            }
            N::minimax_m2 | N::step3 | N::deepseek_dsml => {
                let mut any = false;
                for inv in p.into_inner().filter(|c| c.as_rule() != N::EOI) {
                    any = true;
                    match inv.as_rule() {
                        N::dsml_invoke_json => {
                            let mut parts = inv.into_inner();
                            if let (Some(name), Some(Value::Object(a))) =
                                (parts.next(), parts.next().map(value_of))
                            {
                                push(name_of(name.as_str().trim()), a, own, &mut calls);
                            }
                        }
                        N::mm_invoke | N::st_invoke | N::dsml_invoke => match invoke(inv) {
                            Some((tool, args)) => push(tool, args, own, &mut calls),
                            None => raw.push(call_error(start, form)),
                        },
                        _ => raw.push(call_error(inv.as_span().start(), form)),
                    }
                }
                if !any {
                    raw.push(call_error(start, form));
                }
            }
            N::kimi_k2 => {
                let closed = ["<|tool_calls_section_end|>", "<|tool_call_section_end|>"]
                    .iter()
                    .any(|c| p.as_str().ends_with(c));
                let mut any = false;
                for c in p.into_inner().filter(|c| c.as_rule() != N::EOI) {
                    any = true;
                    let at = c.as_span().start();
                    if c.as_rule() == N::kimi_call_broken {
                        raw.push(call_error(at, form));
                        continue;
                    }
                    let mut parts = c.into_inner();
                    let (Some(id), Some(args)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    let id = id.as_str().trim();
                    let name = formats::kimi_k2::name_of(id);
                    match (value_of(args), name) {
                        (Value::Object(a), Some(name)) if !name.is_empty() => {
                            push(name.to_string(), a, own, &mut calls);
                            with_id(&mut calls, Some(id.to_string()));
                        }
                        _ => raw.push(call_error(at, form)),
                    }
                }
                if !any && !closed && end == text.len() {
                    raw.push(call_error(start, form));
                }
            }
            N::harmony => {
                let by_channel = p.as_str().starts_with("<|channel|>");
                let mut parts = p.into_inner().filter(|c| c.as_rule() != N::EOI);
                let Some(head) = parts.next() else { continue };
                let (channel, to) = harmony_header(head.as_str());
                let to = to.or_else(|| {
                    by_channel
                        .then(|| formats::harmony::role_recipient(text, start))
                        .flatten()
                });
                match (parts.next(), to) {
                    // No `<|message|>`: a call the text ends in, or nothing.
                    (None, Some(_)) if end == text.len() => raw.push(call_error(start, form)),
                    (None, _) | (Some(_), Some(_))
                        if channel == "analysis"
                            && !to.is_some_and(|t| t.starts_with("functions.")) => {}
                    (None, _) => {}
                    // The answer: its body is response text.
                    (Some(body), None) => {
                        if channel == "final" {
                            let b = body.as_span();
                            cut.pop();
                            cut.push((start, b.start()));
                            cut.push((b.end(), end));
                        }
                    }
                    (Some(body), Some(to)) if body.as_rule() == N::harmony_none => {
                        let name = to.strip_prefix("functions.").unwrap_or(to);
                        push(name.to_string(), Map::new(), own, &mut calls);
                    }
                    (Some(body), Some(to)) => {
                        let name = to.strip_prefix("functions.").unwrap_or(to);
                        let args = body
                            .into_inner()
                            .next()
                            .filter(|a| a.as_rule() == N::dict)
                            .map(value_of);
                        match args {
                            Some(Value::Object(a)) => push(name.to_string(), a, own, &mut calls),
                            _ => raw.push(call_error(start, form)),
                        }
                    }
                }
            }
            // Command R7B's reasoning: cut, nothing read.
            N::cr_thinking | N::g4_thought | N::apertus_inner => {}
            // Its answer: the text between the markers is response text.
            N::cr_response => {
                if let Some(b) = p.into_inner().find(|c| c.as_rule() == N::cr_text) {
                    let b = b.as_span();
                    cut.pop();
                    cut.push((start, b.start()));
                    cut.push((b.end(), end));
                }
            }
            N::gemma4 | N::function_gemma => {
                for c in p.into_inner() {
                    if matches!(c.as_rule(), N::gemma4_call_broken | N::fg_call_broken) {
                        raw.push(call_error(c.as_span().start(), form));
                        continue;
                    }
                    let mut parts = c.into_inner();
                    if let (Some(name), Some(args)) = (parts.next(), parts.next()) {
                        if let Value::Object(a) = gemma4_value(args) {
                            push(name.as_str().trim().to_string(), a, own, &mut calls);
                        }
                    }
                }
            }
            N::apertus => {
                let Some(v) = p.into_inner().next().map(value_of) else {
                    continue;
                };
                let items = match v {
                    Value::Array(a) => a,
                    other => vec![other],
                };
                for item in items {
                    match item {
                        Value::Object(o) if o.len() == 1 => {
                            for (name, args) in o {
                                match formats::lit::arguments(Some(&args)) {
                                    Ok(a) => push(name, a, own, &mut calls),
                                    Err(_) => raw.push(call_error(start, form)),
                                }
                            }
                        }
                        _ => raw.push(call_error(start, form)),
                    }
                }
            }
            N::command_r | N::cr_fenced | N::cr_tag => {
                let mut items = Vec::new();
                // Where the list's JSON breaks (each an error; the calls around it read).
                let mut breaks = Vec::new();
                for part in p.into_inner() {
                    match part.as_rule() {
                        N::cr_plan => plan_cut(part, end, &mut cut),
                        N::json_break => breaks.push(part.as_span().start()),
                        N::dict => items.push(value_of(part)),
                        _ => {
                            if let Value::Array(a) = value_of(part) {
                                items = a;
                            }
                        }
                    }
                }
                // Every element broken: one error, nothing runs.
                if items.is_empty() && !breaks.is_empty() {
                    raw.push(call_error(breaks[0], form));
                    continue;
                }
                // A list of objects with a `tool_name` each, or it is not this shape and
                // stays prose (as the fast reader reads it).
                let shaped = !items.is_empty()
                    && items
                        .iter()
                        .all(|i| i.get("tool_name").is_some_and(Value::is_string));
                let parts: Result<Vec<_>, _> = items
                    .iter()
                    .filter(|_| shaped)
                    .map(|item| {
                        let name = item["tool_name"].as_str().unwrap_or_default().trim();
                        let id = formats::command_r::call_id(item);
                        formats::lit::arguments(item.get("parameters")).map(|a| (name, a, id))
                    })
                    .collect();
                match parts {
                    // One call whose parameters are not an object: none runs.
                    Err(_) => raw.push(call_error(start, form)),
                    Ok(parts) if parts.iter().all(|(name, _, _)| name.is_empty()) => {
                        cut.pop();
                    }
                    Ok(parts) => {
                        for (name, a, id) in parts.into_iter().filter(|(n, _, _)| !n.is_empty()) {
                            push(name.to_string(), a, own, &mut calls);
                            with_id(&mut calls, id);
                        }
                        raw.extend(breaks.into_iter().map(|at| call_error(at, form)));
                    }
                }
            }
            _ => {
                // JSON call objects: a `dict` each, or a `list` of them (Mistral), or the
                // newer Mistral `name[ARGS]{…}`.
                let mut objects = Vec::new();
                for part in p.into_inner() {
                    match part.as_rule() {
                        N::dict => objects.push((part.as_span().start(), value_of(part), None)),
                        N::list => {
                            let at = part.as_span().start();
                            match value_of(part) {
                                Value::Array(vs) => {
                                    objects.extend(vs.into_iter().map(|v| (at, v, None)))
                                }
                                other => objects.push((at, other, None)),
                            }
                        }
                        // A syntax break among the calls: one error; the calls around
                        // it are read.
                        N::json_break => raw.push(RawDiag::error(
                            part.as_span().start(),
                            format!("a {form} call could not be read (its JSON is broken)"),
                            "write {\"name\": \"tool\", \"arguments\": {…}}".into(),
                        )),
                        N::mistral_one => {
                            let id = part
                                .clone()
                                .into_inner()
                                .find(|p| p.as_rule() == N::call_id)
                                .map(|p| p.as_str().to_string());
                            let mut parts = part.into_inner().filter(|p| p.as_rule() != N::call_id);
                            if let (Some(name), Some(args)) = (parts.next(), parts.next()) {
                                let mut o = Map::new();
                                o.insert("name".into(), Value::String(name.as_str().into()));
                                o.insert("arguments".into(), value_of(args));
                                objects.push((start, Value::Object(o), id));
                            }
                        }
                        _ => {}
                    }
                }
                // Read with every form (`auto`), one call object at the start or in a fence
                // is a JSON call document, marked as the JSON reader marks it.
                let document = every_form
                    && matches!(rule, N::llama_lead | N::llama_fence)
                    && objects.len() == 1;
                // Hermes' other wrappers (`<response>`, …) hold calls or stay prose.
                if rule == N::hermes_lead
                    && objects
                        .iter()
                        .any(|(_, o, _)| call_object(o.clone()).is_err())
                {
                    cut.pop();
                    continue;
                }
                for (at, o, id) in objects {
                    let llama = o.get("arguments").is_none() && o.get("parameters").is_some();
                    let source = if document && !llama {
                        Format::Json
                    } else {
                        source_of(form)
                    };
                    let id = id.or_else(|| match o.get("id") {
                        Some(Value::String(i)) if !i.is_empty() => Some(i.clone()),
                        _ => None,
                    });
                    match call_object(o) {
                        Ok((tool, args)) => {
                            push(tool, args, source, &mut calls);
                            with_id(&mut calls, id);
                        }
                        Err(why) => raw.push(RawDiag::error(
                            at,
                            format!("a {form} call {why}"),
                            "write {\"name\": \"tool\", \"arguments\": {…}}".into(),
                        )),
                    }
                }
            }
        }
    }
    raw.sort_by_key(|d| d.offset);
    super::types::give_ids(&mut calls, 0);
    Ok(Parsed {
        response_text: prose_outside(text, &cut),
        calls,
        diagnostics: locate_diags(text, raw),
    })
}

/// Command R's plan (`cr_plan`) before its action, which ends at `end`: response text, but
/// for reasoning in it; the action is cut (the last range of `cut` was the whole node).
fn plan_cut(plan: pest::iterators::Pair<'_, N>, end: usize, cut: &mut Vec<(usize, usize)>) {
    cut.pop();
    let plan_end = plan.as_span().end();
    cut.extend(
        plan.into_inner()
            .filter(|t| t.as_rule() == N::think)
            .map(|t| (t.as_span().start(), t.as_span().end())),
    );
    cut.push((plan_end, end));
}

/// Gives the last call the id its input wrote (Mistral's `[CALL_ID]`, Kimi's
/// `functions.NAME:N`), if any.
fn with_id(calls: &mut [Call], id: Option<String>) {
    if let (Some(c), Some(id)) = (calls.last_mut(), id) {
        c.id = Some(id);
    }
}

/// The error for a call of `form` that could not be read.
fn call_error(at: usize, form: &str) -> RawDiag {
    RawDiag::error(
        at,
        format!("a {form} call could not be read; it was not executed"),
        "write the whole call as the format does".into(),
    )
}

/// A value written as text with no schema, as the fast readers type it: the JSON literal
/// it is, else the string.
fn text_value(t: &str) -> Value {
    crate::protocol::args::typed(t).unwrap_or_else(|| Value::String(t.to_string()))
}

/// The arguments of a call written as text (key, value between the tags), read as
/// `formats/text.rs` reads them.
fn text_args<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Map<String, Value> {
    pairs
        .map(|(k, raw)| {
            let t = formats::text::trim_one_newline(raw);
            (k.trim().to_string(), text_value(t))
        })
        .collect()
}

/// A Qwen3-Coder `<function=…>` node: its tool and arguments; `None` when it names none.
fn q_function(f: pest::iterators::Pair<'_, N>, seed: bool) -> Option<(String, Map<String, Value>)> {
    let mut parts = f.into_inner();
    let name = name_of(formats::text::tag_name(parts.next()?.as_str()));
    if name.is_empty() {
        return None;
    }
    let pairs = parts.filter_map(|param| {
        let mut kv = param.into_inner();
        let (key, text) = (
            formats::text::tag_name(kv.next()?.as_str()),
            kv.next()?.as_str(),
        );
        // A value with no closing tag runs to what follows, blanks at its end dropped.
        let closed = kv.next().is_some();
        Some((
            key,
            if closed {
                text
            } else {
                text.trim_end_matches([' ', '\t'])
            },
        ))
    });
    if seed {
        // Seed-OSS' values: `text::trim_seed_value`.
        return Some((
            name,
            pairs
                .map(|(k, raw)| {
                    let t = formats::text::trim_seed_value(raw);
                    (k.trim().to_string(), text_value(t))
                })
                .collect(),
        ));
    }
    Some((name, text_args(pairs)))
}

/// A MiniMax-M2 or Step-3 `<invoke name="…">` node: its tool and arguments; `None` when
/// its name is blank.
fn invoke(inv: pest::iterators::Pair<'_, N>) -> Option<(String, Map<String, Value>)> {
    let mut parts = inv.into_inner();
    let name = parts.next()?.as_str().trim().to_string();
    if name.is_empty() {
        return None;
    }
    let pairs = parts.filter_map(|param| {
        let mut kv = param.into_inner();
        Some((kv.next()?.as_str(), kv.next()?.as_str()))
    });
    Some((name, text_args(pairs)))
}

/// A harmony message's header (after its opening token, up to `<|message|>`): its channel
/// (the first word after `<|channel|>`) and its recipient (`to=…`), if any.
fn harmony_header(h: &str) -> (&str, Option<&str>) {
    let stop = |c: char| c.is_whitespace() || c == '<';
    let channel = h
        .find("<|channel|>")
        .map_or(h, |i| &h[i + "<|channel|>".len()..]);
    let channel = channel.split(stop).find(|w| !w.is_empty()).unwrap_or("");
    let to = h
        .find("to=")
        .map(|i| h[i + 3..].split(stop).next().unwrap_or(""))
        .filter(|t| !t.is_empty());
    (channel, to)
}

/// The value a Gemma 4 value node stands for: `<|"|>` strings, objects with bare keys,
/// lists, and bare values read as text is.
fn gemma4_value(p: pest::iterators::Pair<'_, N>) -> Value {
    match p.as_rule() {
        N::g4_string => Value::String(p.into_inner().next().map_or("", |t| t.as_str()).into()),
        N::g4_dict => Value::Object(
            p.into_inner()
                .filter_map(|m| {
                    let mut kv = m.into_inner();
                    let k = kv.next()?;
                    let key = match k.as_rule() {
                        N::g4_string => k.into_inner().next().map_or("", |t| t.as_str()).into(),
                        _ => k.as_str().trim().trim_matches('"').to_string(),
                    };
                    Some((key, gemma4_value(kv.next()?)))
                })
                .collect(),
        ),
        N::g4_list => Value::Array(p.into_inner().map(gemma4_value).collect()),
        _ => {
            let t = p.as_str().trim();
            formats::gemma4::dotted_number(t)
                .and_then(|n| serde_json::from_str(&n).ok())
                .unwrap_or_else(|| text_value(t))
        }
    }
}

/// The tool and arguments of a JSON call object, as the fast reader takes them: `name`
/// (trimmed, not empty) and `arguments` (or `parameters`, or `input`), the arguments an
/// object or a JSON text of one; an OpenAI `{"function": {…}}` wrapper around them.
fn call_object(o: Value) -> Result<(String, Map<String, Value>), &'static str> {
    let Value::Object(mut o) = o else {
        return Err("is not a JSON object");
    };
    // OpenAI's `{"type": "function", "function": {…}}`: the call is the inner object.
    if let Some(Value::Object(f)) = o.remove("function") {
        o = f;
    }
    let name = match o.remove("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_string(),
        _ => return Err("has no \"name\""),
    };
    let args = o
        .remove("arguments")
        .or_else(|| o.remove("parameters"))
        .or_else(|| o.remove("input"))
        .unwrap_or(Value::Object(Map::new()));
    let args = match args {
        Value::String(s) if s.trim().is_empty() => Value::Object(Map::new()),
        Value::String(s) => {
            serde_json::from_str(&s).map_err(|_| "has arguments that are not JSON")?
        }
        other => other,
    };
    match args {
        Value::Object(a) => Ok((name_of(&name), a)),
        _ => Err("has arguments that are not an object"),
    }
}

/// The text outside `cut` (sorted, disjoint ranges): each stretch trimmed, the non-empty
/// ones joined with one `\n`, as the fast reader writes response text. A fence line
/// left alone by a cut fenced block goes with it.
fn prose_outside(text: &str, cut: &[(usize, usize)]) -> String {
    let mut parts = Vec::new();
    let mut at = 0;
    for &(s, e) in cut.iter().chain(std::iter::once(&(text.len(), text.len()))) {
        let piece = text[at..s.max(at)].trim();
        if !piece.is_empty() {
            parts.push(piece);
        }
        at = e.max(at);
    }
    parts.join("\n")
}

/// [`parse_reference`] for the native forms: `format` names one (`--format pythonic`), or
/// is `auto` (then every native form the table names is read; `None` when the table
/// names none, or the text has no native call, so the TAM grammar reads it).
fn native_reference(text: &str, format: Format) -> Result<Option<Parsed>, GrammarError> {
    if let Some(form) = native_form(format) {
        // MiniMax-M2's row also reads MiniMax-M1's `<tool_calls>` (its `also` region); as
        // in the scanner, a call read for a format asked for carries that format.
        if format == Format::MinimaxM2 {
            let mut p = parse_native(text, Some(&[form, "tool_calls"]))?;
            for c in &mut p.calls {
                c.source = format;
            }
            return Ok(Some(p));
        }
        return parse_native(text, Some(&[form])).map(Some);
    }
    if format != Format::Auto {
        return Ok(None);
    }
    let known: Vec<&str> = native_forms().collect();
    if known.is_empty() {
        return Ok(None);
    }
    let p = parse_native(text, Some(&known))?;
    Ok((!p.calls.is_empty() || p.has_errors()).then_some(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row's grammar rule is a rule of its grammar; for `native.pest` the reader builds
    /// that row's calls from its rule (or, for the pythonic list, which stands inside the
    /// places it is taken, from those); every form the reader builds is a row's.
    #[test]
    fn every_row_names_a_rule_the_grammar_reads() {
        for e in formats::FORMATS {
            match e.grammar {
                formats::Grammar::Native(rule) => {
                    let r = N::all_rules()
                        .iter()
                        .find(|r| format!("{r:?}") == rule)
                        .unwrap_or_else(|| panic!("{}: native.pest has no rule {rule}", e.name));
                    if *r == N::pythonic {
                        assert_eq!(form_of(N::leading), Some((e.name, false)));
                    } else {
                        assert_eq!(form_of(*r), Some((e.name, false)), "{}: {rule}", e.name);
                    }
                }
                formats::Grammar::Tam(rule) => {
                    assert!(
                        auto_all::Rule::all_rules()
                            .iter()
                            .any(|r| format!("{r:?}") == rule),
                        "{}: tam.pest has no rule {rule}",
                        e.name
                    );
                }
                formats::Grammar::Absent(why) => {
                    assert!(
                        why.len() > 20,
                        "{}: say why the grammar has no rule",
                        e.name
                    )
                }
            }
        }
        let forms: Vec<&str> = native_forms().collect();
        for r in N::all_rules() {
            if let Some((form, _)) = form_of(*r) {
                assert!(
                    forms.contains(&form),
                    "{r:?} builds {form}, not a native row"
                );
            }
        }
    }
}
