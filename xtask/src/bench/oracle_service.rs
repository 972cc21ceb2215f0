//! The timestamp oracle service over loopback against an in-process oracle
//! (`percolator-bench oracle-service`).

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// The report file.
pub const FILE: &str = "oracle-service.json";

/// Runs it, prints the table and writes `oracle-service.svg`.
pub fn run(ctx: &Ctx<'_>) -> Result<(), String> {
    let json = out(FILE);
    let mut cmd = bench_cmd(ctx, &["oracle-service"]);
    cmd.arg("--json").arg(&json);
    if ctx.quick {
        cmd.args(["--requesters", "1,64", "--seconds", "0.5"]);
    }
    let report = run_for_json(ctx, cmd, &json, "the oracle service benchmark")?;
    println!("\n{}", table(&report));
    write_chart("oracle-service.svg", &chart(&report))?;
    println!("JSON and plot: target/bench/{FILE}, target/bench/oracle-service.svg");
    Ok(())
}

fn points(report: &Value) -> impl Iterator<Item = &Value> {
    report["points"].as_array().into_iter().flatten()
}

/// The table: throughput and latency per number of requesters.
pub fn table(report: &Value) -> String {
    let mut out = String::from(
        "## Timestamp oracle service over loopback (target: ≥ 1 M ts/s from 64 requesters, p99 < \
         1 ms)\n\n| requesters | in-process (M ts/s) | service (M ts/s) | service trials | service \
         ÷ in-process | p50 | p99 | callers per RPC |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in points(report) {
        let trials: Vec<String> = p["remote_trials_per_s"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| format!("{:.2}", num(t) / 1e6))
            .collect();
        out.push_str(&format!(
            "| {} | {:.2} | {:.2} | {} | {:.2} | {} µs | {} µs | {:.1} |\n",
            num(&p["requesters"]),
            num(&p["local_per_s"]) / 1e6,
            num(&p["remote_per_s"]) / 1e6,
            trials.join(" "),
            num(&p["ratio"]),
            p["remote_p50_us"].as_u64().unwrap_or(0),
            p["remote_p99_us"].as_u64().unwrap_or(0),
            num(&p["callers_per_rpc"])
        ));
    }
    out
}

/// README row: the service's throughput at the most requesters.
pub fn headline(report: &Value) -> Vec<(String, String)> {
    points(report)
        .last()
        .map(|p| {
            vec![(
                format!(
                    "timestamp oracle service over loopback, {} requesters",
                    num(&p["requesters"])
                ),
                format!(
                    "{:.2} M ts/s, p99 {} µs",
                    num(&p["remote_per_s"]) / 1e6,
                    p["remote_p99_us"].as_u64().unwrap_or(0)
                ),
            )]
        })
        .unwrap_or_default()
}

fn chart(report: &Value) -> Chart<'static> {
    let series = |key: &str| -> Vec<(f64, f64)> {
        points(report)
            .map(|p| (num(&p["requesters"]), num(&p[key]) / 1e6))
            .collect()
    };
    Chart {
        title: "Timestamp oracle: service over loopback vs in-process",
        x_label: "concurrent requesters",
        y_label: "M timestamps/s",
        log_x: true,
        log_y: false,
        series: vec![
            Series {
                name: "service (loopback)".into(),
                points: series("remote_per_s"),
                dashed: false,
            },
            Series {
                name: "in-process".into(),
                points: series("local_per_s"),
                dashed: true,
            },
        ],
        markers: Vec::new(),
    }
}
