//! Prefetching and the per-transaction read cache (paper §3: "reading a column of a row
//! prefetches the row's other columns that the transaction is likely to read").
//!
//! - [`ReadPatterns`] (one per client) learns, per table, which columns transactions read
//!   together in one row: each finished transaction reports the columns it read of each row.
//! - A [`ReadCache`] (one per transaction) holds cells fetched ahead. When `get` reads a column
//!   the cache does not hold, the columns that were read with it in at least half of the
//!   earlier rows of its table (after a few samples) are fetched in the same store call
//!   (`snapshot_get_many`: one `read_rows`), and kept for the transaction.
//!
//! Why it is safe: a cached cell was read at the transaction's start timestamp by the batched
//! snapshot read, which answers exactly what `get` would (locks at or below the snapshot
//! resolved or waited out, never read around; ARCHITECTURE.md, "A batched read answers what
//! single reads would"). What a snapshot shows of a cell never changes for a fixed start
//! timestamp: later commits have larger commit timestamps, and a lock below it is resolved
//! before its cell is answered. The transaction's own writes take precedence over the cache.
//!
//! Where it pays: only where a transaction reads several columns of a row in separate reads,
//! over a store where a read is a round trip. It is off by default
//! ([`crate::TxnConfig::prefetch`]), by measurement: the TPC-E frames keep one column per row
//! (nothing to prefetch), and the web index's observers already read a row's columns together
//! with `get_many`. On a 3-member etcd the web index (one worker, 2 000 pages) used 62% of the
//! cells it read ahead and ran 52.4 and 52.2 pages/s with prefetching against 54.6 and 56.2
//! without (alternating runs): the unused reads cost the cluster more than the round trips
//! saved. On the embedded stores a read is a function call, so a wrong guess costs more than
//! the call it saves.

use std::collections::HashMap;
use std::hash::BuildHasher as _;

use bytes::Bytes;

use crate::records::CellAddr;

/// Whether `get` prefetches the columns usually read with the one it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Prefetch {
    /// Never (the default: see the module docs for the measurement).
    #[default]
    Off,
    /// On stores where a read is a network round trip ([`crate::StoreLimits::distributed`]).
    Distributed,
    /// On every store.
    Always,
}

/// Earlier rows a column must have been read in before its companions are predicted.
const MIN_SAMPLES: u32 = 4;
/// Columns tracked per table; a table with more (wide rows of generated column names) keeps
/// learning only those it saw first.
const MAX_COLUMNS_PER_TABLE: usize = 64;
/// Tables tracked.
const MAX_TABLES: usize = 256;
/// Columns prefetched with one read, at most.
const MAX_PREDICTED: usize = 8;
/// Columns of one row a transaction reports, at most (the pairs it counts grow with the square).
const MAX_REPORTED_COLUMNS: usize = 16;
const SHARDS: usize = 16;

/// Per table: how often each column was read, and how often each pair was read in one row.
#[derive(Default)]
struct TablePattern {
    reads: HashMap<Bytes, u32>,
    together: HashMap<(Bytes, Bytes), u32>,
}

/// What columns transactions read together, per table (one per client).
pub(crate) struct ReadPatterns {
    shards: Vec<parking_lot::Mutex<HashMap<Bytes, TablePattern>>>,
    hasher: foldhash::fast::RandomState,
}

impl Default for ReadPatterns {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| parking_lot::Mutex::default()).collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl std::fmt::Debug for ReadPatterns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadPatterns").finish_non_exhaustive()
    }
}

impl ReadPatterns {
    fn shard(&self, table: &Bytes) -> &parking_lot::Mutex<HashMap<Bytes, TablePattern>> {
        let index = (self.hasher.hash_one(table) as usize) % SHARDS;
        &self.shards[index]
    }

    /// The columns of `table` read with `column` in at least half of the rows `column` was
    /// read in (once it was read in [`MIN_SAMPLES`] rows), most frequent first.
    pub(crate) fn predict(&self, table: &Bytes, column: &Bytes) -> Vec<Bytes> {
        let shard = self.shard(table).lock();
        let Some(pattern) = shard.get(table) else {
            return Vec::new();
        };
        let reads = pattern.reads.get(column).copied().unwrap_or(0);
        if reads < MIN_SAMPLES {
            return Vec::new();
        }
        let mut companions: Vec<(u32, &Bytes)> = pattern
            .together
            .iter()
            .filter(|((first, _), count)| first == column && 2 * **count >= reads)
            .map(|((_, other), count)| (*count, other))
            .collect();
        companions.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        companions
            .into_iter()
            .take(MAX_PREDICTED)
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// Learns from one row of `table` whose `columns` one transaction read.
    pub(crate) fn learn(&self, table: &Bytes, columns: &[Bytes]) {
        let columns = &columns[..columns.len().min(MAX_REPORTED_COLUMNS)];
        let mut shard = self.shard(table).lock();
        if !shard.contains_key(table) && shard.len() >= MAX_TABLES / SHARDS {
            return;
        }
        let pattern = shard.entry(table.clone()).or_default();
        let known: Vec<&Bytes> = columns
            .iter()
            .filter(|c| {
                pattern.reads.contains_key(*c) || pattern.reads.len() < MAX_COLUMNS_PER_TABLE
            })
            .collect();
        for column in &known {
            let count = pattern.reads.entry((*column).clone()).or_default();
            *count = count.saturating_add(1);
        }
        for first in &known {
            for other in &known {
                if first != other {
                    let count = pattern
                        .together
                        .entry(((*first).clone(), (*other).clone()))
                        .or_default();
                    *count = count.saturating_add(1);
                }
            }
        }
    }
}

/// One transaction's prefetched cells and the columns it read per row.
#[derive(Debug, Default)]
pub(crate) struct ReadCache {
    /// Cells fetched ahead: what the snapshot shows of them, and whether a read used it yet.
    cells: HashMap<CellAddr, (Option<Bytes>, bool)>,
    /// Columns read per row, in the order first read: what [`ReadPatterns::learn`] gets.
    read: HashMap<(Bytes, Bytes), Vec<Bytes>>,
}

impl ReadCache {
    /// The prefetched value of `addr`, if it was prefetched, and whether this is its first use
    /// (a prefetch hit).
    pub(crate) fn get(&mut self, addr: &CellAddr) -> Option<(Option<Bytes>, bool)> {
        let (value, used) = self.cells.get_mut(addr)?;
        let first = !*used;
        *used = true;
        Some((value.clone(), first))
    }

    /// Whether `addr` is held.
    pub(crate) fn holds(&self, addr: &CellAddr) -> bool {
        self.cells.contains_key(addr)
    }

    /// Keeps a prefetched cell.
    pub(crate) fn keep(&mut self, addr: CellAddr, value: Option<Bytes>) {
        self.cells.insert(addr, (value, false));
    }

    /// Notes that the transaction read `addr`.
    pub(crate) fn note_read(&mut self, addr: &CellAddr) {
        let columns = self
            .read
            .entry((addr.table.clone(), addr.row.clone()))
            .or_default();
        if columns.len() < MAX_REPORTED_COLUMNS && !columns.contains(&addr.column) {
            columns.push(addr.column.clone());
        }
    }

    /// Reports every row's read columns to `patterns`.
    pub(crate) fn report(&mut self, patterns: &ReadPatterns) {
        for ((table, _row), columns) in self.read.drain() {
            patterns.learn(&table, &columns);
        }
    }
}

/// A transaction's read cache and where it reports what it read when the transaction ends.
#[derive(Debug)]
pub(crate) struct TxnReads {
    pub(crate) cache: parking_lot::Mutex<ReadCache>,
    patterns: std::sync::Arc<ReadPatterns>,
}

impl TxnReads {
    pub(crate) fn new(patterns: std::sync::Arc<ReadPatterns>) -> Self {
        Self {
            cache: parking_lot::Mutex::default(),
            patterns,
        }
    }

    /// The columns to fetch with `addr` (none this transaction holds or `skip` excludes).
    pub(crate) fn companions(
        &self,
        addr: &CellAddr,
        skip: impl Fn(&CellAddr) -> bool,
    ) -> Vec<CellAddr> {
        let predicted = self.patterns.predict(&addr.table, &addr.column);
        if predicted.is_empty() {
            return Vec::new();
        }
        let cache = self.cache.lock();
        predicted
            .into_iter()
            .map(|column| CellAddr {
                table: addr.table.clone(),
                row: addr.row.clone(),
                column,
            })
            .filter(|a| !cache.holds(a) && !skip(a))
            .collect()
    }
}

impl Drop for TxnReads {
    fn drop(&mut self) {
        self.cache.get_mut().report(&self.patterns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn companions_are_predicted_after_enough_rows() {
        let patterns = ReadPatterns::default();
        let t = b("docs");
        for _ in 0..MIN_SAMPLES - 1 {
            patterns.learn(&t, &[b("title"), b("body"), b("hash")]);
        }
        assert!(
            patterns.predict(&t, &b("title")).is_empty(),
            "too few rows yet"
        );
        patterns.learn(&t, &[b("title"), b("body")]);
        let predicted = patterns.predict(&t, &b("title"));
        assert_eq!(predicted, vec![b("body"), b("hash")]);
        // Read alone often enough, a companion drops below half (hash: 3 of 8 rows; body: 4).
        for _ in 0..4 {
            patterns.learn(&t, &[b("title")]);
        }
        assert_eq!(patterns.predict(&t, &b("title")), vec![b("body")]);
        assert!(patterns.predict(&b("other"), &b("title")).is_empty());
    }

    #[test]
    fn wide_tables_and_many_tables_stay_bounded() {
        let patterns = ReadPatterns::default();
        let t = b("wide");
        let columns: Vec<Bytes> = (0..200).map(|i| b(&format!("c{i}"))).collect();
        for chunk in columns.chunks(4) {
            patterns.learn(&t, chunk);
        }
        let tracked = patterns.shard(&t).lock().get(&t).map(|p| p.reads.len());
        assert_eq!(tracked, Some(MAX_COLUMNS_PER_TABLE));
        for i in 0..1000 {
            patterns.learn(&b(&format!("t{i}")), &[b("a"), b("b")]);
        }
        let tables: usize = patterns.shards.iter().map(|s| s.lock().len()).sum();
        assert!(tables <= MAX_TABLES, "{tables}");
    }

    #[test]
    fn the_cache_counts_a_hit_once_and_reports_reads_when_dropped() {
        let patterns = std::sync::Arc::new(ReadPatterns::default());
        let addr = CellAddr::new("docs", "a", "body");
        let mut cache = ReadCache::default();
        cache.keep(addr.clone(), Some(b("x")));
        assert!(cache.holds(&addr));
        assert_eq!(cache.get(&addr), Some((Some(b("x")), true)));
        assert_eq!(cache.get(&addr), Some((Some(b("x")), false)));
        assert_eq!(cache.get(&CellAddr::new("docs", "a", "title")), None);
        for _ in 0..MIN_SAMPLES {
            let reads = TxnReads::new(std::sync::Arc::clone(&patterns));
            let mut cache = reads.cache.lock();
            cache.note_read(&addr);
            cache.note_read(&addr);
            cache.note_read(&CellAddr::new("docs", "a", "title"));
        }
        assert_eq!(patterns.predict(&b("docs"), &b("body")), vec![b("title")]);
        let reads = TxnReads::new(std::sync::Arc::clone(&patterns));
        let title = CellAddr::new("docs", "a", "title");
        assert_eq!(reads.companions(&addr, |_| false), vec![title.clone()]);
        assert!(reads.companions(&addr, |a| *a == title).is_empty());
    }
}
