//! [`RemoteOracle`]: the [`TimestampOracle`] of a process that uses the oracle service.
//!
//! Callers queue their requests on a channel; one driver task owns the connection. Whenever
//! fewer than [`RemoteOracleConfig::max_in_flight`] requests are out, it takes everything queued
//! (up to [`wire::MAX_COUNT`] timestamps), after giving the callers of the latest answer a few
//! scheduler turns to ask again, and sends it as one request, then hands the answer's
//! consecutive timestamps out in queue order: many callers, one round trip (the paper's
//! client-side batching). Answers come back in request order.
//!
//! **Failover.** The driver talks to one instance at a time. When it is a standby
//! ([`Status::NotLeader`]), cannot serve ([`Status::Unavailable`]), or the connection fails or
//! stalls past the request timeout, the driver moves to the next endpoint and sends the
//! unanswered requests again (a lost answer only wastes timestamps: nothing else saw them).
//! A caller waits for at most [`RemoteOracleConfig::request_timeout`], which should exceed the
//! service's lease: a failover waits out the old leader's lease.
//!
//! **Why this keeps snapshot isolation.** A caller gets a timestamp only from an answer of the
//! current leader, which hands out increasing timestamps; a newer leader starts above everything
//! every older one handed out. So a timestamp asked for after another one was *received* is
//! larger, whichever instances served the two.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use futures::{SinkExt as _, StreamExt as _};
use percolator_core::{Error, Result, TimestampOracle};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use crate::wire::{self, MAX_COUNT, Request, Status};

/// How many times the driver lets other tasks run, at most, while it waits for the callers of
/// the latest answer to ask again before it sends the next request (see [`Driver::serve`]).
const MAX_GATHER_YIELDS: usize = 16;

/// How a [`RemoteOracle`] reaches the service.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RemoteOracleConfig {
    /// `host:port` of every instance of the service.
    pub endpoints: Vec<String>,
    /// How long one caller waits for its timestamp, failovers included.
    pub request_timeout: Duration,
    /// How long connecting to one instance may take.
    pub connect_timeout: Duration,
    /// Requests out on the connection at once (pipelining). Two (the default) lets callers that
    /// ask while a request is out go at once instead of waiting for its answer.
    pub max_in_flight: usize,
}

impl RemoteOracleConfig {
    /// The service at `endpoints` with default timeouts (10 s per timestamp, 1 s per connect).
    pub fn new<I, E>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = E>,
        E: Into<String>,
    {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            max_in_flight: 2,
        }
    }

    /// Sets [`Self::request_timeout`].
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets [`Self::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`Self::max_in_flight`].
    #[must_use]
    pub fn with_max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests;
        self
    }
}

/// One caller waiting for `count` timestamps.
struct Waiter {
    count: u32,
    since: Instant,
    reply: oneshot::Sender<Result<u64>>,
}

/// The oracle service's client (see the module docs).
pub struct RemoteOracle {
    queue: mpsc::UnboundedSender<Waiter>,
    driver: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for RemoteOracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOracle").finish_non_exhaustive()
    }
}

impl Drop for RemoteOracle {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl RemoteOracle {
    /// A client of the service at `config.endpoints`; connects on first use.
    pub fn new(config: RemoteOracleConfig) -> Result<Self> {
        if config.endpoints.is_empty() {
            return Err(Error::InvalidInput(
                "the oracle service needs at least one endpoint".into(),
            ));
        }
        if config.max_in_flight == 0 {
            return Err(Error::InvalidInput(
                "max_in_flight must be at least 1".into(),
            ));
        }
        let (queue, waiting) = mpsc::unbounded_channel();
        let driver = tokio::spawn(Driver::new(config).run(waiting));
        Ok(Self { queue, driver })
    }

    /// A client of the service at `endpoints` with the default configuration.
    pub fn connect<I, E>(endpoints: I) -> Result<Self>
    where
        I: IntoIterator<Item = E>,
        E: Into<String>,
    {
        Self::new(RemoteOracleConfig::new(endpoints))
    }

    async fn request(&self, count: u64) -> Result<u64> {
        let count = u32::try_from(count)
            .ok()
            .filter(|c| (1..=MAX_COUNT).contains(c))
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "{count} timestamps in one request: the oracle service takes 1..={MAX_COUNT}"
                ))
            })?;
        let (reply, answer) = oneshot::channel();
        let waiter = Waiter {
            count,
            since: Instant::now(),
            reply,
        };
        self.queue
            .send(waiter)
            .map_err(|_| Error::Oracle("the oracle client stopped".into()))?;
        answer
            .await
            .map_err(|_| Error::Oracle("the oracle client stopped".into()))?
    }
}

#[async_trait]
impl TimestampOracle for RemoteOracle {
    async fn timestamp(&self) -> Result<u64> {
        self.request(1).await
    }

    async fn timestamps(&self, count: u64) -> Result<u64> {
        self.request(count.max(1)).await
    }
}

type Reader = FramedRead<OwnedReadHalf, LengthDelimitedCodec>;
type Writer = FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>;

/// Why a connection was given up.
enum Ended {
    /// Every [`RemoteOracle`] handle is gone.
    Closed,
    /// Try the next instance.
    Failed(String),
}

/// The task that owns the connection (see the module docs).
struct Driver {
    config: RemoteOracleConfig,
    /// Waiters not sent yet (or to be sent again), oldest first.
    pending: VecDeque<Waiter>,
    /// Sent requests, oldest first: their id and waiters.
    in_flight: VecDeque<(u64, Vec<Waiter>)>,
    endpoint: usize,
    next_id: u64,
    /// The latest failure of each endpoint, for the error a timed-out caller gets.
    failures: Vec<Option<String>>,
    /// The current connection answered a request.
    served: bool,
    /// Callers the latest answer served.
    last_answered: usize,
}

impl Driver {
    fn new(config: RemoteOracleConfig) -> Self {
        let failures = vec![None; config.endpoints.len()];
        Self {
            config,
            pending: VecDeque::new(),
            in_flight: VecDeque::new(),
            endpoint: 0,
            next_id: 1,
            failures,
            served: false,
            last_answered: 0,
        }
    }

    async fn run(mut self, mut waiting: mpsc::UnboundedReceiver<Waiter>) {
        let mut failed_in_a_row = 0usize;
        loop {
            if self.pending.is_empty() {
                match waiting.recv().await {
                    Some(waiter) => self.pending.push_back(waiter),
                    None => return,
                }
            }
            let address = self.config.endpoints[self.endpoint].clone();
            let ended = match self.connect(&address).await {
                Ok((reader, writer)) => self.serve(reader, writer, &mut waiting).await,
                Err(reason) => Ended::Failed(reason),
            };
            match ended {
                Ended::Closed => return,
                Ended::Failed(reason) => {
                    tracing::debug!(%address, %reason, "oracle client: trying the next instance");
                    self.failures[self.endpoint] = Some(reason);
                    // Unanswered requests go out again, first, to the next instance.
                    while let Some((_, waiters)) = self.in_flight.pop_back() {
                        for waiter in waiters.into_iter().rev() {
                            self.pending.push_front(waiter);
                        }
                    }
                    self.expire();
                    self.endpoint = (self.endpoint + 1) % self.config.endpoints.len();
                    failed_in_a_row = if self.served { 1 } else { failed_in_a_row + 1 };
                    self.served = false;
                    // A whole round failed: the service is failing over; pause briefly.
                    if failed_in_a_row.is_multiple_of(self.config.endpoints.len()) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    }

    async fn connect(&self, address: &str) -> std::result::Result<(Reader, Writer), String> {
        let stream = tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(address))
            .await
            .map_err(|_| format!("connecting took over {:?}", self.config.connect_timeout))?
            .map_err(|e| format!("cannot connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        Ok((
            FramedRead::new(read, wire::codec()),
            FramedWrite::new(write, wire::codec()),
        ))
    }

    /// Fails the callers that waited longer than the request timeout.
    fn expire(&mut self) {
        let timeout = self.config.request_timeout;
        let failures = &self.failures;
        let endpoints = &self.config.endpoints;
        let mut kept = VecDeque::with_capacity(self.pending.len());
        for waiter in self.pending.drain(..) {
            if waiter.since.elapsed() < timeout {
                kept.push_back(waiter);
                continue;
            }
            let tried: Vec<String> = endpoints
                .iter()
                .zip(failures)
                .map(|(e, f)| format!("{e}: {}", f.as_deref().unwrap_or("not tried")))
                .collect();
            let _ = waiter.reply.send(Err(Error::Oracle(format!(
                "no oracle instance served a timestamp within {timeout:?} ({})",
                tried.join("; ")
            ))));
        }
        self.pending = kept;
    }

    /// Sends what is pending as one request.
    async fn send_batch(&mut self, writer: &mut Writer) -> std::result::Result<(), String> {
        let mut waiters = Vec::new();
        let mut count = 0u32;
        while let Some(front) = self.pending.front() {
            if count + front.count > MAX_COUNT {
                break;
            }
            count += front.count;
            if let Some(waiter) = self.pending.pop_front() {
                waiters.push(waiter);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight.push_back((id, waiters));
        writer
            .send(wire::encode(&Request { id, count }))
            .await
            .map_err(|e| format!("cannot send: {e}"))
    }

    /// Moves every queued caller to `pending`; clears `open` once every handle is gone.
    fn take_queued(&mut self, waiting: &mut mpsc::UnboundedReceiver<Waiter>, open: &mut bool) {
        while *open {
            match waiting.try_recv() {
                Ok(waiter) => self.pending.push_back(waiter),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => *open = false,
            }
        }
    }

    /// Runs one connection until it fails or every handle is gone.
    async fn serve(
        &mut self,
        mut reader: Reader,
        mut writer: Writer,
        waiting: &mut mpsc::UnboundedReceiver<Waiter>,
    ) -> Ended {
        let mut open = true;
        loop {
            self.take_queued(waiting, &mut open);
            if !open && self.pending.is_empty() && self.in_flight.is_empty() {
                return Ended::Closed;
            }
            if !self.pending.is_empty() && self.in_flight.len() < self.config.max_in_flight {
                // Callers just handed their timestamps usually ask again at once: let them run
                // first (a few scheduler turns at most), so that they join this request instead
                // of each costing a round trip of its own. Running on another worker thread,
                // they come back a little later: one yield catches most of them, not all.
                let mut yields = 0;
                while self.pending.len() < self.last_answered && yields < MAX_GATHER_YIELDS {
                    tokio::task::yield_now().await;
                    self.take_queued(waiting, &mut open);
                    yields += 1;
                }
                if let Err(reason) = self.send_batch(&mut writer).await {
                    return Ended::Failed(reason);
                }
            }
            let deadline = self
                .in_flight
                .front()
                .and_then(|(_, w)| w.iter().map(|w| w.since).min())
                .map(|since| since + self.config.request_timeout);
            let can_send = self.in_flight.len() < self.config.max_in_flight;
            tokio::select! {
                biased;
                frame = reader.next(), if !self.in_flight.is_empty() => {
                    if let Err(reason) = self.received(frame) {
                        return Ended::Failed(reason);
                    }
                }
                waiter = waiting.recv(), if open && can_send => match waiter {
                    Some(waiter) => self.pending.push_back(waiter),
                    None => open = false,
                },
                () = sleep_until(deadline), if deadline.is_some() => {
                    return Ended::Failed("no answer within the request timeout".into());
                }
            }
        }
    }

    /// Hands an answer's timestamps to its waiters.
    fn received(
        &mut self,
        frame: Option<std::io::Result<bytes::BytesMut>>,
    ) -> std::result::Result<(), String> {
        let frame = match frame {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Err(format!("connection failed: {e}")),
            None => return Err("the instance closed the connection".into()),
        };
        let response = wire::decode_response(frame).map_err(|e| format!("bad answer: {e}"))?;
        let Some((id, waiters)) = self.in_flight.pop_front() else {
            return Err("an answer to nothing".into());
        };
        if response.id != id {
            self.in_flight.push_front((id, waiters));
            return Err(format!("answer {} to request {id}", response.id));
        }
        match response.status() {
            Status::Ok => {
                self.failures[self.endpoint] = None;
                self.served = true;
                self.last_answered = waiters.len();
                let mut next = response.first;
                for waiter in waiters {
                    let _ = waiter.reply.send(Ok(next));
                    next += u64::from(waiter.count);
                }
                Ok(())
            }
            Status::BadRequest => {
                for waiter in waiters {
                    let _ = waiter.reply.send(Err(Error::InvalidInput(format!(
                        "the oracle service refused a request: {}",
                        response.message
                    ))));
                }
                Ok(())
            }
            status @ (Status::NotLeader | Status::Unavailable) => {
                self.in_flight.push_front((id, waiters));
                Err(format!("{status:?}: {}", response.message))
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
