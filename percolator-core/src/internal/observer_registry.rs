//! The observed-columns registry: which observers watch which columns, kept in the store so
//! that every process agrees (paper §2.4 keeps this in the application's configuration; with
//! rolling deploys and writers that declare nothing, a per-process list loses notifications).
//!
//! - **Workers** register each observer (name, column, kind) when their runtime starts.
//! - **Writers** may declare observed columns ([`crate::ClientBuilder::observe`]); a declaration
//!   is registered too, without an observer name, so the column counts as observed before any
//!   worker has started.
//! - **Every client** reads the registry when it is built and again with each lease renewal, and
//!   writes a notify cell for every write of a strongly observed column, declared or not.
//! - **Clearing** a notification of a column needs every registered observer of it to have
//!   covered the change (see `percolator-observers`), not only the observers of the worker that
//!   ran.
//!
//! Registrations stay until they are forgotten ([`forget_observer`], `percolator observers
//! forget`): an observer whose workers are down still gets its notifications when they return.
//!
//! Storage: one row per observed `(table, column)` in the reserved [`OBSERVERS_TABLE`]; one cell
//! per observer (column = its name, empty for a writer's declaration; value = its kind), at
//! timestamp 0, written with plain row mutations (idempotent).

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use bytes::{Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::store::{Family, FamilyRead, Mutation, RowMutation, RowStore, Scan};
use crate::tables::OBSERVERS_TABLE;
use crate::txn::{NotificationKind, ObservedColumn};

/// One registration: an observer (or a writer's declaration) of a column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Registration {
    /// The observed column.
    pub column: ObservedColumn,
    /// The observer's name; `None` for a writer's declaration.
    pub observer: Option<String>,
}

impl Registration {
    /// Observer `name` watches `column`.
    pub fn observer(name: impl Into<String>, column: ObservedColumn) -> Self {
        Self {
            column,
            observer: Some(name.into()),
        }
    }

    /// A writer declares that `column` is observed.
    pub fn declared(column: ObservedColumn) -> Self {
        Self {
            column,
            observer: None,
        }
    }
}

/// Writes `registrations` (already present ones are rewritten, harmlessly).
pub async fn register<S: RowStore + ?Sized>(
    store: &S,
    registrations: &[Registration],
) -> Result<()> {
    if registrations.is_empty() {
        return Ok(());
    }
    let mut rows: HashMap<Bytes, Vec<Mutation>> = HashMap::new();
    for registration in registrations {
        crate::tables::check_user_table(&registration.column.table)?;
        let name = registration.observer.as_deref().unwrap_or("");
        rows.entry(row_key(
            &registration.column.table,
            &registration.column.column,
        ))
        .or_default()
        .push(Mutation::Put {
            family: Family::Data,
            column: Bytes::copy_from_slice(name.as_bytes()),
            ts: 0,
            value: Bytes::from_static(kind_byte(registration.column.kind)),
        });
    }
    let batch = rows
        .into_iter()
        .map(|(row, mutations)| RowMutation {
            table: Bytes::from_static(OBSERVERS_TABLE),
            row,
            conditions: Vec::new(),
            mutations,
        })
        .collect();
    store.mutate_rows(batch).await?;
    Ok(())
}

/// Every registration, ordered by table, column and name.
pub async fn list<S: RowStore + ?Sized>(store: &S) -> Result<Vec<Registration>> {
    let rows = store
        .scan(Scan {
            snapshot_ts: None,
            table: Bytes::from_static(OBSERVERS_TABLE),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Data).max_versions(1),
            row_limit: None,
        })
        .await?;
    let mut out = Vec::new();
    for row in rows {
        let (table, column) = parse_row_key(&row.row)?;
        for cell in row.cells {
            let observer = if cell.column.is_empty() {
                None
            } else {
                Some(String::from_utf8(cell.column.to_vec()).map_err(|_| {
                    Error::Corrupt(format!(
                        "observer registry: a name of {}/{} is not UTF-8",
                        String::from_utf8_lossy(&table),
                        String::from_utf8_lossy(&column)
                    ))
                })?)
            };
            let kind = match cell.value.as_ref() {
                b"s" => NotificationKind::Strong,
                b"w" => NotificationKind::Weak,
                other => {
                    return Err(Error::Corrupt(format!(
                        "observer registry: unknown kind {other:?} for {}/{}",
                        String::from_utf8_lossy(&table),
                        String::from_utf8_lossy(&column)
                    )));
                }
            };
            out.push(Registration {
                column: ObservedColumn {
                    table: table.clone(),
                    column: column.clone(),
                    kind,
                },
                observer,
            });
        }
    }
    Ok(out)
}

/// Removes every registration of observer `name`; returns how many there were. Its columns stop
/// waiting for it (pending notifications are cleared by the other observers' runs) and, once no
/// registration is left, stop being notified.
pub async fn forget_observer<S: RowStore + ?Sized>(store: &S, name: &str) -> Result<usize> {
    let doomed: Vec<Registration> = list(store)
        .await?
        .into_iter()
        .filter(|r| r.observer.as_deref() == Some(name))
        .collect();
    delete(store, &doomed).await?;
    Ok(doomed.len())
}

/// Removes every registration of `table`/`column` (observers and declarations); returns how
/// many there were.
pub async fn forget_column<S: RowStore + ?Sized>(
    store: &S,
    table: &[u8],
    column: &[u8],
) -> Result<usize> {
    let doomed: Vec<Registration> = list(store)
        .await?
        .into_iter()
        .filter(|r| r.column.table == table && r.column.column == column)
        .collect();
    delete(store, &doomed).await?;
    Ok(doomed.len())
}

async fn delete<S: RowStore + ?Sized>(store: &S, doomed: &[Registration]) -> Result<()> {
    if doomed.is_empty() {
        return Ok(());
    }
    let batch = doomed
        .iter()
        .map(|r| RowMutation {
            table: Bytes::from_static(OBSERVERS_TABLE),
            row: row_key(&r.column.table, &r.column.column),
            conditions: Vec::new(),
            mutations: vec![Mutation::Delete {
                family: Family::Data,
                column: Bytes::copy_from_slice(r.observer.as_deref().unwrap_or("").as_bytes()),
                ts: 0,
            }],
        })
        .collect();
    store.mutate_rows(batch).await?;
    Ok(())
}

/// What a client knows of the registry (its last read), merged with its own declarations.
#[derive(Debug, Clone, Default)]
pub(crate) struct RegistryView {
    /// Columns whose writes set a notify cell (some strong registration or declaration).
    strong: HashSet<(Bytes, Bytes)>,
    /// Columns with any registration (garbage collection keeps their notify cells).
    observed: HashSet<(Bytes, Bytes)>,
    /// Named observers per column.
    observers: HashMap<(Bytes, Bytes), Vec<(String, NotificationKind)>>,
}

impl RegistryView {
    pub(crate) fn new(registrations: &[Registration]) -> Self {
        let mut view = Self::default();
        for registration in registrations {
            let key = (
                registration.column.table.clone(),
                registration.column.column.clone(),
            );
            if registration.column.kind == NotificationKind::Strong {
                view.strong.insert(key.clone());
            }
            view.observed.insert(key.clone());
            if let Some(name) = &registration.observer {
                let names = view.observers.entry(key).or_default();
                if !names.iter().any(|(n, _)| n == name) {
                    names.push((name.clone(), registration.column.kind));
                }
            }
        }
        view
    }

    pub(crate) fn is_strong(&self, table: &Bytes, column: &Bytes) -> bool {
        !self.strong.is_empty() && self.strong.contains(&(table.clone(), column.clone()))
    }

    pub(crate) fn is_observed(&self, table: &Bytes, column: &Bytes) -> bool {
        self.observed.contains(&(table.clone(), column.clone()))
    }

    pub(crate) fn observers_of(
        &self,
        table: &Bytes,
        column: &Bytes,
    ) -> Vec<(String, NotificationKind)> {
        self.observers
            .get(&(table.clone(), column.clone()))
            .cloned()
            .unwrap_or_default()
    }
}

fn kind_byte(kind: NotificationKind) -> &'static [u8] {
    match kind {
        NotificationKind::Strong => b"s",
        NotificationKind::Weak => b"w",
    }
}

/// `(table, column)` as a row key: the table's length (u16, big-endian), the table, the column.
fn row_key(table: &[u8], column: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(2 + table.len() + column.len());
    // Table names are bounded by the store's key limits, far below u16::MAX.
    let len = u16::try_from(table.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&table[..usize::from(len).min(table.len())]);
    out.extend_from_slice(column);
    out.freeze()
}

fn parse_row_key(key: &Bytes) -> Result<(Bytes, Bytes)> {
    let corrupt = || {
        Error::Corrupt(format!(
            "observer registry: undecodable row key {:?}",
            String::from_utf8_lossy(key)
        ))
    };
    let len_bytes: [u8; 2] = key
        .get(..2)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(corrupt)?;
    let end = 2 + usize::from(u16::from_be_bytes(len_bytes));
    if end > key.len() {
        return Err(corrupt());
    }
    Ok((key.slice(2..end), key.slice(end..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_keys_round_trip_and_do_not_collide() {
        let a = row_key(b"ab", b"c");
        let b = row_key(b"a", b"bc");
        assert_ne!(a, b);
        assert_eq!(
            parse_row_key(&a).unwrap(),
            (Bytes::from_static(b"ab"), Bytes::from_static(b"c"))
        );
        assert!(parse_row_key(&Bytes::from_static(b"\x00")).is_err());
        assert!(parse_row_key(&Bytes::from_static(b"\x00\x09ab")).is_err());
    }

    #[test]
    fn view_merges_observers_and_declarations() {
        let view = RegistryView::new(&[
            Registration::observer("a", ObservedColumn::strong("t", "c")),
            Registration::observer("b", ObservedColumn::weak("t", "c")),
            Registration::declared(ObservedColumn::weak("t", "w")),
        ]);
        let (t, c, w) = (
            Bytes::from_static(b"t"),
            Bytes::from_static(b"c"),
            Bytes::from_static(b"w"),
        );
        assert!(view.is_strong(&t, &c));
        assert!(!view.is_strong(&t, &w));
        assert!(view.is_observed(&t, &w));
        assert_eq!(view.observers_of(&t, &c).len(), 2);
        assert!(view.observers_of(&t, &w).is_empty());
    }
}
