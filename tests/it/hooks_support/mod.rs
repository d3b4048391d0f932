//! Shared by the `hooks_*` tests: homes with plugins written into a temp directory.
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;
use tavern::internal::tools::{Caller, ToolError};
use tavern::Engine;

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A plugin `Echo` with `Echo:echo` (returns its `text`) and `Echo:count` (returns how often
/// it ran), in Lua.
pub const ECHO_YAML: &str = "name: Echo\n";
pub const ECHO_LUA: &str = r#"
local runs = 0
api.tools.register{ id = "echo", description = "echo",
  parameters = {type = "object", properties = {text = {type = "string"}}, required = {"text"}},
  handler = function(args) runs = runs + 1; return args.text end }
api.tools.register{ id = "count", description = "runs so far",
  handler = function() return runs end }
"#;

/// A home with `Echo` and the given extra files (path relative to the home → text).
pub fn home(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("plugins/Echo/plugin.yaml"), ECHO_YAML);
    write(&d.path().join("plugins/Echo/main.lua"), ECHO_LUA);
    for (p, t) in files {
        write(&d.path().join(p), t);
    }
    d
}

pub fn engine(home: &Path) -> Engine {
    Engine::builder().home(home).build().unwrap()
}

/// An engine that must have loaded without problems.
pub fn clean_engine(home: &Path) -> Engine {
    let e = engine(home);
    assert!(e.problems().is_empty(), "problems: {:?}", e.problems());
    e
}

pub async fn call(e: &Engine, id: &str, args: Value) -> Result<Value, ToolError> {
    e.tools().invoke(id, args, Caller::Cli).await
}

/// A plugin manifest with these hook points and extra permission lines.
pub fn manifest(name: &str, hooks: &[&str], extra: &str) -> String {
    let mut s = format!(
        "name: {name}\npermissions:\n  hooks: [{}]\n",
        hooks
            .iter()
            .map(|h| format!("\"{h}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    s.push_str(extra);
    s
}
