//! Embedding costs: `pump` with nothing queued, one host tool call made from a Lua mod, and
//! how late `pump(1 ms)` returns while a script loops on the engine's threads (the maximum,
//! the 99th percentile and the count later than 1.5 ms over every pump are written to
//! `<figures>/embed.json` as `embed/pump_1ms_{max,p99,late}_while_looping`; see
//! `write_figures`), and the same while the pending call only sleeps
//! (`embed/pump_1ms_*_while_waiting`): the machine's own wake-up lateness, for comparison.
//!
//! Run: `cargo bench --bench embed -- --warm-up-time 1 --measurement-time 3`

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use tavern::{CallOptions, CancelToken, Engine, ToolDefinition};

const MOD: &str = r#"
api.tools.register({id = "calls", description = "calls the host n times", handler = function(args)
  for i = 1, args.n do api.tools.call("world:get", {}) end
  return args.n
end})
api.tools.register({id = "spin", description = "loops", handler = function()
  while true do end
end})
"#;

fn engine(home: &Path) -> Engine {
    let dir = home.join("plugins/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: bench\npermissions:\n  tools: [\"world:*\"]\nlimits:\n  wallMs: 600000\n  instructions: 1000000000000\n",
    )
    .unwrap();
    std::fs::write(dir.join("main.lua"), MOD).unwrap();
    // The host raises its own cap so the spinning mod (limits in its plugin.yaml) keeps
    // looping through the whole `pump_1ms_while_looping` measurement.
    let limits = tavern::Limits {
        instructions: 1_000_000_000_000,
        wall_ms: 600_000,
        ..tavern::Limits::engine_default()
    };
    let e = Engine::builder()
        .home(home)
        .script_limits(limits)
        .host_tool(
            ToolDefinition::host("world:get", "reads", json!({"type": "object"})),
            |_, _| Ok(json!(1)),
        )
        .host_tool(
            ToolDefinition::host(
                "world:wait",
                "sleeps until the bench ends",
                json!({"type": "object"}),
            ),
            |_, _| {
                while !RELEASE.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(json!(null))
            },
        )
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e
}

fn tam(id: &str, n: u64) -> String {
    format!("<|[REQUEST_TOOL]|>\ncommand:「始」{id}「末」\nn:「始」{n}「末」\n<|[END_TOOL]|>\n")
}

fn bench(c: &mut Criterion) {
    let home = tempfile::tempdir().unwrap();
    let e = engine(home.path());
    let mut g = c.benchmark_group("embed");

    g.bench_function("pump_idle", |b| {
        b.iter(|| e.pump(std::hint::black_box(Duration::from_millis(1))))
    });

    // One `api.tools.call` into a Rust host tool, from inside a Lua mod's loop of 10,000.
    const N: u64 = 10_000;
    let text = tam("bench:calls", N);
    g.bench_function("host_tool_from_lua", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters.div_ceil(N) {
                let t = Instant::now();
                let r = e.call_blocking(&text, CallOptions::new()).unwrap();
                total += t.elapsed();
                assert!(r.ok(), "{:?}", r.outcomes);
            }
            // Scale to the iterations asked for (each call made N host calls).
            total.mul_f64(iters as f64 / (iters.div_ceil(N) * N) as f64)
        })
    });

    // pump(1 ms) while a script spins on the engine's threads. The plugin's limits come
    // from the host's `script_limits` (raised above), so the spin outlives the measurement.
    let spin = pump_lateness(&mut g, &e, "pump_1ms_while_looping", "bench:spin");
    // The control: the same pumps while the pending call only sleeps (no CPU used by the
    // engine), so what remains is the OS's own wake-up lateness on this machine.
    let idle = pump_lateness(&mut g, &e, "pump_1ms_while_waiting", "world:wait");
    let bare = bare_lateness(&mut g);
    g.finish();
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    write_figures(&json!({
        "embed/pump_1ms_max_while_looping": ms(spin.max),
        "embed/pump_1ms_p99_while_looping": ms(spin.p99),
        "embed/pump_1ms_late_while_looping": format!("{} of {}", spin.late, spin.n),
        "embed/pump_1ms_max_while_waiting": ms(idle.max),
        "embed/pump_1ms_p99_while_waiting": ms(idle.p99),
        "embed/pump_1ms_late_while_waiting": format!("{} of {}", idle.late, idle.n),
        "embed/pump_1ms_max_bare_spinner": ms(bare.max),
        "embed/pump_1ms_p99_bare_spinner": ms(bare.p99),
        "embed/pump_1ms_late_bare_spinner": format!("{} of {}", bare.late, bare.n),
    }));
    for (what, l) in [
        ("a script loops", &spin),
        ("a host tool sleeps", &idle),
        ("(no engine) a plain thread spins", &bare),
    ] {
        println!(
            "pump(1 ms) while {what}: {} pumps, p99 {:?}, max {:?}, {} later than 1.5 ms",
            l.n, l.p99, l.max, l.late
        );
    }
}

/// Set once the `world:wait` measurement is over: the tool then returns.
static RELEASE: AtomicBool = AtomicBool::new(false);

/// How late `pump(1 ms)` returned over one measurement.
struct Lateness {
    n: usize,
    p99: Duration,
    max: Duration,
    /// Pumps that returned later than 1.5 ms.
    late: usize,
}

/// Measures `pump(1 ms)` while a call of `tool` is pending, checks that it was pending
/// throughout (only a figure taken under that load means anything), then ends the call.
fn pump_lateness(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    e: &Engine,
    name: &str,
    tool: &str,
) -> Lateness {
    let cancel = CancelToken::new();
    let opts = CallOptions::new()
        .timeout(Duration::from_secs(300))
        .cancel(cancel.clone());
    let ticket = e.submit_with(&tam(tool, 0), opts).unwrap();
    let mut times: Vec<Duration> = Vec::new();
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                let finished = e.pump(Duration::from_millis(1));
                let d = t.elapsed();
                assert_eq!(finished, 0, "the pending call ended during the measurement");
                times.push(d);
                total += d;
            }
            total
        })
    });
    assert_eq!(e.pending(), 1, "the {tool} call must still be running");
    assert!(e.take(ticket).is_none());
    // End the call (a script by its token, the host tool by its flag) before the next one.
    cancel.cancel();
    RELEASE.store(true, Ordering::Relaxed);
    let ended = Instant::now() + Duration::from_secs(30);
    while e.take(ticket).is_none() {
        e.pump(Duration::from_millis(10));
        assert!(
            Instant::now() < ended,
            "the {tool} call did not end when cancelled"
        );
    }
    RELEASE.store(false, Ordering::Relaxed);
    lateness(times)
}

/// The floor: no engine, a plain thread spinning at the engine threads' priority, and the
/// host thread polling the clock for 1 ms the way `pump` does (yielding between polls).
fn bare_lateness(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
) -> Lateness {
    static STOP: AtomicBool = AtomicBool::new(false);
    STOP.store(false, Ordering::Relaxed);
    let spinner = std::thread::spawn(|| {
        // The same call the engine makes on each of its own threads.
        tavern::internal::tools::yield_to_host();
        let mut x = 0u64;
        while !STOP.load(Ordering::Relaxed) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    });
    let mut times: Vec<Duration> = Vec::new();
    g.bench_function("pump_1ms_bare_spinner", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                let until = t + Duration::from_millis(1);
                while Instant::now() < until {
                    std::thread::yield_now();
                }
                let d = t.elapsed();
                times.push(d);
                total += d;
            }
            total
        })
    });
    STOP.store(true, Ordering::Relaxed);
    spinner.join().expect("the spinner ends");
    lateness(times)
}

/// Summarises the pump durations of one measurement.
fn lateness(mut times: Vec<Duration>) -> Lateness {
    times.sort();
    Lateness {
        n: times.len(),
        p99: times
            .get((times.len() * 99 / 100).min(times.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default(),
        max: times.last().copied().unwrap_or_default(),
        late: times
            .iter()
            .filter(|d| **d > Duration::from_micros(1500))
            .count(),
    }
}

/// Writes `embed.json` where `benches/update-figures.sh` reads it: `$BENCH_FIGURES_DIR`,
/// else `${CARGO_TARGET_DIR:-target}/bench-figures`.
fn write_figures(figures: &serde_json::Value) {
    let dir = std::env::var_os("BENCH_FIGURES_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
                .join("bench-figures")
        });
    std::fs::create_dir_all(&dir).expect("create the figures directory");
    let path = dir.join("embed.json");
    std::fs::write(&path, figures.to_string()).expect("write the figures");
    println!("wrote {}", path.display());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
