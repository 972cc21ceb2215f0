//! The paper's Figure 10 (`percolator-bench figure10`): throughput over time while a worker, the
//! etcd leader and the leading oracle are killed; the table and `faults.svg` with the fault
//! moments.

use serde_json::Value;

use super::{Ctx, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// The report file.
pub const FILE: &str = "faults.json";

/// Runs it (it starts its own etcd cluster and processes), prints the table and writes the plot.
pub fn run(ctx: &Ctx<'_>) -> Result<(), String> {
    let json = out(FILE);
    let mut cmd = ctx.bin.bench();
    cmd.arg("figure10")
        .arg("--percolator")
        .arg(ctx.bin.percolator_path())
        .arg("--json")
        .arg(&json);
    if ctx.quick {
        cmd.arg("--quick");
    }
    let report = run_for_json(ctx, cmd, &json, "Figure 10")?;
    println!("\n{}", table(&report));
    write_chart("faults.svg", &chart(&report))?;
    println!("JSON and plot: target/bench/{FILE}, target/bench/faults.svg");
    Ok(())
}

fn after(d: &Value) -> String {
    d["recovered_after_secs"]
        .as_f64()
        .map_or("not within the phase".to_owned(), |s| format!("{s:.1} s"))
}

/// The table: per fault, the throughput before it, the dip, and the recovery.
pub fn table(report: &Value) -> String {
    let mut out = String::from(
        "## Figure 10: throughput while processes die (web index on etcd, 3 workers, 2 oracles)\n\n\
         | fault | at | down for | observer txns/s before | lowest | back to 80% after | crawler \
         back after |\n|---|---:|---:|---:|---:|---|---|\n",
    );
    for f in report["faults"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "| {} | {:.1} s | {:.1} s | {:.0} | {:.0}% | {} | {} |\n",
            f["action"].as_str().unwrap_or("?"),
            num(&f["at_secs"]),
            num(&f["down_secs"]),
            num(&f["observers"]["baseline"]),
            num(&f["observers"]["lowest_share"]) * 100.0,
            after(&f["observers"]),
            after(&f["crawler"]),
        ));
    }
    out
}

fn chart(report: &Value) -> Chart<'static> {
    let markers = report["faults"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                num(&f["at_secs"]),
                f["action"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    let timeline = report["timeline"].as_array().cloned().unwrap_or_default();
    let series = |key: &str| -> Vec<(f64, f64)> {
        timeline
            .iter()
            .map(|p| (num(&p["t_secs"]), num(&p[key])))
            .collect()
    };
    Chart {
        title: "Throughput while processes die (paper Figure 10)",
        x_label: "seconds",
        y_label: "per second",
        log_x: false,
        log_y: false,
        series: vec![
            Series {
                name: "observer txns".into(),
                points: series("observer_runs_per_sec"),
                dashed: false,
            },
            Series {
                name: "pages crawled".into(),
                points: series("pages_written_per_sec"),
                dashed: true,
            },
        ],
        markers,
    }
}
