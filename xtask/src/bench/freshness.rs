//! The freshness experiment (`percolator-bench freshness`, the paper's Figure 7 in miniature):
//! load → clustered latency of the incremental pipeline against recomputing the clustering of
//! the whole repository in batch, at growing crawl rates.

use serde_json::Value;

use super::{Ctx, FreshnessSize, bench_cmd, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// Report files: `freshness-<backend>.json`.
pub const PREFIX: &str = "freshness-";

/// The crawl rates (%/h) of a quick run: the higher rates recrawl most of the repository, half a
/// minute each on etcd.
const QUICK_RATES: &str = "1,5";

/// Runs it on every backend, prints the table and writes `freshness.svg`.
pub fn run(ctx: &Ctx<'_>, systems: &[&str], size: &FreshnessSize) -> Result<(), String> {
    let mut reports = Vec::new();
    for &backend in systems {
        let json = out(&format!("{PREFIX}{backend}.json"));
        let mut cmd = bench_cmd(
            ctx,
            &["freshness", "--store", &ctx.store(backend, "freshness")],
        );
        cmd.arg("--json").arg(&json);
        // On a cluster the experiment runs at the quick size (400 documents): at 2 000, a
        // 3-member cluster sharing a 2-core machine needs minutes per crawl rate.
        if (ctx.quick && size.docs.is_none()) || Ctx::on_cluster(backend) {
            cmd.arg("--quick");
        }
        if ctx.quick && size.rates.is_none() {
            cmd.args(["--rates", QUICK_RATES]);
        }
        if let Some(docs) = size.docs {
            cmd.args(["--docs", &docs.to_string()]);
        }
        if let Some(hour) = size.hour_secs {
            cmd.args(["--hour-secs", &hour.to_string()]);
        }
        if let Some(rates) = &size.rates {
            cmd.args(["--rates", rates]);
        }
        println!("== freshness on {backend}");
        reports.push((
            backend.to_owned(),
            run_for_json(ctx, cmd, &json, &format!("freshness on {backend}"))?,
        ));
    }
    println!("\n{}", table(&reports));
    write_chart("freshness.svg", &chart(&reports))?;
    println!("JSON and plot: target/bench/freshness-<backend>.json, target/bench/freshness.svg");
    Ok(())
}

fn points(report: &Value) -> impl Iterator<Item = &Value> {
    report["points"].as_array().into_iter().flatten()
}

/// The table: latency per crawl rate and backend.
pub fn table(reports: &[(String, Value)]) -> String {
    let mut out = String::from(
        "## Freshness: load → clustered latency, incremental vs batch (the paper's Figure 7)\n\n\
         | backend | docs | crawl rate (%/h) | incremental p50 | incremental p90 | batch p50 | \
         batch ÷ incremental |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (backend, report) in reports {
        let docs = report["docs"].as_u64().unwrap_or(0);
        for p in points(report) {
            let inc = num(&p["incremental_p50_ms"]);
            let batch = num(&p["batch_p50_ms"]);
            out.push_str(&format!(
                "| {backend} | {docs} | {:.0} | {inc:.1} ms | {:.1} ms | {batch:.1} ms | {:.1}× |\n",
                num(&p["rate_pct_per_hour"]),
                num(&p["incremental_p90_ms"]),
                batch / inc.max(0.001)
            ));
        }
    }
    out
}

/// README rows: the lowest crawl rate's latencies on each backend.
pub fn headline(reports: &[(String, Value)]) -> Vec<(String, String)> {
    reports
        .iter()
        .filter_map(|(backend, report)| {
            let p = points(report).next()?;
            let (inc, batch) = (num(&p["incremental_p50_ms"]), num(&p["batch_p50_ms"]));
            Some((
                format!(
                    "freshness on {backend}, {} docs at {:.0}%/h: incremental p50",
                    report["docs"].as_u64().unwrap_or(0),
                    num(&p["rate_pct_per_hour"])
                ),
                format!(
                    "{inc:.1} ms (batch ÷ incremental {:.0}×)",
                    batch / inc.max(0.001)
                ),
            ))
        })
        .collect()
}

fn chart(reports: &[(String, Value)]) -> Chart<'static> {
    let mut series = Vec::new();
    for (backend, report) in reports {
        let line = |key: &str| -> Vec<(f64, f64)> {
            points(report)
                .map(|p| (num(&p["rate_pct_per_hour"]), num(&p[key]).max(0.01)))
                .collect()
        };
        series.push(Series {
            name: format!("incremental p50 ({backend})"),
            points: line("incremental_p50_ms"),
            dashed: false,
        });
        series.push(Series {
            name: format!("batch p50 ({backend})"),
            points: line("batch_p50_ms"),
            dashed: true,
        });
    }
    Chart {
        title: "Freshness: load → clustered latency (paper Figure 7)",
        x_label: "crawl rate (% of repository per simulated hour)",
        y_label: "median latency (ms)",
        log_x: true,
        log_y: true,
        series,
        markers: Vec::new(),
    }
}
