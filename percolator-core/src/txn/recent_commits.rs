//! Transactions known to be committed, with their commit timestamps: what clearing a
//! notification asks before it reads the notifier's status from the store.
//!
//! A notification carries the start timestamp and primary of the transaction that wrote it, and
//! the observer runtime clears it only once that transaction is known to be committed (at or
//! before the run's snapshot) or rolled back: otherwise a run whose snapshot missed an
//! uncommitted notifier would drop its change. Knowing means a status read at the primary: a
//! range lookup of the primary's write records, a noticeable share of an index run's CPU on
//! fjall. But a commit is final once its commit point is reached, so the answer can be
//! remembered:
//! - this client records its own commits at their commit point (in one process most notifiers
//!   are the client's own transactions);
//! - a status read that finds another transaction committed records it too: one transaction
//!   notifies many rows (a page notifies every page it links to), and each row's notification
//!   is cleared on its own, often long after the commit.
//!
//! The record is bounded ([`CAPACITY`] transactions, the oldest forgotten first) and sharded by
//! a hash of the start timestamp, so concurrent commits rarely meet on a lock and every shard
//! fills alike. A forgotten transaction's status is read from the store.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher as _;

use crate::records::CellAddr;

/// How many committed transactions are remembered (about 40 bytes each).
pub(crate) const CAPACITY: usize = 1 << 18;
const SHARDS: usize = 16;

/// Recently committed transactions (a client's own, and others' it read the status of): start
/// timestamp → (primary, commit timestamp).
pub(crate) struct RecentCommits {
    shards: Vec<parking_lot::Mutex<Shard>>,
}

#[derive(Default)]
struct Shard {
    /// start_ts → (hash of the primary, commit_ts). Timestamps come from the oracle, not from
    /// users, so a fast hash will do.
    commits: HashMap<u64, (u64, u64), foldhash::fast::RandomState>,
    /// Start timestamps in the order they were recorded.
    order: VecDeque<u64>,
}

impl Default for RecentCommits {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| parking_lot::Mutex::default()).collect(),
        }
    }
}

impl std::fmt::Debug for RecentCommits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentCommits").finish_non_exhaustive()
    }
}

/// A check that a remembered start timestamp belongs to `primary`: start timestamps are unique,
/// so this only guards against a caller's mix-up, and a fixed fast hash suffices (SipHash, here
/// and in the cache of `clear_notifications`, costs noticeable CPU while link targets are
/// forwarded).
fn primary_hash(primary: &CellAddr) -> u64 {
    foldhash::quality::FixedState::with_seed(0x7065_7263_6f6c_6174).hash_one(primary)
}

/// The shard of `start_ts`: the top bits of a multiplicative (Fibonacci) hash. Not the low bits
/// themselves: every transaction takes two timestamps (start and commit) from one oracle, so
/// start timestamps need not spread over the low bits, and a shard that fills first forgets
/// commits before the record is full.
fn shard_index(start_ts: u64) -> usize {
    const SHARD_BITS: u32 = SHARDS.trailing_zeros();
    (start_ts.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (u64::BITS - SHARD_BITS)) as usize
}

impl RecentCommits {
    fn shard(&self, start_ts: u64) -> &parking_lot::Mutex<Shard> {
        &self.shards[shard_index(start_ts)]
    }

    /// Records that transaction `start_ts` with primary `primary` committed at `commit_ts` (its
    /// commit point was reached, or a status read found the primary's write record).
    pub(crate) fn record(&self, primary: &CellAddr, start_ts: u64, commit_ts: u64) {
        let mut shard = self.shard(start_ts).lock();
        if shard.commits.len() >= CAPACITY / SHARDS
            && let Some(oldest) = shard.order.pop_front()
        {
            shard.commits.remove(&oldest);
        }
        if shard
            .commits
            .insert(start_ts, (primary_hash(primary), commit_ts))
            .is_none()
        {
            shard.order.push_back(start_ts);
        }
    }

    /// The commit timestamp of transaction `start_ts` with primary `primary`, if this client
    /// recorded its commit and still remembers it.
    pub(crate) fn commit_ts(&self, primary: &CellAddr, start_ts: u64) -> Option<u64> {
        let shard = self.shard(start_ts).lock();
        let (hash, commit_ts) = *shard.commits.get(&start_ts)?;
        (hash == primary_hash(primary)).then_some(commit_ts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(row: &str) -> CellAddr {
        CellAddr::new("t", row.to_owned(), "c")
    }

    #[test]
    fn remembers_commits_of_the_same_primary_only() {
        let recent = RecentCommits::default();
        recent.record(&addr("a"), 10, 12);
        assert_eq!(recent.commit_ts(&addr("a"), 10), Some(12));
        assert_eq!(recent.commit_ts(&addr("b"), 10), None, "another primary");
        assert_eq!(recent.commit_ts(&addr("a"), 11), None, "never recorded");
    }

    #[test]
    fn remembers_its_capacity_of_start_timestamps_of_one_parity() {
        // Each transaction took two timestamps (start and commit): every start is even.
        let recent = RecentCommits::default();
        let starts = (0..CAPACITY as u64).map(|i| 2 * i);
        for ts in starts.clone() {
            recent.record(&addr("a"), ts, ts + 1);
        }
        let forgotten = starts
            .filter(|&ts| recent.commit_ts(&addr("a"), ts).is_none())
            .count();
        // Shards fill unevenly by a little: what a full shard forgot.
        assert!(
            forgotten < CAPACITY / 100,
            "{forgotten} of {CAPACITY} forgotten"
        );
    }

    #[test]
    fn forgets_the_oldest_beyond_its_capacity() {
        let recent = RecentCommits::default();
        let total = CAPACITY as u64 + 1_000;
        for ts in 0..total {
            recent.record(&addr("a"), ts, ts + 1);
        }
        assert_eq!(recent.commit_ts(&addr("a"), 0), None);
        assert_eq!(recent.commit_ts(&addr("a"), total - 1), Some(total));
        let kept: usize = recent.shards.iter().map(|s| s.lock().commits.len()).sum();
        assert_eq!(kept, CAPACITY);
    }
}
