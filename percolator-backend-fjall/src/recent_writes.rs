//! The newest write-family version of each recently written column, in memory, so that
//! prewrite's write-conflict check rarely touches the engine.
//!
//! Every prewrite checks, per cell, that no write record at or after its start timestamp exists
//! (`Absent { Write, start_ts.. }`). On fjall that is a range lookup, which no bloom filter
//! helps: it seeks into every memtable and every table overlapping the range. With every term of
//! a page indexed, an exporter run prewrites about 1 400 postings and the checks took a quarter
//! of all CPU of a 3 000-page run.
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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

use crossbeam_skiplist::SkipMap;
use percolator_core::embedded::KeyWrite;
use percolator_core::key;
use percolator_core::{Family, TsRange};

/// Columns remembered before the oldest half is forgotten.
const REMEMBERED: usize = 400_000;

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
    columns: SkipMap<Vec<u8>, Newest>,
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
        Self {
            columns: SkipMap::new(),
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
            let newest = match (&w.value, self.columns.get(column).map(|e| *e.value())) {
                (None, before) => Newest::Unknown(before.map_or(ts, |b| b.touched().max(ts))),
                (Some(_), Some(Newest::Unknown(t))) => Newest::Unknown(t.max(ts)),
                (Some(_), Some(Newest::At(t))) => Newest::At(t.max(ts)),
                (Some(_), None) => Newest::At(ts),
            };
            self.columns.insert(column.to_vec(), newest);
        }
        self.columns.len() > REMEMBERED
    }

    /// Whether no version of `column_prefix` in `range` exists, if memory knows; `None` means
    /// ask the engine.
    pub(crate) fn absent(&self, column_prefix: &[u8], range: TsRange) -> Option<bool> {
        if range.lo <= self.floor() {
            return None;
        }
        let newest = self.columns.get(column_prefix).map(|e| *e.value());
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

    /// Forgets the older half of the columns, raising the floor first (see the module docs).
    /// One thread at a time; others return at once. An entry replaced meanwhile by a newer
    /// write is a new entry, which this pass does not remove.
    pub(crate) fn forget_oldest(&self) {
        if self.forgetting.swap(true, SeqCst) {
            return;
        }
        let mut stamps: Vec<u64> = self.columns.iter().map(|e| e.value().touched()).collect();
        if !stamps.is_empty() {
            let middle = stamps.len() / 2;
            let (_, cut, _) = stamps.select_nth_unstable(middle);
            let cut = *cut;
            self.forgotten.fetch_max(cut, SeqCst);
            for entry in self.columns.iter() {
                if entry.value().touched() <= cut {
                    entry.remove();
                }
            }
        }
        self.forgetting.store(false, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use percolator_core::embedded::cell_key;

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

    #[test]
    fn forgetting_raises_the_floor_first() {
        let recent = RecentWrites::default();
        recent.opened_at(0);
        let writes: Vec<KeyWrite> = (1..=100)
            .map(|i| put("t", "r", &format!("c{i:03}"), i))
            .collect();
        recent.applied(&writes);
        recent.forget_oldest();
        let floor = recent.floor();
        assert!((40..=60).contains(&floor), "floor {floor}");
        let from = |lo| TsRange { lo, hi: u64::MAX };
        // A forgotten column below the new floor: the engine decides.
        assert_eq!(recent.absent(&prefix("c010"), from(10)), None);
        // A remembered one above it: memory.
        assert_eq!(recent.absent(&prefix("c090"), from(90)), Some(false));
        assert_eq!(recent.absent(&prefix("c090"), from(91)), Some(true));
    }
}
