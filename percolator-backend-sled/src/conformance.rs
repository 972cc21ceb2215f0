//! [`SledFactory`]: the [`StoreFactory`] that runs the shared conformance suite
//! (`percolator_core::conformance`) against [`SledStore`] in temporary directories (feature
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

use crate::SledStore;

/// Opens each store in a fresh temporary directory, removed when the factory is dropped.
///
/// ```text
/// percolator_core::conformance_tests!(percolator_backend_sled::conformance::SledFactory::default());
/// ```
#[derive(Debug, Default)]
pub struct SledFactory {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

#[async_trait]
impl StoreFactory for SledFactory {
    type Store = SledStore;

    async fn open(&self) -> Arc<SledStore> {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SledStore::open(dir.path()).expect("open sled");
        self.dirs.lock().push(dir);
        Arc::new(store)
    }

    async fn restart(&self, store: Arc<SledStore>) -> Arc<SledStore> {
        let path: PathBuf = store.path().to_path_buf();
        let store = Arc::try_unwrap(store).expect("restart: the store is still shared");
        drop(store);
        // sled releases its file lock when its last background task lets go of the database,
        // shortly after the handle is dropped: a restarted process would wait the same way.
        let mut attempts = 0;
        loop {
            match SledStore::open(&path) {
                Ok(reopened) => return Arc::new(reopened),
                Err(e) if attempts < 500 && format!("{e:?}").contains("could not acquire lock") => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => panic!("reopen sled: {e:?}"),
            }
        }
    }
}
