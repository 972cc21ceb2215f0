//! The TPC-E peer on etcd's own mini-transactions at smoke size, on a one-member etcd this test
//! starts: the mix runs, the market drains and every invariant holds, so the STM-style commit
//! (one `Txn` comparing every key read or written) keeps the books straight under 4 clients and
//! the Trade-Result tasks. Reported as skipped, with the reason, where etcd is not installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use percolator_bench::tpce::{TpceConfig, run_etcd_peer};
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};
use percolator_testkit::{Harness, Needs};

async fn etcd_peer_keeps_the_invariants() {
    let cluster = LocalCluster::start(ClusterConfig::default().with_members(1)).unwrap();
    let mut config = TpceConfig::quick();
    config.customers = 20;
    config.duration = Duration::from_secs(2);
    config.clients = 4;
    config.progress = false;
    let report = run_etcd_peer(&cluster.endpoints().join(","), &config)
        .await
        .unwrap();
    assert!(report.drained, "{}", report.table());
    assert!(report.invariants.ok(), "{}", report.table());
    assert!(report.invariants.trades > 0, "{}", report.table());
    let trade_results = report.kinds.iter().find(|k| k.name == "Trade-Result");
    assert!(
        trade_results.is_some_and(|k| k.committed > 0),
        "{}",
        report.table()
    );
    assert!(report.engine.contains("etcd"), "{}", report.engine);
    assert!(report.prefetch.is_none(), "the peer does not prefetch");
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd])
        .tokio(
            "etcd_peer_keeps_the_invariants",
            2,
            etcd_peer_keeps_the_invariants,
        )
        .run()
}
