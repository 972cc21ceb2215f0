//! Partitioned scanning: the workers of one **scan group** (processes running the same
//! observers on one store) divide the dirty rows among themselves, so that two of them do not
//! run the same notification at once, conflict, and roll each other's locks forward.
//!
//! - **Membership** comes from the store: each worker names its group in its lease row
//!   ([`percolator_core::Client::join_scan_group`]); every worker re-reads the group's members
//!   every `partition_refresh` ([`percolator_core::Client::scan_group_members`]). A worker that
//!   stops renewing its lease drops out after half a lease, and the others take its rows over
//!   at their next refresh: no coordinator, no lock service, nothing extra to run.
//! - **Ownership** of a row is rendezvous hashing (highest random weight) of `(table, row)`
//!   over the members: every worker computes the same owner from the same member list, and a
//!   worker joining or leaving moves only the rows it wins or held (a 1/n share), not the whole
//!   assignment. One hash per row and a mix per member: cheap enough for every dirty row seen.
//! - **Joining** a group whose other members are running, a worker waits two refreshes before
//!   it scans, so that all of them have read the group with it in: no moment where an old
//!   member, still on the old view, runs the newcomer's rows beside it. A worker that leaves
//!   gracefully stops scanning before its lease goes; a dead one stops renewing. Either way the
//!   others take its rows at their next refresh, with no overlap.
//! - **Correctness never depends on it.** Two workers whose views of the group differ for a
//!   moment may both run a row (the ack column lets at most one commit; the other only wastes
//!   work) or both leave it (until the next refresh). The scan group is derived from the
//!   observers' names and columns, so a worker running other observers never leaves its own
//!   observers' rows to a worker that does not run them.
//!
//! Why this shape and not the paper's lock service (§2.4): see ARCHITECTURE.md ("Work
//! distribution").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

/// One worker's view of its scan group.
#[derive(Debug)]
pub(crate) struct Partition {
    me: u64,
    group: u64,
    /// The group's live members, sorted (this worker among them).
    members: ArcSwap<Vec<u64>>,
    /// Times the member list changed.
    changes: AtomicU64,
}

impl Partition {
    /// A view in which this worker (`me`, of scan group `group`) is alone: it owns every row
    /// until the first refresh says otherwise.
    pub(crate) fn alone(me: u64, group: u64) -> Self {
        Self {
            me,
            group,
            members: ArcSwap::from_pointee(vec![me]),
            changes: AtomicU64::new(0),
        }
    }

    pub(crate) fn group(&self) -> u64 {
        self.group
    }

    /// Installs a fresh member list (sorted); this worker is always among the owners.
    pub(crate) fn update(&self, mut members: Vec<u64>) {
        if !members.contains(&self.me) {
            members.push(self.me);
            members.sort_unstable();
        }
        if **self.members.load() != members {
            self.members.store(Arc::new(members));
            self.changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether this worker runs `table`/`row`.
    pub(crate) fn owns(&self, table: &[u8], row: &[u8]) -> bool {
        let members = self.members.load();
        members.len() <= 1 || owner(&members, table, row) == Some(self.me)
    }

    /// Members in the current view.
    pub(crate) fn members(&self) -> usize {
        self.members.load().len()
    }

    /// Times the view changed.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }
}

/// The member that owns `table`/`row`: the one with the highest weight for it.
pub(crate) fn owner(members: &[u64], table: &[u8], row: &[u8]) -> Option<u64> {
    let key = row_hash(table, row);
    members
        .iter()
        .copied()
        .max_by_key(|&member| (mix(key ^ mix(member)), member))
}

/// A hash of the row that every process computes alike (no per-process seed).
fn row_hash(table: &[u8], row: &[u8]) -> u64 {
    // Length-prefixed, so that ("ab", "c") and ("a", "bc") differ; streamed, so that the
    // scanners' check of every dirty row allocates nothing.
    let mut hasher = Xxh3::new();
    hasher.update(&(table.len() as u64).to_be_bytes());
    hasher.update(table);
    hasher.update(row);
    hasher.digest()
}

/// SplitMix64's finalizer: a bijective mix, so every member's weights are independent.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The scan group of a worker running the observers `observers` (each `name`, table, column):
/// workers with the same observers share a group.
pub(crate) fn group_of(mut observers: Vec<(String, Vec<u8>, Vec<u8>)>) -> u64 {
    observers.sort();
    let mut key = Vec::new();
    for (name, table, column) in &observers {
        for part in [name.as_bytes(), table, column] {
            key.extend_from_slice(&(part.len() as u64).to_be_bytes());
            key.extend_from_slice(part);
        }
    }
    xxh3_64(&key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("row-{i}").into_bytes()).collect()
    }

    /// Every row has exactly one owner, and the shares are even.
    #[test]
    fn members_split_rows_evenly() {
        let members = [11u64, 22, 33];
        let views: Vec<Partition> = members
            .iter()
            .map(|&m| {
                let p = Partition::alone(m, 1);
                p.update(members.to_vec());
                p
            })
            .collect();
        let mut shares = [0usize; 3];
        for row in rows(30_000) {
            let owners: Vec<usize> = (0..3).filter(|&i| views[i].owns(b"t", &row)).collect();
            assert_eq!(owners.len(), 1, "row {row:?} owned by {owners:?}");
            shares[owners[0]] += 1;
        }
        for share in shares {
            assert!((9_000..11_000).contains(&share), "shares {shares:?}");
        }
    }

    /// A member leaving moves only its own rows; one joining takes only rows it wins.
    #[test]
    fn membership_changes_move_only_the_changed_share() {
        let all = rows(20_000);
        let before: Vec<Option<u64>> = all.iter().map(|r| owner(&[1, 2, 3], b"t", r)).collect();
        let after_leave: Vec<Option<u64>> = all.iter().map(|r| owner(&[1, 3], b"t", r)).collect();
        for (b, a) in before.iter().zip(&after_leave) {
            if *b != Some(2) {
                assert_eq!(a, b, "a row of a member that stayed moved");
            }
        }
        let after_join: Vec<Option<u64>> =
            all.iter().map(|r| owner(&[1, 2, 3, 4], b"t", r)).collect();
        let moved = before
            .iter()
            .zip(&after_join)
            .filter(|(b, a)| b != a)
            .count();
        for (b, a) in before.iter().zip(&after_join) {
            assert!(a == b || *a == Some(4), "a row moved to an old member");
        }
        assert!((4_000..6_000).contains(&moved), "{moved} rows moved");
    }

    /// Alone, or before the first refresh, a worker owns everything; it keeps itself in any
    /// view it is given.
    #[test]
    fn a_worker_is_always_a_member() {
        let p = Partition::alone(5, 1);
        assert!(rows(100).iter().all(|r| p.owns(b"t", r)));
        p.update(vec![6]);
        assert_eq!(p.members(), 2);
        assert_eq!(p.changes(), 1);
        p.update(vec![5, 6]);
        assert_eq!(p.changes(), 1, "the same view is not a change");
        let owned = rows(1_000).iter().filter(|r| p.owns(b"t", r)).count();
        assert!((400..600).contains(&owned), "{owned}");
    }

    #[test]
    fn groups_follow_the_observers_not_their_order() {
        let a = ("a".to_owned(), b"t".to_vec(), b"c".to_vec());
        let b = ("b".to_owned(), b"t".to_vec(), b"d".to_vec());
        assert_eq!(
            group_of(vec![a.clone(), b.clone()]),
            group_of(vec![b.clone(), a.clone()])
        );
        assert_ne!(group_of(vec![a.clone()]), group_of(vec![a.clone(), b]));
        let shifted = ("a".to_owned(), b"tc".to_vec(), Vec::new());
        assert_ne!(group_of(vec![a]), group_of(vec![shifted]));
    }
}
