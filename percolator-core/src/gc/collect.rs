//! One garbage-collection run: [`crate::Client::gc`].
//!
//! 1. **Safe point.** From the worker leases (see [`super::safe_point::allowed_by`]), raised
//!    in the store (never lowered).
//! 2. **Locks** below the safe point, in every table, are resolved first: rolled forward or
//!    back through their primaries, exactly as a reader would. This must finish everywhere
//!    before any write record goes, because resolving a secondary asks its primary's write
//!    records what happened.
//! 3. **Versions**, table by table, a bounded page of rows at a time: per column, the newest
//!    committed write record at or below the safe point stays (with its data) unless it is a
//!    delete; every older write record and every rollback record at or below it are deleted,
//!    with the data version of each deleted put. Versions above the safe point are never
//!    touched. Columns whose lock could not be resolved are skipped. The plan comes from the
//!    write records alone: data exists only at the start timestamp of a put record whose value
//!    is not inline (a rollback deletes its data with the lock), so no data is read; only a row
//!    with a delete or an ack candidate to decide reads its pending notifications.
//!    **Orphaned acks** go whole: an observer's ack of a column that has no value at the safe
//!    point and no notification at or below it (see "Acks" below).
//! 4. **Leases** of dead workers are deleted (unless renewed meanwhile).
//! 5. The store collects its own history below the safe point
//!    ([`crate::RowStore::collect_garbage`]: TiKV's GC).
//!
//! Why no admitted snapshot reads differently: a snapshot at `t >= safe point` sees, per
//! column, the newest committed write at or below `t`; that is either above the safe point
//! (untouched) or the newest one at or below it (kept, with its data, or a delete — and
//! reading nothing is what a delete shows). Snapshots below the safe point are refused
//! ([`crate::Error::SnapshotTooOld`], see `gc::snapshots`).
//!
//! **Acks** are the one exception, and no reader can tell. An ack (the paper's `c:ack_O`, a
//! reserved column no application reads) only suppresses runs: a strong observer skips a change
//! whose commit is not newer than its ack, and clearing waits for other workers' acks to cover
//! pending notifications. Once the observed column has no value at the safe point and no
//! notification at or below it, the ack suppresses nothing: a strong observer does nothing on
//! an absent value whatever the ack says, any later value commits above the safe point and so
//! above the ack, and every later notification is above the safe point too, out of the ack's
//! reach. Without this, every row whose observed column was ever deleted (a cluster emptied by a
//! recrawl, a notify-only column) would keep one ack per observer forever.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::error::Result;
use crate::liveness::StoreLiveness;
use crate::oracle::time::span_of;
use crate::records::{CellAddr, LockRecord, WriteKind, WriteRecord};
use crate::store::{
    Cell, Columns, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore, TsRange, scan_page,
};
use crate::tables::{RESERVED_PREFIX, parse_ack_column};
use crate::txn::Client;

use super::safe_point;

/// How a garbage-collection run behaves.
///
/// ```
/// # use std::time::Duration;
/// # use percolator_core::GcConfig;
/// let config = GcConfig::default()
///     .with_grace(Duration::from_secs(60))
///     .with_batch_rows(0) // raised to 1
///     .with_dry_run(true);
/// assert_eq!(config.grace, Duration::from_secs(60));
/// assert_eq!(config.batch_rows, 1);
/// assert!(config.dry_run);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GcConfig {
    /// How far (in oracle time) the safe point stays behind the oldest snapshot any live
    /// worker uses: room for a worker whose renewal is late. Default 10 minutes.
    pub grace: Duration,
    /// Rows read and rewritten per store call: a bound on how long one GC step holds a row.
    pub batch_rows: usize,
    /// Count what would be collected without changing anything (the safe point included).
    pub dry_run: bool,
}

impl Default for GcConfig {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(600),
            batch_rows: 256,
            dry_run: false,
        }
    }
}

impl GcConfig {
    /// Sets [`Self::grace`].
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets [`Self::batch_rows`] (at least 1).
    #[must_use]
    pub fn with_batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = rows.max(1);
        self
    }

    /// Sets [`Self::dry_run`].
    #[must_use]
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

/// What one run did (or, dry, would do) in one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableGc {
    /// The table.
    pub table: Bytes,
    /// Rows whose write records were examined.
    pub rows: u64,
    /// Locks below the safe point resolved (rolled forward or back).
    pub locks_resolved: u64,
    /// Locks below the safe point whose owner still looked alive (their columns were skipped).
    pub locks_left: u64,
    /// Committed write records deleted (superseded, or a delete that was the newest).
    pub writes_deleted: u64,
    /// Rollback records deleted.
    pub rollbacks_deleted: u64,
    /// Data versions deleted.
    pub data_deleted: u64,
    /// Notify versions below the safe point deleted because no observer is registered for
    /// their column (see [`crate::observer_registry`]).
    pub notifications_deleted: u64,
    /// Write records of orphaned acks deleted (an observer's ack of a column with no value
    /// and no pending notification at the safe point; see the module docs).
    pub acks_deleted: u64,
}

impl TableGc {
    /// Cells deleted (or, dry, that would be).
    pub fn cells_deleted(&self) -> u64 {
        self.writes_deleted
            + self.rollbacks_deleted
            + self.data_deleted
            + self.notifications_deleted
            + self.acks_deleted
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcReport {
    /// The safe point before the run.
    pub previous_safe_point: u64,
    /// The safe point the run collected below (dry: would have).
    pub safe_point: u64,
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// Workers whose lease was live.
    pub live_workers: usize,
    /// Lease rows of dead workers deleted.
    pub leases_deleted: u64,
    /// Per table, in table order.
    pub tables: Vec<TableGc>,
}

impl GcReport {
    /// Sums over every table.
    pub fn total(&self) -> TableGc {
        let mut sum = TableGc {
            table: Bytes::from_static(b"(all)"),
            ..TableGc::default()
        };
        for t in &self.tables {
            sum.rows += t.rows;
            sum.locks_resolved += t.locks_resolved;
            sum.locks_left += t.locks_left;
            sum.writes_deleted += t.writes_deleted;
            sum.rollbacks_deleted += t.rollbacks_deleted;
            sum.data_deleted += t.data_deleted;
            sum.notifications_deleted += t.notifications_deleted;
            sum.acks_deleted += t.acks_deleted;
        }
        sum
    }
}

/// Where a run is, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GcProgress<'a> {
    /// The safe point is fixed; `tables` tables follow.
    Started {
        /// The safe point.
        safe_point: u64,
        /// Tables to walk (twice: locks, then versions).
        tables: usize,
    },
    /// Locks of `table` resolved so far.
    Locks {
        /// The table.
        table: &'a [u8],
        /// Locks looked at so far.
        seen: u64,
    },
    /// Rows of `table` collected so far.
    Versions {
        /// The table.
        table: &'a [u8],
        /// Rows done so far.
        rows: u64,
    },
}

impl<S: RowStore> Client<S> {
    /// Runs garbage collection once (see [`crate::gc`]); `progress` hears where it is.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, GcConfig};
    /// # use percolator_core::gc::GcProgress;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// for value in ["v1", "v2", "v3"] {
    ///     let mut txn = client.begin().await?;
    ///     txn.set("docs", "a", "contents", value)?;
    ///     txn.commit().await?;
    /// }
    /// // No grace: collect below the oldest snapshot in use (none is open here).
    /// let config = GcConfig::default().with_grace(Duration::ZERO);
    /// let mut tables = 0;
    /// let report = client
    ///     .gc(&config, |step| {
    ///         if let GcProgress::Started { tables: n, .. } = step {
    ///             tables = n;
    ///         }
    ///     })
    ///     .await?;
    /// assert_eq!(tables, 1);
    /// // The two superseded versions are gone; the newest stays readable.
    /// assert_eq!(report.total().writes_deleted, 2);
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.get("docs", "a", "contents").await?.as_deref(), Some(&b"v3"[..]));
    /// # client.shutdown().await }
    /// ```
    pub async fn gc(
        &self,
        config: &GcConfig,
        mut progress: impl FnMut(GcProgress<'_>),
    ) -> Result<GcReport> {
        let inner = &self.inner;
        let store = &inner.store;
        // Our own publication is fresh; other workers' are at most a third of a lease old.
        if let Some(renewal) = &inner.renewal
            && inner.safety.lease_holds(inner.clock.now_ms())
        {
            renewal.renew().await?;
        }
        let now_ts = inner.timestamp().await?;
        let now_ms = inner.clock.now_ms();
        let liveness = StoreLiveness::new(Arc::clone(store));
        let leases = liveness.leases().await?;
        let allowed = safe_point::allowed_by(&leases, now_ts, now_ms, span_of(config.grace));
        let previous = safe_point::read(store.as_ref()).await?;
        let safe_point = if config.dry_run {
            previous.max(allowed)
        } else {
            safe_point::advance(store.as_ref(), allowed).await?
        };
        inner.safety.observe_safe_point(safe_point);
        let mut report = GcReport {
            previous_safe_point: previous,
            safe_point,
            dry_run: config.dry_run,
            live_workers: leases.iter().filter(|l| l.until_ms >= now_ms).count(),
            ..GcReport::default()
        };
        let tables: Vec<Bytes> = store
            .tables()
            .await?
            .into_iter()
            .filter(|t| !t.starts_with(RESERVED_PREFIX))
            .collect();
        progress(GcProgress::Started {
            safe_point,
            tables: tables.len(),
        });
        let mut stats: Vec<TableGc> = tables
            .iter()
            .map(|t| TableGc {
                table: t.clone(),
                ..TableGc::default()
            })
            .collect();
        // 2. Every lock below the safe point, in every table, before any write record goes.
        let mut skipped: HashSet<CellAddr> = HashSet::new();
        if safe_point > 0 {
            for (table, stat) in tables.iter().zip(&mut stats) {
                self.gc_locks(table, safe_point, config, stat, &mut skipped, &mut progress)
                    .await?;
            }
        }
        // 3. Versions.
        for (table, stat) in tables.iter().zip(&mut stats) {
            self.gc_versions(table, safe_point, config, stat, &skipped, &mut progress)
                .await?;
        }
        // 4. Notifications nobody will consume: the registry as of now names no observer (and
        // no writer declared) their column.
        if safe_point > 0 {
            self.refresh_observed_columns().await?;
            for (table, stat) in tables.iter().zip(&mut stats) {
                self.gc_unobserved_notifications(table, safe_point, config, stat)
                    .await?;
            }
        }
        report.tables = stats;
        // 5. Dead workers' leases.
        for lease in leases.iter().filter(|l| l.until_ms < now_ms) {
            if config.dry_run || liveness.remove_if_unchanged(lease).await? {
                report.leases_deleted += 1;
            }
        }
        // 6. The store's own history.
        if !config.dry_run && safe_point > 0 {
            store.collect_garbage(safe_point).await?;
        }
        Ok(report)
    }

    async fn gc_locks(
        &self,
        table: &Bytes,
        safe_point: u64,
        config: &GcConfig,
        stat: &mut TableGc,
        skipped: &mut HashSet<CellAddr>,
        progress: &mut impl FnMut(GcProgress<'_>),
    ) -> Result<()> {
        let mut start = Bound::Unbounded;
        let mut seen = 0;
        loop {
            let locks = FamilyRead::all(Family::Lock).ts(TsRange::new(0, safe_point - 1));
            let rows = scan_page(
                self.inner.store.as_ref(),
                table,
                &start,
                locks,
                config.batch_rows,
            )
            .await?;
            let full = rows.len() >= config.batch_rows;
            for row in &rows {
                for cell in &row.cells {
                    seen += 1;
                    let addr = CellAddr::new(table.clone(), row.row.clone(), cell.column.clone());
                    if config.dry_run {
                        stat.locks_resolved += 1;
                        continue;
                    }
                    let lock = LockRecord::decode(&cell.value)?;
                    if self.inner.resolve_lock(&addr, cell.ts, &lock).await? {
                        stat.locks_resolved += 1;
                    } else {
                        stat.locks_left += 1;
                        skipped.insert(addr);
                    }
                }
            }
            progress(GcProgress::Locks { table, seen });
            match rows.last() {
                Some(last) if full => start = Bound::Excluded(last.row.clone()),
                _ => return Ok(()),
            }
        }
    }

    async fn gc_versions(
        &self,
        table: &Bytes,
        safe_point: u64,
        config: &GcConfig,
        stat: &mut TableGc,
        skipped: &HashSet<CellAddr>,
        progress: &mut impl FnMut(GcProgress<'_>),
    ) -> Result<()> {
        let store = &self.inner.store;
        let limits = store.limits();
        let mut start = Bound::Unbounded;
        loop {
            let writes = FamilyRead::all(Family::Write);
            let rows = scan_page(store.as_ref(), table, &start, writes, config.batch_rows).await?;
            let full = rows.len() >= config.batch_rows;
            let mut batch = Vec::new();
            for row in &rows {
                stat.rows += 1;
                let skip = |column: &Bytes| {
                    skipped.contains(&CellAddr::new(
                        table.clone(),
                        row.row.clone(),
                        column.clone(),
                    ))
                };
                let mut plan = plan_row(&row.cells, safe_point, skip)?;
                let watched = plan.watched_columns();
                let notified = if watched.is_empty() {
                    Notified::default()
                } else {
                    self.notified_columns(table, &row.row, watched, safe_point)
                        .await?
                };
                let orphaned_acks = plan.drop_orphaned_acks(&notified.at_or_below, skip);
                let deletes = plan.into_deletes(&notified.any);
                stat.writes_deleted += deletes.writes;
                stat.rollbacks_deleted += deletes.rollbacks;
                stat.acks_deleted += orphaned_acks;
                stat.data_deleted += deletes.data;
                if config.dry_run || deletes.cells.is_empty() {
                    continue;
                }
                for chunk in deletes.cells.chunks(limits.max_row_ops.max(1)) {
                    batch.push(RowMutation {
                        table: table.clone(),
                        row: row.row.clone(),
                        conditions: Vec::new(),
                        mutations: chunk
                            .iter()
                            .map(|(family, column, ts)| Mutation::Delete {
                                family: *family,
                                column: column.clone(),
                                ts: *ts,
                            })
                            .collect(),
                    });
                }
            }
            for chunk in batch.chunks(limits.max_batch_rows.max(1)) {
                store.mutate_rows(chunk.to_vec()).await?;
            }
            progress(GcProgress::Versions {
                table,
                rows: stat.rows,
            });
            match rows.last() {
                Some(last) if full => start = Bound::Excluded(last.row.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// Deletes notify versions below `safe_point` of `table`'s columns that have no registration.
    async fn gc_unobserved_notifications(
        &self,
        table: &Bytes,
        safe_point: u64,
        config: &GcConfig,
        stat: &mut TableGc,
    ) -> Result<()> {
        let store = &self.inner.store;
        let limits = store.limits();
        let mut start = Bound::Unbounded;
        loop {
            let notify = FamilyRead::all(Family::Notify).ts(TsRange::new(0, safe_point - 1));
            let rows = scan_page(store.as_ref(), table, &start, notify, config.batch_rows).await?;
            let full = rows.len() >= config.batch_rows;
            let mut batch = Vec::new();
            for row in &rows {
                let doomed: Vec<Mutation> = row
                    .cells
                    .iter()
                    .filter(|cell| !self.is_registered(table, &cell.column))
                    .map(|cell| Mutation::Delete {
                        family: Family::Notify,
                        column: cell.column.clone(),
                        ts: cell.ts,
                    })
                    .collect();
                stat.notifications_deleted += doomed.len() as u64;
                if config.dry_run {
                    continue;
                }
                for chunk in doomed.chunks(limits.max_row_ops.max(1)) {
                    batch.push(RowMutation {
                        table: table.clone(),
                        row: row.row.clone(),
                        conditions: Vec::new(),
                        mutations: chunk.to_vec(),
                    });
                }
            }
            for chunk in batch.chunks(limits.max_batch_rows.max(1)) {
                store.mutate_rows(chunk.to_vec()).await?;
            }
            match rows.last() {
                Some(last) if full => start = Bound::Excluded(last.row.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// Which of `columns` of one row have notifications pending, and which of them at or below
    /// `safe_point`.
    async fn notified_columns(
        &self,
        table: &Bytes,
        row: &Bytes,
        columns: BTreeSet<Bytes>,
        safe_point: u64,
    ) -> Result<Notified> {
        let answer = self
            .inner
            .store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: table.clone(),
                row: row.clone(),
                reads: vec![
                    FamilyRead::all(Family::Notify)
                        .columns(Columns::Only(columns.into_iter().collect())),
                ],
            })
            .await?;
        let mut notified = Notified::default();
        for cell in answer.into_iter().flatten() {
            if cell.ts <= safe_point {
                notified.at_or_below.insert(cell.column.clone());
            }
            notified.any.insert(cell.column);
        }
        Ok(notified)
    }
}

/// The columns of one row with pending notifications.
#[derive(Debug, Default)]
struct Notified {
    /// With a notification at or below the safe point.
    at_or_below: HashSet<Bytes>,
    /// With any notification.
    any: HashSet<Bytes>,
}

/// What to delete in one row, planned from its write records alone.
///
/// A data version exists only at the start timestamp of a put record without an inline value:
/// a transaction writes data at prewrite, and a rollback deletes the data with the lock. So the
/// data to delete is that of the put records deleted, and no data needs to be read.
#[derive(Debug, Default)]
struct RowPlan {
    /// Write and rollback records to delete (the newest delete records are in
    /// [`Self::newest_deletes`] until [`Self::into_deletes`] decides).
    write_deletes: Vec<(Bytes, u64)>,
    writes: u64,
    rollbacks: u64,
    /// Per column, the start timestamps of the put records that stay: their data stays.
    referenced: BTreeMap<Bytes, HashSet<u64>>,
    /// `(column, start_ts)` of the data versions of the put records planned for deletion.
    released_data: Vec<(Bytes, u64)>,
    /// Per collected column whose newest committed write at or below the safe point is a put:
    /// that record (the version kept).
    kept_puts: BTreeMap<Bytes, KeptPut>,
    /// Per collected column whose newest committed write at or below the safe point is a
    /// delete: that record's commit timestamp (deleted, unless a notification still waits on
    /// the column).
    newest_deletes: BTreeMap<Bytes, u64>,
}

/// The put record a column keeps at the safe point.
#[derive(Debug, Clone, Copy)]
struct KeptPut {
    commit_ts: u64,
    start_ts: u64,
    /// Whether its value is a data version (not inline in the record).
    has_data: bool,
}

/// One row's deletions, data versions first (see [`RowPlan::into_deletes`]).
#[derive(Debug, Default)]
struct RowDeletes {
    cells: Vec<(Family, Bytes, u64)>,
    writes: u64,
    rollbacks: u64,
    data: u64,
}

impl RowPlan {
    /// `(ack column, observed column)` of every ack this plan keeps a version of at or below the
    /// safe point although its observed column has no value there.
    fn ack_candidates(&self) -> impl Iterator<Item = (Bytes, Bytes)> + '_ {
        self.kept_puts.keys().filter_map(|column| {
            let (_, observed) = parse_ack_column(column)?;
            (!self.kept_puts.contains_key(observed))
                .then(|| (column.clone(), Bytes::copy_from_slice(observed)))
        })
    }

    /// The columns whose pending notifications decide part of the plan: the observed columns of
    /// the ack candidates and the columns whose newest record is a delete. Usually none, so most
    /// rows need no read.
    fn watched_columns(&self) -> BTreeSet<Bytes> {
        let mut watched: BTreeSet<Bytes> = self.ack_candidates().map(|(_, c)| c).collect();
        watched.extend(self.newest_deletes.keys().cloned());
        watched
    }

    /// Deletes the kept version of every candidate ack whose observed column has no
    /// notification at or below the safe point (`notified`) and no lock left there (`skip`);
    /// its data goes with it. Returns the write records deleted.
    fn drop_orphaned_acks(
        &mut self,
        notified: &HashSet<Bytes>,
        skip: impl Fn(&Bytes) -> bool,
    ) -> u64 {
        let orphans: Vec<(Bytes, Bytes)> = self
            .ack_candidates()
            .filter(|(_, observed)| !notified.contains(observed) && !skip(observed))
            .collect();
        for (ack, _) in &orphans {
            if let Some(kept) = self.kept_puts.remove(ack) {
                self.write_deletes.push((ack.clone(), kept.commit_ts));
                self.writes += 1;
                if let Some(referenced) = self.referenced.get_mut(ack) {
                    referenced.remove(&kept.start_ts);
                }
                if kept.has_data {
                    self.released_data.push((ack.clone(), kept.start_ts));
                }
            }
        }
        orphans.len() as u64
    }

    /// The row's deletions. The newest delete record of a column stays while any notification
    /// on the column is pending (`notified`): an observer yet to run on that change must see
    /// that the value was deleted, and when. Without the record a strong observer finds neither
    /// a value nor a commit, takes the change for nothing, and skips it for good (a cluster
    /// emptied by a recrawl stayed exported).
    ///
    /// Data versions come before the write records: a batch cut between them (a crash, a row
    /// over the store's per-row limit) then leaves write records below the safe point without
    /// their data, which no snapshot reads, never data that no record points at.
    fn into_deletes(mut self, notified: &HashSet<Bytes>) -> RowDeletes {
        for (column, ts) in std::mem::take(&mut self.newest_deletes) {
            if !notified.contains(&column) {
                self.write_deletes.push((column, ts));
                self.writes += 1;
            }
        }
        let mut cells: Vec<(Family, Bytes, u64)> = self
            .released_data
            .into_iter()
            .filter(|(column, start_ts)| {
                !self
                    .referenced
                    .get(column)
                    .is_some_and(|kept| kept.contains(start_ts))
            })
            .map(|(column, start_ts)| (Family::Data, column, start_ts))
            .collect();
        let data = cells.len() as u64;
        cells.extend(
            self.write_deletes
                .into_iter()
                .map(|(column, ts)| (Family::Write, column, ts)),
        );
        RowDeletes {
            cells,
            writes: self.writes,
            rollbacks: self.rollbacks,
            data,
        }
    }
}

/// Plans one row from all its write records (by column, newest first); `skip` names columns
/// to leave alone.
fn plan_row(cells: &[Cell], safe_point: u64, skip: impl Fn(&Bytes) -> bool) -> Result<RowPlan> {
    let mut plan = RowPlan::default();
    let mut i = 0;
    while i < cells.len() {
        let column = &cells[i].column;
        let end = cells[i..]
            .iter()
            .position(|c| c.column != *column)
            .map_or(cells.len(), |n| i + n);
        let versions = &cells[i..end];
        i = end;
        if skip(column) {
            continue;
        }
        let referenced = plan.referenced.entry(column.clone()).or_default();
        // Newest first: above the safe point everything stays.
        let mut kept_committed = false;
        for cell in versions {
            let (record, inline) = WriteRecord::decode_with_value(&cell.value)?;
            let has_data = record.kind == WriteKind::Put && inline.is_none();
            if cell.ts > safe_point {
                if record.kind != WriteKind::Rollback {
                    referenced.insert(record.start_ts);
                }
                continue;
            }
            if !kept_committed {
                match record.kind {
                    WriteKind::Rollback => {}
                    WriteKind::Put => {
                        kept_committed = true;
                        referenced.insert(record.start_ts);
                        plan.kept_puts.insert(
                            column.clone(),
                            KeptPut {
                                commit_ts: cell.ts,
                                start_ts: record.start_ts,
                                has_data,
                            },
                        );
                        continue;
                    }
                    WriteKind::Delete => {
                        kept_committed = true;
                        plan.newest_deletes.insert(column.clone(), cell.ts);
                        continue;
                    }
                }
            }
            if record.kind == WriteKind::Rollback {
                plan.rollbacks += 1;
            } else {
                plan.writes += 1;
            }
            if has_data {
                plan.released_data.push((column.clone(), record.start_ts));
            }
            plan.write_deletes.push((column.clone(), cell.ts));
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(column: &str, ts: u64, kind: WriteKind, start_ts: u64) -> Cell {
        Cell {
            column: Bytes::copy_from_slice(column.as_bytes()),
            ts,
            value: WriteRecord { kind, start_ts }.encode(),
        }
    }

    fn deleted(deletes: &RowDeletes) -> Vec<(Family, &[u8], u64)> {
        deletes
            .cells
            .iter()
            .map(|(family, c, ts)| (*family, c.as_ref(), *ts))
            .collect()
    }

    #[test]
    fn keeps_the_newest_committed_at_or_below_and_everything_above() {
        let cells = vec![
            write("a", 90, WriteKind::Put, 85),
            write("a", 50, WriteKind::Rollback, 50),
            write("a", 40, WriteKind::Put, 35),
            write("a", 30, WriteKind::Rollback, 30),
            write("a", 20, WriteKind::Put, 15),
            write("b", 45, WriteKind::Delete, 42),
            write("b", 10, WriteKind::Put, 5),
        ];
        let plan = plan_row(&cells, 60, |_| false).unwrap();
        assert_eq!(
            plan.referenced[&Bytes::from_static(b"a")],
            HashSet::from([85, 35])
        );
        assert!(plan.referenced[&Bytes::from_static(b"b")].is_empty());
        assert_eq!(
            plan.watched_columns(),
            BTreeSet::from([Bytes::from_static(b"b")]),
            "a column whose newest record is a delete asks for its notifications"
        );
        let deletes = plan.into_deletes(&HashSet::new());
        assert_eq!(
            deleted(&deletes),
            vec![
                (Family::Data, &b"a"[..], 15),
                (Family::Data, &b"b"[..], 5),
                (Family::Write, &b"a"[..], 50),
                (Family::Write, &b"a"[..], 30),
                (Family::Write, &b"a"[..], 20),
                (Family::Write, &b"b"[..], 10),
                (Family::Write, &b"b"[..], 45),
            ],
            "data first, then every record but the kept put"
        );
        assert_eq!((deletes.writes, deletes.rollbacks, deletes.data), (3, 2, 2));
        let none = plan_row(&cells, 60, |c| c.as_ref() == b"a").unwrap();
        assert_eq!(
            none.into_deletes(&HashSet::new()).cells.len(),
            3,
            "a skipped column keeps everything"
        );
    }

    #[test]
    fn a_pending_notification_keeps_the_newest_delete() {
        let cells = vec![
            write("b", 45, WriteKind::Delete, 42),
            write("b", 10, WriteKind::Put, 5),
        ];
        let plan = plan_row(&cells, 60, |_| false).unwrap();
        let deletes = plan.into_deletes(&HashSet::from([Bytes::from_static(b"b")]));
        assert_eq!(
            deleted(&deletes),
            vec![(Family::Data, &b"b"[..], 5), (Family::Write, &b"b"[..], 10)]
        );
        assert_eq!(deletes.writes, 1);
    }

    #[test]
    fn an_inline_put_has_no_data_to_delete() {
        let inline = |ts: u64, start_ts: u64| Cell {
            column: Bytes::from_static(b"a"),
            ts,
            value: WriteRecord::encode_inline(start_ts, b"short"),
        };
        let cells = vec![inline(40, 35), inline(20, 15)];
        let deletes = plan_row(&cells, 60, |_| false)
            .unwrap()
            .into_deletes(&HashSet::new());
        assert_eq!(deleted(&deletes), vec![(Family::Write, &b"a"[..], 20)]);
        assert_eq!(deletes.data, 0);
    }
}
