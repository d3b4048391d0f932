//! The plugins' side of process tools: a tool's declared permissions, environment and
//! limits (plugin.yaml `processLimits:`, the tool's `implementation.limits`, the host's
//! `process.*` settings) turned into its [`Confinement`](crate::sandbox::confine::Confinement).

use std::sync::Arc;

use serde_json::Value;

use super::host_services::BindContext;
use super::permissions::Permissions;
use crate::config::Settings;
use crate::sandbox::confine::{
    for_tool, unconfined_hint, PartialProcessLimits, ProcessLimits, ALLOW_UNCONFINED,
};
use crate::sandbox::process::ProcessSpec;

/// Confines a plugin's process tool `spec`: the plugin's roots, network permission and
/// environment, its limits lowered from the host's caps (`caps`, then `process.*`
/// settings) by `processLimits:` and the tool's own `limits`. On refusal, the message and
/// its hint.
pub fn confine_spec(
    spec: &mut ProcessSpec,
    settings: &Settings,
    caps: &ProcessLimits,
    bind: &BindContext,
    perms: &Permissions,
    tool_limits: Option<&Value>,
) -> Result<(), (String, String)> {
    let fix_settings = "fix the setting in tavern.toml".to_string();
    let caps = caps
        .with_settings(settings)
        .map_err(|e| (e, fix_settings))?;
    let plugin = PartialProcessLimits::parse(bind.process_limits.as_ref()).map_err(|e| {
        (
            format!("cannot run: plugin.yaml processLimits: {e}"),
            "known limits: memoryMb, cpuSeconds, processes, openFiles, outputBytes".to_string(),
        )
    })?;
    let tool = PartialProcessLimits::parse(tool_limits).map_err(|e| {
        (
            format!("cannot run: implementation.limits: {e}"),
            "known limits: memoryMb, cpuSeconds, processes, openFiles, outputBytes".to_string(),
        )
    })?;
    let allow_unconfined = settings.get(ALLOW_UNCONFINED) == Some(&Value::Bool(true));
    let network = perms.network
        || settings
            .get("process.network_plugins")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(bind.plugin.as_str())));
    for name in &perms.env {
        if let Ok(v) = std::env::var(name) {
            spec.env.insert(name.clone(), v);
        }
    }
    let c = for_tool(
        &bind.dir,
        &perms.fs_read,
        &perms.fs_write,
        network,
        &caps,
        &plugin,
        &tool,
        allow_unconfined,
    )
    .map_err(|e| (e, unconfined_hint()))?;
    spec.output_cap = usize::try_from(c.limits.output_bytes).unwrap_or(usize::MAX);
    spec.confine = Some(Arc::new(c));
    Ok(())
}
