//! Protocol reader benchmarks (criterion, short runs).
//!
//! Run: `cargo bench --bench protocol`
//!
//! - `prose_1mb`: 1 MB of prose with no blocks (target ≥ 1.5 GB/s).
//! - `dense_small_blocks_1mb`: 1 MB of small TAM blocks (target ≥ 300 MB/s).
//! - `blocks/100` vs `blocks/4000`: the same block+sentence unit repeated (target: 4,000
//!   cost ≤ 45× 100).
//! - `stream_4byte` vs `one_shot`: a 64 KB model answer with prose and blocks, fed in
//!   4-byte chunks vs parsed at once (target ≤ 2×).
//! - `native/<format>_1mb`: each native reader on 1 MB of its own format, read with its
//!   own name (targets: ≥ 300 MB/s for the JSON-shaped formats and for each reader of
//!   issue 33, the families of 2025–26, ≥ 150 MB/s for `pythonic`);
//!   `native/auto_<format>_1mb` the same text read with `auto`.
//! - `native/built_<format>_1mb`: the same read, then every call's arguments built into
//!   the map a tool receives (readers keep JSON arguments as text until first read; this
//!   is what a host that runs every call pays).
//! - `native/serde_value_*` and `native/serde_ignored_*`: serde_json alone on the same
//!   calls: building a `Value`, and only checking the JSON.
//! - `native/stream_4byte_<format>` vs `native/one_shot_<format>`: 64 KB of native calls
//!   (between sentences where a call stands alone in prose), read with `auto`, streamed in
//!   4-byte chunks vs at once, for every native format (target ≤ 2×).

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tavern::internal::protocol::{parse, Format, StreamReader};

const SENTENCE: &str = "The caravan reached the northern gate before dusk, and the guards, tired from a long watch, waved it through without a second look at the crates. ";

fn prose(len: usize) -> String {
    let mut s = String::with_capacity(len + SENTENCE.len());
    while s.len() < len {
        s.push_str(SENTENCE);
        if s.len() % 7 == 0 {
            s.push('\n');
        }
    }
    s
}

const SMALL_BLOCK: &str =
    "<|[REQUEST_TOOL]|>\ncommand:「始」Echo「末」\ntext:「始」hello world「末」\n<|[END_TOOL]|>\n";

fn dense(len: usize) -> String {
    let mut s = String::with_capacity(len + SMALL_BLOCK.len());
    while s.len() < len {
        s.push_str(SMALL_BLOCK);
    }
    s
}

fn blocks(n: usize) -> String {
    let unit = "Now I will read the next file.\n<|[REQUEST_TOOL]|>\ncommand:「始」FileOperator.ReadFile「末」\nfilePath:「始」/logs/today.log「末」\n<|[END_TOOL]|>\n";
    unit.repeat(n)
}

fn answer() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 64 * 1024 {
        s.push_str(&SENTENCE.repeat(3));
        s.push('\n');
        s.push_str(&format!(
            "<|[REQUEST_TOOL]|>\ncommand1:「始」FileOperator.WriteFile「末」\nfilePath1:「始」/logs/{i}.log「末」\ncontent1:「始」line one\nline two「末」\ncommand2:「始」FileOperator.AppendFile「末」\nfilePath2:「始」/logs/{i}.log「末」\ncontent2:「始」more「末」\n<|[END_TOOL]|>\n"
        ));
        i += 1;
    }
    s
}

/// CPU time of the benchmarking thread (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
///
/// The machine is shared by several developers (load average often above 3 on 2
/// cores), so wall time mostly measures the neighbours; thread CPU time does not count
/// the time the thread waits for a core.
struct ThreadCpu;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        thread_cpu_ns().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if ns < 1e3 {
            (1.0, "ns cpu")
        } else if ns < 1e6 {
            (1e-3, "µs cpu")
        } else if ns < 1e9 {
            (1e-6, "ms cpu")
        } else {
            (1e-9, "s cpu")
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }
    fn scale_throughputs(&self, _typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        match *t {
            Throughput::Bytes(b) | Throughput::BytesDecimal(b) => {
                values
                    .iter_mut()
                    .for_each(|v| *v = b as f64 * 1e9 / *v / 1e6);
                "MB/s"
            }
            Throughput::Bits(b) => {
                values
                    .iter_mut()
                    .for_each(|v| *v = b as f64 * 1e9 / *v / 1e6);
                "Mbit/s"
            }
            Throughput::Elements(e) | Throughput::ElementsAndBytes { elements: e, .. } => {
                values.iter_mut().for_each(|v| *v = e as f64 * 1e9 / *v);
                "elem/s"
            }
        }
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

fn config(c: &mut Criterion<ThreadCpu>) -> criterion::BenchmarkGroup<'_, ThreadCpu> {
    let mut g = c.benchmark_group("protocol");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);
    g
}

fn bench(c: &mut Criterion<ThreadCpu>) {
    let text = prose(1 << 20);
    let mut g = config(c);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("prose_1mb", |b| {
        b.iter(|| parse(black_box(&text), Format::Auto))
    });

    let text = dense(1 << 20);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("dense_small_blocks_1mb", |b| {
        b.iter(|| parse(black_box(&text), Format::Auto))
    });
    // The same, without timing the drop of the 14,000 parsed calls (the caller's cost).
    g.bench_function("dense_small_blocks_1mb_no_drop", |b| {
        b.iter_with_large_drop(|| parse(black_box(&text), Format::Auto))
    });
    g.finish();

    let mut g = config(c);
    for n in [100usize, 4000] {
        let text = blocks(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("blocks", n), &text, |b, t| {
            b.iter(|| parse(black_box(t), Format::Auto))
        });
    }
    g.finish();

    let text = answer();
    let mut g = config(c);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("one_shot", |b| {
        b.iter(|| parse(black_box(&text), Format::Auto))
    });
    g.bench_function("stream_4byte", |b| {
        b.iter(|| {
            let mut r = StreamReader::new(Format::Auto);
            let bytes = black_box(text.as_bytes());
            let mut n = 0;
            for chunk in bytes.chunks(4) {
                n += r.push_bytes(chunk).len();
            }
            (n, r.finish())
        })
    });
    // The same pair on the text dense with small blocks.
    let text = dense(256 * 1024);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("one_shot_dense", |b| {
        b.iter(|| parse(black_box(&text), Format::Auto))
    });
    g.bench_function("stream_4byte_dense", |b| {
        b.iter(|| {
            let mut r = StreamReader::new(Format::Auto);
            let mut n = 0;
            for chunk in black_box(text.as_bytes()).chunks(4) {
                n += r.push_bytes(chunk).len();
            }
            (n, r.finish())
        })
    });
    g.finish();
}

/// One native call of `format` with a few arguments of each type; `i` varies it.
fn native_call(format: Format, i: usize) -> String {
    let args = format!(
        r#"{{"path": "/logs/{i}.log", "count": {i}, "ratio": 0.25, "append": true, "tags": ["a", "b"], "note": null}}"#
    );
    match format {
        Format::Hermes => format!(
            "<tool_call>\n{{\"name\": \"FileOperator.WriteFile\", \"arguments\": {args}}}\n</tool_call>\n"
        ),
        Format::Json => format!(
            "{{\"type\": \"function\", \"function\": {{\"name\": \"FileOperator.WriteFile\", \"arguments\": {args}}}}}"
        ),
        Format::LlamaJson => format!(
            "{{\"name\": \"FileOperator.WriteFile\", \"parameters\": {args}}}"
        ),
        Format::Mistral => format!("[TOOL_CALLS]FileOperator.WriteFile[ARGS]{args}"),
        Format::Granite => format!(
            "<function_call> {{\"name\": \"FileOperator.WriteFile\", \"arguments\": {args}}}\n"
        ),
        Format::DeepSeek => format!(
            "<｜tool▁call▁begin｜>function<｜tool▁sep｜>FileOperator.WriteFile\n```json\n{args}\n```<｜tool▁call▁end｜>\n"
        ),
        Format::Functionary => format!("<function=FileOperator.WriteFile>{args}</function>\n"),
        Format::Pythonic => format!(
            "FileOperator.WriteFile(path='/logs/{i}.log', count={i}, ratio=0.25, append=True, tags=['a', 'b'], note=None)\n"
        ),
        Format::Qwen3Coder => format!(
            "<tool_call>\n<function=FileOperator.WriteFile>\n<parameter=path>\n/logs/{i}.log\n</parameter>\n<parameter=count>\n{i}\n</parameter>\n<parameter=ratio>\n0.25\n</parameter>\n<parameter=append>\ntrue\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n</function>\n</tool_call>\n"
        ),
        Format::Glm45 => format!(
            "<tool_call>FileOperator.WriteFile\n<arg_key>path</arg_key>\n<arg_value>/logs/{i}.log</arg_value>\n<arg_key>count</arg_key>\n<arg_value>{i}</arg_value>\n<arg_key>append</arg_key>\n<arg_value>true</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>[\"a\", \"b\"]</arg_value>\n</tool_call>\n"
        ),
        Format::KimiK2 => format!(
            "<|tool_call_begin|>functions.FileOperator.WriteFile:{i}<|tool_call_argument_begin|>{args}<|tool_call_end|>"
        ),
        Format::Harmony => format!(
            "<|start|>assistant<|channel|>commentary to=functions.FileOperator.WriteFile <|constrain|>json<|message|>{args}<|call|>"
        ),
        Format::MinimaxM2 | Format::Step3 => {
            let p = if format == Format::Step3 { "steptml:" } else { "" };
            format!(
                "<{p}invoke name=\"FileOperator.WriteFile\">\n<{p}parameter name=\"path\">/logs/{i}.log</{p}parameter>\n<{p}parameter name=\"count\">{i}</{p}parameter>\n<{p}parameter name=\"append\">true</{p}parameter>\n<{p}parameter name=\"tags\">[\"a\", \"b\"]</{p}parameter>\n</{p}invoke>\n"
            )
        }
        Format::Gemma4 => format!(
            "<|tool_call>call:FileOperator.WriteFile{{path:<|\"|>/logs/{i}.log<|\"|>,count:{i},ratio:0.25,append:true,tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>],note:null}}<tool_call|>\n"
        ),
        Format::Gemma3 => format!(
            "```tool_code\nFileOperator.WriteFile(path='/logs/{i}.log', count={i}, ratio=0.25, append=True, tags=['a', 'b'], note=None)\n```\n"
        ),
        Format::Lfm2 => format!(
            "<|tool_call_start|>[FileOperator.WriteFile(path='/logs/{i}.log', count={i}, ratio=0.25, append=True, tags=['a', 'b'], note=None)]<|tool_call_end|>\n"
        ),
        Format::Olmo3 => format!(
            "<function_calls>\nFileOperator.WriteFile(path='/logs/{i}.log', count={i}, ratio=0.25, append=True, tags=['a', 'b'], note=None)\n</function_calls>\n"
        ),
        Format::Granite3 => format!(
            "<|tool_call|>[{{\"name\": \"FileOperator.WriteFile\", \"arguments\": {args}}}]\n"
        ),
        Format::ToolCalls => format!(
            "<tool_calls>[{{\"name\": \"FileOperator.WriteFile\", \"arguments\": {args}}}]</tool_calls>\n"
        ),
        Format::Internlm2 => format!(
            "<|action_start|><|plugin|>\n{{\"name\": \"FileOperator.WriteFile\", \"parameters\": {args}}}<|action_end|>\n"
        ),
        Format::Longcat => format!(
            "<longcat_tool_call>{{\"name\": \"FileOperator.WriteFile\", \"arguments\": {args}}}</longcat_tool_call>\n"
        ),
        Format::Functools | Format::Gigachat3 => format!(
            "{{\"name\": \"FileOperator.WriteFile\", \"arguments\": {args}}}"
        ),
        Format::CommandR => format!(
            "{{\"tool_name\": \"FileOperator.WriteFile\", \"parameters\": {args}}}"
        ),
        Format::Apertus => format!("{{\"FileOperator.WriteFile\": {args}}}"),
        _ => unreachable!("not a native format"),
    }
}

/// About 1 MB of `format`'s calls, as a model would write them in one answer.
fn native_text(format: Format, len: usize) -> String {
    let mut calls = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < len {
        let c = native_call(format, i);
        size += c.len() + 2;
        calls.push(c);
        i += 1;
    }
    match format {
        Format::Json => format!("{{\"tool_calls\": [{}]}}", calls.join(", ")),
        Format::LlamaJson => format!("<|python_tag|>{}", calls.join("; ")),
        Format::DeepSeek => format!(
            "<｜tool▁calls▁begin｜>{}<｜tool▁calls▁end｜>",
            calls.concat()
        ),
        Format::KimiK2 => format!(
            "<|tool_calls_section_begin|>{}<|tool_calls_section_end|>",
            calls.concat()
        ),
        Format::MinimaxM2 => format!("<minimax:tool_call>\n{}</minimax:tool_call>", calls.concat()),
        Format::Step3 => format!(
            "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>{}<｜tool_call_end｜><｜tool_calls_end｜>",
            calls.concat()
        ),
        Format::Functools => format!("functools[{}]", calls.join(", ")),
        Format::Gigachat3 => format!("function call<|role_sep|>\n[{}]", calls.join(", ")),
        Format::CommandR => format!("Action: ```json\n[{}]\n```", calls.join(", ")),
        Format::Apertus => format!("<|tools_prefix|>[{}]<|tools_suffix|>", calls.join(", ")),
        _ => calls.concat(),
    }
}

const NATIVE: &[Format] = &[
    Format::Hermes,
    Format::Json,
    Format::LlamaJson,
    Format::Mistral,
    Format::Granite,
    Format::DeepSeek,
    Format::Functionary,
    Format::Pythonic,
];

/// The readers of issue 33 (the families of 2025–26), benched under `native/` like the
/// others (`cargo bench --bench protocol -- 'native/(qwen3_coder|…)_1mb'`).
const FAMILIES_2026: &[Format] = &[
    Format::Qwen3Coder,
    Format::Glm45,
    Format::KimiK2,
    Format::Harmony,
    Format::MinimaxM2,
    Format::Step3,
    Format::Gemma4,
    Format::Gemma3,
    Format::Lfm2,
    Format::Olmo3,
    Format::Granite3,
    Format::ToolCalls,
    Format::Internlm2,
    Format::Longcat,
    Format::Functools,
    Format::Gigachat3,
    Format::CommandR,
    Format::Apertus,
];

fn native(c: &mut Criterion<ThreadCpu>) {
    let mut g = c.benchmark_group("native");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    for &f in NATIVE.iter().chain(FAMILIES_2026) {
        let text = native_text(f, 1 << 20);
        assert!(!parse(&text, f).calls.is_empty(), "{f}");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(format!("{f}_1mb"), |b| {
            b.iter_with_large_drop(|| parse(black_box(&text), f))
        });
        g.bench_function(format!("auto_{f}_1mb"), |b| {
            b.iter_with_large_drop(|| parse(black_box(&text), Format::Auto))
        });
        if matches!(f, Format::Hermes | Format::Pythonic) {
            g.bench_function(format!("built_{f}_1mb"), |b| {
                b.iter_with_large_drop(|| {
                    let p = parse(black_box(&text), f);
                    let keys: usize = p.calls.iter().map(|c| c.args.len()).sum();
                    (p, keys)
                })
            });
        }
    }
    // serde_json alone (with this crate's `preserve_order`) on the same calls — the
    // `json` document, and the Hermes calls' JSON objects one after another — building a
    // `Value` (what reading cost when every call's arguments were built while reading),
    // and only checking the JSON (`IgnoredAny`, the floor for any reader that checks it).
    let doc = native_text(Format::Json, 1 << 20);
    let objects: String = (0..)
        .map(|i| {
            let c = native_call(Format::Hermes, i);
            c["<tool_call>\n".len()..c.len() - "\n</tool_call>\n".len()].to_string() + "\n"
        })
        .scan(0, |n, c| {
            *n += c.len();
            (*n < (1 << 20) + c.len()).then_some(c)
        })
        .collect();
    for (name, text) in [("json", &doc), ("objects", &objects)] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(format!("serde_value_{name}_1mb"), |b| {
            b.iter_with_large_drop(|| {
                serde_json::Deserializer::from_slice(black_box(text.as_bytes()))
                    .into_iter::<serde_json::Value>()
                    .collect::<Result<Vec<_>, _>>()
            })
        });
        g.bench_function(format!("serde_ignored_{name}_1mb"), |b| {
            b.iter(|| {
                serde_json::Deserializer::from_slice(black_box(text.as_bytes()))
                    .into_iter::<serde::de::IgnoredAny>()
                    .count()
            })
        });
    }
    // Streaming: 64 KB of calls between sentences (the formats whose one call stands
    // alone in prose; the others' 64 KB of calls as one answer), in 4-byte chunks vs at
    // once, for every native format.
    for &f in NATIVE.iter().chain(FAMILIES_2026) {
        let mut text = String::new();
        let mut i = 0;
        let alone = !matches!(
            f,
            Format::Pythonic
                | Format::Json
                | Format::LlamaJson
                | Format::Mistral
                | Format::DeepSeek
                | Format::MinimaxM2
                | Format::Step3
                | Format::Functools
                | Format::Gigachat3
                | Format::CommandR
                | Format::Apertus
        );
        if !alone {
            text = native_text(f, 64 * 1024);
        } else {
            while text.len() < 64 * 1024 {
                text.push_str(SENTENCE);
                text.push('\n');
                text.push_str(&native_call(f, i));
                i += 1;
            }
        }
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(format!("one_shot_{f}"), |b| {
            b.iter(|| parse(black_box(&text), Format::Auto))
        });
        g.bench_function(format!("stream_4byte_{f}"), |b| {
            b.iter(|| {
                let mut r = StreamReader::new(Format::Auto);
                let mut n = 0;
                for chunk in black_box(text.as_bytes()).chunks(4) {
                    n += r.push_bytes(chunk).len();
                }
                (n, r.finish())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = bench, native
}
criterion_main!(benches);
