//! `tavern plugin new|check|test`: tools for modders.

use std::path::PathBuf;

use tavern::internal::config::Settings;
use tavern::internal::plugins::check;
use tavern::internal::plugins::isolation::RootPolicy;
use tavern::internal::plugins::scaffold::{self, Lang};

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
    /// Validate everything the home holds (plugins, workflows/, scripts/, agents/,
    /// tavern.toml) without changing anything on disk; print every problem as
    /// file:line:column: message (exit 1 when there is any).
    Check {
        /// Only this plugin directory, or directory of plugins (default: the whole home).
        dir: Option<PathBuf>,
        /// Print one JSON object (`ok`, `problems`, `plugins`, `tools`) for editors and CI.
        #[arg(long)]
        json: bool,
    },
    /// Load plugins and run the cases in their tests/*.test.json files. Declared fs roots
    /// are mapped to fresh temporary directories (seeded from tests/fixtures/), so every
    /// run starts from the same state and the real roots are never touched.
    Test {
        /// A plugin directory, or a directory of plugins (default: <home>/plugins).
        dir: Option<PathBuf>,
        /// Load the whole home as the engine does (every plugin, workflows/, the hook
        /// scripts in scripts/) and run the tests of DIR (default: of every plugin).
        #[arg(long)]
        with_home: bool,
    },
}

fn settings(globals: &Globals) -> Result<Settings, u8> {
    let mut s = Settings::load(&globals.home).map_err(|p| {
        eprintln!("{p}");
        FAILED
    })?;
    apply_sets(globals, &mut s)?;
    Ok(s)
}

fn apply_sets(globals: &Globals, s: &mut Settings) -> Result<(), u8> {
    s.apply_env().map_err(|e| {
        eprintln!("tavern: {e}");
        USAGE
    })?;
    for o in &globals.sets {
        s.set_override(o).map_err(|e| {
            eprintln!("tavern: {e}");
            USAGE
        })?;
    }
    Ok(())
}

/// Loads the plugins under `dir` (default `<home>/plugins`) the way the engine would, with
/// fs roots mapped to `temp_roots` — or, `with_home`, the whole home with the hook scripts —
/// says on stdout what it loaded, and prints every problem as `file:line:column: message`.
fn load_for_tests(
    globals: &Globals,
    dir: Option<&std::path::Path>,
    with_home: bool,
    temp_roots: &std::path::Path,
) -> Result<check::CheckReport, u8> {
    let s = settings(globals)?;
    let roots = RootPolicy::MapTo(temp_roots.to_path_buf());
    let path = dir.unwrap_or(&check::default_dir(&globals.home)).to_path_buf();
    let (report, what) = if with_home {
        let what = match dir {
            Some(d) => format!(
                "testing {} with the whole home loaded (every plugin, workflows/, the hook scripts in scripts/)",
                globals.shown(d)
            ),
            None => "testing every plugin with the whole home loaded (workflows/, the hook scripts in scripts/)".to_string(),
        };
        (check::check_home_with(&globals.home, &s, roots), what)
    } else {
        let what = match dir {
            Some(d) if check::is_plugin_dir(d) => format!(
                "testing {} alone: no other plugin, no home workflows and no hook scripts (scripts/) are loaded; --with-home loads them",
                globals.shown(d)
            ),
            _ => format!(
                "testing the plugins in {}: no home workflows and no hook scripts (scripts/) are loaded; --with-home loads them",
                globals.shown(&path)
            ),
        };
        (check::check_with(&path, &globals.home, &s, roots), what)
    };
    println!("{what}");
    for p in &report.problems {
        println!("{p}");
    }
    Ok(report)
}

/// Reads every `agents/*.json` as `tavern agent run` reads it (keys and value types, with
/// file:line), adding each problem at a place the key check did not already report.
fn agent_problems(
    home: &std::path::Path,
    tools: &tavern::internal::tools::ToolManager,
    problems: &mut Vec<tavern::Problem>,
) {
    use tavern::internal::agent::{reference_problems, AgentError, AgentProfile};
    let dir = home.join("agents");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue; // the key check reported it
        };
        let ps = match AgentProfile::from_json(&text, &f) {
            // What it names (inventory tools, a scripted model file) must exist too.
            Ok(profile) => reference_problems(&profile, tools, home),
            Err(AgentError::Load(ps)) => ps,
            Err(_) => Vec::new(),
        };
        {
            for p in ps {
                let p = p.relative_to(home);
                // One problem per place: the key check may have met it already.
                if !problems
                    .iter()
                    .any(|q| q.file == p.file && q.line == p.line)
                {
                    problems.push(p);
                }
            }
        }
    }
}

/// `tavern plugin check [DIR] [--json]`.
fn run_check(globals: &Globals, dir: Option<PathBuf>, json: bool) -> u8 {
    // A broken tavern.toml is one more problem, not a reason to stop checking.
    let (mut s, mut problems) = match Settings::load(&globals.home) {
        Ok(s) => (s, Vec::new()),
        Err(p) => (Settings::default(), vec![p]),
    };
    if let Err(code) = apply_sets(globals, &mut s) {
        return code;
    }
    let report = match &dir {
        Some(d) => check::check(&globals.path(d), &globals.home, &s),
        None => check::check_home(&globals.home, &s),
    };
    problems.extend(report.problems.iter().cloned());
    if dir.is_none() {
        agent_problems(&globals.home, &report.tools, &mut problems);
    }
    // Everything on stdout: `plugin check | less` shows the whole report.
    if json {
        super::print_json(&check::output::to_json(&report, &problems));
    } else {
        super::print_text(&check::output::to_text(&report, &problems));
    }
    if problems.is_empty() {
        OK
    } else {
        FAILED
    }
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
            let parent = dir
                .map(|d| globals.path(&d))
                .unwrap_or_else(|| check::default_dir(&globals.home));
            match scaffold::create(&parent, &name, lang) {
                Ok(dir) => {
                    // Named from the home; the next command runs from anywhere the
                    // `--home` given runs from.
                    let shown = globals.shown(&dir);
                    println!("created {shown}");
                    let home_is_here = globals
                        .home
                        .components()
                        .all(|c| matches!(c, std::path::Component::CurDir));
                    let home = if home_is_here {
                        String::new()
                    } else {
                        format!("--home {} ", globals.home.display())
                    };
                    println!("next: tavern {home}plugin test {shown}");
                    OK
                }
                Err(e @ scaffold::ScaffoldError::Io { .. }) => {
                    eprintln!("tavern: {}", globals.relative_text(&e.to_string()));
                    FAILED
                }
                Err(e) => {
                    eprintln!("tavern: {}", globals.relative_text(&e.to_string()));
                    USAGE
                }
            }
        }
        Action::Check { dir, json } => run_check(globals, dir, json),
        Action::Test { dir, with_home } => {
            // Fresh roots for this run, removed when it ends.
            let roots = match tempfile::tempdir() {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("tavern: cannot create temporary roots for the tests: {e}");
                    return FAILED;
                }
            };
            let dir = dir.map(|d| globals.path(&d));
            let report = match load_for_tests(globals, dir.as_deref(), with_home, roots.path()) {
                Ok(r) => r,
                Err(code) => return code,
            };
            // With the whole home loaded, only DIR's plugins are tested.
            let under = dir.as_ref().and_then(|d| d.canonicalize().ok());
            let outcomes = check::run_tests_of(&report, |p| match &under {
                None => true,
                Some(d) => p.dir.canonicalize().is_ok_and(|pd| pd.starts_with(d)),
            })
            .await;
            let mut failed = 0;
            for o in &outcomes {
                match &o.failure {
                    None => println!("ok   {} :: {}", globals.shown(&o.file), o.name),
                    Some(why) => {
                        failed += 1;
                        // A tool of another plugin or the home is not loaded without
                        // --with-home: say so where the test trips on it.
                        let hint = if !with_home && why.ends_with("(unknown_tool)") {
                            " (plugin test loads only the plugins tested: if the tool comes from another plugin or the home's workflows, run with --with-home)"
                        } else {
                            ""
                        };
                        println!("FAIL {} :: {}: {why}{hint}", globals.shown(&o.file), o.name);
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
