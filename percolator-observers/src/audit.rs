//! An audit of strong observers from the store's write records: **at most one committed run per
//! change**, across every worker process that ever ran.
//!
//! A committed run of observer `O` on column `c` of a row is a commit of its ack column
//! (`c:ack_O`), made by a transaction that started at `s`. The change it handled is the latest
//! commit of `c` at or before `s`. The paper's guarantee is that two committed runs never handle
//! the same change: a second run either reads the first one's ack and skips, or conflicts on the
//! ack column with it. So two acks mapping to one change are a doubled observer commit. (Only
//! the write records garbage collection has kept can be audited.)

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use percolator_core::backend::records::{WriteKind, WriteRecord};
use percolator_core::internal::tables::ack_column;
use percolator_core::store::{Columns, Family, FamilyRead, RowCells, scan_page};
use percolator_core::{NotificationKind, Result, RowStore};

use crate::Observers;

/// Rows read per scan request.
const PAGE_ROWS: usize = 1_000;

/// What [`strong_runs`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunAudit {
    /// Committed changes of strongly observed columns.
    pub changes: u64,
    /// Committed runs of strong observers.
    pub runs: u64,
    /// Runs that handled a change another run had already handled, described.
    pub doubled: Vec<String>,
}

/// Audits every strong observer in `observers` over the whole store (see the module docs).
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # use percolator_observers::audit::strong_runs;
/// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
/// # struct WordCount;
/// # #[async_trait::async_trait]
/// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
/// #     fn name(&self) -> &str {
/// #         "word-count"
/// #     }
/// #     fn observed(&self) -> percolator_core::ObservedColumn {
/// #         percolator_core::ObservedColumn::strong("docs", "contents")
/// #     }
/// #     async fn observe(
/// #         &self,
/// #         txn: &mut percolator_core::Transaction<S>,
/// #         change: &percolator_observers::Change,
/// #     ) -> percolator_core::Result<()> {
/// #         let text = change.value.as_deref().unwrap_or_default();
/// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
/// #         txn.set("stats", &change.row, "words", words.to_string())
/// #     }
/// # }
/// # fn word_count() -> Observers<MemStore> {
/// #     let mut observers = Observers::new();
/// #     observers.register(WordCount).expect("one observer");
/// #     observers
/// # }
/// # #[tokio::main(flavor = "multi_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Arc::new(MemStore::new());
/// let client = Client::builder(Arc::clone(&store));
/// let runtime = Runtime::start(client, word_count(), RuntimeConfig::default()).await?;
/// for row in ["a", "b"] {
///     let mut txn = runtime.client().begin().await?;
///     txn.set("docs", row, "contents", "one two three")?;
///     txn.commit().await?;
/// }
/// runtime.wait_idle(Duration::from_secs(30)).await?;
/// runtime.shutdown().await?;
///
/// let audit = strong_runs(store.as_ref(), &word_count()).await?;
/// assert_eq!((audit.changes, audit.runs), (2, 2)); // one run per change
/// assert!(audit.doubled.is_empty());
/// # Ok(()) }
/// ```
pub async fn strong_runs<S: RowStore>(store: &S, observers: &Observers<S>) -> Result<RunAudit> {
    strong_runs_with(store, observers, &|_| {}, &|_| {}).await
}

/// [`strong_runs`], telling `on_table` each table it starts reading and `on_rows` how many
/// of its rows it has read. Each table with strongly observed columns is read once, in key
/// order, a page of rows at a time: the audit's work grows linearly with the write records.
pub async fn strong_runs_with<S: RowStore>(
    store: &S,
    observers: &Observers<S>,
    on_table: &(dyn Fn(&[u8]) + Send + Sync),
    on_rows: &(dyn Fn(u64) + Send + Sync),
) -> Result<RunAudit> {
    // table -> (observed column, its observers' ack columns)
    let mut audited: BTreeMap<Bytes, Vec<(Bytes, Vec<Bytes>)>> = BTreeMap::new();
    for observed in observers.observed_columns() {
        if observed.kind != NotificationKind::Strong {
            continue;
        }
        let acks = observers
            .of(&observed.table, &observed.column)
            .iter()
            .map(|observer| ack_column(observer.name(), &observed.column))
            .collect();
        audited
            .entry(observed.table.clone())
            .or_default()
            .push((observed.column.clone(), acks));
    }
    let mut audit = RunAudit::default();
    for (table, columns) in &audited {
        on_table(table);
        audit_table(store, table, columns, on_rows, &mut audit).await?;
    }
    Ok(audit)
}

/// Audits the `columns` (each with its observers' acks) of every row of `table`.
async fn audit_table<S: RowStore>(
    store: &S,
    table: &Bytes,
    columns: &[(Bytes, Vec<Bytes>)],
    on_rows: &(dyn Fn(u64) + Send + Sync),
    audit: &mut RunAudit,
) -> Result<()> {
    let wanted: Vec<Bytes> = columns
        .iter()
        .flat_map(|(column, acks)| std::iter::once(column).chain(acks))
        .cloned()
        .collect();
    let mut start = Bound::Unbounded;
    let mut rows_read = 0u64;
    loop {
        let read = FamilyRead::all(Family::Write).columns(Columns::Only(wanted.clone()));
        let rows = scan_page(store, table, &start, read, PAGE_ROWS).await?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        start = Bound::Excluded(last.row.clone());
        let full = rows.len() == PAGE_ROWS;
        rows_read += rows.len() as u64;
        for row in rows {
            for (column, acks) in columns {
                for ack in acks {
                    audit_cells(table, &row, column, ack, audit)?;
                }
            }
        }
        on_rows(rows_read);
        if !full {
            return Ok(());
        }
    }
}

/// Audits one observer (its `ack` column) on `column` of one row's write records.
fn audit_cells(
    table: &Bytes,
    row: &RowCells,
    column: &Bytes,
    ack: &Bytes,
    audit: &mut RunAudit,
) -> Result<()> {
    // Commit timestamps of the column's changes, and start timestamps of the runs.
    let mut changes = Vec::new();
    let mut runs = Vec::new();
    for cell in &row.cells {
        if cell.column != *column && cell.column != *ack {
            continue;
        }
        let record = WriteRecord::decode(&cell.value)?;
        if record.kind == WriteKind::Rollback {
            continue;
        }
        if cell.column == *column {
            changes.push(cell.ts);
        } else {
            runs.push(record.start_ts);
        }
    }
    changes.sort_unstable();
    audit.changes += changes.len() as u64;
    audit.runs += runs.len() as u64;
    let mut handled: Vec<u64> = runs
        .iter()
        .filter_map(|&start| changes.iter().copied().take_while(|&c| c <= start).last())
        .collect();
    handled.sort_unstable();
    for pair in handled.windows(2) {
        if pair[0] == pair[1] {
            audit.doubled.push(format!(
                "{}:\"{}\" ({}: the change committed at {} was handled by two runs)",
                String::from_utf8_lossy(table),
                row.row.escape_ascii(),
                String::from_utf8_lossy(ack),
                pair[0]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use percolator_backend_mem::MemStore;
    use percolator_core::store::{Mutation, RowMutation};
    use percolator_core::{ObservedColumn, Transaction};

    use super::*;
    use crate::{Change, Observer, Observers};

    struct Noop;

    #[async_trait::async_trait]
    impl Observer<MemStore> for Noop {
        fn name(&self) -> &str {
            "noop"
        }
        fn observed(&self) -> ObservedColumn {
            ObservedColumn::strong("t", "c")
        }
        async fn observe(&self, _: &mut Transaction<MemStore>, _: &Change) -> Result<()> {
            Ok(())
        }
    }

    fn write(column: Bytes, commit_ts: u64, start_ts: u64) -> Mutation {
        Mutation::Put {
            family: Family::Write,
            column,
            ts: commit_ts,
            value: WriteRecord {
                kind: WriteKind::Put,
                start_ts,
            }
            .encode(),
        }
    }

    /// Write records laid down by hand: two runs after one change are caught; runs after
    /// distinct changes, and rolled-back runs, are not.
    #[tokio::test]
    async fn catches_two_runs_for_one_change() {
        let store = Arc::new(MemStore::new());
        let ack = ack_column("noop", b"c");
        let c = Bytes::from_static(b"c");
        let rollback = Mutation::Put {
            family: Family::Write,
            column: ack.clone(),
            ts: 42,
            value: WriteRecord {
                kind: WriteKind::Rollback,
                start_ts: 42,
            }
            .encode(),
        };
        let rows = vec![
            // Change at 10; runs started at 15 and 25 both handled it.
            RowMutation {
                table: Bytes::from_static(b"t"),
                row: Bytes::from_static(b"doubled"),
                conditions: vec![],
                mutations: vec![
                    write(c.clone(), 10, 9),
                    write(ack.clone(), 20, 15),
                    write(ack.clone(), 30, 25),
                ],
            },
            // Changes at 10 and 22; one run each, and a rolled-back one.
            RowMutation {
                table: Bytes::from_static(b"t"),
                row: Bytes::from_static(b"fine"),
                conditions: vec![],
                mutations: vec![
                    write(c.clone(), 10, 9),
                    write(ack.clone(), 20, 15),
                    write(c, 22, 21),
                    write(ack, 30, 25),
                    rollback,
                ],
            },
        ];
        store.mutate_rows(rows).await.unwrap();
        let mut observers = Observers::new();
        observers.register(Noop).unwrap();
        let audit = strong_runs(store.as_ref(), &observers).await.unwrap();
        assert_eq!((audit.changes, audit.runs), (3, 4));
        assert_eq!(audit.doubled.len(), 1, "{:?}", audit.doubled);
        assert!(audit.doubled[0].contains("doubled") && audit.doubled[0].contains("10"));
    }
}
