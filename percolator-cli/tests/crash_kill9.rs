//! Real process death: a child process (`percolator bank --durable` on sled, then on fjall) runs
//! durable bank transfers and is killed with SIGKILL mid-workload; the database is reopened and every
//! acknowledged commit must be there, the total conserved after lock resolution, and no lock
//! left.

// The binary these tests run is built with sled too: the crate's dev-dependency on
// `percolator-registry` enables it in every test build (sled is not a default feature).
#![cfg(feature = "fjall")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_backend_fjall::FjallStore;
use percolator_backend_sled::SledStore;
use percolator_core::workload::{self, ACCOUNTS, TRANSFERS};
use percolator_core::{Client, RowStore, TxnConfig};

const ACCOUNT_COUNT: usize = 50;
const INITIAL: i64 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_commits_survive_sigkill_on_sled() {
    survive_sigkill("sled", |path| {
        SledStore::open(path).expect("reopen after SIGKILL")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_commits_survive_sigkill_on_fjall() {
    survive_sigkill("fjall", |path| {
        FjallStore::open(path).expect("reopen after SIGKILL")
    })
    .await;
}

/// Two rounds on one database of `backend`: kill the child, reopen with `open`, check.
async fn survive_sigkill<S: RowStore>(backend: &str, open: impl Fn(&std::path::Path) -> S) {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_percolator"))
            .args(["--backend", backend])
            .args(["--db", dir.path().to_str().unwrap(), "bank"])
            .args([
                "--accounts",
                &ACCOUNT_COUNT.to_string(),
                "--initial",
                &INITIAL.to_string(),
            ])
            .args([
                "--transfers",
                "1000000",
                "--workers",
                "6",
                "--durable",
                "--print-acks",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn percolator bank");
        let stdout = child.stdout.take().unwrap();
        let wanted = 150 + round * 100;
        let (acks, killed_at) = tokio::task::spawn_blocking(move || {
            let mut acks = Vec::new();
            let mut lines = BufReader::new(stdout).lines();
            let started = Instant::now();
            while acks.len() < wanted && started.elapsed() < Duration::from_secs(120) {
                match lines.next() {
                    Some(Ok(line)) => {
                        if let Some(id) = line.strip_prefix("ACK ") {
                            acks.push(id.to_string());
                        }
                    }
                    _ => break,
                }
            }
            child.kill().expect("SIGKILL the child"); // Child::kill sends SIGKILL on Unix
            let killed_at = acks.len();
            // Acks printed before the kill landed are acknowledged too.
            for line in lines.map_while(Result::ok) {
                if let Some(id) = line.strip_prefix("ACK ") {
                    acks.push(id.to_string());
                }
            }
            let status = child.wait().expect("reap child");
            assert!(
                !status.success(),
                "child was killed, not finished: {status:?}"
            );
            (acks, killed_at)
        })
        .await
        .unwrap();
        assert!(
            killed_at >= wanted,
            "round {round}: child acknowledged only {killed_at} transfers before the deadline"
        );

        let store = Arc::new(open(dir.path()));
        let client = Client::builder(Arc::clone(&store))
            .config(TxnConfig::default().with_lock_ttl(Duration::from_millis(500)))
            .build()
            .await
            .unwrap();
        // The dead child's locks expire with their TTL; resolve them all.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, live_a) = client.resolve_locks(ACCOUNTS).await.unwrap();
            let (_, live_t) = client.resolve_locks(TRANSFERS).await.unwrap();
            if live_a + live_t == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "locks of the killed child never became resolvable"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(client.locks(ACCOUNTS).await.unwrap().is_empty());
        assert!(client.locks(TRANSFERS).await.unwrap().is_empty());
        let (sum, count) = workload::total(&client).await.unwrap();
        assert_eq!(count, ACCOUNT_COUNT);
        assert_eq!(
            sum,
            ACCOUNT_COUNT as i64 * INITIAL,
            "{backend} round {round}: money created or destroyed by the crash"
        );
        let txn = client.begin().await.unwrap();
        for id in &acks {
            assert!(
                txn.get(TRANSFERS, id, "receipt").await.unwrap().is_some(),
                "{backend} round {round}: acknowledged transfer {id} lost after SIGKILL"
            );
        }
        eprintln!(
            "{backend} round {round}: {} acknowledged transfers all present after SIGKILL",
            acks.len()
        );
        client.shutdown().await.unwrap();
        drop(txn);
        drop(client);
        // Release the database before the next round's child opens it (background tasks of the
        // dropped client let go of their handles once the runtime has cancelled them).
        store.sync().await.unwrap();
        let mut store = Some(store);
        for _ in 0..200 {
            match Arc::try_unwrap(store.take().unwrap()) {
                Ok(owned) => {
                    drop(owned);
                    break;
                }
                Err(shared) => {
                    store = Some(shared);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        assert!(store.is_none(), "the database is still held open");
    }
}
