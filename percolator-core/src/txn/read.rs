//! Snapshot reads (paper Figure 6, `Get`): point reads and range scans at the start timestamp.
//!
//! Order matters for correctness: the lock family is read **before** the write family. A
//! transaction whose commit timestamp is below our start timestamp held its lock on a cell from
//! before it took that commit timestamp until the moment its write record appeared (lock removal
//! and write insertion are one atomic row mutation). So either we see its lock — and resolve or
//! wait — or its write record is already there when we read the write family. Locks above our
//! start timestamp belong to transactions that will commit above it and are ignored; a lock at or
//! below it is never skipped.
//!
//! A point read asks for the lock, the newest write records and — speculatively, to save a round
//! trip — the newest data version at or below the start timestamp in one store call. Where the
//! store says a point lookup costs much less than a range (`StoreLimits::prefers_point_reads`,
//! LSM stores), it asks for the newest write record alone and reads the data version that record
//! names afterwards, by a point lookup (none for an inline value); scans then read each data
//! version they need by its own point lookup too.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::time::Instant;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::records::{CellAddr, LockRecord, WriteKind, WriteRecord};
use crate::store::{Cell, Columns, Family, FamilyRead, ReadRow, RowStore, Scan, TsRange};

use super::{ClientInner, ScanItem, Versioned};
use crate::backoff::Backoff;

/// Newest write records read per column before falling back to all versions (rollback records
/// of other transactions can hide the newest committed one).
const WRITE_PREFETCH: usize = 2;

impl<S: RowStore> ClientInner<S> {
    /// Reads `addr` as of `read_ts`, resolving or waiting out locks at or below `read_ts`.
    pub(crate) async fn snapshot_get(
        &self,
        addr: &CellAddr,
        read_ts: u64,
    ) -> Result<Option<Bytes>> {
        Ok(self.snapshot_get_versioned(addr, read_ts).await?.value)
    }

    /// Like [`Self::snapshot_get`], with the commit timestamp of the visible write (a put or a
    /// delete; `None` if the cell was never written).
    pub(crate) async fn snapshot_get_versioned(
        &self,
        addr: &CellAddr,
        read_ts: u64,
    ) -> Result<Versioned> {
        self.check_snapshot(read_ts)?;
        // Set when the first lock blocks us (no clock read on the common, lock-free path).
        let mut started: Option<Instant> = None;
        let mut backoff = Backoff::from_config(&self.config);
        let columns = Columns::one(addr.column.clone());
        // Where a point lookup is much cheaper than a range, read the newest write record
        // alone (the store may answer it from memory) and no data speculatively.
        let point_reads = self.store.limits().prefers_point_reads;
        let prefetch = if point_reads { 1 } else { WRITE_PREFETCH };
        loop {
            let mut versions = Some(prefetch);
            let (lock, writes, data) = loop {
                let mut write_read = FamilyRead::all(Family::Write)
                    .columns(columns.clone())
                    .ts(TsRange::up_to(read_ts));
                write_read.max_versions = versions;
                let mut reads = vec![
                    FamilyRead::all(Family::Lock)
                        .columns(columns.clone())
                        .ts(TsRange::up_to(read_ts))
                        .max_versions(1),
                    write_read,
                ];
                if !point_reads {
                    // Speculative: the newest data version is usually the committed one.
                    reads.push(
                        FamilyRead::all(Family::Data)
                            .columns(columns.clone())
                            .ts(TsRange::up_to(read_ts))
                            .max_versions(1),
                    );
                }
                let asked = reads.len();
                let mut answer = self
                    .store
                    .read_row(ReadRow {
                        snapshot_ts: Some(read_ts),
                        table: addr.table.clone(),
                        row: addr.row.clone(),
                        reads,
                    })
                    .await?;
                if answer.len() != asked {
                    return Err(Error::Corrupt(
                        "store answered a read with a different shape".into(),
                    ));
                }
                let data = if point_reads {
                    Vec::new()
                } else {
                    answer.pop().unwrap_or_default()
                };
                let writes = answer.pop().unwrap_or_default();
                let lock = answer.pop().unwrap_or_default();
                let all_rollbacks = versions.is_some_and(|n| writes.len() >= n)
                    && writes.iter().all(|c| {
                        WriteRecord::decode(&c.value).is_ok_and(|w| w.kind == WriteKind::Rollback)
                    });
                if all_rollbacks {
                    versions = None; // look at every version
                    continue;
                }
                break (lock, writes, data);
            };
            if let Some(lock_cell) = lock.first() {
                let record = LockRecord::decode(&lock_cell.value)?;
                if !self.resolve_lock(addr, lock_cell.ts, &record).await? {
                    self.metrics.lock_waited();
                    backoff
                        .wait_or_timeout(
                            *started.get_or_insert_with(Instant::now),
                            addr,
                            lock_cell.ts,
                            &self.config,
                        )
                        .await?;
                }
                continue;
            }
            return self.visible_value(addr, &writes, &data).await;
        }
    }

    /// What [`Self::snapshot_get_versioned`] answers for each of `addrs`, read in one store call
    /// ([`RowStore::read_rows`]: the lock, the newest write records and, speculatively, the
    /// newest data version of every cell, grouped by row). A cell that meets a lock at or below
    /// `read_ts`, or whose newest write records are all rollbacks, is read again on its own,
    /// which resolves or waits out the lock as a single read does; the others are answered from
    /// the batch. Every answer is as of `read_ts`, so the batch sees exactly what single reads
    /// would.
    pub(crate) async fn snapshot_get_many(
        &self,
        addrs: &[CellAddr],
        read_ts: u64,
    ) -> Result<Vec<Versioned>> {
        let answers = self.snapshot_get_batch(addrs, addrs.len(), read_ts).await?;
        Ok(answers.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// [`Self::snapshot_get_many`] where only the first `required` cells must be answered: a
    /// later one that would have to be read again on its own (behind a lock, or rollbacks) is
    /// answered `None` instead, so that a prefetch never waits on a lock of a cell nobody asked
    /// for yet.
    pub(crate) async fn snapshot_get_batch(
        &self,
        addrs: &[CellAddr],
        required: usize,
        read_ts: u64,
    ) -> Result<Vec<Option<Versioned>>> {
        self.check_snapshot(read_ts)?;
        if addrs.is_empty() {
            return Ok(Vec::new());
        }
        let point_reads = self.store.limits().prefers_point_reads;
        let prefetch = if point_reads { 1 } else { WRITE_PREFETCH };
        // Rows in order of first appearance, each with its distinct columns.
        let mut row_of: HashMap<(&Bytes, &Bytes), usize> = HashMap::new();
        let mut rows: Vec<(&CellAddr, Vec<Bytes>)> = Vec::new();
        let mut addr_rows = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let index = *row_of.entry((&addr.table, &addr.row)).or_insert_with(|| {
                rows.push((addr, Vec::new()));
                rows.len() - 1
            });
            let columns = &mut rows[index].1;
            if !columns.contains(&addr.column) {
                columns.push(addr.column.clone());
            }
            addr_rows.push(index);
        }
        let requests: Vec<ReadRow> = rows
            .iter()
            .map(|(first, columns)| {
                let columns = Columns::Only(columns.clone());
                let mut reads = vec![
                    FamilyRead::all(Family::Lock)
                        .columns(columns.clone())
                        .ts(TsRange::up_to(read_ts))
                        .max_versions(1),
                    FamilyRead::all(Family::Write)
                        .columns(columns.clone())
                        .ts(TsRange::up_to(read_ts))
                        .max_versions(prefetch),
                ];
                if !point_reads {
                    reads.push(
                        FamilyRead::all(Family::Data)
                            .columns(columns)
                            .ts(TsRange::up_to(read_ts))
                            .max_versions(1),
                    );
                }
                ReadRow {
                    snapshot_ts: Some(read_ts),
                    table: first.table.clone(),
                    row: first.row.clone(),
                    reads,
                }
            })
            .collect();
        let asked = requests.first().map_or(0, |r| r.reads.len());
        let answers = self.store.read_rows(requests).await?;
        if answers.len() != rows.len() || answers.iter().any(|a| a.len() != asked) {
            return Err(Error::Corrupt(
                "store answered a batch read with a different shape".into(),
            ));
        }
        let mut out = vec![Some(Versioned::default()); addrs.len()];
        let mut alone = Vec::new();
        for (i, (addr, &row)) in addrs.iter().zip(&addr_rows).enumerate() {
            let of_column = |family: usize| -> Vec<Cell> {
                answers[row]
                    .get(family)
                    .into_iter()
                    .flatten()
                    .filter(|c| c.column == addr.column)
                    .cloned()
                    .collect()
            };
            let (lock, writes) = (of_column(0), of_column(1));
            let all_rollbacks = writes.len() >= prefetch
                && writes.iter().all(|c| {
                    WriteRecord::decode(&c.value).is_ok_and(|w| w.kind == WriteKind::Rollback)
                });
            if !lock.is_empty() || all_rollbacks {
                if i < required {
                    alone.push(i);
                } else {
                    out[i] = None;
                }
                continue;
            }
            let data = if point_reads {
                Vec::new()
            } else {
                of_column(2)
            };
            out[i] = Some(self.visible_value(addr, &writes, &data).await?);
        }
        let resolved = futures::future::try_join_all(
            alone
                .iter()
                .map(|&i| self.snapshot_get_versioned(&addrs[i], read_ts)),
        )
        .await?;
        for (i, seen) in alone.into_iter().zip(resolved) {
            out[i] = Some(seen);
        }
        Ok(out)
    }

    /// Given the write records of one column (newest first, all at or below the read timestamp)
    /// and a speculatively read data version, returns the visible value.
    async fn visible_value(
        &self,
        addr: &CellAddr,
        writes: &[Cell],
        data: &[Cell],
    ) -> Result<Versioned> {
        for cell in writes {
            let (record, inline) = WriteRecord::decode_with_value(&cell.value)?;
            let commit_ts = Some(cell.ts);
            match record.kind {
                WriteKind::Rollback => continue,
                WriteKind::Delete => {
                    return Ok(Versioned {
                        value: None,
                        commit_ts,
                    });
                }
                WriteKind::Put => {
                    let value = match (inline, data.iter().find(|d| d.ts == record.start_ts)) {
                        (Some(inline), _) => inline,
                        (None, Some(d)) => d.value.clone(),
                        (None, None) => self.read_data(addr, record.start_ts).await?,
                    };
                    return Ok(Versioned {
                        value: Some(value),
                        commit_ts,
                    });
                }
            }
        }
        Ok(Versioned::default())
    }

    async fn read_data(&self, addr: &CellAddr, data_ts: u64) -> Result<Bytes> {
        let answer = self
            .store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: addr.table.clone(),
                row: addr.row.clone(),
                reads: vec![
                    FamilyRead::all(Family::Data)
                        .columns(Columns::one(addr.column.clone()))
                        .ts(TsRange::at(data_ts)),
                ],
            })
            .await?;
        answer
            .into_iter()
            .next()
            .and_then(|cells| cells.into_iter().next())
            .map(|c| c.value)
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "write record points at missing data version {data_ts} of {:?}/{:?}/{:?}",
                    addr.table, addr.row, addr.column
                ))
            })
    }

    /// Every visible cell of `table` in the row range, as of `read_ts` (committed data only).
    pub(crate) async fn snapshot_scan(
        &self,
        table: &Bytes,
        start: &Bound<Bytes>,
        end: &Bound<Bytes>,
        columns: &Columns,
        read_ts: u64,
    ) -> Result<Vec<ScanItem>> {
        self.check_snapshot(read_ts)?;
        // Set when the first lock blocks us (no clock read on the common, lock-free path).
        let mut started: Option<Instant> = None;
        let mut backoff = Backoff::from_config(&self.config);
        // 1. Locks first (see the module docs), until none at or below read_ts remain.
        loop {
            let locks = self
                .store
                .scan(Scan {
                    snapshot_ts: Some(read_ts),
                    table: table.clone(),
                    start: start.clone(),
                    end: end.clone(),
                    read: FamilyRead::all(Family::Lock)
                        .columns(columns.clone())
                        .ts(TsRange::up_to(read_ts)),
                    row_limit: None,
                })
                .await?;
            let mut blocked = None;
            for row in &locks {
                for cell in &row.cells {
                    let addr = CellAddr {
                        table: table.clone(),
                        row: row.row.clone(),
                        column: cell.column.clone(),
                    };
                    let record = LockRecord::decode(&cell.value)?;
                    if !self.resolve_lock(&addr, cell.ts, &record).await? {
                        blocked = Some((addr, cell.ts));
                    }
                }
            }
            match blocked {
                None => break,
                Some((addr, lock_ts)) => {
                    self.metrics.lock_waited();
                    backoff
                        .wait_or_timeout(
                            *started.get_or_insert_with(Instant::now),
                            &addr,
                            lock_ts,
                            &self.config,
                        )
                        .await?
                }
            }
        }
        // 2. The newest write records of each column (older versions are never read: a scan
        //    costs the same after a thousand overwrites as after one), then the data versions
        //    they point at (inline values need none).
        let writes = self
            .store
            .scan(Scan {
                snapshot_ts: Some(read_ts),
                table: table.clone(),
                start: start.clone(),
                end: end.clone(),
                read: FamilyRead::all(Family::Write)
                    .columns(columns.clone())
                    .ts(TsRange::up_to(read_ts))
                    .max_versions(WRITE_PREFETCH),
                row_limit: None,
            })
            .await?;
        let mut out = Vec::new();
        for row in writes {
            // column -> the newest non-rollback record's outcome
            let mut visible: BTreeMap<Bytes, Visible> = BTreeMap::new();
            // Columns whose prefetched records were all rollbacks: their history decides.
            let mut deeper: Vec<Bytes> = Vec::new();
            let mut i = 0;
            while i < row.cells.len() {
                let column = &row.cells[i].column;
                let n = row.cells[i..]
                    .iter()
                    .take_while(|c| c.column == *column)
                    .count();
                match newest_outcome(&row.cells[i..i + n])? {
                    Some(outcome) => {
                        visible.insert(column.clone(), outcome);
                    }
                    None if n >= WRITE_PREFETCH => deeper.push(column.clone()),
                    None => {}
                }
                i += n;
            }
            if !deeper.is_empty() {
                let history = self
                    .store
                    .read_row(ReadRow {
                        snapshot_ts: Some(read_ts),
                        table: table.clone(),
                        row: row.row.clone(),
                        reads: vec![
                            FamilyRead::all(Family::Write)
                                .columns(Columns::Only(deeper))
                                .ts(TsRange::up_to(read_ts)),
                        ],
                    })
                    .await?;
                let cells: Vec<Cell> = history.into_iter().flatten().collect();
                let mut i = 0;
                while i < cells.len() {
                    let column = &cells[i].column;
                    let n = cells[i..]
                        .iter()
                        .take_while(|c| c.column == *column)
                        .count();
                    if let Some(outcome) = newest_outcome(&cells[i..i + n])? {
                        visible.insert(column.clone(), outcome);
                    }
                    i += n;
                }
            }
            let wanted: Vec<(&Bytes, u64)> = visible
                .iter()
                .filter_map(|(column, outcome)| match outcome {
                    Visible::DataAt(ts) => Some((column, *ts)),
                    _ => None,
                })
                .collect();
            let data = if wanted.is_empty() {
                Vec::new()
            } else {
                let reads = if self.store.limits().prefers_point_reads {
                    // One point lookup per version wanted.
                    wanted
                        .iter()
                        .map(|(column, ts)| {
                            FamilyRead::all(Family::Data)
                                .columns(Columns::one((*column).clone()))
                                .ts(TsRange::at(*ts))
                        })
                        .collect()
                } else {
                    // One read for the row: the versions between the oldest and newest wanted.
                    let lo = wanted.iter().map(|(_, ts)| *ts).min().unwrap_or(0);
                    let hi = wanted.iter().map(|(_, ts)| *ts).max().unwrap_or(0);
                    vec![
                        FamilyRead::all(Family::Data)
                            .columns(Columns::Only(
                                wanted.iter().map(|(c, _)| (*c).clone()).collect(),
                            ))
                            .ts(TsRange::new(lo, hi)),
                    ]
                };
                self.store
                    .read_row(ReadRow {
                        snapshot_ts: Some(read_ts),
                        table: table.clone(),
                        row: row.row.clone(),
                        reads,
                    })
                    .await?
            };
            let by_version: HashMap<(&Bytes, u64), &Bytes> = data
                .iter()
                .flatten()
                .map(|c| ((&c.column, c.ts), &c.value))
                .collect();
            // In column order, inline values and data versions alike.
            for (column, outcome) in &visible {
                let value = match outcome {
                    Visible::Deleted => continue,
                    Visible::Inline(value) => value.clone(),
                    Visible::DataAt(ts) => (*by_version.get(&(column, *ts)).ok_or_else(|| {
                        Error::Corrupt(format!(
                            "write record points at missing data version {ts} of row {:?} column {:?}",
                            row.row, column
                        ))
                    })?)
                    .clone(),
                };
                out.push(ScanItem {
                    row: row.row.clone(),
                    column: column.clone(),
                    value,
                });
            }
        }
        Ok(out)
    }
}

/// What the newest non-rollback write record of a column makes visible to a scan.
enum Visible {
    Deleted,
    Inline(Bytes),
    DataAt(u64),
}

/// What the newest non-rollback record among one column's write records (newest first) makes
/// visible; `None` if they are all rollbacks.
fn newest_outcome(records: &[Cell]) -> Result<Option<Visible>> {
    for cell in records {
        let (record, inline) = WriteRecord::decode_with_value(&cell.value)?;
        return Ok(Some(match (record.kind, inline) {
            (WriteKind::Rollback, _) => continue,
            (WriteKind::Delete, _) => Visible::Deleted,
            (WriteKind::Put, Some(value)) => Visible::Inline(value),
            (WriteKind::Put, None) => Visible::DataAt(record.start_ts),
        }));
    }
    Ok(None)
}
