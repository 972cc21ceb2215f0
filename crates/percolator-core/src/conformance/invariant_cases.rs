//! Invariant workloads with real concurrency: bank transfers with clients crashing mid-commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::Rng as _;

use super::fault_cases::resolve_all;
use super::hooks::RandomCrash;
use super::{StoreFactory, fast_config};
use crate::error::Error;
use crate::txn::{Client, TxnConfig};
use crate::workload::{self, ACCOUNTS, TRANSFERS};

pub const ACCOUNT_COUNT: usize = 100;
pub const INITIAL: i64 = 1_000;
pub const WORKERS: usize = 8;
pub const TRANSFERS_PER_WORKER: usize = 300;

pub async fn bank_transfers_with_crashes<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let config = TxnConfig {
        lock_ttl: Duration::from_millis(150),
        ..fast_config()
    };
    let setup = Client::builder(Arc::clone(&store))
        .config(config.clone())
        .build()
        .await
        .unwrap();
    workload::create_accounts(&setup, ACCOUNT_COUNT, INITIAL)
        .await
        .unwrap();
    let expected = ACCOUNT_COUNT as i64 * INITIAL;

    let crash = RandomCrash::new(0.05);
    let done = Arc::new(AtomicBool::new(false));
    let snapshot_reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let client = setup.clone();
        let done = Arc::clone(&done);
        let reads = Arc::clone(&snapshot_reads);
        readers.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let (sum, n) = workload::total(&client).await.unwrap();
                assert_eq!(
                    (sum, n),
                    (expected, ACCOUNT_COUNT),
                    "a snapshot saw money created or destroyed"
                );
                reads.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        // Two workers share each client, so crashing and healthy commits mix within a client.
        let client = Client::builder(Arc::clone(&store))
            .config(config.clone())
            .commit_hook(crash.clone())
            .build()
            .await
            .unwrap();
        workers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut crashed = 0u64;
            for i in 0..TRANSFERS_PER_WORKER {
                let mut attempt = 0;
                loop {
                    let (from, to, amount) = {
                        let mut rng = rand::rng();
                        let from = rng.random_range(0..ACCOUNT_COUNT);
                        let to = (from + rng.random_range(1..ACCOUNT_COUNT)) % ACCOUNT_COUNT;
                        (from, to, rng.random_range(1..50))
                    };
                    let id = format!("w{w}-t{i}-a{attempt}");
                    match workload::transfer_once(&client, from, to, amount, &id).await {
                        Ok(_) => {
                            acked.push(id);
                            break;
                        }
                        Err(Error::InjectedCrash(_)) => {
                            crashed += 1;
                            break; // the "process" died mid-commit; its locks stay behind
                        }
                        Err(e) if e.is_retryable() => {
                            attempt += 1;
                            let pause = rand::rng().random_range(1..=10);
                            tokio::time::sleep(Duration::from_millis(pause)).await;
                        }
                        Err(e) => panic!("transfer failed: {e:?}"),
                    }
                }
            }
            (acked, crashed)
        }));
    }
    let mut acked = Vec::new();
    let mut crashed = 0;
    for w in workers {
        let (a, c) = w.await.unwrap();
        acked.extend(a);
        crashed += c;
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    assert!(
        crashed > 0,
        "no commit crashed: the workload did not exercise recovery"
    );
    assert!(snapshot_reads.load(Ordering::Relaxed) > 0);

    let checker = Client::builder(Arc::clone(&store))
        .config(config)
        .build()
        .await
        .unwrap();
    resolve_all(&checker, ACCOUNTS).await;
    resolve_all(&checker, TRANSFERS).await;
    let (sum, n) = workload::total(&checker).await.unwrap();
    assert_eq!(
        (sum, n),
        (expected, ACCOUNT_COUNT),
        "total not conserved after resolution"
    );
    for id in acked.iter().step_by(7) {
        assert!(
            workload::receipt_exists(&checker, id).await.unwrap(),
            "acknowledged transfer {id} lost"
        );
    }
    assert!(checker.locks(ACCOUNTS).await.unwrap().is_empty());
}

/// Many concurrent committers with durable commits (every commit syncs the store): a smoke test
/// of the backend's `sync` under concurrency. (sled's `flush_async` deadlocked against sled's
/// transaction commit lock in the release-mode demo with 8 durable committers; this test did not
/// reproduce that hang, so it guards the grouped `sync` only loosely.)
pub async fn durable_concurrent_commits<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let config = TxnConfig {
        durable_commits: true,
        ..fast_config()
    };
    let setup = Client::builder(Arc::clone(&store))
        .config(config)
        .build()
        .await
        .unwrap();
    workload::create_accounts(&setup, 20, INITIAL)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for w in 0..16usize {
        let client = setup.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25usize {
                let from = (w + i) % 20;
                let to = (from + 1 + i % 19) % 20;
                workload::transfer(&client, from, to, 3, &format!("d{w}-{i}"))
                    .await
                    .unwrap();
            }
        }));
    }
    let joined = tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(tasks))
        .await
        .expect("durable committers stalled (sync deadlock?)");
    for j in joined {
        j.unwrap();
    }
    assert_eq!(workload::total(&setup).await.unwrap(), (20 * INITIAL, 20));
}
