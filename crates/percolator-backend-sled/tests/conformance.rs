//! The shared conformance suite, run against `SledStore` in temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use percolator_backend_sled::SledStore;
use percolator_core::conformance::StoreFactory;

#[derive(Default)]
struct SledFactory {
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
        drop(store); // closes the database and releases its file lock
        Arc::new(SledStore::open(&path).expect("reopen sled"))
    }
}

percolator_core::conformance_tests!(SledFactory::default());
