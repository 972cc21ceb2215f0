//! The markdown table `percolator-bench figure9` prints: every point, then the analysis's
//! conclusions (`cargo xtask bench` renders the same from the JSON).

use super::sweep::Figure9Report;
use super::window::Window;

impl Figure9Report {
    /// A markdown table of every point, then the conclusions.
    pub fn table(&self) -> String {
        let mut out = format!(
            "## Figure 9 in simulation: TPC-E tpsE against simulated server capacity\n\nRound trip \
             {:.2} ms, {:.3} ms per row operation, oracle {:.3} ms per request, {} commits, {} \
             customers, {:.1} s measured per point after {:.1} s of warm-up (longer on fewer \
             than {} servers), one worker per {} clients, this process on {} cores.\n\n\
             | servers | clients | workers | capacity (row ops/s) | tpsE | txn/s | ÷ linear \
             | servers busy (mean / max) | oracle busy | row ops per txn | conflict rate \
             | CPU cores (process / machine) | CPU ms per txn | request ms | timer late ms |\n\
             |---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
            self.rtt_ms,
            self.service_ms,
            self.oracle_service_ms,
            if self.one_phase {
                "one-phase where possible"
            } else {
                "two-phase"
            },
            self.customers,
            self.secs_per_point,
            self.warmup_secs,
            self.full_speed_servers,
            self.clients_per_worker,
            self.cores
        );
        for p in &self.points {
            let ratio = self
                .analysis
                .points
                .iter()
                .find(|lp| lp.servers == p.servers && p.clients == self.analysis.clients)
                .map_or("–".to_owned(), |lp| format!("{:.2}", lp.ratio));
            let w = &p.window;
            out.push_str(&format!(
                "| {} | {} | {} | {:.0} | {:.1} | {:.0} | {ratio} | {:.0}% / {:.0}% | {:.0}% \
                 | {:.1} | \
                 {:.3} | {} | {} | {:.1} | {:.2} |\n",
                p.servers,
                p.clients,
                p.workers,
                p.capacity_ops_per_sec,
                p.tps_e,
                p.txns_per_sec,
                100.0 * w.server_utilisation,
                100.0 * w.busiest_server_utilisation,
                100.0 * w.oracle_utilisation,
                p.row_ops_per_txn,
                p.conflict_rate,
                cpu(w),
                p.cpu_ms_per_txn
                    .map_or("–".to_owned(), |c| format!("{c:.2}")),
                w.mean_request_ms,
                w.mean_timer_late_ms,
            ));
        }
        out.push('\n');
        for line in &self.analysis.conclusion {
            out.push_str(&format!("- {line}\n"));
        }
        out
    }
}

/// `process / machine` CPU cores, or `–` where unmeasured.
fn cpu(w: &Window) -> String {
    let show = |c: Option<f64>| c.map_or("–".to_owned(), |c| format!("{c:.2}"));
    format!(
        "{} / {}",
        show(w.process_cpu_cores),
        show(w.machine_cpu_cores)
    )
}
