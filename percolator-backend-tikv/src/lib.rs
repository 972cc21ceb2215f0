//! # percolator-backend-tikv
//!
//! A [`RowStore`] on [TiKV](https://tikv.org) through `tikv-client` 0.4, with PD's TSO as the
//! timestamp oracle ([`PdOracle`]). This is how a deployment goes past one machine: storage on
//! TiKV, timestamps from PD, many worker processes, the same application code.
//!
//! ## Mapping
//! - Key = `enc(namespace) ++ 'f' ++ family ++ CellKey::encode(table, row, column, ts)`: one key
//!   range per family (locality groups: the notify family scans alone), rows contiguous inside
//!   it, versions newest first. The namespace lets several stores (or test runs) share a cluster.
//! - A whole `mutate_rows` batch runs as **one optimistic TiKV transaction** (one-phase commit
//!   when its keys share a region): conditions are evaluated with transactional reads at its
//!   start timestamp, the mutations of every item whose conditions hold are buffered, then the
//!   transaction commits.
//!
//! ## Why it is atomic per row (the correctness argument)
//! TiKV's raw compare-and-swap is per key and needs every writer of that key in atomic mode, so it
//! cannot make a condition on one key and writes to others atomic. Its transactional API can, but
//! optimistic transactions only detect **write-write** conflicts: a condition read of a key we do
//! not write (for example "no lock in this range") would not be protected against a concurrent
//! writer (write skew). So every applied row mutation also writes its row's **guard key**
//! (`enc(namespace) ++ 'g' ++ enc(table) ++ enc(row)`). Two row mutations of the same row
//! therefore always write a common key; TiKV lets at most one of two overlapping transactions
//! commit, the other fails with a write conflict and the batch is re-run from scratch (conditions
//! re-read at a new start timestamp). Hence applied row mutations of one row are serializable, and
//! each one's conditions held at its start timestamp with no conflicting row mutation committed
//! in between: exactly the per-row conditional mutation Percolator needs. An item whose
//! conditions fail writes nothing; its answer is the state at the start timestamp.
//! Reads (`read_row`, `scan`) use a snapshot at a fresh PD timestamp, so they are consistent
//! across families and rows.
//!
//! ## Retries and ambiguity
//! - Region errors, leader changes and stale region caches are retried inside tikv-client.
//! - A write conflict at commit, or an unavailable read before commit, re-runs the batch (up to
//!   8 times for a batch on one row, 3 for one on several, with core's [`Backoff`] from 2 ms
//!   doubling to 512 ms): nothing was applied.
//! - A batch on several rows that still conflicts is **split per row**: each row's items (in
//!   batch order) run in a transaction of their own, concurrently, each re-run up to 8 times.
//!   A batch is atomic per row only, so this keeps its meaning, and one hot row (a writer racing
//!   GC's deletes, say) does not starve the other rows of the batch. If a row still fails, the
//!   call returns `StoreError::Unavailable`: that row was not applied, other rows may have been.
//! - An error while committing (timeout, lost answer, `UndeterminedError`) is **ambiguous**: the
//!   batch may or may not have been applied. It is returned as `StoreError::Unavailable`, which
//!   the transaction layer treats as "outcome unknown" and settles by reading back (a prewrite
//!   recognises its own lock; a primary commit reads the primary's write record).
//!
//! ## Limits (checked before any lock is written)
//! Encoded cell keys up to 4 KiB (TiKV's default key limit is 8 KiB; the namespace and family
//! tag add at most 74 bytes), values up to 4 MiB (TiKV's default `txn-entry-size-limit` is
//! 6 MiB), 1 024 rows per batch, which bounds the size of one TiKV transaction. Data is
//! persistent, replicated and durable when a commit is acknowledged; `sync` is a no-op.
//!
//! ## Running against a cluster
//! ```text
//! tiup playground --mode tikv-slim          # PD on 127.0.0.1:2379
//! cargo xtask conformance --backend tikv --pd 127.0.0.1:2379
//! ```
//! Without an address the cluster suite is skipped (and reported as skipped); the same suite
//! always runs against [`fake::FakeKv`], an in-process double with TiKV's transactional
//! semantics, so the mapping and its retry logic are exercised in CI.

pub mod api;
pub mod client;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod fake;
pub mod oracle;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use percolator_core::backend::key::{self, CellKey};
use percolator_core::backend::scan::{row_past_end, truncate_versions, versions_taken};
use percolator_core::backend::validate::validate_batch;
use percolator_core::internal::backoff::Backoff;
use percolator_core::{
    Cell, Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowCells,
    RowMutation, RowStore, Scan, StoreError, StoreLimits, TsRange,
};
use rand::Rng as _;

pub use api::{KvApi, KvError, KvTxn};
pub use client::{TikvClient, TikvConfig};
pub use oracle::PdOracle;

/// The limits of [`TikvStore`].
pub const TIKV_LIMITS: StoreLimits = StoreLimits::new(4 * 1024, 4 * 1024 * 1024, 1024)
    .with_persistent(true)
    .with_durable_after_sync(true)
    .with_distributed(true);

/// Longest namespace accepted by [`TikvStore::new`].
pub const MAX_NAMESPACE: usize = 64;
const PAGE: u32 = 1024;
/// Tries of a whole batch before it is split into one transaction per row.
const WHOLE_BATCH_ATTEMPTS: usize = 3;
/// Tries of one row's items once a batch is split.
const BATCH_ATTEMPTS: usize = 8;
/// Backoff between re-runs of a batch: up to 2 ms, doubling to 512 ms.
const BATCH_BACKOFF: (Duration, Duration) = (Duration::from_millis(2), Duration::from_millis(512));

/// The TiKV-backed store, generic over the client so that tests can use [`fake::FakeKv`].
pub struct TikvStore<A: KvApi> {
    api: Arc<A>,
    namespace: Vec<u8>,
    /// The cluster's id and the namespace ([`RowStore::store_id`]).
    id: String,
}

impl<A: KvApi> std::fmt::Debug for TikvStore<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TikvStore")
            .field("namespace", &String::from_utf8_lossy(&self.namespace))
            .finish()
    }
}

impl TikvStore<TikvClient> {
    /// Connects to a cluster and uses `namespace` as the key prefix of this store.
    pub async fn connect(config: &TikvConfig, namespace: &[u8]) -> Result<Self, StoreError> {
        let client = TikvClient::connect(config).await.map_err(store_error)?;
        Self::new(Arc::new(client), namespace)
    }
}

fn store_error(e: KvError) -> StoreError {
    match e {
        KvError::Unavailable(m) => StoreError::Unavailable(format!("tikv: {m}")),
        KvError::Conflict(m) => StoreError::Unavailable(format!("tikv: conflict: {m}")),
        KvError::Other(m) => StoreError::Backend {
            message: format!("tikv: {m}"),
            source: None,
        },
    }
}

/// The exclusive end of a scan over `prefix` (our prefixes end in a marker byte, never 0xFF).
fn successor(prefix: &[u8]) -> Vec<u8> {
    key::prefix_successor(prefix).unwrap_or_else(|| vec![0xFF; prefix.len() + 1])
}

/// Reads every pair in `[start, end)`, page by page, stopping after `max` pairs.
async fn scan_all<T: KvTxn>(
    txn: &mut T,
    start: Vec<u8>,
    end: Vec<u8>,
    max: Option<usize>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
    let mut out = Vec::new();
    let mut cursor = start;
    loop {
        let want = max.map_or(PAGE as usize, |m| (m - out.len()).min(PAGE as usize));
        if want == 0 {
            return Ok(out);
        }
        let page = txn.scan(cursor.clone(), end.clone(), want as u32).await?;
        let full = page.len() == want;
        if let Some((last, _)) = page.last() {
            cursor = last.clone();
            cursor.push(0);
        }
        out.extend(page);
        if !full {
            return Ok(out);
        }
    }
}

impl<A: KvApi> TikvStore<A> {
    /// A store over `api` whose keys all start with `enc(namespace)`.
    pub fn new(api: Arc<A>, namespace: &[u8]) -> Result<Self, StoreError> {
        if namespace.len() > MAX_NAMESPACE {
            return Err(StoreError::InvalidInput(format!(
                "namespace is {} bytes, at most {MAX_NAMESPACE}",
                namespace.len()
            )));
        }
        Ok(Self {
            id: format!("{}/{}", api.cluster_id(), namespace.escape_ascii()),
            api,
            namespace: key::table_prefix(namespace),
        })
    }

    /// A second handle on the same data (what a restarted process would open); it has the
    /// same [`RowStore::store_id`].
    pub fn reopen(&self) -> Self {
        Self {
            api: Arc::clone(&self.api),
            namespace: self.namespace.clone(),
            id: self.id.clone(),
        }
    }

    /// The client (for [`PdOracle::new`]).
    pub fn api(&self) -> &Arc<A> {
        &self.api
    }

    /// PD's TSO ([`PdOracle`]) on this cluster: the oracle every process on it must use. Give it
    /// to `ClientBuilder::oracle`; a client built without an oracle on this (distributed) store
    /// is refused with `Error::OracleRequired`.
    pub fn pd_oracle(&self) -> Arc<dyn percolator_core::TimestampOracle> {
        Arc::new(PdOracle::new(Arc::clone(&self.api)))
    }

    fn family_prefix(&self, family: Family) -> Vec<u8> {
        let mut k = self.namespace.clone();
        k.push(b'f');
        k.push(family.index() as u8);
        k
    }

    fn cell_key(
        &self,
        family: Family,
        table: &[u8],
        row: &[u8],
        column: &[u8],
        ts: u64,
    ) -> Vec<u8> {
        let mut k = self.family_prefix(family);
        k.extend_from_slice(&key::column_prefix(table, row, column));
        key::encode_ts(&mut k, ts);
        k
    }

    fn guard_key(&self, table: &[u8], row: &[u8]) -> Vec<u8> {
        let mut k = self.namespace.clone();
        k.push(b'g');
        k.extend_from_slice(&key::row_prefix(table, row));
        k
    }

    /// `[start, end)` covering versions `ts` of one column.
    fn version_range(
        &self,
        family: Family,
        table: &[u8],
        row: &[u8],
        column: &[u8],
        ts: TsRange,
    ) -> (Vec<u8>, Vec<u8>) {
        let start = self.cell_key(family, table, row, column, ts.hi);
        let mut end = self.cell_key(family, table, row, column, ts.lo);
        end.push(0);
        (start, end)
    }

    fn decode(&self, family: Family, k: &[u8]) -> Result<CellKey, StoreError> {
        let prefix = self.family_prefix(family);
        let rest = k.strip_prefix(prefix.as_slice()).ok_or_else(|| {
            StoreError::Corrupt("tikv returned a key outside the scanned family".into())
        })?;
        Ok(CellKey::decode(rest)?)
    }

    async fn read_family<T: KvTxn>(
        &self,
        txn: &mut T,
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Vec<Cell>, StoreError> {
        let mut out = Vec::new();
        if read.ts.is_empty() {
            return Ok(out);
        }
        match &read.columns {
            Columns::Only(list) => {
                let mut list = list.clone();
                list.sort();
                list.dedup();
                for column in &list {
                    let (start, end) = self.version_range(read.family, table, row, column, read.ts);
                    for (k, v) in scan_all(txn, start, end, read.max_versions)
                        .await
                        .map_err(store_error)?
                    {
                        let cell = self.decode(read.family, &k)?;
                        out.push(Cell {
                            column: column.clone(),
                            ts: cell.ts,
                            value: Bytes::from(v),
                        });
                    }
                }
            }
            Columns::All => {
                let mut start = self.family_prefix(read.family);
                start.extend_from_slice(&key::row_prefix(table, row));
                let end = successor(&start);
                for (k, v) in scan_all(txn, start, end, None).await.map_err(store_error)? {
                    let cell = self.decode(read.family, &k)?;
                    if read.ts.contains(cell.ts) {
                        out.push(Cell {
                            column: Bytes::from(cell.column),
                            ts: cell.ts,
                            value: Bytes::from(v),
                        });
                    }
                }
                truncate_versions(&mut out, read.max_versions);
            }
        }
        Ok(out)
    }

    async fn holds<T: KvTxn>(
        &self,
        txn: &mut T,
        table: &[u8],
        row: &[u8],
        condition: &Condition,
    ) -> Result<bool, KvError> {
        Ok(match condition {
            // Snapshot reads are not tracked (`tracks_snapshot_reads: false`): TiKV keeps its
            // `max_ts` per node, out of reach of its client APIs.
            Condition::NoSnapshotReadSince { .. } => false,
            Condition::Absent { ts, .. } if ts.is_empty() => true,
            Condition::Absent { family, column, ts } => {
                let (start, end) = self.version_range(*family, table, row, column, *ts);
                txn.scan(start, end, 1).await?.is_empty()
            }
            Condition::Exists { family, column, ts } => txn
                .get(self.cell_key(*family, table, row, column, *ts))
                .await?
                .is_some(),
            Condition::Equals {
                family,
                column,
                ts,
                value,
            } => {
                txn.get(self.cell_key(*family, table, row, column, *ts))
                    .await?
                    .as_deref()
                    == Some(value.as_ref())
            }
        })
    }

    /// Runs `batch` as one optimistic transaction, re-running it on a write conflict or an
    /// unavailable read (nothing applied) up to `attempts` times. An error is returned only when
    /// the outcome is unknown or the failure is not retryable.
    async fn apply_batch(
        &self,
        batch: &[RowMutation],
        attempts: usize,
    ) -> Result<BatchRun, StoreError> {
        let mut last = String::new();
        let mut backoff = Backoff::new(BATCH_BACKOFF.0, BATCH_BACKOFF.1);
        for attempt in 0..attempts {
            let mut txn = self.api.begin().await.map_err(store_error)?;
            match self.stage(&mut txn, batch).await {
                Ok((outcomes, false)) => {
                    let _ = txn.rollback().await;
                    return Ok(BatchRun::Applied(outcomes));
                }
                Ok((outcomes, true)) => match txn.commit().await {
                    Ok(()) => return Ok(BatchRun::Applied(outcomes)),
                    Err(KvError::Conflict(m)) => last = m,
                    // The commit may have been applied: the caller must settle it by reading.
                    Err(KvError::Unavailable(m)) => {
                        return Err(StoreError::Unavailable(format!(
                            "tikv commit outcome unknown: {m}"
                        )));
                    }
                    Err(e @ KvError::Other(_)) => return Err(store_error(e)),
                },
                // Nothing was committed: safe to re-run.
                Err(KvError::Conflict(m) | KvError::Unavailable(m)) => {
                    let _ = txn.rollback().await;
                    last = m;
                }
                Err(e @ KvError::Other(_)) => {
                    let _ = txn.rollback().await;
                    return Err(store_error(e));
                }
            }
            tracing::debug!(attempt, reason = %last, "tikv batch re-run");
            backoff.wait().await;
        }
        Ok(BatchRun::Conflicted(last))
    }

    /// Applies the items of one row (one transaction, [`BATCH_ATTEMPTS`] tries); `whole` is why
    /// the batch they came from failed as a whole, if they were split from one.
    async fn apply_row_group(
        &self,
        items: &[RowMutation],
        whole: Option<&str>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        match self.apply_batch(items, BATCH_ATTEMPTS).await? {
            BatchRun::Applied(outcomes) => Ok(outcomes),
            BatchRun::Conflicted(last) => {
                let row = String::from_utf8_lossy(&items[0].row);
                Err(StoreError::Unavailable(match whole {
                    None => format!(
                        "tikv batch on row {row:?} not applied after {BATCH_ATTEMPTS} attempts \
                         (nothing committed): {last}"
                    ),
                    Some(whole) => format!(
                        "tikv batch not applied after {WHOLE_BATCH_ATTEMPTS} attempts as a \
                         whole ({whole}) and {BATCH_ATTEMPTS} on row {row:?} alone (nothing of \
                         that row committed; other rows of the batch may have been): {last}"
                    ),
                }))
            }
        }
    }

    /// Evaluates and buffers the whole batch in `txn`. Returns the outcomes and whether anything
    /// was written.
    async fn stage<T: KvTxn>(
        &self,
        txn: &mut T,
        batch: &[RowMutation],
    ) -> Result<(Vec<MutationOutcome>, bool), KvError> {
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut wrote = false;
        'items: for item in batch {
            for (i, condition) in item.conditions.iter().enumerate() {
                if !self.holds(txn, &item.table, &item.row, condition).await? {
                    outcomes.push(MutationOutcome::ConditionFailed { condition: i });
                    continue 'items;
                }
            }
            // The guard write makes concurrent row mutations of this row conflict (see crate docs).
            let nonce: u64 = rand::rng().random();
            txn.put(
                self.guard_key(&item.table, &item.row),
                nonce.to_be_bytes().to_vec(),
            )
            .await?;
            for m in &item.mutations {
                match m {
                    Mutation::Put {
                        family,
                        column,
                        ts,
                        value,
                    } => {
                        txn.put(
                            self.cell_key(*family, &item.table, &item.row, column, *ts),
                            value.to_vec(),
                        )
                        .await?;
                    }
                    Mutation::Delete { family, column, ts } => {
                        txn.delete(self.cell_key(*family, &item.table, &item.row, column, *ts))
                            .await?;
                    }
                    Mutation::DeleteRange { ts, .. } if ts.is_empty() => {}
                    Mutation::DeleteRange { family, column, ts } => {
                        let (start, end) =
                            self.version_range(*family, &item.table, &item.row, column, *ts);
                        for (k, _) in scan_all(txn, start, end, None).await? {
                            txn.delete(k).await?;
                        }
                    }
                }
            }
            wrote = true;
            outcomes.push(MutationOutcome::Applied);
        }
        Ok((outcomes, wrote))
    }
}

#[async_trait]
impl<A: KvApi> RowStore for TikvStore<A> {
    fn name(&self) -> &'static str {
        "tikv"
    }

    fn limits(&self) -> StoreLimits {
        TIKV_LIMITS
    }

    /// The cluster's id ([`KvApi::cluster_id`]: `tikv:` and the PD endpoints, or the fake's
    /// number), `/`, and the namespace (non-printable bytes escaped).
    fn store_id(&self) -> String {
        self.id.clone()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        let mut answers = self.read_rows(vec![request]).await?;
        answers
            .pop()
            .ok_or_else(|| StoreError::Corrupt("a row read got no answer".into()))
    }

    /// Every row under one TiKV snapshot (one timestamp from PD for the batch, not one per row).
    async fn read_rows(&self, requests: Vec<ReadRow>) -> Result<Vec<Vec<Vec<Cell>>>, StoreError> {
        let mut txn = self.api.snapshot().await.map_err(store_error)?;
        let mut answers = Vec::with_capacity(requests.len());
        for request in &requests {
            let mut out = Vec::with_capacity(request.reads.len());
            for read in &request.reads {
                out.push(
                    self.read_family(&mut txn, &request.table, &request.row, read)
                        .await?,
                );
            }
            answers.push(out);
        }
        let _ = txn.rollback().await;
        Ok(answers)
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        use std::ops::Bound;
        let family = self.family_prefix(request.read.family);
        let table = key::table_prefix(&request.table);
        let start = match &request.start {
            Bound::Included(r) => [family.as_slice(), &key::row_prefix(&request.table, r)].concat(),
            Bound::Excluded(r) => [
                family.as_slice(),
                &successor(&key::row_prefix(&request.table, r)),
            ]
            .concat(),
            Bound::Unbounded => [family.as_slice(), &table].concat(),
        };
        let end = [family.as_slice(), &successor(&table)].concat();
        let mut txn = self.api.snapshot().await.map_err(store_error)?;
        let mut out: Vec<RowCells> = Vec::new();
        let mut cursor = start;
        let max_versions = request.read.max_versions.unwrap_or(usize::MAX);
        'pages: loop {
            let page = txn
                .scan(cursor.clone(), end.clone(), PAGE)
                .await
                .map_err(store_error)?;
            let full = page.len() == PAGE as usize;
            // Where to go on after a page that ended among versions past `max_versions` (the
            // history of one column): straight to the next column, not through its history.
            let mut skip_to = None;
            for (k, v) in &page {
                skip_to = None;
                let cell = self.decode(request.read.family, k)?;
                if row_past_end(&cell.row, &request.end) {
                    break 'pages;
                }
                if !request.read.columns.matches(&cell.column) || !request.read.ts.contains(cell.ts)
                {
                    continue;
                }
                if versions_taken(&out, &cell.row, &cell.column) >= max_versions {
                    let column = key::column_prefix(&cell.table, &cell.row, &cell.column);
                    skip_to = Some([family.as_slice(), &successor(&column)].concat());
                    continue;
                }
                let new_row = out
                    .last()
                    .is_none_or(|r| r.row.as_ref() != cell.row.as_slice());
                if new_row {
                    if request.row_limit.is_some_and(|limit| out.len() >= limit) {
                        break 'pages;
                    }
                    out.push(RowCells {
                        row: Bytes::from(cell.row),
                        cells: Vec::new(),
                    });
                }
                if let Some(last) = out.last_mut() {
                    last.cells.push(Cell {
                        column: Bytes::from(cell.column),
                        ts: cell.ts,
                        value: Bytes::copy_from_slice(v),
                    });
                }
            }
            match (page.last(), skip_to) {
                (Some(_), Some(next)) if full => cursor = next,
                (Some((last, _)), None) if full => {
                    cursor = last.clone();
                    cursor.push(0);
                }
                _ => break,
            }
        }
        let _ = txn.rollback().await;
        Ok(out)
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        validate_batch(&batch, &TIKV_LIMITS)?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let first = &batch[0];
        if batch[1..]
            .iter()
            .all(|item| item.table == first.table && item.row == first.row)
        {
            // One row: splitting cannot help.
            return self.apply_row_group(&batch, None).await;
        }
        let whole = match self.apply_batch(&batch, WHOLE_BATCH_ATTEMPTS).await? {
            BatchRun::Applied(outcomes) => return Ok(outcomes),
            BatchRun::Conflicted(last) => last,
        };
        let groups = row_groups(&batch);
        // One hot row kept failing the whole batch: apply each row's items in a transaction of
        // their own, so that a conflict re-runs only the row it is on. Items on one row stay
        // together and in order; a batch promises atomicity per row only.
        tracing::debug!(rows = groups.len(), reason = %whole, "tikv batch split per row");
        let runs = groups.iter().map(|group| {
            let items: Vec<RowMutation> = group.iter().map(|&i| batch[i].clone()).collect();
            let whole = whole.as_str();
            async move { self.apply_row_group(&items, Some(whole)).await }
        });
        let results = futures::future::join_all(runs).await;
        let mut outcomes = vec![MutationOutcome::Applied; batch.len()];
        for (group, result) in groups.iter().zip(results) {
            for (&i, outcome) in group.iter().zip(result?) {
                outcomes[i] = outcome;
            }
        }
        Ok(outcomes)
    }

    async fn sync(&self) -> Result<(), StoreError> {
        // Acknowledged TiKV commits are already replicated and durable.
        Ok(())
    }

    /// Skips from table to table in each family's key range: one one-key scan per table.
    async fn tables(&self) -> Result<Vec<Bytes>, StoreError> {
        let mut tables = std::collections::BTreeSet::new();
        let mut txn = self.api.snapshot().await.map_err(store_error)?;
        for family in Family::ALL {
            let prefix = self.family_prefix(family);
            let end = successor(&prefix);
            let mut cursor = prefix.clone();
            loop {
                let page = txn
                    .scan(cursor.clone(), end.clone(), 1)
                    .await
                    .map_err(store_error)?;
                let Some((k, _)) = page.into_iter().next() else {
                    break;
                };
                let (table, _) = key::decode_bytes(&k[prefix.len()..], prefix.len())
                    .map_err(StoreError::from)?;
                cursor = [prefix.as_slice(), &successor(&key::table_prefix(&table))].concat();
                tables.insert(Bytes::from(table));
            }
        }
        let _ = txn.rollback().await;
        Ok(tables.into_iter().collect())
    }

    /// TiKV keeps every write as an MVCC version until its own GC runs: hand it the safe point.
    async fn collect_garbage(&self, safe_point: u64) -> Result<(), StoreError> {
        self.api.gc(safe_point).await.map_err(store_error)
    }
}

/// How a run of [`TikvStore::apply_batch`] ended without an error.
enum BatchRun {
    /// Applied (or nothing to write); one outcome per item.
    Applied(Vec<MutationOutcome>),
    /// Every try met a write conflict or an unavailable read; nothing was applied. The last
    /// reason.
    Conflicted(String),
}

/// The item indexes of `batch` grouped by row (table and row), each group in batch order,
/// groups in order of first appearance.
fn row_groups(batch: &[RowMutation]) -> Vec<Vec<usize>> {
    let mut index: std::collections::HashMap<(&[u8], &[u8]), usize> =
        std::collections::HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, item) in batch.iter().enumerate() {
        let next = groups.len();
        let g = *index
            .entry((&item.table[..], &item.row[..]))
            .or_insert(next);
        if g == next {
            groups.push(Vec::new());
        }
        groups[g].push(i);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeKv;

    fn store(kv: &FakeKv, ns: &[u8]) -> TikvStore<FakeKv> {
        TikvStore::new(Arc::new(kv.clone()), ns).unwrap()
    }

    fn put(table: &str, row: &str, value: &str) -> RowMutation {
        RowMutation {
            table: Bytes::copy_from_slice(table.as_bytes()),
            row: Bytes::copy_from_slice(row.as_bytes()),
            conditions: vec![],
            mutations: vec![Mutation::Put {
                family: Family::Data,
                column: Bytes::from("c"),
                ts: 1,
                value: Bytes::copy_from_slice(value.as_bytes()),
            }],
        }
    }

    fn read(table: &str, row: &str) -> ReadRow {
        ReadRow {
            snapshot_ts: None,
            table: Bytes::copy_from_slice(table.as_bytes()),
            row: Bytes::copy_from_slice(row.as_bytes()),
            reads: vec![FamilyRead::all(Family::Data)],
        }
    }

    #[test]
    fn store_ids_name_cluster_and_namespace() {
        let (kv, other) = (FakeKv::new(), FakeKv::new());
        let a = store(&kv, b"a");
        assert_eq!(a.store_id(), a.reopen().store_id(), "a reopened handle");
        assert_eq!(a.store_id(), store(&kv.clone(), b"a").store_id(), "a clone");
        assert_ne!(
            a.store_id(),
            store(&kv, b"b").store_id(),
            "another namespace"
        );
        assert_ne!(
            a.store_id(),
            store(&other, b"a").store_id(),
            "another cluster"
        );
        assert_ne!(
            store(&kv, b"\x00").store_id(),
            store(&kv, b"\\x00").store_id(),
            "escaping keeps namespaces apart"
        );
    }

    #[tokio::test]
    async fn namespaces_do_not_see_each_other() {
        let kv = FakeKv::new();
        let (a, b) = (store(&kv, b"a"), store(&kv, b"a\x00"));
        a.mutate_rows(vec![put("t", "r", "in a")]).await.unwrap();
        assert_eq!(a.read_row(read("t", "r")).await.unwrap()[0].len(), 1);
        assert!(b.read_row(read("t", "r")).await.unwrap()[0].is_empty());
        assert!(TikvStore::new(Arc::new(kv), &[0u8; MAX_NAMESPACE + 1]).is_err());
    }

    #[tokio::test]
    async fn collect_garbage_drops_tikvs_own_history_but_not_current_values() {
        let kv = FakeKv::new();
        let s = store(&kv, b"n");
        for _ in 0..10 {
            s.mutate_rows(vec![put("t", "r", "v")]).await.unwrap();
        }
        let before = kv.version_count();
        let safe_point = kv.current_timestamp().await.unwrap();
        s.collect_garbage(safe_point).await.unwrap();
        let after = kv.version_count();
        assert!(after < before, "{before} -> {after} versions");
        assert!(
            after <= 2,
            "one cell and its row's guard key: {after} versions"
        );
        assert_eq!(s.read_row(read("t", "r")).await.unwrap()[0].len(), 1);
        assert_eq!(s.tables().await.unwrap(), vec![Bytes::from("t")]);
    }

    #[tokio::test]
    async fn a_hot_row_does_not_starve_the_rest_of_its_batch() {
        let kv = FakeKv::new();
        let s = store(&kv, b"n");
        // The whole batch fails its 3 tries, then the hot row alone fails 2 more.
        kv.inject_conflicts_on(b"hot", WHOLE_BATCH_ATTEMPTS + 2);
        let batch = vec![put("t", "a", "1"), put("t", "hot", "2"), put("t", "b", "3")];
        let outcomes = s.mutate_rows(batch).await.unwrap();
        assert_eq!(outcomes, vec![MutationOutcome::Applied; 3]);
        for row in ["a", "hot", "b"] {
            assert_eq!(
                s.read_row(read("t", row)).await.unwrap()[0].len(),
                1,
                "{row}"
            );
        }
    }

    #[tokio::test]
    async fn a_split_batch_keeps_one_rows_items_in_order() {
        let kv = FakeKv::new();
        let s = store(&kv, b"n");
        kv.inject_conflicts_on(b"hot", WHOLE_BATCH_ATTEMPTS);
        // The second item on "a" holds only if the first was applied before it.
        let mut second = put("t", "a", "second");
        second.mutations = vec![Mutation::Put {
            family: Family::Data,
            column: Bytes::from("d"),
            ts: 1,
            value: Bytes::from("after c"),
        }];
        second.conditions = vec![Condition::Exists {
            family: Family::Data,
            column: Bytes::from("c"),
            ts: 1,
        }];
        let batch = vec![put("t", "a", "first"), put("t", "hot", "x"), second];
        let outcomes = s.mutate_rows(batch).await.unwrap();
        assert_eq!(outcomes, vec![MutationOutcome::Applied; 3]);
        assert_eq!(s.read_row(read("t", "a")).await.unwrap()[0].len(), 2);
    }

    #[tokio::test]
    async fn a_row_that_never_commits_is_named_and_the_others_apply() {
        let kv = FakeKv::new();
        let s = store(&kv, b"n");
        kv.inject_conflicts_on(b"hot", usize::MAX);
        let batch = vec![put("t", "a", "1"), put("t", "hot", "2")];
        let err = s.mutate_rows(batch).await.unwrap_err();
        let StoreError::Unavailable(message) = &err else {
            panic!("{err:?}");
        };
        assert!(message.contains("\"hot\""), "{message}");
        assert_eq!(s.read_row(read("t", "a")).await.unwrap()[0].len(), 1);
        assert!(s.read_row(read("t", "hot")).await.unwrap()[0].is_empty());
    }

    #[tokio::test]
    async fn ambiguous_commit_is_reported_as_unknown_and_was_applied() {
        let kv = FakeKv::new();
        let s = store(&kv, b"n");
        kv.inject_ambiguous_commits(1);
        let err = s.mutate_rows(vec![put("t", "r", "v")]).await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        // The fake applied it: the caller's read-back sees the write.
        assert_eq!(s.read_row(read("t", "r")).await.unwrap()[0].len(), 1);
    }

    #[tokio::test]
    async fn transient_read_failures_are_retried_before_commit() {
        let kv = FakeKv::new();
        let s = store(&kv, b"n");
        kv.inject_unavailable_reads(3);
        let cond = RowMutation {
            conditions: vec![Condition::Absent {
                family: Family::Data,
                column: Bytes::from("c"),
                ts: TsRange::ALL,
            }],
            ..put("t", "r", "v")
        };
        assert_eq!(
            s.mutate_rows(vec![cond]).await.unwrap(),
            vec![MutationOutcome::Applied]
        );
    }

    #[tokio::test]
    async fn guard_key_turns_write_skew_into_a_conflict() {
        // Two row mutations that each check "no lock at any ts" and write a lock at a different
        // ts: without the guard key both would commit (write skew).
        let kv = FakeKv::new();
        let s = store(&kv, b"n");
        let prewrite = |ts: u64| RowMutation {
            table: Bytes::from("t"),
            row: Bytes::from("r"),
            conditions: vec![Condition::Absent {
                family: Family::Lock,
                column: Bytes::from("c"),
                ts: TsRange::ALL,
            }],
            mutations: vec![Mutation::Put {
                family: Family::Lock,
                column: Bytes::from("c"),
                ts,
                value: Bytes::from("L"),
            }],
        };
        let mut t1 = kv.begin().await.unwrap();
        let mut t2 = kv.begin().await.unwrap();
        let (o1, w1) = s.stage(&mut t1, &[prewrite(10)]).await.unwrap();
        let (o2, w2) = s.stage(&mut t2, &[prewrite(11)]).await.unwrap();
        assert!(
            w1 && w2 && o1[0].applied() && o2[0].applied(),
            "both saw no lock at their start"
        );
        t1.commit().await.unwrap();
        assert!(
            matches!(t2.commit().await, Err(KvError::Conflict(_))),
            "the guard key must conflict"
        );
        // Through the store, the loser re-runs and now sees the lock.
        assert_eq!(
            s.mutate_rows(vec![prewrite(11)]).await.unwrap(),
            vec![MutationOutcome::ConditionFailed { condition: 0 }]
        );
    }

    #[tokio::test]
    async fn pd_oracle_is_strictly_increasing() {
        let oracle = PdOracle::new(Arc::new(FakeKv::new()));
        let mut last = 0;
        for _ in 0..100 {
            let ts = percolator_core::TimestampOracle::timestamp(&oracle)
                .await
                .unwrap();
            assert!(ts > last);
            last = ts;
        }
    }

    /// A client on the store takes its timestamps from PD's TSO when given it, and is refused
    /// without an explicit oracle (the store is shared by processes).
    #[tokio::test]
    async fn clients_take_timestamps_from_pd() {
        let store = Arc::new(TikvStore::new(Arc::new(FakeKv::new()), b"pd").unwrap());
        assert!(matches!(
            percolator_core::Client::open(Arc::clone(&store)).await,
            Err(percolator_core::Error::OracleRequired { .. })
        ));
        let pd = store.pd_oracle();
        let client = percolator_core::Client::builder(Arc::clone(&store))
            .oracle(Arc::clone(&pd))
            .build()
            .await
            .unwrap();
        let start = client.begin().await.unwrap().start_ts();
        assert!(
            percolator_core::TimestampOracle::timestamp(pd.as_ref())
                .await
                .unwrap()
                > start
        );
    }

    #[tokio::test]
    async fn unreachable_pd_is_a_clear_error() {
        // Port 1 on loopback: nothing listens there.
        let config = TikvConfig::new(["127.0.0.1:1"]).with_timeout(Duration::from_secs(2));
        let err = TikvStore::connect(&config, b"n").await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert!(
            err.to_string().contains("127.0.0.1:1") || err.to_string().contains("tikv"),
            "{err}"
        );
        let none = TikvConfig::new(Vec::<String>::new());
        assert!(matches!(
            TikvStore::connect(&none, b"n").await,
            Err(StoreError::Backend { .. })
        ));
    }

    #[test]
    fn errors_are_classified_for_retry() {
        use tikv_client::Error as E;
        let conflict = tikv_client::ProtoKeyError {
            conflict: Some(Default::default()),
            ..Default::default()
        };
        assert!(matches!(
            client::classify(E::KeyError(Box::new(conflict.clone()))),
            KvError::Conflict(_)
        ));
        assert!(matches!(
            client::classify(E::MultipleKeyErrors(vec![E::KeyError(Box::new(conflict))])),
            KvError::Conflict(_)
        ));
        assert!(matches!(
            client::classify(E::UndeterminedError(Box::new(E::NoCurrentRegions))),
            KvError::Unavailable(_)
        ));
        assert!(matches!(
            client::classify(E::LeaderNotFound {
                region: Default::default()
            }),
            KvError::Unavailable(_)
        ));
        assert!(matches!(
            client::classify(E::StringError("x".into())),
            KvError::Other(_)
        ));
    }
}
