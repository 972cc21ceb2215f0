//! The timestamp oracle: strictly increasing under concurrency and across restarts, and one
//! shared oracle per store id.

use std::collections::HashSet;
use std::sync::Arc;

use rand::Rng as _;

use super::StoreFactory;
use super::faulty::{FaultyStore, is_oracle_mark};
use crate::error::Error;
use crate::oracle::{LocalOracle, TimestampOracle, shared_local_oracle};
use crate::store::RowStore;

pub async fn strictly_increasing_concurrently<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    // A tiny window forces many concurrent refills.
    let oracle = Arc::new(
        LocalOracle::with_window(Arc::clone(&store), 64)
            .await
            .unwrap(),
    );
    const TASKS: usize = 8;
    const EACH: usize = 2_000;
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let oracle = Arc::clone(&oracle);
        handles.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(EACH);
            for _ in 0..EACH {
                seen.push(oracle.timestamp().await.unwrap());
            }
            seen
        }));
    }
    let mut all = HashSet::new();
    for h in handles {
        let seen = h.await.unwrap();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "a caller saw timestamps go backwards"
        );
        for ts in seen {
            assert!(ts > 0, "timestamp 0 is reserved");
            assert!(all.insert(ts), "timestamp {ts} handed out twice");
        }
    }
    assert_eq!(all.len(), TASKS * EACH);
    let last = *all.iter().max().unwrap();
    assert!(
        oracle.limit() > last,
        "a timestamp at or above the persisted mark was handed out"
    );

    // A second oracle on the same store is detected instead of interleaving ranges.
    let o1 = LocalOracle::with_window(Arc::clone(&store), 16)
        .await
        .unwrap();
    o1.timestamp().await.unwrap();
    let o2 = LocalOracle::with_window(Arc::clone(&store), 16)
        .await
        .unwrap();
    let first_of_o2 = o2.timestamp().await.unwrap();
    let mut detected = false;
    for _ in 0..64 {
        match o1.timestamp().await {
            Ok(ts) => assert!(ts < first_of_o2, "o1 handed out {ts} inside o2's range"),
            Err(Error::Oracle(_)) => {
                detected = true;
                break;
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert!(detected, "two oracles on one store went unnoticed");
}

pub async fn monotonic_across_restarts<F: StoreFactory>(factory: &F) {
    let mut store = factory.open().await;
    let mut last = 0u64;
    for restart in 0..100 {
        let oracle = LocalOracle::with_window(Arc::clone(&store), 1_000)
            .await
            .unwrap();
        let n = rand::rng().random_range(1..40);
        for _ in 0..n {
            let ts = oracle.timestamp().await.unwrap();
            assert!(ts > last, "restart {restart}: {ts} after {last}");
            last = ts;
        }
        drop(oracle);
        store = factory.restart(store).await;
    }
}

pub async fn survives_lost_answers_and_failed_syncs<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let oracle = LocalOracle::with_window(Arc::clone(&store), 4)
        .await
        .unwrap();
    let mut last = 0;
    let mut take = |ts: u64| {
        assert!(ts > last, "{ts} after {last}");
        last = ts;
    };
    take(oracle.timestamp().await.unwrap());
    // The mark's compare-and-swap applies but its answer is lost: the oracle reads it back.
    store.lose_answers(1, Box::new(is_oracle_mark));
    for _ in 0..10 {
        take(oracle.timestamp().await.unwrap());
    }
    // The mark is written but the sync fails: the caller gets an error, and the next call
    // finishes the same allocation instead of declaring another oracle.
    let mut failed = false;
    store.fail_syncs(1);
    for _ in 0..10 {
        match oracle.timestamp().await {
            Ok(ts) => take(ts),
            Err(Error::Store(_)) => failed = true,
            Err(e) => panic!("oracle jammed: {e:?}"),
        }
    }
    assert!(failed, "the injected sync failure was not reported");
    for _ in 0..10 {
        take(oracle.timestamp().await.unwrap());
    }
}

/// [`RowStore::store_id`] names the data: different stores have different ids, a wrapper and a
/// restarted handle have the id of the data they reach, and the process-wide oracle is shared
/// accordingly.
pub async fn shared_by_store_id<F: StoreFactory>(factory: &F) {
    let (a, b) = (factory.open().await, factory.open().await);
    let id = a.store_id();
    assert_ne!(id, b.store_id(), "two stores share an id");
    assert_eq!(id, a.store_id(), "the id of a handle changed");
    let wrapped = Arc::new(FaultyStore::new(Arc::clone(&a)));
    assert_eq!(wrapped.store_id(), id, "a wrapper must forward store_id");
    let (of_a, of_wrapper, of_b) = (
        shared_local_oracle(&a).await.unwrap(),
        shared_local_oracle(&wrapped).await.unwrap(),
        shared_local_oracle(&b).await.unwrap(),
    );
    assert!(
        Arc::ptr_eq(&of_a, &of_wrapper),
        "a wrapper got a second oracle on the same data"
    );
    assert!(!Arc::ptr_eq(&of_a, &of_b), "two stores share an oracle");
    drop((of_a, of_wrapper, of_b, wrapped));
    let a = factory.restart(a).await;
    assert_eq!(a.store_id(), id, "a restarted handle names the same data");
}
