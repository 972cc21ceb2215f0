//! [`OracleServer`]: one instance of the oracle service.
//!
//! Every instance listens at once; **one leads**. Leading means holding the store's oracle row
//! under a lease: the instance opens a [`LocalOracle`] in standby mode, which waits until the
//! row is free (released, or unchanged for a whole lease), takes it over and starts above the
//! persisted high-water mark. While it leads, a maintenance task renews the lease at half its
//! length and persists the next window of oracle time at half the current one, so that serving
//! never waits on the store. A standby answers [`Status::NotLeader`]; a leader whose lease
//! lapsed (the store unreachable) answers [`Status::Unavailable`] and serves again only after a
//! successful renewal. A leader that finds the row taken over (it was partitioned for longer
//! than a lease) is **deposed**: it drops its oracle and waits as a standby again.
//!
//! The failover argument is [`LocalOracle`]'s: a leader serves only until `sent + lease −
//! lease/8` on its own monotonic clock after its last successful write of the row, while a
//! newcomer takes over no sooner than a whole lease after it first read that write. So two
//! instances never serve at once, even when the old leader cannot reach the store, and the
//! newcomer starts above everything the old one handed out.
//!
//! Each connection is served by its own task: it reads every request frame that has arrived,
//! answers them all from **one allocation** of consecutive timestamps, and writes the answers
//! with one flush (the paper's server-side batching).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures::{SinkExt, StreamExt as _};
use percolator_core::oracle::{LocalOracle, OracleConfig};
use percolator_core::{Error, RowStore, TimestampOracle as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::wire::{self, MAX_COUNT, Request, Response, Status};

/// Request frames answered together at most (with [`MAX_COUNT`] each, 16 Mi timestamps: 64 ms
/// of oracle time, far inside the smallest window a server accepts).
const MAX_BATCH: usize = 256;

/// The smallest window a server accepts.
const MIN_WINDOW: Duration = Duration::from_millis(100);

/// How an [`OracleServer`] leads and serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The leader's oracle: its window, lease and clock (`standby` is always set).
    pub oracle: OracleConfig,
    /// How often the leader renews its lease and persists windows ahead; well below half the
    /// lease.
    pub maintain_interval: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            oracle: OracleConfig::default(),
            maintain_interval: Duration::from_millis(250),
        }
    }
}

impl ServerConfig {
    /// Sets [`Self::oracle`].
    #[must_use]
    pub fn with_oracle(mut self, oracle: OracleConfig) -> Self {
        self.oracle = oracle;
        self
    }

    /// Sets [`Self::maintain_interval`].
    #[must_use]
    pub fn with_maintain_interval(mut self, interval: Duration) -> Self {
        self.maintain_interval = interval;
        self
    }
}

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is unusable.
    #[error("invalid oracle server configuration: {0}")]
    Config(String),
}

/// What a server has served so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStats {
    /// Allocations: groups of requests answered together.
    pub batches: u64,
    /// Requests answered with timestamps.
    pub requests: u64,
    /// Timestamps handed out.
    pub timestamps: u64,
    /// Times this instance became the leader.
    pub terms: u64,
    /// Lease renewals while leading (one per maintain interval that reached the store).
    pub renewals: u64,
}

/// Whether a server leads, and what it served: shared by its tasks and its handle.
#[derive(Default)]
struct ServerState {
    leading: AtomicBool,
    batches: AtomicU64,
    requests: AtomicU64,
    timestamps: AtomicU64,
    terms: AtomicU64,
    renewals: AtomicU64,
}

impl ServerState {
    fn stats(&self) -> ServerStats {
        ServerStats {
            batches: self.batches.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            timestamps: self.timestamps.load(Ordering::Relaxed),
            terms: self.terms.load(Ordering::Relaxed),
            renewals: self.renewals.load(Ordering::Relaxed),
        }
    }
}

/// What the tasks of one server share.
struct Shared<S: RowStore> {
    leader: ArcSwapOption<LocalOracle<S>>,
    status: Arc<ServerState>,
}

/// A running instance of the oracle service (see the module docs). Dropping it stops it
/// without releasing the lease (like a crash); [`Self::shutdown`] releases it.
pub struct OracleServer {
    local_addr: SocketAddr,
    status: Arc<ServerState>,
    stop: watch::Sender<bool>,
    accept: JoinHandle<()>,
    lead: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for OracleServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OracleServer")
            .field("local_addr", &self.local_addr)
            .field("leading", &self.is_leading())
            .finish()
    }
}

impl Drop for OracleServer {
    fn drop(&mut self) {
        self.accept.abort();
        if let Some(lead) = &self.lead {
            lead.abort();
        }
    }
}

impl OracleServer {
    /// Binds `addr` (`host:port`; port 0 picks one) and starts serving timestamps of `store`.
    pub async fn bind<S: RowStore>(
        store: Arc<S>,
        addr: &str,
        config: ServerConfig,
    ) -> Result<Self, ServerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind {
                addr: addr.to_owned(),
                source,
            })?;
        Self::start(store, listener, config)
    }

    /// Starts serving timestamps of `store` on `listener`.
    pub fn start<S: RowStore>(
        store: Arc<S>,
        listener: TcpListener,
        config: ServerConfig,
    ) -> Result<Self, ServerError> {
        if config.maintain_interval.is_zero() || config.maintain_interval * 2 >= config.oracle.lease
        {
            return Err(ServerError::Config(format!(
                "maintain interval {:?} must be positive and below half the lease {:?}",
                config.maintain_interval, config.oracle.lease
            )));
        }
        if config.oracle.window < MIN_WINDOW {
            return Err(ServerError::Config(format!(
                "window {:?} is below {MIN_WINDOW:?}",
                config.oracle.window
            )));
        }
        let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: "listener".into(),
            source,
        })?;
        let status = Arc::new(ServerState::default());
        let shared = Arc::new(Shared::<S> {
            leader: ArcSwapOption::empty(),
            status: Arc::clone(&status),
        });
        let (stop, stopped) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        let lead = tokio::spawn(lead_loop(store, config, shared, stopped));
        Ok(Self {
            local_addr,
            status,
            stop,
            accept,
            lead: Some(lead),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Whether it leads (holds the store's oracle row and may serve).
    pub fn is_leading(&self) -> bool {
        self.status.leading.load(Ordering::Acquire)
    }

    /// What it has served so far.
    pub fn stats(&self) -> ServerStats {
        self.status.stats()
    }

    /// Waits until it has renewed its lease `more` more times, for at most `limit`; whether it
    /// did. While the leader renews, no standby can take over: a test waits on this instead of
    /// a fixed time.
    pub async fn wait_for_renewals(&self, more: u64, limit: Duration) -> bool {
        let target = self.stats().renewals + more;
        let deadline = tokio::time::Instant::now() + limit;
        while self.stats().renewals < target {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Waits until it leads, for at most `limit`; whether it does.
    pub async fn wait_until_leading(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.is_leading() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Stops serving and, if it leads, releases the lease so that a standby takes over at once.
    pub async fn shutdown(mut self) {
        self.accept.abort();
        let _ = self.stop.send(true);
        if let Some(lead) = self.lead.take() {
            let _ = lead.await;
        }
    }
}

async fn accept_loop<S: RowStore>(listener: TcpListener, shared: Arc<Shared<S>>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(serve_connection(stream, peer, Arc::clone(&shared)));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "oracle server: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Leads whenever it can: waits as a standby, serves while the lease holds, steps down when
/// deposed, releases on shutdown.
async fn lead_loop<S: RowStore>(
    store: Arc<S>,
    config: ServerConfig,
    shared: Arc<Shared<S>>,
    mut stopped: watch::Receiver<bool>,
) {
    let oracle_config = config.oracle.clone().with_standby(true);
    loop {
        let opened = tokio::select! {
            opened = LocalOracle::open_with(Arc::clone(&store), oracle_config.clone()) => opened,
            _ = stopped.changed() => return,
        };
        let oracle = match opened {
            Ok(oracle) => Arc::new(oracle),
            Err(e) => {
                tracing::warn!(error = %e, "oracle server: could not take the lead; retrying");
                tokio::select! {
                    () = tokio::time::sleep(config.maintain_interval) => continue,
                    _ = stopped.changed() => return,
                }
            }
        };
        tracing::info!(
            oracle = format_args!("{:x}", oracle.id()),
            "oracle server: leading"
        );
        shared.status.terms.fetch_add(1, Ordering::Relaxed);
        shared.leader.store(Some(Arc::clone(&oracle)));
        shared.status.leading.store(true, Ordering::Release);
        let shutdown = loop {
            tokio::select! {
                () = tokio::time::sleep(config.maintain_interval) => {}
                _ = stopped.changed() => break true,
            }
            match oracle.maintain().await {
                Ok(()) => {
                    shared.status.renewals.fetch_add(1, Ordering::Relaxed);
                }
                Err(Error::Oracle(reason)) => {
                    tracing::warn!(%reason, "oracle server: deposed; standing by");
                    break false;
                }
                // The lease runs out on its own if this keeps failing; serving stops then.
                Err(e) => tracing::warn!(error = %e, "oracle server: could not renew"),
            }
        };
        shared.status.leading.store(false, Ordering::Release);
        shared.leader.store(None);
        if shutdown {
            if let Err(e) = oracle.release().await {
                tracing::warn!(error = %e, "oracle server: could not release the lease");
            }
            return;
        }
        // Connections finish the batch they hold it for; then it is gone and a new one may
        // open on the store in this process.
        while Arc::strong_count(&oracle) > 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(oracle);
    }
}

/// Answers one connection's requests, a batch at a time (see the module docs).
async fn serve_connection<S: RowStore>(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared<S>>,
) {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, wire::codec()).ready_chunks(MAX_BATCH);
    let mut out = FramedWrite::new(write, wire::codec());
    while let Some(batch) = frames.next().await {
        let mut requests = Vec::with_capacity(batch.len());
        for frame in batch {
            match frame.map(wire::decode_request) {
                Ok(Ok(request)) => requests.push(request),
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "oracle server: undecodable request");
                    return;
                }
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "oracle server: connection failed");
                    return;
                }
            }
        }
        for response in answer(&shared, &requests).await {
            if out.feed(wire::encode(&response)).await.is_err() {
                return;
            }
        }
        if SinkExt::<bytes::Bytes>::flush(&mut out).await.is_err() {
            return;
        }
    }
}

/// The responses to `requests`, all served from one allocation.
async fn answer<S: RowStore>(shared: &Shared<S>, requests: &[Request]) -> Vec<Response> {
    let valid = |r: &Request| (1..=MAX_COUNT).contains(&r.count);
    let total: u64 = requests
        .iter()
        .filter(|r| valid(r))
        .map(|r| u64::from(r.count))
        .sum();
    let allocation = match shared.leader.load_full() {
        None => Err((
            Status::NotLeader,
            "this oracle instance is a standby".to_owned(),
        )),
        Some(_) if total == 0 => Ok(0),
        Some(oracle) if !oracle.is_serving() => Err((
            Status::Unavailable,
            "this oracle instance's lease lapsed (the store is unreachable)".to_owned(),
        )),
        Some(oracle) => match oracle.timestamps(total).await {
            Ok(first) => Ok(first),
            Err(Error::Oracle(reason)) => Err((Status::NotLeader, reason)),
            Err(e) => Err((Status::Unavailable, e.to_string())),
        },
    };
    let mut next = match allocation {
        Ok(first) => first,
        Err((status, message)) => {
            return requests
                .iter()
                .map(|r| wire::failure(r.id, status, &message))
                .collect();
        }
    };
    let counters = &shared.status;
    counters.batches.fetch_add(1, Ordering::Relaxed);
    counters.timestamps.fetch_add(total, Ordering::Relaxed);
    let mut responses = Vec::with_capacity(requests.len());
    for request in requests {
        if valid(request) {
            counters.requests.fetch_add(1, Ordering::Relaxed);
            responses.push(Response {
                id: request.id,
                first: next,
                status: Status::Ok as i32,
                message: String::new(),
            });
            next += u64::from(request.count);
        } else {
            responses.push(wire::failure(
                request.id,
                Status::BadRequest,
                &format!("count {} is not in 1..={MAX_COUNT}", request.count),
            ));
        }
    }
    responses
}
