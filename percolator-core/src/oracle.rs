//! Timestamp oracle (paper §2.3): strictly increasing timestamps, never backwards across restarts.
//!
//! [`LocalOracle`] serves timestamps from an in-memory window `[next, limit)` with one atomic
//! add each; when the window is used up, exactly one caller per process (a
//! single-flight async mutex) extends it by persisting a new **high-water mark** `limit + window`
//! into the store (a compare-and-swap on the old mark, then [`RowStore::sync`]) *before* handing
//! out any timestamp below it. All concurrent callers that hit the end of the window wait on that
//! one allocation: at most one outstanding allocation per process, as the paper's oracle batches
//! RPCs. On restart the oracle starts at the persisted mark, so it skips the unused rest of the old
//! window and never repeats or goes back.
//!
//! The mark is stored with the id of the oracle that wrote it. If the answer to the
//! compare-and-swap is lost, or `sync` fails after it applied, the oracle reads the mark back:
//! its own id and value mean the write landed (finish it), the old value means it did not (try
//! again), anything else means another oracle allocates from this store.
//!
//! **One store, one oracle.** A second oracle on the same store (another process, or a second
//! `LocalOracle` opened directly) is detected at its or our next refill and reported as
//! [`Error::Oracle`]; until then the first may still hand out the rest of its window, which would
//! interleave with the second's and break snapshot isolation. In one process,
//! [`shared_local_oracle`] (what [`crate::Client`] uses) guarantees a single oracle per store;
//! multi-process deployments use one oracle service (PD's TSO for TiKV).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result, StoreError};
use crate::store::{
    Columns, Condition, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore, TsRange,
};
use crate::tables;

/// Hands out strictly increasing timestamps.
#[async_trait]
pub trait TimestampOracle: Send + Sync + 'static {
    /// A timestamp greater than every timestamp this oracle returned before (in this process or
    /// an earlier one).
    async fn timestamp(&self) -> Result<u64>;

    /// A timestamp if one is at hand without waiting (an in-process window), else `None`; then
    /// call [`Self::timestamp`]. Callers on the hot path try this first: it costs no future.
    fn timestamp_now(&self) -> Option<u64> {
        None
    }

    /// `count` (at least 1) consecutive timestamps, returned as the first of them: one request
    /// for a batch of callers (the paper's oracle batches requests the same way).
    async fn timestamps(&self, count: u64) -> Result<u64> {
        let first = self.timestamp().await?;
        for _ in 1..count {
            self.timestamp().await?;
        }
        Ok(first)
    }
}

/// A timestamp from `oracle`: its window if it has one at hand, else a request.
pub async fn next_timestamp(oracle: &dyn TimestampOracle) -> Result<u64> {
    match oracle.timestamp_now() {
        Some(ts) => Ok(ts),
        None => oracle.timestamp().await,
    }
}

/// Default window persisted per allocation.
pub const DEFAULT_WINDOW: u64 = 1 << 20;

const HIGH_WATER_COLUMN: &[u8] = b"high_water";
/// Attempts of one window extension whose outcome stays unknown.
const EXTEND_ATTEMPTS: usize = 4;

/// An oracle for one process, persisting its high-water mark in a [`RowStore`].
pub struct LocalOracle<S: RowStore> {
    store: Arc<S>,
    id: u64,
    next: AtomicU64,
    limit: AtomicU64,
    window: u64,
    /// Single-flight refill; holds the mark bytes as last written or read by this oracle.
    refill: tokio::sync::Mutex<Option<Bytes>>,
}

impl<S: RowStore> std::fmt::Debug for LocalOracle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOracle")
            .field("id", &self.id)
            .field("next", &self.next.load(Ordering::Relaxed))
            .field("limit", &self.limit.load(Ordering::Relaxed))
            .field("window", &self.window)
            .finish()
    }
}

fn encode_mark(mark: u64, oracle: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(16);
    out.put_u64(mark);
    out.put_u64(oracle);
    out.freeze()
}

fn decode_mark(bytes: &Bytes) -> Result<u64> {
    match bytes.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
        Some(b) if bytes.len() == 16 => Ok(u64::from_be_bytes(b)),
        _ => Err(Error::Corrupt(format!(
            "oracle high-water mark is {} bytes, expected 16",
            bytes.len()
        ))),
    }
}

fn mark_row(condition: Condition, value: Bytes) -> RowMutation {
    RowMutation {
        table: Bytes::from_static(tables::META_TABLE),
        row: Bytes::from_static(tables::ORACLE_ROW),
        conditions: vec![condition],
        mutations: vec![Mutation::Put {
            family: Family::Data,
            column: Bytes::from_static(HIGH_WATER_COLUMN),
            ts: 0,
            value,
        }],
    }
}

impl<S: RowStore> LocalOracle<S> {
    /// Opens the oracle with the default window.
    pub async fn open(store: Arc<S>) -> Result<Self> {
        Self::with_window(store, DEFAULT_WINDOW).await
    }

    /// Opens the oracle, persisting `window` timestamps per allocation.
    pub async fn with_window(store: Arc<S>, window: u64) -> Result<Self> {
        if window == 0 {
            return Err(Error::InvalidInput("oracle window must be positive".into()));
        }
        let persisted = read_mark_bytes(store.as_ref()).await?;
        // Everything below the persisted mark may have been handed out before a restart; start
        // at the mark. Timestamp 0 is reserved ("before everything").
        let start = match &persisted {
            Some(bytes) => decode_mark(bytes)?.max(1),
            None => 1,
        };
        Ok(Self {
            store,
            id: crate::txn::random_id(),
            next: AtomicU64::new(start),
            limit: AtomicU64::new(start),
            window,
            refill: tokio::sync::Mutex::new(persisted),
        })
    }

    /// The persisted high-water mark (everything handed out so far is below it).
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// One timestamp from the window, or the limit that was exhausted. One atomic add, no
    /// compare-and-swap loop: a caller that overshoots the limit just wastes that number (it
    /// is never handed out), so concurrent requesters never retry against each other.
    fn try_take(&self) -> std::result::Result<u64, u64> {
        self.try_take_many(1)
    }

    /// The first of `count` consecutive timestamps, all below the limit, or the limit.
    fn try_take_many(&self, count: u64) -> std::result::Result<u64, u64> {
        let limit = self.limit.load(Ordering::Acquire);
        let first = self.next.fetch_add(count, Ordering::AcqRel);
        // Every published limit is already persisted, so any number below one is safe to use.
        match first.checked_add(count) {
            Some(end) if end <= limit => Ok(first),
            _ => Err(limit),
        }
    }

    /// Extends the window past `exhausted` (a limit a caller ran into).
    async fn extend(&self, exhausted: u64) -> Result<()> {
        let mut persisted = self.refill.lock().await;
        let old = self.limit.load(Ordering::Acquire);
        if old > exhausted {
            return Ok(()); // another caller extended the window while we waited
        }
        // Callers that overshot moved `next` past the old limit; the new window starts there.
        let from = old.max(self.next.load(Ordering::Acquire));
        let new = from
            .checked_add(self.window)
            .ok_or_else(|| Error::Oracle("timestamp space exhausted".into()))?;
        let new_bytes = encode_mark(new, self.id);
        for _ in 0..EXTEND_ATTEMPTS {
            let condition = match persisted.as_ref() {
                None => Condition::Absent {
                    family: Family::Data,
                    column: Bytes::from_static(HIGH_WATER_COLUMN),
                    ts: TsRange::at(0),
                },
                Some(bytes) => Condition::Equals {
                    family: Family::Data,
                    column: Bytes::from_static(HIGH_WATER_COLUMN),
                    ts: 0,
                    value: bytes.clone(),
                },
            };
            let applied = match self
                .store
                .mutate_rows(vec![mark_row(condition, new_bytes.clone())])
                .await
            {
                Ok(outcome) => outcome.first().is_some_and(|o| o.applied()),
                Err(StoreError::Unavailable(_)) => false, // unknown: read it back below
                Err(e) => return Err(e.into()),
            };
            if !applied {
                let current = read_mark_bytes(self.store.as_ref()).await?;
                if current.as_ref() != Some(&new_bytes) {
                    if current != *persisted {
                        return Err(Error::Oracle(
                            "high-water mark changed under this oracle: another oracle allocates \
                             timestamps from the same store"
                                .into(),
                        ));
                    }
                    continue; // our write did not land: try again
                }
            }
            // The new mark is in the store; it must be durable before anything below it is used.
            *persisted = Some(new_bytes);
            self.store.sync().await?;
            self.limit.store(new, Ordering::Release);
            return Ok(());
        }
        Err(Error::Store(StoreError::Unavailable(
            "could not persist the oracle's high-water mark".into(),
        )))
    }
}

#[async_trait]
impl<S: RowStore> TimestampOracle for LocalOracle<S> {
    async fn timestamp(&self) -> Result<u64> {
        loop {
            match self.try_take() {
                Ok(ts) => return Ok(ts),
                Err(exhausted) => self.extend(exhausted).await?,
            }
        }
    }

    fn timestamp_now(&self) -> Option<u64> {
        self.try_take().ok()
    }

    async fn timestamps(&self, count: u64) -> Result<u64> {
        let count = count.clamp(1, self.window);
        loop {
            match self.try_take_many(count) {
                Ok(first) => return Ok(first),
                Err(exhausted) => self.extend(exhausted).await?,
            }
        }
    }
}

async fn read_mark_bytes<S: RowStore>(store: &S) -> Result<Option<Bytes>> {
    let cells = store
        .read_row(ReadRow {
            snapshot_ts: None,
            table: Bytes::from_static(tables::META_TABLE),
            row: Bytes::from_static(tables::ORACLE_ROW),
            reads: vec![
                FamilyRead::all(Family::Data)
                    .columns(Columns::one(Bytes::from_static(HIGH_WATER_COLUMN)))
                    .max_versions(1),
            ],
        })
        .await?;
    Ok(cells
        .into_iter()
        .next()
        .and_then(|c| c.into_iter().next())
        .map(|c| c.value))
}

/// Live oracles by [`RowStore::store_id`]: one [`LocalOracle`] per store per process.
static SHARED: LazyLock<tokio::sync::Mutex<HashMap<String, Weak<dyn TimestampOracle>>>> =
    LazyLock::new(|| tokio::sync::Mutex::new(HashMap::new()));

/// The process-wide [`LocalOracle`] of `store`, opened on first use.
///
/// Every [`crate::Client`] built without an explicit oracle uses this, so that all clients of one
/// store in one process draw from a single sequence (two oracles on one store would hand out
/// interleaved ranges and break snapshot isolation). Stores are told apart by
/// [`RowStore::store_id`], which names the data a handle reaches: a second handle on the same
/// data (a reopened TiKV namespace) and every wrapper (which forwards the id of the store it
/// wraps) get the same oracle. The entry lives as long as some client holds the oracle.
pub async fn shared_local_oracle<S: RowStore>(store: &Arc<S>) -> Result<Arc<dyn TimestampOracle>> {
    let key = store.store_id();
    let mut shared = SHARED.lock().await;
    if let Some(oracle) = shared.get(&key).and_then(Weak::upgrade) {
        return Ok(oracle);
    }
    shared.retain(|_, weak| weak.strong_count() > 0);
    let oracle: Arc<dyn TimestampOracle> = Arc::new(LocalOracle::open(Arc::clone(store)).await?);
    shared.insert(key, Arc::downgrade(&oracle));
    Ok(oracle)
}
