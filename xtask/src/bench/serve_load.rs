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

/// The maximum of `key` (bytes) in each third of the timeline, in MB: "a / b / c".
fn thirds(report: &Value, key: &str) -> String {
    per_third(report, key, |values| {
        values.iter().copied().fold(0.0, f64::max)
    })
}

/// The median of `key` (bytes) in each third of the timeline, in MB: "a / b / c". Whether memory
/// is flat shows here; the maximum also catches a second's burst of work in flight.
fn median_thirds(report: &Value, key: &str) -> String {
    per_third(report, key, |values| {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
    })
}

/// `stat` of `key` (bytes) over each third of the timeline, in MB: "a / b / c".
fn per_third(report: &Value, key: &str, stat: impl Fn(&[f64]) -> f64) -> String {
    let timeline = report["timeline"].as_array().cloned().unwrap_or_default();
    let n = timeline.len().div_ceil(3).max(1);
    timeline
        .chunks(n)
        .map(|third| {
            let values: Vec<f64> = third.iter().map(|s| num(&s[key])).collect();
            format!("{:.0}", stat(&values) / 1e6)
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The table: the run's summary.
pub fn table(report: &Value) -> String {
    // Documents in the index when the load stopped: how far indexing trailed (older reports
    // did not record it).
    let indexed = report["timeline"]
        .as_array()
        .and_then(|t| t.last())
        .and_then(|s| s["documents_indexed"].as_u64())
        .map_or("–".to_owned(), |n| n.to_string());
    // Older reports recorded neither.
    let after_drain = report["rss_after_drain_bytes"]
        .as_f64()
        .map_or("–".to_owned(), |b| format!("{:.0} MB", b / 1e6));
    let gc = report["gc_runs"].as_u64().map_or("–".to_owned(), |runs| {
        format!(
            "{runs}, {:.0} s, {}",
            num(&report["gc_secs"]),
            report["gc_cells_deleted"].as_u64().unwrap_or(0)
        )
    });
    format!(
        "## Serving under load: a steady crawl, {} searchers, a CPU hog for the middle third\n\n\
         | pages crawled (new) | seconds | searches answered | search p50 / p99 | answers by \
         status (errors) | 5xx other than 503 | indexed when the load stopped | acknowledged / \
         stored after the drain | drain | peak RSS | RSS, median in each third | RSS, max in each \
         third | RSS after the drain | disk, max in each third | GC runs, time, cells deleted | \
         invariants |\n\
         |---:|---:|---:|---|---|---:|---:|---|---:|---:|---|---|---:|---|---|---|\n\
         | {} | {:.0} | {} | {:.1} / {:.1} ms | {} | {} | {indexed} | {} / {} | {:.1} s | {:.0} MB \
         | {} MB | {} MB | {after_drain} | {} MB | {gc} | {} |\n",
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
        median_thirds(report, "rss_bytes"),
        thirds(report, "rss_bytes"),
        thirds(report, "disk_bytes"),
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
            "search p99 {:.0} ms; 5xx other than 503: {}; RSS median per third {} MB (max {:.0} MB)",
            num(&report["search_p99_ms"]),
            report["server_errors"].as_u64().unwrap_or(0),
            median_thirds(report, "rss_bytes"),
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
