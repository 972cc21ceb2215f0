//! Reads: `read_row` and `read_rows` as one read-only etcd transaction (every family of every
//! row at one revision), `scan` as pages of one key range, all pages at the revision of the first.

use std::ops::Bound;

use bytes::Bytes;
use percolator_core::backend::scan::{truncate_versions, versions_taken};
use percolator_core::{Cell, Columns, FamilyRead, ReadRow, RowCells, Scan, StoreError};

use crate::client::{EtcdClient, EtcdError, Idempotence};
use crate::keys::{Layout, after, prefix_end};
use crate::proto::{self, RequestOp, request_op, response_op};
use crate::store_error;

/// Keys per page of a scan.
const PAGE: i64 = 512;

/// One range read serving part of a [`FamilyRead`].
struct RangeOp {
    /// Index of the family read it serves.
    read: usize,
    request: proto::RangeRequest,
}

fn ranges_of(layout: &Layout, request: &ReadRow) -> Vec<RangeOp> {
    let mut out = Vec::new();
    for (index, read) in request.reads.iter().enumerate() {
        if read.ts.is_empty() {
            continue;
        }
        match &read.columns {
            Columns::Only(list) => {
                let mut list = list.clone();
                list.sort();
                list.dedup();
                for column in list {
                    let (key, range_end) = layout.versions(
                        read.family,
                        &request.table,
                        &request.row,
                        &column,
                        read.ts,
                    );
                    out.push(RangeOp {
                        read: index,
                        request: proto::RangeRequest {
                            key,
                            range_end,
                            limit: read
                                .max_versions
                                .map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX)),
                            ..proto::RangeRequest::default()
                        },
                    });
                }
            }
            Columns::All => {
                let start = layout.row_start(read.family, &request.table, &request.row);
                let end = prefix_end(&start);
                out.push(RangeOp {
                    read: index,
                    request: proto::RangeRequest {
                        key: Bytes::from(start),
                        range_end: Bytes::from(end),
                        ..proto::RangeRequest::default()
                    },
                });
            }
        }
    }
    out
}

/// Decodes a family read's keys into cells, keeping the versions it selects.
fn cells_of(
    layout: &Layout,
    read: &FamilyRead,
    kvs: Vec<proto::KeyValue>,
    out: &mut Vec<Cell>,
) -> Result<(), StoreError> {
    for kv in kvs {
        let cell = layout.decode(read.family, &kv.key)?;
        if read.ts.contains(cell.ts) && read.columns.matches(&cell.column) {
            out.push(Cell {
                column: Bytes::from(cell.column),
                ts: cell.ts,
                value: kv.value,
            });
        }
    }
    Ok(())
}

/// `RowStore::read_row`: [`read_rows`] of one row.
pub(crate) async fn read_row(
    client: &EtcdClient,
    layout: &Layout,
    request: ReadRow,
) -> Result<Vec<Vec<Cell>>, StoreError> {
    let mut answers = read_rows(client, layout, vec![request]).await?;
    answers
        .pop()
        .ok_or_else(|| StoreError::Corrupt("a row read got no answer".into()))
}

/// `RowStore::read_rows`: the ranges of every row in one read-only transaction when the
/// cluster's `--max-txn-ops` allows, else several, all at the revision the first one read (so
/// every row is one consistent snapshot, and all of them the same one).
pub(crate) async fn read_rows(
    client: &EtcdClient,
    layout: &Layout,
    requests: Vec<ReadRow>,
) -> Result<Vec<Vec<Vec<Cell>>>, StoreError> {
    // (request, range) pairs, in order.
    let ops: Vec<(usize, RangeOp)> = requests
        .iter()
        .enumerate()
        .flat_map(|(i, request)| {
            ranges_of(layout, request)
                .into_iter()
                .map(move |op| (i, op))
        })
        .collect();
    let mut out: Vec<Vec<Vec<Cell>>> = requests
        .iter()
        .map(|request| vec![Vec::new(); request.reads.len()])
        .collect();
    let max_ops = client.config().max_txn_ops.max(1);
    let mut revision = 0i64;
    for chunk in ops.chunks(max_ops) {
        let txn = proto::TxnRequest {
            compare: Vec::new(),
            success: chunk
                .iter()
                .map(|(_, op)| RequestOp {
                    request: Some(request_op::Request::RequestRange(proto::RangeRequest {
                        revision,
                        ..op.request.clone()
                    })),
                })
                .collect(),
            failure: Vec::new(),
        };
        let answer = client
            .txn(txn, Idempotence::Read)
            .await
            .map_err(store_error)?;
        if revision == 0 {
            revision = answer.header.as_ref().map_or(0, |h| h.revision);
        }
        if answer.responses.len() != chunk.len() {
            return Err(StoreError::Corrupt(
                "etcd answered a read with a different number of ranges".into(),
            ));
        }
        for ((i, op), response) in chunk.iter().zip(answer.responses) {
            let Some(response_op::Response::ResponseRange(range)) = response.response else {
                return Err(StoreError::Corrupt(
                    "etcd answered a range with something else".into(),
                ));
            };
            cells_of(
                layout,
                &requests[*i].reads[op.read],
                range.kvs,
                &mut out[*i][op.read],
            )?;
        }
    }
    for (answer, request) in out.iter_mut().zip(&requests) {
        for (cells, read) in answer.iter_mut().zip(&request.reads) {
            if matches!(read.columns, Columns::All) {
                truncate_versions(cells, read.max_versions);
            }
        }
    }
    Ok(out)
}

/// `RowStore::scan`: pages of `PAGE` keys over the family's key range of the scanned rows, at
/// the revision of the first page (one consistent snapshot), until `row_limit` rows with
/// selected cells have been seen. A page that reads a compacted revision restarts the scan.
pub(crate) async fn scan(
    client: &EtcdClient,
    layout: &Layout,
    request: &Scan,
) -> Result<Vec<RowCells>, StoreError> {
    for _ in 0..3 {
        match scan_at_one_revision(client, layout, request).await {
            Err(EtcdError::Compacted(_)) => continue,
            other => return other.map_err(store_error)?,
        }
    }
    Err(StoreError::Unavailable(
        "etcd: scan kept reading compacted revisions".into(),
    ))
}

async fn scan_at_one_revision(
    client: &EtcdClient,
    layout: &Layout,
    request: &Scan,
) -> Result<Result<Vec<RowCells>, StoreError>, EtcdError> {
    let family = request.read.family;
    let start = match &request.start {
        Bound::Included(r) => layout.row_start(family, &request.table, r),
        Bound::Excluded(r) => prefix_end(&layout.row_start(family, &request.table, r)),
        Bound::Unbounded => layout.table_start(family, &request.table),
    };
    let end = match &request.end {
        Bound::Included(r) => prefix_end(&layout.row_start(family, &request.table, r)),
        Bound::Excluded(r) => layout.row_start(family, &request.table, r),
        Bound::Unbounded => prefix_end(&layout.table_start(family, &request.table)),
    };
    let mut rows: Vec<RowCells> = Vec::new();
    if start >= end || request.read.ts.is_empty() {
        return Ok(Ok(rows));
    }
    let limit = request.row_limit.unwrap_or(usize::MAX);
    let max_versions = request.read.max_versions.unwrap_or(usize::MAX);
    let end = Bytes::from(end);
    let mut cursor = Bytes::from(start);
    let mut revision = 0i64;
    loop {
        let page = client
            .range(proto::RangeRequest {
                key: cursor.clone(),
                range_end: end.clone(),
                limit: PAGE,
                revision,
                ..proto::RangeRequest::default()
            })
            .await?;
        if revision == 0 {
            revision = page.header.as_ref().map_or(0, |h| h.revision);
        }
        let last = page.kvs.last().map(|kv| after(&kv.key));
        // Where to go on after a page that ended among versions past `max_versions` (the
        // history of one column): straight to the next column, not through its history.
        let mut skip_to = None;
        for kv in page.kvs {
            skip_to = None;
            let cell = match layout.decode(family, &kv.key) {
                Ok(cell) => cell,
                Err(e) => return Ok(Err(e)),
            };
            if versions_taken(&rows, &cell.row, &cell.column) >= max_versions {
                let mut column = layout.family_prefix(family);
                column.extend_from_slice(&percolator_core::backend::key::column_prefix(
                    &cell.table,
                    &cell.row,
                    &cell.column,
                ));
                skip_to = Some(prefix_end(&column));
                continue;
            }
            let same_row = rows
                .last()
                .is_some_and(|r| r.row.as_ref() == cell.row.as_slice());
            if !same_row {
                // A new row starts: the previous one is complete.
                if let Some(done) = rows.last_mut() {
                    truncate_versions(&mut done.cells, request.read.max_versions);
                }
                if rows.last().is_some_and(|r| r.cells.is_empty()) {
                    rows.pop();
                }
                if rows.len() >= limit {
                    return Ok(Ok(rows));
                }
                rows.push(RowCells {
                    row: Bytes::from(cell.row.clone()),
                    cells: Vec::new(),
                });
            }
            if request.read.ts.contains(cell.ts)
                && request.read.columns.matches(&cell.column)
                && let Some(row) = rows.last_mut()
            {
                row.cells.push(Cell {
                    column: Bytes::from(cell.column),
                    ts: cell.ts,
                    value: kv.value,
                });
            }
        }
        match (last, skip_to) {
            (Some(_), Some(next)) if page.more => cursor = Bytes::from(next),
            (Some(next), None) if page.more => cursor = Bytes::from(next),
            _ => break,
        }
    }
    if let Some(done) = rows.last_mut() {
        truncate_versions(&mut done.cells, request.read.max_versions);
    }
    if rows.last().is_some_and(|r| r.cells.is_empty()) {
        rows.pop();
    }
    rows.truncate(limit);
    Ok(Ok(rows))
}

/// `RowStore::tables`: skips from table to table in each family's key range, one one-key
/// range request per table.
pub(crate) async fn tables(client: &EtcdClient, layout: &Layout) -> Result<Vec<Bytes>, StoreError> {
    let mut tables = std::collections::BTreeSet::new();
    for family in percolator_core::Family::ALL {
        let end = Bytes::from(prefix_end(&layout.family_prefix(family)));
        let mut cursor = Bytes::from(layout.family_prefix(family));
        loop {
            let page = client
                .range(proto::RangeRequest {
                    key: cursor.clone(),
                    range_end: end.clone(),
                    limit: 1,
                    keys_only: true,
                    ..proto::RangeRequest::default()
                })
                .await
                .map_err(store_error)?;
            let Some(kv) = page.kvs.into_iter().next() else {
                break;
            };
            let table = layout.decode(family, &kv.key)?.table;
            cursor = Bytes::from(prefix_end(&layout.table_start(family, &table)));
            tables.insert(Bytes::from(table));
        }
    }
    Ok(tables.into_iter().collect())
}
