//! The oracle service end to end over loopback: batching, restarts, failover (crash, graceful
//! shutdown, a leader partitioned from the store), connections cut mid-request, and oracle
//! time through a skewed leader clock.
//!
//! Several instances in one test process stand for several processes: each reaches the store
//! through its own [`ProcessView`], which has its own store id (processes share no memory) and
//! can be cut off from the store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use percolator_backend_mem::MemStore;
use percolator_core::error::StoreError;
use percolator_core::oracle::{OracleConfig, SkewedClock, time};
use percolator_core::store::{
    Cell, MutationOutcome, ReadRow, RowCells, RowMutation, Scan, StoreLimits,
};
use percolator_core::{RowStore, TimestampOracle};
use percolator_oracle::{OracleServer, RemoteOracle, RemoteOracleConfig, ServerConfig};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};

/// One process's handle on a shared store (a mem store that says it is shared, so that the
/// oracle's lease applies).
struct ProcessView {
    store: Arc<MemStore>,
    process: &'static str,
    partitioned: AtomicBool,
    /// The next this many writes are held for `hold_for` before they apply, whether or not
    /// the caller still waits (an etcd proposal caught in an election).
    held_writes: AtomicUsize,
    hold_for: parking_lot::Mutex<Duration>,
}

impl ProcessView {
    fn new(store: &Arc<MemStore>, process: &'static str) -> Arc<Self> {
        Arc::new(Self {
            store: Arc::clone(store),
            process,
            partitioned: AtomicBool::new(false),
            held_writes: AtomicUsize::new(0),
            hold_for: parking_lot::Mutex::new(Duration::ZERO),
        })
    }

    /// Holds the next `writes` writes for `hold_for` each.
    fn hold_writes(&self, writes: usize, hold_for: Duration) {
        *self.hold_for.lock() = hold_for;
        self.held_writes.store(writes, Ordering::SeqCst);
    }

    fn reachable(&self) -> Result<(), StoreError> {
        if self.partitioned.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable(format!(
                "process {} is partitioned from the store",
                self.process
            )));
        }
        Ok(())
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait::async_trait]
impl RowStore for ProcessView {
    fn name(&self) -> &'static str {
        "mem (shared)"
    }
    fn limits(&self) -> StoreLimits {
        self.store.limits().with_distributed(true)
    }
    fn store_id(&self) -> String {
        format!(
            "{} seen from process {}",
            self.store.store_id(),
            self.process
        )
    }
    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        self.reachable()?;
        self.store.read_row(request).await
    }
    async fn read_rows(&self, requests: Vec<ReadRow>) -> Result<Vec<Vec<Vec<Cell>>>, StoreError> {
        self.reachable()?;
        self.store.read_rows(requests).await
    }
    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        self.reachable()?;
        self.store.scan(request).await
    }
    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        self.reachable()?;
        let held = self
            .held_writes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if held {
            // Applied by a task of its own: a caller that stops waiting does not stop it.
            let (store, hold_for) = (Arc::clone(&self.store), *self.hold_for.lock());
            return tokio::spawn(async move {
                tokio::time::sleep(hold_for).await;
                store.mutate_rows(batch).await
            })
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        }
        self.store.mutate_rows(batch).await
    }
    async fn mutate_rows_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<percolator_core::AtomicOutcome, StoreError> {
        self.reachable()?;
        self.store.mutate_rows_atomically(batch).await
    }
    async fn sync(&self) -> Result<(), StoreError> {
        self.reachable()?;
        self.store.sync().await
    }

    async fn tables(&self) -> Result<Vec<bytes::Bytes>, StoreError> {
        self.reachable()?;
        self.store.tables().await
    }

    async fn collect_garbage(&self, safe_point: u64) -> Result<(), StoreError> {
        self.reachable()?;
        self.store.collect_garbage(safe_point).await
    }
}

const LEASE: Duration = Duration::from_millis(600);

fn config() -> ServerConfig {
    ServerConfig::default()
        .with_oracle(OracleConfig::default().with_lease(LEASE))
        .with_maintain_interval(LEASE / 8)
}

async fn server(store: Arc<ProcessView>) -> OracleServer {
    OracleServer::bind(store, "127.0.0.1:0", config())
        .await
        .unwrap()
}

fn client(servers: &[&OracleServer]) -> RemoteOracle {
    RemoteOracle::new(
        RemoteOracleConfig::new(servers.iter().map(|s| s.local_addr().to_string()))
            .with_request_timeout(LEASE * 10),
    )
    .unwrap()
}

/// Many callers, few round trips: every timestamp is handed out once, each caller's increase,
/// and the server answered far fewer requests than it handed out timestamps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_many_callers_into_few_requests() {
    let store = Arc::new(MemStore::new());
    let server = server(ProcessView::new(&store, "A")).await;
    assert!(server.wait_until_leading(Duration::from_secs(5)).await);
    let oracle = Arc::new(client(&[&server]));
    const CALLERS: usize = 64;
    const EACH: usize = 500;
    let mut tasks = Vec::new();
    for _ in 0..CALLERS {
        let oracle = Arc::clone(&oracle);
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(EACH);
            for _ in 0..EACH {
                seen.push(oracle.timestamp().await.unwrap());
            }
            seen
        }));
    }
    let mut all = HashSet::new();
    for task in tasks {
        let seen = task.await.unwrap();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "a caller went backwards"
        );
        for ts in seen {
            assert!(all.insert(ts), "timestamp {ts} handed out twice");
        }
    }
    let stats = server.stats();
    assert_eq!(stats.timestamps, (CALLERS * EACH) as u64);
    assert!(
        stats.requests * 4 < stats.timestamps,
        "{} requests for {} timestamps: the client did not batch",
        stats.requests,
        stats.timestamps
    );
    // Timestamps carry the leader's clock.
    let now = time::physical_ms(oracle.timestamp().await.unwrap());
    let wall = percolator_core::oracle::Clock::now_ms(&percolator_core::oracle::SystemClock);
    assert!(now.abs_diff(wall) < 5_000, "oracle ms {now} vs wall {wall}");
    // A batch for one caller.
    let first = oracle.timestamps(1_000).await.unwrap();
    assert!(oracle.timestamp().await.unwrap() >= first + 1_000);
}

/// A restarted service — shut down, or crashed — starts above everything handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_start_above_the_persisted_mark() {
    let store = Arc::new(MemStore::new());
    let mut last = 0;
    for round in 0..6 {
        let server = server(ProcessView::new(&store, "A")).await;
        let oracle = client(&[&server]);
        for _ in 0..50 {
            let ts = oracle.timestamp().await.unwrap();
            assert!(ts > last, "round {round}: {ts} after {last}");
            last = ts;
        }
        if round % 2 == 0 {
            server.shutdown().await;
        } else {
            drop(server); // a crash: the lease is not released, the next one waits it out
        }
    }
}

/// Failover: a standby takes over when the leader's machine dies (after the lease) or the
/// leader shuts down (at once), and a client that knows both instances keeps getting increasing
/// timestamps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_after_a_crash_and_a_shutdown() {
    let store = Arc::new(MemStore::new());
    let view_a = ProcessView::new(&store, "A");
    let a = server(Arc::clone(&view_a)).await;
    assert!(a.wait_until_leading(Duration::from_secs(5)).await);
    let b = server(ProcessView::new(&store, "B")).await;
    let cut = Arc::new(AtomicBool::new(false));
    let to_a = cutting_proxy(a.local_addr(), Arc::clone(&cut)).await;
    let oracle = RemoteOracle::new(
        RemoteOracleConfig::new([to_a, b.local_addr().to_string()])
            .with_request_timeout(LEASE * 10),
    )
    .unwrap();
    let mut last = oracle.timestamp().await.unwrap();
    // One renewal per maintain interval (an eighth of the lease), each at least an interval
    // after the one before: after sixteen, two leases have passed with the leader alive.
    assert!(a.wait_for_renewals(16, Duration::from_secs(30)).await);
    assert!(!b.is_leading(), "the standby took over from a live leader");
    let b_addr = b.local_addr();
    // The leader's machine dies: it reaches neither the store nor its clients. (Dropping the
    // server would not do: in one process, a standby knows at once that the dropped oracle is
    // gone.) The client waits out the lease and goes on with the standby.
    view_a.partitioned.store(true, Ordering::SeqCst);
    cut.store(true, Ordering::SeqCst);
    let crashed = Instant::now();
    tokio::time::sleep(Duration::from_millis(20)).await; // the proxy closes its connections
    let ts = oracle.timestamp().await.unwrap();
    let took = crashed.elapsed();
    assert!(ts > last);
    last = ts;
    assert!(b.is_leading());
    assert!(
        took >= LEASE / 2,
        "took over after {took:?}, before the lease ran out"
    );
    assert!(took < LEASE * 5, "failover took {took:?}");
    drop(a);
    // A new standby; the leader shuts down gracefully: the standby takes over at once.
    let c = server(ProcessView::new(&store, "C")).await;
    let oracle = RemoteOracle::new(
        RemoteOracleConfig::new([b_addr.to_string(), c.local_addr().to_string()])
            .with_request_timeout(LEASE * 10),
    )
    .unwrap();
    assert!(oracle.timestamp().await.unwrap() > last);
    b.shutdown().await;
    let released = Instant::now();
    let ts = oracle.timestamp().await.unwrap();
    assert!(ts > last);
    assert!(
        released.elapsed() < LEASE,
        "took {:?} after a graceful shutdown",
        released.elapsed()
    );
    assert!(c.is_leading());
}

/// A leader cut off from the store stops serving before a standby can take over, so the two
/// never serve at once: the old leader's last answer comes before the new leader's first, and
/// everything the new one hands out is above everything the old one did. When the old leader
/// reaches the store again it finds itself deposed and stands by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_stops_before_the_standby_starts() {
    let store = Arc::new(MemStore::new());
    let view_a = ProcessView::new(&store, "A");
    let a = server(Arc::clone(&view_a)).await;
    assert!(a.wait_until_leading(Duration::from_secs(5)).await);
    let b = server(ProcessView::new(&store, "B")).await;
    // One client per instance, asking all the time.
    let poll = |server: &OracleServer| {
        let oracle = RemoteOracle::new(
            RemoteOracleConfig::new([server.local_addr().to_string()])
                .with_request_timeout(Duration::from_millis(100)),
        )
        .unwrap();
        tokio::spawn(async move {
            let mut served = Vec::new();
            let until = Instant::now() + LEASE * 6;
            while Instant::now() < until {
                if let Ok(ts) = oracle.timestamp().await {
                    served.push((Instant::now(), ts));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            served
        })
    };
    let (from_a, from_b) = (poll(&a), poll(&b));
    tokio::time::sleep(LEASE).await;
    view_a.partitioned.store(true, Ordering::SeqCst);
    let (from_a, from_b) = (from_a.await.unwrap(), from_b.await.unwrap());
    let (last_a, max_a) = (
        from_a.last().expect("A served before the partition").0,
        from_a.iter().map(|(_, ts)| *ts).max().unwrap_or(0),
    );
    let (first_b, min_b) = (
        from_b.first().expect("B took over").0,
        from_b.iter().map(|(_, ts)| *ts).min().unwrap_or(0),
    );
    assert!(
        last_a < first_b,
        "the partitioned leader answered {:?} after the new leader's first answer",
        last_a - first_b
    );
    assert!(
        min_b > max_a,
        "the new leader handed out {min_b}, not above {max_a}"
    );
    // Back on the store, A is deposed and stands by; B keeps leading.
    view_a.partitioned.store(false, Ordering::SeqCst);
    // A lease of B's renewals later, A has had every chance to see the store again.
    assert!(b.wait_for_renewals(8, Duration::from_secs(30)).await);
    assert!(!a.is_leading(), "the deposed leader leads again");
    assert!(b.is_leading());
}

/// A proxy that forwards one connection at a time to `target` until `cut` is set, then closes
/// every connection (a network cut in the middle of requests).
async fn cutting_proxy(target: std::net::SocketAddr, cut: Arc<AtomicBool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            if cut.load(Ordering::SeqCst) {
                let _ = inbound.shutdown().await;
                continue;
            }
            let cut = Arc::clone(&cut);
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(target).await else {
                    return;
                };
                let copy = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                let watch = async {
                    while !cut.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                };
                tokio::select! { _ = copy => {}, () = watch => {} }
            });
        }
    });
    addr
}

/// Connections cut while requests are out: callers get their timestamps through the next
/// endpoint, none twice, each caller's increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_cut_mid_flight_go_to_the_next_endpoint() {
    let store = Arc::new(MemStore::new());
    let server = server(ProcessView::new(&store, "A")).await;
    assert!(server.wait_until_leading(Duration::from_secs(5)).await);
    let cut = Arc::new(AtomicBool::new(false));
    let proxy = cutting_proxy(server.local_addr(), Arc::clone(&cut)).await;
    let oracle = Arc::new(
        RemoteOracle::new(
            RemoteOracleConfig::new([proxy, server.local_addr().to_string()])
                .with_request_timeout(Duration::from_secs(5)),
        )
        .unwrap(),
    );
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let oracle = Arc::clone(&oracle);
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..2_000 {
                seen.push(oracle.timestamp().await.unwrap());
            }
            seen
        }));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    cut.store(true, Ordering::SeqCst);
    let mut all = HashSet::new();
    for task in tasks {
        let seen = task.await.unwrap();
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        for ts in seen {
            assert!(all.insert(ts), "timestamp {ts} handed out twice");
        }
    }
    assert_eq!(all.len(), 16 * 2_000);
}

/// A leader whose clock is ten minutes ahead hands out timestamps in its own time; callers
/// with no working instance get a typed error naming every endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_time_is_the_leaders_clock_and_failures_name_the_endpoints() {
    let store = Arc::new(MemStore::new());
    let ahead = 600_000;
    let server = OracleServer::bind(
        ProcessView::new(&store, "A"),
        "127.0.0.1:0",
        config().with_oracle(
            OracleConfig::default()
                .with_lease(LEASE)
                .with_clock(Arc::new(SkewedClock { offset_ms: ahead })),
        ),
    )
    .await
    .unwrap();
    let oracle = client(&[&server]);
    let ts = time::physical_ms(oracle.timestamp().await.unwrap());
    let wall = percolator_core::oracle::Clock::now_ms(&percolator_core::oracle::SystemClock);
    assert!(
        ts.abs_diff(wall + 600_000) < 5_000,
        "{ts} vs {wall} + 10 min"
    );

    let nobody = RemoteOracle::new(
        RemoteOracleConfig::new(["127.0.0.1:1"]).with_request_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    match nobody.timestamp().await {
        Err(percolator_core::Error::Oracle(message)) => {
            assert!(message.contains("127.0.0.1:1"), "{message}");
        }
        other => panic!("expected an oracle error, got {other:?}"),
    }
    assert!(matches!(
        RemoteOracle::new(RemoteOracleConfig::new(Vec::<String>::new())),
        Err(percolator_core::Error::InvalidInput(_))
    ));
    assert!(matches!(
        oracle
            .timestamps(u64::from(percolator_oracle::wire::MAX_COUNT) + 1)
            .await,
        Err(percolator_core::Error::InvalidInput(_))
    ));
}

/// Timestamps from `server` for `period`, each with when it came.
async fn served_for(server: String, period: Duration) -> Vec<Instant> {
    let oracle = RemoteOracle::new(
        RemoteOracleConfig::new([server]).with_request_timeout(Duration::from_millis(100)),
    )
    .unwrap();
    let mut served = Vec::new();
    let until = Instant::now() + period;
    while Instant::now() < until {
        if oracle.timestamp().await.is_ok() {
            served.push(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    served
}

/// The longest time between two answers, and from the last answer to `end`.
fn longest_gap(served: &[Instant], end: Instant) -> Duration {
    served
        .windows(2)
        .map(|w| w[1] - w[0])
        .chain(
            served
                .last()
                .map(|last| end.saturating_duration_since(*last)),
        )
        .max()
        .unwrap_or(end.elapsed())
}

/// A renewal the store holds on to for longer than the lease (an etcd proposal sent into an
/// election waits out the client's timeout) does not cost the leader its lease: the attempt is
/// given up after a quarter of the lease and tried again, so the leader serves on without a
/// gap and the standby never takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_held_by_the_store_is_tried_again_before_the_lease_runs_out() {
    let store = Arc::new(MemStore::new());
    let view_a = ProcessView::new(&store, "A");
    let a = server(Arc::clone(&view_a)).await;
    assert!(a.wait_until_leading(Duration::from_secs(5)).await);
    let b = server(ProcessView::new(&store, "B")).await;
    let began = Instant::now();
    let served = tokio::spawn(served_for(a.local_addr().to_string(), LEASE * 6));
    tokio::time::sleep(LEASE).await;
    view_a.hold_writes(1, LEASE * 2);
    let served = served.await.unwrap();
    let end = began + LEASE * 6;
    let gap = longest_gap(&served, end);
    assert!(
        gap < LEASE / 2,
        "the leader stopped serving for {gap:?} while one write was held"
    );
    assert!(a.is_leading(), "the leader lost the lease");
    assert!(!b.is_leading(), "the standby took over");
}

/// A renewal whose answer never came but which applied is recognised as the leader's own when
/// the next attempt finds the row changed: the leader adopts it instead of deposing itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_applied_unanswered_is_adopted() {
    let store = Arc::new(MemStore::new());
    let view_a = ProcessView::new(&store, "A");
    let a = server(Arc::clone(&view_a)).await;
    assert!(a.wait_until_leading(Duration::from_secs(5)).await);
    let b = server(ProcessView::new(&store, "B")).await;
    // Each held write outlives its attempt (a quarter of the lease) and applies before the
    // next attempt reaches the store.
    for _ in 0..5 {
        let renewals = a.stats().renewals;
        view_a.hold_writes(1, LEASE * 3 / 10);
        let deadline = Instant::now() + LEASE * 4;
        while a.stats().renewals < renewals + 2 {
            assert!(Instant::now() < deadline, "no renewal after a held write");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            a.is_leading(),
            "the leader deposed itself over its own write"
        );
    }
    let end = Instant::now() + LEASE * 2;
    let served = served_for(a.local_addr().to_string(), LEASE * 2).await;
    assert!(longest_gap(&served, end) < LEASE / 2);
    assert!(!b.is_leading());
}
