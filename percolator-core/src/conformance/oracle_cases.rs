//! The timestamp oracle: strictly increasing under concurrency and across restarts, one shared
//! oracle per store id, a second oracle never interleaving with the first (the lease), and no
//! per-process oracle by default on a store several processes can share.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng as _;

use super::StoreFactory;
use super::faulty::{FaultyStore, is_oracle_mark};
use crate::error::Error;
use crate::oracle::{LocalOracle, TimestampOracle, shared_local_oracle};
use crate::store::RowStore;
use crate::txn::Client;

pub async fn strictly_increasing_concurrently<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    // A short window forces many concurrent refills.
    let oracle = Arc::new(
        LocalOracle::with_window(Arc::clone(&store), Duration::from_millis(25))
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

    // A second oracle on the same store in this process is refused at open: it could never
    // serve without interleaving with the first.
    drop(oracle);
    let o1 = LocalOracle::with_window(Arc::clone(&store), Duration::from_millis(16))
        .await
        .unwrap();
    o1.timestamp().await.unwrap();
    assert!(
        matches!(
            LocalOracle::with_window(Arc::clone(&store), Duration::from_millis(16)).await,
            Err(Error::Oracle(_))
        ),
        "a second oracle opened on a store that has one"
    );
}

/// Two oracles on one store never interleave: on a store several processes can share, a
/// second oracle (standing for another process: it does not know the first) gets the store
/// only once the first has let go — released it, or gone silent for a whole lease — and then
/// every timestamp it hands out is above every one the first handed out, and the first, used
/// again, stops with `Error::Oracle` instead of serving. On stores one process owns the second
/// is refused at open.
pub async fn second_oracle_never_interleaves<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let lease = Duration::from_millis(400);
    let first = LocalOracle::with_lease(Arc::clone(&store), Duration::from_millis(20), lease)
        .await
        .unwrap();
    let mut handed = vec![first.timestamp().await.unwrap()];
    if !store.limits().distributed {
        assert!(matches!(
            LocalOracle::with_lease(Arc::clone(&store), Duration::from_millis(20), lease).await,
            Err(Error::Oracle(_))
        ));
        return;
    }
    // The first keeps serving (and renewing) while a second, of "another process", tries to
    // take over: the second is kept out for as long as the first renews.
    let other_process = Arc::new(ForeignStore(Arc::clone(&store), "B"));
    // Longer than a newcomer's patience (three leases and two seconds).
    let keep_serving = async {
        let until = std::time::Instant::now() + lease * 10;
        while std::time::Instant::now() < until {
            handed.push(first.timestamp().await.unwrap());
            tokio::time::sleep(lease / 10).await;
        }
    };
    let (_, blocked) = tokio::join!(
        keep_serving,
        LocalOracle::with_lease(Arc::clone(&other_process), Duration::from_millis(20), lease)
    );
    assert!(
        matches!(blocked, Err(Error::Oracle(_))),
        "a second oracle got the store while the first was serving and renewing"
    );
    // The first goes silent (a crashed process): after its lease the second takes over, above
    // everything the first handed out, and the first never serves again.
    let second =
        LocalOracle::with_lease(Arc::clone(&other_process), Duration::from_millis(20), lease)
            .await
            .unwrap();
    let max_first = *handed.iter().max().unwrap();
    let from_second = second.timestamp().await.unwrap();
    assert!(
        from_second > max_first,
        "the second oracle handed out {from_second}, not above the first's {max_first}"
    );
    match first.timestamp().await {
        Ok(ts) => panic!("the deposed oracle handed out {ts} after {from_second}"),
        Err(Error::Oracle(_)) => {}
        Err(e) => panic!("unexpected {e:?}"),
    }
    // A released store is taken over at once.
    second.release().await.unwrap();
    let third = LocalOracle::with_lease(
        Arc::new(ForeignStore(Arc::clone(&store), "C")),
        Duration::from_millis(20),
        lease,
    );
    let third = tokio::time::timeout(lease / 2, third)
        .await
        .expect("a released store is taken over without waiting out the lease")
        .unwrap();
    assert!(third.timestamp().await.unwrap() > from_second);
}

/// On a store several processes can share, a client needs an oracle chosen explicitly (the
/// oracle service, or the cluster's own such as PD's TSO on TiKV): a per-process default would
/// interleave with other processes' timestamps. A store one process owns gets the local oracle
/// by default.
pub async fn shared_store_needs_an_explicit_oracle<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let built = Client::builder(Arc::clone(&store)).build().await;
    if store.limits().distributed {
        assert!(
            matches!(built, Err(Error::OracleRequired { .. })),
            "a client on a shared store got a per-process oracle by default"
        );
        assert!(matches!(
            Client::open(Arc::clone(&store)).await,
            Err(Error::OracleRequired { .. })
        ));
        let explicit = Client::builder(Arc::clone(&store))
            .local_oracle()
            .build()
            .await
            .unwrap();
        explicit.begin().await.unwrap();
    } else {
        built.unwrap().begin().await.unwrap();
    }
}

/// The same store seen from "another process": a wrapper with another store id, so that the
/// in-process registry of oracles does not recognise it (two processes share no memory).
struct ForeignStore<S: RowStore>(Arc<S>, &'static str);

#[deny(clippy::missing_trait_methods)]
#[async_trait::async_trait]
impl<S: RowStore> RowStore for ForeignStore<S> {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn limits(&self) -> crate::store::StoreLimits {
        self.0.limits()
    }
    fn store_id(&self) -> String {
        format!("{} seen from process {}", self.0.store_id(), self.1)
    }
    async fn read_row(
        &self,
        request: crate::store::ReadRow,
    ) -> std::result::Result<Vec<Vec<crate::store::Cell>>, crate::error::StoreError> {
        self.0.read_row(request).await
    }

    async fn read_rows(
        &self,
        requests: Vec<crate::store::ReadRow>,
    ) -> std::result::Result<Vec<Vec<Vec<crate::store::Cell>>>, crate::error::StoreError> {
        self.0.read_rows(requests).await
    }
    async fn scan(
        &self,
        request: crate::store::Scan,
    ) -> std::result::Result<Vec<crate::store::RowCells>, crate::error::StoreError> {
        self.0.scan(request).await
    }
    async fn mutate_rows(
        &self,
        batch: Vec<crate::store::RowMutation>,
    ) -> std::result::Result<Vec<crate::store::MutationOutcome>, crate::error::StoreError> {
        self.0.mutate_rows(batch).await
    }
    async fn mutate_rows_atomically(
        &self,
        batch: Vec<crate::store::RowMutation>,
    ) -> std::result::Result<crate::store::AtomicOutcome, crate::error::StoreError> {
        self.0.mutate_rows_atomically(batch).await
    }
    async fn sync(&self) -> std::result::Result<(), crate::error::StoreError> {
        self.0.sync().await
    }

    async fn tables(&self) -> std::result::Result<Vec<bytes::Bytes>, crate::error::StoreError> {
        self.0.tables().await
    }

    async fn collect_garbage(
        &self,
        safe_point: u64,
    ) -> std::result::Result<(), crate::error::StoreError> {
        self.0.collect_garbage(safe_point).await
    }
}

pub async fn monotonic_across_restarts<F: StoreFactory>(factory: &F) {
    let mut store = factory.open().await;
    let mut last = 0u64;
    for restart in 0..100 {
        let oracle = LocalOracle::with_window(Arc::clone(&store), Duration::from_millis(50))
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
    // A 1 ms window and a pause before every call: every call refills.
    let oracle = LocalOracle::with_window(Arc::clone(&store), Duration::from_millis(1))
        .await
        .unwrap();
    let mut last = 0;
    let mut take = |ts: u64| {
        assert!(ts > last, "{ts} after {last}");
        last = ts;
    };
    let pause = || tokio::time::sleep(Duration::from_millis(2));
    take(oracle.timestamp().await.unwrap());
    // The mark's compare-and-swap applies but its answer is lost: the oracle reads it back.
    store.lose_answers(1, Box::new(is_oracle_mark));
    for _ in 0..10 {
        pause().await;
        take(oracle.timestamp().await.unwrap());
    }
    // The mark is written but the sync fails: the caller gets an error, and the next call
    // finishes the same allocation instead of declaring another oracle.
    let mut failed = false;
    store.fail_syncs(1);
    for _ in 0..10 {
        pause().await;
        match oracle.timestamp().await {
            Ok(ts) => take(ts),
            Err(Error::Store(_)) => failed = true,
            Err(e) => panic!("oracle jammed: {e:?}"),
        }
    }
    assert!(failed, "the injected sync failure was not reported");
    for _ in 0..10 {
        pause().await;
        take(oracle.timestamp().await.unwrap());
    }
}

/// A clock a case sets by hand.
#[derive(Debug, Default)]
struct ManualClock(std::sync::atomic::AtomicU64);

impl crate::oracle::Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Timestamps carry the oracle's clock (milliseconds above an 18-bit counter), stay strictly
/// increasing when that clock steps back, and never reach the persisted mark even when the
/// clock jumps past it.
pub async fn timestamps_carry_oracle_time<F: StoreFactory>(factory: &F) {
    use crate::oracle::time::{first_of_ms, physical_ms};
    let store = factory.open().await;
    let clock = Arc::new(ManualClock::default());
    let at = |ms: u64| clock.0.store(ms, std::sync::atomic::Ordering::SeqCst);
    // Far ahead of every clock, so that the mark left by earlier cases is below it.
    let base = 4_000_000_000_000;
    at(base);
    let config = crate::oracle::OracleConfig::default()
        .with_window(Duration::from_millis(100))
        .with_clock(Arc::clone(&clock) as Arc<dyn crate::oracle::Clock>);
    let oracle = LocalOracle::open_with(Arc::clone(&store), config)
        .await
        .unwrap();
    let first = oracle.timestamp().await.unwrap();
    assert_eq!(
        physical_ms(first),
        base,
        "a timestamp does not carry the oracle's clock"
    );
    at(base + 40);
    let later = oracle.timestamp().await.unwrap();
    assert_eq!(physical_ms(later), base + 40);
    // The clock steps back a minute: timestamps keep increasing from where they were.
    at(base - 60_000);
    let mut last = later;
    for _ in 0..1_000 {
        let ts = oracle.timestamp().await.unwrap();
        assert!(ts > last, "{ts} after {last} with the clock stepping back");
        last = ts;
    }
    assert!(physical_ms(last) >= base + 40);
    // The clock jumps a day ahead: the oracle persists a new mark before serving there.
    at(base + 86_400_000);
    let jumped = oracle.timestamp().await.unwrap();
    assert!(jumped >= first_of_ms(base + 86_400_000));
    assert!(
        oracle.limit() > jumped,
        "served at or above the persisted mark"
    );
    // A reopened oracle starts at the persisted mark, above everything handed out.
    drop(oracle);
    let reopened = LocalOracle::open(Arc::clone(&store)).await.unwrap();
    assert!(reopened.timestamp().await.unwrap() > jumped);
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
