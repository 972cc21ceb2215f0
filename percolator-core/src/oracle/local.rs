//! [`LocalOracle`]: timestamps from an in-memory window over a high-water mark persisted in the
//! store, fenced by a lease on stores that several processes can share.
//!
//! ## Windows
//! Timestamps come from a window `[next, limit)` with one atomic add each. When it is used up,
//! exactly one caller (a single-flight async mutex) extends it by writing a new mark
//! `limit + window` (a compare-and-swap on the row it last wrote, then [`RowStore::sync`])
//! *before* anything below it is handed out. On restart the oracle starts at the persisted mark.
//!
//! ## The lease (stores with [`crate::StoreLimits::distributed`])
//! A second oracle on a shared store — another process, opened by mistake — must never hand out
//! a timestamp that inverts real-time order with the first one's. So on such a store the owner
//! of the row holds a **lease**: it serves timestamps only while `sent + lease − lease/8` has not
//! passed on its own monotonic clock, where `sent` is when it sent its last successful write of
//! the row (every write bumps the row's renewal counter). Past that it must write the row again
//! (a compare-and-swap on its own last bytes) before serving; if the row changed, another
//! oracle took over and this one stops with [`Error::Oracle`].
//!
//! A newcomer takes the row over only when it is released, owned by an oracle of this process
//! that is gone, or **unchanged for a whole lease** on the newcomer's own clock. The owner's
//! last write was sent before the newcomer first read it, so the owner stopped serving
//! (`sent + lease − lease/8`) before the newcomer's takeover can apply (`first read + lease`):
//! the two never serve at the same time, and the newcomer starts at the persisted mark, above
//! everything the owner handed out. Only clock *rates* matter (the lease/8 margin absorbs
//! drift), never offsets between machines. A newcomer that keeps seeing the row renewed gives
//! up with [`Error::Oracle`]: processes sharing a store need one oracle service.
//!
//! Stores one process owns (mem; sled, whose file lock admits one process) need no lease: in
//! one process, a second `LocalOracle` on a store while one is open is refused at open.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;

use super::mark::{self, MarkRow};
use super::registry;
use super::{DEFAULT_WINDOW, TimestampOracle};
use crate::error::{Error, Result};
use crate::store::RowStore;

/// How long an oracle's hold on a shared store lasts without a write of its row.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(3);

/// The lease as this oracle sees it on its own monotonic clock.
struct Lease {
    duration: Duration,
    origin: Instant,
    /// Nanoseconds after `origin` until which this oracle may serve.
    valid_until: AtomicU64,
}

impl Lease {
    fn new(duration: Duration) -> Self {
        Self {
            duration,
            origin: Instant::now(),
            valid_until: AtomicU64::new(0),
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    fn valid(&self) -> bool {
        self.nanos(Instant::now()) < self.valid_until.load(Ordering::Acquire)
    }

    /// A write of the row sent at `sent` applied: serve until `sent + lease − lease/8`.
    fn granted(&self, sent: Instant) {
        let until = sent + self.duration - self.duration / 8;
        self.valid_until.store(self.nanos(until), Ordering::Release);
    }

    fn revoke(&self) {
        self.valid_until.store(0, Ordering::Release);
    }
}

/// An oracle for one process, persisting its high-water mark in a [`RowStore`] (see the module
/// docs).
pub struct LocalOracle<S: RowStore> {
    store: Arc<S>,
    store_id: String,
    id: u64,
    next: AtomicU64,
    limit: AtomicU64,
    window: u64,
    /// Single-flight refill and renewal; holds the row as last written by this oracle.
    refill: tokio::sync::Mutex<Option<Bytes>>,
    /// `None` on stores one process owns.
    lease: Option<Lease>,
}

impl<S: RowStore> std::fmt::Debug for LocalOracle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOracle")
            .field("id", &self.id)
            .field("next", &self.next.load(Ordering::Relaxed))
            .field("limit", &self.limit.load(Ordering::Relaxed))
            .field("window", &self.window)
            .field("leased", &self.lease.as_ref().map(|l| l.duration))
            .finish()
    }
}

impl<S: RowStore> Drop for LocalOracle<S> {
    fn drop(&mut self) {
        registry::closed(&self.store_id, self.id);
    }
}

impl<S: RowStore> LocalOracle<S> {
    /// Opens the oracle with the default window and lease.
    pub async fn open(store: Arc<S>) -> Result<Self> {
        Self::with_window(store, DEFAULT_WINDOW).await
    }

    /// Opens the oracle, persisting `window` timestamps per allocation.
    pub async fn with_window(store: Arc<S>, window: u64) -> Result<Self> {
        Self::with_lease(store, window, DEFAULT_LEASE).await
    }

    /// Opens the oracle with `window` timestamps per allocation and, on a shared store, a lease
    /// of `lease` (taking the store over from a silent owner waits that long).
    pub async fn with_lease(store: Arc<S>, window: u64, lease: Duration) -> Result<Self> {
        if window == 0 {
            return Err(Error::InvalidInput("oracle window must be positive".into()));
        }
        if lease < Duration::from_millis(8) {
            return Err(Error::InvalidInput(format!(
                "oracle lease {lease:?} is too short (at least 8 ms)"
            )));
        }
        let store_id = store.store_id();
        let id = crate::txn::random_id();
        registry::open(&store_id, id)?;
        let mut oracle = Self {
            store,
            store_id,
            id,
            next: AtomicU64::new(1),
            limit: AtomicU64::new(1),
            window,
            refill: tokio::sync::Mutex::new(None),
            lease: None,
        };
        let distributed = oracle.store.limits().distributed;
        let (row_bytes, start) = if distributed {
            let lease = Lease::new(lease);
            let (bytes, row, sent) = acquire(oracle.store.as_ref(), id, lease.duration).await?;
            lease.granted(sent);
            oracle.lease = Some(lease);
            (Some(bytes), row.mark)
        } else {
            let persisted = mark::read(oracle.store.as_ref()).await?;
            let start = match &persisted {
                Some(bytes) => MarkRow::decode(bytes)?.mark,
                None => 1,
            };
            (persisted, start)
        };
        // Everything below the persisted mark may have been handed out before; timestamp 0
        // is reserved ("before everything").
        let start = start.max(1);
        oracle.next = AtomicU64::new(start);
        oracle.limit = AtomicU64::new(start);
        oracle.refill = tokio::sync::Mutex::new(row_bytes);
        Ok(oracle)
    }

    /// The persisted high-water mark (everything handed out so far is below it).
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// This oracle's id (written into the row it owns).
    pub fn id(&self) -> u64 {
        self.id
    }

    fn may_serve(&self) -> bool {
        self.lease.as_ref().is_none_or(Lease::valid)
    }

    /// The first of `count` consecutive timestamps, all below the limit, or the limit that was
    /// exhausted. One atomic add, no compare-and-swap loop: a caller that overshoots the limit
    /// just wastes those numbers (they are never handed out).
    fn try_take_many(&self, count: u64) -> std::result::Result<u64, u64> {
        let limit = self.limit.load(Ordering::Acquire);
        let first = self.next.fetch_add(count, Ordering::AcqRel);
        // Every published limit is already persisted, so any number below one is safe to use.
        match first.checked_add(count) {
            Some(end) if end <= limit => Ok(first),
            _ => Err(limit),
        }
    }

    /// The row as this oracle last wrote it, decoded.
    fn own_row(persisted: &Option<Bytes>) -> Result<(Option<Bytes>, MarkRow)> {
        let row = match persisted {
            Some(bytes) => MarkRow::decode(bytes)?,
            None => MarkRow {
                mark: 1,
                owner: 0,
                renewals: 0,
                released: false,
            },
        };
        Ok((persisted.clone(), row))
    }

    /// Writes `new` over the row this oracle last wrote; on a shared store the write renews the
    /// lease (from the moment it was sent). Another owner's row means this oracle lost the
    /// store: it stops serving.
    async fn write_own(&self, persisted: &mut Option<Bytes>, new: MarkRow) -> Result<()> {
        let bytes = new.encode();
        let sent = Instant::now();
        match mark::compare_and_swap(self.store.as_ref(), persisted.as_ref(), &bytes).await? {
            None => {
                *persisted = Some(bytes);
                if let Some(lease) = &self.lease {
                    lease.granted(sent);
                }
                Ok(())
            }
            Some(current) => {
                if let Some(lease) = &self.lease {
                    lease.revoke();
                }
                let owner = current
                    .as_ref()
                    .and_then(|b| MarkRow::decode(b).ok())
                    .map_or(0, |r| r.owner);
                Err(Error::Oracle(format!(
                    "another oracle ({owner:x}) took over the timestamps of this store; oracle \
                     {:x} stops (processes sharing a store need one oracle service)",
                    self.id
                )))
            }
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
        let (_, row) = Self::own_row(&persisted)?;
        let next_row = MarkRow {
            mark: new,
            owner: self.id,
            renewals: row.renewals.wrapping_add(1),
            released: false,
        };
        self.write_own(&mut persisted, next_row).await?;
        // The new mark is in the store; it must be durable before anything below it is used.
        self.store.sync().await?;
        self.limit.store(new, Ordering::Release);
        Ok(())
    }

    /// Renews an expired lease (a write of the row), or finds that another oracle took over.
    async fn renew(&self) -> Result<()> {
        let mut persisted = self.refill.lock().await;
        if self.may_serve() {
            return Ok(());
        }
        let (_, row) = Self::own_row(&persisted)?;
        let next_row = MarkRow {
            renewals: row.renewals.wrapping_add(1),
            released: false,
            owner: self.id,
            mark: row.mark,
        };
        self.write_own(&mut persisted, next_row).await
    }

    /// Gives the store up (graceful shutdown): another oracle may take over at once. Using this
    /// oracle again re-acquires the store if nobody else has.
    pub async fn release(&self) -> Result<()> {
        let Some(lease) = &self.lease else {
            return Ok(());
        };
        let mut persisted = self.refill.lock().await;
        let (_, row) = Self::own_row(&persisted)?;
        if row.released {
            return Ok(());
        }
        lease.revoke();
        let released = MarkRow {
            renewals: row.renewals.wrapping_add(1),
            released: true,
            ..row
        };
        match self.write_own(&mut persisted, released).await {
            // Someone else owns it already: nothing to give up.
            Ok(()) | Err(Error::Oracle(_)) => {
                lease.revoke();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// Takes the row of `store` for oracle `id` (see the module docs): at once when it is absent,
/// released or owned by an oracle of this process that is gone, else once it has not changed
/// for `lease`. Returns the row written and when that write was sent.
async fn acquire<S: RowStore>(
    store: &S,
    id: u64,
    lease: Duration,
) -> Result<(Bytes, MarkRow, Instant)> {
    let patience = lease * 3 + Duration::from_secs(2);
    let began = Instant::now();
    let mut current = mark::read(store).await?;
    let mut unchanged_since = Instant::now();
    loop {
        let row = current.as_ref().map(MarkRow::decode).transpose()?;
        let free = match row {
            None => true,
            Some(r) => {
                r.released
                    || r.owner == id
                    || registry::is_gone(r.owner)
                    || unchanged_since.elapsed() >= lease
            }
        };
        if free {
            let new = MarkRow {
                mark: row.map_or(1, |r| r.mark.max(1)),
                owner: id,
                renewals: row.map_or(0, |r| r.renewals.wrapping_add(1)),
                released: false,
            };
            let bytes = new.encode();
            let sent = Instant::now();
            match mark::compare_and_swap(store, current.as_ref(), &bytes).await? {
                None => return Ok((bytes, new, sent)),
                Some(found) => {
                    current = found;
                    unchanged_since = Instant::now();
                    continue;
                }
            }
        }
        if began.elapsed() >= patience {
            let owner = row.map_or(0, |r| r.owner);
            return Err(Error::Oracle(format!(
                "oracle {owner:x} serves the timestamps of this store and keeps renewing its \
                 lease; processes sharing a store need one timestamp oracle for all of them \
                 (PD's TSO on TiKV)"
            )));
        }
        tokio::time::sleep(lease / 4).await;
        let now = mark::read(store).await?;
        if now != current {
            current = now;
            unchanged_since = Instant::now();
        }
    }
}

#[async_trait]
impl<S: RowStore> TimestampOracle for LocalOracle<S> {
    async fn timestamp(&self) -> Result<u64> {
        self.timestamps(1).await
    }

    fn timestamp_now(&self) -> Option<u64> {
        if !self.may_serve() {
            return None;
        }
        self.try_take_many(1).ok()
    }

    async fn timestamps(&self, count: u64) -> Result<u64> {
        let count = count.clamp(1, self.window);
        loop {
            if !self.may_serve() {
                self.renew().await?;
                continue;
            }
            match self.try_take_many(count) {
                Ok(first) => return Ok(first),
                Err(exhausted) => self.extend(exhausted).await?,
            }
        }
    }

    async fn release(&self) -> Result<()> {
        LocalOracle::release(self).await
    }
}
