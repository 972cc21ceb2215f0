//! The analysis printed after the sweep: tpsE against linear scaling from the fewest servers at
//! the fixed client count, where it stops being within 20% of linear, and why — read from the
//! measured utilisations, conflicts, backlog and CPU of each point, never assumed.

use serde::Serialize;

use super::sweep::{Figure9Config, PointReport};
use super::window::TableOps;

/// Within this fraction of linear counts as linear (the target: 20%).
pub const LINEAR_WITHIN: f64 = 0.2;

/// A resource this busy is saturated.
const SATURATED: f64 = 0.8;

/// One server count of the servers sweep against linear scaling.
#[derive(Debug, Clone, Serialize)]
pub struct LinearPoint {
    /// Servers.
    pub servers: usize,
    /// Measured tpsE.
    pub tps_e: f64,
    /// The first point's tpsE × servers ÷ its servers.
    pub linear_tps_e: f64,
    /// `tps_e / linear_tps_e`.
    pub ratio: f64,
    /// Measured committed TPC-E transactions per second.
    pub txns_per_sec: f64,
    /// The same ratio for transactions per second (every type of the mix).
    pub txn_ratio: f64,
    /// What limited this point, from its measurements.
    pub limits: Vec<String>,
}

/// Linearity, the bend and its causes.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// The clients of the servers sweep.
    pub clients: usize,
    /// The servers sweep, by servers.
    pub points: Vec<LinearPoint>,
    /// The most servers up to which every point is within 20% of linear.
    pub linear_up_to: Option<usize>,
    /// The ratio to linear at 16 servers, if measured.
    pub ratio_at_16: Option<f64>,
    /// The first server count below 80% of linear, if any.
    pub bend_at: Option<usize>,
    /// What limited the point at the bend (or the last point, when there is no bend).
    pub why: Vec<String>,
    /// The conclusions, one line each, as printed.
    pub conclusion: Vec<String>,
}

/// What limited `p`, from its measurements (`base`: the first point of the servers sweep).
pub fn limits(p: &PointReport, base: &PointReport, cores: usize) -> Vec<String> {
    let w = &p.window;
    let mut out = Vec::new();
    if w.server_utilisation >= SATURATED {
        out.push(format!(
            "the data servers ({:.0}% busy on average)",
            100.0 * w.server_utilisation
        ));
    }
    if w.busiest_server_utilisation >= 0.9
        && w.server_utilisation <= 0.85 * w.busiest_server_utilisation
    {
        let tables: Vec<String> = w
            .busiest_server_tables
            .iter()
            .map(|t| format!("{} {:.0}%", t.table, 100.0 * t.share))
            .collect();
        out.push(format!(
            "hot rows: the busiest server is {:.0}% busy, the mean {:.0}%, and a batch waits for \
             its slowest server (its operations by table: {})",
            100.0 * w.busiest_server_utilisation,
            100.0 * w.server_utilisation,
            tables.join(", ")
        ));
    }
    if w.oracle_utilisation >= SATURATED {
        out.push(format!(
            "the timestamp oracle ({:.0}% busy)",
            100.0 * w.oracle_utilisation
        ));
    }
    if let Some(cpu) = w.process_cpu_cores
        && cpu >= 0.85 * cores as f64
    {
        out.push(format!(
            "this process's CPU ({cpu:.2} of {cores} cores; {:.2} ms of CPU per transaction)",
            p.cpu_ms_per_txn.unwrap_or(0.0)
        ));
    }
    if let (Some(machine), Some(process)) = (w.machine_cpu_cores, w.process_cpu_cores)
        && machine - process >= 0.3
    {
        out.push(format!(
            "other processes on this machine ({:.2} cores besides this process's {process:.2}): \
             the timings are disturbed",
            machine - process
        ));
    }
    if w.mean_timer_late_ms >= 1.5 {
        out.push(format!(
            "late timers (requests woke {:.1} ms after their service ended, on average): the \
             process cannot keep up with its simulated requests",
            w.mean_timer_late_ms
        ));
    }
    if p.conflict_rate >= 0.05 && p.conflict_rate >= 2.0 * base.conflict_rate {
        out.push(format!(
            "conflicts ({:.1}% of attempts retried; {:.1}% at {} server(s))",
            100.0 * p.conflict_rate,
            100.0 * base.conflict_rate,
            base.servers
        ));
    }
    if base.row_ops_per_txn > 0.0 && p.row_ops_per_txn >= 1.25 * base.row_ops_per_txn {
        out.push(format!(
            "more work per transaction ({:.1} row operations, {:.1} at {} server(s)){}",
            p.row_ops_per_txn,
            base.row_ops_per_txn,
            base.servers,
            grown_most(p, base)
                .map(|g| format!(", mostly {g}"))
                .unwrap_or_default()
        ));
    }
    let share = |p: &PointReport| p.tps_e / p.txns_per_sec.max(1e-9);
    if share(base) > 0.0 && share(p) < 0.9 * share(base) {
        out.push(format!(
            "fewer Trade-Results per transaction ({:.1}% of the transactions, {:.1}% at {} \
             server(s)): tpsE grows slower than the transactions",
            100.0 * share(p),
            100.0 * share(base),
            base.servers
        ));
    }
    let (orders, results) = (
        w.kind_per_sec("Trade-Order"),
        w.kind_per_sec("Trade-Result"),
    );
    if orders > 0.0 && results < 0.8 * orders {
        out.push(format!(
            "the market emulator (the workers' Trade-Result observers, {} workers) falls behind: \
             {results:.1} Trade-Results/s against {orders:.1} Trade-Orders/s ({} trades queued \
             at the end)",
            p.workers, p.backlog_at_end
        ));
    }
    if out.is_empty() {
        out.push(format!(
            "nothing saturated: {} clients keep {:.0} requests in flight at {:.1} ms each \
             (queueing {:.2} ms), so the offered load, not the cluster, sets the throughput",
            p.clients, w.requests_in_flight, w.mean_request_ms, w.mean_queue_wait_ms
        ));
    }
    out
}

/// The table and kind of row operation whose count per transaction grew the most from `base`
/// to `p`, described.
fn grown_most(p: &PointReport, base: &PointReport) -> Option<String> {
    type Rate = fn(&TableOps) -> f64;
    const KINDS: [(&str, Rate); 4] = [
        ("row reads", |t| t.reads_per_sec),
        ("row writes", |t| t.writes_per_sec),
        ("rows scanned", |t| t.scanned_rows_per_sec),
        ("empty scans", |t| t.empty_scans_per_sec),
    ];
    let per_txn = |point: &PointReport, table: &str, rate: Rate| {
        let ops = point
            .window
            .tables
            .iter()
            .find(|t| t.table == table)
            .map_or(0.0, rate);
        ops / point.window.txns_per_sec.max(1e-9)
    };
    p.window
        .tables
        .iter()
        .flat_map(|t| {
            KINDS.iter().map(|(what, rate)| {
                let (now, before) = (per_txn(p, &t.table, *rate), per_txn(base, &t.table, *rate));
                (
                    now - before,
                    format!("{what} in {} ({before:.1} → {now:.1})", t.table),
                )
            })
        })
        .filter(|(grew, _)| *grew > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, what)| what)
}

/// Analyses the points of a sweep of `config` on a machine of `cores` cores.
pub fn analyse(points: &[PointReport], config: &Figure9Config, cores: usize) -> Analysis {
    let clients = config.clients_at_scale.max(1);
    let mut line: Vec<&PointReport> = points.iter().filter(|p| p.clients == clients).collect();
    line.sort_by_key(|p| p.servers);
    let mut analysis = Analysis {
        clients,
        points: Vec::new(),
        linear_up_to: None,
        ratio_at_16: None,
        bend_at: None,
        why: Vec::new(),
        conclusion: Vec::new(),
    };
    let Some(base) = line.first().copied() else {
        analysis.conclusion.push(format!(
            "No point at {clients} clients: nothing to compare."
        ));
        return analysis;
    };
    for p in &line {
        let scale = p.servers as f64 / base.servers as f64;
        let linear = base.tps_e * scale;
        let linear_txns = base.txns_per_sec * scale;
        analysis.points.push(LinearPoint {
            servers: p.servers,
            tps_e: p.tps_e,
            linear_tps_e: linear,
            ratio: if linear > 0.0 { p.tps_e / linear } else { 0.0 },
            txns_per_sec: p.txns_per_sec,
            txn_ratio: if linear_txns > 0.0 {
                p.txns_per_sec / linear_txns
            } else {
                0.0
            },
            limits: limits(p, base, cores),
        });
    }
    let within = |lp: &LinearPoint| lp.ratio >= 1.0 - LINEAR_WITHIN;
    let bend = analysis.points.iter().position(|lp| !within(lp));
    analysis.bend_at = bend.map(|i| analysis.points[i].servers);
    analysis.linear_up_to = match bend {
        Some(0) => None,
        Some(i) => Some(analysis.points[i - 1].servers),
        None => analysis.points.last().map(|lp| lp.servers),
    };
    analysis.ratio_at_16 = analysis
        .points
        .iter()
        .find(|lp| lp.servers == 16)
        .map(|lp| lp.ratio);
    let judged = bend.unwrap_or(analysis.points.len().saturating_sub(1));
    analysis.why = analysis
        .points
        .get(judged)
        .map(|lp| lp.limits.clone())
        .unwrap_or_default();
    analysis.conclusion = conclude(&analysis, base, points, config, cores);
    analysis
}

/// The resources that stayed below saturation at every point, with their highest use: what
/// did not bend the curve.
fn never_the_limit(points: &[PointReport], cores: usize) -> Option<String> {
    let busiest = |f: fn(&PointReport) -> f64| {
        points
            .iter()
            .max_by(|a, b| f(a).total_cmp(&f(b)))
            .map(|p| (f(p), p.servers, p.clients))
    };
    let mut calm = Vec::new();
    if let Some((cpu, s, c)) = busiest(|p| p.window.process_cpu_cores.unwrap_or(0.0))
        && cpu > 0.0
        && cpu < 0.85 * cores as f64
    {
        calm.push(format!(
            "this process's CPU (at most {cpu:.2} of {cores} cores, at {s} servers and {c} \
             clients)"
        ));
    }
    if let Some((oracle, _, _)) = busiest(|p| p.window.oracle_utilisation)
        && oracle < SATURATED
    {
        calm.push(format!(
            "the timestamp oracle (at most {:.0}% busy)",
            100.0 * oracle
        ));
    }
    if let Some((rate, _, _)) = busiest(|p| p.conflict_rate)
        && rate < 0.05
    {
        calm.push(format!(
            "conflicts (at most {:.1}% of attempts retried)",
            100.0 * rate
        ));
    }
    (!calm.is_empty()).then(|| format!("Never the limit here: {}.", calm.join("; ")))
}

fn conclude(
    analysis: &Analysis,
    base: &PointReport,
    points: &[PointReport],
    config: &Figure9Config,
    cores: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let clients = analysis.clients;
    if base.tps_e <= 0.0 {
        out.push(format!(
            "No Trade-Result completed at {} server(s) and {clients} clients: no base for \
             linearity (lengthen the points).",
            base.servers
        ));
        return out;
    }
    out.push(format!(
        "At {clients} clients, {} server(s) give {:.1} tpsE; what limits them: {}.",
        base.servers,
        base.tps_e,
        analysis
            .points
            .first()
            .map(|lp| lp.limits.join("; "))
            .unwrap_or_default()
    ));
    let at_16 = analysis.points.iter().find(|lp| lp.servers == 16);
    match (analysis.ratio_at_16, at_16) {
        (Some(r), Some(lp)) => out.push(format!(
            "{} {:.0}% of linear from {} to 16 servers: tpsE {:.1} → {:.1}, {r:.2} of linear \
             (all transactions: {:.2}).",
            if r >= 1.0 - LINEAR_WITHIN {
                "Within"
            } else {
                "Not within"
            },
            100.0 * LINEAR_WITHIN,
            base.servers,
            base.tps_e,
            lp.tps_e,
            lp.txn_ratio
        )),
        _ => out.push("16 servers were not measured.".into()),
    }
    let describe = |lp: &LinearPoint| {
        format!(
            "{} servers: {:.1} tpsE, {:.2} of linear; all transactions {:.2} of linear",
            lp.servers, lp.tps_e, lp.ratio, lp.txn_ratio
        )
    };
    match analysis.bend_at {
        Some(servers) => {
            let lp = analysis.points.iter().find(|lp| lp.servers == servers);
            out.push(format!(
                "Stops being linear at {} ({}); it is limited there by {}.",
                lp.map(describe).unwrap_or_default(),
                match analysis.linear_up_to {
                    Some(up_to) => format!("linear up to {up_to}"),
                    None => "never linear".into(),
                },
                analysis.why.join("; ")
            ));
        }
        None => out.push(format!(
            "Linear over the whole sweep (last point {}); there it is limited by {}.",
            analysis.points.last().map(describe).unwrap_or_default(),
            analysis.why.join("; ")
        )),
    }
    if let Some(lp) = analysis
        .points
        .iter()
        .find(|lp| lp.ratio > 1.0 + LINEAR_WITHIN)
        && let Some(p) = points
            .iter()
            .find(|p| p.servers == lp.servers && p.clients == clients)
    {
        let share = |p: &PointReport| p.tps_e / p.txns_per_sec.max(1e-9);
        out.push(format!(
            "Above linear at {} servers ({:.2}): there a transaction cost {:.1} row operations \
             against {:.1} at {} server(s), and Trade-Results were {:.1}% of the transactions \
             against {:.1}%.",
            lp.servers,
            lp.ratio,
            p.row_ops_per_txn,
            base.row_ops_per_txn,
            base.servers,
            100.0 * share(p),
            100.0 * share(base)
        ));
    }
    out.extend(never_the_limit(points, cores));
    for &servers in &config.client_sweep_servers {
        let mut sweep: Vec<&PointReport> = points.iter().filter(|p| p.servers == servers).collect();
        sweep.sort_by_key(|p| p.clients);
        let best = sweep.iter().map(|p| p.tps_e).fold(0.0, f64::max);
        if sweep.len() < 2 || best <= 0.0 {
            continue;
        }
        let knee = sweep
            .iter()
            .find(|p| p.tps_e >= 0.9 * best)
            .map(|p| p.clients);
        let list: Vec<String> = sweep
            .iter()
            .map(|p| format!("{} → {:.1}", p.clients, p.tps_e))
            .collect();
        out.push(format!(
            "{servers} server(s), clients → tpsE: {}; 90% of the best from {} clients.",
            list.join(", "),
            knee.unwrap_or(0)
        ));
    }
    out
}
