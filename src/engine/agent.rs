//! The engine builds agents: [`Engine::agent`] and [`AgentRuntime::builder`] hand the
//! engine's parts (home, settings, tools, workflows, hooks) to the agent module, which knows
//! no `Engine` (its loop runs calls through `crate::request`, below both).

use crate::agent::{
    AgentError, AgentProfile, AgentRuntime, AgentRuntimeBuilder, EngineParts, ManualStyle,
};
use crate::Engine;

impl AgentRuntime {
    /// Starts configuring a runtime for `profile` on `engine`.
    pub fn builder(engine: &Engine, profile: AgentProfile) -> AgentRuntimeBuilder<'_> {
        AgentRuntime::builder_on(engine.parts(), profile)
    }
}

impl Engine {
    /// What an agent runtime takes from the engine.
    fn parts(&self) -> EngineParts<'_> {
        EngineParts {
            home: self.home(),
            settings: self.settings(),
            tools: self.tools(),
            workflows: self.workflows(),
            hooks: self.hooks(),
        }
    }

    /// Starts an agent from `<home>/agents/<target>.json` or a profile file.
    pub fn agent(&self, target: &str) -> Result<AgentRuntimeBuilder<'_>, AgentError> {
        let profile = AgentProfile::load(self.home(), target)?;
        // The engine's live world, unless the caller sets another.
        Ok(AgentRuntime::builder(self, profile).world_state(self.world_state()))
    }

    /// The manual of an agent's inventory in `style`.
    pub fn agent_manual(&self, target: &str, style: ManualStyle) -> Result<String, AgentError> {
        let rt = self.agent(target)?.build()?;
        Ok(rt.manual_in(style))
    }
}
