//! `cargo xtask conformance`: the shared suite from each backend's own test target.

use std::time::Instant;

use crate::Backend;
use crate::runner::{Counts, run_tests};

/// One conformance target.
struct Target {
    backend: Backend,
    name: &'static str,
    package: &'static str,
    binary: &'static str,
    /// Needs a PD address; compiled with the `cluster-tests` feature.
    cluster: bool,
    /// Runs against a local etcd cluster that xtask starts for it.
    etcd: bool,
}

/// Every conformance target, in report order.
const TARGETS: &[Target] = &[
    Target {
        backend: Backend::Mem,
        name: "mem",
        package: "percolator-backend-mem",
        binary: "conformance",
        cluster: false,
        etcd: false,
    },
    Target {
        backend: Backend::Sled,
        name: "sled",
        package: "percolator-backend-sled",
        binary: "conformance",
        cluster: false,
        etcd: false,
    },
    Target {
        backend: Backend::Fjall,
        name: "fjall",
        package: "percolator-backend-fjall",
        binary: "conformance",
        cluster: false,
        etcd: false,
    },
    Target {
        backend: Backend::TikvFake,
        name: "tikv-fake",
        package: "percolator-backend-tikv",
        binary: "conformance_fake",
        cluster: false,
        etcd: false,
    },
    Target {
        backend: Backend::Tikv,
        name: "tikv",
        package: "percolator-backend-tikv",
        binary: "conformance_cluster",
        cluster: true,
        etcd: false,
    },
    Target {
        backend: Backend::Etcd,
        name: "etcd (3 members)",
        package: "percolator-backend-etcd",
        binary: "conformance",
        cluster: false,
        etcd: true,
    },
];

pub fn conformance(backend: Backend, pd: Option<String>) -> Result<Counts, String> {
    let pd = pd
        .or_else(|| std::env::var("PERCOLATOR_TIKV_PD").ok())
        .filter(|p| !p.trim().is_empty());
    let mut rows = Vec::new();
    let mut total = Counts::default();
    for target in TARGETS {
        if backend != Backend::All && backend != target.backend {
            continue;
        }
        let mut skip = |reason: &'static str| {
            println!("== conformance: {}: SKIPPED, {reason}", target.name);
            total.skipped += 1;
            let counts = Counts {
                skipped: 1,
                ..Counts::default()
            };
            rows.push((target.name, counts, None, Some(reason)));
        };
        if target.cluster && pd.is_none() {
            skip("no PD address (pass --pd HOST:PORT or set PERCOLATOR_TIKV_PD)");
            continue;
        }
        // etcd: one 3-member cluster on loopback for the whole binary, handed over by address.
        let cluster = if target.etcd {
            match crate::cluster::for_tests()? {
                Ok(cluster) => Some(cluster),
                Err(reason) => {
                    skip(reason);
                    continue;
                }
            }
        } else {
            None
        };
        println!("== conformance: {} ({})", target.name, target.package);
        let started = Instant::now();
        let filter = format!("binary({})", target.binary);
        let mut extra = Vec::new();
        let mut env = Vec::new();
        let endpoints = cluster.as_ref().map(|c| c.endpoints().join(","));
        if let Some(endpoints) = &endpoints {
            env.push((crate::cluster::ENDPOINTS_VAR, endpoints.as_str()));
        }
        if target.cluster {
            // Qualified: nextest builds the whole workspace (see `run_tests`).
            extra.extend(["--features", "percolator-backend-tikv/cluster-tests"]);
            if let Some(pd) = &pd {
                env.push(("PERCOLATOR_TIKV_PD", pd.as_str()));
            }
        }
        let counts = run_tests(&[target.package], Some(&filter), &extra, &env)?;
        drop(cluster);
        rows.push((target.name, counts, Some(started.elapsed()), None));
        total.add(counts);
    }
    println!();
    println!("| backend | passed | failed | skipped | time |");
    println!("|---------|-------:|-------:|--------:|-----:|");
    for (name, c, t, reason) in &rows {
        let time = match (t, reason) {
            (Some(t), _) => format!("{:.1} s", t.as_secs_f64()),
            (None, Some(r)) => format!("suite skipped: {r}"),
            (None, None) => String::new(),
        };
        println!(
            "| {name} | {} | {} | {} | {time} |",
            c.passed, c.failed, c.skipped
        );
    }
    println!();
    println!(
        "conformance: {} passed, {} failed, {} skipped",
        total.passed, total.failed, total.skipped
    );
    Ok(total)
}
