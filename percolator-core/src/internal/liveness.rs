//! Worker liveness: the replacement for the paper's Chubby tokens.
//!
//! Every [`crate::Client`] registers a worker id with a **lease** (a deadline in oracle time,
//! [`crate::oracle::time`]) in the reserved workers table and refreshes it in the background.
//! Locks carry their owner's worker id; a cleaner that finds a lock asks [`Liveness::is_alive`]
//! and may roll the transaction back at once if the owner's lease has run out, without waiting
//! for the lock's own TTL. A crashed process simply stops refreshing, so its lease expires.
//! Deadline and check are both oracle time, so machines whose wall clocks disagree agree on
//! when a lease ran out.
//!
//! A store that one process owns (not [`crate::StoreLimits::distributed`]: mem, sled, fjall,
//! whose files are locked to their process) can say more: every registered worker that is not
//! a client of this process was left by an earlier process, so it is dead whatever its lease
//! says. [`is_worker_of_this_process`] tells them apart, and the dead-worker sweep
//! ([`crate::gc::dead_workers`]) ends such leases at once instead of waiting them out.
//!
//! A worker that scans notifications also names its **scan group** in its lease row
//! ([`crate::Client::join_scan_group`]): the workers of one group (those running the same
//! observers) read each other's leases to divide the notify space among the live ones
//! (`percolator-observers`). The membership lives and dies with the lease, so a crashed worker
//! leaves its group when its renewals stop.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::oracle::OracleClock;
use crate::store::{Columns, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore};
use crate::tables::WORKERS_TABLE;

const LEASE_COLUMN: &[u8] = b"lease_until_ms";
/// The oldest start timestamp the worker still has in use (see [`crate::gc`]).
const OLDEST_COLUMN: &[u8] = b"oldest_start_ts";
/// The worker's scan group and lease length ([`ScanGroup`]).
const SCAN_GROUP_COLUMN: &[u8] = b"scan_group";

/// Worker ids of the clients built in this process that are not yet dropped or shut down.
static PROCESS_WORKERS: LazyLock<parking_lot::Mutex<HashSet<u64>>> =
    LazyLock::new(|| parking_lot::Mutex::new(HashSet::new()));

/// Records that `worker` is a client of this process (at build).
pub(crate) fn note_process_worker(worker: u64) {
    PROCESS_WORKERS.lock().insert(worker);
}

/// Records that `worker`'s client is gone (shut down, or dropped like a dead process).
pub(crate) fn forget_process_worker(worker: u64) {
    PROCESS_WORKERS.lock().remove(&worker);
}

/// Whether `worker` is a client of this process that is still running.
pub fn is_worker_of_this_process(worker: u64) -> bool {
    PROCESS_WORKERS.lock().contains(&worker)
}

/// One worker's lease as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerLease {
    /// The worker id.
    pub worker: u64,
    /// Oracle time (ms) until which the lease holds.
    pub until_ms: u64,
    /// The oldest start timestamp the worker had in use when it last renewed (`None`: written
    /// by a version that did not publish it; garbage collection then assumes 0).
    pub oldest_start_ts: Option<u64>,
    /// The scan group the worker scans notifications for, if it does.
    pub scan_group: Option<ScanGroup>,
}

/// A worker's membership of a scan group, as its lease row carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScanGroup {
    /// The group: workers with the same one run the same observers and share their work.
    pub group: u64,
    /// The worker's lease length in ms: it renews every quarter of it, so a lease with less
    /// than half of it left has missed a renewal.
    pub lease_ms: u64,
}

impl ScanGroup {
    /// Whether the worker holding `lease` renews on time at oracle time `now_ms`: no more than
    /// one renewal missed (a worker that stopped renewing drops out after half its lease,
    /// before the lease itself runs out).
    pub fn renewing(&self, lease: &WorkerLease, now_ms: u64) -> bool {
        lease.until_ms > now_ms.saturating_add(self.lease_ms / 2)
    }

    fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&self.group.to_be_bytes());
        out.extend_from_slice(&self.lease_ms.to_be_bytes());
        Bytes::from(out)
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != 16 {
            return Err(Error::Corrupt(format!(
                "worker scan group is {} bytes, expected 16",
                bytes.len()
            )));
        }
        let (group, lease_ms) = bytes.split_at(8);
        Ok(Self {
            group: u64_of(group, "scan group")?,
            lease_ms: u64_of(lease_ms, "scan group lease")?,
        })
    }
}

/// Answers whether the worker that owns a lock is still running.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Liveness: Send + Sync + 'static {
    /// Whether `worker` holds a lease that has not run out at oracle time `now_ms`.
    async fn is_alive(&self, worker: u64, now_ms: u64) -> Result<bool>;
}

/// Leases stored in the reserved workers table of a [`RowStore`].
pub struct StoreLiveness<S: RowStore> {
    store: Arc<S>,
}

impl<S: RowStore> StoreLiveness<S> {
    /// Liveness backed by `store`.
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }

    /// Writes (or refreshes) `worker`'s lease to end `lease` from now in oracle time (`clock`),
    /// publishing `oldest_start_ts`, the oldest start timestamp it still has in use, and the
    /// scan group it scans for, if any. Returns the deadline written.
    pub async fn register(
        &self,
        worker: u64,
        clock: &OracleClock,
        lease: Duration,
        oldest_start_ts: u64,
        scan_group: Option<u64>,
    ) -> Result<u64> {
        let until = clock
            .now_ms()
            .saturating_add(u64::try_from(lease.as_millis()).unwrap_or(u64::MAX));
        let put = |column: &'static [u8], value: u64| Mutation::Put {
            family: Family::Data,
            column: Bytes::from_static(column),
            ts: 0,
            value: Bytes::copy_from_slice(&value.to_be_bytes()),
        };
        let mut mutations = vec![
            put(LEASE_COLUMN, until),
            put(OLDEST_COLUMN, oldest_start_ts),
        ];
        if let Some(group) = scan_group {
            let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
            mutations.push(Mutation::Put {
                family: Family::Data,
                column: Bytes::from_static(SCAN_GROUP_COLUMN),
                ts: 0,
                value: ScanGroup { group, lease_ms }.encode(),
            });
        }
        self.store
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(WORKERS_TABLE),
                row: Bytes::copy_from_slice(&worker.to_be_bytes()),
                conditions: vec![],
                mutations,
            }])
            .await?;
        Ok(until)
    }

    /// Every stored lease, live or not (garbage collection reads them for the safe point and
    /// deletes the dead ones' rows).
    pub async fn leases(&self) -> Result<Vec<WorkerLease>> {
        let rows = self
            .store
            .scan(crate::store::Scan {
                snapshot_ts: None,
                table: Bytes::from_static(WORKERS_TABLE),
                start: std::ops::Bound::Unbounded,
                end: std::ops::Bound::Unbounded,
                read: FamilyRead::all(Family::Data).max_versions(1),
                row_limit: None,
            })
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let worker = u64_of(&row.row, "worker id")?;
            let mut lease = WorkerLease {
                worker,
                until_ms: 0,
                oldest_start_ts: None,
                scan_group: None,
            };
            for cell in &row.cells {
                match cell.column.as_ref() {
                    LEASE_COLUMN => lease.until_ms = u64_of(&cell.value, "worker lease")?,
                    OLDEST_COLUMN => {
                        lease.oldest_start_ts = Some(u64_of(&cell.value, "oldest start ts")?);
                    }
                    SCAN_GROUP_COLUMN => lease.scan_group = Some(ScanGroup::decode(&cell.value)?),
                    _ => {}
                }
            }
            out.push(lease);
        }
        Ok(out)
    }

    /// Deletes the lease row of `lease.worker` if it still holds exactly `lease.until_ms` (a
    /// worker that renewed meanwhile keeps its row). Whether it was deleted.
    pub async fn remove_if_unchanged(&self, lease: &WorkerLease) -> Result<bool> {
        let outcome = self
            .store
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(WORKERS_TABLE),
                row: Bytes::copy_from_slice(&lease.worker.to_be_bytes()),
                conditions: vec![crate::store::Condition::Equals {
                    family: Family::Data,
                    column: Bytes::from_static(LEASE_COLUMN),
                    ts: 0,
                    value: Bytes::copy_from_slice(&lease.until_ms.to_be_bytes()),
                }],
                mutations: lease_deletes(),
            }])
            .await?;
        Ok(outcome
            .into_iter()
            .all(crate::store::MutationOutcome::applied))
    }

    /// Removes `worker`'s lease (graceful shutdown).
    pub async fn deregister(&self, worker: u64) -> Result<()> {
        self.store
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(WORKERS_TABLE),
                row: Bytes::copy_from_slice(&worker.to_be_bytes()),
                conditions: vec![],
                mutations: lease_deletes(),
            }])
            .await?;
        Ok(())
    }
}

/// Deletes a lease row's cells.
fn lease_deletes() -> Vec<Mutation> {
    [LEASE_COLUMN, OLDEST_COLUMN, SCAN_GROUP_COLUMN]
        .into_iter()
        .map(|column| Mutation::Delete {
            family: Family::Data,
            column: Bytes::from_static(column),
            ts: 0,
        })
        .collect()
}

/// A stored big-endian u64, or `Corrupt` naming `what`.
fn u64_of(bytes: &[u8], what: &str) -> Result<u64> {
    let array: [u8; 8] = bytes
        .try_into()
        .map_err(|_| Error::Corrupt(format!("{what} is {} bytes, expected 8", bytes.len())))?;
    Ok(u64::from_be_bytes(array))
}

#[async_trait]
impl<S: RowStore> Liveness for StoreLiveness<S> {
    async fn is_alive(&self, worker: u64, now_ms: u64) -> Result<bool> {
        let cells = self
            .store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: Bytes::from_static(WORKERS_TABLE),
                row: Bytes::copy_from_slice(&worker.to_be_bytes()),
                reads: vec![
                    FamilyRead::all(Family::Data)
                        .columns(Columns::one(Bytes::from_static(LEASE_COLUMN)))
                        .max_versions(1),
                ],
            })
            .await?;
        let Some(cell) = cells.first().and_then(|c| c.first()) else {
            return Ok(false);
        };
        Ok(u64_of(&cell.value, "worker lease")? >= now_ms)
    }
}
