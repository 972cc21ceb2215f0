//! The main job on a 3-member etcd cluster: `percolator --backend etcd --endpoints … webindex
//! demo`, then `load`, `run`, `stats`, `query` and `status` against the same data. The cluster
//! is the one in `PERCOLATOR_ETCD_ENDPOINTS` (`cargo xtask ci` starts one for the run), or one
//! this test starts; skipped, saying why, where etcd is not installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::process::Command;

use percolator_etcd_cluster::TestCluster;
use percolator_testkit::{Harness, Needs};

fn percolator(endpoints: &str, namespace: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .args([
            "--backend",
            "etcd",
            "--endpoints",
            endpoints,
            "--namespace",
            namespace,
        ])
        .args(args)
        .output()
        .expect("run percolator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn webindex_on_an_etcd_cluster() {
    let cluster = TestCluster::from_env_or_start()
        .unwrap()
        .expect("the harness runs this only where etcd is installed");
    let endpoints = cluster.endpoints().join(",");
    let namespace = format!("cli-{}-{}", std::process::id(), rand_suffix());

    let (ok, out) = percolator(
        &endpoints,
        &namespace,
        &["webindex", "demo", "--docs", "120"],
    );
    assert!(ok, "{out}");
    assert!(out.contains("invariants: all hold"), "{out}");

    let (ok, out) = percolator(
        &endpoints,
        &namespace,
        &[
            "webindex",
            "load",
            "--synthetic",
            "150",
            "--generation",
            "1",
            "--fraction",
            "0.5",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = percolator(&endpoints, &namespace, &["status"]);
    assert!(ok && out.contains("pending"), "{out}");
    let (ok, out) = percolator(&endpoints, &namespace, &["webindex", "run"]);
    assert!(ok, "{out}");
    let (ok, out) = percolator(&endpoints, &namespace, &["webindex", "check"]);
    assert!(ok && out.contains("invariants: all hold"), "{out}");
    let (ok, out) = percolator(&endpoints, &namespace, &["status"]);
    assert!(ok && out.contains("0 pending, 0 locks"), "{out}");
    // Any page of the synthetic crawl is found by a word of its title.
    let (ok, out) = percolator(
        &endpoints,
        &namespace,
        &["scan", "documents", "--family", "write", "--limit", "1"],
    );
    assert!(ok && out.contains("Put start_ts="), "{out}");

    let (ok, out) = percolator("http://127.0.0.1:1", &namespace, &["status"]);
    assert!(
        !ok && out.contains("etcd"),
        "an unreachable cluster is a clear error: {out}"
    );
    drop(cluster);
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()))
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd])
        .test("webindex_on_an_etcd_cluster", webindex_on_an_etcd_cluster)
        .run()
}
