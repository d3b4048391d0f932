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
    /// Keep jobs, MCP tasks and sessions, the audit stream and scripts' api.store in this
    /// store, shared by every replica of the home (redis://HOST:PORT[/DB]; default: the
    /// setting store.url, else memory).
    #[arg(long, value_name = "URL", env = "TAVERN_STORE")]
    pub store: Option<String>,
    /// The model of served agents and `llm:Chat` nodes: mcp-client (the calling MCP
    /// client's own, through sampling), openai:BASE_URL, or scripted:FILE (from the home);
    /// the same as --set llm.base_url=….
    #[arg(long, value_name = "MODEL")]
    pub llm: Option<String>,
}

/// The limits on HTTP request bodies of `tavern serve` (besides `--max-body-bytes`).
#[derive(clap::Args, Clone)]
pub struct BodyFlags {
    /// Seconds a request body may take to arrive whole, from when its head arrived (the
    /// connection is closed past it).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub body_timeout_secs: u64,
    /// Fewest bytes a second a request body must arrive at, over every 5 s (0 = no
    /// minimum; the connection is closed below it).
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub min_body_rate: u64,
    /// Most bytes of request bodies held at once across all connections (past it: 503
    /// body_budget_exceeded; default 256 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_bodies_bytes: usize,
}

impl BodyFlags {
    /// The body limits these flags give.
    pub fn limits(&self) -> tavern::internal::server::conn::BodyLimits {
        tavern::internal::server::conn::BodyLimits {
            timeout: Duration::from_secs(self.body_timeout_secs.max(1)),
            min_rate: self.min_body_rate,
            max_held: self.max_bodies_bytes,
        }
    }
}

/// Where a served engine keeps shared state: the Redis store when one is set (then the
/// live world is kept there too), and what scripts' `api.store` uses (that store, or one
/// memory store every reload shares).
pub struct Store {
    /// The Redis store (`--store`, `TAVERN_STORE` or the setting `store.url`).
    pub redis: Option<tavern::internal::store::redis::RedisStore>,
    /// What `api.store` keeps.
    pub kv: Arc<dyn tavern::KvStore>,
}

impl Store {
    /// `b` keeping scripts' `api.store` here, and with a Redis store the live world too
    /// (`tavern:world:home`, shared by every replica).
    pub fn configure(&self, b: tavern::EngineBuilder) -> tavern::EngineBuilder {
        let b = b.kv_store(self.kv.clone());
        if self.redis.is_some() {
            b.world_in_store(tavern::internal::store::SERVED_WORLD)
        } else {
            b
        }
    }
}

impl Common {
    /// Connects to the store the flags, the environment or the setting `store.url` name;
    /// one that cannot be reached is an error (printed), never a silent fallback.
    pub async fn open_store(&self, globals: &Globals) -> Result<Store, u8> {
        let url = self
            .store
            .clone()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| setting_store_url(globals));
        let Some(url) = url else {
            return Ok(Store {
                redis: None,
                kv: Arc::new(tavern::MemoryStore::new()),
            });
        };
        match tavern::internal::store::redis::RedisStore::connect(url.trim()).await {
            Ok(r) => Ok(Store {
                kv: Arc::new(r.clone()),
                redis: Some(r),
            }),
            Err(e) => {
                // At start nothing is retried: tavern stops here.
                match e {
                    tavern::StoreError::Unavailable(why) => {
                        eprintln!("tavern: --store: cannot reach the shared store ({why})")
                    }
                    other => eprintln!("tavern: --store: {other}"),
                }
                eprintln!("  start Redis there, fix the URL, or leave --store out to keep state in memory");
                Err(super::FAILED)
            }
        }
    }
}

/// The setting `store.url` (`tavern.toml`, `TAVERN_SET`, `--set`), if any.
fn setting_store_url(globals: &Globals) -> Option<String> {
    let mut s = tavern::internal::config::Settings::load(&globals.home).ok()?;
    let _ = s.apply_env();
    for o in &globals.sets {
        let _ = s.set_override(o);
    }
    s.get("store.url")?.as_str().map(str::to_string)
}

impl Common {
    /// `globals` with `--llm` as one more `--set llm.base_url=…` (last, so it wins); a value
    /// that names no model is a usage error (printed).
    pub fn globals(&self, globals: &Globals) -> Result<Globals, u8> {
        let mut sets = globals.sets.clone();
        if let Some(l) = self.llm.as_deref().map(str::trim) {
            let base = match l {
                "mcp-client" => l.to_string(),
                _ => match tavern::internal::agent::llm::LlmSettings::from_flags(Some(l), None) {
                    Ok(s) if s.base_url.is_some() => s.base_url.unwrap_or_default(),
                    _ => {
                        eprintln!("tavern: --llm {l}: not a model; use mcp-client (the calling MCP client's model), openai:BASE_URL or scripted:FILE");
                        return Err(super::USAGE);
                    }
                },
            };
            sets.push(format!("llm.base_url={base}"));
        }
        Ok(Globals {
            home: globals.home.clone(),
            sets,
            audit: globals.audit.clone(),
        })
    }

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

/// Builds engines for `--home`/`--set` without printing (reloads report through the log),
/// each keeping the live world of the engine it replaces unless `world.json` changed; with
/// a shared store (`shared_world`) the world is the store's.
pub fn factory(
    globals: &Globals,
    kv: Arc<dyn tavern::KvStore>,
    shared_world: bool,
) -> impl Fn(&Engine) -> Result<Engine, String> + Send + Sync + 'static {
    let home: PathBuf = globals.home.clone();
    let sets = globals.sets.clone();
    move |previous: &Engine| {
        // Mods' log lines stay `tracing` events (the server's log, `TAVERN_LOG`).
        let mut b = Engine::builder()
            .home(&home)
            .kv_store(kv.clone())
            .log_to_stderr(false)
            .keep_world_of(previous);
        if shared_world {
            b = b.world_in_store(tavern::internal::store::SERVED_WORLD);
        }
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
    kv: Arc<dyn tavern::KvStore>,
    shared_world: bool,
) -> Option<WatchHandle> {
    if !common.watch {
        return None;
    }
    match watch(
        served.clone(),
        &globals.home,
        factory(globals, kv, shared_world),
    ) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("tavern: cannot watch {}: {e}", globals.home.display());
            None
        }
    }
}
