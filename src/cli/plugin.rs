//! `tavern plugin new|check|test`: tools for modders.

use std::path::PathBuf;

use tavern::config::Settings;
use tavern::plugins::check;
use tavern::plugins::scaffold::{self, Lang};

use super::{Globals, FAILED, OK, USAGE};

/// Create, check and test plugins.
#[derive(clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `plugin` subcommands.
#[derive(clap::Subcommand)]
pub enum Action {
    /// Scaffold a working plugin (manifest, one tool, its script, a test file).
    New {
        /// Plugin name (letters, digits, '_' or '-'; starts with a letter).
        name: String,
        /// Script language.
        #[arg(long, default_value = "lua", value_parser = ["lua", "rhai"])]
        lang: String,
        /// Directory to create it in (default: <home>/plugins).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Validate manifests, tool schemas, scripts and test files; print every problem as
    /// file:line:column: message (exit 1 when there is any).
    Check {
        /// A plugin directory, or a directory of plugins (default: <home>/plugins).
        dir: Option<PathBuf>,
    },
    /// Load plugins and run the cases in their tests/*.test.json files.
    Test {
        /// A plugin directory, or a directory of plugins (default: <home>/plugins).
        dir: Option<PathBuf>,
    },
}

fn settings(globals: &Globals) -> Result<Settings, u8> {
    let mut s = Settings::load(&globals.home).map_err(|p| {
        eprintln!("{p}");
        FAILED
    })?;
    for o in &globals.sets {
        s.set_override(o).map_err(|e| {
            eprintln!("tavern: {e}");
            USAGE
        })?;
    }
    Ok(s)
}

/// Loads the plugins under `dir` (default `<home>/plugins`) the way the engine would and
/// prints every problem as `file:line:column: message`.
fn check_and_print(globals: &Globals, dir: Option<PathBuf>) -> Result<check::CheckReport, u8> {
    let s = settings(globals)?;
    let path = dir.unwrap_or_else(|| check::default_dir(&globals.home));
    let report = check::check(&path, &globals.home, &s);
    for p in &report.problems {
        println!("{p}");
    }
    Ok(report)
}

/// Runs `tavern plugin …`; returns the exit status.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    match args.action {
        Action::New { name, lang, dir } => {
            // The value parser admits only lua and rhai.
            let lang: Lang = match lang.parse() {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("tavern: {e}");
                    return USAGE;
                }
            };
            let parent = dir.unwrap_or_else(|| check::default_dir(&globals.home));
            match scaffold::create(&parent, &name, lang) {
                Ok(dir) => {
                    println!("created {}", dir.display());
                    println!("next: tavern plugin test {}", dir.display());
                    OK
                }
                Err(e @ scaffold::ScaffoldError::Io { .. }) => {
                    eprintln!("tavern: {e}");
                    FAILED
                }
                Err(e) => {
                    eprintln!("tavern: {e}");
                    USAGE
                }
            }
        }
        Action::Check { dir } => {
            let report = match check_and_print(globals, dir) {
                Ok(r) => r,
                Err(code) => return code,
            };
            // stdout stays one problem per line (undeclared uses among them); the
            // declared-beside-used table is for the reader, on stderr with the summary.
            for text in &report.permissions {
                eprint!("{text}");
            }
            for line in tavern::plugins::confine::check_lines(&report) {
                println!("{line}");
            }
            let tools: usize = report.plugins.iter().map(|p| p.tools.len()).sum();
            eprintln!(
                "{} plugin(s), {} tool(s), {} problem(s)",
                report.plugins.len(),
                tools,
                report.problems.len()
            );
            if report.problems.is_empty() {
                OK
            } else {
                FAILED
            }
        }
        Action::Test { dir } => {
            let report = match check_and_print(globals, dir) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let outcomes = check::run_tests(&report).await;
            let mut failed = 0;
            for o in &outcomes {
                match &o.failure {
                    None => println!("ok   {} :: {}", o.file.display(), o.name),
                    Some(why) => {
                        failed += 1;
                        println!("FAIL {} :: {}: {why}", o.file.display(), o.name);
                    }
                }
            }
            println!(
                "{} passed, {} failed, {} problem(s)",
                outcomes.len() - failed,
                failed,
                report.problems.len()
            );
            if failed == 0 && report.problems.is_empty() {
                OK
            } else {
                FAILED
            }
        }
    }
}
