//! The lock service over loopback, as workers use it: one holder per row, releases, a dead
//! holder's locks freed when its connection closes, expiry of a hung holder's locks, a server
//! restart (clients fail open, then reconnect), garbage on the wire, rows too long to ask for,
//! batching of concurrent callers, and rows spread over two instances.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_lock_service::{LockServer, LockServerConfig, RemoteRowLocks, RemoteRowLocksConfig};
use percolator_observers::{SharedLockAnswer, SharedRowLocks};
use tokio::io::AsyncWriteExt as _;

use SharedLockAnswer::{Granted, HeldElsewhere, Unavailable};

fn row(name: &str) -> (Bytes, Bytes) {
    (Bytes::from_static(b"docs"), Bytes::from(name.to_owned()))
}

async fn server() -> LockServer {
    LockServer::bind("127.0.0.1:0", LockServerConfig::default())
        .await
        .unwrap()
}

fn client(server: &LockServer) -> RemoteRowLocks {
    RemoteRowLocks::connect([server.local_addr().to_string()]).unwrap()
}

/// Asks for `rows` until every answer is `want` (a release travels with the next request, so
/// it lands a moment after `unlock` returns), for at most 5 s.
async fn until(locks: &RemoteRowLocks, rows: &[(Bytes, Bytes)], want: SharedLockAnswer) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = locks.try_lock_many(rows).await;
        if got.iter().all(|a| *a == want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still {got:?}, waiting for {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_per_row_until_released() {
    let server = server().await;
    let (a, b) = (client(&server), client(&server));
    let rows = [row("a"), row("b")];
    assert_eq!(a.try_lock_many(&rows).await, vec![Granted, Granted]);
    assert_eq!(
        a.try_lock_many(&rows[..1]).await,
        vec![Granted],
        "the holder again"
    );
    assert_eq!(
        b.try_lock_many(&[row("a"), row("c")]).await,
        vec![HeldElsewhere, Granted]
    );
    b.unlock(row("a").0, row("a").1); // not b's: changes nothing
    a.unlock(row("b").0, row("b").1);
    until(&b, &[row("b")], Granted).await;
    assert_eq!(b.try_lock_many(&[row("a")]).await, vec![HeldElsewhere]);
    let stats = server.stats();
    assert_eq!(stats.held, 3, "{stats:?}"); // a: a; b: b, c
    assert!(stats.refused >= 2 && stats.released == 1, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_locks_go_with_its_connection() {
    let server = server().await;
    let (a, b) = (client(&server), client(&server));
    let rows: Vec<_> = (0..50).map(|i| row(&format!("r{i}"))).collect();
    assert!(a.try_lock_many(&rows).await.iter().all(|x| *x == Granted));
    assert!(
        b.try_lock_many(&rows)
            .await
            .iter()
            .all(|x| *x == HeldElsewhere)
    );
    drop(a); // the worker dies: its driver and connection end
    until(&b, &rows, Granted).await;
    assert_eq!(server.stats().released_on_close, 50, "{:?}", server.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_holders_locks_expire() {
    let ttl = Duration::from_millis(300);
    let server = LockServer::bind(
        "127.0.0.1:0",
        LockServerConfig::default().with_lock_ttl(ttl),
    )
    .await
    .unwrap();
    let (a, b) = (client(&server), client(&server));
    assert_eq!(a.try_lock_many(&[row("x")]).await, vec![Granted]);
    let taken = Instant::now();
    assert_eq!(b.try_lock_many(&[row("x")]).await, vec![HeldElsewhere]);
    // `a` stays connected and silent, like a hung worker.
    until(&b, &[row("x")], Granted).await;
    assert!(taken.elapsed() >= ttl, "granted before the TTL ran out");
    assert_eq!(server.stats().expired_taken_over, 1);
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_fail_open_while_the_service_is_down_and_come_back() {
    let first = server().await;
    let address = first.local_addr().to_string();
    let locks = RemoteRowLocks::new(
        RemoteRowLocksConfig::new([address.clone()]).with_retry_after(Duration::from_millis(50)),
    )
    .unwrap();
    assert_eq!(locks.try_lock_many(&[row("a")]).await, vec![Granted]);
    first.shutdown();
    // The cut connection, then the refused reconnects: the rows run unlocked.
    until(&locks, &[row("a")], Unavailable).await;
    let second = LockServer::bind(&address, LockServerConfig::default())
        .await
        .unwrap();
    // Nothing survived the restart (the service keeps nothing), and the client reconnects.
    until(&locks, &[row("a"), row("b")], Granted).await;
    assert_eq!(second.stats().held, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_answers_unavailable() {
    // A port nothing listens on: bound, then closed.
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let locks = RemoteRowLocks::connect([address]).unwrap();
    assert_eq!(
        locks.try_lock_many(&[row("a"), row("b")]).await,
        vec![Unavailable, Unavailable]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_closes_that_connection_only_and_frees_its_locks() {
    let server = server().await;
    let (good, other) = (client(&server), client(&server));
    assert_eq!(good.try_lock_many(&[row("a")]).await, vec![Granted]);
    let mut raw = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    // A frame of 8 bytes that is no protobuf request, then a frame longer than the limit.
    raw.write_all(&[0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
        .await
        .unwrap();
    raw.write_all(&[0x7f, 0xff, 0xff, 0xff]).await.unwrap();
    let mut buf = [0_u8; 16];
    let read = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut raw, &mut buf),
    )
    .await
    .expect("the server closes a connection that sends garbage");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert_eq!(other.try_lock_many(&[row("a")]).await, vec![HeldElsewhere]);
    assert_eq!(good.try_lock_many(&[row("b")]).await, vec![Granted]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_too_long_to_ask_for_run_unlocked() {
    let server = server().await;
    let locks = client(&server);
    let long = (
        Bytes::from_static(b"docs"),
        Bytes::from(vec![b'x'; 70 * 1024]),
    );
    assert_eq!(
        locks
            .try_lock_many(&[row("a"), long.clone(), row("b")])
            .await,
        vec![Granted, Unavailable, Granted]
    );
    locks.unlock(long.0, long.1); // never asked for: nothing to send
    assert_eq!(server.stats().held, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_share_requests() {
    let server = server().await;
    let locks = Arc::new(client(&server));
    let callers = 16;
    let per_caller = 200;
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let mut granted = 0;
                for i in 0..per_caller {
                    let answer = locks.try_lock_many(&[row(&format!("{c}-{i}"))]).await;
                    granted += usize::from(answer == vec![Granted]);
                }
                granted
            })
        })
        .collect();
    let mut granted = 0;
    for task in tasks {
        granted += task.await.unwrap();
    }
    assert_eq!(granted, callers * per_caller);
    let stats = server.stats();
    assert_eq!(stats.granted, (callers * per_caller) as u64);
    // One request at a time per connection: callers that queue while one is out share the next.
    assert!(
        stats.requests < (callers * per_caller) as u64,
        "{} requests for {} calls: nothing batched",
        stats.requests,
        callers * per_caller
    );
    eprintln!(
        "{} calls in {} requests ({:.1} per request)",
        callers * per_caller,
        stats.requests,
        (callers * per_caller) as f64 / stats.requests as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_spread_over_two_instances() {
    let (one, two) = (server().await, server().await);
    let endpoints = [one.local_addr().to_string(), two.local_addr().to_string()];
    let (a, b) = (
        RemoteRowLocks::connect(endpoints.clone()).unwrap(),
        RemoteRowLocks::connect(endpoints).unwrap(),
    );
    let rows: Vec<_> = (0..200).map(|i| row(&format!("r{i}"))).collect();
    assert!(a.try_lock_many(&rows).await.iter().all(|x| *x == Granted));
    assert!(
        b.try_lock_many(&rows)
            .await
            .iter()
            .all(|x| *x == HeldElsewhere),
        "both clients send each row to the same instance"
    );
    let (held_one, held_two) = (one.stats().held, two.stats().held);
    assert_eq!(held_one + held_two, 200);
    assert!(held_one > 50 && held_two > 50, "{held_one} / {held_two}");
}

#[test]
fn a_client_needs_an_endpoint_and_a_runtime() {
    let none: [&str; 0] = [];
    assert!(RemoteRowLocks::connect(none).is_err());
    let err = RemoteRowLocks::connect(["127.0.0.1:1"]).unwrap_err();
    assert!(err.to_string().contains("tokio runtime"), "{err}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let err = RemoteRowLocks::connect(["127.0.0.1:1", " "]).unwrap_err();
    assert!(err.to_string().contains("endpoint 1"), "{err}");
}
