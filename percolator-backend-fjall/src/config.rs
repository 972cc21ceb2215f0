//! How to open a [`FjallStore`](crate::FjallStore): [`FjallConfig`] and its defaults, the
//! memtable size of each family's keyspace, and the store's limits. The knobs and the reasons
//! for their defaults read in one place, apart from the code that opens and runs the store.

use std::path::PathBuf;

use percolator_core::{Family, StoreLimits};

/// The limits of [`FjallStore`](crate::FjallStore) (the sled backend's: both fit in fjall's
/// 64 KiB keys and 4 GiB values).
pub const FJALL_LIMITS: StoreLimits = StoreLimits::new(16 * 1024, 16 * 1024 * 1024, 100_000)
    .with_persistent(true)
    .with_durable_after_sync(true)
    .with_tracks_snapshot_reads(true)
    .with_max_atomic_rows(LATCHED_SLICE_ROWS)
    .with_prefers_point_reads(true);

/// The fewest flush and compaction threads [`FjallConfig::worker_threads`] `None` gives.
pub const MIN_DEFAULT_WORKER_THREADS: usize = 3;

/// The most rows one write batch of a large distinct-row mutation covers (see
/// [`FjallStore::mutate_rows`](crate::FjallStore::mutate_rows)).
pub(crate) const LATCHED_SLICE_ROWS: usize = 512;

/// How to open a [`FjallStore`](crate::FjallStore).
///
/// `#[non_exhaustive]` so that options can be added: start from [`FjallConfig::new`] and change
/// what you need with the `with_*` setters. [`Self::compression`], [`Self::blob_threshold`] and
/// [`Self::memtable_sizes`] are fixed when a database is created (fjall stores them with each
/// keyspace); reopening an existing database keeps the ones it was created with.
///
/// ```
/// # use percolator_backend_fjall::FjallConfig;
/// let config = FjallConfig::new("/tmp/db")
///     .with_cache_capacity(64 << 20)
///     .with_blob_threshold(None);
/// assert_eq!(config.blob_threshold, None);
/// assert!(config.compression);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FjallConfig {
    /// Directory of the database.
    pub path: PathBuf,
    /// fjall's block cache size in bytes. The default is 64 MiB: the web index reads mostly what
    /// it just wrote (from memtables) and raw pages once, so a larger cache mostly holds memory:
    /// it raises an index run's peak RSS without making the run faster.
    pub cache_capacity: u64,
    /// lz4-compress data blocks on every level and journal entries of 4 KiB and more. Off: no
    /// compression at all.
    pub compression: bool,
    /// Data-family values of at least this many bytes are stored in fjall's blob files
    /// (key-value separation); `None` keeps every value inline.
    pub blob_threshold: Option<u32>,
    /// fjall's flush and compaction threads; `None` for fjall's default (the number of cores, at
    /// most 4), but at least [`MIN_DEFAULT_WORKER_THREADS`]. With more than one, fjall's first
    /// worker only flushes and rotates memtables and passes every compaction on (re-queueing it
    /// while the others are busy, a busy loop that takes a noticeable share of the CPU on few
    /// cores), so of two threads only one compacts. Three make index runs markedly shorter than
    /// two; with one thread compaction falls behind, and memory and disk use grow far past the
    /// data's size.
    pub worker_threads: Option<usize>,
    /// The memtable size of each family's keyspace (see [`MemtableSizes`] for the defaults and
    /// why).
    pub memtable_sizes: MemtableSizes,
    /// The most bytes fjall's journals may hold before it flushes the oldest memtables (at least
    /// 64 MiB is used). Everything journaled and not yet flushed is also in a memtable, so this
    /// bounds the memtables' memory too: with fjall's default of 512 MiB a large index run keeps
    /// most of that resident.
    pub max_journal_size: u64,
    /// Coalesce notifications that name their commit timestamp (a one-phase commit's) into a
    /// cell that already holds a notify key: the cell keeps the newest in memory instead of a key
    /// per writer (see the crate docs). On by default. Off, every notification is a key.
    pub coalesce_notifications: bool,
}

impl FjallConfig {
    /// Defaults for `path`: 64 MiB cache, lz4 compression, blob files for data values of
    /// 4 KiB and more, fjall's default worker threads but at least 3, journals of at most
    /// 128 MiB, [`MemtableSizes::default`], and notifications coalesced.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache_capacity: 64 * 1024 * 1024,
            compression: true,
            blob_threshold: Some(4 * 1024),
            worker_threads: None,
            memtable_sizes: MemtableSizes::default(),
            max_journal_size: 128 * 1024 * 1024,
            coalesce_notifications: true,
        }
    }

    /// Sets [`Self::path`].
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = path.into();
        self
    }

    /// Sets [`Self::cache_capacity`].
    #[must_use]
    pub fn with_cache_capacity(mut self, cache_capacity: u64) -> Self {
        self.cache_capacity = cache_capacity;
        self
    }

    /// Sets [`Self::compression`].
    #[must_use]
    pub fn with_compression(mut self, compression: bool) -> Self {
        self.compression = compression;
        self
    }

    /// Sets [`Self::blob_threshold`].
    #[must_use]
    pub fn with_blob_threshold(mut self, blob_threshold: Option<u32>) -> Self {
        self.blob_threshold = blob_threshold;
        self
    }

    /// Sets the memtable size of `family`'s keyspace in [`Self::memtable_sizes`] (at least
    /// [`MemtableSizes::MIN`] is used).
    #[must_use]
    pub fn with_memtable_size(mut self, family: Family, bytes: u64) -> Self {
        *self.memtable_sizes.of_mut(family) = bytes;
        self
    }

    /// Sets [`Self::max_journal_size`].
    #[must_use]
    pub fn with_max_journal_size(mut self, bytes: u64) -> Self {
        self.max_journal_size = bytes;
        self
    }

    /// Sets [`Self::coalesce_notifications`].
    #[must_use]
    pub fn with_coalesce_notifications(mut self, coalesce: bool) -> Self {
        self.coalesce_notifications = coalesce;
        self
    }

    /// Sets [`Self::worker_threads`] (a value of 0 counts as 1).
    #[must_use]
    pub fn with_worker_threads(mut self, worker_threads: Option<usize>) -> Self {
        self.worker_threads = worker_threads;
        self
    }
}

/// The memtable size of each family's keyspace, in bytes ([`FjallConfig::memtable_sizes`]).
///
/// A memtable is a skip list: every write searches it, and each entry holds its key, value and
/// node overhead in memory until the memtable is flushed. So a small memtable costs less per
/// insert and holds less memory, but flushes more, smaller tables, which compaction then
/// rewrites. fjall's default is 64 MiB. The defaults here are tuned on indexing runs of
/// realistic pages (`percolator webindex scale`):
///
/// - **lock, 1 MiB.** Conditions on locks are answered from an in-memory mirror of the live
///   locks (see the crate docs) and the keyspace is read only at open, so its memtable only
///   takes writes: each lock is put once and deleted once. A small memtable makes index runs
///   faster and lowers their peak RSS.
/// - **data, 32 MiB.** Lower peak RSS than 64 MiB, in the load and in the run, for slightly
///   more CPU and slightly more bytes written.
/// - **write and notify, 64 MiB.** Both keyspaces take many small entries, and small memtables
///   multiply the compactions: much more CPU and more bytes written, for little memory saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemtableSizes {
    /// The data family's keyspace.
    pub data: u64,
    /// The lock family's keyspace.
    pub lock: u64,
    /// The write family's keyspace.
    pub write: u64,
    /// The notify family's keyspace.
    pub notify: u64,
}

impl MemtableSizes {
    /// The smallest memtable size used: a smaller setting counts as this.
    pub const MIN: u64 = 64 * 1024;

    /// The size for `family`'s keyspace.
    pub fn of(&self, family: Family) -> u64 {
        match family {
            Family::Data => self.data,
            Family::Lock => self.lock,
            Family::Write => self.write,
            Family::Notify => self.notify,
        }
    }

    fn of_mut(&mut self, family: Family) -> &mut u64 {
        match family {
            Family::Data => &mut self.data,
            Family::Lock => &mut self.lock,
            Family::Write => &mut self.write,
            Family::Notify => &mut self.notify,
        }
    }
}

impl Default for MemtableSizes {
    fn default() -> Self {
        const MIB: u64 = 1024 * 1024;
        Self {
            data: 32 * MIB,
            lock: MIB,
            write: 64 * MIB,
            notify: 64 * MIB,
        }
    }
}
