//! The bridge to the script sandbox: loads a plugin's Lua/Rhai files into one
//! [`PluginScripts`] and builds the handlers of its `service` tools.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::problem::Problem;
use crate::script::{Limits, PartialLimits, Permissions, PluginScripts, ScriptEnv, ScriptError};
use crate::tools::{ToolDefinition, ToolHandler, ToolManager};

/// What scripts of one plugin are loaded with.
#[derive(Debug, Clone)]
pub struct ScriptContext {
    /// Plugin name.
    pub plugin: String,
    /// Plugin directory (absolute).
    pub dir: PathBuf,
    /// Resolved config values.
    pub config: Map<String, Value>,
    /// Resolved permissions.
    pub permissions: Permissions,
    /// Effective limits.
    pub limits: Limits,
    /// How many Lua states serve calls at once (`instances:`).
    pub instances: usize,
    /// The manager scripts call tools through.
    pub manager: Arc<ToolManager>,
    /// The hook registry scripts register hooks and overrides in.
    pub hooks: Option<Arc<crate::hooks::Hooks>>,
    /// The plugin directory relative to the home (`plugins/Dice`), for runtime messages;
    /// `None` outside the home.
    pub shown_dir: Option<String>,
}

/// The host's limits (`EngineBuilder::script_limits`, by default the engine defaults)
/// lowered by a plugin's `limits:` section: a plugin never raises a limit, and a host that
/// raised its limits gives its plugins the raised ones.
pub(crate) fn effective_limits(
    section: Option<&Value>,
    host_max: &Limits,
) -> Result<Limits, String> {
    let base = *host_max;
    match section {
        None | Some(Value::Null) => Ok(base),
        Some(v) => {
            let partial: PartialLimits =
                serde_json::from_value(v.clone()).map_err(|e| format!("invalid limits: {e}"))?;
            Ok(base.lowered_by(&partial))
        }
    }
}

/// The setting that lets calls run unguarded when a hook script failed to load.
pub const FAIL_OPEN: &str = "scripts.fail_open";

/// A hook script (a power-user script, or a plugin's scripts when it declares hooks or
/// overrides) failed to load, as `problem` says: its guard is missing, so unless
/// `scripts.fail_open = true` every call is refused, naming `owner` and the problem, until
/// it loads (a reload builds a new registry). Returns the problem with a hint saying so.
pub(crate) fn guard_failed(
    hooks: Option<&Arc<crate::hooks::Hooks>>,
    settings: &crate::config::Settings,
    home: &Path,
    owner: &str,
    problem: Problem,
) -> Problem {
    if settings.get(FAIL_OPEN) == Some(&Value::Bool(true)) {
        return problem.hint(format!(
            "{FAIL_OPEN} = true: calls run without {owner}'s hooks"
        ));
    }
    if let Some(h) = hooks {
        let problem = problem.clone().relative_to(home);
        h.refuse_all(
            owner,
            &format!(
                "{owner} failed to load, so calls are refused until it loads: {problem} \
                 (or set {FAIL_OPEN} = true in tavern.toml to run them without it)"
            ),
        );
    }
    problem.hint(format!(
        "calls are refused until it loads; {FAIL_OPEN} = true runs them without {owner}'s hooks"
    ))
}

/// A script error at load time as a problem at its file and line.
pub fn load_problem(dir: &Path, first_file: &Path, e: &ScriptError) -> Problem {
    let (file, line, parser_column) = match e {
        ScriptError::Syntax {
            file, line, column, ..
        } => (
            Some(file.clone()),
            Some(*line),
            Some(*column).filter(|c| *c > 0),
        ),
        ScriptError::Runtime { file, line, .. } => (file.clone(), *line, None),
        _ => (None, None, None),
    };
    let path = match file {
        Some(f) if !f.is_empty() => dir.join(f),
        _ => dir.join(first_file),
    };
    let what = match e {
        ScriptError::Syntax { .. } => "script does not compile",
        _ => "script failed while loading",
    };
    // The problem carries the place: the message says it once.
    let mut message = match e {
        ScriptError::Syntax { message, .. } | ScriptError::Runtime { message, .. } => {
            format!("{what}: {message}")
        }
        other => format!("{what}: {other}"),
    };
    // A Rhai bracket left open: the parser stops far below it; say where it opened.
    if matches!(e, ScriptError::Syntax { .. }) && path.extension().is_some_and(|x| x == "rhai") {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(b) = crate::problem::unclosed_bracket(&text, crate::problem::Syntax::Rhai) {
            message = format!("{message} ({b})");
        }
    }
    // Rhai's parser gives the column; for Lua it is found from the token it names.
    let column = parser_column.or_else(|| line.and_then(|l| near_column(&path, l, &message)));
    let p = Problem::new(path, message);
    match line {
        Some(l) if l > 0 => p.at(l, column),
        _ => p,
    }
}

/// The column of the token Lua names in `… near 'token'` on line `line` of `path`, when it
/// is there (Lua reports a line and the token, not a column).
fn near_column(path: &Path, line: u32, message: &str) -> Option<u32> {
    let token = message.split("near '").nth(1)?.split('\'').next()?;
    if token.is_empty() || token == "<eof>" {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let l = text.lines().nth(line.checked_sub(1)? as usize)?;
    let at = l.find(token)?;
    Some(l[..at].chars().count() as u32 + 1)
}

/// The loaded scripts of one plugin (kept alive as long as the plugin).
#[derive(Debug, Default)]
pub struct ScriptSet {
    scripts: Option<PluginScripts>,
    /// The scripts failed to load (their problem is reported once, for the script).
    failed: bool,
}

impl ScriptSet {
    /// No scripts.
    pub fn empty() -> Self {
        ScriptSet::default()
    }

    /// Scripts that failed to load: what depends on them is covered by the script's own
    /// problem, and reports nothing more.
    pub fn failed() -> Self {
        ScriptSet {
            scripts: None,
            failed: true,
        }
    }

    /// Whether the scripts failed to load.
    pub fn load_failed(&self) -> bool {
        self.failed
    }

    /// Loads `files` (relative to the plugin directory) into one sandbox, running their top
    /// level. A syntax or load-time error is a problem at its file and line.
    pub fn load(ctx: &ScriptContext, files: &[PathBuf]) -> Result<Self, Problem> {
        if files.is_empty() {
            return Ok(Self::empty());
        }
        let mut env = ScriptEnv::new(ctx.plugin.clone(), ctx.dir.clone());
        env.permissions = ctx.permissions.clone();
        env.config = ctx.config.clone();
        env.limits = ctx.limits;
        env.instances = ctx.instances;
        env.tools = Some(Arc::downgrade(&ctx.manager));
        env.hooks = ctx.hooks.as_ref().map(Arc::downgrade);
        env.shown_dir = ctx.shown_dir.clone();
        match PluginScripts::load(env, files) {
            Ok(s) => Ok(ScriptSet {
                scripts: Some(s),
                failed: false,
            }),
            Err(e) => Err(load_problem(&ctx.dir, &files[0], &e)),
        }
    }

    /// The handler of a tool running `function`, or why there is none.
    pub fn handler(&self, function: &str) -> Result<Arc<dyn ToolHandler>, String> {
        let Some(s) = &self.scripts else {
            return Err("its script did not load (see the problem reported for the script)".into());
        };
        if !s.has_function(function) {
            let names = s.function_names();
            return Err(format!(
                "no function '{function}' in the plugin's scripts{}",
                crate::suggest::did_you_mean(function, &names)
            ));
        }
        // The sandbox's default execution mode keeps script work off the async workers.
        Ok(Arc::new(s.handler(function)))
    }

    /// Tools the scripts registered while loading.
    pub fn registered_tools(&self) -> Vec<(ToolDefinition, Arc<dyn ToolHandler>)> {
        self.scripts
            .as_ref()
            .map(|s| s.registered_tools())
            .unwrap_or_default()
    }

    /// The loaded scripts, if any.
    pub fn scripts(&self) -> Option<&PluginScripts> {
        self.scripts.as_ref()
    }
}
