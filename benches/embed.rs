//! Embedding costs: `pump` with nothing queued, one host tool call made from a Lua mod, and
//! how late `pump(1 ms)` returns while a script loops on the engine's threads (the maximum,
//! the 99th percentile and the count later than 1.5 ms over every pump are written to
//! `<figures>/embed.json` as `embed/pump_1ms_{max,p99,late}_while_looping`; see
//! `write_figures`), and the same while the pending call only sleeps
//! (`embed/pump_1ms_*_while_waiting`): the machine's own wake-up lateness, for comparison.
//!
//!
//! Issue 27 adds: a main-thread host tool called from a Lua mod, submit to take, with the
//! host pumping back to back (`main_thread_tool_from_lua`: the engine's whole overhead) and
//! in a 60 Hz frame loop with one 1 ms pump per frame (`main_thread_call_frames_*`: in
//! which frame the result is taken), and the pumping thread's CPU time while a long call is
//! pending, as a share of the pump budgets it was given (`pump_cpu_*`).
//!
//! Issue 37 adds: a sync host tool called from model text and from a mod
//! (`sync_tool_from_text`, `sync_tool_from_mod`, each one `call_blocking`); `pump` now
//! returns as soon as its own work is done, so the `pump_1ms_*` rows measure that check.
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
api.tools.register({id = "spawn", description = "spawns through the main-thread tool", handler = function()
  return api.tools.call("world:spawn", {}).n
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
        // Runs only inside `pump` on the thread that built the engine (the bench's).
        .main_thread_tool(
            ToolDefinition::host("world:spawn", "counts", json!({"type": "object"})),
            {
                let spawned = std::rc::Rc::new(std::cell::Cell::new(0u64));
                move |_, _| {
                    spawned.set(spawned.get() + 1);
                    Ok(json!({"n": spawned.get()}))
                }
            },
        )
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One 60 Hz frame.
const FRAME: Duration = Duration::from_micros(16_667);

/// A main-thread tool call from a mod in a frame loop: submit at a frame's start, the game
/// simulates for the rest of the frame (sleeps), then pumps for at most 1 ms; returns in
/// which frame (1 = the one it was submitted in) and how long after the submit the result
/// was taken, per call.
fn frames_to_take(e: &Engine, calls: usize) -> (Vec<u32>, Vec<Duration>) {
    let text = tam("bench:spawn", 0);
    let (mut frames, mut latency) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        let submitted = Instant::now();
        let t = e.submit(&text).unwrap();
        let mut frame = 1u32;
        let mut start = submitted;
        loop {
            std::thread::sleep(
                (start + FRAME - Duration::from_millis(1))
                    .saturating_duration_since(Instant::now()),
            );
            e.pump(Duration::from_millis(1));
            if let Some(r) = e.take(t) {
                assert!(r.unwrap().ok());
                latency.push(submitted.elapsed());
                break;
            }
            std::thread::sleep((start + FRAME).saturating_duration_since(Instant::now()));
            start += FRAME;
            frame += 1;
            assert!(frame < 600, "the call never finished");
        }
        frames.push(frame);
        std::thread::sleep((start + FRAME).saturating_duration_since(Instant::now()));
    }
    (frames, latency)
}

/// The pumping thread's CPU time over `n` pumps of `budget` while a call of `tool` stays
/// pending, as a share of the budgets given (the call is then ended).
fn pump_cpu(e: &Engine, tool: &str, budget: Duration, n: u32) -> f64 {
    let cancel = CancelToken::new();
    let opts = CallOptions::new()
        .timeout(Duration::from_secs(300))
        .cancel(cancel.clone());
    let ticket = e.submit_with(&tam(tool, 0), opts).unwrap();
    // Let the call start on the engine's threads first.
    std::thread::sleep(Duration::from_millis(50));
    let cpu0 = thread_cpu();
    for _ in 0..n {
        assert!(
            e.pump(budget).is_empty(),
            "the {tool} call ended during the measurement"
        );
    }
    let cpu = thread_cpu() - cpu0;
    assert_eq!(e.pending(), 1, "the {tool} call must still be running");
    cancel.cancel();
    RELEASE.store(true, Ordering::Relaxed);
    while e.take(ticket).is_none() {
        e.pump(Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(1));
    }
    RELEASE.store(false, Ordering::Relaxed);
    cpu.as_secs_f64() / (budget * n).as_secs_f64()
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

    // Issue 37: one sync host tool called from model text (the request's own blocking
    // thread runs it: one hop), and from a mod (submit to result: the mod's script runs
    // on that thread and calls the tool inline), both through `call_blocking`.
    let get = tam("world:get", 0);
    g.bench_function("sync_tool_from_text", |b| {
        b.iter(|| {
            let r = e.call_blocking(&get, CallOptions::new()).unwrap();
            assert!(r.ok(), "{:?}", r.outcomes);
        })
    });
    let one = tam("bench:calls", 1);
    g.bench_function("sync_tool_from_mod", |b| {
        b.iter(|| {
            let r = e.call_blocking(&one, CallOptions::new()).unwrap();
            assert!(r.ok(), "{:?}", r.outcomes);
        })
    });

    // A main-thread tool called from a Lua mod: submit, pump (returning as soon as the
    // call is done), take. All of it is the engine's overhead: the handler only counts.
    let spawn = tam("bench:spawn", 0);
    g.bench_function("main_thread_tool_from_lua", |b| {
        b.iter(|| {
            let t = e.submit(&spawn).unwrap();
            loop {
                e.pump(FRAME);
                if let Some(r) = e.take(t) {
                    break r.unwrap();
                }
            }
        })
    });
    let (frames, mut latency) = frames_to_take(&e, 120);
    latency.sort();
    let frames_max = frames.iter().copied().max().unwrap_or(0);
    let in_first = frames.iter().filter(|f| **f == 1).count();

    // pump(1 ms) while a script spins on the engine's threads. The plugin's limits come
    // from the host's `script_limits` (raised above), so the spin outlives the measurement.
    let spin = pump_lateness(&mut g, &e, "pump_1ms_while_looping", "bench:spin");
    // The control: the same pumps while the pending call only sleeps (no CPU used by the
    // engine), so what remains is the OS's own wake-up lateness on this machine.
    let idle = pump_lateness(&mut g, &e, "pump_1ms_while_waiting", "world:wait");
    let bare = bare_lateness(&mut g);
    g.finish();
    // The pumping thread's CPU while a long call is pending: back-to-back pumps of 1 ms and
    // of a whole frame, while a host tool sleeps and while a mod's script spins.
    let cpu_wait_1 = pump_cpu(&e, "world:wait", Duration::from_millis(1), 2000);
    let cpu_wait_frame = pump_cpu(&e, "world:wait", FRAME, 120);
    let cpu_spin_1 = pump_cpu(&e, "bench:spin", Duration::from_millis(1), 2000);
    let cpu_spin_frame = pump_cpu(&e, "bench:spin", FRAME, 120);
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    let pct = |x: f64| format!("{:.2} % of the budgets", x * 100.0);
    let p99 = |v: &[Duration]| v[(v.len() * 99 / 100).min(v.len() - 1)];
    println!(
        "main-thread call from a mod in a 60 Hz loop: {in_first} of {} taken in their first frame, max frame {frames_max}, submit to take p99 {:?}, max {:?}",
        frames.len(),
        p99(&latency),
        latency.last().copied().unwrap_or_default()
    );
    println!(
        "pumping thread CPU while pending: wait 1 ms {}, wait frame {}, spin 1 ms {}, spin frame {}",
        pct(cpu_wait_1),
        pct(cpu_wait_frame),
        pct(cpu_spin_1),
        pct(cpu_spin_frame)
    );
    write_figures(&json!({
        "embed/main_thread_call_frames_max": format!("{frames_max} ({in_first} of {} in the first frame)", frames.len()),
        "embed/main_thread_call_take_p99": ms(p99(&latency)),
        "embed/main_thread_call_take_max": ms(latency.last().copied().unwrap_or_default()),
        "embed/pump_cpu_1ms_while_waiting": pct(cpu_wait_1),
        "embed/pump_cpu_frame_while_waiting": pct(cpu_wait_frame),
        "embed/pump_cpu_1ms_while_looping": pct(cpu_spin_1),
        "embed/pump_cpu_frame_while_looping": pct(cpu_spin_frame),
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
                assert!(
                    finished.is_empty(),
                    "the pending call ended during the measurement"
                );
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
/// host thread polling the clock for 1 ms, yielding between polls (as `pump` did before it
/// slept on a signal: a polling host thread's floor on this machine).
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
