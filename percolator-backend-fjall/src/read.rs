//! The read path: `read_row` and `scan` through one fjall snapshot, without row latches except
//! where memory answers under the row's latch (the lock mirror, the recent writes, a snapshot
//! read's admission). Reads only look at the engine and the in-memory tables; they never plan
//! or apply writes, so they are apart from the mutate path.

use bytes::Bytes;
use fjall::{Keyspace, Readable as _, Snapshot};
use percolator_backend_embedded::{prefix_end, scan_range};
use percolator_core::backend::key;
use percolator_core::{Cell, Columns, Family, FamilyRead, ReadRow, RowCells, Scan, StoreError};

use crate::scan_stream::{RowsBuilder, scan_entries};
use crate::{FjallStore, backend, corrupt};

/// What [`FjallStore::read_row`] knows of one read from memory, under the row's latch.
enum Known {
    /// The answer (locks, from the lock mirror).
    Cells(Vec<Cell>),
    /// The newest write record asked for is at `ts` (from the recent writes).
    NewestWrite { column: Bytes, ts: u64 },
    /// Ask the engine.
    Nothing,
}

/// The first key of `keyspace` in `range` as seen by `snapshot`, without loading its value.
pub(crate) fn first_key<R: std::ops::RangeBounds<Vec<u8>>>(
    snapshot: &Snapshot,
    keyspace: &Keyspace,
    range: R,
    context: &str,
) -> Result<Option<fjall::UserKey>, StoreError> {
    snapshot
        .range(keyspace, range)
        .next()
        .map(|guard| guard.key().map_err(|e| backend(context, e)))
        .transpose()
}

impl FjallStore {
    /// [`RowStore::read_row`](percolator_core::RowStore::read_row), after the task's budget.
    pub(crate) fn read_cells(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        let reads_locks = request.reads.iter().any(|read| read.family == Family::Lock);
        // Per read: its answer from the lock mirror, or the timestamp of the newest write
        // record it asks for, known from memory.
        let mut known: Vec<Known> = Vec::new();
        let snapshot = if request.snapshot_ts.is_some() || reads_locks {
            self.latches
                .admit_read(&request.table, &request.row, request.snapshot_ts);
            // A mutation that checked the condition before the admission holds the latch until
            // its batch is visible: the snapshot opened after it includes it. Under the latch
            // the lock mirror and the recent writes are the row's latest state too, the one the
            // snapshot holds.
            let _latch = self.latches.read(&request.table, &request.row);
            let snapshot = self.db.snapshot();
            known = request
                .reads
                .iter()
                .map(|read| self.known_under_latch(&request.table, &request.row, read))
                .collect::<Result<_, _>>()?;
            snapshot
        } else {
            // One snapshot: never half of a batch, so no latch (see the crate docs).
            self.db.snapshot()
        };
        let prefix = key::row_prefix(&request.table, &request.row);
        let mut known = known.into_iter();
        request
            .reads
            .iter()
            .map(|read| {
                let from_memory = match known.next() {
                    Some(Known::Cells(cells)) => Some(cells),
                    Some(Known::NewestWrite { column, ts }) => self
                        .newest_write(&snapshot, &request, &column, ts)?
                        .map(|cell| vec![cell]),
                    Some(Known::Nothing) | None => None,
                };
                match from_memory {
                    Some(cells) => Ok(cells),
                    None => {
                        self.read_family(&snapshot, &prefix, &request.table, &request.row, read)
                    }
                }
            })
            .collect()
    }

    /// [`RowStore::scan`](percolator_core::RowStore::scan), after the task's budget.
    pub(crate) fn scan_rows(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        if request.snapshot_ts.is_some() {
            self.latches.admit_scan(&request.table, request.snapshot_ts);
            self.latches.cycle_scan_gates();
        }
        let table_prefix = key::table_prefix(&request.table);
        let (mut cursor, scan_end) = scan_range(&request.table, &request.start, &request.end);
        if request.read.family == Family::Lock {
            let sequence = self.locks.atomic_sequence();
            if sequence.is_multiple_of(2) {
                let rows =
                    self.scan_lock_mirror(table_prefix.len(), &cursor, &scan_end, &request)?;
                if self.locks.atomic_sequence() == sequence {
                    return Ok(rows);
                }
            }
            // An atomic batch's lock writes overlapped: the engine's snapshot has it whole.
        }
        let snapshot = self.db.snapshot();
        if request.read.family == Family::Notify && request.snapshot_ts.is_none() {
            return self.scan_notify_rows(&snapshot, &table_prefix, &cursor, &scan_end, &request);
        }
        if request.read.family != Family::Notify {
            return crate::scan_stream::scan_family(
                &snapshot,
                self.keyspace(request.read.family),
                &table_prefix,
                cursor,
                &scan_end,
                &request.read,
                request.row_limit,
            );
        }
        let keyspace = self.keyspace(request.read.family);
        let mut out = Vec::new();
        while request.row_limit.is_none_or(|limit| out.len() < limit) {
            let Some(k) = first_key(
                &snapshot,
                keyspace,
                cursor.clone()..scan_end.clone(),
                "scan",
            )?
            else {
                break;
            };
            let rest = k.get(table_prefix.len()..).unwrap_or_default();
            let (row, used) = key::decode_bytes(rest, table_prefix.len()).map_err(corrupt)?;
            let row_prefix = &k[..table_prefix.len() + used];
            let cells =
                self.read_family(&snapshot, row_prefix, &request.table, &row, &request.read)?;
            cursor = prefix_end(row_prefix);
            if !cells.is_empty() {
                out.push(RowCells {
                    row: Bytes::from(row),
                    cells,
                });
            }
        }
        Ok(out)
    }

    /// A scan of the lock family from the lock mirror: each row that holds a live lock in
    /// `[cursor, scan_end)`, read under the row's latch (see [`crate::lock_mirror`]).
    fn scan_lock_mirror(
        &self,
        table_len: usize,
        cursor: &[u8],
        scan_end: &[u8],
        request: &Scan,
    ) -> Result<Vec<RowCells>, StoreError> {
        let Some(mut rows) = RowsBuilder::new(table_len, &request.read, request.row_limit) else {
            return Ok(Vec::new());
        };
        let mut from = cursor.to_vec();
        while let Some(first) = self.locks.first_in(&from, scan_end) {
            let rest = first.get(table_len..).unwrap_or_default();
            let (row, used) = key::decode_bytes(rest, table_len).map_err(corrupt)?;
            let row_prefix = &first[..table_len + used];
            let row_end = prefix_end(row_prefix);
            let entries = {
                let _latch = self.latches.read(&request.table, &row);
                self.locks.entries_in(row_prefix, &row_end)
            };
            if !scan_entries(&mut rows, entries)? {
                break;
            }
            from = row_end;
        }
        Ok(rows.finish())
    }

    /// [`RowStore::tables`](percolator_core::RowStore::tables): one seek per table in each
    /// family's keyspace.
    pub(crate) fn table_names(&self) -> Result<Vec<Bytes>, StoreError> {
        let snapshot = self.db.snapshot();
        let mut tables = std::collections::BTreeSet::new();
        for keyspace in &self.keyspaces {
            let mut cursor = Vec::new();
            while let Some(k) = first_key(&snapshot, keyspace, cursor.clone().., "listing tables")?
            {
                let (table, _) = key::decode_bytes(&k, 0).map_err(corrupt)?;
                cursor = prefix_end(&key::table_prefix(&table));
                tables.insert(Bytes::from(table));
            }
        }
        Ok(tables.into_iter().collect())
    }

    /// What memory answers for `read` of `table`/`row` under the row's latch.
    fn known_under_latch(
        &self,
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Known, StoreError> {
        match (read.family, &read.columns, read.max_versions) {
            (Family::Lock, _, _) => Ok(Known::Cells(self.locks.read(table, row, read)?)),
            // The newest write record of one column (what a snapshot read asks): a range
            // lookup seeks into every table, a point lookup of its known timestamp passes
            // most of them by their bloom filters.
            (Family::Write, Columns::Only(list), Some(1))
                if list.len() == 1 && !read.ts.is_empty() =>
            {
                let column = list[0].clone();
                let prefix = key::column_prefix(table, row, &column);
                Ok(match self.recent.newest_in(&prefix, read.ts) {
                    Some(ts) => Known::NewestWrite { column, ts },
                    None => Known::Nothing,
                })
            }
            _ => Ok(Known::Nothing),
        }
    }

    /// The write record of `column` at `ts` in `snapshot`, by a point lookup; `None` if the
    /// snapshot lacks it (then the caller reads the range).
    fn newest_write(
        &self,
        snapshot: &Snapshot,
        request: &ReadRow,
        column: &Bytes,
        ts: u64,
    ) -> Result<Option<Cell>, StoreError> {
        let mut cell_key = key::column_prefix(&request.table, &request.row, column);
        key::encode_ts(&mut cell_key, ts);
        let value = snapshot
            .get(self.keyspace(Family::Write), cell_key)
            .map_err(|e| backend("read", e))?;
        Ok(value.map(|v| Cell {
            column: column.clone(),
            ts,
            value: Bytes::copy_from_slice(&v),
        }))
    }

    /// Cells of one family of one row, as `snapshot` sees them.
    ///
    /// The notify family's include the row's absorbed notifications
    /// ([`notify_cells`](crate::notify_cells)).
    fn read_family(
        &self,
        snapshot: &Snapshot,
        row_prefix: &[u8],
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Vec<Cell>, StoreError> {
        let mut cells = self.read_stored(snapshot, row_prefix, table, row, read)?;
        if read.family == Family::Notify {
            self.merge_absorbed(row_prefix, read, &mut cells)?;
        }
        Ok(cells)
    }

    /// Adds to `cells`, the notify cells `read` found stored in the row `row_prefix` (by column,
    /// newest first), the row's absorbed notifications that `read` asks for, in their places
    /// (within `read.max_versions` per column).
    fn merge_absorbed(
        &self,
        row_prefix: &[u8],
        read: &FamilyRead,
        cells: &mut Vec<Cell>,
    ) -> Result<(), StoreError> {
        if read.ts.is_empty() {
            return Ok(());
        }
        let mut added = false;
        for (cell, version) in self.notify_cells.absorbed_in_row(row_prefix) {
            if !read.ts.contains(version.ts) {
                continue;
            }
            let rest = cell.get(row_prefix.len()..).unwrap_or_default();
            let (column, _) = key::decode_bytes(rest, row_prefix.len()).map_err(corrupt)?;
            let wanted = match &read.columns {
                Columns::All => true,
                Columns::Only(list) => list.iter().any(|c| c.as_ref() == column.as_slice()),
            };
            let stored = cells
                .iter()
                .any(|c| c.ts == version.ts && c.column.as_ref() == column.as_slice());
            if wanted && !stored {
                cells.push(Cell {
                    column: Bytes::from(column),
                    ts: version.ts,
                    value: version.value,
                });
                added = true;
            }
        }
        if added {
            cells.sort_by(|a, b| a.column.cmp(&b.column).then(b.ts.cmp(&a.ts)));
            if let Some(limit) = read.max_versions {
                let mut taken: Option<(Bytes, usize)> = None;
                cells.retain(|c| {
                    let n = match &mut taken {
                        Some((column, n)) if *column == c.column => n,
                        _ => &mut taken.insert((c.column.clone(), 0)).1,
                    };
                    *n += 1;
                    *n <= limit
                });
            }
        }
        Ok(())
    }

    /// Cells of one family of one row stored in the engine, as `snapshot` sees them: one
    /// version per column by point lookups, anything else as a scan of the row.
    fn read_stored(
        &self,
        snapshot: &Snapshot,
        row_prefix: &[u8],
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Vec<Cell>, StoreError> {
        let keyspace = self.keyspace(read.family);
        if let Columns::Only(list) = &read.columns
            && !read.ts.is_empty()
            && read.ts.lo == read.ts.hi
            && read.max_versions != Some(0)
        {
            // One version per column (a read of the data a write record points at): a point
            // lookup, which bloom filters answer without merging every table's iterator as a
            // range does.
            let mut list = list.clone();
            list.sort();
            list.dedup();
            let mut out = Vec::new();
            for column in &list {
                let mut cell_key = key::column_prefix(table, row, column);
                key::encode_ts(&mut cell_key, read.ts.lo);
                if let Some(v) = snapshot
                    .get(keyspace, cell_key)
                    .map_err(|e| backend("read", e))?
                {
                    out.push(Cell {
                        column: column.clone(),
                        ts: read.ts.lo,
                        value: Bytes::copy_from_slice(&v),
                    });
                }
            }
            return Ok(out);
        }
        let table_len = key::table_prefix(table).len();
        let rows = crate::scan_stream::scan_family(
            snapshot,
            keyspace,
            &row_prefix[..table_len],
            row_prefix.to_vec(),
            &prefix_end(row_prefix),
            read,
            None,
        )?;
        Ok(rows
            .into_iter()
            .next()
            .map(|found| found.cells)
            .unwrap_or_default())
    }

    /// A scan of the notify family that is not a snapshot read: the rows of the cells of
    /// [`Self::notify_cells`] in `[cursor, scan_end)`, each read from `snapshot` with its
    /// absorbed notifications (rows that got their first notification after it read as empty
    /// and are left out, as rows emptied meanwhile are).
    fn scan_notify_rows(
        &self,
        snapshot: &Snapshot,
        table_prefix: &[u8],
        cursor: &[u8],
        scan_end: &[u8],
        request: &Scan,
    ) -> Result<Vec<RowCells>, StoreError> {
        let mut out = Vec::new();
        for row_prefix in self.notify_cells.rows(cursor, scan_end) {
            if request.row_limit.is_some_and(|limit| out.len() >= limit) {
                break;
            }
            let rest = row_prefix.get(table_prefix.len()..).unwrap_or_default();
            let (row, _) = key::decode_bytes(rest, table_prefix.len()).map_err(corrupt)?;
            let cells =
                self.read_family(snapshot, &row_prefix, &request.table, &row, &request.read)?;
            if !cells.is_empty() {
                out.push(RowCells {
                    row: Bytes::from(row),
                    cells,
                });
            }
        }
        Ok(out)
    }
}
