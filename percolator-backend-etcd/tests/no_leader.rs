//! A cluster without a leader refuses at once: with two of three members killed, the survivor
//! has no leader, and a write to it must fail fast, as "nothing applied" (`no leader`), rather
//! than hang for the whole request timeout and come back with an unknown outcome. That is what
//! lets leases (the oracle's, the workers') be renewed right after an election instead of
//! waiting out a request sent into it. Reported as skipped, with the reason, where etcd is not
//! installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_backend_etcd::{EtcdConfig, EtcdError, EtcdStore};
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};
use percolator_testkit::{Harness, Needs};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

async fn a_member_without_a_leader_refuses_at_once() {
    let mut cluster = LocalCluster::start(ClusterConfig::default()).unwrap();
    let leader =
        tokio::task::block_in_place(|| cluster.wait_for_leader(Duration::from_secs(10))).unwrap();
    let survivor = (leader + 1) % 3;
    let endpoints = cluster.endpoints();
    let config = EtcdConfig::new([endpoints[survivor].clone()])
        .with_request_timeout(REQUEST_TIMEOUT)
        .with_attempts(3);
    let store = EtcdStore::connect(&config, b"no-leader").await.unwrap();
    store
        .client()
        .put(Bytes::from("k"), Bytes::from("before"))
        .await
        .unwrap();

    for member in 0..3 {
        if member != survivor {
            cluster.kill(member).unwrap();
        }
    }
    // The survivor notices after its election timeout (1 s by default) and then campaigns in
    // vain: it has no leader from then on. (A write sent before it noticed would go to the dead
    // leader and wait out the timeout.)
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let (error, took) = loop {
        let began = Instant::now();
        match store
            .client()
            .put(Bytes::from("k"), Bytes::from("during"))
            .await
        {
            Err(e) if e.to_string().contains("no leader") => break (e, began.elapsed()),
            other => {
                assert!(
                    Instant::now() < deadline,
                    "the survivor never said it has no leader: last answer {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert!(
        matches!(error, EtcdError::Unavailable(_)),
        "`no leader` means nothing applied: {error:?}"
    );
    assert!(
        took < REQUEST_TIMEOUT / 2,
        "refused after {took:?}, not at once (request timeout {REQUEST_TIMEOUT:?})"
    );
    eprintln!("a write to a member without a leader failed in {took:?}: {error}");
    cluster.stop().unwrap();
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd])
        .tokio(
            "a_member_without_a_leader_refuses_at_once",
            2,
            a_member_without_a_leader_refuses_at_once,
        )
        .run()
}
