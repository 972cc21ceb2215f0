//! The TPC-E-style brokerage benchmark (`percolator-bench tpce`) on every backend, and the peer
//! baselines on sled's, fjall's and (where etcd runs) etcd's own transactions.

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json, write_chart};
use crate::plot::{Chart, Series};

/// Report files: `tpce-<system>.json`.
pub const PREFIX: &str = "tpce-";

/// The peer baseline's system name: sled's own transactions.
pub const PEER: &str = "sled-peer";

/// The peer baseline on fjall's own transactions.
pub const FJALL_PEER: &str = "fjall-peer";

/// The peer baseline on etcd's own mini-transactions (STM style), run where etcd is.
pub const ETCD_PEER: &str = "etcd-peer";

/// Appended to a system's name for its run with `--single-reads` (the frames' rows read one
/// after another: the baseline batched reads are measured against).
pub const SINGLE_READS: &str = "-single-reads";

/// Appended to a system's name for its run with `--inline-secondaries` (the secondaries
/// committed before `commit` returns: the baseline returning at the commit point is measured
/// against).
pub const INLINE_SECONDARIES: &str = "-inline-secondaries";

/// Systems where a read is a network round trip, and so also run with single reads and with
/// inline secondaries.
const NETWORKED: &[&str] = &["etcd", "tikv"];

/// Runs it on every backend (and the peer baseline once), prints the table and writes
/// `tpce.svg`; an error if an invariant was violated.
pub fn run(ctx: &Ctx<'_>, systems: &[&str]) -> Result<(), String> {
    let mut reports = Vec::new();
    let runs = systems.iter().flat_map(|&system| {
        let baselines = if NETWORKED.contains(&system) {
            vec![
                (system, Variant::SingleReads),
                (system, Variant::InlineSecondaries),
            ]
        } else {
            Vec::new()
        };
        std::iter::once((system, Variant::Default)).chain(baselines)
    });
    let mut peers = vec![(PEER, Variant::Default), (FJALL_PEER, Variant::Default)];
    if systems.contains(&"etcd") {
        peers.push((ETCD_PEER, Variant::Default));
    }
    for (system, variant) in runs.chain(peers) {
        let label = format!("{system}{}", variant.suffix());
        let json = out(&format!("{PREFIX}{label}.json"));
        let on_etcd = system == ETCD_PEER || system == "etcd";
        // Each system on etcd gets a cluster of its own: on a shared one, each run would find
        // the data and history of the runs before it, and the last would be the slowest.
        let (endpoints, _fresh) = if on_etcd {
            etcd_for_one_run(ctx)?
        } else {
            (String::new(), None)
        };
        let mut cmd = if system == ETCD_PEER {
            bench_cmd(ctx, &["tpce", "--etcd-peer", &endpoints])
        } else if on_etcd {
            bench_cmd(ctx, &["tpce", "--store", &format!("etcd:{endpoints}")])
        } else if system == PEER || system == FJALL_PEER {
            let dir = out(&format!("tpce-db-{system}"));
            let mut cmd = bench_cmd(ctx, &["tpce", &format!("--{system}")]);
            cmd.arg(dir);
            cmd
        } else {
            bench_cmd(ctx, &["tpce", "--store", &ctx.store(system, "tpce")])
        };
        cmd.arg("--json").arg(&json);
        if ctx.quick {
            cmd.arg("--quick");
        }
        match variant {
            Variant::Default => {}
            Variant::SingleReads => {
                cmd.arg("--single-reads");
            }
            Variant::InlineSecondaries => {
                cmd.arg("--inline-secondaries");
            }
        }
        println!("== TPC-E-style on {label}");
        let report = run_for_json(ctx, cmd, &json, &format!("tpce on {label}"))?;
        reports.push((label, report));
    }
    println!("\n{}", table(&reports));
    if reports
        .iter()
        .any(|(_, r)| r["invariants"]["violation_count"].as_u64() != Some(0))
    {
        return Err("TPC-E invariants violated (see the table)".into());
    }
    write_chart("tpce.svg", &chart(&reports))?;
    println!("JSON and plots: target/bench/tpce-<system>.json, target/bench/tpce.svg");
    Ok(())
}

/// The etcd cluster for one run: a fresh one of 3 members on loopback (stopped when the second
/// value drops), or the one in `PERCOLATOR_ETCD_ENDPOINTS`, shared by every run, when that is
/// set (the runs then use separate namespaces).
fn etcd_for_one_run(
    ctx: &Ctx<'_>,
) -> Result<(String, Option<percolator_etcd_cluster::LocalCluster>), String> {
    if percolator_etcd_cluster::endpoints_from_env().is_some() {
        return Ok((ctx.remote.etcd.clone().unwrap_or_default(), None));
    }
    let cluster =
        crate::cluster::for_tests()?.map_err(|reason| format!("a fresh etcd cluster: {reason}"))?;
    Ok((cluster.endpoints().join(","), Some(cluster)))
}

/// A same-run baseline of a networked system.
#[derive(Debug, Clone, Copy)]
enum Variant {
    Default,
    SingleReads,
    InlineSecondaries,
}

impl Variant {
    fn suffix(self) -> &'static str {
        match self {
            Self::Default => "",
            Self::SingleReads => SINGLE_READS,
            Self::InlineSecondaries => INLINE_SECONDARIES,
        }
    }
}

/// The table: tpsE per system, and ours ÷ the peer on sled.
pub fn table(reports: &[(String, Value)]) -> String {
    let mut out = String::from(
        "## TPC-E-style brokerage (tpsE = Trade-Results/s; the paper's best single-machine DBMS: \
         ~50 tpsE/core)\n\n| system | customers | tpsE | tpsE/core | txn/s | retries | invariants \
         | prefetched cells (used) |\n|---|---:|---:|---:|---:|---:|---|---:|\n",
    );
    for (system, report) in reports {
        let kinds = report["kinds"].as_array().cloned().unwrap_or_default();
        let retries: u64 = kinds.iter().filter_map(|k| k["retries"].as_u64()).sum();
        let ok = report["invariants"]["violation_count"].as_u64() == Some(0);
        let prefetch = &report["prefetch"];
        let prefetch = match prefetch["enabled"].as_bool() {
            Some(true) => format!(
                "{} ({})",
                prefetch["prefetched_cells"].as_u64().unwrap_or(0),
                prefetch["hits"].as_u64().unwrap_or(0)
            ),
            Some(false) => "off".to_owned(),
            None => "–".to_owned(),
        };
        out.push_str(&format!(
            "| {system} | {} | {:.0} | {:.0} | {:.0} | {retries} | {} | {prefetch} |\n",
            report["scale"]["customers"].as_u64().unwrap_or(0),
            num(&report["tps_e"]),
            num(&report["tps_e_per_core"]),
            num(&report["txns_per_sec"]),
            if ok { "hold" } else { "VIOLATED" }
        ));
    }
    let tps = |system: &str| {
        reports
            .iter()
            .find(|(s, _)| s == system)
            .and_then(|(_, r)| r["tps_e"].as_f64())
    };
    for system in NETWORKED {
        if let (Some(batched), Some(single)) =
            (tps(system), tps(&format!("{system}{SINGLE_READS}")))
        {
            out.push_str(&format!(
                "\nOn {system}, batched reads ÷ single reads (same frames, same run): {:.2} \
                 ({batched:.0} vs {single:.0} tpsE)\n",
                batched / single.max(1e-9)
            ));
        }
        if let (Some(background), Some(inline)) =
            (tps(system), tps(&format!("{system}{INLINE_SECONDARIES}")))
        {
            out.push_str(&format!(
                "\nOn {system}, secondaries after the return ÷ before it (same frames, same \
                 run): {:.2} ({background:.0} vs {inline:.0} tpsE)\n",
                background / inline.max(1e-9)
            ));
        }
    }
    if let (Some(ours), Some(peer)) = (tps("etcd"), tps(ETCD_PEER)) {
        out.push_str(&format!(
            "\nPercolator on etcd ÷ etcd's own mini-transactions, STM style (peer baseline): \
             {:.2} ({ours:.0} vs {peer:.0} tpsE)\n",
            ours / peer.max(1e-9)
        ));
    }
    if let (Some(ours), Some(peer)) = (tps("fjall"), tps(FJALL_PEER)) {
        out.push_str(&format!(
            "\nPercolator on fjall ÷ fjall's own optimistic transactions (peer baseline): {:.2} \
             ({ours:.0} vs {peer:.0} tpsE)\n",
            ours / peer.max(1e-9)
        ));
    }
    if let (Some(ours), Some(peer)) = (tps("sled"), tps(PEER)) {
        out.push_str(&format!(
            "\nPercolator on sled ÷ sled's own transactions (peer baseline): {:.2} ({ours:.0} vs \
             {peer:.0} tpsE)\n",
            ours / peer.max(1e-9)
        ));
    }
    out
}

/// README rows: tpsE per system.
pub fn headline(reports: &[(String, Value)]) -> Vec<(String, String)> {
    let list: Vec<String> = reports
        .iter()
        .map(|(system, r)| format!("{system} {:.0}", num(&r["tps_e"])))
        .collect();
    if list.is_empty() {
        return Vec::new();
    }
    let customers = reports
        .first()
        .and_then(|(_, r)| r["scale"]["customers"].as_u64())
        .unwrap_or(0);
    let tps = |system: &str| {
        reports
            .iter()
            .find(|(s, _)| s == system)
            .and_then(|(_, r)| r["tps_e"].as_f64())
    };
    let ratios: Vec<String> = [("etcd", ETCD_PEER), ("fjall", FJALL_PEER), ("sled", PEER)]
        .into_iter()
        .filter_map(|(ours, peer)| {
            let (ours_tps, peer_tps) = (tps(ours)?, tps(peer)?);
            Some(format!("{ours} {:.2}", ours_tps / peer_tps.max(1e-9)))
        })
        .collect();
    let mut rows = vec![(
        format!("TPC-E-style tpsE, {customers} customers"),
        list.join(", "),
    )];
    if !ratios.is_empty() {
        rows.push((
            "TPC-E-style: Percolator ÷ the engine's own transactions".to_owned(),
            ratios.join(", "),
        ));
    }
    rows
}

fn chart(reports: &[(String, Value)]) -> Chart<'static> {
    let mut series = Vec::new();
    for (system, report) in reports {
        let kinds = report["kinds"].as_array().cloned().unwrap_or_default();
        for name in ["Trade-Order", "Trade-Result"] {
            if let Some(k) = kinds.iter().find(|k| k["name"] == name) {
                let at = |key: &str| num(&k[key]).max(0.001);
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
    Chart {
        title: "TPC-E-style latency percentiles (Trade-Result: submission to execution)",
        x_label: "percentile",
        y_label: "latency (ms)",
        log_x: false,
        log_y: true,
        series,
        markers: Vec::new(),
    }
}
