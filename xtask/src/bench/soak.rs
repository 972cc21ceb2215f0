//! The soak (`percolator-bench soak`): the pipeline through many recrawl generations on the
//! in-process backends, GC off and on: cells stored and bytes on disk per generation (bounded
//! storage), and for sled what an offline compaction gives back.

use percolator_registry::catalogue::{self, Kind};
use serde_json::Value;

use super::{Ctx, bench_cmd, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// Report files: `gc-<backend>-<on|off>.json`.
pub const PREFIX: &str = "gc-";

/// Runs it on every in-process backend with GC off and on, prints the table and writes `gc.svg`.
pub fn run(ctx: &Ctx<'_>, systems: &[&str]) -> Result<(), String> {
    // Quick is a smoke run (CI's): a few generations. That storage stays bounded over fifty is
    // asserted by the tests (`percolator-bench/tests/soak.rs`).
    let (docs, generations) = if ctx.quick {
        ("60", "6")
    } else {
        ("300", "200")
    };
    let mut reports = Vec::new();
    for &backend in systems
        .iter()
        .filter(|b| catalogue::backend(b).is_some_and(|b| b.kind != Kind::Cluster))
    {
        for gc in [false, true] {
            let label = if gc { "on" } else { "off" };
            let json = out(&format!("{PREFIX}{backend}-{label}.json"));
            let store = ctx.store(backend, &format!("soak-{label}"));
            let mut cmd = bench_cmd(
                ctx,
                &[
                    "soak",
                    "--store",
                    &store,
                    "--docs",
                    docs,
                    "--generations",
                    generations,
                ],
            );
            if !gc {
                cmd.arg("--no-gc");
            }
            cmd.arg("--json").arg(&json);
            println!("== soak on {backend}, GC {label}");
            reports.push((
                format!("{backend}, GC {label}"),
                run_for_json(ctx, cmd, &json, &format!("soak on {backend}"))?,
            ));
        }
    }
    println!("\n{}", table(&reports));
    write_chart("gc.svg", &chart(&reports))?;
    println!("JSON and plot: target/bench/gc-<backend>-<on|off>.json, target/bench/gc.svg");
    Ok(())
}

fn generations(report: &Value) -> Vec<Value> {
    report["generations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn cells(g: Option<&Value>) -> u64 {
    g.and_then(|g| g["cells"].as_u64()).unwrap_or(0)
}

/// The table: cells after the first and the last generation, disk, and what compaction gives
/// back.
pub fn table(reports: &[(String, Value)]) -> String {
    let mb = |v: &Value| {
        v.as_f64()
            .map_or_else(|| "-".to_owned(), |b| format!("{:.1}", b / 1e6))
    };
    let mut out = String::from(
        "## Bounded storage: stored cells per generation, GC off and on\n\n| run | generations | \
         cells after the first | cells after the last | growth | disk MB after the last | live \
         MB | disk MB after compaction |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (name, report) in reports {
        let generations = generations(report);
        let (first, last) = (cells(generations.first()), cells(generations.last()));
        let disk = generations
            .last()
            .map_or_else(|| "-".to_owned(), |g| mb(&g["disk_bytes"]));
        out.push_str(&format!(
            "| {name} | {} | {first} | {last} | {:.2}× | {disk} | {} | {} |\n",
            generations.len(),
            last as f64 / first.max(1) as f64,
            mb(&report["compact"]["live_bytes"]),
            mb(&report["compact"]["disk_bytes_after"]),
        ));
    }
    out
}

/// README rows: growth from the first generation to the last with GC on.
pub fn headline(reports: &[(String, Value)]) -> Vec<(String, String)> {
    reports
        .iter()
        .filter(|(name, _)| name.ends_with("GC on"))
        .map(|(name, report)| {
            let generations = generations(report);
            let (first, last) = (cells(generations.first()), cells(generations.last()));
            (
                format!("soak on {name}: cells, last ÷ first generation"),
                format!(
                    "{:.2}× over {} generations",
                    last as f64 / first.max(1) as f64,
                    generations.len()
                ),
            )
        })
        .collect()
}

fn chart(reports: &[(String, Value)]) -> Chart<'static> {
    let mut series = Vec::new();
    for (name, report) in reports {
        let points = |key: &str, scale: f64| -> Vec<(f64, f64)> {
            generations(report)
                .iter()
                .filter_map(|g| Some((g["generation"].as_f64()?, g[key].as_f64()? / scale)))
                .collect()
        };
        series.push(Series {
            name: format!("thousand cells ({name})"),
            points: points("cells", 1e3),
            dashed: name.ends_with("off"),
        });
        let disk = points("disk_bytes", 1e6);
        if !disk.is_empty() {
            series.push(Series {
                name: format!("disk MB ({name})"),
                points: disk,
                dashed: true,
            });
        }
    }
    Chart {
        title: "Bounded storage: the web index through recrawl generations, GC off and on",
        x_label: "generation",
        y_label: "thousand cells stored / MB on disk",
        log_x: false,
        log_y: false,
        series,
        markers: Vec::new(),
    }
}
