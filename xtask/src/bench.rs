//! `cargo xtask bench`: builds the benchmark binaries once (release mode; see
//! [`crate::binaries`]), runs them, collects their JSON under `target/bench/`, renders SVG plots
//! and prints markdown tables.
//!
//! Once: the timestamp oracle service over loopback (`percolator-bench oracle-service`).
//! Per backend: the Figure 8 microbenchmarks and oracle throughput (`percolator-bench micro`),
//! Zipf-versus-uniform contention (`percolator-bench contention`), the TPC-E-style benchmark
//! (`percolator-bench tpce`, plus the peer baseline on sled's own transactions whenever sled is
//! measured), and the freshness experiment (`percolator webindex freshness`, the paper's Figure 7
//! in miniature). Wherever etcd is installed: the paper's Figure 10 (`percolator-bench figure10`,
//! worker, etcd-leader and oracle kills during the web-index pipeline, plotted as `faults.svg`).
//! On mem and sled: the soak (`percolator webindex soak`, recrawl generations with GC off and
//! on: cells stored and bytes on disk per generation, plotted as `gc.svg`).
//! `--scale` alone: `percolator webindex scale` on mem, sled and fjall (realistic pages loaded,
//! indexed and checked; pages/s, notifications/s per quarter, peak RSS, disk ÷ HTML;
//! `scale.svg`).

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::ValueEnum;
use serde_json::Value;

use crate::binaries::{self, Binaries, Profile};
use crate::plot::{Chart, Series, svg};

/// Backends a benchmark can run on.
#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
pub enum BenchBackend {
    Mem,
    Sled,
    /// The fjall LSM engine.
    Fjall,
    /// A real TiKV cluster (needs a PD address).
    Tikv,
    /// A 3-member etcd cluster (`PERCOLATOR_ETCD_ENDPOINTS`, else one started on loopback).
    Etcd,
    /// mem, sled, fjall and etcd (etcd where it is installed; tikv when a PD address is given).
    All,
}

const OUT: &str = "target/bench";

/// Where the networked backends are: PD for TiKV, etcd client URLs.
#[derive(Default)]
struct Remote {
    pd: Option<String>,
    etcd: Option<String>,
}

impl Remote {
    /// The address flags of the `percolator-bench` and `percolator` binaries for `backend`.
    fn args(&self, backend: &str) -> Vec<String> {
        let mut out = Vec::new();
        match (backend, &self.pd, &self.etcd) {
            ("tikv", Some(pd), _) => out.extend(["--pd".to_owned(), pd.clone()]),
            ("etcd", _, Some(endpoints)) => {
                out.extend(["--endpoints".to_owned(), endpoints.clone()]);
            }
            _ => {}
        }
        out
    }
}

fn backends(choice: BenchBackend, pd: Option<&str>) -> Vec<&'static str> {
    match choice {
        BenchBackend::Mem => vec!["mem"],
        BenchBackend::Sled => vec!["sled"],
        BenchBackend::Fjall => vec!["fjall"],
        BenchBackend::Tikv => vec!["tikv"],
        BenchBackend::Etcd => vec!["etcd"],
        BenchBackend::All => {
            let mut all = vec!["mem", "sled", "fjall"];
            if pd.is_some() {
                all.push("tikv");
            }
            match percolator_etcd_cluster::skip_reason() {
                None => all.push("etcd"),
                Some(reason) => println!("(etcd not measured: {reason})"),
            }
            all
        }
    }
}

/// One experiment alone.
#[derive(Clone, PartialEq)]
pub enum Only {
    /// The freshness experiment.
    Freshness(FreshnessSize),
    /// The paper's Figure 10.
    Figure10,
    /// The scale run, with this many pages (default by `quick`).
    Scale { docs: Option<usize> },
}

/// The freshness experiment's size when asked for alone; `None` keeps the experiment's default.
#[derive(Clone, PartialEq, Default)]
pub struct FreshnessSize {
    /// Repository size.
    pub docs: Option<usize>,
    /// Real seconds per simulated hour.
    pub hour_secs: Option<f64>,
    /// Crawl rates, percent per simulated hour, comma separated.
    pub rates: Option<String>,
}

pub fn bench(
    choice: BenchBackend,
    quick: bool,
    only: Option<Only>,
    dev_build: bool,
    pd: Option<String>,
) -> Result<(), String> {
    let pd = pd
        .or_else(|| std::env::var("PERCOLATOR_TIKV_PD").ok())
        .filter(|p| !p.trim().is_empty());
    if choice == BenchBackend::Tikv && pd.is_none() {
        return Err("--backend tikv needs --pd HOST:PORT (or PERCOLATOR_TIKV_PD)".into());
    }
    std::fs::create_dir_all(OUT).map_err(|e| format!("{OUT}: {e}"))?;
    if only == Some(Only::Figure10) {
        if let Some(reason) = percolator_etcd_cluster::skip_reason() {
            return Err(format!("Figure 10 needs etcd: {reason}"));
        }
        let profile = if dev_build {
            Profile::DevLikeTests
        } else {
            Profile::Release
        };
        return figure10(&binaries::build(profile, false)?, quick);
    }
    let profile = if dev_build {
        println!("(dev build: a smoke run; the figures below are not comparable to release runs)");
        Profile::DevLikeTests
    } else {
        Profile::Release
    };
    let systems = backends(choice, pd.as_deref());
    if let Some(Only::Scale { docs }) = only {
        let docs = docs.unwrap_or(if quick { 1_000 } else { 50_000 });
        let embedded: Vec<&str> = systems
            .iter()
            .copied()
            .filter(|b| matches!(*b, "mem" | "sled" | "fjall"))
            .collect();
        if embedded.is_empty() {
            return Err(
                "--scale runs on the embedded backends: --backend mem, sled, fjall or all".into(),
            );
        }
        return scale_all(&binaries::build(profile, false)?, &embedded, docs);
    }
    // etcd: the cluster in PERCOLATOR_ETCD_ENDPOINTS, else 3 members on loopback for this run
    // (stopped when `_cluster` drops at the end).
    let (etcd, _cluster) = if systems.contains(&"etcd") {
        match percolator_etcd_cluster::endpoints_from_env() {
            Some(endpoints) => (Some(endpoints.join(",")), None),
            None => {
                let started = crate::cluster::for_tests()?
                    .map_err(|reason| format!("--backend etcd: {reason}"))?;
                (Some(started.endpoints().join(",")), Some(started))
            }
        }
    } else {
        (None, None)
    };
    let remote = Remote { pd, etcd };
    let bin = binaries::build(profile, systems.contains(&"tikv"))?;
    if only.is_none() {
        let mut micro_reports = Vec::new();
        for &backend in &systems {
            micro_reports.push((backend, micro(&bin, backend, quick, &remote)?));
        }
        micro_summary(&micro_reports)?;
        oracle_service(&bin, quick)?;
        let mut tpce_reports = Vec::new();
        for &backend in &systems {
            tpce_reports.push((backend, tpce(&bin, backend, quick, &remote)?));
            if backend == "sled" {
                tpce_reports.push((
                    "sled-peer",
                    tpce(&bin, "sled-peer", quick, &Remote::default())?,
                ));
            }
        }
        tpce_summary(&tpce_reports)?;
        // Figure 10 starts its own etcd cluster and processes: wherever etcd is installed.
        match percolator_etcd_cluster::skip_reason() {
            None => figure10(&bin, quick)?,
            Some(reason) => println!("\n(Figure 10 not measured: {reason})"),
        }
        println!(
            "\n## Contention: Zipf (θ = 0.99) against uniform keys, 2-key read-modify-write transactions\n"
        );
        for &backend in &systems {
            contention(&bin, backend, quick, &remote)?;
        }
        soak_all(&bin, &systems, quick)?;
    }
    let mut reports = Vec::new();
    let size = match &only {
        Some(Only::Freshness(size)) => size.clone(),
        _ => FreshnessSize::default(),
    };
    for &backend in &systems {
        reports.push((backend, freshness(&bin, backend, quick, &size, &remote)?));
    }
    println!("\n## Freshness: load → clustered latency, incremental vs batch\n");
    println!(
        "| backend | docs | crawl rate (%/h) | incremental p50 | incremental p90 | batch p50 | batch ÷ incremental |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (backend, report) in &reports {
        let docs = report["docs"].as_u64().unwrap_or(0);
        for p in report["points"].as_array().into_iter().flatten() {
            let inc = p["incremental_p50_ms"].as_f64().unwrap_or(0.0);
            let batch = p["batch_p50_ms"].as_f64().unwrap_or(0.0);
            println!(
                "| {backend} | {docs} | {:.0} | {inc:.1} ms | {:.1} ms | {batch:.1} ms | {:.1}× |",
                p["rate_pct_per_hour"].as_f64().unwrap_or(0.0),
                p["incremental_p90_ms"].as_f64().unwrap_or(0.0),
                batch / inc.max(0.001)
            );
        }
    }
    println!("\nJSON and plots: {OUT}/freshness-<backend>.json, {OUT}/freshness.svg");
    let chart = freshness_chart(&reports);
    std::fs::write(Path::new(OUT).join("freshness.svg"), svg(&chart))
        .map_err(|e| format!("writing the plot: {e}"))?;
    Ok(())
}

/// The scale run on each embedded backend: `scale-<backend>.json`, and `scale.svg` (observer
/// transactions per second over the run).
fn scale_all(bin: &Binaries, systems: &[&str], docs: usize) -> Result<(), String> {
    let mut reports = Vec::new();
    for &backend in systems {
        let json = PathBuf::from(OUT).join(format!("scale-{backend}.json"));
        let db = PathBuf::from(OUT).join(format!("scale-db-{backend}"));
        let _ = std::fs::remove_dir_all(&db);
        let mut cmd = bin.percolator();
        cmd.args(["--backend", backend]).arg("--db").arg(&db);
        cmd.args(["webindex", "scale", "--docs", &docs.to_string()]);
        cmd.arg("--json").arg(&json);
        println!("== scale run on {backend}: {docs} realistic pages");
        let report = run_for_json(cmd, &json, &format!("scale run on {backend}"))?;
        let _ = std::fs::remove_dir_all(&db);
        reports.push((backend, report));
    }
    println!("\n## Scale: {docs} realistic pages loaded, indexed and checked in one process\n");
    println!(
        "| backend | HTML MB | load pages/s | run pages/s | run CPU ms/page | notifications/s per quarter | last ÷ first | peak RSS MB load / run / check | written MB | disk ÷ HTML | violations |"
    );
    println!("|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|");
    let mb = |v: &Value| {
        v.as_f64()
            .map_or_else(|| "-".to_owned(), |b| format!("{:.0}", b / 1e6))
    };
    for (backend, r) in &reports {
        let quarters: Vec<String> = r["quarters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|q| format!("{:.0}", q.as_f64().unwrap_or(0.0)))
            .collect();
        let rss: Vec<String> = r["peak_rss_bytes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(mb)
            .collect();
        let run_cpu_ms = r["cpu_seconds"][1].as_f64().map_or_else(
            || "-".to_owned(),
            |s| {
                format!(
                    "{:.1}",
                    1000.0 * s / r["docs"].as_f64().unwrap_or(1.0).max(1.0)
                )
            },
        );
        println!(
            "| {backend} | {} | {:.0} | {:.0} | {run_cpu_ms} | {} | {:.2} | {} | {} | {} | {} |",
            mb(&r["html_bytes"]),
            r["load_pages_per_sec"].as_f64().unwrap_or(0.0),
            r["run_pages_per_sec"].as_f64().unwrap_or(0.0),
            quarters.join(" / "),
            r["last_over_first"].as_f64().unwrap_or(0.0),
            rss.join(" / "),
            mb(&r["written_bytes"]),
            r["disk_per_html"]
                .as_f64()
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.1}×")),
            r["violations"].as_array().map_or(0, Vec::len),
        );
    }
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
    let title = format!("Scale: {docs} realistic pages, throughput as the backlog drains");
    let chart = Chart {
        title: &title,
        x_label: "seconds into the run",
        y_label: "observer transactions per second",
        log_x: false,
        log_y: false,
        series,
        markers: Vec::new(),
    };
    std::fs::write(Path::new(OUT).join("scale.svg"), svg(&chart))
        .map_err(|e| format!("writing the plot: {e}"))?;
    if reports
        .iter()
        .any(|(_, r)| r["violations"].as_array().is_some_and(|v| !v.is_empty()))
    {
        return Err("the scale run's index check found violations".into());
    }
    println!("\nJSON and plot: {OUT}/scale-<backend>.json, {OUT}/scale.svg");
    Ok(())
}

/// The soak (bounded storage): the pipeline through many recrawl generations on the embedded
/// backends, GC off and on; `gc-<backend>-<on|off>.json` and `gc.svg`.
fn soak_all(bin: &Binaries, systems: &[&str], quick: bool) -> Result<(), String> {
    // Quick is a smoke run (CI's): every backend, GC off and on, through a few generations. That
    // storage stays bounded over fifty is asserted by the tests (`percolator-webindex/tests/soak.rs`).
    let (docs, generations) = if quick { ("60", "6") } else { ("300", "200") };
    let mut reports = Vec::new();
    for &backend in systems
        .iter()
        .filter(|b| matches!(**b, "mem" | "sled" | "fjall"))
    {
        for gc in [false, true] {
            let label = if gc { "on" } else { "off" };
            let json = PathBuf::from(OUT).join(format!("gc-{backend}-{label}.json"));
            let db = PathBuf::from(OUT).join(format!("soak-db-{backend}-{label}"));
            let _ = std::fs::remove_dir_all(&db);
            let mut cmd = bin.percolator();
            cmd.args(["--backend", backend]).arg("--db").arg(&db);
            cmd.args([
                "webindex",
                "soak",
                "--docs",
                docs,
                "--generations",
                generations,
            ]);
            if !gc {
                cmd.arg("--no-gc");
            }
            cmd.arg("--json").arg(&json);
            println!("== soak on {backend}, GC {label}");
            let mut report = run_for_json(cmd, &json, &format!("soak on {backend}"))?;
            if backend == "sled" {
                // What it takes to get the space back: an offline copy of the live keys.
                let compact_json =
                    PathBuf::from(OUT).join(format!("gc-{backend}-{label}-compact.json"));
                let mut cmd = bin.percolator();
                cmd.args(["--backend", backend]).arg("--db").arg(&db);
                cmd.arg("compact").arg("--json").arg(&compact_json);
                println!("== compacting the soak's sled database (GC {label})");
                report["compact"] = run_for_json(cmd, &compact_json, "percolator compact")?;
            }
            let _ = std::fs::remove_dir_all(&db);
            reports.push((format!("{backend}, GC {label}"), report));
        }
    }
    println!("\n## Bounded storage: stored cells per generation, GC off and on\n");
    println!(
        "| run | generations | cells after the first | cells after the last | growth | disk MB after the last | live MB | disk MB after `percolator compact` |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, report) in &reports {
        let generations = report["generations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let cells = |g: Option<&Value>| g.and_then(|g| g["cells"].as_u64()).unwrap_or(0);
        let (first, last) = (cells(generations.first()), cells(generations.last()));
        let disk = generations
            .last()
            .and_then(|g| g["disk_bytes"].as_f64())
            .map_or_else(|| "-".to_owned(), |b| format!("{:.1}", b / 1e6));
        let mb = |v: &Value| {
            v.as_f64()
                .map_or_else(|| "-".to_owned(), |b| format!("{:.1}", b / 1e6))
        };
        println!(
            "| {name} | {} | {first} | {last} | {:.2}× | {disk} | {} | {} |",
            generations.len(),
            last as f64 / first.max(1) as f64,
            mb(&report["compact"]["live_bytes"]),
            mb(&report["compact"]["disk_bytes_after"]),
        );
    }
    let mut series = Vec::new();
    for (name, report) in &reports {
        let points = |key: &str, scale: f64| -> Vec<(f64, f64)> {
            report["generations"]
                .as_array()
                .into_iter()
                .flatten()
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
    let chart = Chart {
        title: "Bounded storage: the web index through recrawl generations, GC off and on",
        x_label: "generation",
        y_label: "thousand cells stored / MB on disk",
        log_x: false,
        log_y: false,
        series,
        markers: Vec::new(),
    };
    std::fs::write(Path::new(OUT).join("gc.svg"), svg(&chart))
        .map_err(|e| format!("writing the plot: {e}"))?;
    println!("\nJSON and plot: {OUT}/gc-<backend>-<on|off>.json, {OUT}/gc.svg");
    Ok(())
}

/// The crawl rates (%/h) of a quick freshness run.
const QUICK_RATES: &str = "1,5";

fn freshness(
    bin: &Binaries,
    backend: &str,
    quick: bool,
    size: &FreshnessSize,
    remote: &Remote,
) -> Result<Value, String> {
    let json = PathBuf::from(OUT).join(format!("freshness-{backend}.json"));
    let db = PathBuf::from(OUT).join(format!("freshness-db-{backend}"));
    let _ = std::fs::remove_dir_all(&db);
    let mut cmd = bin.percolator();
    cmd.args(["--backend", backend]);
    cmd.arg("--db").arg(&db);
    let address = remote.args(backend);
    if !address.is_empty() {
        cmd.args(&address)
            .arg("--namespace")
            .arg(format!("freshness-{}", std::process::id()));
    }
    cmd.args(["webindex", "freshness", "--json"]).arg(&json);
    // On etcd the experiment runs at the quick size (400 documents): at 2 000, a 3-member
    // cluster sharing the machine's two cores needs minutes per crawl rate.
    if (quick && size.docs.is_none()) || backend == "etcd" {
        cmd.arg("--quick");
    }
    // A quick run (a smoke run, CI's) measures two crawl rates, not the quick size's four: the
    // higher rates recrawl most of the repository, half a minute each on etcd.
    if quick && size.rates.is_none() {
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
    let report = run_for_json(cmd, &json, &format!("freshness on {backend}"));
    let _ = std::fs::remove_dir_all(&db);
    report
}

/// Runs a benchmark command and reads the JSON report it wrote.
fn run_for_json(mut cmd: Command, json: &Path, what: &str) -> Result<Value, String> {
    let status = cmd.status().map_err(|e| format!("running {what}: {e}"))?;
    if !status.success() {
        return Err(format!("{what} failed ({status})"));
    }
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))
}

fn freshness_chart(reports: &[(&str, Value)]) -> Chart<'static> {
    let mut series = Vec::new();
    for (backend, report) in reports {
        let points = |key: &str| -> Vec<(f64, f64)> {
            report["points"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    (
                        p["rate_pct_per_hour"].as_f64().unwrap_or(0.0),
                        p[key].as_f64().unwrap_or(0.0).max(0.01),
                    )
                })
                .collect()
        };
        series.push(Series {
            name: format!("incremental p50 ({backend})"),
            points: points("incremental_p50_ms"),
            dashed: false,
        });
        series.push(Series {
            name: format!("batch p50 ({backend})"),
            points: points("batch_p50_ms"),
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

fn micro(bin: &Binaries, backend: &str, quick: bool, remote: &Remote) -> Result<Value, String> {
    let json = PathBuf::from(OUT).join(format!("micro-{backend}.json"));
    let db = PathBuf::from(OUT).join(format!("micro-db-{backend}"));
    let mut cmd = bench_binary(bin, backend, remote);
    cmd.args(["micro", "--backend", backend]);
    cmd.arg("--db").arg(&db).arg("--json").arg(&json);
    if quick {
        cmd.arg("--quick");
    }
    println!("== micro (Figure 8, oracle) on {backend}");
    run_for_json(cmd, &json, &format!("micro on {backend}"))
}

fn micro_summary(reports: &[(&str, Value)]) -> Result<(), String> {
    println!("\n## Figure 8: Percolator ÷ raw RowStore (the paper: writes 0.23, reads 0.94)\n");
    println!("| backend | clients | write ratio | read ratio |");
    println!("|---|---:|---:|---:|");
    let mut series = Vec::new();
    for (backend, report) in reports {
        let ratios = |key: &str| -> Vec<(f64, f64)> {
            report[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|pair| Some((pair[0].as_f64()?, pair[1].as_f64()?)))
                .collect()
        };
        let (writes, reads) = (ratios("write_ratio"), ratios("read_ratio"));
        for ((clients, w), (_, r)) in writes.iter().zip(&reads) {
            println!("| {backend} | {clients} | {w:.2} | {r:.2} |");
        }
        println!(
            "| {backend} oracle | | {:.2} M ts/s (1 requester) | {:.2} M ts/s (64); {:.1} M ts/s (64, batched) |",
            report["oracle_single"].as_f64().unwrap_or(0.0) / 1e6,
            report["oracle_concurrent"].as_f64().unwrap_or(0.0) / 1e6,
            report["oracle_batched"].as_f64().unwrap_or(0.0) / 1e6
        );
        let (fresh, deep) = (
            report["scan_fresh_per_s"].as_f64().unwrap_or(0.0),
            report["scan_deep_per_s"].as_f64().unwrap_or(0.0),
        );
        println!(
            "| {backend} scan of 200 rows | | {fresh:.0}/s (1 version per cell) | {deep:.0}/s (100 versions per cell): ratio {:.2} |",
            deep / fresh.max(1e-9)
        );
        series.push(Series {
            name: format!("write ratio ({backend})"),
            points: writes,
            dashed: false,
        });
        series.push(Series {
            name: format!("read ratio ({backend})"),
            points: reads,
            dashed: true,
        });
    }
    let chart = Chart {
        title: "Figure 8: Percolator ÷ raw RowStore throughput",
        x_label: "client tasks",
        y_label: "ratio",
        log_x: true,
        log_y: false,
        series,
        markers: Vec::new(),
    };
    std::fs::write(Path::new(OUT).join("micro.svg"), svg(&chart))
        .map_err(|e| format!("writing the plot: {e}"))?;
    println!("\nJSON and plots: {OUT}/micro-<backend>.json, {OUT}/micro.svg");
    Ok(())
}

/// The oracle service over loopback against an in-process oracle: table, JSON and plot.
fn oracle_service(bin: &Binaries, quick: bool) -> Result<(), String> {
    let json = PathBuf::from(OUT).join("oracle-service.json");
    let mut cmd = bin.bench();
    cmd.args(["oracle-service", "--json"]).arg(&json);
    if quick {
        cmd.args(["--requesters", "1,64", "--seconds", "0.5"]);
    }
    let report = run_for_json(cmd, &json, "the oracle service benchmark")?;
    println!(
        "\n## Timestamp oracle service over loopback (target: ≥ 1 M ts/s from 64 requesters, p99 < 1 ms)\n"
    );
    println!(
        "| requesters | in-process (M ts/s) | service (M ts/s) | service trials | service ÷ in-process | p50 | p99 | callers per RPC |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut service = Vec::new();
    let mut local = Vec::new();
    for p in report["points"].as_array().into_iter().flatten() {
        let n = p["requesters"].as_f64().unwrap_or(0.0);
        let (l, r) = (
            p["local_per_s"].as_f64().unwrap_or(0.0) / 1e6,
            p["remote_per_s"].as_f64().unwrap_or(0.0) / 1e6,
        );
        let trials: Vec<String> = p["remote_trials_per_s"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| format!("{:.2}", t.as_f64().unwrap_or(0.0) / 1e6))
            .collect();
        println!(
            "| {n} | {l:.2} | {r:.2} | {} | {:.2} | {} µs | {} µs | {:.1} |",
            trials.join(" "),
            p["ratio"].as_f64().unwrap_or(0.0),
            p["remote_p50_us"].as_u64().unwrap_or(0),
            p["remote_p99_us"].as_u64().unwrap_or(0),
            p["callers_per_rpc"].as_f64().unwrap_or(0.0)
        );
        service.push((n, r));
        local.push((n, l));
    }
    let chart = Chart {
        title: "Timestamp oracle: service over loopback vs in-process",
        x_label: "concurrent requesters",
        y_label: "M timestamps/s",
        log_x: true,
        log_y: false,
        series: vec![
            Series {
                name: "service (loopback)".into(),
                points: service,
                dashed: false,
            },
            Series {
                name: "in-process".into(),
                points: local,
                dashed: true,
            },
        ],
        markers: Vec::new(),
    };
    std::fs::write(Path::new(OUT).join("oracle-service.svg"), svg(&chart))
        .map_err(|e| format!("writing the plot: {e}"))?;
    println!("\nJSON and plot: {OUT}/oracle-service.json, {OUT}/oracle-service.svg");
    Ok(())
}

/// The paper's Figure 10 (`percolator-bench figure10`): throughput over time with a worker, the
/// etcd leader and the leading oracle killed; table, JSON and `faults.svg` with the fault moments.
fn figure10(bin: &Binaries, quick: bool) -> Result<(), String> {
    let json = PathBuf::from(OUT).join("faults.json");
    let mut cmd = bin.bench();
    cmd.arg("figure10")
        .arg("--percolator")
        .arg(bin.percolator_path())
        .arg("--json")
        .arg(&json);
    if quick {
        cmd.arg("--quick");
    }
    let report = run_for_json(cmd, &json, "Figure 10")?;
    println!(
        "\n## Figure 10: throughput while processes die (web index on etcd, 3 workers, 2 oracles)\n"
    );
    println!(
        "| fault | at | down for | observer txns/s before | lowest | back to 80% after | crawler back after |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let after = |d: &Value| {
        d["recovered_after_secs"]
            .as_f64()
            .map_or("not within the phase".to_owned(), |s| format!("{s:.1} s"))
    };
    let mut markers = Vec::new();
    for f in report["faults"].as_array().into_iter().flatten() {
        let at = f["at_secs"].as_f64().unwrap_or(0.0);
        let action = f["action"].as_str().unwrap_or("?");
        println!(
            "| {action} | {at:.1} s | {:.1} s | {:.0} | {:.0}% | {} | {} |",
            f["down_secs"].as_f64().unwrap_or(0.0),
            f["observers"]["baseline"].as_f64().unwrap_or(0.0),
            f["observers"]["lowest_share"].as_f64().unwrap_or(0.0) * 100.0,
            after(&f["observers"]),
            after(&f["crawler"]),
        );
        markers.push((at, action.to_owned()));
    }
    let timeline = report["timeline"].as_array().cloned().unwrap_or_default();
    let series = |key: &str| -> Vec<(f64, f64)> {
        timeline
            .iter()
            .map(|p| {
                (
                    p["t_secs"].as_f64().unwrap_or(0.0),
                    p[key].as_f64().unwrap_or(0.0),
                )
            })
            .collect()
    };
    let chart = Chart {
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
    };
    std::fs::write(Path::new(OUT).join("faults.svg"), svg(&chart))
        .map_err(|e| format!("writing the plot: {e}"))?;
    println!("\nJSON and plot: {OUT}/faults.json, {OUT}/faults.svg");
    Ok(())
}

/// `percolator-bench`, with the cluster's address for TiKV and etcd.
fn bench_binary(bin: &Binaries, backend: &str, remote: &Remote) -> Command {
    let mut cmd = bin.bench();
    cmd.args(remote.args(backend));
    cmd
}

fn contention(
    bin: &Binaries,
    backend: &str,
    quick: bool,
    remote: &Remote,
) -> Result<Value, String> {
    let json = PathBuf::from(OUT).join(format!("contention-{backend}.json"));
    let db = PathBuf::from(OUT).join(format!("contention-db-{backend}"));
    let mut cmd = bench_binary(bin, backend, remote);
    cmd.args(["contention", "--backend", backend]);
    cmd.arg("--db").arg(&db).arg("--json").arg(&json);
    if quick {
        cmd.arg("--quick");
    }
    println!("== contention on {backend}");
    run_for_json(cmd, &json, &format!("contention on {backend}"))
}

fn tpce(bin: &Binaries, system: &str, quick: bool, remote: &Remote) -> Result<Value, String> {
    let json = PathBuf::from(OUT).join(format!("tpce-{system}.json"));
    let db = PathBuf::from(OUT).join(format!("tpce-db-{system}"));
    let mut cmd = bench_binary(bin, system, remote);
    cmd.args(["tpce", "--backend", system]);
    cmd.arg("--db").arg(&db).arg("--json").arg(&json);
    if quick {
        cmd.arg("--quick");
    }
    println!("== TPC-E-style on {system}");
    run_for_json(cmd, &json, &format!("tpce on {system}"))
}

fn tpce_summary(reports: &[(&str, Value)]) -> Result<(), String> {
    println!(
        "\n## TPC-E-style brokerage (tpsE = Trade-Results/s; the paper's best single-machine DBMS: ~50 tpsE/core)\n"
    );
    println!("| system | customers | tpsE | tpsE/core | txn/s | retries | invariants |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut series = Vec::new();
    for (system, report) in reports {
        let kinds = report["kinds"].as_array().cloned().unwrap_or_default();
        let retries: u64 = kinds.iter().filter_map(|k| k["retries"].as_u64()).sum();
        let ok = report["invariants"]["violation_count"].as_u64() == Some(0);
        println!(
            "| {system} | {} | {:.0} | {:.0} | {:.0} | {retries} | {} |",
            report["scale"]["customers"].as_u64().unwrap_or(0),
            report["tps_e"].as_f64().unwrap_or(0.0),
            report["tps_e_per_core"].as_f64().unwrap_or(0.0),
            report["txns_per_sec"].as_f64().unwrap_or(0.0),
            if ok { "hold" } else { "VIOLATED" }
        );
        for name in ["Trade-Order", "Trade-Result"] {
            if let Some(k) = kinds.iter().find(|k| k["name"] == name) {
                let at = |key: &str| k[key].as_f64().unwrap_or(0.0).max(0.001);
                series.push(Series {
                    name: format!("{name} ({system})"),
                    points: vec![
                        (50.0, at("p50_ms")),
                        (90.0, at("p90_ms")),
                        (99.0, at("p99_ms")),
                    ],
                    dashed: name == "Trade-Result",
                });
            }
        }
    }
    let tps = |system: &str| {
        reports
            .iter()
            .find(|(s, _)| *s == system)
            .and_then(|(_, r)| r["tps_e"].as_f64())
    };
    if let (Some(ours), Some(peer)) = (tps("sled"), tps("sled-peer")) {
        println!(
            "\nPercolator on sled ÷ sled's own transactions (peer baseline): {:.2} ({ours:.0} vs {peer:.0} tpsE)",
            ours / peer.max(1e-9)
        );
    }
    if reports
        .iter()
        .any(|(_, r)| r["invariants"]["violation_count"].as_u64() != Some(0))
    {
        return Err("TPC-E invariants violated (see the table)".into());
    }
    let chart = Chart {
        title: "TPC-E-style latency percentiles (Trade-Result: submission to execution)",
        x_label: "percentile",
        y_label: "latency (ms)",
        log_x: false,
        log_y: true,
        series,
        markers: Vec::new(),
    };
    std::fs::write(Path::new(OUT).join("tpce.svg"), svg(&chart))
        .map_err(|e| format!("writing the plot: {e}"))?;
    println!(
        "\nPer-type tables: the runs above; JSON and plots: {OUT}/tpce-<system>.json, {OUT}/tpce.svg"
    );
    Ok(())
}
