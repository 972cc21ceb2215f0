//! The row mutations of the protocol, in one place: which cells each step writes, deletes and
//! checks (paper Figure 6, Table 1). Every other module builds its store requests from here, so
//! the cell layout cannot drift between the committer and the cleaners.

use bytes::Bytes;

use crate::records::{CellAddr, LockRecord, SHORT_VALUE_MAX, WriteKind, WriteRecord};
use crate::store::{Condition, Family, FamilyRead, Mutation, ReadRow, RowMutation, TsRange};

/// One buffered write of a transaction within a row: column and new value (`None` deletes).
pub(crate) type ColumnWrite = (Bytes, Option<Bytes>);

/// Index of the failed condition → what it means for a prewrite (see [`prewrite`]).
pub(crate) enum PrewriteConflict {
    /// A write record at or after start_ts exists on this column.
    NewerWrite(Bytes),
    /// Some lock exists on this column.
    Locked(Bytes),
}

/// A put's value if it is short enough to ride in its lock and its write record (no data
/// version); the prewrite and the commit decide by this one rule.
pub(crate) fn short_value(value: &Option<Bytes>) -> Option<&Bytes> {
    value.as_ref().filter(|v| v.len() <= SHORT_VALUE_MAX)
}

/// What the commit of one column writes: its write record's kind, and the value inline when
/// the prewrite kept it in the lock.
#[derive(Debug, Clone)]
pub(crate) struct CommitColumn {
    pub(crate) column: Bytes,
    pub(crate) kind: WriteKind,
    pub(crate) inline: Option<Bytes>,
}

impl CommitColumn {
    /// The commit of a buffered write (its kind, and its value if short).
    pub(crate) fn of(column: &Bytes, value: &Option<Bytes>) -> Self {
        Self {
            column: column.clone(),
            kind: if value.is_some() {
                WriteKind::Put
            } else {
                WriteKind::Delete
            },
            inline: short_value(value).cloned(),
        }
    }
}

/// Prewrite of every buffered column of one row: for each column, no write record at or after
/// `start_ts` and no lock at any timestamp; then the lock — carrying a put's short value — and,
/// for a longer value, data at `start_ts`; and
/// a notify cell at `start_ts` for each column in `notify` (observed columns written here, weak
/// notifications of this row), in the same atomic row mutation.
///
/// Conditions come in pairs per column: `2 * i` is the write check, `2 * i + 1` the lock check.
pub(crate) fn prewrite(
    table: &Bytes,
    row: &Bytes,
    columns: &[ColumnWrite],
    notify: &[Bytes],
    notify_value: &Bytes,
    start_ts: u64,
    lock: &LockRecord,
) -> RowMutation {
    let mut conditions = Vec::with_capacity(columns.len() * 2);
    let mut mutations = Vec::with_capacity(columns.len() * 2 + notify.len());
    for (column, value) in columns {
        let record = match short_value(value) {
            Some(short) => {
                checks(column, start_ts, &mut conditions);
                LockRecord {
                    kind: WriteKind::Put,
                    value: Some(short.clone()),
                    ..lock.clone()
                }
            }
            None => LockRecord {
                kind: checks_and_data(column, value, start_ts, &mut conditions, &mut mutations),
                value: None,
                ..lock.clone()
            },
        };
        mutations.push(Mutation::Put {
            family: Family::Lock,
            column: column.clone(),
            ts: start_ts,
            value: record.encode(),
        });
    }
    notify_puts(notify, notify_value, start_ts, &mut mutations);
    RowMutation {
        table: table.clone(),
        row: row.clone(),
        conditions,
        mutations,
    }
}

/// One-phase commit of every buffered column of one row (see `txn::one_phase`): the prewrite's
/// conditions (same indexes: `2 * i` write check, `2 * i + 1` lock check), then "no snapshot
/// read admitted at or after `commit_ts`"; the write records at `commit_ts` — carrying values
/// of up to [`SHORT_VALUE_MAX`] bytes inline, larger ones as data cells at `start_ts` — and
/// notify cells at `start_ts`, with no lock.
pub(crate) fn one_phase(
    table: &Bytes,
    row: &Bytes,
    columns: &[ColumnWrite],
    notify: &[Bytes],
    notify_value: &Bytes,
    start_ts: u64,
    commit_ts: u64,
) -> RowMutation {
    let mut conditions = Vec::with_capacity(columns.len() * 2 + 1);
    let mut mutations = Vec::with_capacity(columns.len() * 2 + notify.len());
    for (column, value) in columns {
        let record = match short_value(value) {
            Some(short) => {
                checks(column, start_ts, &mut conditions);
                WriteRecord::encode_inline(start_ts, short)
            }
            None => {
                let kind =
                    checks_and_data(column, value, start_ts, &mut conditions, &mut mutations);
                WriteRecord { kind, start_ts }.encode()
            }
        };
        mutations.push(Mutation::Put {
            family: Family::Write,
            column: column.clone(),
            ts: commit_ts,
            value: record,
        });
    }
    conditions.push(Condition::NoSnapshotReadSince { ts: commit_ts });
    notify_puts(notify, notify_value, start_ts, &mut mutations);
    RowMutation {
        table: table.clone(),
        row: row.clone(),
        conditions,
        mutations,
    }
}

/// The prewrite checks of one column: no write record at or after `start_ts` (condition
/// `2 * i`), no lock at all (`2 * i + 1`).
fn checks(column: &Bytes, start_ts: u64, conditions: &mut Vec<Condition>) {
    conditions.push(Condition::Absent {
        family: Family::Write,
        column: column.clone(),
        ts: TsRange::from(start_ts),
    });
    conditions.push(Condition::Absent {
        family: Family::Lock,
        column: column.clone(),
        ts: TsRange::ALL,
    });
}

/// The prewrite [`checks`] of one column and its data put at `start_ts` (none for a delete).
/// Returns the kind of write.
fn checks_and_data(
    column: &Bytes,
    value: &Option<Bytes>,
    start_ts: u64,
    conditions: &mut Vec<Condition>,
    mutations: &mut Vec<Mutation>,
) -> WriteKind {
    checks(column, start_ts, conditions);
    match value {
        Some(value) => {
            mutations.push(Mutation::Put {
                family: Family::Data,
                column: column.clone(),
                ts: start_ts,
                value: value.clone(),
            });
            WriteKind::Put
        }
        None => WriteKind::Delete,
    }
}

/// Notify cells at `start_ts` for `notify`, carrying `notify_value`.
fn notify_puts(
    notify: &[Bytes],
    notify_value: &Bytes,
    start_ts: u64,
    mutations: &mut Vec<Mutation>,
) {
    mutations.extend(notify.iter().map(|column| Mutation::Put {
        family: Family::Notify,
        column: column.clone(),
        ts: start_ts,
        value: notify_value.clone(),
    }));
}

/// Unconditional notify cells at `ts`, one row mutation per row of `addrs` (sorted).
pub(crate) fn notify_rows(addrs: &[CellAddr], ts: u64, value: &Bytes) -> Vec<RowMutation> {
    let mut out: Vec<RowMutation> = Vec::new();
    for addr in addrs {
        let put = Mutation::Put {
            family: Family::Notify,
            column: addr.column.clone(),
            ts,
            value: value.clone(),
        };
        match out.last_mut() {
            Some(last) if last.table == addr.table && last.row == addr.row => {
                last.mutations.push(put);
            }
            _ => out.push(RowMutation {
                table: addr.table.clone(),
                row: addr.row.clone(),
                conditions: Vec::new(),
                mutations: vec![put],
            }),
        }
    }
    out
}

/// Deletes exactly the listed notify versions of one column (a consumed notification); versions
/// written meanwhile are untouched.
pub(crate) fn clear_notify(addr: &CellAddr, versions: &[u64]) -> RowMutation {
    RowMutation {
        table: addr.table.clone(),
        row: addr.row.clone(),
        conditions: Vec::new(),
        mutations: versions
            .iter()
            .map(|&ts| Mutation::Delete {
                family: Family::Notify,
                column: addr.column.clone(),
                ts,
            })
            .collect(),
    }
}

/// Maps a failed prewrite condition index back to its column and meaning.
pub(crate) fn prewrite_conflict(columns: &[ColumnWrite], condition: usize) -> PrewriteConflict {
    let column = columns
        .get(condition / 2)
        .map(|(c, _)| c.clone())
        .unwrap_or_default();
    if condition.is_multiple_of(2) {
        PrewriteConflict::NewerWrite(column)
    } else {
        PrewriteConflict::Locked(column)
    }
}

/// Commit of the listed columns of one row at `commit_ts`: each lock at `start_ts` must still be
/// there; write records (short values inline) go in and locks go away in one atomic row
/// mutation.
pub(crate) fn commit(
    table: &Bytes,
    row: &Bytes,
    columns: &[CommitColumn],
    start_ts: u64,
    commit_ts: u64,
) -> RowMutation {
    let mut conditions = Vec::with_capacity(columns.len());
    let mut mutations = Vec::with_capacity(columns.len() * 2);
    for CommitColumn {
        column,
        kind,
        inline,
    } in columns
    {
        conditions.push(Condition::Exists {
            family: Family::Lock,
            column: column.clone(),
            ts: start_ts,
        });
        mutations.push(Mutation::Put {
            family: Family::Write,
            column: column.clone(),
            ts: commit_ts,
            value: match inline {
                Some(value) => WriteRecord::encode_inline(start_ts, value),
                None => WriteRecord {
                    kind: *kind,
                    start_ts,
                }
                .encode(),
            },
        });
        mutations.push(Mutation::Delete {
            family: Family::Lock,
            column: column.clone(),
            ts: start_ts,
        });
    }
    RowMutation {
        table: table.clone(),
        row: row.clone(),
        conditions,
        mutations,
    }
}

/// The mutations that roll one column of transaction `start_ts` back: the lock and data go, a
/// rollback record at `start_ts` stays so that a late prewrite of that transaction fails.
pub(crate) fn rollback_mutations(column: &Bytes, start_ts: u64) -> Vec<Mutation> {
    vec![
        Mutation::Put {
            family: Family::Write,
            column: column.clone(),
            ts: start_ts,
            value: WriteRecord {
                kind: WriteKind::Rollback,
                start_ts,
            }
            .encode(),
        },
        Mutation::Delete {
            family: Family::Lock,
            column: column.clone(),
            ts: start_ts,
        },
        Mutation::Delete {
            family: Family::Data,
            column: column.clone(),
            ts: start_ts,
        },
    ]
}

/// Rolls back a column whose lock is known to be at `start_ts` (no-op if the lock is gone).
pub(crate) fn rollback_locked(addr: &CellAddr, start_ts: u64) -> RowMutation {
    RowMutation {
        table: addr.table.clone(),
        row: addr.row.clone(),
        conditions: vec![Condition::Exists {
            family: Family::Lock,
            column: addr.column.clone(),
            ts: start_ts,
        }],
        mutations: rollback_mutations(&addr.column, start_ts),
    }
}

/// Rolls back the primary of transaction `start_ts` whose lock holds exactly `lock_bytes`: if the
/// owner refreshed or committed it in the meantime, the condition fails and nothing changes.
pub(crate) fn rollback_primary(addr: &CellAddr, start_ts: u64, lock_bytes: Bytes) -> RowMutation {
    RowMutation {
        table: addr.table.clone(),
        row: addr.row.clone(),
        conditions: vec![Condition::Equals {
            family: Family::Lock,
            column: addr.column.clone(),
            ts: start_ts,
            value: lock_bytes,
        }],
        mutations: rollback_mutations(&addr.column, start_ts),
    }
}

/// Marks transaction `start_ts` rolled back at a primary that holds neither its lock nor its write
/// record (it was never prewritten there, or the prewrite is still in flight): the record makes
/// any later prewrite fail.
pub(crate) fn rollback_absent(addr: &CellAddr, start_ts: u64) -> RowMutation {
    RowMutation {
        table: addr.table.clone(),
        row: addr.row.clone(),
        conditions: vec![Condition::Absent {
            family: Family::Lock,
            column: addr.column.clone(),
            ts: TsRange::at(start_ts),
        }],
        mutations: vec![Mutation::Put {
            family: Family::Write,
            column: addr.column.clone(),
            ts: start_ts,
            value: WriteRecord {
                kind: WriteKind::Rollback,
                start_ts,
            }
            .encode(),
        }],
    }
}

/// Rolls a secondary column forward to a commit made at `commit_ts` (no-op if already resolved):
/// the write record its own commit would have written, from what its lock holds (the kind, a
/// short value).
pub(crate) fn roll_forward(
    addr: &CellAddr,
    start_ts: u64,
    commit_ts: u64,
    lock: &LockRecord,
) -> RowMutation {
    commit(
        &addr.table,
        &addr.row,
        &[CommitColumn {
            column: addr.column.clone(),
            kind: lock.kind,
            inline: lock.value.clone(),
        }],
        start_ts,
        commit_ts,
    )
}

/// Re-writes the primary lock with a fresh wall time (heartbeat), only while it is still there.
pub(crate) fn refresh_lock(addr: &CellAddr, start_ts: u64, lock: &LockRecord) -> RowMutation {
    RowMutation {
        table: addr.table.clone(),
        row: addr.row.clone(),
        conditions: vec![Condition::Exists {
            family: Family::Lock,
            column: addr.column.clone(),
            ts: start_ts,
        }],
        mutations: vec![Mutation::Put {
            family: Family::Lock,
            column: addr.column.clone(),
            ts: start_ts,
            value: lock.encode(),
        }],
    }
}

/// The status read of a transaction at its primary: the lock at `start_ts` and every write record
/// at or after `start_ts` (one of which may point back at `start_ts`).
pub(crate) fn status_read(addr: &CellAddr, start_ts: u64) -> ReadRow {
    let columns = crate::store::Columns::one(addr.column.clone());
    ReadRow {
        snapshot_ts: None,
        table: addr.table.clone(),
        row: addr.row.clone(),
        reads: vec![
            FamilyRead::all(Family::Lock)
                .columns(columns.clone())
                .ts(TsRange::at(start_ts)),
            FamilyRead::all(Family::Write)
                .columns(columns)
                .ts(TsRange::from(start_ts)),
        ],
    }
}
