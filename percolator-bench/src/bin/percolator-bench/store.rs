//! Opening the store a benchmark runs on (through `percolator-registry`), and writing reports.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use percolator_core::{DynStore, TimestampOracle};
use percolator_registry::{OpenOptions, StoreSpec};

/// Errors of the benchmark driver.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A store opened for one benchmark run.
pub struct Opened {
    store: Arc<DynStore>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    dir: Option<PathBuf>,
}

impl Opened {
    /// Opens `spec` empty: an embedded database directory is removed first, and a cluster
    /// store gets a namespace of its own (`namespace` and the process id).
    pub async fn fresh(spec: &StoreSpec, namespace: &str) -> Result<Self, BoxError> {
        let dir = spec.dir().map(Path::to_path_buf);
        if let Some(dir) = &dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        let options =
            OpenOptions::default().with_namespace(format!("{namespace}-{}", std::process::id()));
        let opened = percolator_registry::open(spec, &options).await?;
        Ok(Self {
            store: Arc::new(opened.store),
            oracle: opened.oracle,
            dir,
        })
    }

    /// The store.
    pub fn store(&self) -> Arc<DynStore> {
        Arc::clone(&self.store)
    }

    /// The oracle the store's cluster imposes (PD's TSO on TiKV), if any.
    pub fn oracle(&self) -> Option<Arc<dyn TimestampOracle>> {
        self.oracle.clone()
    }

    /// The embedded database's directory, if the store has one.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Drops the store and keeps its data (the caller removes it).
    pub fn keep(self) {
        drop(self.store);
    }

    /// Drops the store and removes an embedded database's directory.
    pub fn close(self) {
        let Self { store, dir, .. } = self;
        drop(store);
        if let Some(dir) = dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Bytes of the files under `path` (0 for a missing path).
pub fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return std::fs::metadata(path).map_or(0, |m| m.len());
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&entry.path()),
            _ => entry.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// Writes `value` as pretty JSON to `path` (creating its directory), if a path was given.
pub fn write_json(path: Option<&PathBuf>, value: &impl serde::Serialize) -> Result<(), BoxError> {
    if let Some(path) = path {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_vec_pretty(value)?)?;
    }
    Ok(())
}

/// Turns transparent huge pages off for this process (Linux), as the `percolator` binary does,
/// so that the experiments measure the same allocator behaviour (the kernel zeroes a whole
/// 2 MiB page at its first touch). A failure only leaves huge pages on.
pub fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_thp_disable(true);
}
