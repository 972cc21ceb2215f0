//! The scale run (`percolator-bench scale`): a realistic crawl loaded, indexed and checked in one
//! process on each in-process backend: pages/s, notifications/s per quarter, peak RSS per
//! phase, bytes written, disk ÷ HTML; `scale.svg` plots throughput as the backlog drains.

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// Report files: `scale-<backend>.json`.
pub const PREFIX: &str = "scale-";

/// Runs it with `docs` pages on every backend of `systems`, prints the table and writes the
/// plot; an error if the index check found violations.
pub fn run(ctx: &Ctx<'_>, systems: &[&str], docs: usize) -> Result<(), String> {
    let mut reports = Vec::new();
    for &backend in systems {
        let json = out(&format!("{PREFIX}{backend}.json"));
        let store = ctx.store(backend, "scale");
        let mut cmd = bench_cmd(
            ctx,
            &["scale", "--store", &store, "--docs", &docs.to_string()],
        );
        cmd.arg("--json").arg(&json);
        println!("== scale run on {backend}: {docs} realistic pages");
        reports.push((
            backend.to_owned(),
            run_for_json(ctx, cmd, &json, &format!("scale run on {backend}"))?,
        ));
    }
    println!("\n{}", table(&reports));
    let title = format!("Scale: {docs} realistic pages, throughput as the backlog drains");
    write_chart("scale.svg", &chart(&reports, &title))?;
    if reports
        .iter()
        .any(|(_, r)| r["violations"].as_array().is_some_and(|v| !v.is_empty()))
    {
        return Err("the scale run's index check found violations".into());
    }
    println!("JSON and plot: target/bench/scale-<backend>.json, target/bench/scale.svg");
    Ok(())
}

fn mb(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "-".to_owned(), |b| format!("{:.0}", b / 1e6))
}

fn end_to_end(r: &Value) -> f64 {
    let seconds = num(&r["load_seconds"]) + num(&r["run_seconds"]);
    num(&r["docs"]) / seconds.max(1e-9)
}

/// The table: one row per backend.
pub fn table(reports: &[(String, Value)]) -> String {
    let mut out = String::from(
        "## Scale: realistic pages loaded, indexed and checked in one process\n\n| backend | pages \
         | HTML MB | load pages/s | run pages/s | end to end pages/s | run CPU ms/page | \
         notifications/s per quarter | last ÷ first | peak RSS MB load / run / check | written \
         MB | disk ÷ HTML | check s (÷ run) | query p50 / p99 ms (re-ranking the default pool; 100) | \
         violations |\n|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---|---:|\n",
    );
    for (backend, r) in reports {
        let quarters: Vec<String> = r["quarters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|q| format!("{:.0}", num(q)))
            .collect();
        let rss: Vec<String> = r["peak_rss_bytes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(mb)
            .collect();
        let run_cpu_ms = r["cpu_seconds"][1].as_f64().map_or_else(
            || "-".to_owned(),
            |s| format!("{:.1}", 1000.0 * s / num(&r["docs"]).max(1.0)),
        );
        let queries = format!(
            "{:.0} / {:.0}; {:.0} / {:.0}",
            num(&r["query_latency"]["p50_ms"]),
            num(&r["query_latency"]["p99_ms"]),
            num(&r["query_latency_pool_100"]["p50_ms"]),
            num(&r["query_latency_pool_100"]["p99_ms"]),
        );
        out.push_str(&format!(
            "| {backend} | {} | {} | {:.0} | {:.0} | {:.0} | {run_cpu_ms} | {} | {:.2} | {} | {} | \
             {} | {} | {} | {} |\n",
            r["docs"].as_u64().unwrap_or(0),
            mb(&r["html_bytes"]),
            num(&r["load_pages_per_sec"]),
            num(&r["run_pages_per_sec"]),
            end_to_end(r),
            quarters.join(" / "),
            num(&r["last_over_first"]),
            rss.join(" / "),
            mb(&r["written_bytes"]),
            r["disk_per_html"]
                .as_f64()
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.1}×")),
            r["check_seconds"].as_f64().map_or_else(
                || "-".to_owned(),
                |c| format!("{c:.1} ({:.2}×)", c / num(&r["run_seconds"]).max(1e-9))
            ),
            queries,
            r["violations"].as_array().map_or(0, Vec::len),
        ));
    }
    out
}

/// README rows: end-to-end pages/s, disk ÷ HTML and peak RSS per backend.
pub fn headline(reports: &[(String, Value)]) -> Vec<(String, String)> {
    reports
        .iter()
        .map(|(backend, r)| {
            let rss: Vec<String> = r["peak_rss_bytes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(mb)
                .collect();
            (
                format!(
                    "web index on {backend}, {} realistic pages: end to end",
                    r["docs"].as_u64().unwrap_or(0)
                ),
                format!(
                    "{:.0} pages/s; disk {}× the HTML; peak RSS {} MB (load / run / check)",
                    end_to_end(r),
                    r["disk_per_html"]
                        .as_f64()
                        .map_or_else(|| "-".to_owned(), |x| format!("{x:.1}")),
                    rss.join(" / ")
                ),
            )
        })
        .collect()
}

fn chart<'a>(reports: &[(String, Value)], title: &'a str) -> Chart<'a> {
    let series = reports
        .iter()
        .map(|(backend, r)| {
            let samples: Vec<(f64, f64)> = r["samples"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| Some((s["seconds"].as_f64()?, s["processed"].as_f64()?)))
                .collect();
            let rates = samples
                .windows(2)
                .filter(|w| w[1].0 > w[0].0)
                .map(|w| (w[1].0, (w[1].1 - w[0].1) / (w[1].0 - w[0].0)))
                .collect();
            Series {
                name: format!("observer txns/s ({backend})"),
                points: rates,
                dashed: false,
            }
        })
        .collect();
    Chart {
        title,
        x_label: "seconds into the run",
        y_label: "observer transactions per second",
        log_x: false,
        log_y: false,
        series,
        markers: Vec::new(),
    }
}
