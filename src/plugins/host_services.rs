//! Host services (seed 001 §4.2): functions the engine itself provides, which a tool.json binds
//! by name with `{"type": "service", "function": "code.execute"}` and no `script`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::tools::{ToolDefinition, ToolHandler};

/// What a host service knows about the plugin binding it.
#[derive(Debug, Clone)]
pub struct BindContext {
    /// Plugin name.
    pub plugin: String,
    /// Plugin directory.
    pub dir: PathBuf,
    /// The plugin's resolved config values.
    pub config: Map<String, Value>,
    /// The plugin's `limits:` section as written.
    pub limits: Option<Value>,
    /// The plugin's `processLimits:` section as written.
    pub process_limits: Option<Value>,
}

/// Builds the handler of one tool bound to a host service.
pub type ServiceFactory = Arc<dyn Fn(&BindContext) -> Arc<dyn ToolHandler> + Send + Sync>;

/// Fits a tool definition bound to a service to what this machine offers (for example the
/// languages `code.execute` can run), before it is registered.
pub type DefinitionAdjuster = fn(&mut ToolDefinition);

/// The host services an engine offers, by name.
#[derive(Clone, Default)]
pub struct HostServices {
    map: BTreeMap<String, ServiceFactory>,
    adjusters: BTreeMap<String, DefinitionAdjuster>,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.map.keys()).finish()
    }
}

impl HostServices {
    /// No services.
    pub fn new() -> Self {
        Self::default()
    }

    /// The services every engine provides (`code.execute`, `text.regex_replace`).
    pub fn with_defaults() -> Self {
        let mut s = Self::new();
        super::code_service::register(&mut s);
        super::text_service::register(&mut s);
        s
    }

    /// Adds (or replaces) a service.
    pub fn register(&mut self, name: impl Into<String>, factory: ServiceFactory) {
        self.map.insert(name.into(), factory);
    }

    /// Sets the adjuster of the definitions bound to service `name`.
    pub fn register_adjuster(&mut self, name: impl Into<String>, f: DefinitionAdjuster) {
        self.adjusters.insert(name.into(), f);
    }

    /// Adjusts `def`, bound to service `name`, when the service has an adjuster.
    pub fn adjust(&self, name: &str, def: &mut ToolDefinition) {
        if let Some(f) = self.adjusters.get(name) {
            f(def);
        }
    }

    /// Looks a service up.
    pub fn get(&self, name: &str) -> Option<&ServiceFactory> {
        self.map.get(name)
    }

    /// Names of all services, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.map.keys().map(String::as_str).collect()
    }
}
