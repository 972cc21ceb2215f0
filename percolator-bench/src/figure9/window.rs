//! [`Window`]: what the TPC-E mix, the simulated cluster and this process did between two
//! samples — the figures each point of the sweep reports and the analysis reads.

use std::sync::atomic::Ordering;

use serde::Serialize;

use super::model::{ClusterModel, ModelSnapshot, OpKind};
use crate::tpce::frames::TxnKind;
use crate::tpce::stats::Stats;
use crate::webindex::scale::cpu_seconds;

/// What the TPC-E mix, the simulated cluster and this process did in the measured window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Window {
    /// Its length.
    pub secs: f64,
    /// Trade-Results per second.
    pub tps_e: f64,
    /// Committed TPC-E transactions per second (the mix's types, Trade-Result included).
    pub txns_per_sec: f64,
    /// Committed per second by type, TPC-E order (the measured mix).
    pub kinds: Vec<KindRate>,
    /// Attempts beyond the first (conflicts retried), every type, the market emulator's
    /// included.
    pub retries: u64,
    /// Retries per attempt.
    pub conflict_rate: f64,
    /// Transactions given up.
    pub failed: u64,
    /// Work done by the data servers ÷ (window × servers).
    pub server_utilisation: f64,
    /// The busiest data server's work ÷ window (hot rows show here).
    pub busiest_server_utilisation: f64,
    /// The tables with the most row operations on the busiest server, and their share of its
    /// operations.
    pub busiest_server_tables: Vec<TableShare>,
    /// The oracle's work ÷ window.
    pub oracle_utilisation: f64,
    /// Row operations served per second, all servers.
    pub row_ops_per_sec: f64,
    /// Data-server requests (calls of the store) per second.
    pub requests_per_sec: f64,
    /// Row reads per second (`read_row`, items of `read_rows`).
    pub read_ops_per_sec: f64,
    /// Row mutations per second.
    pub write_ops_per_sec: f64,
    /// Rows returned by scans per second.
    pub scan_row_ops_per_sec: f64,
    /// Scans that returned nothing, per second (the lock-family check of a transactional
    /// scan, an observer's idle notify scan): each costs one row operation.
    pub empty_scans_per_sec: f64,
    /// The same by table, the busiest first.
    pub tables: Vec<TableOps>,
    /// Oracle requests per second.
    pub oracle_requests_per_sec: f64,
    /// Mean time a data-server request queued behind others, per server it touched, ms.
    pub mean_queue_wait_ms: f64,
    /// Mean data-server request latency as the caller saw it (round trip, queueing, service,
    /// late timers), ms.
    pub mean_request_ms: f64,
    /// Data-server requests in flight on average (Little's law: requests/s × latency).
    pub requests_in_flight: f64,
    /// Mean time the timer woke a request after its service finished, ms: the simulation's own
    /// error (tokio's timer has a resolution of 1 ms, and a busy process wakes later).
    pub mean_timer_late_ms: f64,
    /// CPU seconds this process used per second of the window (Linux; `None` elsewhere).
    pub process_cpu_cores: Option<f64>,
    /// CPU seconds the whole machine used per second of the window (Linux): what is above
    /// [`Self::process_cpu_cores`] was other processes', which disturb the timings.
    pub machine_cpu_cores: Option<f64>,
}

/// One transaction type's committed rate.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KindRate {
    /// TPC-E name.
    pub name: String,
    /// Committed per second.
    pub per_sec: f64,
}

/// One table's row operations per second in a window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableOps {
    /// The table.
    pub table: String,
    /// Row reads per second.
    pub reads_per_sec: f64,
    /// Row mutations per second.
    pub writes_per_sec: f64,
    /// Rows returned by scans per second.
    pub scanned_rows_per_sec: f64,
    /// Scans that returned nothing, per second.
    pub empty_scans_per_sec: f64,
}

impl TableOps {
    /// Every row operation per second.
    pub fn total(&self) -> f64 {
        self.reads_per_sec
            + self.writes_per_sec
            + self.scanned_rows_per_sec
            + self.empty_scans_per_sec
    }
}

/// A table's share of one server's row operations.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableShare {
    /// The table.
    pub table: String,
    /// Its share, 0 to 1.
    pub share: f64,
}

/// Everything a window is the difference of, at one instant.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    model: ModelSnapshot,
    cpu: Option<f64>,
    machine_cpu: Option<f64>,
    /// Per [`TxnKind`]: committed, attempts, failed.
    kinds: Vec<[u64; 3]>,
    emulator_conflicts: u64,
}

impl Sample {
    /// The totals now; `emulator_conflicts`: the engine's count of Trade-Result retries.
    pub(crate) fn take(model: &ClusterModel, stats: &Stats, emulator_conflicts: u64) -> Self {
        Self {
            model: model.snapshot(),
            cpu: cpu_seconds(),
            machine_cpu: machine_cpu_seconds(),
            kinds: TxnKind::ALL
                .iter()
                .map(|k| {
                    let s = stats.of(*k);
                    [
                        s.committed.load(Ordering::Relaxed),
                        s.attempts.load(Ordering::Relaxed),
                        s.failed.load(Ordering::Relaxed),
                    ]
                })
                .collect(),
            emulator_conflicts,
        }
    }
}

impl Window {
    /// The window between two samples.
    pub(crate) fn between(first: &Sample, second: &Sample) -> Self {
        let (a, b) = (&first.model, &second.model);
        let secs = b.at.saturating_duration_since(a.at).as_secs_f64().max(1e-9);
        let servers: Vec<_> = b
            .servers
            .iter()
            .zip(&a.servers)
            .map(|(b, a)| b.since(a))
            .collect();
        let busy: Vec<f64> = servers.iter().map(|s| s.booked.as_secs_f64()).collect();
        let busiest = (0..busy.len())
            .max_by(|&i, &j| busy[i].total_cmp(&busy[j]))
            .unwrap_or(0);
        let requests: u64 = servers.iter().map(|s| s.requests).sum();
        let ops: u64 = servers.iter().map(|s| s.ops).sum();
        let waited: f64 = servers.iter().map(|s| s.waited.as_secs_f64()).sum();
        let oracle = b.oracle.since(&a.oracle);
        let timed = b.timed.saturating_sub(a.timed);
        let latency = b.latency.saturating_sub(a.latency).as_secs_f64();
        let wakes = b.wakes.saturating_sub(a.wakes);
        let late = b.late.saturating_sub(a.late).as_secs_f64();
        let ratio = |x: f64, n: u64| if n == 0 { 0.0 } else { x / n as f64 };
        let tables = table_rates(a, b, secs);
        let kind = |k: OpKind| -> f64 {
            tables
                .iter()
                .map(|t| match k {
                    OpKind::Read => t.reads_per_sec,
                    OpKind::Write => t.writes_per_sec,
                    OpKind::ScanRow => t.scanned_rows_per_sec,
                    OpKind::EmptyScan => t.empty_scans_per_sec,
                })
                .sum()
        };
        // The mix's transactions, as the TPC-E driver counts them.
        let delta = |k: TxnKind, field: usize| {
            second.kinds[k.index()][field].saturating_sub(first.kinds[k.index()][field])
        };
        let mix = TxnKind::ALL.iter().filter(|k| k.target_percent() > 0.0);
        let committed: u64 = mix.clone().map(|k| delta(*k, 0)).sum();
        let all = TxnKind::ALL.iter();
        let failed: u64 = all.clone().map(|k| delta(*k, 2)).sum();
        let attempts: u64 = all.clone().map(|k| delta(*k, 1)).sum::<u64>()
            + second
                .emulator_conflicts
                .saturating_sub(first.emulator_conflicts);
        let done: u64 = all.clone().map(|k| delta(*k, 0)).sum::<u64>() + failed;
        let retries = attempts.saturating_sub(done);
        Self {
            secs,
            tps_e: delta(TxnKind::TradeResult, 0) as f64 / secs,
            txns_per_sec: committed as f64 / secs,
            kinds: all
                .map(|k| KindRate {
                    name: k.name().to_owned(),
                    per_sec: delta(*k, 0) as f64 / secs,
                })
                .collect(),
            retries,
            conflict_rate: ratio(retries as f64, attempts),
            failed,
            server_utilisation: busy.iter().sum::<f64>() / (secs * busy.len().max(1) as f64),
            busiest_server_utilisation: busy.get(busiest).copied().unwrap_or(0.0) / secs,
            busiest_server_tables: shares_at(a, b, busiest),
            oracle_utilisation: oracle.booked.as_secs_f64() / secs,
            row_ops_per_sec: ops as f64 / secs,
            requests_per_sec: timed as f64 / secs,
            read_ops_per_sec: kind(OpKind::Read),
            write_ops_per_sec: kind(OpKind::Write),
            scan_row_ops_per_sec: kind(OpKind::ScanRow),
            empty_scans_per_sec: kind(OpKind::EmptyScan),
            tables,
            oracle_requests_per_sec: oracle.requests as f64 / secs,
            mean_queue_wait_ms: 1e3 * ratio(waited, requests),
            mean_request_ms: 1e3 * ratio(latency, timed),
            requests_in_flight: latency / secs,
            mean_timer_late_ms: 1e3 * ratio(late, wakes),
            process_cpu_cores: match (first.cpu, second.cpu) {
                (Some(a), Some(b)) => Some((b - a).max(0.0) / secs),
                _ => None,
            },
            machine_cpu_cores: match (first.machine_cpu, second.machine_cpu) {
                (Some(a), Some(b)) => Some((b - a).max(0.0) / secs),
                _ => None,
            },
        }
    }

    /// Committed per second of the type named `name` (0 if none).
    pub fn kind_per_sec(&self, name: &str) -> f64 {
        self.kinds
            .iter()
            .find(|k| k.name == name)
            .map_or(0.0, |k| k.per_sec)
    }
}

/// CPU seconds every core of the machine has spent busy (`/proc/stat`'s first line: all but
/// idle and I/O wait, in USER_HZ, 100 a second on Linux).
fn machine_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .map(|t| t.parse().unwrap_or(0))
        .collect();
    let all: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    Some(all.saturating_sub(idle) as f64 / 100.0)
}

/// Each table's row operations per second between `a` and `b`, the busiest first.
fn table_rates(a: &ModelSnapshot, b: &ModelSnapshot, secs: f64) -> Vec<TableOps> {
    let mut tables: Vec<TableOps> = b
        .tables
        .keys()
        .map(|table| {
            let (now, before) = (b.table_ops(table), a.table_ops(table));
            let rate = |k: OpKind| now[k as usize].saturating_sub(before[k as usize]) as f64 / secs;
            TableOps {
                table: table.clone(),
                reads_per_sec: rate(OpKind::Read),
                writes_per_sec: rate(OpKind::Write),
                scanned_rows_per_sec: rate(OpKind::ScanRow),
                empty_scans_per_sec: rate(OpKind::EmptyScan),
            }
        })
        .filter(|t| t.total() > 0.0)
        .collect();
    tables.sort_by(|x, y| y.total().total_cmp(&x.total()));
    tables
}

/// The three tables with the most row operations at `server` between `a` and `b`, with their
/// shares.
fn shares_at(a: &ModelSnapshot, b: &ModelSnapshot, server: usize) -> Vec<TableShare> {
    let ops: Vec<(String, u64)> = b
        .tables
        .keys()
        .map(|table| {
            let n = b
                .table_ops_at(table, server)
                .saturating_sub(a.table_ops_at(table, server));
            (table.clone(), n)
        })
        .collect();
    let total: u64 = ops.iter().map(|(_, n)| n).sum();
    let mut shares: Vec<TableShare> = ops
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(table, n)| TableShare {
            table,
            share: n as f64 / total.max(1) as f64,
        })
        .collect();
    shares.sort_by(|x, y| y.share.total_cmp(&x.share));
    shares.truncate(3);
    shares
}
