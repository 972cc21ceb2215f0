//! The server on a busy machine: its worker lease holds while every thread of its runtime is
//! taken (the renewal runs on a thread of its own), searches past the server's capacity are
//! answered 503 with `Retry-After` instead of waiting for tens of seconds, and no search fails
//! with a 500.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_backend_mem::MemStore;
use percolator_core::Client;
use percolator_core::conformance::fast_config;
use percolator_observers::conformance::test_runtime_config;
use percolator_server::wire::PageIn;
use percolator_server::{Access, Remote, RemoteError, Server, ServerConfig, Token};
use percolator_webindex::SearchOptions;

/// A server whose worker lease is short (600 ms), and a client with its token.
async fn serve() -> (Server<MemStore>, Remote, reqwest::Client) {
    let store = Arc::new(MemStore::new());
    let token = Token::generate();
    let client = Client::builder(Arc::clone(&store))
        .local_oracle()
        .config(fast_config().with_worker_lease(Duration::from_millis(600)));
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), Access::new(token.clone()))
        .with_runtime(test_runtime_config());
    let server = Server::start(client, config).await.unwrap();
    let remote = Remote::new(server.url()).with_token(token);
    (server, remote, reqwest::Client::new())
}

/// Waits (up to 2 minutes) until nothing is pending.
async fn settle(remote: &Remote) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while remote.status().await.unwrap().pending > 0 {
        assert!(Instant::now() < deadline, "never idle");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn metric(http: &reqwest::Client, server: &Server<MemStore>, name: &str) -> f64 {
    let text = http
        .get(format!("{}/metrics", server.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// Every thread of the server's runtime is blocked for three leases (what a saturated runtime
/// does to a task waiting for its turn): the lease is still renewed, so the searches after it
/// answer, and no renewal found the lease lapsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_holds_while_the_runtime_is_saturated() {
    let (server, remote, http) = serve().await;
    remote
        .ingest_pages(&[PageIn {
            url: "http://a.example/".into(),
            html: "<title>Alpha</title><p>alpha words</p>".into(),
        }])
        .await
        .unwrap();
    settle(&remote).await;
    let renewed = metric(&http, &server, "percolator_worker_lease_renewals_total").await;
    // Both runtime threads busy for 1.8 s: three times the lease.
    let blockers: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(async {
                std::thread::sleep(Duration::from_millis(1800));
            })
        })
        .collect();
    for blocker in blockers {
        blocker.await.unwrap();
    }
    let results = remote
        .search("alpha", &SearchOptions::default())
        .await
        .unwrap_or_else(|e| panic!("a search after the stall failed: {e}"));
    assert_eq!(results.total, 1);
    assert!(
        metric(&http, &server, "percolator_worker_lease_renewals_total").await > renewed + 5.0,
        "the lease was renewed while the runtime was blocked"
    );
    assert_eq!(
        metric(
            &http,
            &server,
            "percolator_worker_lease_late_renewals_total"
        )
        .await,
        0.0
    );
    server.shutdown().await.unwrap();
}

/// Many more searches at once than the server ranks at once: each either answers or is told
/// to come back (503 with `Retry-After`), none fails otherwise, and none waits longer than its
/// turn's limit plus its own ranking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_past_capacity_are_told_to_come_back() {
    let (server, remote, http) = serve().await;
    let pages: Vec<PageIn> = (0..200)
        .map(|i| PageIn {
            url: format!("http://site.example/{i}"),
            html: format!(
                "<title>page {i}</title><p>common words everywhere {} {}</p>",
                "filler ".repeat(200),
                i % 7
            ),
        })
        .collect();
    remote.ingest_pages(&pages).await.unwrap();
    settle(&remote).await;
    let searchers: Vec<_> = (0..64)
        .map(|_| {
            let remote = remote.clone();
            tokio::spawn(async move {
                let began = Instant::now();
                let answer = remote
                    .search(
                        "common words everywhere",
                        &SearchOptions::default().limit(100),
                    )
                    .await;
                (answer, began.elapsed())
            })
        })
        .collect();
    let (mut answered, mut busy) = (0, 0);
    for searcher in searchers {
        let (answer, took) = searcher.await.unwrap();
        match answer {
            Ok(results) => {
                assert_eq!(results.total, 200);
                answered += 1;
            }
            Err(RemoteError::Api {
                status: 503,
                retry_after_secs: Some(_),
                ..
            }) => busy += 1,
            Err(e) => panic!("a search failed: {e}"),
        }
        assert!(took < Duration::from_secs(60), "a search took {took:?}");
    }
    assert!(
        answered > 0,
        "{answered} answered, {busy} told to come back"
    );
    let rejected = metric(&http, &server, "percolator_searches_rejected_total").await;
    assert_eq!(rejected, f64::from(busy));
    server.shutdown().await.unwrap();
}

/// The reproducer of searches failing with 500 while pages are ingested on a busy machine:
/// 16 searchers and a crawler at once, while the runtime's threads are taken for 1.5 leases
/// at a time (as a saturated machine does to a runtime). Every search either answers or is
/// told to come back with 503 and `Retry-After`; no request fails otherwise, and every page
/// the server acknowledged is found once it is idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_during_ingest_on_a_busy_runtime_never_fail() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

    let (server, remote, http) = serve().await;
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, busy) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let searchers: Vec<_> = (0..16)
        .map(|i| {
            let (remote, stop) = (remote.clone(), Arc::clone(&stop));
            let (answered, busy) = (Arc::clone(&answered), Arc::clone(&busy));
            tokio::spawn(async move {
                let words = ["alpha", "beta words", "gamma page", "words"];
                let mut n = i;
                while !stop.load(Relaxed) {
                    n += 1;
                    match remote.search(words[n % 4], &SearchOptions::default()).await {
                        Ok(_) => answered.fetch_add(1, Relaxed),
                        Err(RemoteError::Api {
                            status: 503,
                            retry_after_secs: Some(wait),
                            ..
                        }) => {
                            tokio::time::sleep(Duration::from_millis(100 * wait.min(5))).await;
                            busy.fetch_add(1, Relaxed)
                        }
                        Err(e) => panic!("a search failed during the ingest: {e}"),
                    };
                }
            })
        })
        .collect();
    // The machine is busy: each runtime thread in turn is taken for 900 ms (1.5 leases).
    let stalls = Arc::new(AtomicU64::new(0));
    let staller = tokio::spawn({
        let (stop, stalls) = (Arc::clone(&stop), Arc::clone(&stalls));
        async move {
            while !stop.load(Relaxed) {
                tokio::spawn(async { std::thread::sleep(Duration::from_millis(900)) })
                    .await
                    .unwrap();
                stalls.fetch_add(1, Relaxed);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    let mut acknowledged = 0;
    for batch in 0..15 {
        let pages: Vec<PageIn> = (0..20)
            .map(|i| PageIn {
                url: format!("http://busy.example/{batch}/{i}"),
                html: format!("<title>alpha {batch}</title><p>beta words gamma page {i}</p>"),
            })
            .collect();
        loop {
            match remote.ingest_pages(&pages).await {
                Ok(report) => {
                    acknowledged += report.loaded;
                    break;
                }
                Err(RemoteError::Api {
                    status: 503,
                    retry_after_secs: Some(wait),
                    ..
                }) => tokio::time::sleep(Duration::from_secs(wait.min(2))).await,
                Err(e) => panic!("an upload failed: {e}"),
            }
        }
    }
    settle(&remote).await;
    // The searches go on through at least 8 stalls (about 9 s, 15 leases).
    while stalls.load(Relaxed) < 8 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Relaxed);
    for searcher in searchers {
        searcher.await.unwrap();
    }
    staller.await.unwrap();
    assert_eq!(acknowledged, 300);
    let found = remote
        .search("beta", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(found.total, 300, "every acknowledged page is searchable");
    assert!(
        answered.load(Relaxed) > 0,
        "{} told to come back",
        busy.load(Relaxed)
    );
    // The lease never lapsed: its renewals run on a thread the stalls do not take.
    assert_eq!(
        metric(
            &http,
            &server,
            "percolator_worker_lease_late_renewals_total"
        )
        .await,
        0.0
    );
    server.shutdown().await.unwrap();
}
