//! An in-process double of TiKV's transactional API: multi-version keys, snapshot reads at the
//! start timestamp, optimistic commit that fails on a write-write conflict (a version of a written
//! key committed after the start timestamp), and injectable faults (ambiguous commits, transient
//! unavailability). One mutex guards it all: it is a test double, not a store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::api::{KvApi, KvError, KvTxn};

/// Versions of one key: `(commit_ts, value)`, oldest first; `None` is a deletion.
type Versions = Vec<(u64, Option<Vec<u8>>)>;

#[derive(Default)]
struct State {
    data: BTreeMap<Vec<u8>, Versions>,
    ts: u64,
}

impl State {
    /// PD's layout: milliseconds on this machine's clock above an 18-bit logical counter.
    fn next_ts(&mut self) -> u64 {
        use percolator_core::oracle::{Clock as _, SystemClock, time};
        self.ts = (self.ts + 1).max(time::first_of_ms(SystemClock.now_ms()));
        self.ts
    }

    fn read(&self, key: &[u8], at: u64) -> Option<Vec<u8>> {
        self.data
            .get(key)?
            .iter()
            .rev()
            .find(|(ts, _)| *ts <= at)
            .and_then(|(_, v)| v.clone())
    }
}

/// Numbers the fake clusters of this process, for their ids.
static NEXT_CLUSTER: AtomicU64 = AtomicU64::new(1);

/// The fake cluster. Cheap to clone: clones share the state (and the id) of one cluster.
#[derive(Clone)]
pub struct FakeKv {
    /// `fake-tikv:<n>`, unique in the process ([`KvApi::cluster_id`]).
    id: Arc<str>,
    state: Arc<Mutex<State>>,
    ambiguous_commits: Arc<AtomicUsize>,
    unavailable_reads: Arc<AtomicUsize>,
    /// Commits writing a key that contains these bytes fail with a conflict, this many times.
    hot_key: Arc<Mutex<Option<HotKey>>>,
}

impl Default for FakeKv {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeKv {
    /// An empty cluster, with an id of its own.
    pub fn new() -> Self {
        Self {
            id: format!("fake-tikv:{}", NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed)).into(),
            state: Arc::default(),
            ambiguous_commits: Arc::default(),
            unavailable_reads: Arc::default(),
            hot_key: Arc::default(),
        }
    }

    /// The next `n` commits are applied but answer [`KvError::Unavailable`] (a timeout after
    /// the request reached the cluster).
    pub fn inject_ambiguous_commits(&self, n: usize) {
        self.ambiguous_commits.store(n, Ordering::SeqCst);
    }

    /// The next `n` reads fail with [`KvError::Unavailable`] without effect.
    pub fn inject_unavailable_reads(&self, n: usize) {
        self.unavailable_reads.store(n, Ordering::SeqCst);
    }

    /// The next `n` commits that write a key containing `fragment` fail with
    /// [`KvError::Conflict`] without effect, as if another writer kept winning that key.
    pub fn inject_conflicts_on(&self, fragment: &[u8], n: usize) {
        *self.hot_key.lock() = Some((fragment.to_vec(), n));
    }

    /// Whether a commit of `writes` is to fail with an injected conflict (counts it).
    fn hot_conflict(&self, writes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> Option<Vec<u8>> {
        let mut hot = self.hot_key.lock();
        let (fragment, left) = hot.as_mut()?;
        if *left == 0 {
            return None;
        }
        let key = writes
            .keys()
            .find(|k| k.windows(fragment.len()).any(|w| w == fragment.as_slice()))?;
        *left -= 1;
        Some(key.clone())
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    fn txn(&self, read_only: bool) -> FakeTxn {
        let start_ts = self.state.lock().next_ts();
        FakeTxn {
            kv: self.clone(),
            start_ts,
            writes: BTreeMap::new(),
            read_only,
        }
    }
}

/// A key fragment whose commits fail with an injected conflict, and how many more times.
type HotKey = (Vec<u8>, usize);

/// A transaction on [`FakeKv`].
pub struct FakeTxn {
    kv: FakeKv,
    start_ts: u64,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    read_only: bool,
}

impl FakeTxn {
    fn check_read(&self) -> Result<(), KvError> {
        if FakeKv::take(&self.kv.unavailable_reads) {
            return Err(KvError::Unavailable("injected: read timed out".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl KvApi for FakeKv {
    type Txn = FakeTxn;

    async fn begin(&self) -> Result<FakeTxn, KvError> {
        Ok(self.txn(false))
    }

    async fn snapshot(&self) -> Result<FakeTxn, KvError> {
        Ok(self.txn(true))
    }

    async fn current_timestamp(&self) -> Result<u64, KvError> {
        Ok(self.state.lock().next_ts())
    }

    /// Per key, drops every version older than the newest one at or below `safe_point`, and
    /// that one too when it is a deletion: reads at or above `safe_point` see the same.
    async fn gc(&self, safe_point: u64) -> Result<(), KvError> {
        let mut state = self.state.lock();
        state.data.retain(|_, versions| {
            // Oldest first: the newest version at or below the safe point.
            if let Some(keep) = versions.iter().rposition(|(ts, _)| *ts <= safe_point) {
                let drop_keep = versions[keep].1.is_none();
                versions.drain(..keep + usize::from(drop_keep));
            }
            !versions.is_empty()
        });
        Ok(())
    }

    fn cluster_id(&self) -> String {
        self.id.to_string()
    }
}

impl FakeKv {
    /// How many versions the cluster holds, over every key (for GC tests).
    pub fn version_count(&self) -> usize {
        self.state.lock().data.values().map(Vec::len).sum()
    }
}

#[async_trait]
impl KvTxn for FakeTxn {
    async fn get(&mut self, key: Vec<u8>) -> Result<Option<Vec<u8>>, KvError> {
        self.check_read()?;
        if let Some(own) = self.writes.get(&key) {
            return Ok(own.clone());
        }
        Ok(self.kv.state.lock().read(&key, self.start_ts))
    }

    async fn scan(
        &mut self,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
        self.check_read()?;
        if start >= end {
            return Ok(Vec::new());
        }
        // The snapshot's pairs merged with this transaction's own writes, in key order, read
        // only up to `limit`: like TiKV, a page costs its size (plus the deletions it steps
        // over), not the whole range. (Collecting the range first made every read of one
        // version cost all the versions of its column.)
        let limit = limit as usize;
        let state = self.kv.state.lock();
        let mut stored = state
            .data
            .range(start.clone()..end.clone())
            .filter_map(|(k, _)| state.read(k, self.start_ts).map(|v| (k, v)))
            .peekable();
        let mut own = self.writes.range(start..end).peekable();
        let mut out = Vec::new();
        while out.len() < limit {
            let order = match (stored.peek(), own.peek()) {
                (None, None) => break,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some((stored_key, _)), Some((own_key, _))) => (*own_key).cmp(*stored_key),
            };
            if order == std::cmp::Ordering::Equal {
                stored.next(); // overwritten (or deleted) by this transaction
            }
            let take_own = order != std::cmp::Ordering::Greater;
            if take_own {
                if let Some((k, Some(v))) = own.next() {
                    out.push((k.clone(), v.clone()));
                }
            } else if let Some((k, v)) = stored.next() {
                out.push((k.clone(), v));
            }
        }
        Ok(out)
    }

    async fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), KvError> {
        if self.read_only {
            return Err(KvError::Other("write in a read-only snapshot".into()));
        }
        self.writes.insert(key, Some(value));
        Ok(())
    }

    async fn delete(&mut self, key: Vec<u8>) -> Result<(), KvError> {
        if self.read_only {
            return Err(KvError::Other("write in a read-only snapshot".into()));
        }
        self.writes.insert(key, None);
        Ok(())
    }

    async fn commit(&mut self) -> Result<(), KvError> {
        let writes = std::mem::take(&mut self.writes);
        if writes.is_empty() {
            return Ok(());
        }
        if let Some(key) = self.kv.hot_conflict(&writes) {
            return Err(KvError::Conflict(format!(
                "injected: key {key:?} written after start_ts {}",
                self.start_ts
            )));
        }
        {
            let mut state = self.kv.state.lock();
            for key in writes.keys() {
                let newer = state
                    .data
                    .get(key)
                    .and_then(|versions| versions.last())
                    .is_some_and(|(ts, _)| *ts > self.start_ts);
                if newer {
                    return Err(KvError::Conflict(format!(
                        "key {key:?} written after start_ts {}",
                        self.start_ts
                    )));
                }
            }
            let commit_ts = state.next_ts();
            for (key, value) in writes {
                state.data.entry(key).or_default().push((commit_ts, value));
            }
        }
        if FakeKv::take(&self.kv.ambiguous_commits) {
            return Err(KvError::Unavailable("injected: commit answer lost".into()));
        }
        Ok(())
    }

    async fn rollback(&mut self) -> Result<(), KvError> {
        self.writes.clear();
        Ok(())
    }
}
