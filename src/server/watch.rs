//! Hot reload: watch `plugins/`, `workflows/`, `config/` and `scripts/` (and `tavern.toml`,
//! `world.json`) under the home, rebuild the whole engine after a burst of changes, and swap
//! it in. Nothing else under the home counts: the server's own `.tavern/` state, a log
//! redirected into the home, an editor's files beside `tavern.toml` never reload.
//!
//! A rebuilt engine that fails to build, or that has load problems the running one did not
//! have, is not swapped in: the old one keeps serving and the problems are logged. Calls in
//! flight keep the engine they started on (see [`Served::swap`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use super::Served;
use crate::Engine;

/// The directories a reload watches, relative to the home.
pub const WATCHED_DIRS: [&str; 4] = ["plugins", "workflows", "config", "scripts"];

/// The files at the top of the home a reload watches.
pub const WATCHED_FILES: [&str; 2] = ["tavern.toml", "world.json"];

/// Whether a change at `path` (under `home`) is one a reload is for.
pub fn is_watched(home: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(home) else {
        return false;
    };
    let mut parts = rel.components();
    let Some(first) = parts.next() else {
        return false;
    };
    let first = first.as_os_str();
    let in_dir = WATCHED_DIRS.iter().any(|d| first == *d);
    let top_file = parts.next().is_none() && WATCHED_FILES.iter().any(|f| first == *f);
    in_dir || top_file
}

/// How long the watcher waits for a burst of file events to end before rebuilding.
pub const SETTLE: Duration = Duration::from_millis(200);

/// What a reload attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new engine is in service.
    Swapped,
    /// The new engine was refused; the old one serves on. The reasons, one per line.
    Kept(Vec<String>),
}

/// Keeps the watcher alive; dropping it stops watching.
pub struct WatchHandle {
    _watcher: Arc<std::sync::Mutex<notify::RecommendedWatcher>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Swaps a rebuilt engine in unless it is worse than the running one (it failed to build,
/// or it has load problems the running one does not have).
pub async fn reload(served: &Served, built: Result<Engine, String>) -> ReloadOutcome {
    let outcome = try_reload(served, built).await;
    served.note_reload(match &outcome {
        ReloadOutcome::Swapped => None,
        ReloadOutcome::Kept(why) => Some(why.clone()),
    });
    outcome
}

async fn try_reload(served: &Served, built: Result<Engine, String>) -> ReloadOutcome {
    let new = match built {
        Ok(e) => e,
        Err(why) => return ReloadOutcome::Kept(vec![why]),
    };
    let old: HashSet<String> = served
        .engine()
        .problems()
        .iter()
        .map(|p| p.to_string())
        .collect();
    let fresh: Vec<String> = new
        .problems()
        .iter()
        .map(|p| p.to_string())
        .filter(|p| !old.contains(p))
        .collect();
    if !fresh.is_empty() {
        return ReloadOutcome::Kept(fresh);
    }
    served.swap(new).await;
    ReloadOutcome::Swapped
}

fn relevant(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
    )
}

/// Starts watching `home`; every settled burst of changes runs [`reload`] and logs the
/// outcome to stderr. `build` gets the engine in service (to keep its live world,
/// `EngineBuilder::keep_world_of`).
pub fn watch<F>(served: Arc<Served>, home: &Path, build: F) -> notify::Result<WatchHandle>
where
    F: Fn(&Engine) -> Result<Engine, String> + Send + Sync + 'static,
{
    // Paths compared against the home must be spelled alike.
    let home = home.canonicalize()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PathBuf>();
    let filter_home = home.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            if relevant(&ev.kind) {
                for p in ev.paths {
                    if is_watched(&filter_home, &p) {
                        let _ = tx.send(p);
                    }
                }
            }
        }
    })?;
    for d in WATCHED_DIRS {
        let dir = home.join(d);
        if dir.is_dir() {
            watcher.watch(&dir, RecursiveMode::Recursive)?;
        }
    }
    // The home itself (not recursive): its watched files, and watched directories created
    // later (then watched whole from the next reload on, below).
    watcher.watch(&home, RecursiveMode::NonRecursive)?;
    let watcher = Arc::new(std::sync::Mutex::new(watcher));
    let task_watcher = watcher.clone();
    let build = Arc::new(build);
    let task = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut changed = vec![first];
            // Let the burst settle (editors write several events per save).
            loop {
                match tokio::time::timeout(SETTLE, rx.recv()).await {
                    Ok(Some(p)) => changed.push(p),
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            // A watched directory that appeared: watch inside it too.
            for d in WATCHED_DIRS {
                let dir = home.join(d);
                if changed.contains(&dir) && dir.is_dir() {
                    let mut w = task_watcher.lock().unwrap_or_else(|p| p.into_inner());
                    if let Err(e) = w.watch(&dir, RecursiveMode::Recursive) {
                        tracing::warn!("cannot watch {}: {e}", dir.display());
                    }
                }
            }
            let b = build.clone();
            let previous = served.engine();
            let built = tokio::task::spawn_blocking(move || b(&previous))
                .await
                .unwrap_or_else(|e| Err(format!("the rebuild panicked: {e}")));
            let outcome = reload(&served, built).await;
            match outcome {
                ReloadOutcome::Swapped => tracing::info!(
                    "reloaded after {} change(s) (first: {}); tools: {}",
                    changed.len(),
                    crate::problem::shown_path(&changed[0], &home),
                    served.engine().tools().len()
                ),
                ReloadOutcome::Kept(why) => tracing::warn!(
                    "reload refused, the previous version keeps serving: {}",
                    why.join("; ")
                ),
            }
        }
    });
    Ok(WatchHandle {
        _watcher: watcher,
        task,
    })
}
