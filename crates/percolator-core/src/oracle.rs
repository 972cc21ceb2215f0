//! Timestamp oracle (paper §2.3): strictly increasing timestamps, never backwards across restarts.
//!
//! [`LocalOracle`] serves timestamps from an in-memory window `[next, limit)` with one atomic
//! compare-and-swap each; when the window is used up, exactly one caller per process (a
//! single-flight async mutex) extends it by persisting a new **high-water mark** `limit + window`
//! into the store (a compare-and-swap on the old mark, then [`RowStore::sync`]) *before* handing
//! out any timestamp below it. All concurrent callers that hit the end of the window wait on that
//! one allocation: at most one outstanding allocation per process, as the paper's oracle batches
//! RPCs. On restart the oracle starts at the persisted mark, so it skips the unused rest of the old
//! window and never repeats or goes back.
//!
//! A second process allocating from the same store would make the compare-and-swap fail; the
//! oracle then reports [`Error::Oracle`] instead of interleaving ranges (which would break
//! snapshot isolation). Multi-process deployments use one oracle (PD's TSO for TiKV).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::store::{
    Columns, Condition, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore,
};
use crate::tables;

/// Hands out strictly increasing timestamps.
#[async_trait]
pub trait TimestampOracle: Send + Sync + 'static {
    /// A timestamp greater than every timestamp this oracle returned before (in this process or
    /// an earlier one).
    async fn timestamp(&self) -> Result<u64>;
}

/// Default window persisted per allocation.
pub const DEFAULT_WINDOW: u64 = 1 << 20;

const HIGH_WATER_COLUMN: &[u8] = b"high_water";

/// An oracle for one process, persisting its high-water mark in a [`RowStore`].
pub struct LocalOracle<S: RowStore> {
    store: Arc<S>,
    next: AtomicU64,
    limit: AtomicU64,
    window: u64,
    refill: tokio::sync::Mutex<()>,
}

impl<S: RowStore> std::fmt::Debug for LocalOracle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOracle")
            .field("next", &self.next.load(Ordering::Relaxed))
            .field("limit", &self.limit.load(Ordering::Relaxed))
            .field("window", &self.window)
            .finish()
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
        let mark = read_high_water(store.as_ref()).await?;
        // Everything below the persisted mark may have been handed out before a restart; start
        // at the mark. Timestamp 0 is reserved ("before everything").
        let start = mark.unwrap_or(0).max(1);
        Ok(Self {
            store,
            next: AtomicU64::new(start),
            limit: AtomicU64::new(start),
            window,
            refill: tokio::sync::Mutex::new(()),
        })
    }

    /// The persisted high-water mark (everything handed out so far is below it).
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    fn try_take(&self) -> Option<u64> {
        let mut current = self.next.load(Ordering::Relaxed);
        loop {
            if current >= self.limit.load(Ordering::Acquire) {
                return None;
            }
            match self.next.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(current),
                Err(actual) => current = actual,
            }
        }
    }

    async fn extend(&self) -> Result<()> {
        let _single_flight = self.refill.lock().await;
        let old = self.limit.load(Ordering::Acquire);
        if self.next.load(Ordering::Acquire) < old {
            return Ok(()); // another caller extended the window while we waited
        }
        let new = old
            .checked_add(self.window)
            .ok_or_else(|| Error::Oracle("timestamp space exhausted".into()))?;
        let cas = if old <= 1 {
            // First allocation ever (or the mark was never written).
            Condition::Absent {
                family: Family::Data,
                column: Bytes::from_static(HIGH_WATER_COLUMN),
                ts: crate::store::TsRange::at(0),
            }
        } else {
            Condition::Equals {
                family: Family::Data,
                column: Bytes::from_static(HIGH_WATER_COLUMN),
                ts: 0,
                value: Bytes::copy_from_slice(&old.to_be_bytes()),
            }
        };
        let outcome = self
            .store
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(tables::META_TABLE),
                row: Bytes::from_static(tables::ORACLE_ROW),
                conditions: vec![cas],
                mutations: vec![Mutation::Put {
                    family: Family::Data,
                    column: Bytes::from_static(HIGH_WATER_COLUMN),
                    ts: 0,
                    value: Bytes::copy_from_slice(&new.to_be_bytes()),
                }],
            }])
            .await?;
        if !outcome.first().is_some_and(|o| o.applied()) {
            return Err(Error::Oracle(
                "high-water mark changed under this oracle: another process allocates timestamps \
                 from the same store"
                    .into(),
            ));
        }
        self.store.sync().await?;
        self.limit.store(new, Ordering::Release);
        Ok(())
    }
}

#[async_trait]
impl<S: RowStore> TimestampOracle for LocalOracle<S> {
    async fn timestamp(&self) -> Result<u64> {
        loop {
            if let Some(ts) = self.try_take() {
                return Ok(ts);
            }
            self.extend().await?;
        }
    }
}

async fn read_high_water<S: RowStore>(store: &S) -> Result<Option<u64>> {
    let cells = store
        .read_row(ReadRow {
            table: Bytes::from_static(tables::META_TABLE),
            row: Bytes::from_static(tables::ORACLE_ROW),
            reads: vec![
                FamilyRead::all(Family::Data)
                    .columns(Columns::one(Bytes::from_static(HIGH_WATER_COLUMN)))
                    .max_versions(1),
            ],
        })
        .await?;
    let Some(cell) = cells.first().and_then(|c| c.first()) else {
        return Ok(None);
    };
    let bytes: [u8; 8] = cell.value.as_ref().try_into().map_err(|_| {
        Error::Corrupt(format!(
            "oracle high-water mark is {} bytes, expected 8",
            cell.value.len()
        ))
    })?;
    Ok(Some(u64::from_be_bytes(bytes)))
}

/// Live oracles by store address: one [`LocalOracle`] per store per process.
static SHARED: LazyLock<tokio::sync::Mutex<HashMap<usize, Weak<dyn TimestampOracle>>>> =
    LazyLock::new(|| tokio::sync::Mutex::new(HashMap::new()));

/// The process-wide [`LocalOracle`] of `store`, opened on first use.
///
/// Every [`crate::Client`] built without an explicit oracle uses this, so that all clients of one
/// store in one process draw from a single sequence (two oracles on one store would hand out
/// interleaved ranges and break snapshot isolation). The entry lives as long as some client
/// holds the oracle; the oracle holds the store, so the address cannot be reused meanwhile.
pub async fn shared_local_oracle<S: RowStore>(store: &Arc<S>) -> Result<Arc<dyn TimestampOracle>> {
    let key = Arc::as_ptr(store) as *const () as usize;
    let mut shared = SHARED.lock().await;
    if let Some(oracle) = shared.get(&key).and_then(Weak::upgrade) {
        return Ok(oracle);
    }
    shared.retain(|_, weak| weak.strong_count() > 0);
    let oracle: Arc<dyn TimestampOracle> = Arc::new(LocalOracle::open(Arc::clone(store)).await?);
    shared.insert(key, Arc::downgrade(&oracle));
    Ok(oracle)
}
