//! [`FjallFactory`]: the [`StoreFactory`] that runs the shared conformance suite
//! (`percolator_core::conformance`) against [`FjallStore`] in temporary directories (feature
//! `conformance`).
//!
//! It lives in the crate, not in its test target, so that other suites (the observers') can run
//! against the same backend with the same factory. Like the suite's cases, it panics when it
//! cannot open a store: [`StoreFactory`] has no error path, and a failure here is a failed test.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use percolator_core::conformance::StoreFactory;

use crate::{FjallConfig, FjallStore};

/// Opens each store in a fresh temporary directory, removed when the factory is dropped.
///
/// The stores use a small block cache and two fjall worker threads: the suite opens many of
/// them at once.
///
/// ```text
/// percolator_core::conformance_tests!(percolator_backend_fjall::conformance::FjallFactory::default());
/// ```
#[derive(Debug, Default)]
pub struct FjallFactory {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

fn config(path: impl Into<PathBuf>) -> FjallConfig {
    FjallConfig::new(path)
        .with_cache_capacity(8 << 20)
        .with_worker_threads(Some(2))
}

#[async_trait]
impl StoreFactory for FjallFactory {
    type Store = FjallStore;

    async fn open(&self) -> Arc<FjallStore> {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FjallStore::open_with(config(dir.path())).expect("open fjall");
        self.dirs.lock().push(dir);
        Arc::new(store)
    }

    async fn restart(&self, store: Arc<FjallStore>) -> Arc<FjallStore> {
        let path: PathBuf = store.path().to_path_buf();
        let store = Arc::try_unwrap(store).expect("restart: the store is still shared");
        // Dropping the database stops fjall's workers and releases its file lock; retry a
        // little in case a background thread still holds the last handle.
        drop(store);
        let mut attempts = 0;
        loop {
            match FjallStore::open_with(config(&path)) {
                Ok(reopened) => return Arc::new(reopened),
                Err(e) if attempts < 500 && format!("{e:?}").contains("Locked") => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => panic!("reopen fjall: {e:?}"),
            }
        }
    }
}
