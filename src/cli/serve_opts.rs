//! Options `tavern serve` and `tavern mcp` share, and the engine factory reloads use.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tavern::internal::server::watch::{watch, WatchHandle};
use tavern::internal::server::{ServeOptions, Served};
use tavern::Engine;

use super::Globals;

/// Limits and reload switches of a served engine.
#[derive(clap::Args, Clone)]
pub struct Common {
    /// Watch plugins/, workflows/, config/, scripts/, tavern.toml and world.json; reload on change.
    #[arg(long)]
    pub watch: bool,
    /// Wall-clock limit of one tool call in milliseconds (0 = none).
    #[arg(long, value_name = "MS", default_value_t = 300_000)]
    pub call_timeout_ms: u64,
    /// Largest arguments object of one call, in bytes of JSON.
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    pub max_args_bytes: usize,
    /// Tools per tools/list page.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub page_size: usize,
}

impl Common {
    /// The server options these flags give (HTTP-only ones at their defaults).
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            max_args_bytes: self.max_args_bytes,
            call_timeout: (self.call_timeout_ms > 0)
                .then(|| Duration::from_millis(self.call_timeout_ms)),
            page_size: self.page_size.max(1),
            ..ServeOptions::default()
        }
    }
}

/// Builds engines for `--home`/`--set` without printing (reloads report through the log).
pub fn factory(globals: &Globals) -> impl Fn() -> Result<Engine, String> + Send + Sync + 'static {
    let home: PathBuf = globals.home.clone();
    let sets = globals.sets.clone();
    move || {
        let mut b = Engine::builder().home(&home);
        for s in &sets {
            b = b.set(s.clone());
        }
        b.build().map_err(|e| e.to_string())
    }
}

/// Starts the watcher when `--watch` is on; prints why it could not start otherwise.
pub fn start_watch(
    globals: &Globals,
    common: &Common,
    served: &Arc<Served>,
) -> Option<WatchHandle> {
    if !common.watch {
        return None;
    }
    match watch(served.clone(), &globals.home, factory(globals)) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("tavern: cannot watch {}: {e}", globals.home.display());
            None
        }
    }
}
