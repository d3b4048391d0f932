//! The `tavern` subcommands.
//!
//! Each subcommand lives in its own file `src/cli/<name>.rs`, which provides
//!
//! ```ignore
//! /// One-line summary shown in `tavern --help`.
//! #[derive(clap::Args)]
//! pub struct Args { /* its options */ }
//!
//! pub async fn run(globals: &Globals, args: Args) -> u8 { /* returns the exit status */ }
//! ```
//!
//! and is wired in with ONE line in the [`subcommands!`] list below, `Variant => module,`
//! (the variant name in CamelCase becomes the subcommand name in kebab-case). Use
//! [`Globals::engine`] to build the engine (it prints load problems as warnings),
//! [`read_input`] for a FILE-or-stdin argument, [`print_json`] for JSON output, and the exit
//! statuses [`OK`], [`FAILED`], [`USAGE`].
//!
//! Conventions: results on stdout, everything else (warnings, logs) on stderr; exit 0 on
//! success, 1 when the work ran but something failed, 2 for usage errors (bad options,
//! unreadable input), 70 for an internal error.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::Value;

use tavern::{Engine, EngineError};

/// Success.
pub const OK: u8 = 0;
/// The work ran and something in it failed (an error diagnostic, a failed call).
pub const FAILED: u8 = 1;
/// The command line or its input could not be used.
pub const USAGE: u8 = 2;
/// A bug in tavern (a panic); the message asks to report it.
pub const INTERNAL: u8 = 70;

mod colour;

/// Declares the subcommand modules, the `Command` enum and its dispatcher from one list.
macro_rules! subcommands {
    ($($variant:ident => $module:ident,)*) => {
        $(pub mod $module;)*

        /// A tavern subcommand.
        #[derive(clap::Subcommand)]
        pub enum Command {
            $(
                #[allow(missing_docs)]
                $variant($module::Args),
            )*
        }

        impl Command {
            async fn run(self, globals: &Globals) -> u8 {
                match self {
                    $(Command::$variant(args) => $module::run(globals, args).await,)*
                }
            }
        }
    };
}

subcommands! {
    Parse => parse,
    Call => call,
    Tools => tools,
    Plugin => plugin,
    Workflow => workflow,
    Agent => agent,
    Mcp => mcp,
    Serve => serve,
    Nodes => nodes,
}

pub mod serve_opts;

/// tavern: one protocol for models, scripts and people to call tools.
#[derive(Parser)]
#[command(name = "tavern", version, propagate_version = true)]
pub struct Cli {
    /// Home directory holding plugins/, workflows/ and tavern.toml.
    #[arg(long, global = true, env = "TAVERN_HOME", default_value = ".")]
    pub home: PathBuf,
    /// Override a setting, e.g. --set extensions.FileOperator.root=/tmp/ws (repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Append the audit trail (every call, veto and override decision) to FILE as JSON lines
    /// (relative to the home).
    #[arg(long, global = true, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Runs the chosen subcommand; returns the exit status.
    pub async fn run(self) -> u8 {
        // A mistyped --home must not quietly serve only the built-in tools.
        if !self.home.is_dir() {
            let why = if self.home.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            // Name what the user wrote: the flag, or the environment variable it came from.
            let flag_given = std::env::args_os().any(|a| {
                let a = a.to_string_lossy();
                a == "--home" || a.starts_with("--home=")
            });
            if !flag_given && std::env::var_os("TAVERN_HOME").is_some() {
                eprintln!(
                    "tavern: TAVERN_HOME={}: {why}; set TAVERN_HOME to the home directory (the one holding plugins/, workflows/ and tavern.toml), or unset it to use the current directory",
                    self.home.display()
                );
            } else {
                eprintln!(
                    "tavern: --home {}: {why}; give the home directory (the one holding plugins/, workflows/ and tavern.toml), or leave --home out to use the current directory",
                    self.home.display()
                );
            }
            return USAGE;
        }
        let globals = Globals {
            home: self.home,
            sets: self.sets,
            audit: self.audit,
        };
        self.command.run(&globals).await
    }
}

/// Options every subcommand shares.
pub struct Globals {
    /// `--home` / `TAVERN_HOME`.
    pub home: PathBuf,
    /// `--set KEY=VALUE`, in order.
    pub sets: Vec<String>,
    /// `--audit FILE`.
    pub audit: Option<PathBuf>,
}

impl Globals {
    /// A path given in a flag, taken from the home when relative (every relative path in
    /// flags and settings is).
    pub fn path(&self, p: &Path) -> PathBuf {
        // `./x` is `x`, and from the home `.` it stays `x`: never `././plugins/Dice`.
        let p: PathBuf = p
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect();
        let home_is_here = self
            .home
            .components()
            .all(|c| matches!(c, std::path::Component::CurDir));
        match (home_is_here, p.as_os_str().is_empty()) {
            (true, true) => PathBuf::from("."),
            (true, false) => p,
            (false, _) => self.home.join(p),
        }
    }

    /// How a message names `p`: relative to the home when inside it (`plugins/Dice`),
    /// else as given.
    pub fn shown(&self, p: &Path) -> String {
        tavern::internal::plugins::inside_home(p, &self.home)
            .unwrap_or_else(|| p.to_string_lossy().into_owned())
    }

    /// `text` with every `<home>/` of the home's absolute forms removed (a message that
    /// names a path inside the home, such as an error from a library).
    pub fn relative_text(&self, text: &str) -> String {
        tavern::Problem::new("", text)
            .relative_to(&self.home)
            .message
    }

    /// A `FILE|ID` argument: the file at that path from the home when there is one, else
    /// the id as given.
    pub fn target(&self, target: &str) -> String {
        let p = self.home.join(target);
        if p.is_file() {
            p.to_string_lossy().into_owned()
        } else {
            target.to_string()
        }
    }

    /// Builds the engine for `--home` and `--set`. Load problems are printed to stderr as
    /// warnings; a build failure is printed and returned as the exit status.
    pub fn engine(&self) -> Result<Engine, u8> {
        self.engine_with(|b| b)
    }

    /// [`Globals::engine`] with more of the builder set by `configure` (a served home's
    /// store, an agent run's `--world`).
    pub fn engine_with(
        &self,
        configure: impl FnOnce(tavern::EngineBuilder) -> tavern::EngineBuilder,
    ) -> Result<Engine, u8> {
        // Mods' log lines stay `tracing` events (filtered by `TAVERN_LOG`).
        let mut b = configure(Engine::builder().home(&self.home).log_to_stderr(false));
        // The CLI's runtime runs the engine's async work too (no second runtime).
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            b = b.runtime(h);
        }
        for s in &self.sets {
            b = b.set(s.clone());
        }
        b = debug_host_tools(b);
        if let Some(a) = &self.audit {
            b = b.audit(self.path(a));
        }
        match b.build() {
            Ok(engine) => {
                for p in engine.problems() {
                    eprintln!("warning: {p}");
                }
                Ok(engine)
            }
            Err(e @ EngineError::Override(_)) => {
                eprintln!("tavern: {e}");
                Err(USAGE)
            }
            Err(e) => {
                eprintln!("tavern: cannot start the engine: {e}");
                Err(FAILED)
            }
        }
    }
}

/// `TAVERN_DEBUG_PANIC_TOOL=1` (debug builds only) adds a host tool `debug:panic` that
/// panics, so a test can show on the real binary that a panicking host tool, even one a
/// script calls, is contained as an error and the process keeps running.
fn debug_host_tools(b: tavern::EngineBuilder) -> tavern::EngineBuilder {
    if cfg!(debug_assertions) && std::env::var_os("TAVERN_DEBUG_PANIC_TOOL").is_some() {
        b.host_tool(
            tavern::ToolDefinition::host(
                "debug:panic",
                "Panics (a test aid of debug builds).",
                serde_json::json!({"type": "object"}),
            ),
            |_, _| panic!("debug:panic was called"),
        )
    } else {
        b
    }
}

/// Reads FILE, or standard input when `file` is `None` or `-`. Invalid UTF-8 is replaced
/// (U+FFFD). An unreadable file prints a message and gives [`USAGE`].
pub fn read_input(file: Option<&Path>) -> Result<String, u8> {
    let mut bytes = Vec::new();
    match file {
        None => read_stdin(&mut bytes)?,
        Some(p) if p == Path::new("-") => read_stdin(&mut bytes)?,
        Some(p) => {
            bytes = std::fs::read(p).map_err(|e| {
                eprintln!("tavern: cannot read {}: {e}", p.display());
                USAGE
            })?;
        }
    }
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

fn read_stdin(buf: &mut Vec<u8>) -> Result<(), u8> {
    std::io::stdin()
        .lock()
        .read_to_end(buf)
        .map(|_| ())
        .map_err(|e| {
            eprintln!("tavern: cannot read standard input: {e}");
            USAGE
        })
}

/// Prints one JSON value (pretty) on stdout. A closed pipe is not an error.
pub fn print_json(v: &Value) {
    // Serializing a `Value` cannot fail: its map keys are strings.
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    print_text(&format!("{text}\n"));
}

/// Writes any serializable value as pretty JSON (the same text as [`print_json`] of its
/// `Value`) straight to a buffered stdout, without building a `Value` or a `String` first.
/// A closed pipe is not an error.
pub fn write_json<T: serde::Serialize>(v: &T) {
    let out = std::io::stdout().lock();
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    let _ = serde_json::to_writer_pretty(&mut w, v)
        .map_err(std::io::Error::from)
        .and_then(|_| w.write_all(b"\n"))
        .and_then(|_| w.flush());
}

/// Prints text on stdout, ignoring a closed pipe (`tavern tools | head`).
pub fn print_text(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// Replaces Rust's multi-line panic message with one line on stderr. Panics the engine
/// contains (in the tool manager, the script hosts, the workflow runner) never reach it: the
/// engine wraps this hook when it is built and logs each of those once instead. The hook only
/// prints: unwinding goes on, and a panic that reaches `main` ends the process with
/// [`INTERNAL`] there.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".into());
        let place = info
            .location()
            .map(|l| format!(" ({}:{})", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "tavern: internal error: {msg}{place}. This is a bug in tavern; please report it."
        );
    }));
}

/// Logs go to stderr only (stdout carries results); the filter comes from `TAVERN_LOG`
/// (e.g. `TAVERN_LOG=tavern=debug`), default `warn`.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TAVERN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour::stderr_colour())
        .with_env_filter(filter)
        .try_init();
}

/// A `--format` value: a name from the protocol's format table (`Format::NAMES`) or
/// an alias, in any case.
pub fn parse_format(s: &str) -> Result<tavern::internal::protocol::Format, String> {
    s.parse()
}

/// The help of `--format`, listing the format table's names.
pub fn format_help() -> String {
    format!(
        "Call format to look for: {}.",
        tavern::internal::protocol::Format::names_text()
    )
}
