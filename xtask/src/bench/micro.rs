//! The paper's Figure 8 (`percolator-bench micro`): Percolator ÷ raw `RowStore` throughput for
//! single-cell writes and reads, oracle throughput and deep-history scans, per backend.

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// Report files: `micro-<backend>.json`.
pub const PREFIX: &str = "micro-";

/// Runs it on every backend, prints the table and writes `micro.svg`.
pub fn run(ctx: &Ctx<'_>, systems: &[&str]) -> Result<(), String> {
    let mut reports = Vec::new();
    for &backend in systems {
        let json = out(&format!("{PREFIX}{backend}.json"));
        let store = ctx.store(backend, "micro");
        let mut cmd = bench_cmd(ctx, &["micro", "--store", &store]);
        cmd.arg("--json").arg(&json);
        if ctx.quick {
            cmd.arg("--quick");
        }
        println!("== micro (Figure 8, oracle) on {backend}");
        reports.push((
            backend.to_owned(),
            run_for_json(ctx, cmd, &json, &format!("micro on {backend}"))?,
        ));
    }
    println!("\n{}", table(&reports));
    write_chart("micro.svg", &chart(&reports))?;
    println!("JSON and plots: target/bench/micro-<backend>.json, target/bench/micro.svg");
    Ok(())
}

fn ratios(report: &Value, key: &str) -> Vec<(f64, f64)> {
    report[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| Some((pair[0].as_f64()?, pair[1].as_f64()?)))
        .collect()
}

/// The Figure 8 table.
pub fn table(reports: &[(String, Value)]) -> String {
    let mut out = String::from(
        "## Figure 8: Percolator ÷ raw RowStore (the paper: writes 0.23, reads 0.94)\n\n\
         | backend | clients | write ratio | read ratio |\n|---|---:|---:|---:|\n",
    );
    for (backend, report) in reports {
        let (writes, reads) = (ratios(report, "write_ratio"), ratios(report, "read_ratio"));
        for ((clients, w), (_, r)) in writes.iter().zip(&reads) {
            out.push_str(&format!("| {backend} | {clients} | {w:.2} | {r:.2} |\n"));
        }
        out.push_str(&format!(
            "| {backend} oracle | | {:.2} M ts/s (1 requester) | {:.2} M ts/s (64); {:.1} M ts/s \
             (64, batched) |\n",
            num(&report["oracle_single"]) / 1e6,
            num(&report["oracle_concurrent"]) / 1e6,
            num(&report["oracle_batched"]) / 1e6
        ));
        let (fresh, deep) = (
            num(&report["scan_fresh_per_s"]),
            num(&report["scan_deep_per_s"]),
        );
        out.push_str(&format!(
            "| {backend} scan of 200 rows | | {fresh:.0}/s (1 version per cell) | {deep:.0}/s (100 \
             versions per cell): ratio {:.2} |\n",
            deep / fresh.max(1e-9)
        ));
    }
    out
}

/// README rows: the write and read ratios at the most clients measured.
pub fn headline(reports: &[(String, Value)]) -> Vec<(String, String)> {
    reports
        .iter()
        .filter_map(|(backend, report)| {
            let (w, r) = (
                ratios(report, "write_ratio").last().copied()?,
                ratios(report, "read_ratio").last().copied()?,
            );
            Some((
                format!("Figure 8 on {backend}: Percolator ÷ raw, {} clients", w.0),
                format!(
                    "writes {:.2}, reads {:.2} (the paper: 0.23, 0.94)",
                    w.1, r.1
                ),
            ))
        })
        .collect()
}

fn chart(reports: &[(String, Value)]) -> Chart<'static> {
    let mut series = Vec::new();
    for (backend, report) in reports {
        series.push(Series {
            name: format!("write ratio ({backend})"),
            points: ratios(report, "write_ratio"),
            dashed: false,
        });
        series.push(Series {
            name: format!("read ratio ({backend})"),
            points: ratios(report, "read_ratio"),
            dashed: true,
        });
    }
    Chart {
        title: "Figure 8: Percolator ÷ raw RowStore throughput",
        x_label: "client tasks",
        y_label: "ratio",
        log_x: true,
        log_y: false,
        series,
        markers: Vec::new(),
    }
}
