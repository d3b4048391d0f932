//! Per-tool caller policy: which kinds of caller may run a tool.

use super::Caller;

/// Which kinds of caller may call a tool. The default allows everyone.
///
/// Callers map to three kinds: **host** ([`Caller::Host`], [`Caller::Cli`]), **model**
/// ([`Caller::Model`], [`Caller::Remote`]: text from outside the process) and **plugin**
/// ([`Caller::Plugin`], [`Caller::Workflow`]: code loaded from the home directory).
///
/// ```
/// use tavern::CallerPolicy;
/// let host_only = CallerPolicy::HOST_ONLY;
/// assert!(host_only.allows(&tavern::Caller::Host));
/// assert!(!host_only.allows(&tavern::Caller::Model(None)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerPolicy {
    /// The host program (and the CLI).
    pub host: bool,
    /// Models and remote clients.
    pub model: bool,
    /// Plugin scripts and workflows.
    pub plugin: bool,
}

impl Default for CallerPolicy {
    fn default() -> Self {
        CallerPolicy::ANY
    }
}

impl CallerPolicy {
    /// Every caller.
    pub const ANY: CallerPolicy = CallerPolicy {
        host: true,
        model: true,
        plugin: true,
    };
    /// Only the host (and the CLI).
    pub const HOST_ONLY: CallerPolicy = CallerPolicy {
        host: true,
        model: false,
        plugin: false,
    };
    /// The host and plugins, not models.
    pub const NO_MODEL: CallerPolicy = CallerPolicy {
        host: true,
        model: false,
        plugin: true,
    };

    /// Whether `caller` may call the tool.
    pub fn allows(&self, caller: &Caller) -> bool {
        match caller {
            Caller::Host | Caller::Cli => self.host,
            Caller::Model(_) | Caller::Remote(_) => self.model,
            Caller::Plugin(_) | Caller::Workflow(_) => self.plugin,
        }
    }

    /// The allowed kinds as text (`host, plugin`), for error messages.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if self.host {
            v.push("host");
        }
        if self.model {
            v.push("model");
        }
        if self.plugin {
            v.push("plugin");
        }
        if v.is_empty() {
            "no caller".into()
        } else {
            v.join(", ")
        }
    }
}
