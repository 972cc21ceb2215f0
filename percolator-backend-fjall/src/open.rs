//! Opening a store: the fjall database and one keyspace per family with the configured
//! options, then the recovery that rebuilds the in-memory structures from the engine (the lock
//! mirror, the notified cells, the write family's highest timestamp). It runs once per store,
//! apart from the read and write paths, which rely on what it leaves behind.

use std::path::Path;

use bytes::Bytes;
use fjall::config::CompressionPolicy;
use fjall::{CompressionType, Database, KeyspaceCreateOptions, KvSeparationOptions, Readable as _};
use percolator_backend_embedded::{GroupSync, RowLatches};
use percolator_core::backend::key;
use percolator_core::{Family, StoreError};

use crate::lock_mirror::LockMirror;
use crate::notify::cell_of;
use crate::notify_cells::NotifyCells;
use crate::{FjallConfig, FjallStore, MIN_DEFAULT_WORKER_THREADS, MemtableSizes, backend, ts_of};

impl FjallStore {
    /// Opens (or creates) a store at `path` with default settings.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(FjallConfig::new(path.as_ref()))
    }

    /// Opens (or creates) a store.
    pub fn open_with(config: FjallConfig) -> Result<Self, StoreError> {
        let compression = if config.compression {
            CompressionType::Lz4
        } else {
            CompressionType::None
        };
        let mut builder = Database::builder(&config.path)
            .cache_size(config.cache_capacity)
            .max_journaling_size(config.max_journal_size.max(64 * 1024 * 1024))
            .journal_compression(compression);
        let threads = config.worker_threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get().min(4))
                .max(MIN_DEFAULT_WORKER_THREADS)
        });
        builder = builder.worker_threads(threads.max(1));
        let db = builder.open().map_err(|e| backend("open", e))?;
        // fjall created the directory: its canonical path names the data however it was reached.
        let canonical = std::fs::canonicalize(&config.path).map_err(|e| {
            StoreError::backend(format!("canonicalize {}", config.path.display()), e)
        })?;
        let keyspaces = Family::ALL
            .iter()
            .map(|family| {
                db.keyspace(family.name(), || {
                    let options = KeyspaceCreateOptions::default()
                        .data_block_compression_policy(CompressionPolicy::all(compression))
                        .max_memtable_size(
                            config.memtable_sizes.of(*family).max(MemtableSizes::MIN),
                        );
                    match config.blob_threshold {
                        Some(threshold) if *family == Family::Data => {
                            options.with_kv_separation(Some(
                                KvSeparationOptions::default()
                                    .compression(compression)
                                    .separation_threshold(threshold),
                            ))
                        }
                        _ => options,
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| backend("open keyspace", e))?;
        let store = Self {
            db,
            keyspaces,
            group_sync: GroupSync::default(),
            latches: RowLatches::new(),
            notify_cells: NotifyCells::default(),
            coalesce: config.coalesce_notifications,
            locks: LockMirror::default(),
            recent: std::sync::Arc::default(),
            opening_scan: None,
            path: config.path,
            id: format!("fjall:{}", canonical.display()),
        };
        let mut store = store;
        store.load_notify_cells()?;
        store.load_locks()?;
        store.opening_scan = store.scan_write_family();
        Ok(store)
    }

    /// Starts the background scan for the highest timestamp in the write family (see
    /// [`recent_writes`](crate::recent_writes)); until it finishes, write conflicts are checked
    /// in the engine. `None` if no thread could be started (then they always are).
    fn scan_write_family(
        &self,
    ) -> Option<(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<()>,
    )> {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let snapshot = self.db.snapshot();
        let keyspace = self.keyspace(Family::Write).clone();
        let recent = std::sync::Arc::clone(&self.recent);
        let stopped = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("fjall-write-scan".into())
            .spawn(move || {
                let mut highest = 0;
                for (i, guard) in snapshot.iter(&keyspace).enumerate() {
                    if i % 4096 == 0 && stopped.load(Relaxed) {
                        return;
                    }
                    // An engine error: conflicts stay checked in the engine.
                    let Ok((k, _)) = guard.into_inner() else {
                        return;
                    };
                    let at = k.len().saturating_sub(8);
                    match key::decode_ts(&k[at..], at) {
                        Ok(ts) => highest = highest.max(ts),
                        Err(_) => return,
                    }
                }
                recent.opened_at(highest);
            })
            .ok()?;
        Some((stop, thread))
    }

    /// Fills [`Self::locks`] from the lock keyspace.
    fn load_locks(&self) -> Result<(), StoreError> {
        for guard in self.db.snapshot().iter(self.keyspace(Family::Lock)) {
            let (k, v) = guard.into_inner().map_err(|e| backend("open", e))?;
            self.locks.load(k.to_vec(), Bytes::copy_from_slice(&v));
        }
        Ok(())
    }

    /// Fills [`Self::notify_cells`] from the notify keyspace: every live notify key is counted in
    /// its cell.
    fn load_notify_cells(&self) -> Result<(), StoreError> {
        for guard in self.db.snapshot().iter(self.keyspace(Family::Notify)) {
            let k = guard.key().map_err(|e| backend("open", e))?;
            let (cell, row_len) = cell_of(&k)?;
            self.notify_cells.add(cell, row_len, 1, ts_of(&k)?);
        }
        Ok(())
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes fjall reports on disk (journals, tables and blob files).
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db.disk_space().map_err(|e| backend("disk_space", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use percolator_core::{RowMutation, RowStore as _};

    /// Each family's keyspace is created with its own memtable size: notify keys written past
    /// a small notify memtable get flushed, while the data keyspace, given a large one, keeps
    /// the same bytes in memory.
    #[test]
    fn each_family_gets_its_configured_memtable_size() {
        use percolator_core::Mutation;
        let dir = tempfile::tempdir().unwrap();
        let config = FjallConfig::new(dir.path())
            .with_memtable_size(Family::Notify, 0)
            .with_memtable_size(Family::Data, 64 * 1024 * 1024);
        assert_eq!(config.memtable_sizes.of(Family::Notify), 0);
        assert_eq!(
            config.memtable_sizes.of(Family::Lock),
            MemtableSizes::default().lock
        );
        let store = FjallStore::open_with(config).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // 2 000 rows of 200-byte cells in each family, about 440 KB: several memtables of the
        // notify keyspace's 64 KiB (the minimum), a small part of the data keyspace's 64 MiB.
        for chunk in 0..20u32 {
            let batch = (0..100u32)
                .map(|i| RowMutation {
                    table: Bytes::from("t"),
                    row: Bytes::from(format!("row{:05}", chunk * 100 + i)),
                    conditions: vec![],
                    mutations: [Family::Notify, Family::Data]
                        .into_iter()
                        .map(|family| Mutation::Put {
                            family,
                            column: Bytes::from("c"),
                            ts: 7,
                            value: Bytes::from(vec![b'v'; 200]),
                        })
                        .collect(),
                })
                .collect();
            let outcomes = rt.block_on(store.mutate_rows(batch)).unwrap();
            assert!(outcomes.iter().all(|o| o.applied()));
        }
        let flushed = |family: Family| {
            let keyspace = store.keyspace(family);
            keyspace.table_count() + keyspace.sealed_memtable_count()
        };
        // Rotation is requested on write and done by fjall's workers: wait for it (bounded).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while flushed(Family::Notify) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            flushed(Family::Notify) > 0,
            "the notify keyspace never rotated its 64 KiB memtable"
        );
        assert_eq!(flushed(Family::Data), 0, "the data memtable is 64 MiB");
    }
}
