//! The process-wide set of named policies: read once (explicitly or lazily
//! from the environment), swapped whole on reload.
//!
//! Readers take an `arc-swap` snapshot (no lock); a call site compares the
//! snapshot's generation with the one it built its limiter for. Loads and
//! reloads are serialised by one mutex, which no call ever takes.

use super::{LoadError, PolicySet, POLICIES_FILE_VAR, POLICIES_VAR};
use arc_swap::{ArcSwap, Guard};
use once_cell::sync::{Lazy, OnceCell};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Where the current set was read from; `reload` reads it again.
#[derive(Debug, Clone)]
pub(crate) enum SetSource {
    File(PathBuf),
    Text { origin: String, text: String },
    Env,
}

/// One installed set.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// Distinct for every install: a site's limiter is current while this matches.
    pub generation: u64,
    pub set: PolicySet,
    /// Why a name may be missing beyond "not in the set": nothing was
    /// configured, or the lazy load from the environment failed.
    pub note: Option<String>,
}

struct PolicyRegistry {
    current: ArcSwap<Loaded>,
    source: Mutex<Option<SetSource>>,
    lazy: OnceCell<()>,
}

static REGISTRY: Lazy<PolicyRegistry> = Lazy::new(|| PolicyRegistry {
    current: ArcSwap::from_pointee(Loaded { generation: 0, set: PolicySet::default(), note: None }),
    source: Mutex::new(None),
    lazy: OnceCell::new(),
});

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The current set, loaded from the environment on first use when nothing
/// was loaded explicitly before.
pub(crate) fn current() -> Guard<Arc<Loaded>> {
    REGISTRY.lazy.get_or_init(load_lazily);
    REGISTRY.current.load()
}

fn install(set: PolicySet, note: Option<String>) {
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
    REGISTRY.current.store(Arc::new(Loaded { generation, set, note }));
}

/// Reads `source`, makes it the one `reload` reads, and installs what it
/// holds; on failure the installed set stays as it was.
pub(crate) fn load(source: SetSource) -> Result<usize, LoadError> {
    // An explicit load wins over the lazy one from the environment.
    REGISTRY.lazy.get_or_init(|| ());
    let mut slot = REGISTRY.source.lock().unwrap_or_else(PoisonError::into_inner);
    *slot = Some(source.clone());
    read_and_install(&source)
}

/// Reads the current source again (the environment when nothing was loaded).
pub(crate) fn reload() -> Result<usize, LoadError> {
    REGISTRY.lazy.get_or_init(|| ());
    let mut slot = REGISTRY.source.lock().unwrap_or_else(PoisonError::into_inner);
    let source = slot.get_or_insert(SetSource::Env).clone();
    read_and_install(&source)
}

fn read_and_install(source: &SetSource) -> Result<usize, LoadError> {
    let (set, note) = read(source)?;
    let count = set.len();
    tracing::info!(target: "redlimit", policies = count, origin = %set.origin(), "rate limit policies loaded");
    install(set, note);
    Ok(count)
}

/// The set a source holds, and a note when it holds nothing by design.
pub(crate) fn read(source: &SetSource) -> Result<(PolicySet, Option<String>), LoadError> {
    match source {
        SetSource::File(path) => PolicySet::read(path).map(|set| (set, None)),
        SetSource::Text { origin, text } => PolicySet::parse(origin, text).map(|set| (set, None)),
        SetSource::Env => {
            let file = std::env::var_os(POLICIES_FILE_VAR).filter(|v| !v.is_empty());
            let inline = std::env::var(POLICIES_VAR).ok().filter(|v| !v.trim().is_empty());
            match (file, inline) {
                (Some(_), Some(_)) => Err(LoadError::new(vec![format!(
                    "{POLICIES_FILE_VAR} and {POLICIES_VAR} are both set: set one (a path to a TOML file, or the TOML itself)"
                )])),
                (Some(path), None) => PolicySet::read(PathBuf::from(path)).map(|set| (set, None)),
                (None, Some(text)) => PolicySet::parse(POLICIES_VAR, &text).map(|set| (set, None)),
                (None, None) => Ok((
                    PolicySet::default(),
                    Some(format!("no policies are configured: neither {POLICIES_FILE_VAR} nor {POLICIES_VAR} is set, and `redlimit::policies::load` was not called")),
                )),
            }
        }
    }
}

/// First use without an explicit load: the environment decides. A failure is
/// logged once with every problem; sites then report it on each call.
fn load_lazily() {
    let mut slot = REGISTRY.source.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.is_some() {
        return;
    }
    *slot = Some(SetSource::Env);
    match read(&SetSource::Env) {
        Ok((set, note)) => {
            if !set.is_empty() {
                tracing::info!(target: "redlimit", policies = set.len(), origin = %set.origin(), "rate limit policies loaded");
            }
            install(set, note);
        }
        Err(error) => {
            tracing::error!(target: "redlimit", "rate limit policies could not be loaded; calls naming a policy are settled by their on_error:\n{error}");
            install(PolicySet::default(), Some(format!("the policies could not be loaded: {error}")));
        }
    }
}
