//! A scan of the lock, write or data family in one pass of one iterator.
//!
//! A scan meets its rows' keys in order: row, then column, then versions newest first. It steps
//! over the keys it does not want (other columns, versions outside the read's range or past
//! its version limit) and seeks past the rest of them only after [`STEPS_BEFORE_SEEK`] steps.
//! A seek builds a new iterator over every memtable and table and registers it with the
//! snapshot tracker; profiled on the TPC-E run, a seek per row and per column was two thirds of
//! the whole process's CPU. A step costs a few comparisons, and a skipped key's value (maybe in
//! a blob file) is never loaded. RocksDB makes the same trade with
//! `max_sequential_skip_in_iterations`, also 8.
//!
//! The notify family is read elsewhere ([`crate::read`]): its reads merge the absorbed
//! notifications kept in memory.

use std::cell::RefCell;

use bytes::Bytes;
use fjall::{Keyspace, Readable as _, Snapshot};
use percolator_backend_embedded::{prefix_end, version_bounds};
use percolator_core::backend::key;
use percolator_core::{Cell, Columns, FamilyRead, RowCells, StoreError};

use crate::{backend, corrupt};

/// Keys a scan steps over one at a time before it seeks past the rest instead.
pub(crate) const STEPS_BEFORE_SEEK: usize = 8;

/// What a scan wants: one family read, its columns as encoded in keys.
struct Wanted<'a> {
    read: &'a FamilyRead,
    /// `None` for every column; else the encoded columns, sorted, without duplicates.
    columns: Option<Vec<Vec<u8>>>,
    /// Versions per column.
    limit: usize,
}

/// Why a key is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    /// Its column is not read.
    Column,
    /// Newer than the read's range.
    Newer,
    /// Older than the range, or past the version limit.
    Older,
}

/// What the scan does with one key.
#[derive(Debug)]
struct Verdict {
    /// The key's row prefix is `key[..row_len]`.
    row_len: usize,
    /// Its column prefix is `key[..column_len]`.
    column_len: usize,
    /// Its version.
    ts: u64,
    /// Whether it is in the row of the key before it.
    same_row: bool,
    /// Whether it is in the column of the key before it.
    same_column: bool,
    /// `None` to take it.
    skip: Option<Skip>,
}

/// The row the scan is in and what it took of it.
#[derive(Default)]
struct Current {
    /// The row's key prefix (empty before the first key).
    row_prefix: Vec<u8>,
    /// The row key, decoded.
    row: Bytes,
    /// The column (encoded) of the last key, within the row.
    column_key: Vec<u8>,
    /// That column, decoded.
    column: Bytes,
    /// Versions of that column taken.
    taken: usize,
    /// The cells taken from the row.
    cells: Vec<Cell>,
}

impl Current {
    /// Ends the row: it goes to `out` if the scan took anything of it.
    fn finish_row(&mut self, out: &mut Vec<RowCells>) {
        let cells = std::mem::take(&mut self.cells);
        if !cells.is_empty() {
            out.push(RowCells {
                row: self.row.clone(),
                cells,
            });
        }
    }

    /// Classifies key `k`.
    fn classify(
        &self,
        k: &[u8],
        table_len: usize,
        wanted: &Wanted<'_>,
    ) -> Result<Verdict, StoreError> {
        let same_row = !self.row_prefix.is_empty() && k.starts_with(&self.row_prefix);
        let row_len = if same_row {
            self.row_prefix.len()
        } else {
            let rest = k.get(table_len..).unwrap_or_default();
            table_len + key::decode_bytes(rest, table_len).map_err(corrupt)?.1
        };
        let same_column = same_row && k[row_len..].starts_with(&self.column_key);
        let column_len = if same_column {
            row_len + self.column_key.len()
        } else {
            row_len
                + key::decode_bytes(&k[row_len..], row_len)
                    .map_err(corrupt)?
                    .1
        };
        let ts = key::decode_ts(&k[column_len..], column_len).map_err(corrupt)?;
        if k.len() != column_len + 8 {
            return Err(corrupt(key::KeyError::Trailing {
                extra: k.len() - column_len - 8,
            }));
        }
        let taken = if same_column { self.taken } else { 0 };
        let column_key = &k[row_len..column_len];
        let skip = if wanted.columns.as_ref().is_some_and(|list| {
            list.binary_search_by(|c| c.as_slice().cmp(column_key))
                .is_err()
        }) {
            Some(Skip::Column)
        } else if ts > wanted.read.ts.hi {
            Some(Skip::Newer)
        } else if ts < wanted.read.ts.lo || taken >= wanted.limit {
            Some(Skip::Older)
        } else {
            None
        };
        Ok(Verdict {
            row_len,
            column_len,
            ts,
            same_row,
            same_column,
            skip,
        })
    }
}

/// Builds a scan's rows from its keys in order, whatever they come from (the engine, the lock
/// mirror): classifies each key ([`Self::classify`]), takes it or not ([`Self::accept`]), and
/// says where a scan that skips it may seek to ([`Self::seek_target`]).
pub(crate) struct RowsBuilder<'a> {
    wanted: Wanted<'a>,
    /// The length of the table's key prefix.
    table_len: usize,
    row_limit: Option<usize>,
    current: Current,
    out: Vec<RowCells>,
}

impl<'a> RowsBuilder<'a> {
    /// A builder for `read` of the table whose key prefix is `table_len` bytes long, or `None`
    /// when the read selects nothing.
    pub(crate) fn new(
        table_len: usize,
        read: &'a FamilyRead,
        row_limit: Option<usize>,
    ) -> Option<Self> {
        let columns = match &read.columns {
            Columns::All => None,
            Columns::Only(list) => {
                let mut encoded: Vec<Vec<u8>> = list
                    .iter()
                    .map(|column| {
                        let mut out = Vec::new();
                        key::encode_bytes(&mut out, column);
                        out
                    })
                    .collect();
                encoded.sort();
                encoded.dedup();
                Some(encoded)
            }
        };
        let wanted = Wanted {
            read,
            columns,
            limit: read.max_versions.unwrap_or(usize::MAX),
        };
        let nothing = read.ts.is_empty()
            || wanted.limit == 0
            || row_limit == Some(0)
            || wanted.columns.as_ref().is_some_and(Vec::is_empty);
        (!nothing).then(|| Self {
            wanted,
            table_len,
            row_limit,
            current: Current::default(),
            out: Vec::new(),
        })
    }

    /// What the scan does with key `k`, the next key after those it was given.
    fn classify(&self, k: &[u8]) -> Result<Verdict, StoreError> {
        self.current.classify(k, self.table_len, &self.wanted)
    }

    /// Gives the builder key `k` (judged `verdict`) and its value, needed if the verdict takes
    /// it. Returns `false`, taking nothing, when `k` starts a row past the row limit: the scan
    /// is over.
    fn accept(
        &mut self,
        k: &[u8],
        verdict: &Verdict,
        value: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        let current = &mut self.current;
        if !verdict.same_row {
            current.finish_row(&mut self.out);
            if self.row_limit.is_some_and(|limit| self.out.len() >= limit) {
                return Ok(false);
            }
            let table_len = self.table_len;
            let rest = &k[table_len..verdict.row_len];
            current.row = Bytes::from(key::decode_bytes(rest, table_len).map_err(corrupt)?.0);
            current.row_prefix = k[..verdict.row_len].to_vec();
        }
        if !verdict.same_column {
            let column_key = &k[verdict.row_len..verdict.column_len];
            current.column = Bytes::from(
                key::decode_bytes(column_key, verdict.row_len)
                    .map_err(corrupt)?
                    .0,
            );
            current.column_key = column_key.to_vec();
            current.taken = 0;
        }
        if verdict.skip.is_none() {
            let Some(value) = value else {
                return Err(StoreError::Backend {
                    message: "fjall: scan: value not loaded".into(),
                    source: None,
                });
            };
            current.cells.push(Cell {
                column: current.column.clone(),
                ts: verdict.ts,
                value: Bytes::copy_from_slice(value),
            });
            current.taken += 1;
        }
        Ok(true)
    }

    /// Where a scan that skips `k` (for `skip`) seeks to: the first key it may want after `k`.
    fn seek_target(&self, k: &[u8], verdict: &Verdict, skip: Skip) -> Vec<u8> {
        let row_prefix = &k[..verdict.row_len];
        let column_prefix = &k[..verdict.column_len];
        match skip {
            Skip::Column => {
                let column_key = &k[verdict.row_len..verdict.column_len];
                let next = self
                    .wanted
                    .columns
                    .iter()
                    .flatten()
                    .find(|c| c.as_slice() > column_key);
                match next {
                    Some(next) => [row_prefix, next].concat(),
                    None => prefix_end(row_prefix),
                }
            }
            Skip::Newer => version_bounds(column_prefix, self.wanted.read.ts).0,
            Skip::Older => prefix_end(column_prefix),
        }
    }

    /// The rows built.
    pub(crate) fn finish(mut self) -> Vec<RowCells> {
        self.current.finish_row(&mut self.out);
        self.out
    }
}

/// The rows in `[start, end)` of the table whose keys start with `table_prefix`, as `read`
/// (of a family other than notify) sees them in `snapshot`: at most `row_limit` rows, rows
/// without a cell left out.
pub(crate) fn scan_family(
    snapshot: &Snapshot,
    keyspace: &Keyspace,
    table_prefix: &[u8],
    start: Vec<u8>,
    end: &[u8],
    read: &FamilyRead,
    row_limit: Option<usize>,
) -> Result<Vec<RowCells>, StoreError> {
    let Some(mut rows) = RowsBuilder::new(table_prefix.len(), read, row_limit) else {
        return Ok(Vec::new());
    };
    let mut cursor = start;
    'seek: loop {
        let mut steps = 0;
        for guard in snapshot.range(keyspace, cursor.clone()..end.to_vec()) {
            let judged = RefCell::new(None);
            let (k, value) = guard
                .into_inner_if(|k| {
                    let verdict = rows.classify(k);
                    let take = verdict.as_ref().is_ok_and(|v| v.skip.is_none());
                    *judged.borrow_mut() = Some(verdict);
                    take
                })
                .map_err(|e| backend("scan", e))?;
            let verdict = match judged.into_inner() {
                Some(verdict) => verdict?,
                None => rows.classify(&k)?,
            };
            if !rows.accept(&k, &verdict, value.as_deref())? {
                break 'seek;
            }
            match verdict.skip {
                None => steps = 0,
                Some(skip) => {
                    steps += 1;
                    if steps > STEPS_BEFORE_SEEK {
                        cursor = rows.seek_target(&k, &verdict, skip);
                        continue 'seek;
                    }
                }
            }
        }
        break;
    }
    Ok(rows.finish())
}

/// Gives `rows` the `entries` (keys in order, with their values) of one row of the lock mirror,
/// which the caller reads under the row's latch. Returns `false` when the scan is over (the row
/// is past the row limit).
pub(crate) fn scan_entries(
    rows: &mut RowsBuilder<'_>,
    entries: impl IntoIterator<Item = (Vec<u8>, Bytes)>,
) -> Result<bool, StoreError> {
    for (k, value) in entries {
        let verdict = rows.classify(&k)?;
        if !rows.accept(&k, &verdict, Some(&value))? {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    //! The streaming scan and the lock mirror's scan against the in-memory store's scan, on the
    //! same random cells; lock scans seeing rows and atomic batches whole under concurrent
    //! writes.

    use std::ops::Bound;

    use bytes::Bytes;
    use percolator_backend_mem::MemStore;
    use percolator_core::{
        Columns, Family, FamilyRead, Mutation, RowMutation, RowStore, Scan, TsRange,
    };
    use rand::rngs::StdRng;
    use rand::{Rng as _, SeedableRng as _};

    use crate::FjallStore;

    /// A key of 0 to 17 bytes from a small alphabet with the bytes the encoding escapes, so
    /// keys share prefixes and cross the encoding's 8-byte groups.
    fn key(rng: &mut StdRng) -> Bytes {
        const ALPHABET: [u8; 4] = [0x00, b'a', b'b', 0xFF];
        let len = if rng.random_bool(0.7) {
            rng.random_range(0..3)
        } else {
            rng.random_range(7..18)
        };
        (0..len)
            .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
            .collect::<Vec<u8>>()
            .into()
    }

    /// Random puts and deletes in two tables and two families; some columns get many
    /// versions, so a scan has long runs of keys to skip.
    fn mutations(rng: &mut StdRng) -> Vec<RowMutation> {
        (0..300)
            .map(|_| {
                let versions = if rng.random_bool(0.2) { 30 } else { 3 };
                let mutations = (0..rng.random_range(1..6))
                    .flat_map(|_| {
                        let family =
                            [Family::Write, Family::Data, Family::Lock][rng.random_range(0..3)];
                        let column = key(rng);
                        (0..rng.random_range(1..=versions))
                            .map(|_| {
                                let ts = rng.random_range(1..60);
                                if rng.random_bool(0.1) {
                                    Mutation::Delete {
                                        family,
                                        column: column.clone(),
                                        ts,
                                    }
                                } else {
                                    Mutation::Put {
                                        family,
                                        column: column.clone(),
                                        ts,
                                        value: Bytes::from(format!("{ts}")),
                                    }
                                }
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect();
                RowMutation {
                    table: Bytes::from(if rng.random_bool(0.8) { "t" } else { "u" }),
                    row: key(rng),
                    conditions: vec![],
                    mutations,
                }
            })
            .collect()
    }

    fn bound(rng: &mut StdRng) -> Bound<Bytes> {
        match rng.random_range(0..3) {
            0 => Bound::Unbounded,
            1 => Bound::Included(key(rng)),
            _ => Bound::Excluded(key(rng)),
        }
    }

    fn request(rng: &mut StdRng, columns: &[Bytes]) -> Scan {
        // The lock family's scans come from the lock mirror.
        let family = [Family::Write, Family::Data, Family::Lock][rng.random_range(0..3)];
        let mut read = FamilyRead::all(family);
        if rng.random_bool(0.6) {
            let wanted = (0..rng.random_range(0..4))
                .map(|_| {
                    if rng.random_bool(0.7) && !columns.is_empty() {
                        columns[rng.random_range(0..columns.len())].clone()
                    } else {
                        key(rng)
                    }
                })
                .collect();
            read = read.columns(Columns::Only(wanted));
        }
        let lo = rng.random_range(0..62);
        let hi = rng.random_range(0..62);
        read = read.ts(TsRange { lo, hi: hi.max(lo) });
        if rng.random_bool(0.1) {
            read = read.ts(TsRange { lo: hi + 1, hi });
        }
        if rng.random_bool(0.6) {
            read = read.max_versions([0, 1, 2, 3, 40][rng.random_range(0..5)]);
        }
        Scan {
            snapshot_ts: None,
            table: Bytes::from("t"),
            start: bound(rng),
            end: bound(rng),
            read,
            row_limit: [None, None, Some(0), Some(1), Some(3), Some(50)][rng.random_range(0..6)],
        }
    }

    #[tokio::test]
    async fn streaming_scans_match_the_reference_store() {
        let dir = tempfile::tempdir().unwrap();
        let fjall = FjallStore::open(dir.path()).unwrap();
        let mem = MemStore::new();
        let mut rng = StdRng::seed_from_u64(7);
        let batch = mutations(&mut rng);
        let columns: Vec<Bytes> = batch
            .iter()
            .flat_map(|m| &m.mutations)
            .filter_map(|m| match m {
                Mutation::Put { column, .. } => Some(column.clone()),
                _ => None,
            })
            .collect();
        for chunk in batch.chunks(20) {
            fjall.mutate_rows(chunk.to_vec()).await.unwrap();
            mem.mutate_rows(chunk.to_vec()).await.unwrap();
        }
        let mut cells = 0;
        for _ in 0..2_000 {
            let scan = request(&mut rng, &columns);
            let expected = mem.scan(scan.clone()).await.unwrap();
            let got = fjall.scan(scan.clone()).await.unwrap();
            assert_eq!(got, expected, "{scan:?}");
            cells += got.iter().map(|r| r.cells.len()).sum::<usize>();
        }
        // The requests are not all empty ones.
        assert!(cells > 10_000, "{cells} cells");
    }

    fn lock(row: &str, column: &str, value: Option<&str>) -> RowMutation {
        let mutation = match value {
            Some(value) => Mutation::Put {
                family: Family::Lock,
                column: Bytes::from(column.to_owned()),
                ts: 5,
                value: Bytes::from(value.to_owned()),
            },
            None => Mutation::Delete {
                family: Family::Lock,
                column: Bytes::from(column.to_owned()),
                ts: 5,
            },
        };
        RowMutation {
            table: Bytes::from("t"),
            row: Bytes::from(row.to_owned()),
            conditions: vec![],
            mutations: vec![mutation],
        }
    }

    /// Writers put and delete locks together: two columns of one row in one row mutation, and
    /// two rows in one atomic batch. A scan of the lock family sees each pair whole or not at
    /// all, while they run on other threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lock_scans_see_rows_and_atomic_batches_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(FjallStore::open(dir.path()).unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let row_writer = {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut rounds = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let value = rounds.is_multiple_of(2).then_some("x");
                    let mut both = lock("a", "c1", value);
                    both.mutations.extend(lock("a", "c2", value).mutations);
                    store.mutate_rows(vec![both]).await.unwrap();
                    rounds += 1;
                    tokio::task::yield_now().await;
                }
                rounds
            })
        };
        let batch_writer = {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut rounds = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let value = rounds.is_multiple_of(2).then_some("y");
                    let batch = vec![lock("b", "c", value), lock("c", "c", value)];
                    store.mutate_rows_atomically(batch).await.unwrap();
                    rounds += 1;
                    tokio::task::yield_now().await;
                }
                rounds
            })
        };
        let (mut pairs_seen, mut rows_seen) = (0, 0);
        for _ in 0..20_000 {
            let rows = store
                .scan(Scan {
                    snapshot_ts: None,
                    table: Bytes::from("t"),
                    start: Bound::Unbounded,
                    end: Bound::Unbounded,
                    read: FamilyRead::all(Family::Lock),
                    row_limit: None,
                })
                .await
                .unwrap();
            let names: Vec<&[u8]> = rows.iter().map(|r| r.row.as_ref()).collect();
            if let Some(a) = rows.iter().find(|r| r.row.as_ref() == b"a") {
                assert_eq!(a.cells.len(), 2, "half a row mutation: {rows:?}");
                rows_seen += 1;
            }
            let b = names.contains(&&b"b"[..]);
            let c = names.contains(&&b"c"[..]);
            assert_eq!(b, c, "half an atomic batch: {rows:?}");
            pairs_seen += usize::from(b);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (rounds_a, rounds_b) = (row_writer.await.unwrap(), batch_writer.await.unwrap());
        // The scans overlapped the writers: both states of both pairs were seen.
        assert!(rounds_a > 100 && rounds_b > 100, "{rounds_a} {rounds_b}");
        assert!((1..20_000).contains(&pairs_seen), "{pairs_seen}");
        assert!((1..20_000).contains(&rows_seen), "{rows_seen}");
    }
}
