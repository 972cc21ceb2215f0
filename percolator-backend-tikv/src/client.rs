//! [`KvApi`] on `tikv_client::TransactionClient` 0.4, and the error classification the retry
//! logic depends on.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use tikv_client::{
    CheckLevel, Config, Error as TikvError, Transaction, TransactionClient, TransactionOptions,
};

use crate::api::{KvApi, KvError, KvTxn};

/// How to reach a TiKV cluster.
///
/// `#[non_exhaustive]` so that options can be added: start from [`TikvConfig::new`] and change
/// what you need with the `with_*` setters.
///
/// ```
/// # use std::time::Duration;
/// # use percolator_backend_tikv::TikvConfig;
/// let config = TikvConfig::new(["127.0.0.1:2379"]).with_timeout(Duration::from_secs(2));
/// assert_eq!(config.timeout, Duration::from_secs(2));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TikvConfig {
    /// PD endpoints (`host:port`); give several for availability.
    pub pd_endpoints: Vec<String>,
    /// Request timeout passed to tikv-client.
    pub timeout: Duration,
    /// TLS: (CA, client certificate, client key) paths, passed to tikv-client as is.
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
}

impl TikvConfig {
    /// Plain-text connection to these PD endpoints with a 10 s timeout.
    pub fn new(pd_endpoints: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            pd_endpoints: pd_endpoints.into_iter().map(Into::into).collect(),
            timeout: Duration::from_secs(10),
            tls: None,
        }
    }

    /// Sets [`Self::pd_endpoints`].
    #[must_use]
    pub fn with_pd_endpoints(
        mut self,
        pd_endpoints: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.pd_endpoints = pd_endpoints.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`Self::timeout`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`Self::tls`]: `Some((ca, certificate, key))` paths, or `None` for plain text.
    #[must_use]
    pub fn with_tls(mut self, tls: Option<(PathBuf, PathBuf, PathBuf)>) -> Self {
        self.tls = tls;
        self
    }
}

/// A connected TiKV cluster.
pub struct TikvClient {
    client: TransactionClient,
    /// `tikv:` and the sorted PD endpoints ([`KvApi::cluster_id`]).
    cluster_id: String,
}

impl TikvClient {
    /// Connects to PD. Fails with [`KvError::Unavailable`] if PD cannot be reached in time.
    pub async fn connect(config: &TikvConfig) -> Result<Self, KvError> {
        if config.pd_endpoints.is_empty() {
            return Err(KvError::Other("no PD endpoint given".into()));
        }
        let mut tikv = Config::default().with_timeout(config.timeout);
        if let Some((ca, cert, key)) = &config.tls {
            tikv = tikv.with_security(ca.clone(), cert.clone(), key.clone());
        }
        let connect = TransactionClient::new_with_config(config.pd_endpoints.clone(), tikv);
        let client = tokio::time::timeout(config.timeout, connect)
            .await
            .map_err(|_| {
                KvError::Unavailable(format!(
                    "PD at {:?} did not answer within {:?}",
                    config.pd_endpoints, config.timeout
                ))
            })?
            .map_err(|e| {
                // Whatever tikv-client says while connecting, the cluster is not usable from here.
                KvError::Unavailable(format!(
                    "could not connect to PD at {:?}: {e}",
                    config.pd_endpoints
                ))
            })?;
        let mut endpoints = config.pd_endpoints.clone();
        endpoints.sort();
        endpoints.dedup();
        Ok(Self {
            client,
            cluster_id: format!("tikv:{}", endpoints.join(",")),
        })
    }
}

fn options() -> TransactionOptions {
    // A transaction dropped without commit/rollback (a cancelled future) must not panic.
    TransactionOptions::new_optimistic()
        .try_one_pc()
        .drop_check(CheckLevel::Warn)
}

/// Maps tikv-client errors onto the three cases the retry logic distinguishes.
pub fn classify(error: TikvError) -> KvError {
    fn is_conflict(e: &TikvError) -> bool {
        match e {
            TikvError::KeyError(k) => k.conflict.is_some() || !k.retryable.is_empty(),
            TikvError::MultipleKeyErrors(all) | TikvError::ExtractedErrors(all) => {
                all.iter().any(is_conflict)
            }
            TikvError::PessimisticLockError { .. } => false,
            _ => false,
        }
    }
    if is_conflict(&error) {
        return KvError::Conflict(error.to_string());
    }
    match error {
        TikvError::UndeterminedError(inner) => {
            KvError::Unavailable(format!("commit outcome undetermined: {inner}"))
        }
        e @ (TikvError::Grpc(_)
        | TikvError::GrpcAPI(_)
        | TikvError::Io(_)
        | TikvError::Channel(_)
        | TikvError::Canceled(_)
        | TikvError::RegionError(_)
        | TikvError::LeaderNotFound { .. }
        | TikvError::RegionForKeyNotFound { .. }
        | TikvError::RegionForRangeNotFound { .. }
        | TikvError::RegionNotFoundInResponse { .. }
        | TikvError::NoCurrentRegions
        | TikvError::EntryNotFoundInRegionCache) => KvError::Unavailable(e.to_string()),
        other => KvError::Other(other.to_string()),
    }
}

/// A transaction on a real cluster.
pub struct TikvTxn {
    txn: Transaction,
}

#[async_trait]
impl KvApi for TikvClient {
    type Txn = TikvTxn;

    async fn begin(&self) -> Result<TikvTxn, KvError> {
        let txn = self
            .client
            .begin_with_options(options())
            .await
            .map_err(classify)?;
        Ok(TikvTxn { txn })
    }

    async fn snapshot(&self) -> Result<TikvTxn, KvError> {
        let txn = self
            .client
            .begin_with_options(options().read_only())
            .await
            .map_err(classify)?;
        Ok(TikvTxn { txn })
    }

    async fn current_timestamp(&self) -> Result<u64, KvError> {
        use tikv_client::TimestampExt as _;
        Ok(self
            .client
            .current_timestamp()
            .await
            .map_err(classify)?
            .version())
    }

    /// Resolves TiKV's own locks below `safe_point` and hands it to PD, which lets every TiKV
    /// node drop older versions (tikv-client's `gc`).
    async fn gc(&self, safe_point: u64) -> Result<(), KvError> {
        use tikv_client::TimestampExt as _;
        self.client
            .gc(tikv_client::Timestamp::from_version(safe_point))
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// `tikv:` and the sorted PD endpoints it was given. (The same cluster reached through a
    /// different set of PD endpoints gets a different id; give every process the same list.)
    fn cluster_id(&self) -> String {
        self.cluster_id.clone()
    }
}

#[async_trait]
impl KvTxn for TikvTxn {
    async fn get(&mut self, key: Vec<u8>) -> Result<Option<Vec<u8>>, KvError> {
        self.txn.get(key).await.map_err(classify)
    }

    async fn scan(
        &mut self,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
        if start >= end {
            return Ok(Vec::new());
        }
        let pairs = self.txn.scan(start..end, limit).await.map_err(classify)?;
        Ok(pairs
            .map(|pair| {
                let (key, value) = pair.into();
                (Vec::<u8>::from(key), value)
            })
            .collect())
    }

    async fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), KvError> {
        self.txn.put(key, value).await.map_err(classify)
    }

    async fn delete(&mut self, key: Vec<u8>) -> Result<(), KvError> {
        self.txn.delete(key).await.map_err(classify)
    }

    async fn commit(&mut self) -> Result<(), KvError> {
        self.txn.commit().await.map(|_| ()).map_err(classify)
    }

    async fn rollback(&mut self) -> Result<(), KvError> {
        self.txn.rollback().await.map_err(classify)
    }
}
