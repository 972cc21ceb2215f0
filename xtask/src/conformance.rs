//! `cargo xtask conformance`: the shared suite from each backend's own test target.

use std::time::Instant;

use percolator_registry::catalogue::{self, ConformanceTarget, Server};

use crate::runner::{Counts, run_tests};

/// Every conformance target of every backend in the registry's catalogue, in report order,
/// with the backend's package.
fn targets() -> impl Iterator<Item = (&'static str, &'static ConformanceTarget)> {
    catalogue::BACKENDS
        .iter()
        .flat_map(|b| b.conformance.iter().map(move |t| (b.package, t)))
}

/// Whether `choice` (`all`, a backend's name or a target's label) selects `target` of `package`.
fn selected(choice: &str, package: &str, target: &ConformanceTarget) -> bool {
    choice == "all"
        || choice == target.label
        || catalogue::backend(choice).is_some_and(|b| b.package == package)
}

/// The names `--backend` accepts.
pub fn choices() -> Vec<&'static str> {
    let mut names = vec!["all"];
    names.extend(catalogue::BACKENDS.iter().map(|b| b.name));
    names.extend(targets().map(|(_, t)| t.label));
    names.sort_unstable();
    names.dedup();
    names
}

pub fn conformance(choice: &str, pd: Option<String>) -> Result<Counts, String> {
    let pd = pd
        .or_else(|| std::env::var("PERCOLATOR_TIKV_PD").ok())
        .filter(|p| !p.trim().is_empty());
    let mut rows = Vec::new();
    let mut total = Counts::default();
    for (package, target) in targets() {
        if !selected(choice, package, target) {
            continue;
        }
        let mut skip = |reason: &'static str| {
            println!("== conformance: {}: SKIPPED, {reason}", target.label);
            total.skipped += 1;
            let counts = Counts {
                skipped: 1,
                ..Counts::default()
            };
            rows.push((target.label, counts, None, Some(reason)));
        };
        if target.needs == Server::TikvPd && pd.is_none() {
            skip("no PD address (pass --pd HOST:PORT or set PERCOLATOR_TIKV_PD)");
            continue;
        }
        // etcd: one 3-member cluster on loopback for the whole binary, handed over by address.
        let cluster = if target.needs == Server::Etcd {
            match crate::cluster::for_tests()? {
                Ok(cluster) => Some(cluster),
                // CI installs every server: there a missing one is a failure, not a skip.
                Err(reason) if crate::runner::under_ci() => {
                    return Err(format!("conformance on {}: {reason}", target.label));
                }
                Err(reason) => {
                    skip(reason);
                    continue;
                }
            }
        } else {
            None
        };
        println!("== conformance: {} ({package})", target.label);
        let started = Instant::now();
        let filter = format!("binary({})", target.binary);
        let mut extra = Vec::new();
        let mut env = Vec::new();
        let endpoints = cluster.as_ref().map(|c| c.endpoints().join(","));
        if let Some(endpoints) = &endpoints {
            env.push((crate::cluster::ENDPOINTS_VAR, endpoints.as_str()));
        }
        if target.needs == Server::TikvPd {
            // Qualified: nextest builds the whole workspace (see `run_tests`).
            extra.extend(["--features", "percolator-backend-tikv/cluster-tests"]);
            if let Some(pd) = &pd {
                env.push(("PERCOLATOR_TIKV_PD", pd.as_str()));
            }
        }
        let counts = run_tests(&[package], Some(&filter), &extra, &env)?;
        drop(cluster);
        rows.push((target.label, counts, Some(started.elapsed()), None));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_name_selects_every_target_of_its_crate() {
        let chosen = |choice: &str| -> Vec<&str> {
            targets()
                .filter(|(p, t)| selected(choice, p, t))
                .map(|(_, t)| t.label)
                .collect()
        };
        assert_eq!(chosen("tikv"), ["tikv-fake", "tikv"]);
        assert_eq!(chosen("tikv-fake"), ["tikv-fake"]);
        assert_eq!(chosen("fjall"), ["fjall"]);
        assert_eq!(chosen("all").len(), targets().count());
        assert!(chosen("nosuch").is_empty());
        assert!(choices().contains(&"etcd") && choices().contains(&"all"));
    }
}
