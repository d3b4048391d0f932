//! The bridge to the script sandbox: loads a plugin's Lua/Rhai files once each and builds the
//! handlers of its `service` tools.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::permissions::ResolvedPermissions;
use crate::problem::Problem;
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
    pub permissions: ResolvedPermissions,
    /// `limits:` as written.
    pub limits: Option<Value>,
    /// The manager scripts call tools through.
    pub manager: Arc<ToolManager>,
}

/// A tool a script registered while loading, with the file that registered it.
pub struct ScriptTool {
    /// Its definition (id not yet normalised).
    pub definition: ToolDefinition,
    /// What runs it.
    pub handler: Arc<dyn ToolHandler>,
    /// The script file.
    pub file: PathBuf,
}

/// The loaded scripts of one plugin (kept alive as long as the plugin).
pub struct ScriptSet {
    ctx: ScriptContext,
    loaded: HashMap<PathBuf, Result<(), Problem>>,
}

impl ScriptSet {
    /// No script loaded yet.
    pub fn new(ctx: ScriptContext) -> Self {
        ScriptSet {
            ctx,
            loaded: HashMap::new(),
        }
    }

    /// Loads `file` (relative to the plugin directory) if not loaded yet and returns the tools
    /// it registered at load; a syntax or load-time error is a problem at its line.
    pub fn load(&mut self, file: &Path) -> Result<Vec<ScriptTool>, Problem> {
        let path = self.ctx.dir.join(file);
        if let Some(r) = self.loaded.get(&path) {
            return r.clone().map(|_| Vec::new());
        }
        let r: Result<(), Problem> = Err(Problem::new(
            &path,
            "scripts need the script sandbox, which this build lacks",
        ));
        self.loaded.insert(path, r.clone());
        r.map(|_| Vec::new())
    }

    /// The handler of a tool running `function` of `file`.
    pub fn handler(
        &mut self,
        file: &Path,
        function: &str,
    ) -> Result<Arc<dyn ToolHandler>, Problem> {
        self.load(file)?;
        let _ = function;
        Err(Problem::new(
            self.ctx.dir.join(file),
            "scripts need the script sandbox, which this build lacks",
        ))
    }
}
