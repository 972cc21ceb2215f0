//! What a client tells garbage collection, and what it checks before it reads or writes.
//!
//! [`ActiveSnapshots`] is the multiset of start timestamps the client's transactions still use;
//! its minimum is published in the worker lease, and the safe point never passes a live
//! worker's published minimum. A transaction registers a lower bound of its start timestamp
//! (the newest timestamp the client has seen) *before* it asks the oracle for one, so a
//! lease renewal that runs meanwhile publishes nothing above it. The set is sharded so that
//! concurrent transactions rarely meet on one mutex.
//!
//! [`SnapshotSafety`] is the client's side of the argument: a snapshot read or a prewrite at
//! `start_ts` goes ahead only if `start_ts` is not below the newest safe point the client has
//! seen, not below the *lapse floor*, and the client's lease still holds (with a margin). A
//! collector ignores the published minimum of a worker whose lease ran out, so a worker that
//! could not renew may have been passed unseen: its transactions fail with
//! [`crate::Error::SnapshotTooOld`] instead of reading collected history. When it renews
//! again it raises the lapse floor to a fresh timestamp, dooming every transaction that began
//! before: a collector that read the leases while it was lapsed started its safe point below
//! that timestamp.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::oracle::OracleClock;

const SHARDS: usize = 16;

/// The start timestamps in use by one client's transactions (see the module docs).
#[derive(Default)]
pub(crate) struct ActiveSnapshots {
    shards: [Mutex<BTreeMap<u64, u32>>; SHARDS],
    next_shard: AtomicUsize,
}

impl ActiveSnapshots {
    /// Registers a snapshot at `lower_bound` (raise it with [`SnapshotGuard::set`] once the
    /// start timestamp is known); it stays registered until the guard drops.
    pub(crate) fn enter(self: &Arc<Self>, lower_bound: u64) -> SnapshotGuard {
        let shard = self.next_shard.fetch_add(1, Ordering::Relaxed) % SHARDS;
        *self.shards[shard].lock().entry(lower_bound).or_default() += 1;
        SnapshotGuard {
            set: Arc::clone(self),
            shard,
            ts: lower_bound,
        }
    }

    /// The oldest registered start timestamp.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.shards
            .iter()
            .filter_map(|shard| shard.lock().keys().next().copied())
            .min()
    }

    fn remove(&self, shard: usize, ts: u64) {
        let mut map = self.shards[shard].lock();
        if let Some(count) = map.get_mut(&ts) {
            *count -= 1;
            if *count == 0 {
                map.remove(&ts);
            }
        }
    }
}

/// One registered snapshot; deregisters on drop.
pub(crate) struct SnapshotGuard {
    set: Arc<ActiveSnapshots>,
    shard: usize,
    ts: u64,
}

impl SnapshotGuard {
    /// Replaces the registered timestamp by `ts` (the start timestamp, above the lower bound).
    pub(crate) fn set(&mut self, ts: u64) {
        if ts == self.ts {
            return;
        }
        let mut map = self.set.shards[self.shard].lock();
        *map.entry(ts).or_default() += 1;
        if let Some(count) = map.get_mut(&self.ts) {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.ts);
            }
        }
        self.ts = ts;
    }
}

impl Drop for SnapshotGuard {
    fn drop(&mut self) {
        self.set.remove(self.shard, self.ts);
    }
}

/// The client's view of the safe point and of its own lease (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct SnapshotSafety {
    /// Oracle ms until which the lease holds, less a margin; 0 once released.
    valid_until_ms: AtomicU64,
    /// Transactions that began below this must not read or write (they began before a lapse).
    lapse_floor: AtomicU64,
    /// The newest persisted safe point this client has read.
    safe_point: AtomicU64,
}

impl SnapshotSafety {
    /// Whether the lease holds at oracle time `now_ms`.
    pub(crate) fn lease_holds(&self, now_ms: u64) -> bool {
        now_ms <= self.valid_until_ms.load(Ordering::Acquire)
    }

    /// A renewal succeeded: the lease is good until `valid_until_ms`.
    pub(crate) fn renewed(&self, valid_until_ms: u64) {
        self.valid_until_ms.store(valid_until_ms, Ordering::Release);
    }

    /// The lease was released (shutdown): nothing may read or write any more.
    pub(crate) fn released(&self) {
        self.valid_until_ms.store(0, Ordering::Release);
    }

    /// Transactions that began below `ts` are doomed (the lease lapsed while they ran).
    pub(crate) fn raise_lapse_floor(&self, ts: u64) {
        self.lapse_floor.fetch_max(ts, Ordering::AcqRel);
    }

    /// Takes in a safe point read from the store (or set by this client's collector).
    pub(crate) fn observe_safe_point(&self, safe_point: u64) {
        self.safe_point.fetch_max(safe_point, Ordering::AcqRel);
    }

    /// The newest safe point seen.
    pub(crate) fn safe_point(&self) -> u64 {
        self.safe_point.load(Ordering::Acquire)
    }

    /// Errors unless a snapshot read or prewrite at `start_ts` may go ahead.
    pub(crate) fn check(&self, start_ts: u64, clock: &OracleClock) -> Result<()> {
        let safe_point = self.safe_point();
        let too_old = |reason: String| Error::SnapshotTooOld {
            start_ts,
            safe_point,
            reason,
        };
        if start_ts < safe_point {
            return Err(too_old(format!(
                "it is below the GC safe point {safe_point}: older versions may be collected"
            )));
        }
        if start_ts < self.lapse_floor.load(Ordering::Acquire) {
            return Err(too_old(
                "its client's worker lease lapsed after it began, so GC may have passed it".into(),
            ));
        }
        if !self.lease_holds(clock.now_ms()) {
            return Err(too_old(
                "its client's worker lease has lapsed or was released, so GC may pass it unseen"
                    .into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_follows_registrations_and_drops() {
        let set = Arc::new(ActiveSnapshots::default());
        assert_eq!(set.oldest(), None);
        let mut a = set.enter(10);
        let b = set.enter(5);
        let c = set.enter(5);
        assert_eq!(set.oldest(), Some(5));
        drop(b);
        assert_eq!(
            set.oldest(),
            Some(5),
            "a second snapshot at 5 is still there"
        );
        drop(c);
        assert_eq!(set.oldest(), Some(10));
        a.set(12);
        assert_eq!(set.oldest(), Some(12));
        drop(a);
        assert_eq!(set.oldest(), None);
    }

    #[test]
    fn check_refuses_below_the_safe_point_the_floor_and_after_a_lapse() {
        let clock = OracleClock::default();
        clock.observe(crate::oracle::time::first_of_ms(1_000_000));
        let safety = SnapshotSafety::default();
        safety.renewed(2_000_000);
        assert!(safety.check(100, &clock).is_ok());
        safety.observe_safe_point(200);
        assert!(matches!(
            safety.check(100, &clock),
            Err(Error::SnapshotTooOld {
                safe_point: 200,
                ..
            })
        ));
        assert!(
            safety.check(200, &clock).is_ok(),
            "the safe point itself is readable"
        );
        safety.raise_lapse_floor(300);
        assert!(safety.check(250, &clock).is_err());
        assert!(safety.check(300, &clock).is_ok());
        safety.released();
        assert!(safety.check(400, &clock).unwrap_err().is_retryable());
    }
}
