//! [`LocalOracle`]: timestamps from an in-memory window over a high-water mark persisted in the
//! store, fenced by a lease on stores that several processes can share.
//!
//! ## Timestamps and windows
//! Timestamps carry oracle time ([`super::time`]): each is at least the first timestamp of the
//! current millisecond on the oracle's [`Clock`] and above the previous one (so a clock that
//! steps back only slows the physical part down). They come from `[next, limit)`, where `limit`
//! is the **persisted mark**, with one compare-and-swap each. When the clock or the callers
//! reach the mark, exactly one caller (a single-flight async mutex) persists a new mark a
//! window ([`OracleConfig::window`], 3 s like PD's) ahead — a compare-and-swap on the row it
//! last wrote, then [`RowStore::sync`] — *before* anything below it is handed out; the oracle
//! service calls [`LocalOracle::maintain`] to do that ahead of time. On restart the oracle starts
//! at the persisted mark, so its timestamps may run up to a window ahead of its clock until the
//! clock catches up.
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
use super::time::{self, Clock, SystemClock};
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

    /// How much of the lease is left (zero once it ran out).
    fn remaining(&self) -> Duration {
        let now = self.nanos(Instant::now());
        Duration::from_nanos(self.valid_until.load(Ordering::Acquire).saturating_sub(now))
    }

    fn revoke(&self) {
        self.valid_until.store(0, Ordering::Release);
    }

    /// How long one write of the row may go unanswered before it is given up as unsettled and
    /// tried again: a write the store holds on to (a proposal to an etcd leader that was just
    /// killed waits for the client's whole request timeout) must not use up the lease.
    fn attempt_limit(&self) -> Duration {
        self.duration / 4
    }
}

/// How a [`LocalOracle`] persists and fences its timestamps.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::TimestampOracle;
/// # use percolator_core::oracle::{LocalOracle, OracleConfig, SystemClock};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let config = OracleConfig::default()
///     .with_window(Duration::from_secs(1))
///     .with_lease(Duration::from_secs(5))
///     .with_standby(false)
///     .with_clock(Arc::new(SystemClock));
/// assert_eq!(config.window, Duration::from_secs(1));
/// let oracle = LocalOracle::open_with(Arc::new(MemStore::new()), config).await?;
/// let ts = oracle.timestamp().await?;
/// assert!(ts < oracle.limit()); // below the persisted high-water mark
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OracleConfig {
    /// Oracle time persisted ahead per allocation: the oracle writes (and syncs) its mark once
    /// per window, and after a restart its timestamps run up to a window ahead of its clock.
    /// Keep it well above the store's write latency: while a refill is slower than the clock,
    /// timestamps lag the clock.
    pub window: Duration,
    /// How long its hold on a shared store lasts without a write of its row.
    pub lease: Duration,
    /// Wait as long as it takes for the store's current oracle to let go (a standby of the
    /// oracle service) instead of giving up after three leases.
    pub standby: bool,
    /// Where it reads physical time.
    pub clock: Arc<dyn Clock>,
}

impl Default for OracleConfig {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
            lease: DEFAULT_LEASE,
            standby: false,
            clock: Arc::new(SystemClock),
        }
    }
}

impl OracleConfig {
    /// Sets [`Self::window`].
    #[must_use]
    pub fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Sets [`Self::lease`].
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`Self::standby`].
    #[must_use]
    pub fn with_standby(mut self, standby: bool) -> Self {
        self.standby = standby;
        self
    }

    /// Sets [`Self::clock`].
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// An oracle for one process, persisting its high-water mark in a [`RowStore`] (see the module
/// docs).
///
/// A client uses the store's process-wide one unless it is given another
/// ([`crate::ClientBuilder::oracle`]); a second one open on the same store in this process is
/// refused.
///
/// ```
/// # use std::sync::Arc;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::{Client, LocalOracle, TimestampOracle};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let store = Arc::new(MemStore::new());
/// let oracle = Arc::new(LocalOracle::open(Arc::clone(&store)).await?);
/// assert!(oracle.is_serving());
/// let ts = oracle.timestamp().await?;
/// assert!(ts < oracle.limit());
/// assert!(LocalOracle::open(Arc::clone(&store)).await.is_err()); // one per store
///
/// let client = Client::builder(store).oracle(oracle).build().await?;
/// assert!(client.begin().await?.start_ts() > ts);
/// # client.shutdown().await }
/// ```
pub struct LocalOracle<S: RowStore> {
    store: Arc<S>,
    store_id: String,
    id: u64,
    /// The smallest timestamp not handed out yet.
    next: AtomicU64,
    /// The persisted mark: nothing at or above it is handed out.
    limit: AtomicU64,
    /// [`OracleConfig::window`] in timestamps.
    window: u64,
    clock: Arc<dyn Clock>,
    /// Single-flight refill and renewal; holds the row as last written by this oracle.
    refill: tokio::sync::Mutex<Option<Bytes>>,
    /// Writes of the row whose answer never came (a timeout, an outcome the store could not
    /// tell), each with when it was first sent: any of them may have applied. Touched only
    /// under `refill`; emptied by the next write that settles.
    unsettled: parking_lot::Mutex<Vec<(Bytes, Instant)>>,
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
    /// Opens the oracle with the default configuration.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{LocalOracle, TimestampOracle};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let oracle = LocalOracle::open(Arc::new(MemStore::new())).await?;
    /// assert!(oracle.timestamp().await? > 0);
    /// # Ok(()) }
    /// ```
    pub async fn open(store: Arc<S>) -> Result<Self> {
        Self::open_with(store, OracleConfig::default()).await
    }

    /// Opens the oracle, persisting `window` of oracle time per allocation.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{LocalOracle, TimestampOracle};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new());
    /// let oracle = LocalOracle::with_window(store, Duration::from_millis(500)).await?;
    /// let ts = oracle.timestamp().await?;
    /// assert!(ts < oracle.limit());
    /// # Ok(()) }
    /// ```
    pub async fn with_window(store: Arc<S>, window: Duration) -> Result<Self> {
        Self::open_with(store, OracleConfig::default().with_window(window)).await
    }

    /// Opens the oracle with `window` per allocation and, on a shared store, a lease of `lease`
    /// (taking the store over from a silent owner waits that long).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{LocalOracle, TimestampOracle};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new()); // one process's: no lease is taken on it
    /// let (window, lease) = (Duration::from_secs(1), Duration::from_secs(2));
    /// let oracle = LocalOracle::with_lease(store, window, lease).await?;
    /// assert!(oracle.timestamp().await? > 0);
    /// # Ok(()) }
    /// ```
    pub async fn with_lease(store: Arc<S>, window: Duration, lease: Duration) -> Result<Self> {
        let config = OracleConfig::default()
            .with_window(window)
            .with_lease(lease);
        Self::open_with(store, config).await
    }

    /// Opens the oracle with `config`; on a shared store this waits until the store's current
    /// oracle lets go (see the module docs).
    pub async fn open_with(store: Arc<S>, config: OracleConfig) -> Result<Self> {
        let window = time::span_of(config.window);
        if window == 0 {
            return Err(Error::InvalidInput(format!(
                "oracle window {:?} must be at least 1 ms",
                config.window
            )));
        }
        if config.lease < Duration::from_millis(8) {
            return Err(Error::InvalidInput(format!(
                "oracle lease {:?} is too short (at least 8 ms)",
                config.lease
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
            clock: config.clock,
            refill: tokio::sync::Mutex::new(None),
            unsettled: parking_lot::Mutex::new(Vec::new()),
            lease: None,
        };
        let distributed = oracle.store.limits().distributed;
        let (row_bytes, start) = if distributed {
            let lease = Lease::new(config.lease);
            let patience = (!config.standby).then(|| config.lease * 3 + Duration::from_secs(2));
            let (bytes, row, sent) =
                acquire(oracle.store.as_ref(), id, lease.duration, patience).await?;
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

    /// Whether it may serve now without writing its row first: always on a store one process
    /// owns, while its lease lasts on a shared one.
    pub fn is_serving(&self) -> bool {
        self.lease.as_ref().is_none_or(Lease::valid)
    }

    /// The first timestamp of the current millisecond on this oracle's clock.
    fn now_ts(&self) -> u64 {
        time::first_of_ms(self.clock.now_ms())
    }

    /// The first of `count` consecutive timestamps, all below the limit and none before the
    /// current millisecond, or the limit that was in the way.
    ///
    /// A caller that already refilled once passes `lag`: if the clock is past even the new mark
    /// (a refill slower than the clock), the physical part lags the clock instead of stalling
    /// every caller refill after refill.
    fn try_take_many(&self, count: u64, lag: bool) -> std::result::Result<u64, u64> {
        // Every published limit is already persisted, so any number below one is safe to use;
        // limits only grow, so checking against an older one is conservative.
        let limit = self.limit.load(Ordering::Acquire);
        let now = self.now_ts();
        let now = if lag {
            now.min(limit.saturating_sub(count))
        } else {
            now
        };
        let mut current = self.next.load(Ordering::Acquire);
        loop {
            let first = current.max(now);
            let end = match first.checked_add(count) {
                Some(end) if end <= limit => end,
                _ => return Err(limit),
            };
            match self
                .next
                .compare_exchange_weak(current, end, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(first),
                Err(actual) => current = actual,
            }
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
    ///
    /// On a shared store one attempt waits at most a quarter of the lease; an attempt given up
    /// on, or answered with an unknown outcome, is remembered as unsettled. When a later
    /// compare-and-swap finds the row holding an unsettled attempt's bytes, that attempt
    /// applied: it is adopted, with the lease counted from when it was first sent (its write
    /// applied no earlier, so a newcomer waits at least as long). Returns whether the row now
    /// holds `new` (`false`: an earlier, different attempt was adopted; build the row again).
    async fn write_own(&self, persisted: &mut Option<Bytes>, new: MarkRow) -> Result<bool> {
        let bytes = new.encode();
        let sent = Instant::now();
        let swap = mark::compare_and_swap(self.store.as_ref(), persisted.as_ref(), &bytes);
        let answer = match &self.lease {
            Some(lease) => {
                let limit = lease.attempt_limit();
                tokio::time::timeout(limit, swap).await.unwrap_or_else(|_| {
                    Err(Error::Store(crate::StoreError::Unavailable(format!(
                        "the oracle's write of its row was not answered within {limit:?}"
                    ))))
                })
            }
            None => swap.await,
        };
        match answer {
            Ok(None) => {
                *persisted = Some(bytes);
                self.unsettled.lock().clear();
                if let Some(lease) = &self.lease {
                    lease.granted(sent);
                }
                Ok(true)
            }
            Ok(Some(current)) => {
                let adopted = current.as_ref().and_then(|row| {
                    let unsettled = self.unsettled.lock();
                    unsettled
                        .iter()
                        .find(|(attempt, _)| attempt == row)
                        .map(|(_, first_sent)| *first_sent)
                });
                if let (Some(first_sent), Some(row)) = (adopted, current.as_ref()) {
                    let holds_new = *row == bytes;
                    *persisted = Some(row.clone());
                    self.unsettled.lock().clear();
                    if let Some(lease) = &self.lease {
                        lease.granted(first_sent);
                    }
                    return Ok(holds_new);
                }
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
            Err(e) => {
                let mut unsettled = self.unsettled.lock();
                if !unsettled.iter().any(|(attempt, _)| *attempt == bytes) {
                    unsettled.push((bytes, sent));
                }
                Err(e)
            }
        }
    }

    /// Persists a mark a window past everything handed out and the current millisecond, unless
    /// the limit is already above `below`.
    async fn extend(&self, below: u64) -> Result<()> {
        let mut persisted = self.refill.lock().await;
        let old = self.limit.load(Ordering::Acquire);
        if old > below {
            return Ok(()); // another caller extended the window while we waited
        }
        // Callers that overshot moved `next` past the old limit; the new window starts there.
        let from = old
            .max(self.next.load(Ordering::Acquire))
            .max(self.now_ts());
        let new = from
            .checked_add(self.window)
            .ok_or_else(|| Error::Oracle("timestamp space exhausted".into()))?;
        // Again on top of an earlier attempt that turned out to have applied.
        loop {
            let (_, row) = Self::own_row(&persisted)?;
            let next_row = MarkRow {
                mark: new,
                owner: self.id,
                renewals: row.renewals.wrapping_add(1),
                released: false,
            };
            if self.write_own(&mut persisted, next_row).await? {
                break;
            }
        }
        // The new mark is in the store; it must be durable before anything below it is used.
        self.store.sync().await?;
        self.limit.store(new, Ordering::Release);
        Ok(())
    }

    /// Renews the lease (a write of the row) if less than `margin` of it is left, or finds that
    /// another oracle took over.
    async fn renew(&self, margin: Duration) -> Result<()> {
        let Some(lease) = &self.lease else {
            return Ok(());
        };
        let mut persisted = self.refill.lock().await;
        if lease.remaining() > margin {
            return Ok(());
        }
        let (_, row) = Self::own_row(&persisted)?;
        let next_row = MarkRow {
            renewals: row.renewals.wrapping_add(1),
            released: false,
            owner: self.id,
            mark: row.mark,
        };
        // An earlier renewal or refill that turned out to have applied renews the lease too.
        self.write_own(&mut persisted, next_row).await.map(|_| ())
    }

    /// Keeps the hot path free of store round trips (the oracle service calls it a few times
    /// per lease): renews the lease whenever less than three quarters of it is left and
    /// persists the next window once half of this one is used up. An [`Error::Oracle`] means another oracle took over.
    ///
    /// Renewing that early lets the lease ride out a store outage of most of a lease (an etcd
    /// election of 1–2 s against the default 3 s): renewal is tried at every call with each
    /// attempt bounded, so one write the store holds on to does not use up the lease.
    pub async fn maintain(&self) -> Result<()> {
        if let Some(lease) = &self.lease {
            self.renew(lease.duration * 3 / 4).await?;
        }
        let half_used = self
            .now_ts()
            .max(self.next.load(Ordering::Acquire))
            .saturating_add(self.window / 2);
        if half_used >= self.limit() {
            self.extend(half_used).await?;
        }
        Ok(())
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
        loop {
            let (_, row) = Self::own_row(&persisted)?;
            let released = MarkRow {
                renewals: row.renewals.wrapping_add(1),
                released: true,
                ..row
            };
            match self.write_own(&mut persisted, released).await {
                // An earlier write turned out to have applied: release on top of it.
                Ok(false) => {}
                // Someone else owns it already: nothing to give up.
                Ok(true) | Err(Error::Oracle(_)) => {
                    lease.revoke();
                    return Ok(());
                }
                Err(e) => {
                    lease.revoke();
                    return Err(e);
                }
            }
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
    patience: Option<Duration>,
) -> Result<(Bytes, MarkRow, Instant)> {
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
        if patience.is_some_and(|p| began.elapsed() >= p) {
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
        if !self.is_serving() {
            return None;
        }
        self.try_take_many(1, false).ok()
    }

    async fn timestamps(&self, count: u64) -> Result<u64> {
        if count > self.window {
            return Err(Error::InvalidInput(format!(
                "{count} timestamps in one request: more than the oracle's window of {}",
                self.window
            )));
        }
        let count = count.max(1);
        let mut refilled = false;
        loop {
            if !self.is_serving() {
                self.renew(Duration::ZERO).await?;
                continue;
            }
            match self.try_take_many(count, refilled) {
                Ok(first) => return Ok(first),
                Err(exhausted) => {
                    self.extend(exhausted).await?;
                    refilled = true;
                }
            }
        }
    }

    async fn release(&self) -> Result<()> {
        LocalOracle::release(self).await
    }
}
