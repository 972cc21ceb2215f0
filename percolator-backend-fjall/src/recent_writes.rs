//! The newest write-family version of each recently written column, in memory, so that
//! prewrite's write-conflict check and snapshot reads rarely touch the engine's ranges.
//!
//! Every prewrite checks, per cell, that no write record at or after its start timestamp exists
//! (`Absent { Write, start_ts.. }`). On fjall that is a range lookup, which no bloom filter
//! helps: it seeks into every memtable and every table overlapping the range. With every term of
//! a page indexed, an exporter run prewrites over a thousand postings, and in the engine these
//! checks would take a large share of an indexing run's CPU.
//!
//! A write record newer than a transaction's start was written after that transaction began:
//! recently. So the store remembers, per column, the newest write-family timestamp it put since
//! it opened, and answers the check from memory when that is complete for the range asked:
//!
//! - **Floor.** Versions at or below [`RecentWrites::floor`] may be missing from memory: those
//!   written before the store opened (the floor is the highest timestamp in the write family
//!   then, found by a scan in the background; until it finishes every check goes to the
//!   engine), and those forgotten to bound memory (forgetting raises the floor first).
//! - **Exactness above the floor.** Every put of the write family is recorded under the row's
//!   write latch, right after the engine applied it and before the latch is let go; checks run
//!   under the same latch. A delete of a write-family key makes its column unknown (checked in
//!   the engine), so deletes never make memory claim a version that is gone.
//!
//! A check re-reads the floor after its lookup: forgetting raises the floor before it removes
//! anything, so a lookup that missed a removed entry sees the raised floor and falls back.
//!
//! Snapshot reads ask it too: when it names the newest version of a column in the range read
//! (looked up under the row's latch, where memory matches the snapshot just opened), the store
//! fetches that one write record by a point lookup, which bloom filters answer, instead of a range
//! over the column's versions, which seeks into every table.
//!
//! Only point lookups are asked, so the columns sit in [`SHARDS`] hash tables (xxh3 with a seed
//! drawn per store, so that a crafted corpus cannot aim keys at one bucket), each under
//! its own mutex held for one lookup or one update: a lookup hashes the key once (bits 32–37 of
//! the hash pick the shard, the table uses it whole) and compares it once. Entries keep their hash,
//! so a table that grows never hashes a key again. (Not a skip list: it spends much of its time
//! in `memcmp` on the long common prefixes of neighbouring keys. Not a `HashMap` with a
//! streaming xxh3 hasher either: it hashes every key a second time, and again on every growth.)

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};

use hashbrown::HashTable;
use parking_lot::Mutex;
use percolator_backend_embedded::KeyWrite;
use percolator_core::backend::key;
use percolator_core::{Family, TsRange};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Columns remembered before the oldest half is forgotten.
const REMEMBERED: usize = 400_000;
/// log2 of [`SHARDS`].
const SHARD_BITS: u32 = 6;
/// Independent maps, so that concurrent batches rarely wait for each other.
pub(crate) const SHARDS: usize = 1 << SHARD_BITS;

type Shard = Mutex<HashTable<Remembered>>;

/// One remembered column.
#[derive(Debug)]
struct Remembered {
    /// The column's hash ([`RecentWrites::locate`]).
    hash: u64,
    column: Box<[u8]>,
    newest: Newest,
}

/// What memory knows of one column, with the highest timestamp written or deleted there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Newest {
    /// The newest version put since the store opened (or since the floor was last raised).
    At(u64),
    /// A version was deleted: ask the engine (until this is forgotten below the floor).
    Unknown(u64),
}

impl Newest {
    fn touched(self) -> u64 {
        match self {
            Newest::At(t) | Newest::Unknown(t) => t,
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct RecentWrites {
    /// The hash seed of this store.
    seed: u64,
    shards: Box<[Shard]>,
    /// Columns in all shards.
    len: AtomicUsize,
    /// The highest write-family timestamp in the engine when the store opened (`u64::MAX`
    /// until the opening scan finished).
    opened: AtomicU64,
    /// The highest timestamp forgotten.
    forgotten: AtomicU64,
    /// Whether a thread is forgetting now.
    forgetting: AtomicBool,
}

impl Default for RecentWrites {
    fn default() -> Self {
        use std::hash::{BuildHasher as _, Hasher as _};
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self {
            seed,
            shards: (0..SHARDS).map(|_| Mutex::new(HashTable::new())).collect(),
            len: AtomicUsize::new(0),
            opened: AtomicU64::new(u64::MAX),
            forgotten: AtomicU64::new(0),
            forgetting: AtomicBool::new(false),
        }
    }
}

/// The column prefix and timestamp of a cell key, if it decodes.
fn split(cell_key: &[u8]) -> Option<(&[u8], u64)> {
    let at = cell_key.len().checked_sub(8)?;
    let ts = key::decode_ts(&cell_key[at..], at).ok()?;
    Some((&cell_key[..at], ts))
}

impl RecentWrites {
    /// The column's hash and its shard. The shard comes from bits 32–37: a table takes its
    /// bucket from the low bits and a 7-bit tag from the top ones, so neither may be the same
    /// for every key of a shard (with the top bits, tags would have one bit left, and every
    /// probe would compare keys).
    fn locate(&self, column: &[u8]) -> (u64, &Shard) {
        let hash = xxh3_64_with_seed(column, self.seed);
        let index = usize::try_from((hash >> 32) & ((1 << SHARD_BITS) - 1)).unwrap_or(0);
        (hash, &self.shards[index])
    }

    /// What memory holds for `column`.
    fn newest(&self, column: &[u8]) -> Option<Newest> {
        let (hash, shard) = self.locate(column);
        shard
            .lock()
            .find(hash, |r| *r.column == *column)
            .map(|r| r.newest)
    }

    /// Versions at or below this may be missing from memory.
    pub(crate) fn floor(&self) -> u64 {
        self.opened.load(SeqCst).max(self.forgotten.load(SeqCst))
    }

    /// The opening scan found `highest` as the newest write-family timestamp.
    pub(crate) fn opened_at(&self, highest: u64) {
        self.opened.store(highest, SeqCst);
    }

    /// Records a batch's write-family writes, once the engine applied them (under the rows'
    /// write latches). Returns whether memory is over its bound (call [`Self::forget_oldest`]).
    pub(crate) fn applied(&self, writes: &[KeyWrite]) -> bool {
        for w in writes.iter().filter(|w| w.family == Family::Write) {
            let Some((column, ts)) = split(&w.key) else {
                continue; // undecodable keys are never asked about from memory
            };
            let (hash, shard) = self.locate(column);
            let mut shard = shard.lock();
            match shard.find_mut(hash, |r| *r.column == *column) {
                Some(Remembered { newest: before, .. }) => {
                    *before = match (&w.value, *before) {
                        (None, b) => Newest::Unknown(b.touched().max(ts)),
                        (Some(_), Newest::Unknown(t)) => Newest::Unknown(t.max(ts)),
                        (Some(_), Newest::At(t)) => Newest::At(t.max(ts)),
                    };
                }
                None => {
                    let newest = match &w.value {
                        None => Newest::Unknown(ts),
                        Some(_) => Newest::At(ts),
                    };
                    shard.insert_unique(
                        hash,
                        Remembered {
                            hash,
                            column: column.into(),
                            newest,
                        },
                        |r| r.hash,
                    );
                    self.len.fetch_add(1, SeqCst);
                }
            }
        }
        self.len.load(SeqCst) > REMEMBERED
    }

    /// Whether no version of `column_prefix` in `range` exists, if memory knows; `None` means
    /// ask the engine.
    pub(crate) fn absent(&self, column_prefix: &[u8], range: TsRange) -> Option<bool> {
        if range.lo <= self.floor() {
            return None;
        }
        let newest = self.newest(column_prefix);
        if range.lo <= self.floor() {
            return None; // forgotten meanwhile
        }
        match newest {
            // Nothing above the floor, and the range starts above it.
            None => Some(true),
            // Every version in memory is at or below `t`, every other one at or below the floor.
            Some(Newest::At(t)) if t < range.lo => Some(true),
            Some(Newest::At(t)) if t <= range.hi => Some(false),
            // Newer than the range: an older version inside it may exist.
            Some(_) => None,
        }
    }

    /// The timestamp of the newest version of `column_prefix` in `range`, if memory knows it
    /// and there is one; `None` means ask the engine. Exact only while the row's latch is held
    /// (a put is recorded right after the engine applied it, under the row's write latch).
    pub(crate) fn newest_in(&self, column_prefix: &[u8], range: TsRange) -> Option<u64> {
        let floor = self.floor();
        let newest = self.newest(column_prefix);
        if self.floor() != floor {
            return None; // forgotten meanwhile
        }
        match newest {
            // Every version above the floor is at or below `t`: `t` is the newest of the range.
            Some(Newest::At(t)) if t > floor && range.lo <= t && t <= range.hi => Some(t),
            _ => None,
        }
    }

    /// Forgets the older half of the columns, raising the floor first (see the module docs).
    /// One thread at a time; others return at once. An entry written meanwhile is kept if it is
    /// newer than the cut; one at or below it is below the raised floor, where memory is not
    /// asked.
    pub(crate) fn forget_oldest(&self) {
        if self.forgetting.swap(true, SeqCst) {
            return;
        }
        let mut stamps: Vec<u64> = Vec::with_capacity(self.len.load(SeqCst));
        for shard in self.shards.iter() {
            stamps.extend(shard.lock().iter().map(|r| r.newest.touched()));
        }
        if !stamps.is_empty() {
            let middle = stamps.len() / 2;
            let (_, cut, _) = stamps.select_nth_unstable(middle);
            let cut = *cut;
            self.forgotten.fetch_max(cut, SeqCst);
            for shard in self.shards.iter() {
                let mut shard = shard.lock();
                let before = shard.len();
                shard.retain(|r| r.newest.touched() > cut);
                self.len.fetch_sub(before - shard.len(), SeqCst);
            }
        }
        self.forgetting.store(false, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use percolator_backend_embedded::cell_key;

    fn put(table: &str, row: &str, column: &str, ts: u64) -> KeyWrite {
        KeyWrite {
            family: Family::Write,
            key: cell_key(table.as_bytes(), row.as_bytes(), column.as_bytes(), ts),
            value: Some(Bytes::from_static(b"w")),
        }
    }

    fn prefix(column: &str) -> Vec<u8> {
        key::column_prefix(b"t", b"r", column.as_bytes())
    }

    #[test]
    fn memory_answers_only_above_the_floor() {
        let recent = RecentWrites::default();
        let from = |lo| TsRange { lo, hi: u64::MAX };
        // Until the opening scan finished: the engine.
        assert_eq!(recent.absent(&prefix("c"), from(10)), None);
        recent.opened_at(5);
        assert_eq!(recent.absent(&prefix("c"), from(5)), None, "at the floor");
        assert_eq!(recent.absent(&prefix("c"), from(6)), Some(true));
        recent.applied(&[put("t", "r", "c", 20)]);
        assert_eq!(recent.absent(&prefix("c"), from(20)), Some(false));
        assert_eq!(recent.absent(&prefix("c"), from(21)), Some(true));
        assert_eq!(recent.absent(&prefix("c"), TsRange { lo: 6, hi: 9 }), None);
        assert_eq!(
            recent.absent(&prefix("c"), TsRange { lo: 6, hi: 20 }),
            Some(false)
        );
        // An older put does not hide the newest one.
        recent.applied(&[put("t", "r", "c", 8)]);
        assert_eq!(recent.absent(&prefix("c"), from(20)), Some(false));
        // A delete makes the column unknown.
        let mut delete = put("t", "r", "c", 20);
        delete.value = None;
        recent.applied(&[delete]);
        assert_eq!(recent.absent(&prefix("c"), from(21)), None);
        recent.applied(&[put("t", "r", "c", 30)]);
        assert_eq!(recent.absent(&prefix("c"), from(31)), None, "stays unknown");
        // Forgotten below a floor above it, the column is known again: nothing above the floor.
        recent.forget_oldest();
        assert!(recent.floor() >= 30);
        assert_eq!(recent.absent(&prefix("c"), from(31)), Some(true));
        // Other families are not remembered.
        let mut lock = put("t", "r", "d", 40);
        lock.family = Family::Lock;
        recent.applied(&[lock]);
        assert_eq!(recent.absent(&prefix("d"), from(35)), Some(true));
    }

    /// A store opened on an empty write family, and puts of `n` columns `c0001`… at 1…n.
    fn opened_with_columns(n: u64) -> (RecentWrites, Vec<KeyWrite>) {
        let recent = RecentWrites::default();
        recent.opened_at(0);
        let writes = (1..=n)
            .map(|i| put("t", "r", &format!("c{i:04}"), i))
            .collect();
        (recent, writes)
    }

    #[test]
    fn memory_names_the_newest_version_only_above_the_floor() {
        let recent = RecentWrites::default();
        let upto = |hi| TsRange { lo: 0, hi };
        recent.applied(&[put("t", "r", "c", 20)]);
        // Until the opening scan finished: the engine.
        assert_eq!(recent.newest_in(&prefix("c"), upto(30)), None);
        recent.opened_at(5);
        assert_eq!(recent.newest_in(&prefix("c"), upto(30)), Some(20));
        assert_eq!(recent.newest_in(&prefix("c"), upto(20)), Some(20));
        // Newer than the range: an older version may be the answer.
        assert_eq!(recent.newest_in(&prefix("c"), upto(19)), None);
        assert_eq!(
            recent.newest_in(&prefix("c"), TsRange { lo: 21, hi: 30 }),
            None
        );
        // Never written since the store opened: only the engine knows.
        assert_eq!(recent.newest_in(&prefix("d"), upto(30)), None);
        // An older put does not hide the newest one.
        recent.applied(&[put("t", "r", "c", 8)]);
        assert_eq!(recent.newest_in(&prefix("c"), upto(30)), Some(20));
        // A delete makes the column unknown.
        let mut delete = put("t", "r", "c", 20);
        delete.value = None;
        recent.applied(&[delete]);
        assert_eq!(recent.newest_in(&prefix("c"), upto(30)), None);
        // At or below the floor, memory may miss versions.
        recent.applied(&[put("t", "r", "e", 40)]);
        recent.opened_at(40);
        assert_eq!(recent.newest_in(&prefix("e"), upto(50)), None);
    }

    #[test]
    fn the_count_follows_every_shard() {
        let (recent, writes) = opened_with_columns(1000);
        assert!(!recent.applied(&writes));
        recent.applied(&writes[..10]); // known columns are not counted twice
        let held = |r: &RecentWrites| r.shards.iter().map(|s| s.lock().len()).sum::<usize>();
        assert_eq!(recent.len.load(SeqCst), 1000);
        assert!(
            recent.shards.iter().all(|s| !s.lock().is_empty()),
            "spread over shards"
        );
        recent.forget_oldest();
        assert_eq!(recent.len.load(SeqCst), held(&recent));
        assert!((400..=600).contains(&held(&recent)), "{}", held(&recent));
    }

    #[test]
    fn every_column_is_found_after_its_shard_grew() {
        // 5 000 columns: each shard's table grows several times, moving entries by their kept
        // hash; a later write of each column updates the entry it finds.
        let (recent, writes) = opened_with_columns(5000);
        recent.applied(&writes);
        for i in (1..=5000u64).step_by(2) {
            recent.applied(&[put("t", "r", &format!("c{i:04}"), i + 10_000)]);
        }
        assert_eq!(recent.len.load(SeqCst), 5000);
        for i in 1..=5000u64 {
            let newest = if i % 2 == 1 { i + 10_000 } else { i };
            assert_eq!(
                recent.newest(&prefix(&format!("c{i:04}"))),
                Some(Newest::At(newest)),
                "c{i:04}"
            );
        }
        assert_eq!(recent.newest(&prefix("c9999")), None);
    }

    #[test]
    fn a_shard_does_not_fix_its_tables_tag_bits() {
        // A table tags each entry with the top 7 bits of its hash: picking shards by those bits
        // would leave every shard's entries at most 2 tags, and every probe comparing keys.
        let (recent, writes) = opened_with_columns(5000);
        recent.applied(&writes);
        for shard in recent.shards.iter() {
            let tags: std::collections::BTreeSet<u64> =
                shard.lock().iter().map(|r| r.hash >> 57).collect();
            assert!(tags.len() > 16, "{} tags in a shard", tags.len());
        }
    }

    #[test]
    fn forgetting_raises_the_floor_first() {
        let (recent, writes) = opened_with_columns(100);
        recent.applied(&writes);
        recent.forget_oldest();
        let floor = recent.floor();
        assert!((40..=60).contains(&floor), "floor {floor}");
        let from = |lo| TsRange { lo, hi: u64::MAX };
        // A forgotten column below the new floor: the engine decides.
        assert_eq!(recent.absent(&prefix("c0010"), from(10)), None);
        // A remembered one above it: memory.
        assert_eq!(recent.absent(&prefix("c0090"), from(90)), Some(false));
        assert_eq!(recent.absent(&prefix("c0090"), from(91)), Some(true));
    }
}
