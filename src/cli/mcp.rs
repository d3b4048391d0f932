//! `tavern mcp [--watch]`: serve the engine's tools over MCP on stdin/stdout.

use tavern::internal::server::{mcp::serve_stdio, Served};

use super::serve_opts::{start_watch, Common};
use super::{Globals, FAILED, OK};

/// Serve the tools over MCP on stdin/stdout (logs on stderr).
#[derive(clap::Args)]
pub struct Args {
    /// Limits and reload.
    #[command(flatten)]
    pub common: Common,
}

/// Runs `tavern mcp`.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    // `--llm` is one more `--set` (reloads keep it).
    let globals = &match args.common.globals(globals) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let store = match args.common.open_store(globals).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let shared_world = store.redis.is_some();
    let engine = match globals.engine_with(|b| store.configure(b)) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let served = Served::new(engine, args.common.options());
    if let Some(redis) = store.redis {
        if let Err(e) = tavern::internal::server::shared::attach(&served, redis).await {
            eprintln!("tavern: --store: {e}");
            return FAILED;
        }
    }
    let _watch = start_watch(globals, &args.common, &served, store.kv, shared_world);
    match serve_stdio(served).await {
        Ok(()) => OK,
        Err(e) => {
            eprintln!("tavern: MCP over stdio stopped: {e}");
            FAILED
        }
    }
}
