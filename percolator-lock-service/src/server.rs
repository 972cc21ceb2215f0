//! [`LockServer`]: one instance of the lock service.
//!
//! The locks live in memory, in shards of `(table, row) → (holder, expiry)`, so connections
//! never contend on one mutex. A holder is a connection: what it was granted is released when
//! it asks, when it closes (the kernel closes a killed worker's sockets, so a dead worker's
//! rows are free at once), or when the lock is older than [`LockServerConfig::lock_ttl`] and
//! another connection asks for it (a worker that hangs with its connection open).
//!
//! Each connection is served by its own task: it reads every request frame that has arrived,
//! answers each, and writes the answers with one flush.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{FutureExt as _, SinkExt, StreamExt as _};
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::wire::{self, Request, Response, RowKey};

const SHARDS: usize = 64;

/// How a [`LockServer`] serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LockServerConfig {
    /// How long a lock holds against other connections if its holder neither releases it nor
    /// closes its connection. Runs longer than this may be joined by another worker (waste,
    /// not harm); the default is a worker's lease.
    pub lock_ttl: Duration,
}

impl Default for LockServerConfig {
    fn default() -> Self {
        Self {
            lock_ttl: Duration::from_secs(10),
        }
    }
}

impl LockServerConfig {
    /// Sets [`Self::lock_ttl`].
    #[must_use]
    pub fn with_lock_ttl(mut self, ttl: Duration) -> Self {
        self.lock_ttl = ttl;
        self
    }
}

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockServerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is unusable.
    #[error("invalid lock server configuration: {0}")]
    Config(String),
}

/// What a server has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockServerStats {
    /// Connections accepted.
    pub connections: u64,
    /// Requests answered.
    pub requests: u64,
    /// Lock attempts granted.
    pub granted: u64,
    /// Lock attempts refused (another connection held the row).
    pub refused: u64,
    /// Locks released on request.
    pub released: u64,
    /// Locks released because their holder's connection closed.
    pub released_on_close: u64,
    /// Locks granted over another holder's expired lock.
    pub expired_taken_over: u64,
    /// Locks held now.
    pub held: u64,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    requests: AtomicU64,
    granted: AtomicU64,
    refused: AtomicU64,
    released: AtomicU64,
    released_on_close: AtomicU64,
    expired_taken_over: AtomicU64,
}

/// A lock: which connection holds it, and until when it holds against others.
#[derive(Clone, Copy)]
struct Hold {
    holder: u64,
    expires: Instant,
}

/// The lock table, sharded by row hash.
struct Table {
    shards: Vec<Mutex<HashMap<RowKey, Hold>>>,
    hasher: std::collections::hash_map::RandomState,
    ttl: Duration,
    counters: Counters,
}

impl Table {
    fn new(ttl: Duration) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            ttl,
            counters: Counters::default(),
        }
    }

    fn shard(&self, key: &RowKey) -> &Mutex<HashMap<RowKey, Hold>> {
        // The shard count divides u64's range evenly enough for a hash.
        &self.shards[(self.hasher.hash_one(key) % SHARDS as u64) as usize]
    }

    /// Locks `key` for `holder` unless another holder's lock on it is still in force.
    fn acquire(&self, holder: u64, key: &RowKey, now: Instant) -> bool {
        let mut shard = self.shard(key).lock();
        let hold = Hold {
            holder,
            expires: now + self.ttl,
        };
        match shard.get_mut(key) {
            None => {
                shard.insert(key.clone(), hold);
            }
            Some(current) if current.holder == holder => *current = hold,
            Some(current) if current.expires <= now => {
                *current = hold;
                self.counters
                    .expired_taken_over
                    .fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => {
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        self.counters.granted.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Releases `key` if `holder` holds it; whether it did.
    fn release(&self, holder: u64, key: &RowKey) -> bool {
        let mut shard = self.shard(key).lock();
        if shard.get(key).is_some_and(|hold| hold.holder == holder) {
            shard.remove(key);
            return true;
        }
        false
    }

    fn held(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().len() as u64).sum()
    }
}

/// A running instance of the lock service. Dropping it stops it, and every lock with it.
pub struct LockServer {
    local_addr: SocketAddr,
    table: Arc<Table>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for LockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl Drop for LockServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl LockServer {
    /// Binds `addr` (`host:port`; port 0 picks one) and starts serving.
    pub async fn bind(addr: &str, config: LockServerConfig) -> Result<Self, LockServerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| LockServerError::Bind {
                addr: addr.to_owned(),
                source,
            })?;
        Self::start(listener, config)
    }

    /// Starts serving on `listener`.
    pub fn start(listener: TcpListener, config: LockServerConfig) -> Result<Self, LockServerError> {
        if config.lock_ttl.is_zero() {
            return Err(LockServerError::Config("lock TTL must be positive".into()));
        }
        let local_addr = listener
            .local_addr()
            .map_err(|source| LockServerError::Bind {
                addr: "listener".into(),
                source,
            })?;
        let table = Arc::new(Table::new(config.lock_ttl));
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&table)));
        Ok(Self {
            local_addr,
            table,
            accept,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What it has done so far.
    pub fn stats(&self) -> LockServerStats {
        let c = &self.table.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LockServerStats {
            connections: load(&c.connections),
            requests: load(&c.requests),
            granted: load(&c.granted),
            refused: load(&c.refused),
            released: load(&c.released),
            released_on_close: load(&c.released_on_close),
            expired_taken_over: load(&c.expired_taken_over),
            held: self.table.held(),
        }
    }

    /// Stops serving: connections are cut and every lock is dropped.
    pub fn shutdown(self) {
        drop(self);
    }
}

async fn accept_loop(listener: TcpListener, table: Arc<Table>) {
    let mut connections = JoinSet::new();
    let mut next_holder = 0_u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    next_holder += 1;
                    table.counters.connections.fetch_add(1, Ordering::Relaxed);
                    connections.spawn(serve_connection(stream, peer, next_holder, Arc::clone(&table)));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lock server: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves one connection, the holder `holder`, until it closes or sends garbage; then
/// releases everything it holds.
async fn serve_connection(stream: TcpStream, peer: SocketAddr, holder: u64, table: Arc<Table>) {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, wire::codec());
    let mut out = FramedWrite::new(write, wire::codec());
    let mut holds: HashSet<RowKey> = HashSet::new();
    'serve: while let Some(frame) = frames.next().await {
        let mut frame = Some(frame);
        // Every frame that has arrived is answered before one flush.
        while let Some(next) = frame.take() {
            let request = match next
                .map_err(|e| e.to_string())
                .and_then(|bytes| wire::decode_request(bytes).map_err(|e| e.to_string()))
            {
                Ok(request) => request,
                Err(reason) => {
                    tracing::warn!(%peer, %reason, "lock server: bad frame; closing the connection");
                    break 'serve;
                }
            };
            let response = answer(&table, holder, &mut holds, request);
            if out.feed(wire::encode(&response)).await.is_err() {
                break 'serve;
            }
            frame = frames.next().now_or_never().flatten();
        }
        if SinkExt::<bytes::Bytes>::flush(&mut out).await.is_err() {
            break;
        }
    }
    let mut released = 0;
    for key in &holds {
        if table.release(holder, key) {
            released += 1;
        }
    }
    table
        .counters
        .released_on_close
        .fetch_add(released, Ordering::Relaxed);
}

fn answer(table: &Table, holder: u64, holds: &mut HashSet<RowKey>, request: Request) -> Response {
    table.counters.requests.fetch_add(1, Ordering::Relaxed);
    for key in request.release {
        if table.release(holder, &key) {
            table.counters.released.fetch_add(1, Ordering::Relaxed);
        }
        holds.remove(&key);
    }
    let now = Instant::now();
    let granted = request
        .acquire
        .into_iter()
        .map(|key| {
            let granted = table.acquire(holder, &key, now);
            if granted {
                holds.insert(key);
            }
            granted
        })
        .collect();
    Response {
        id: request.id,
        granted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn key(row: &'static str) -> RowKey {
        RowKey {
            table: Bytes::from_static(b"t"),
            row: Bytes::from_static(row.as_bytes()),
        }
    }

    #[test]
    fn one_holder_per_row_until_released_or_expired() {
        let table = Table::new(Duration::from_secs(10));
        let now = Instant::now();
        assert!(table.acquire(1, &key("a"), now));
        assert!(
            table.acquire(1, &key("a"), now),
            "the holder asking again keeps it"
        );
        assert!(!table.acquire(2, &key("a"), now));
        assert!(!table.release(2, &key("a")), "not the holder's to release");
        assert!(table.release(1, &key("a")));
        assert!(table.acquire(2, &key("a"), now));
        let later = now + Duration::from_secs(11);
        assert!(table.acquire(3, &key("a"), later), "expired: taken over");
        assert_eq!(table.counters.expired_taken_over.load(Ordering::Relaxed), 1);
        assert!(
            !table.release(2, &key("a")),
            "the old holder's release does not end it"
        );
        assert_eq!(table.held(), 1);
    }
}
