//! The simulated cluster itself, shared by the store wrapper ([`super::SimulatedCluster`]) and
//! the oracle wrapper ([`super::SimulatedOracle`]): its configuration ([`SimConfig`]), one queue
//! per data server and one for the timestamp oracle, the switch that turns the simulation on and
//! off, and the totals a measurement window is computed from ([`ModelSnapshot`]).
//!
//! There is no global lock: each server has its own mutex, held only to book one request
//! ([`super::queue`]); a batch books its servers one after another.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::queue::{Server, ServerTotals};

/// The cluster a [`ClusterModel`] simulates.
///
/// `#[non_exhaustive]`: build it with [`SimConfig::new`] and the `with_*` setters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SimConfig {
    /// Data servers the rows are hashed to (at least 1).
    pub servers: usize,
    /// Network round trip between this process and any server.
    pub rtt: Duration,
    /// Service time of one row operation at a data server: a row read, a row mutation, or one
    /// row a scan returns.
    pub service: Duration,
    /// Service time of one request at the timestamp oracle.
    pub oracle_service: Duration,
    /// Keep the inner store's single-process guarantees (snapshot-read tracking, all-or-nothing
    /// multi-row mutations), so that transactions may commit in one phase. Off by default: a
    /// cluster of Bigtable-like servers offers neither, and the paper's protocol is two-phase.
    pub one_phase: bool,
}

impl SimConfig {
    /// `servers` servers, a 2 ms round trip, 0.25 ms per row operation, 10 µs per oracle
    /// request, two-phase commits.
    pub fn new(servers: usize) -> Self {
        Self {
            servers: servers.max(1),
            rtt: Duration::from_millis(2),
            service: Duration::from_micros(250),
            oracle_service: Duration::from_micros(10),
            one_phase: false,
        }
    }

    /// Sets [`Self::servers`] (at least 1).
    #[must_use]
    pub fn with_servers(mut self, servers: usize) -> Self {
        self.servers = servers.max(1);
        self
    }

    /// Sets [`Self::rtt`].
    #[must_use]
    pub fn with_rtt(mut self, rtt: Duration) -> Self {
        self.rtt = rtt;
        self
    }

    /// Sets [`Self::service`].
    #[must_use]
    pub fn with_service(mut self, service: Duration) -> Self {
        self.service = service;
        self
    }

    /// Sets [`Self::oracle_service`].
    #[must_use]
    pub fn with_oracle_service(mut self, oracle_service: Duration) -> Self {
        self.oracle_service = oracle_service;
        self
    }

    /// Sets [`Self::one_phase`].
    #[must_use]
    pub fn with_one_phase(mut self, one_phase: bool) -> Self {
        self.one_phase = one_phase;
        self
    }

    /// Row operations per second all data servers together can serve: `servers / service`.
    pub fn capacity_ops_per_sec(&self) -> f64 {
        self.servers as f64 / self.service.as_secs_f64().max(1e-12)
    }

    /// Requests per second the oracle can serve.
    pub fn oracle_capacity_per_sec(&self) -> f64 {
        1.0 / self.oracle_service.as_secs_f64().max(1e-12)
    }

    /// Half the round trip.
    pub fn one_way(&self) -> Duration {
        self.rtt / 2
    }
}

/// Row operations a request makes at each server it touches: `(server, ops)`, each server once.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Work(Vec<(usize, u64)>);

impl Work {
    /// One more row operation at `server`.
    pub(crate) fn add(&mut self, server: usize) {
        match self.0.iter_mut().find(|(s, _)| *s == server) {
            Some((_, ops)) => *ops += 1,
            None => self.0.push((server, 1)),
        }
    }

    /// No server touched.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a row operation was, for the breakdown of the servers' work ([`ModelSnapshot::tables`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// A row read (`read_row`, an item of `read_rows`).
    Read = 0,
    /// A row mutation (an item of `mutate_rows` or `mutate_rows_atomically`).
    Write = 1,
    /// A row a scan returned.
    ScanRow = 2,
    /// The seek of a scan that returned nothing.
    EmptyScan = 3,
}

/// The simulated cluster (see the module docs).
#[derive(Debug)]
pub struct ClusterModel {
    config: SimConfig,
    servers: Vec<Mutex<Server>>,
    oracle: Mutex<Server>,
    simulating: AtomicBool,
    /// How late the timer woke requests after their service finished, summed (ns), and how many.
    late_ns: AtomicU64,
    wakes: AtomicU64,
    /// Request latency as the caller saw it (send to answer), summed (ns), and requests timed.
    latency_ns: AtomicU64,
    timed: AtomicU64,
    /// Row operations by table and [`OpKind`].
    tables: TableWork,
    /// The next server of [`Self::next_server`].
    turn: AtomicUsize,
}

/// Cumulative totals of a [`ClusterModel`] at one instant (see [`ClusterModel::snapshot`]).
#[derive(Debug, Clone)]
pub struct ModelSnapshot {
    /// When it was taken.
    pub at: Instant,
    /// Each data server's totals.
    pub servers: Vec<ServerTotals>,
    /// The oracle's totals.
    pub oracle: ServerTotals,
    /// Summed timer lateness.
    pub late: Duration,
    /// Requests that slept for their answer.
    pub wakes: u64,
    /// Summed request latency (send to answer) of data-server requests.
    pub latency: Duration,
    /// Data-server requests timed.
    pub timed: u64,
    /// Row operations while simulating, by table, then server, then [`OpKind`] (index: the
    /// kind's value).
    pub tables: BTreeMap<String, Vec<[u64; 4]>>,
}

impl ModelSnapshot {
    /// Row operations of `table` by [`OpKind`], all servers (zeros for an unknown table).
    pub fn table_ops(&self, table: &str) -> [u64; 4] {
        let mut ops = [0; 4];
        for by_kind in self.tables.get(table).into_iter().flatten() {
            for (total, n) in ops.iter_mut().zip(by_kind) {
                *total += n;
            }
        }
        ops
    }

    /// Row operations of `table` at `server`, all kinds.
    pub fn table_ops_at(&self, table: &str, server: usize) -> u64 {
        self.tables
            .get(table)
            .and_then(|servers| servers.get(server))
            .map_or(0, |by_kind| by_kind.iter().sum())
    }
}

impl ClusterModel {
    /// A cluster of `config`, idle, the simulation off (calls go straight to the inner store
    /// until [`Self::set_simulating`] turns it on).
    pub fn new(mut config: SimConfig) -> Self {
        let now = Instant::now();
        config.servers = config.servers.max(1);
        Self {
            servers: (0..config.servers)
                .map(|_| Mutex::new(Server::new(now)))
                .collect(),
            oracle: Mutex::new(Server::new(now)),
            config,
            simulating: AtomicBool::new(false),
            late_ns: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            latency_ns: AtomicU64::new(0),
            timed: AtomicU64::new(0),
            tables: TableWork::default(),
            turn: AtomicUsize::new(0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Whether calls pay the simulated network and servers now.
    pub fn simulating(&self) -> bool {
        self.simulating.load(Ordering::Relaxed)
    }

    /// Turns the simulation on or off (loading and checking a database are not what is
    /// measured; requests already booked finish as booked).
    pub fn set_simulating(&self, on: bool) {
        self.simulating.store(on, Ordering::Relaxed);
    }

    /// The server `row` of `table` lives on: a hash of both, so that rows spread evenly.
    pub fn server_of(&self, table: &[u8], row: &[u8]) -> usize {
        if self.servers.len() <= 1 {
            return 0;
        }
        let mut hasher = DefaultHasher::new();
        table.hash(&mut hasher);
        row.hash(&mut hasher);
        (hasher.finish() % self.servers.len() as u64) as usize
    }

    /// The servers in turn, for work that belongs to no row.
    pub(crate) fn next_server(&self) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed) % self.servers.len().max(1)
    }

    /// Books `work` arriving at `arrival` at every server it touches; returns when the slowest
    /// of them finishes (the servers work in parallel).
    pub(crate) fn book(&self, arrival: Instant, work: &Work) -> Instant {
        let mut done = arrival;
        for &(server, ops) in &work.0 {
            if let Some(queue) = self.servers.get(server) {
                let took = self.config.service.saturating_mul(clamp_u32(ops));
                done = done.max(queue.lock().book(arrival, ops, took));
            }
        }
        done
    }

    /// Books one oracle request arriving at `arrival`; returns when it finishes.
    pub(crate) fn book_oracle(&self, arrival: Instant) -> Instant {
        self.oracle
            .lock()
            .book(arrival, 1, self.config.oracle_service)
    }

    /// Sleeps until `done`, counting how late the timer woke.
    pub(crate) async fn wait_until(&self, done: Instant) {
        tokio::time::sleep_until(done).await;
        let late = Instant::now().saturating_duration_since(done);
        self.late_ns.fetch_add(nanos(late), Ordering::Relaxed);
        self.wakes.fetch_add(1, Ordering::Relaxed);
    }

    /// Records one data-server request's latency as its caller saw it.
    pub(crate) fn record_latency(&self, latency: Duration) {
        self.latency_ns.fetch_add(nanos(latency), Ordering::Relaxed);
        self.timed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` row operations of `kind` in `table` at `server`.
    pub(crate) fn count(&self, table: &Bytes, server: usize, kind: OpKind, n: u64) {
        self.tables.add(table, server, self.servers.len(), kind, n);
    }

    /// The totals now.
    pub fn snapshot(&self) -> ModelSnapshot {
        let at = Instant::now();
        ModelSnapshot {
            at,
            servers: self.servers.iter().map(|s| s.lock().totals(at)).collect(),
            oracle: self.oracle.lock().totals(at),
            late: Duration::from_nanos(self.late_ns.load(Ordering::Relaxed)),
            wakes: self.wakes.load(Ordering::Relaxed),
            latency: Duration::from_nanos(self.latency_ns.load(Ordering::Relaxed)),
            timed: self.timed.load(Ordering::Relaxed),
            tables: self.tables.snapshot(),
        }
    }
}

/// Row operations by table, server and kind, in shards chosen by the table's hash: a request
/// locks the shard of each table it touches, and no lock is shared by every request.
#[derive(Debug)]
struct TableWork {
    shards: Vec<Mutex<HashMap<Bytes, Vec<[u64; 4]>>>>,
}

impl Default for TableWork {
    fn default() -> Self {
        Self {
            shards: (0..16).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

impl TableWork {
    fn add(&self, table: &Bytes, server: usize, servers: usize, kind: OpKind, n: u64) {
        let mut hasher = DefaultHasher::new();
        table.hash(&mut hasher);
        let shard = (hasher.finish() % self.shards.len() as u64) as usize;
        let Some(shard) = self.shards.get(shard) else {
            return;
        };
        let mut shard = shard.lock();
        let counts = match shard.get_mut(table) {
            Some(counts) => counts,
            None => shard
                .entry(table.clone())
                .or_insert_with(|| vec![[0; 4]; servers]),
        };
        if let Some(at) = counts.get_mut(server) {
            at[kind as usize] += n;
        }
    }

    fn snapshot(&self) -> BTreeMap<String, Vec<[u64; 4]>> {
        let mut out = BTreeMap::new();
        for shard in &self.shards {
            for (table, counts) in shard.lock().iter() {
                out.insert(String::from_utf8_lossy(table).into_owned(), counts.clone());
            }
        }
        out
    }
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch across two servers finishes when the slower of them does.
    #[test]
    fn a_batch_waits_for_the_slowest_server() {
        let model = ClusterModel::new(SimConfig::new(2).with_service(Duration::from_millis(1)));
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        // Server 0 has three operations queued.
        let mut busy = Work::default();
        for _ in 0..3 {
            busy.add(0);
        }
        assert_eq!(model.book(t0, &busy), t0 + 3 * ms);
        // One operation on each server: server 1 is done at 1 ms, server 0 only at 4 ms.
        let mut batch = Work::default();
        batch.add(1);
        batch.add(0);
        assert_eq!(model.book(t0, &batch), t0 + 4 * ms);
        let snapshot = model.snapshot();
        assert_eq!(snapshot.servers[0].ops, 4);
        assert_eq!(snapshot.servers[1].ops, 1);
        assert_eq!(snapshot.servers[1].requests, 1);
        // The oracle is a queue of its own.
        assert_eq!(model.book_oracle(t0), t0 + Duration::from_micros(10));
    }

    /// Rows spread over every server, each row always on the same one.
    #[test]
    fn rows_hash_to_every_server_and_stay_there() {
        let model = ClusterModel::new(SimConfig::new(8));
        let mut seen = [false; 8];
        for i in 0..1_000u32 {
            let server = model.server_of(b"t", &i.to_be_bytes());
            assert_eq!(server, model.server_of(b"t", &i.to_be_bytes()));
            seen[server] = true;
        }
        assert!(seen.iter().all(|s| *s), "{seen:?}");
        assert_eq!(ClusterModel::new(SimConfig::new(0)).config().servers, 1);
        let config = SimConfig::new(4).with_service(Duration::from_millis(2));
        assert!((config.capacity_ops_per_sec() - 2_000.0).abs() < 1e-6);
    }
}
