//! Worker scaling (`percolator-bench workers`): one crawl indexed by 1, 2, 3 … workers, dividing
//! the rows (partitioned scanning), taking the paper's shared lock per row (the lock service),
//! and, for comparison, each running every row — worker
//! processes on a 3-member etcd, or runtimes sharing an embedded store (mem, fjall) in one
//! process; per backend the table and `workers-<backend>.svg` (pages/s against workers), and
//! README's headline row from etcd.

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// The report files' prefix (`workers-<backend>.json`).
pub const PREFIX: &str = "workers-";

/// Runs it on each backend (etcd: it starts its own clusters and processes), prints the tables
/// and writes the plots.
pub fn run(ctx: &Ctx<'_>, systems: &[&str], counts: &[usize]) -> Result<(), String> {
    let counts: Vec<String> = counts.iter().map(ToString::to_string).collect();
    let mut reports = Vec::new();
    for &backend in systems {
        let json = out(&format!("{PREFIX}{backend}.json"));
        let mut cmd = bench_cmd(ctx, &["workers", "--workers", &counts.join(",")]);
        if backend == "etcd" {
            cmd.arg("--percolator").arg(ctx.bin.percolator_path());
        } else {
            cmd.arg("--store").arg(ctx.store(backend, "workers"));
        }
        cmd.arg("--json").arg(&json);
        if ctx.quick {
            cmd.args(["--docs", "300"]);
        }
        println!("== worker scaling on {backend}");
        let report = run_for_json(ctx, cmd, &json, &format!("worker scaling on {backend}"))?;
        write_chart(&format!("workers-{backend}.svg"), &chart(backend, &report))?;
        reports.push((backend.to_owned(), report));
    }
    println!("\n{}", table(&reports));
    println!("JSON and plots: target/bench/{PREFIX}<backend>.json and .svg");
    Ok(())
}

fn runs(report: &Value) -> Vec<Value> {
    report["runs"].as_array().cloned().unwrap_or_default()
}

/// The run's distribution as JSON names it (`partitioned`, `lock-service`, `every-worker-all`).
fn shape(run: &Value) -> &str {
    run["distribution"].as_str().unwrap_or("?")
}

fn distribution(run: &Value) -> &'static str {
    match (run["workers"].as_u64(), shape(run)) {
        (Some(1), _) => "alone",
        (_, "partitioned") => "partitioned",
        (_, "lock-service") => "lock service",
        _ => "every worker all",
    }
}

/// The tables: per backend, one row per run, then each worker's share.
pub fn table(reports: &[(String, Value)]) -> String {
    reports
        .iter()
        .map(|(backend, report)| backend_table(backend, report))
        .collect::<Vec<_>>()
        .join("\n")
}

fn backend_table(backend: &str, report: &Value) -> String {
    let shape = if backend == "etcd" {
        "worker processes on a 3-member etcd".to_owned()
    } else {
        format!("runtimes sharing one {backend} store in one process")
    };
    let mut out = format!(
        "## Worker scaling: the web index, {shape} ({} pages; {} scanners, {} runs in \
         flight per worker)\n\n| workers | rows | run time | pages/s | processed | conflicts / \
         processed | already acknowledged | live locks rolled forward | rows passed over | observer \
         p50 / p99 (worst worker) | checks |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        report["docs"].as_u64().unwrap_or(0),
        report["scanners"].as_u64().unwrap_or(0),
        report["concurrency"].as_u64().unwrap_or(0),
    );
    for r in runs(report) {
        let clean = r["violations"].as_array().is_some_and(Vec::is_empty)
            && r["doubled"].as_u64() == Some(0)
            && r["pending"].as_u64() == Some(0);
        out.push_str(&format!(
            "| {} | {} | {:.1} s | {:.1} | {} | {:.3} | {} ({:.1}%) | {} | {} | {:.0} / {:.0} ms | {} |\n",
            r["workers"].as_u64().unwrap_or(0),
            distribution(&r),
            num(&r["secs"]),
            num(&r["pages_per_sec"]),
            r["processed"].as_u64().unwrap_or(0),
            num(&r["conflicts_per_processed"]),
            r["already_acknowledged"].as_u64().unwrap_or(0),
            100.0 * num(&r["already_acknowledged_share"]),
            r["live_roll_forwards"].as_u64().unwrap_or(0),
            passed_over(&r),
            num(&r["p50_ms"]),
            num(&r["p99_ms"]),
            if clean { "all hold" } else { "FAILED" },
        ));
    }
    let prefetch: Vec<String> = runs(report)
        .into_iter()
        .filter_map(|r| {
            let cells = r["prefetched_cells"].as_u64()?;
            let hits = r["prefetch_hits"].as_u64().unwrap_or(0);
            Some(format!(
                "{} workers ({}): {cells} cells read ahead, {hits} used",
                r["workers"].as_u64().unwrap_or(0),
                distribution(&r)
            ))
        })
        .collect();
    if !prefetch.is_empty() {
        out.push_str(&format!("\nPrefetch: {}.\n", prefetch.join("; ")));
    }
    out.push_str(
        "\nPer worker (processed / conflicts / already acknowledged / rows passed over: left to \
         the group or held by another worker):\n\n",
    );
    for r in runs(report) {
        let shares: Vec<String> = r["per_worker"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| {
                format!(
                    "{} / {} / {} / {}",
                    w["processed"].as_u64().unwrap_or(0),
                    w["conflicts"].as_u64().unwrap_or(0),
                    w["already_acknowledged"].as_u64().unwrap_or(0),
                    w["left_to_others"].as_u64().unwrap_or(0)
                        + w["held_elsewhere"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        out.push_str(&format!(
            "- {} workers, {}: {}\n",
            r["workers"].as_u64().unwrap_or(0),
            distribution(&r),
            shares.join("; ")
        ));
    }
    out
}

/// Dirty rows a run's workers passed over: left to their group, or held by another worker.
fn passed_over(run: &Value) -> u64 {
    run["per_worker"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            w["left_to_others"].as_u64().unwrap_or(0) + w["held_elsewhere"].as_u64().unwrap_or(0)
        })
        .sum()
}

/// README's row (etcd's report): pages/s of the most workers partitioned against one worker.
pub fn headline(reports: &[(String, Value)]) -> Vec<(String, String)> {
    let Some((_, report)) = reports.iter().find(|(backend, _)| backend == "etcd") else {
        return Vec::new();
    };
    let all = runs(report);
    let one = all.iter().find(|r| r["workers"].as_u64() == Some(1));
    let most = all
        .iter()
        .filter(|r| shape(r) == "partitioned")
        .max_by_key(|r| r["workers"].as_u64().unwrap_or(0));
    let (Some(one), Some(most)) = (one, most) else {
        return Vec::new();
    };
    let same_count = |name: &str| {
        all.iter()
            .find(|r| r["workers"].as_u64() == most["workers"].as_u64() && shape(r) == name)
    };
    let others: Vec<String> = [
        ("lock-service", "the lock service"),
        ("every-worker-all", "every worker running all"),
    ]
    .into_iter()
    .filter_map(|(name, label)| {
        same_count(name).map(|r| format!("{:.1} with {label}", num(&r["pages_per_sec"])))
    })
    .collect();
    vec![(
        format!(
            "worker scaling on a 3-member etcd, {} pages, 1 → {} worker processes",
            report["docs"].as_u64().unwrap_or(0),
            most["workers"].as_u64().unwrap_or(0)
        ),
        format!(
            "{:.1} → {:.1} pages/s ({}); conflicts per processed {:.3} → {:.3}",
            num(&one["pages_per_sec"]),
            num(&most["pages_per_sec"]),
            if others.is_empty() {
                "partitioned".to_owned()
            } else {
                format!("partitioned; {}", others.join(", "))
            },
            num(&one["conflicts_per_processed"]),
            num(&most["conflicts_per_processed"]),
        ),
    )]
}

fn chart(backend: &str, report: &Value) -> Chart<'static> {
    let all = runs(report);
    let series = |name: &str, key: &str| -> Vec<(f64, f64)> {
        all.iter()
            .filter(|r| r["workers"].as_u64() == Some(1) || shape(r) == name)
            .map(|r| (num(&r["workers"]), num(&r[key])))
            .collect()
    };
    Chart {
        title: if backend == "etcd" {
            "Worker scaling: processes on a 3-member etcd"
        } else {
            "Worker scaling: runtimes sharing an embedded store"
        },
        x_label: "worker processes",
        y_label: "pages per second",
        log_x: false,
        log_y: false,
        series: vec![
            Series {
                name: "partitioned".into(),
                points: series("partitioned", "pages_per_sec"),
                dashed: false,
            },
            Series {
                name: "lock service".into(),
                points: series("lock-service", "pages_per_sec"),
                dashed: false,
            },
            Series {
                name: "every worker runs all".into(),
                points: series("every-worker-all", "pages_per_sec"),
                dashed: true,
            },
        ],
        markers: Vec::new(),
    }
}
