//! Figure 8 microbenchmarks and oracle throughput.
//!
//! Each measurement runs `clients` tasks in a closed loop for a fixed time and counts completed
//! operations. The raw baseline is the fastest way the engine offers to write and read the same
//! cell, with the same key layout: one unconditional single-row `Put` per write, overwriting the
//! cell's one version (so no history builds up under it), and a point lookup of that version
//! per read (`TsRange::at`, which an LSM answers through its bloom filters; a read of "the
//! newest version" would be a range read over every version the writes left). A ratio above 1
//! would mean the baseline is not the engine's fastest path. The Percolator side does the
//! same logical work as transactions: `begin` + `set` + `commit` (prewrite and commit of one
//! cell, two timestamps), and `begin` + `get` (a snapshot read: lock check, write record, data).
//! Rows are drawn uniformly from a preloaded key space, so contention is negligible.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_core::oracle::next_timestamp;
use percolator_core::{
    Client, Columns, Family, FamilyRead, Mutation, ReadRow, Result, RowMutation, RowStore,
    TimestampOracle, TsRange,
};
use rand::Rng as _;
use serde::Serialize;

/// Parameters of a run.
#[derive(Debug, Clone)]
pub struct MicroConfig {
    /// How long each measurement runs.
    pub duration: Duration,
    /// Client task counts to measure.
    pub clients: Vec<usize>,
    /// Distinct rows written and read.
    pub rows: usize,
    /// Cells per transaction for the multi-cell measurement.
    pub cells_per_txn: usize,
}

impl MicroConfig {
    /// The full run: 2 s per measurement.
    pub fn full() -> Self {
        Self {
            duration: Duration::from_secs(2),
            clients: vec![1, 2, 4, 8],
            rows: 10_000,
            cells_per_txn: 8,
        }
    }

    /// A smoke run: 0.2 s per measurement, 1 and 4 clients.
    pub fn quick() -> Self {
        Self {
            duration: Duration::from_millis(200),
            clients: vec![1, 4],
            rows: 1_000,
            cells_per_txn: 8,
        }
    }
}

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// What was measured.
    pub workload: String,
    /// Concurrent client tasks.
    pub clients: usize,
    /// Completed operations per second (transactions for the Percolator workloads).
    pub ops_per_sec: f64,
}

/// The micro run's result.
#[derive(Debug, Clone, Serialize)]
pub struct MicroReport {
    /// Backend name.
    pub backend: String,
    /// Every point.
    pub points: Vec<Point>,
    /// Percolator single-cell write ÷ raw write, per client count.
    pub write_ratio: Vec<(usize, f64)>,
    /// Snapshot read ÷ raw read, per client count.
    pub read_ratio: Vec<(usize, f64)>,
    /// Timestamps per second from one requester.
    pub oracle_single: f64,
    /// Timestamps per second from 64 concurrent requesters.
    pub oracle_concurrent: f64,
    /// Timestamps per second from 64 concurrent requesters asking for batches of
    /// [`ORACLE_BATCH`] (the paper's oracle batches requests the same way).
    pub oracle_batched: f64,
    /// Snapshot scans per second of [`HISTORY_ROWS`] rows whose cells were written once.
    pub scan_fresh_per_s: f64,
    /// The same scan after [`HISTORY_DEPTH`] versions per cell (no GC): a scan reads only the
    /// newest write records, so this should stay close to `scan_fresh_per_s`.
    pub scan_deep_per_s: f64,
}

/// Rows of the history-scan measurement.
pub const HISTORY_ROWS: usize = 200;
/// Versions per cell of the deep table in the history-scan measurement.
pub const HISTORY_DEPTH: usize = 100;

/// Timestamps per batched oracle request.
pub const ORACLE_BATCH: u64 = 64;

impl MicroReport {
    fn rate(&self, workload: &str, clients: usize) -> f64 {
        self.points
            .iter()
            .find(|p| p.workload == workload && p.clients == clients)
            .map_or(0.0, |p| p.ops_per_sec)
    }

    /// A markdown table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "| {} clients | raw write/s | txn write/s | ratio | raw read/s | snapshot read/s | ratio | 8-cell txn/s |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            self.backend
        );
        for (clients, w) in &self.write_ratio {
            let r = self
                .read_ratio
                .iter()
                .find(|(c, _)| c == clients)
                .map_or(0.0, |(_, r)| *r);
            out.push_str(&format!(
                "| {clients} | {:.0} | {:.0} | {w:.2} | {:.0} | {:.0} | {r:.2} | {:.0} |\n",
                self.rate(RAW_WRITE, *clients),
                self.rate(TXN_WRITE, *clients),
                self.rate(RAW_READ, *clients),
                self.rate(TXN_READ, *clients),
                self.rate(TXN_WRITE_MULTI, *clients),
            ));
        }
        out.push_str(&format!(
            "\noracle: {:.2} M timestamps/s from one requester, {:.2} M/s from 64, {:.2} M/s from 64 asking for batches of {ORACLE_BATCH}\n",
            self.oracle_single / 1e6,
            self.oracle_concurrent / 1e6,
            self.oracle_batched / 1e6
        ));
        out.push_str(&format!(
            "snapshot scan of {HISTORY_ROWS} rows: {:.0}/s with 1 version per cell, {:.0}/s with {HISTORY_DEPTH} (ratio {:.2})\n",
            self.scan_fresh_per_s,
            self.scan_deep_per_s,
            self.scan_deep_per_s / self.scan_fresh_per_s.max(1e-9)
        ));
        out
    }
}

/// Raw single-cell writes.
pub const RAW_WRITE: &str = "raw write";
/// Raw single-cell reads.
pub const RAW_READ: &str = "raw read";
/// Percolator single-cell write transactions.
pub const TXN_WRITE: &str = "txn write";
/// Percolator snapshot reads.
pub const TXN_READ: &str = "snapshot read";
/// Percolator multi-cell write transactions.
pub const TXN_WRITE_MULTI: &str = "8-cell txn";

const RAW_TABLE: &str = "bench_raw";
const TXN_TABLE: &str = "bench_txn";

fn row_key(i: usize) -> Bytes {
    Bytes::from(format!("row{i:08}"))
}

/// Runs `op` on `clients` tasks for `duration`; returns operations per second.
async fn closed_loop<F, Fut>(clients: usize, duration: Duration, op: F) -> Result<f64>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let began = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let (op, stop, done) = (Arc::clone(&op), Arc::clone(&stop), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                op().await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, percolator_core::Error>(())
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await
            .map_err(|e| percolator_core::Error::Application(format!("bench task: {e}")))??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / began.elapsed().as_secs_f64())
}

/// The one version the raw baseline writes and reads of each cell.
pub const RAW_TS: u64 = 1;

/// The raw baseline's write: one unconditional put of a 16-byte value into `row` at `ts`
/// ([`RAW_TS`] in the measurements: an overwrite of the cell's one version).
pub fn raw_put(row: Bytes, ts: u64) -> RowMutation {
    RowMutation {
        table: Bytes::from_static(RAW_TABLE.as_bytes()),
        row,
        conditions: Vec::new(),
        mutations: vec![Mutation::Put {
            family: Family::Data,
            column: Bytes::from_static(b"v"),
            ts,
            value: Bytes::from_static(b"0123456789abcdef"),
        }],
    }
}

/// Runs every micro measurement on `store`, with the store's shared local oracle.
pub async fn run<S: RowStore>(store: Arc<S>, config: &MicroConfig) -> Result<MicroReport> {
    run_with_oracle(store, None, config).await
}

/// Runs every micro measurement on `store`, taking timestamps from `oracle` if given (PD's TSO
/// for TiKV).
pub async fn run_with_oracle<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    config: &MicroConfig,
) -> Result<MicroReport> {
    // The benchmark is the only process on its store: without a shared oracle, the local one.
    let builder = match oracle {
        Some(oracle) => Client::builder(Arc::clone(&store)).oracle(oracle),
        None => Client::builder(Arc::clone(&store)).local_oracle(),
    };
    let client = builder.build().await?;
    let rows = config.rows.max(1);
    // Preload both key spaces so that reads find data.
    for chunk in (0..rows).collect::<Vec<_>>().chunks(256) {
        let batch = chunk.iter().map(|&i| raw_put(row_key(i), RAW_TS)).collect();
        store.mutate_rows(batch).await?;
        let mut txn = client.begin().await?;
        for &i in chunk {
            txn.set(TXN_TABLE, row_key(i), "v", "0123456789abcdef")?;
        }
        txn.commit().await?;
    }
    let mut points = Vec::new();
    for &clients in &config.clients {
        let s = Arc::clone(&store);
        let raw_write = closed_loop(clients, config.duration, move || {
            let s = Arc::clone(&s);
            async move {
                let row = row_key(rand::rng().random_range(0..rows));
                s.mutate_rows(vec![raw_put(row, RAW_TS)]).await?;
                Ok(())
            }
        })
        .await?;
        let s = Arc::clone(&store);
        let raw_read = closed_loop(clients, config.duration, move || {
            let s = Arc::clone(&s);
            async move {
                let row = row_key(rand::rng().random_range(0..rows));
                s.read_row(ReadRow {
                    snapshot_ts: None,
                    table: Bytes::from_static(RAW_TABLE.as_bytes()),
                    row,
                    reads: vec![
                        FamilyRead::all(Family::Data)
                            .columns(Columns::one(Bytes::from_static(b"v")))
                            .ts(TsRange::at(RAW_TS)),
                    ],
                })
                .await?;
                Ok(())
            }
        })
        .await?;
        let txn_write = txn_writes(&client, clients, config.duration, rows, 1).await?;
        let c = client.clone();
        let txn_read = closed_loop(clients, config.duration, move || {
            let c = c.clone();
            async move {
                let row = row_key(rand::rng().random_range(0..rows));
                let txn = c.begin().await?;
                txn.get(TXN_TABLE, row, "v").await?;
                Ok(())
            }
        })
        .await?;
        let multi = txn_writes(
            &client,
            clients,
            config.duration,
            rows,
            config.cells_per_txn,
        )
        .await?;
        for (workload, rate) in [
            (RAW_WRITE, raw_write),
            (RAW_READ, raw_read),
            (TXN_WRITE, txn_write),
            (TXN_READ, txn_read),
            (TXN_WRITE_MULTI, multi),
        ] {
            points.push(Point {
                workload: workload.into(),
                clients,
                ops_per_sec: rate,
            });
        }
    }
    let (scan_fresh_per_s, scan_deep_per_s) = history_scans(&client, config.duration).await?;
    // The oracle last, after the client is shut down: pulling hundreds of millions of
    // timestamps a second (over 2^18 per millisecond) runs oracle time ahead of the clock by
    // seconds, and the client's worker lease, judged in oracle time, would lapse under its
    // transactions.
    let oracle = Arc::clone(client.oracle());
    client.shutdown().await?;
    let oracle_single = oracle_rate(&oracle, 1, 1, config.duration).await?;
    let oracle_concurrent = oracle_rate(&oracle, 64, 1, config.duration).await?;
    let oracle_batched = oracle_rate(&oracle, 64, ORACLE_BATCH, config.duration).await?;
    let mut report = MicroReport {
        backend: store.name().to_owned(),
        points,
        write_ratio: Vec::new(),
        read_ratio: Vec::new(),
        oracle_single,
        oracle_concurrent,
        oracle_batched,
        scan_fresh_per_s,
        scan_deep_per_s,
    };
    for &clients in &config.clients {
        let ratio = |a: &str, b: &str| report.rate(a, clients) / report.rate(b, clients).max(1e-9);
        let (w, r) = (ratio(TXN_WRITE, RAW_WRITE), ratio(TXN_READ, RAW_READ));
        report.write_ratio.push((clients, w));
        report.read_ratio.push((clients, r));
    }
    Ok(report)
}

/// Snapshot scans per second of a table written once and of one with [`HISTORY_DEPTH`] versions
/// of every cell (each version one transaction over every row).
async fn history_scans<S: RowStore>(client: &Client<S>, duration: Duration) -> Result<(f64, f64)> {
    for (table, depth) in [(HISTORY_FRESH, 1), (HISTORY_DEEP, HISTORY_DEPTH)] {
        for version in 0..depth {
            let mut txn = client.begin().await?;
            for row in 0..HISTORY_ROWS {
                txn.set(
                    table,
                    row_key(row),
                    "v",
                    format!("version {version:04} of this cell"),
                )?;
            }
            txn.commit().await?;
        }
    }
    let mut rates = [0.0; 2];
    for (rate, table) in rates.iter_mut().zip([HISTORY_FRESH, HISTORY_DEEP]) {
        let c = client.clone();
        *rate = closed_loop(1, duration, move || {
            let c = c.clone();
            async move {
                let txn = c.begin().await?;
                let items = txn.scan::<&str>(table, .., Columns::All).await?;
                if items.len() != HISTORY_ROWS {
                    return Err(percolator_core::Error::Corrupt(format!(
                        "history scan of {table} saw {} cells, expected {HISTORY_ROWS}",
                        items.len()
                    )));
                }
                Ok(())
            }
        })
        .await?;
    }
    Ok((rates[0], rates[1]))
}

const HISTORY_FRESH: &str = "history_1";
const HISTORY_DEEP: &str = "history_100";

/// Write transactions of `cells` random cells each, per second. A (rare) conflict counts as an
/// attempt, like a lost race would in a real workload.
async fn txn_writes<S: RowStore>(
    client: &Client<S>,
    clients: usize,
    duration: Duration,
    rows: usize,
    cells: usize,
) -> Result<f64> {
    let c = client.clone();
    closed_loop(clients, duration, move || {
        let c = c.clone();
        async move {
            let mut txn = c.begin().await?;
            for _ in 0..cells {
                let row = row_key(rand::rng().random_range(0..rows));
                txn.set(TXN_TABLE, row, "v", "0123456789abcdef")?;
            }
            match txn.commit().await {
                Ok(_) => Ok(()),
                Err(e) if e.is_retryable() => Ok(()),
                Err(e) => Err(e),
            }
        }
    })
    .await
}

/// Timestamps per second from `requesters` concurrent tasks, each asking for `batch` at a time
/// in a tight loop (1 000 requests per loop iteration to keep the counting off the
/// measurement). Single requests take the path transactions take ([`next_timestamp`]).
async fn oracle_rate(
    oracle: &Arc<dyn TimestampOracle>,
    requesters: usize,
    batch: u64,
    duration: Duration,
) -> Result<f64> {
    let o = Arc::clone(oracle);
    let loops = closed_loop(requesters, duration, move || {
        let o = Arc::clone(&o);
        async move {
            for _ in 0..1000 {
                if batch == 1 {
                    next_timestamp(o.as_ref()).await?;
                } else {
                    o.timestamps(batch).await?;
                }
            }
            Ok(())
        }
    })
    .await?;
    Ok(loops * 1000.0 * batch as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_workload_is_measured() {
        let store = Arc::new(percolator_backend_mem::MemStore::new());
        let config = MicroConfig {
            duration: Duration::from_millis(30),
            clients: vec![1, 2],
            rows: 50,
            cells_per_txn: 4,
        };
        let report = run(store, &config).await.unwrap();
        assert_eq!(report.points.len(), 2 * 5);
        assert!(
            report.points.iter().all(|p| p.ops_per_sec > 0.0),
            "{report:?}"
        );
        assert!(report.write_ratio.iter().all(|(_, r)| *r > 0.0));
        assert!(report.oracle_single > 0.0 && report.oracle_concurrent > 0.0);
        assert!(report.oracle_batched > 0.0);
        assert!(report.table().contains("| 2 |"));
    }
}
