//! `percolator serve` under load (`percolator-bench serve-load`): a steady crawl, many
//! searchers and a CPU hog for the middle third; the table, the checks and `serve-load.svg`
//! (searches/s, search p99, 503s/s and RSS over time, the hog's window marked).

use serde_json::Value;

use super::{Ctx, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// The report file.
pub const FILE: &str = "serve-load.json";

/// Runs it, prints the table and writes the plot; an error if a check failed (the binary
/// fails then too).
pub fn run(ctx: &Ctx<'_>) -> Result<(), String> {
    let json = out(FILE);
    let mut cmd = ctx.bin.bench();
    cmd.arg("serve-load")
        .arg("--percolator")
        .arg(ctx.bin.percolator_path())
        .arg("--json")
        .arg(&json);
    if ctx.quick {
        cmd.arg("--quick");
    }
    let report = run_for_json(ctx, cmd, &json, "the serve load")?;
    println!("\n{}", table(&report));
    write_chart("serve-load.svg", &chart(&report))?;
    println!("JSON and plot: target/bench/{FILE}, target/bench/serve-load.svg");
    Ok(())
}

fn statuses(report: &Value) -> String {
    let list: Vec<String> = report["errors_by_status"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(status, n)| format!("{status}: {}", n.as_u64().unwrap_or(0)))
        .collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}

/// The table: the run's summary.
pub fn table(report: &Value) -> String {
    let rss: Vec<f64> = report["timeline"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| num(&s["rss_bytes"]) / 1e6)
        .collect();
    let window = |from: bool| -> f64 {
        let part: Vec<f64> = if from {
            rss.iter().take(30).copied().collect()
        } else {
            rss.iter().rev().take(30).copied().collect()
        };
        part.into_iter().fold(0.0, f64::max)
    };
    format!(
        "## Serving under load: a steady crawl, {} searchers, a CPU hog for the middle third\n\n\
         | pages crawled (new) | seconds | searches answered | search p50 / p99 | answers by \
         status (errors) | 5xx other than 503 | acknowledged / stored after the drain | drain | \
         peak RSS, max of the first / last 30 s | invariants |\n\
         |---:|---:|---:|---|---|---:|---|---:|---|---|\n\
         | {} | {:.0} | {} | {:.1} / {:.1} ms | {} | {} | {} / {} | {:.1} s | {:.0} MB, {:.0} / \
         {:.0} MB | {} |\n",
        report["searchers"].as_u64().unwrap_or(0),
        report["docs"].as_u64().unwrap_or(0),
        num(&report["duration_secs"]),
        report["searches"].as_u64().unwrap_or(0),
        num(&report["search_p50_ms"]),
        num(&report["search_p99_ms"]),
        statuses(report),
        report["server_errors"].as_u64().unwrap_or(0),
        report["pages_acknowledged"].as_u64().unwrap_or(0),
        report["documents_stored"].as_u64().unwrap_or(0),
        num(&report["drain_secs"]),
        num(&report["peak_rss_bytes"]) / 1e6,
        window(true),
        window(false),
        if report["violations"]
            .as_array()
            .is_some_and(|v| v.is_empty())
        {
            "hold"
        } else {
            "VIOLATED"
        },
    )
}

/// README rows: searches, failures and memory under load.
pub fn headline(report: &Value) -> Vec<(String, String)> {
    vec![(
        format!(
            "serving under load: {} pages crawled, {} searchers, {:.0} s, a core taken for a third",
            report["docs"].as_u64().unwrap_or(0),
            report["searchers"].as_u64().unwrap_or(0),
            num(&report["duration_secs"])
        ),
        format!(
            "search p99 {:.0} ms; 5xx other than 503: {}; peak RSS {:.0} MB",
            num(&report["search_p99_ms"]),
            report["server_errors"].as_u64().unwrap_or(0),
            num(&report["peak_rss_bytes"]) / 1e6
        ),
    )]
}

fn chart(report: &Value) -> Chart<'static> {
    let timeline = report["timeline"].as_array().cloned().unwrap_or_default();
    let series = |key: &str, scale: f64| -> Vec<(f64, f64)> {
        timeline
            .iter()
            .map(|s| (num(&s["t_secs"]), num(&s[key]) / scale))
            .collect()
    };
    let mut markers = Vec::new();
    if let Some(window) = report["hog_secs"].as_array() {
        markers.push((num(&window[0]), "hog on".to_owned()));
        markers.push((num(&window[1]), "hog off".to_owned()));
    }
    Chart {
        title: "Serving under load: searches, latency, refusals and memory",
        x_label: "seconds",
        y_label: "per second / ms / 10 MB",
        log_x: false,
        log_y: false,
        series: vec![
            Series {
                name: "searches/s".into(),
                points: series("searches_per_sec", 1.0),
                dashed: false,
            },
            Series {
                name: "search p99 (ms)".into(),
                points: series("search_p99_ms", 1.0),
                dashed: true,
            },
            Series {
                name: "503s/s".into(),
                points: series("busy_per_sec", 1.0),
                dashed: false,
            },
            Series {
                name: "RSS (10 MB)".into(),
                points: series("rss_bytes", 1e7),
                dashed: true,
            },
        ],
        markers,
    }
}
