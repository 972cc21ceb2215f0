//! Three `percolator webindex run` worker processes share one crawl on a 3-member etcd cluster
//! with one oracle service (all started here), dividing the dirty rows among themselves: once by
//! partitioned scanning, once through the paper's lock service (a `percolator locks serve`
//! process). One worker is killed with SIGKILL soon after the start and stays dead: the other
//! two must take its rows over (its group share, or the locks its dead connection held), or the
//! run never drains.
//!
//! Asserted: every web-index invariant holds, no strong observer change was run twice, nothing
//! is pending or locked, both survivors worked (partitioned: and saw the group change; lock
//! service: and it answered every request, and kept workers off rows others held), and the waste stays
//! under the bounds below — the figures that three colliding workers drove to 0.55 conflicts per
//! processed notification and 32% of runs finding their change already acknowledged. The
//! harness is `percolator_bench::workers`, which `cargo xtask bench --workers 1,2,3 --backend
//! etcd` runs at full size. Skipped, saying why, without etcd (`.ci/run` installs it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use percolator_bench::workers::processes as workers;
use percolator_bench::workers::{Distribution, WorkersConfig, WorkersRun};
use percolator_testkit::{Harness, Needs};

/// Conflicts per processed notification allowed among the survivors. One worker alone measured
/// 0.002 on 2 000 pages; partitioned workers still meet on rows that several observers write
/// (index shards, link targets), and the killed worker's rows are contended until its locks are
/// resolved.
const MAX_CONFLICTS_PER_PROCESSED: f64 = 0.05;
/// Share of runs that may find their change already acknowledged (issue 47's target).
const MAX_ALREADY_ACKNOWLEDGED: f64 = 0.05;

async fn three_workers_share_the_rows_and_survive_a_kill() {
    let run = three_workers_one_killed(Distribution::Partitioned).await;
    assert!(
        run.per_worker.iter().any(|w| w.left_to_others > 0),
        "no survivor passed over another's row: {:?}",
        run.per_worker
    );
    for worker in &run.per_worker {
        assert!(
            worker.group_changes >= 1,
            "the survivor never saw the group change: {worker:?}"
        );
    }
}

async fn three_workers_with_the_lock_service_survive_a_kill() {
    let run = three_workers_one_killed(Distribution::LockService).await;
    assert!(
        run.per_worker.iter().any(|w| w.held_elsewhere > 0),
        "no survivor met a row another worker held: {:?}",
        run.per_worker
    );
    for worker in &run.per_worker {
        assert_eq!(
            (worker.lock_service_unavailable, worker.left_to_others),
            (0, 0),
            "the service answered every request, and nothing was partitioned: {worker:?}"
        );
    }
}

/// Three workers sharing the rows by `distribution`, the first SIGKILLed at 3 s; the run's
/// checks and waste asserted, the run returned for the distribution's own assertions.
async fn three_workers_one_killed(distribution: Distribution) -> WorkersRun {
    let scratch = tempfile::tempdir().unwrap();
    let mut config = WorkersConfig::new(
        PathBuf::from(env!("CARGO_BIN_EXE_percolator")),
        vec![3],
        scratch.path().to_path_buf(),
    );
    config.docs = 400;
    config.distributions = vec![distribution];
    config.kill_one_after = Some(Duration::from_secs(3));
    let report = match workers::run(&config, |line| eprintln!("workers: {line}")).await {
        Ok(report) => report,
        Err(e) => panic!("{e}"),
    };
    eprintln!("{}", report.table());
    let run = report.runs[0].clone();
    assert!(
        run.violations.is_empty(),
        "invariants: {:?}",
        run.violations
    );
    assert_eq!(run.doubled, 0, "strong observer runs doubled");
    assert_eq!((run.pending, run.locks), (0, 0), "left pending / locked");
    assert!(run.killed_at_secs.is_some(), "no worker was killed");
    assert_eq!(run.per_worker.len(), 2, "two survivors report");
    for worker in &run.per_worker {
        assert!(
            worker.processed > 0,
            "each survivor ran its share: {worker:?}"
        );
    }
    assert!(
        run.conflicts_per_processed <= MAX_CONFLICTS_PER_PROCESSED,
        "{:.3} conflicts per processed notification (bound {MAX_CONFLICTS_PER_PROCESSED})",
        run.conflicts_per_processed
    );
    assert!(
        run.already_acknowledged_share <= MAX_ALREADY_ACKNOWLEDGED,
        "{:.1}% of runs found their change already acknowledged (bound {:.0}%)",
        100.0 * run.already_acknowledged_share,
        100.0 * MAX_ALREADY_ACKNOWLEDGED
    );
    run
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd])
        .tokio(
            "three_workers_share_the_rows_and_survive_a_kill",
            2,
            three_workers_share_the_rows_and_survive_a_kill,
        )
        .tokio(
            "three_workers_with_the_lock_service_survive_a_kill",
            2,
            three_workers_with_the_lock_service_survive_a_kill,
        )
        .run()
}
