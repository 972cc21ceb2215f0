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
        drop(store);
        // sled releases its file lock when its last background task lets go of the database,
        // shortly after the handle is dropped: a restarted process would wait the same way.
        let mut attempts = 0;
        loop {
            match SledStore::open(&path) {
                Ok(reopened) => return Arc::new(reopened),
                Err(e) if attempts < 500 && format!("{e:?}").contains("could not acquire lock") => {
                    attempts += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(e) => panic!("reopen sled: {e:?}"),
            }
        }
    }
}

percolator_core::conformance_tests!(SledFactory::default());
percolator_observers::observer_conformance_tests!(SledFactory::default());
