//! [`RemoteRowLocks`]: the lock service's client, and the observers runtime's
//! [`SharedRowLocks`].
//!
//! One driver task per endpoint owns that endpoint's connection. Callers queue lock attempts
//! and releases; the driver sends everything queued as one request, waits for its answer,
//! hands the answers out, and meanwhile the next request's callers queue up (batching, as the
//! oracle's client does). With several endpoints each row goes to one of them by hash, so
//! instances share nothing and the service scales out.
//!
//! The client fails open: when an endpoint cannot be reached, times out or answers nonsense,
//! its callers hear [`SharedLockAnswer::Unavailable`] and run their rows without a lock, and the
//! endpoint is not tried again for [`RemoteRowLocksConfig::retry_after`]. A dropped connection
//! loses nothing worth keeping: the server releases a connection's locks when it closes.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use percolator_observers::{SharedLockAnswer, SharedRowLocks};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use crate::wire::{self, MAX_FRAME, MAX_KEY_BYTES, MAX_REQUEST_BYTES, Request, RowKey};

/// Where and how a [`RemoteRowLocks`] asks.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RemoteRowLocksConfig {
    /// The service's instances, `host:port` each; rows are spread over them by hash.
    pub endpoints: Vec<String>,
    /// How long a request may take before its callers run unlocked and the connection is
    /// dropped.
    pub request_timeout: Duration,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// After a failure, how long an endpoint's callers run unlocked before it is tried again.
    pub retry_after: Duration,
}

impl RemoteRowLocksConfig {
    /// The defaults for `endpoints`: 1 s to answer, 1 s to connect, 1 s before retrying.
    pub fn new<I, E>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = E>,
        E: Into<String>,
    {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            request_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            retry_after: Duration::from_secs(1),
        }
    }

    /// Sets [`Self::request_timeout`].
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets [`Self::retry_after`].
    #[must_use]
    pub fn with_retry_after(mut self, pause: Duration) -> Self {
        self.retry_after = pause;
        self
    }
}

/// Why a client could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientConfigError {
    /// No endpoint was given.
    #[error("the lock service needs at least one endpoint")]
    NoEndpoint,
    /// An endpoint is empty.
    #[error("lock service endpoint {index} is empty")]
    EmptyEndpoint {
        /// Its position in the list.
        index: usize,
    },
    /// Not called inside a tokio runtime (the drivers are tasks).
    #[error("the lock service client must be made inside a tokio runtime")]
    NoRuntime,
}

enum Op {
    Acquire {
        keys: Vec<RowKey>,
        reply: oneshot::Sender<Vec<SharedLockAnswer>>,
    },
    Release(RowKey),
}

impl Op {
    fn cost(&self) -> usize {
        match self {
            Op::Acquire { keys, .. } => keys.iter().map(wire::row_cost).sum(),
            Op::Release(key) => wire::row_cost(key),
        }
    }
}

struct Endpoint {
    queue: mpsc::UnboundedSender<Op>,
    driver: tokio::task::JoinHandle<()>,
}

/// The lock service's client (see the module docs).
pub struct RemoteRowLocks {
    endpoints: Vec<Endpoint>,
    addresses: Vec<String>,
}

impl std::fmt::Debug for RemoteRowLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRowLocks")
            .field("endpoints", &self.addresses)
            .finish()
    }
}

impl Drop for RemoteRowLocks {
    fn drop(&mut self) {
        for endpoint in &self.endpoints {
            endpoint.driver.abort();
        }
    }
}

impl RemoteRowLocks {
    /// A client of the service at `config.endpoints`; connects on first use.
    pub fn new(config: RemoteRowLocksConfig) -> Result<Self, ClientConfigError> {
        if config.endpoints.is_empty() {
            return Err(ClientConfigError::NoEndpoint);
        }
        if let Some(index) = config.endpoints.iter().position(|e| e.trim().is_empty()) {
            return Err(ClientConfigError::EmptyEndpoint { index });
        }
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| ClientConfigError::NoRuntime)?;
        let endpoints = config
            .endpoints
            .iter()
            .map(|address| {
                let (queue, ops) = mpsc::unbounded_channel();
                let driver = runtime.spawn(drive(address.clone(), config.clone(), ops));
                Endpoint { queue, driver }
            })
            .collect();
        Ok(Self {
            endpoints,
            addresses: config.endpoints,
        })
    }

    /// A client of the service at `endpoints` with the default configuration.
    pub fn connect<I, E>(endpoints: I) -> Result<Self, ClientConfigError>
    where
        I: IntoIterator<Item = E>,
        E: Into<String>,
    {
        Self::new(RemoteRowLocksConfig::new(endpoints))
    }

    /// Which endpoint serves `key`.
    fn endpoint_of(&self, table: &[u8], row: &[u8]) -> usize {
        if self.endpoints.len() == 1 {
            return 0;
        }
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        hasher.update(&(table.len() as u64).to_le_bytes());
        hasher.update(table);
        hasher.update(row);
        // Below the endpoint count, so it fits.
        (hasher.digest() % self.endpoints.len() as u64) as usize
    }
}

#[async_trait]
impl SharedRowLocks for RemoteRowLocks {
    async fn try_lock_many(&self, rows: &[(Bytes, Bytes)]) -> Vec<SharedLockAnswer> {
        let mut answers = vec![SharedLockAnswer::Unavailable; rows.len()];
        // Per endpoint: the positions asked there, and the keys.
        let mut asks: Vec<(Vec<usize>, Vec<RowKey>)> = (0..self.endpoints.len())
            .map(|_| Default::default())
            .collect();
        for (i, (table, row)) in rows.iter().enumerate() {
            if table.len() + row.len() > MAX_KEY_BYTES {
                continue; // too long to ask for: runs without a lock
            }
            let (positions, keys) = &mut asks[self.endpoint_of(table, row)];
            positions.push(i);
            keys.push(RowKey {
                table: table.clone(),
                row: row.clone(),
            });
        }
        let mut replies = Vec::new();
        for (endpoint, (positions, keys)) in self.endpoints.iter().zip(asks) {
            if keys.is_empty() {
                continue;
            }
            let (reply, answer) = oneshot::channel();
            if endpoint.queue.send(Op::Acquire { keys, reply }).is_ok() {
                replies.push((positions, answer));
            }
        }
        for (positions, answer) in replies {
            // A driver that stopped answers nothing: those rows stay unavailable.
            if let Ok(got) = answer.await {
                for (position, got) in positions.into_iter().zip(got) {
                    answers[position] = got;
                }
            }
        }
        answers
    }

    fn unlock(&self, table: Bytes, row: Bytes) {
        if table.len() + row.len() > MAX_KEY_BYTES {
            return; // never asked for
        }
        let endpoint = &self.endpoints[self.endpoint_of(&table, &row)];
        let _ = endpoint.queue.send(Op::Release(RowKey { table, row }));
    }
}

type Connection = (
    FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>,
);

/// Owns one endpoint's connection: one request at a time, carrying everything queued.
async fn drive(
    address: String,
    config: RemoteRowLocksConfig,
    mut ops: mpsc::UnboundedReceiver<Op>,
) {
    let mut connection: Option<Connection> = None;
    let mut down_until: Option<Instant> = None;
    let mut next_id = 0_u64;
    while let Some(first) = ops.recv().await {
        let mut cost = first.cost();
        let mut batch = vec![first];
        while cost < MAX_REQUEST_BYTES {
            match ops.try_recv() {
                Ok(op) => {
                    cost += op.cost();
                    batch.push(op);
                }
                Err(_) => break,
            }
        }
        let mut request = Request {
            id: next_id,
            release: Vec::new(),
            acquire: Vec::new(),
        };
        next_id += 1;
        let mut waiters = Vec::new();
        for op in batch {
            match op {
                Op::Release(key) => request.release.push(key),
                Op::Acquire { keys, reply } => {
                    waiters.push((keys.len(), reply));
                    request.acquire.extend(keys);
                }
            }
        }
        let granted = if down_until.is_some_and(|until| Instant::now() < until) {
            None
        } else {
            let answer = exchange(&address, &config, &mut connection, &request).await;
            if answer.is_none() {
                connection = None;
                down_until = Some(Instant::now() + config.retry_after);
            } else {
                down_until = None;
            }
            answer
        };
        let mut granted = granted.map(Vec::into_iter);
        for (count, reply) in waiters {
            let answers = (0..count)
                .map(|_| match granted.as_mut().and_then(Iterator::next) {
                    Some(true) => SharedLockAnswer::Granted,
                    Some(false) => SharedLockAnswer::HeldElsewhere,
                    None => SharedLockAnswer::Unavailable,
                })
                .collect();
            let _ = reply.send(answers);
        }
    }
}

/// Sends `request` on the endpoint's connection (connecting first if needed) and reads its
/// answer: one flag per lock attempt, or `None` when that failed in any way.
async fn exchange(
    address: &str,
    config: &RemoteRowLocksConfig,
    connection: &mut Option<Connection>,
    request: &Request,
) -> Option<Vec<bool>> {
    let frame = wire::encode(request);
    if frame.len() > MAX_FRAME {
        tracing::warn!(
            bytes = frame.len(),
            "lock service request too large; rows run unlocked"
        );
        return None;
    }
    if connection.is_none() {
        let stream = match tokio::time::timeout(config.connect_timeout, TcpStream::connect(address))
            .await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                tracing::warn!(%address, error = %e, "lock service unreachable; rows run unlocked");
                return None;
            }
            Err(_) => {
                tracing::warn!(%address, "lock service connect timed out; rows run unlocked");
                return None;
            }
        };
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        *connection = Some((
            FramedRead::new(read, wire::codec()),
            FramedWrite::new(write, wire::codec()),
        ));
    }
    let (frames, out) = connection.as_mut()?;
    let round_trip = async {
        out.send(frame).await.ok()?;
        let bytes = frames.next().await?.ok()?;
        wire::decode_response(bytes).ok()
    };
    match tokio::time::timeout(config.request_timeout, round_trip).await {
        Ok(Some(response))
            if response.id == request.id && response.granted.len() == request.acquire.len() =>
        {
            Some(response.granted)
        }
        Ok(_) => {
            tracing::warn!(%address, "lock service answered nonsense or hung up; rows run unlocked");
            None
        }
        Err(_) => {
            tracing::warn!(%address, "lock service timed out; rows run unlocked");
            None
        }
    }
}
