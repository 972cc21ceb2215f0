//! The paper's Figure 9 in simulation (`percolator-bench figure9`): the TPC-E-style benchmark
//! over a simulated cluster on mem, servers and clients swept; the table of every point, the
//! analysis (where tpsE stops being linear and why), and `figure9.svg`, tpsE against simulated
//! server capacity.

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// The report file.
pub const FILE: &str = "figure9.json";

/// Runs it (the smoke sweep with `--quick`), prints the table and writes `figure9.svg`.
pub fn run(ctx: &Ctx<'_>) -> Result<(), String> {
    let json = out(FILE);
    let mut cmd = bench_cmd(ctx, &["figure9"]);
    cmd.arg("--json").arg(&json);
    if ctx.quick {
        cmd.arg("--quick");
    }
    println!("== Figure 9 in simulation: TPC-E over a simulated cluster on mem");
    let report = run_for_json(ctx, cmd, &json, "Figure 9 in simulation")?;
    println!("\n{}", table(&report));
    write_chart("figure9.svg", &chart(&report))?;
    println!("JSON and plot: target/bench/{FILE}, target/bench/figure9.svg");
    Ok(())
}

fn points(report: &Value) -> impl Iterator<Item = &Value> {
    report["points"].as_array().into_iter().flatten()
}

/// The table of every point, then the analysis's conclusions.
pub fn table(report: &Value) -> String {
    let mut out = format!(
        "## Figure 9 in simulation: TPC-E tpsE against simulated server capacity\n\nTPC-E-style \
         over `SimulatedCluster<MemStore>`: rows hashed to the servers, a {:.1} ms round trip, \
         {:.2} ms per row operation and a queue at each server, the oracle as one more server \
         ({:.3} ms per request); {} customers, {:.0} s measured per point after {:.0} s of \
         warm-up (longer on fewer than {} servers); the process on {} cores. \"÷ linear\": tpsE ÷ (the first point's × servers) \
         at {} clients; one Percolator worker per {} clients.\n\n| servers | clients | workers \
         | capacity (row ops/s) | tpsE | txn/s | ÷ linear | servers busy (mean / max) \
         | oracle busy | row ops per txn | conflict rate | CPU cores (process / machine) \
         | timer late ms |\n|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n",
        num(&report["rtt_ms"]),
        num(&report["service_ms"]),
        num(&report["oracle_service_ms"]),
        num(&report["customers"]),
        num(&report["secs_per_point"]),
        num(&report["warmup_secs"]),
        num(&report["full_speed_servers"]),
        num(&report["cores"]),
        num(&report["clients_at_scale"]),
        num(&report["clients_per_worker"]),
    );
    let linear = report["analysis"]["points"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let at_scale = report["clients_at_scale"].as_u64();
    for p in points(report) {
        let ratio = linear
            .iter()
            .find(|lp| lp["servers"] == p["servers"] && p["clients"].as_u64() == at_scale)
            .map_or("–".to_owned(), |lp| format!("{:.2}", num(&lp["ratio"])));
        let w = &p["window"];
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.1} | {:.0} | {ratio} | {:.0}% / {:.0}% | {:.0}% | {:.1} | \
             {:.3} | {} | {:.2} |\n",
            num(&p["servers"]),
            num(&p["clients"]),
            num(&p["workers"]),
            num(&p["capacity_ops_per_sec"]),
            num(&p["tps_e"]),
            num(&p["txns_per_sec"]),
            100.0 * num(&w["server_utilisation"]),
            100.0 * num(&w["busiest_server_utilisation"]),
            100.0 * num(&w["oracle_utilisation"]),
            num(&p["row_ops_per_txn"]),
            num(&p["conflict_rate"]),
            cpu(w),
            num(&w["mean_timer_late_ms"]),
        ));
    }
    out.push('\n');
    for line in report["analysis"]["conclusion"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.push_str(&format!("- {}\n", line.as_str().unwrap_or_default()));
    }
    out
}

/// `process / machine` CPU cores of a window, `–` where unmeasured.
fn cpu(window: &Value) -> String {
    let show = |c: &Value| c.as_f64().map_or("–".to_owned(), |c| format!("{c:.2}"));
    format!(
        "{} / {}",
        show(&window["process_cpu_cores"]),
        show(&window["machine_cpu_cores"])
    )
}

/// README row: tpsE from the first server count to 16 (or the last measured) at the fixed
/// client count, against linear, and where it bends.
pub fn headline(report: &Value) -> Vec<(String, String)> {
    let analysis = &report["analysis"];
    let linear = analysis["points"].as_array().cloned().unwrap_or_default();
    let (Some(first), Some(last)) = (
        linear.first(),
        linear
            .iter()
            .find(|lp| lp["servers"].as_u64() == Some(16))
            .or(linear.last()),
    ) else {
        return Vec::new();
    };
    let bend = match analysis["bend_at"].as_u64() {
        Some(servers) => format!(
            "; stops being linear at {servers} servers: {}",
            analysis["why"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        None => "; linear over the whole sweep".into(),
    };
    vec![(
        format!(
            "Figure 9 in simulation (TPC-E on mem, {:.0} ms round trip, {:.2} ms per row \
             operation), {} clients",
            num(&report["rtt_ms"]),
            num(&report["service_ms"]),
            num(&report["clients_at_scale"]),
        ),
        format!(
            "{:.1} → {:.1} tpsE from {} to {} servers ({:.2} of linear){bend}",
            num(&first["tps_e"]),
            num(&last["tps_e"]),
            num(&first["servers"]),
            num(&last["servers"]),
            num(&last["ratio"]),
        ),
    )]
}

/// tpsE against simulated capacity, one line per client count measured at several server
/// counts, and linear scaling from the first point of the servers sweep.
fn chart(report: &Value) -> Chart<'static> {
    let mut clients: Vec<u64> = points(report)
        .filter_map(|p| p["clients"].as_u64())
        .collect();
    clients.sort_unstable();
    clients.dedup();
    let mut series = Vec::new();
    for c in clients {
        let mut line: Vec<(f64, f64)> = points(report)
            .filter(|p| p["clients"].as_u64() == Some(c))
            .map(|p| (num(&p["capacity_ops_per_sec"]), num(&p["tps_e"]).max(0.01)))
            .collect();
        if line.len() < 2 {
            continue;
        }
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push(Series {
            name: format!("{c} clients"),
            points: line,
            dashed: false,
        });
    }
    let capacity_of = |servers: f64| {
        points(report)
            .find(|p| num(&p["servers"]) == servers)
            .map_or(0.0, |p| num(&p["capacity_ops_per_sec"]))
    };
    let linear: Vec<(f64, f64)> = report["analysis"]["points"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|lp| {
            (
                capacity_of(num(&lp["servers"])),
                num(&lp["linear_tps_e"]).max(0.01),
            )
        })
        .collect();
    if linear.len() >= 2 {
        series.push(Series {
            name: "linear".into(),
            points: linear,
            dashed: true,
        });
    }
    Chart {
        title: "Figure 9 in simulation: TPC-E tpsE against simulated server capacity",
        x_label: "simulated capacity (row operations/s)",
        y_label: "tpsE",
        log_x: true,
        log_y: true,
        series,
        markers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn report() -> Value {
        let point = |servers: u64, clients: u64, tps: f64| {
            json!({
                "servers": servers, "clients": clients, "workers": clients.div_ceil(32),
                "tps_e": tps, "txns_per_sec": tps * 10.0,
                "capacity_ops_per_sec": servers as f64 * 4000.0, "row_ops_per_txn": 30.0,
                "conflict_rate": 0.01,
                "window": {"server_utilisation": 0.9, "busiest_server_utilisation": 0.95,
                           "oracle_utilisation": 0.01, "process_cpu_cores": 0.5,
                           "machine_cpu_cores": 0.6,
                           "mean_timer_late_ms": 0.6},
            })
        };
        json!({
            "rtt_ms": 2.0, "service_ms": 0.25, "oracle_service_ms": 0.01, "customers": 1000,
            "secs_per_point": 3.0, "warmup_secs": 2.0, "cores": 2, "clients_at_scale": 256,
            "clients_per_worker": 32,
            "points": [point(1, 8, 9.0), point(1, 256, 10.0), point(16, 8, 50.0),
                       point(16, 256, 150.0), point(64, 256, 300.0)],
            "analysis": {
                "points": [
                    {"servers": 1, "tps_e": 10.0, "linear_tps_e": 10.0, "ratio": 1.0},
                    {"servers": 16, "tps_e": 150.0, "linear_tps_e": 160.0, "ratio": 0.94},
                    {"servers": 64, "tps_e": 300.0, "linear_tps_e": 640.0, "ratio": 0.47},
                ],
                "bend_at": 64, "why": ["this process's CPU"],
                "conclusion": ["Stops being linear at 64 servers."],
            },
        })
    }

    #[test]
    fn the_table_headline_and_chart_come_from_the_json() {
        let report = report();
        let table = table(&report);
        assert!(table.starts_with("## Figure 9"), "{table}");
        assert!(
            table.contains(
                "| 16 | 256 | 8 | 64000 | 150.0 | 1500 | 0.94 | 90% / 95% | 1% | 30.0 | 0.010 \
                 | 0.50 / 0.60 |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| 16 | 8 | 1 | 64000 | 50.0 | 500 | – |"),
            "{table}"
        );
        assert!(
            table.contains("- Stops being linear at 64 servers."),
            "{table}"
        );
        let rows = headline(&report);
        assert_eq!(rows.len(), 1);
        assert!(
            rows[0]
                .1
                .starts_with("10.0 → 150.0 tpsE from 1 to 16 servers (0.94"),
            "{rows:?}"
        );
        assert!(
            rows[0].1.contains("at 64 servers: this process's CPU"),
            "{rows:?}"
        );
        let chart = chart(&report);
        let names: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["8 clients", "256 clients", "linear"]);
        assert_eq!(chart.series[2].points[1], (64_000.0, 160.0));
        assert!(headline(&json!({})).is_empty());
    }
}
