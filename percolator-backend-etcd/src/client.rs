//! A small etcd v3 gRPC client: the KV calls the store needs, over tonic channels to every
//! endpoint, with authentication, failover and a classification of every error by what it means
//! for the request's outcome.
//!
//! Outcome classes ([`EtcdError`]):
//! - **not sent / refused before apply** (no connection to the member, `no leader`, `too many
//!   requests`, an expired auth token): the request did nothing; [`EtcdClient`] retries it on the
//!   next endpoint with backoff, reads and writes alike.
//! - **ambiguous** (timeouts, a connection reset mid-request, `leader changed`, `request timed
//!   out`): a write may or may not have been applied. Reads are retried; writes are reported as
//!   [`EtcdError::Ambiguous`] and the store returns `StoreError::Unavailable`, which the
//!   transaction layer settles by reading back. A write is never reported as failed when it may
//!   have applied.
//! - **rejected** (too large, too many operations, permission denied, invalid argument): nothing
//!   was applied and retrying cannot help.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use percolator_core::internal::backoff::Backoff;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};

use crate::config::EtcdConfig;
use crate::proto::{self, paths};

/// The gRPC metadata key of etcd's `WithRequireLeader` (`rpctypes.MetadataRequireLeaderKey`).
const REQUIRE_LEADER_KEY: &str = "hasleader";
/// What a failed call means for its outcome (see the module docs).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdError {
    /// The cluster could not be reached or refused before applying; nothing happened.
    #[error("etcd unavailable: {0}")]
    Unavailable(String),
    /// The request may or may not have been applied.
    #[error("etcd outcome unknown: {0}")]
    Ambiguous(String),
    /// The cluster rejected the request (nothing applied, retrying cannot help).
    #[error("etcd rejected the request: {0}")]
    Rejected(String),
    /// The request was too large for the cluster's limits (nothing applied).
    #[error("etcd: {0}")]
    TooLarge(String),
    /// A read at a revision that has been compacted away.
    #[error("etcd: revision compacted: {0}")]
    Compacted(String),
}

/// How to treat a gRPC status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Nothing applied; try again (elsewhere).
    Retry,
    /// The auth token expired; authenticate again, then retry.
    Reauthenticate,
    /// Maybe applied.
    Ambiguous,
    Compacted,
    TooLarge,
    Rejected,
}

fn classify(status: &Status) -> Class {
    let message = status.message();
    let has = |needle: &str| message.contains(needle);
    match status.code() {
        Code::Unauthenticated if has("invalid auth token") || has("token") => Class::Reauthenticate,
        Code::OutOfRange if has("compacted") => Class::Compacted,
        Code::InvalidArgument | Code::FailedPrecondition
            if has("too large") || has("too many operations") =>
        {
            Class::TooLarge
        }
        Code::ResourceExhausted if has("too many requests") => Class::Retry,
        Code::ResourceExhausted if has("message length") || has("larger than max") => {
            Class::TooLarge
        }
        // The connection was never made: the request did not leave this process.
        Code::Unavailable
            if has("tcp connect error")
                || has("error trying to connect")
                || has("Connection refused")
                || has("no leader")
                || has("not leader")
                || has("not capable") =>
        {
            Class::Retry
        }
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Cancelled
        | Code::Unknown
        | Code::Aborted
        | Code::Internal => Class::Ambiguous,
        _ => Class::Rejected,
    }
}

fn error_of(class: Class, what: &str, status: &Status) -> EtcdError {
    let message = format!("{what}: {}", status.message());
    match class {
        Class::Retry | Class::Reauthenticate => EtcdError::Unavailable(message),
        Class::Ambiguous => EtcdError::Ambiguous(message),
        Class::Compacted => EtcdError::Compacted(message),
        Class::TooLarge => EtcdError::TooLarge(message),
        Class::Rejected => EtcdError::Rejected(format!("{message} ({:?})", status.code())),
    }
}

/// Whether a call may be re-sent after an ambiguous failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idempotence {
    /// A read: re-sending is always safe.
    Read,
    /// A write: re-sent only when it provably did nothing.
    Write,
}

/// Connections to one etcd cluster. Cheap to share (`Arc`); calls from many tasks multiplex
/// over one HTTP/2 connection per member.
#[derive(Debug)]
pub struct EtcdClient {
    endpoints: Vec<(String, Channel)>,
    /// The endpoint calls go to first; moves on when that one fails.
    preferred: AtomicUsize,
    token: RwLock<Option<MetadataValue<tonic::metadata::Ascii>>>,
    config: EtcdConfig,
    /// Identifies the cluster for `store_id`: its endpoints, sorted.
    cluster: Arc<str>,
}

impl EtcdClient {
    /// Connections to `config`'s endpoints (lazily: no member needs to be up yet), and a token
    /// if credentials are configured.
    pub async fn connect(config: &EtcdConfig) -> Result<Self, EtcdError> {
        if config.endpoints.is_empty() {
            return Err(EtcdError::Rejected("no etcd endpoint configured".into()));
        }
        let tls = match &config.tls {
            None => None,
            Some(tls) => Some(tls_config(tls)?),
        };
        let mut endpoints = Vec::with_capacity(config.endpoints.len());
        for raw in &config.endpoints {
            let url = if raw.contains("://") {
                raw.clone()
            } else if tls.is_some() {
                format!("https://{raw}")
            } else {
                format!("http://{raw}")
            };
            let mut endpoint = Endpoint::from_shared(url.clone())
                .map_err(|e| EtcdError::Rejected(format!("bad etcd endpoint {raw:?}: {e}")))?
                .connect_timeout(config.connect_timeout)
                .timeout(config.request_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(Duration::from_secs(5));
            if let Some(tls) = &tls {
                endpoint = endpoint
                    .tls_config(tls.clone())
                    .map_err(|e| EtcdError::Rejected(format!("TLS for {raw:?}: {e}")))?;
            }
            endpoints.push((url, endpoint.connect_lazy()));
        }
        let mut names: Vec<&str> = endpoints.iter().map(|(u, _)| u.as_str()).collect();
        names.sort_unstable();
        let client = Self {
            cluster: names.join(",").into(),
            endpoints,
            preferred: AtomicUsize::new(0),
            token: RwLock::new(None),
            config: config.clone(),
        };
        client.authenticate().await?;
        client.probe().await?;
        Ok(client)
    }

    /// Fails fast, naming every endpoint, when no member answers at all (a wrong address
    /// would otherwise surface as a retried "outcome unknown" on the first write).
    async fn probe(&self) -> Result<(), EtcdError> {
        let mut errors = Vec::new();
        for index in 0..self.endpoints.len() {
            match self.status(index).await {
                Ok(_) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok(());
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(EtcdError::Unavailable(format!(
            "no etcd member answers at {}: {}",
            self.cluster,
            errors.join("; ")
        )))
    }

    /// The sorted endpoint URLs (what identifies the cluster).
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The configuration.
    pub fn config(&self) -> &EtcdConfig {
        &self.config
    }

    /// `Range` (linearizable unless `request.serializable`).
    pub async fn range(
        &self,
        request: proto::RangeRequest,
    ) -> Result<proto::RangeResponse, EtcdError> {
        self.call(paths::RANGE, request, Idempotence::Read).await
    }

    /// `Txn`; `idempotence` says whether an ambiguous failure may be re-sent.
    pub(crate) async fn txn(
        &self,
        request: proto::TxnRequest,
        idempotence: Idempotence,
    ) -> Result<proto::TxnResponse, EtcdError> {
        self.call(paths::TXN, request, idempotence).await
    }

    /// `Txn` sent as a write: never re-sent after an ambiguous failure (a conditional write
    /// applied once must not be applied again). For callers outside the `RowStore` contract,
    /// such as the benchmarks' transactions on etcd's own mini-transactions.
    pub async fn txn_once(
        &self,
        request: proto::TxnRequest,
    ) -> Result<proto::TxnResponse, EtcdError> {
        self.txn(request, Idempotence::Write).await
    }

    /// `Put` of one key (benchmarks' raw baseline); never re-sent after an ambiguous failure.
    pub async fn put(&self, key: bytes::Bytes, value: bytes::Bytes) -> Result<(), EtcdError> {
        let request = proto::PutRequest {
            key,
            value,
            lease: 0,
        };
        self.call::<_, proto::PutResponse>(paths::PUT, request, Idempotence::Write)
            .await
            .map(|_| ())
    }

    /// `Compact`: drops the cluster's history before `revision` (every namespace's). Re-sent
    /// after an ambiguous failure: compacting twice to one revision is harmless (the second
    /// answers [`EtcdError::Compacted`]).
    pub async fn compact(&self, revision: i64) -> Result<(), EtcdError> {
        let request = proto::CompactionRequest {
            revision,
            physical: false,
        };
        self.call::<_, proto::CompactionResponse>(paths::COMPACT, request, Idempotence::Read)
            .await
            .map(|_| ())
    }

    /// `Status` of the member at `endpoint` (index into the configured endpoints).
    pub async fn status(&self, endpoint: usize) -> Result<proto::StatusResponse, EtcdError> {
        let (url, channel) = self
            .endpoints
            .get(endpoint)
            .ok_or_else(|| EtcdError::Rejected(format!("no endpoint {endpoint}")))?;
        self.unary(channel, paths::STATUS, proto::StatusRequest {})
            .await
            .map_err(|s| error_of(classify(&s), url, &s))
    }

    async fn authenticate(&self) -> Result<(), EtcdError> {
        let Some((name, password)) = &self.config.user else {
            return Ok(());
        };
        let request = proto::AuthenticateRequest {
            name: name.clone(),
            password: password.clone(),
        };
        let mut last = None;
        for attempt in 0..self.endpoints.len().max(1) * 2 {
            let (url, channel) = &self.endpoints[attempt % self.endpoints.len()];
            match self
                .unary::<_, proto::AuthenticateResponse>(
                    channel,
                    paths::AUTHENTICATE,
                    request.clone(),
                )
                .await
            {
                Ok(answer) => {
                    let token = MetadataValue::try_from(answer.token.as_str()).map_err(|_| {
                        EtcdError::Rejected("etcd returned an unusable auth token".into())
                    })?;
                    *self.token.write() = Some(token);
                    return Ok(());
                }
                Err(status) => match classify(&status) {
                    Class::Retry | Class::Ambiguous => {
                        last = Some(error_of(Class::Retry, url, &status))
                    }
                    class => return Err(error_of(class, "authenticate", &status)),
                },
            }
        }
        Err(last.unwrap_or_else(|| EtcdError::Unavailable("authenticate: no endpoint".into())))
    }

    /// One call with failover: tries the preferred endpoint, moves on to the next on failures
    /// that allow it (every failure for reads; only "nothing happened" failures for writes),
    /// with backoff, within the configured number of attempts.
    async fn call<Req, Resp>(
        &self,
        path: &'static str,
        request: Req,
        idempotence: Idempotence,
    ) -> Result<Resp, EtcdError>
    where
        Req: prost::Message + Clone + 'static,
        Resp: prost::Message + Default + 'static,
    {
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(500));
        let attempts = self.config.attempts.max(1);
        let mut last = None;
        for _ in 0..attempts {
            let index = self.preferred.load(Ordering::Relaxed) % self.endpoints.len();
            let (url, channel) = &self.endpoints[index];
            let status = match self.unary(channel, path, request.clone()).await {
                Ok(answer) => return Ok(answer),
                Err(status) => status,
            };
            let class = classify(&status);
            let error = error_of(class, url, &status);
            match (class, idempotence) {
                (Class::Reauthenticate, _) => {
                    self.authenticate().await?;
                }
                (Class::Retry, _) | (Class::Ambiguous, Idempotence::Read) => {
                    // This member is down or cut off from the leader: prefer the next one.
                    let _ = self.preferred.compare_exchange(
                        index,
                        (index + 1) % self.endpoints.len(),
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    tracing::debug!(path, error = %error, "etcd call failed; trying again");
                    backoff.wait().await;
                }
                _ => return Err(error),
            }
            last = Some(error);
        }
        Err(last.unwrap_or_else(|| EtcdError::Unavailable(format!("{path}: no attempt made"))))
    }

    async fn unary<Req, Resp>(
        &self,
        channel: &Channel,
        path: &'static str,
        request: Req,
    ) -> Result<Resp, Status>
    where
        Req: prost::Message + 'static,
        Resp: prost::Message + Default + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(channel.clone())
            .max_decoding_message_size(self.config.max_response_bytes)
            .max_encoding_message_size(usize::MAX);
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(format!("error trying to connect: {e}")))?;
        let mut request = tonic::Request::new(request);
        request.set_timeout(self.config.request_timeout);
        // etcd's "require leader" on the key-value calls: a member that has no leader answers
        // `no leader` at once (nothing applied; the call moves on to another member) instead
        // of holding the request until the client's timeout, whose outcome is then unknown. A
        // member's status is worth having without a leader too.
        if path.starts_with("/etcdserverpb.KV/") {
            request
                .metadata_mut()
                .insert(REQUIRE_LEADER_KEY, MetadataValue::from_static("true"));
        }
        if let Some(token) = self.token.read().clone() {
            request.metadata_mut().insert("token", token);
        }
        let codec = tonic::codec::ProstCodec::<Req, Resp>::default();
        grpc.unary(request, PathAndQuery::from_static(path), codec)
            .await
            .map(tonic::Response::into_inner)
    }
}

fn tls_config(tls: &crate::config::EtcdTls) -> Result<ClientTlsConfig, EtcdError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| EtcdError::Rejected(format!("read {}: {e}", path.display())))
    };
    let mut config = ClientTlsConfig::new();
    if let Some(ca) = &tls.ca {
        config = config.ca_certificate(Certificate::from_pem(read(ca)?));
    }
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    if let Some(domain) = &tls.domain {
        config = config.domain_name(domain.clone());
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_by_what_they_mean_for_the_outcome() {
        let cases = [
            (
                Status::unavailable(
                    "error trying to connect: tcp connect error: Connection refused (os error 111)",
                ),
                Class::Retry,
            ),
            (Status::unavailable("etcdserver: no leader"), Class::Retry),
            (
                Status::resource_exhausted("etcdserver: too many requests"),
                Class::Retry,
            ),
            (
                Status::unavailable("etcdserver: leader changed"),
                Class::Ambiguous,
            ),
            (
                Status::unavailable("etcdserver: request timed out"),
                Class::Ambiguous,
            ),
            (
                Status::deadline_exceeded("Timeout expired"),
                Class::Ambiguous,
            ),
            (
                Status::unknown("h2 protocol error: connection reset"),
                Class::Ambiguous,
            ),
            (
                Status::invalid_argument("etcdserver: too many operations in txn request"),
                Class::TooLarge,
            ),
            (
                Status::invalid_argument("etcdserver: request is too large"),
                Class::TooLarge,
            ),
            (
                Status::out_of_range("etcdserver: mvcc: required revision has been compacted"),
                Class::Compacted,
            ),
            (
                Status::unauthenticated("etcdserver: invalid auth token"),
                Class::Reauthenticate,
            ),
            (
                Status::permission_denied("etcdserver: permission denied"),
                Class::Rejected,
            ),
            (
                Status::invalid_argument("etcdserver: duplicate key given in txn request"),
                Class::Rejected,
            ),
        ];
        for (status, class) in cases {
            assert_eq!(classify(&status), class, "{status:?}");
        }
        // A write that may have applied is never reported as failed.
        let ambiguous = Status::unavailable("etcdserver: request timed out");
        assert!(matches!(
            error_of(classify(&ambiguous), "txn", &ambiguous),
            EtcdError::Ambiguous(_)
        ));
    }
}
