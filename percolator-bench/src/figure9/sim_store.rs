//! [`SimulatedCluster`]: a [`RowStore`] wrapper that makes every call pay a simulated cluster's
//! network and servers ([`ClusterModel`]) before its answer comes back, and otherwise forwards
//! it to the inner store unchanged: the answers are exactly the inner store's.
//!
//! The cost of each call:
//! - `read_row`: one row operation at the row's server;
//! - `read_rows`, `mutate_rows`, `mutate_rows_atomically`: one row operation per item at its
//!   row's server, the servers in parallel; the call waits for the slowest;
//! - `scan`: one row operation per row returned, at that row's server, or, when nothing is
//!   returned, one seek at the server of the range's first row (at the servers in turn when
//!   the range has no first row). That is a scan of a range-partitioned table (Bigtable's
//!   tablets): the client knows which servers hold rows of the range and asks only those, so a
//!   short scan does not cost every server a request. (Charging every seek of an unbounded
//!   range to one server would make that server hot: the observers' idle notify scans all
//!   restart at the table's start.) Its answer is read when the request is sent (the cost
//!   depends on it), then delayed; every other call is applied when its slowest server
//!   finishes, so its effects appear when a real cluster's would;
//! - `sync`, `tables`, `collect_garbage`, `limits`, `store_id`, `name`: nothing (a cluster's
//!   answers are durable already; the others are maintenance or local).
//!
//! Every call then costs one round trip on top ([`SimConfig::rtt`]): half before the servers
//! see it, half after they answer.
//!
//! Limits are the inner store's, except that unless [`SimConfig::one_phase`] is set the
//! single-process guarantees are taken away (no snapshot-read tracking, no all-or-nothing
//! batches of several rows): servers of a hashed cluster cannot give them without coordination,
//! and the paper's protocol commits in two phases. Taking a guarantee away is safe; every other
//! method forwards as the [`RowStore`] wrapper contract asks.

use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use percolator_core::backend::validate::validate_atomic_batch;
use percolator_core::{
    AtomicOutcome, Cell, MutationOutcome, ReadRow, RowCells, RowMutation, RowStore, Scan,
    StoreError, StoreLimits,
};
use tokio::time::Instant;

use super::model::{ClusterModel, OpKind, SimConfig, Work};

/// `S` behind a simulated cluster (see the module docs).
pub struct SimulatedCluster<S: RowStore> {
    inner: Arc<S>,
    model: Arc<ClusterModel>,
}

impl<S: RowStore> SimulatedCluster<S> {
    /// `inner` behind the cluster `model` (which a [`super::SimulatedOracle`] may share).
    pub fn new(inner: Arc<S>, model: Arc<ClusterModel>) -> Self {
        Self { inner, model }
    }

    /// The store behind the cluster.
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// The cluster.
    pub fn model(&self) -> &Arc<ClusterModel> {
        &self.model
    }

    fn config(&self) -> &SimConfig {
        self.model.config()
    }

    /// Runs `apply` as a request of `work`: half a round trip out, queued and served at each
    /// server, applied when the slowest finishes, half a round trip back.
    async fn request<T>(&self, work: Work, apply: impl Future<Output = T>) -> T {
        if !self.model.simulating() || work.is_empty() {
            return apply.await;
        }
        let sent = Instant::now();
        let one_way = self.config().one_way();
        let done = self.model.book(sent + one_way, &work);
        self.model.wait_until(done).await;
        let answer = apply.await;
        // From the booked finish, not from the wake-up: a late timer does not delay twice.
        tokio::time::sleep_until(done + one_way).await;
        self.model.record_latency(sent.elapsed());
        answer
    }

    /// One row operation of `kind` per row, at each row's server (counted by table while
    /// simulating).
    fn work_of<'a>(
        &self,
        kind: OpKind,
        rows: impl IntoIterator<Item = (&'a Bytes, &'a Bytes)>,
    ) -> Work {
        let mut work = Work::default();
        let mut counts: Vec<(&Bytes, usize, u64)> = Vec::new();
        for (table, row) in rows {
            let server = self.model.server_of(table, row);
            work.add(server);
            match counts
                .iter_mut()
                .find(|(t, s, _)| *t == table && *s == server)
            {
                Some((_, _, n)) => *n += 1,
                None => counts.push((table, server, 1)),
            }
        }
        if self.model.simulating() {
            for (table, server, n) in counts {
                self.model.count(table, server, kind, n);
            }
        }
        work
    }
}

/// Every method forwards to the inner store (the wrapper contract of [`RowStore`]); the data
/// calls pay the simulated cluster first (see the module docs).
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: RowStore> RowStore for SimulatedCluster<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn limits(&self) -> StoreLimits {
        let limits = self.inner.limits();
        if self.config().one_phase {
            limits
        } else {
            limits
                .with_tracks_snapshot_reads(false)
                .with_max_atomic_rows(0)
        }
    }

    fn store_id(&self) -> String {
        self.inner.store_id()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        let work = self.work_of(OpKind::Read, [(&request.table, &request.row)]);
        self.request(work, self.inner.read_row(request)).await
    }

    async fn read_rows(&self, requests: Vec<ReadRow>) -> Result<Vec<Vec<Vec<Cell>>>, StoreError> {
        let work = self.work_of(OpKind::Read, requests.iter().map(|r| (&r.table, &r.row)));
        self.request(work, self.inner.read_rows(requests)).await
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        if !self.model.simulating() {
            return self.inner.scan(request).await;
        }
        let sent = Instant::now();
        let table = request.table.clone();
        let first = match &request.start {
            Bound::Included(row) | Bound::Excluded(row) => Some(row.clone()),
            Bound::Unbounded => None,
        };
        let answer = self.inner.scan(request).await;
        let mut work = self.work_of(
            OpKind::ScanRow,
            answer
                .iter()
                .flatten()
                .map(|row_cells| (&table, &row_cells.row)),
        );
        if work.is_empty() {
            let server = match &first {
                Some(row) => self.model.server_of(&table, row),
                None => self.model.next_server(),
            };
            work.add(server);
            self.model.count(&table, server, OpKind::EmptyScan, 1);
        }
        let one_way = self.config().one_way();
        let done = self.model.book(sent + one_way, &work);
        self.model.wait_until(done).await;
        tokio::time::sleep_until(done + one_way).await;
        self.model.record_latency(sent.elapsed());
        answer
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        let work = self.work_of(OpKind::Write, batch.iter().map(|m| (&m.table, &m.row)));
        self.request(work, self.inner.mutate_rows(batch)).await
    }

    async fn mutate_rows_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<AtomicOutcome, StoreError> {
        if !self.config().one_phase {
            // Refused as a store without all-or-nothing batches refuses them.
            validate_atomic_batch(&batch, &self.limits())?;
        }
        let work = self.work_of(OpKind::Write, batch.iter().map(|m| (&m.table, &m.row)));
        self.request(work, self.inner.mutate_rows_atomically(batch))
            .await
    }

    async fn sync(&self) -> Result<(), StoreError> {
        self.inner.sync().await
    }

    async fn tables(&self) -> Result<Vec<Bytes>, StoreError> {
        self.inner.tables().await
    }

    async fn collect_garbage(&self, safe_point: u64) -> Result<(), StoreError> {
        self.inner.collect_garbage(safe_point).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use percolator_backend_mem::MemStore;
    use percolator_core::{Client, Columns, Family, FamilyRead, Mutation, TimestampOracle};

    use super::*;
    use crate::figure9::SimulatedOracle;

    const RTT: Duration = Duration::from_millis(2);
    const SERVICE: Duration = Duration::from_millis(5);

    fn cluster(servers: usize) -> SimulatedCluster<MemStore> {
        let config = SimConfig::new(servers).with_rtt(RTT).with_service(SERVICE);
        let model = Arc::new(ClusterModel::new(config));
        model.set_simulating(true);
        SimulatedCluster::new(Arc::new(MemStore::new()), model)
    }

    fn read(row: &[u8]) -> ReadRow {
        ReadRow {
            table: Bytes::from_static(b"t"),
            row: Bytes::copy_from_slice(row),
            reads: vec![FamilyRead::all(Family::Data)],
            snapshot_ts: None,
        }
    }

    fn put(row: &[u8]) -> RowMutation {
        RowMutation {
            table: Bytes::from_static(b"t"),
            row: Bytes::copy_from_slice(row),
            conditions: Vec::new(),
            mutations: vec![Mutation::Put {
                family: Family::Data,
                column: Bytes::from_static(b"c"),
                ts: 1,
                value: Bytes::from_static(b"v"),
            }],
        }
    }

    /// A row key that `store` places on `server`.
    fn row_on(store: &SimulatedCluster<MemStore>, server: usize, skip: usize) -> Vec<u8> {
        (0u32..)
            .map(|i| i.to_be_bytes().to_vec())
            .filter(|row| store.model().server_of(b"t", row) == server)
            .nth(skip)
            .unwrap_or_default()
    }

    /// Two requests to one server at once: the second waits for the first's service. On tokio's
    /// paused clock, so the instants are the simulated ones exactly.
    #[tokio::test(start_paused = true)]
    async fn a_request_to_a_busy_server_queues_behind_the_earlier_one() {
        let store = cluster(1);
        let t0 = Instant::now();
        let timed = |row: &'static [u8]| {
            let store = &store;
            async move {
                store.read_row(read(row)).await.unwrap();
                t0.elapsed()
            }
        };
        let (first, second) = tokio::join!(timed(b"a"), timed(b"b"));
        assert!(first >= RTT + SERVICE, "{first:?}");
        assert!(second >= RTT + 2 * SERVICE, "{second:?}");
        assert!(second >= first + SERVICE, "{first:?} then {second:?}");
        let server = &store.model().snapshot().servers[0];
        assert_eq!(server.requests, 2);
        assert_eq!(server.waited, SERVICE, "the second waited one service time");
    }

    /// A batch over two servers waits for the slower one, here the one with a queue.
    #[tokio::test(start_paused = true)]
    async fn a_batch_across_two_servers_waits_for_the_slower() {
        let store = cluster(2);
        let busy: Vec<RowMutation> = (0..3).map(|i| put(&row_on(&store, 0, i))).collect();
        let batch = vec![read(&row_on(&store, 0, 3)), read(&row_on(&store, 1, 0))];
        let t0 = Instant::now();
        let (written, (read_back, took)) = tokio::join!(store.mutate_rows(busy), async {
            let answer = store.read_rows(batch).await;
            (answer, t0.elapsed())
        });
        assert!(written.unwrap().iter().all(|o| o.applied()));
        assert_eq!(read_back.unwrap().len(), 2);
        // Server 1 alone would answer after RTT + SERVICE; server 0 first serves the three
        // writes booked before.
        assert!(took >= RTT + 4 * SERVICE, "{took:?}");
        let snapshot = store.model().snapshot();
        assert_eq!(snapshot.servers[0].ops, 4);
        assert_eq!(snapshot.servers[1].ops, 1);
        assert_eq!(snapshot.servers[1].waited, Duration::ZERO);
    }

    /// A scan pays for the rows it returns at their servers; an empty scan of a range with no
    /// first row pays one seek, at the servers in turn.
    #[tokio::test(start_paused = true)]
    async fn scans_pay_for_their_rows_and_empty_ones_for_a_seek() {
        let store = cluster(2);
        let scan = Scan {
            table: Bytes::from_static(b"t"),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Data),
            row_limit: None,
            snapshot_ts: None,
        };
        assert!(store.scan(scan.clone()).await.unwrap().is_empty());
        assert!(store.scan(scan.clone()).await.unwrap().is_empty());
        let ops = |store: &SimulatedCluster<MemStore>| -> Vec<u64> {
            store
                .model()
                .snapshot()
                .servers
                .iter()
                .map(|s| s.ops)
                .collect()
        };
        assert_eq!(ops(&store), [1, 1]);
        let rows = [
            row_on(&store, 0, 0),
            row_on(&store, 0, 1),
            row_on(&store, 1, 0),
        ];
        store
            .mutate_rows(rows.iter().map(|r| put(r)).collect())
            .await
            .unwrap();
        assert_eq!(ops(&store), [3, 2]);
        assert_eq!(store.scan(scan).await.unwrap().len(), 3);
        assert_eq!(ops(&store), [5, 3]);
        let tables = &store.model().snapshot().tables["t"];
        let kinds = |i: usize| tables.iter().map(|at| at[i]).sum::<u64>();
        assert_eq!(
            [
                OpKind::Read,
                OpKind::Write,
                OpKind::ScanRow,
                OpKind::EmptyScan
            ]
            .map(|k| kinds(k as usize)),
            [0, 3, 3, 2]
        );
    }

    /// A transaction through the simulated cluster reads back what it wrote, and every answer
    /// is the inner store's; the limits drop only the single-process guarantees.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_are_exactly_the_inner_stores() {
        let config = SimConfig::new(4)
            .with_rtt(Duration::from_micros(400))
            .with_service(Duration::from_micros(50));
        let model = Arc::new(ClusterModel::new(config));
        model.set_simulating(true);
        let inner = Arc::new(MemStore::new());
        let store = Arc::new(SimulatedCluster::new(
            Arc::clone(&inner),
            Arc::clone(&model),
        ));
        let local = percolator_core::oracle::shared_local_oracle(&inner)
            .await
            .unwrap();
        let oracle: Arc<dyn TimestampOracle> =
            Arc::new(SimulatedOracle::new(local, Arc::clone(&model)));
        assert_eq!(store.store_id(), inner.store_id());
        assert!(!store.limits().tracks_snapshot_reads && inner.limits().tracks_snapshot_reads);
        assert_eq!(store.limits().max_atomic_rows, 0);
        assert!(matches!(
            store.mutate_rows_atomically(vec![put(b"x")]).await,
            Err(StoreError::TooLarge { .. })
        ));

        let client = Client::builder(Arc::clone(&store))
            .oracle(oracle)
            .build()
            .await
            .unwrap();
        let mut txn = client.begin().await.unwrap();
        for i in 0..20u32 {
            txn.set("accounts", i.to_be_bytes(), "balance", format!("{i}"))
                .unwrap();
        }
        txn.set("log", "entry", "text", "moved").unwrap();
        txn.commit().await.unwrap();

        let txn = client.begin().await.unwrap();
        let rows: Vec<[u8; 4]> = (0..20u32).map(u32::to_be_bytes).collect();
        let values = txn
            .get_many(rows.iter().map(|r| ("accounts", r, "balance")))
            .await
            .unwrap();
        for (i, value) in values.iter().enumerate() {
            assert_eq!(value.as_deref(), Some(format!("{i}").as_bytes()));
        }
        let scanned = txn
            .scan::<&str>("accounts", .., Columns::All)
            .await
            .unwrap();
        assert_eq!(scanned.len(), 20);
        drop(txn);

        // Raw answers, every family, through the cluster and straight from the inner store.
        for table in ["accounts", "log"] {
            for family in Family::ALL {
                let scan = Scan {
                    table: Bytes::from(table),
                    start: Bound::Unbounded,
                    end: Bound::Unbounded,
                    read: FamilyRead::all(family),
                    row_limit: None,
                    snapshot_ts: None,
                };
                assert_eq!(
                    store.scan(scan.clone()).await.unwrap(),
                    inner.scan(scan).await.unwrap()
                );
            }
        }
        let reads: Vec<ReadRow> = rows
            .iter()
            .map(|row| ReadRow {
                table: Bytes::from_static(b"accounts"),
                row: Bytes::copy_from_slice(row),
                reads: Family::ALL.iter().map(|f| FamilyRead::all(*f)).collect(),
                snapshot_ts: None,
            })
            .collect();
        assert_eq!(
            store.read_rows(reads.clone()).await.unwrap(),
            inner.read_rows(reads).await.unwrap()
        );
        // The requests went through the simulated servers and the oracle.
        let snapshot = model.snapshot();
        assert!(snapshot.servers.iter().all(|s| s.ops > 0), "{snapshot:?}");
        assert!(snapshot.oracle.requests >= 3, "{snapshot:?}");
        client.shutdown().await.unwrap();

        // With `one_phase`, the limits are the inner store's.
        let one_phase = SimulatedCluster::new(
            Arc::clone(&inner),
            Arc::new(ClusterModel::new(SimConfig::new(2).with_one_phase(true))),
        );
        assert_eq!(one_phase.limits(), inner.limits());
    }
}
