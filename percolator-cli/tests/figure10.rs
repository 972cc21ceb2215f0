//! The paper's Figure 10 as a test: the web-indexing pipeline as three `percolator webindex run`
//! worker processes, two `percolator oracle serve` instances and a 3-member etcd cluster (all
//! started here), with a worker, the etcd leader and the leading oracle killed with SIGKILL one
//! after another while a crawler keeps loading pages.
//!
//! At the end every web-index invariant holds, every page load the crawler saw acknowledged is
//! in the store, no strong observer handled a change twice, nothing is pending or locked, and
//! throughput came back after every fault (the pipeline kept committing between one fault and
//! the next). The harness is `percolator_bench::figure10`; `cargo xtask bench` runs the same
//! experiment for its timeline (`target/bench/faults.svg`). Skipped, saying why, without etcd
//! (`.ci/run` installs it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;

use percolator_bench::figure10::{self, Figure10Config};
use percolator_testkit::{Harness, Needs};

async fn pipeline_survives_worker_etcd_leader_and_oracle_kills() {
    let config = Figure10Config::quick(PathBuf::from(env!("CARGO_BIN_EXE_percolator")));
    let report = match figure10::run(&config, |line| eprintln!("figure10: {line}")).await {
        Ok(report) => report,
        Err(e) => panic!("{e}"),
    };
    eprintln!("{}", report.table());
    assert!(
        report.violations.is_empty(),
        "invariants: {:?}",
        report.violations
    );
    assert!(report.acks.checked > 0, "the crawler acknowledged nothing");
    assert!(
        report.acks.lost.is_empty(),
        "acknowledged loads lost: {:?}",
        report.acks.lost
    );
    assert!(report.strong_runs > 0, "no strong observer ran");
    assert!(
        report.doubled.is_empty(),
        "strong observer runs doubled: {:?}",
        report.doubled
    );
    assert_eq!(
        (report.pending, report.locks),
        (0, 0),
        "left pending / locked"
    );
    assert_eq!(report.faults.len(), 3);
    // Liveness, not speed: after each fault, before the next one (or the end), the workers
    // committed observer transactions again.
    for (i, fault) in report.faults.iter().enumerate() {
        let until = report
            .faults
            .get(i + 1)
            .map_or(report.measured_secs, |next| next.at_secs);
        let committed: f64 = report
            .timeline
            .iter()
            .filter(|p| p.t_secs >= fault.at_secs + fault.down_secs && p.t_secs < until)
            .map(|p| p.observer_runs_per_sec * report.bucket_secs)
            .sum();
        assert!(
            committed > 0.0,
            "no observer transaction committed after {} until {until:.1} s",
            fault.action
        );
    }
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd])
        .tokio(
            "pipeline_survives_worker_etcd_leader_and_oracle_kills",
            2,
            pipeline_survives_worker_etcd_leader_and_oracle_kills,
        )
        .run()
}
