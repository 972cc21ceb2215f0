//! The harness against real etcd processes: a 3-member cluster elects a leader, survives the
//! leader's SIGKILL (the others elect a new one), takes the old leader back, and leaves nothing
//! behind when dropped. Skips, saying why, where etcd is not installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use percolator_etcd_cluster::{ClusterConfig, LocalCluster};
use percolator_testkit::{Harness, Needs};

fn three_members_elect_fail_over_and_tear_down() {
    let mut cluster = LocalCluster::start(ClusterConfig::default()).unwrap();
    assert_eq!(cluster.endpoints().len(), 3);
    let first = cluster.wait_for_leader(Duration::from_secs(10)).unwrap();
    let pids: Vec<u32> = cluster.members().iter().filter_map(|m| m.pid()).collect();
    assert_eq!(pids.len(), 3, "every member runs");

    cluster.kill(first).unwrap();
    assert!(!cluster.members()[first].is_running());
    let second = cluster.wait_for_leader(Duration::from_secs(20)).unwrap();
    assert_ne!(second, first, "a killed member cannot lead");

    cluster.restart(first).unwrap();
    cluster.wait_for_leader(Duration::from_secs(20)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cluster.statuses().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the restarted member never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let dir = cluster.dir().to_path_buf();
    let pids: Vec<u32> = cluster.members().iter().filter_map(|m| m.pid()).collect();
    drop(cluster);
    assert!(!dir.exists(), "{} left behind", dir.display());
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "member {pid} still runs"
        );
    }
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd])
        .test(
            "three_members_elect_fail_over_and_tear_down",
            three_members_elect_fail_over_and_tear_down,
        )
        .run()
}
