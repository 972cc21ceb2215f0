//! The narrow interface this backend needs from TiKV: optimistic transactions with get, range
//! scan, put, delete, commit; snapshots; and PD timestamps. [`crate::client`] implements it on
//! `tikv_client::TransactionClient`; [`crate::fake`] is an in-process double with the same
//! semantics, so the mapping and its retry logic run in CI without a cluster.

use async_trait::async_trait;

/// What went wrong, classified for the retry logic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvError {
    /// Another transaction wrote a key this one wrote (optimistic write conflict). Nothing was
    /// applied; the whole transaction may be re-run.
    Conflict(String),
    /// The cluster could not be reached or answered too late. For a commit the outcome is
    /// unknown; for a read, nothing happened.
    Unavailable(String),
    /// Anything else (bad configuration, protocol errors).
    Other(String),
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::Conflict(m) => write!(f, "write conflict: {m}"),
            KvError::Unavailable(m) => write!(f, "unavailable: {m}"),
            KvError::Other(m) => write!(f, "{m}"),
        }
    }
}

/// A TiKV-like transactional key-value service.
#[async_trait]
pub trait KvApi: Send + Sync + 'static {
    /// A transaction handle.
    type Txn: KvTxn;

    /// Begins an optimistic read-write transaction at a fresh start timestamp (committed with
    /// one-phase commit when all its keys live in one region).
    async fn begin(&self) -> Result<Self::Txn, KvError>;

    /// A read-only view at a fresh timestamp.
    async fn snapshot(&self) -> Result<Self::Txn, KvError>;

    /// A fresh timestamp from the cluster's timestamp oracle.
    async fn current_timestamp(&self) -> Result<u64, KvError>;

    /// Lets the cluster drop MVCC versions no read at or above `safe_point` (a timestamp of
    /// the cluster's oracle) can see: TiKV's GC.
    async fn gc(&self, safe_point: u64) -> Result<(), KvError>;

    /// Names the cluster this client reaches: equal for two clients of one cluster, different
    /// for different clusters (the first half of [`crate::TikvStore`]'s store id).
    fn cluster_id(&self) -> String;
}

/// One transaction: reads at its start timestamp (plus its own writes), buffered writes.
#[async_trait]
pub trait KvTxn: Send {
    /// The value of `key`.
    async fn get(&mut self, key: Vec<u8>) -> Result<Option<Vec<u8>>, KvError>;

    /// Up to `limit` pairs with `start <= key < end`, in key order.
    async fn scan(
        &mut self,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError>;

    /// Buffers a put.
    async fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), KvError>;

    /// Buffers a delete.
    async fn delete(&mut self, key: Vec<u8>) -> Result<(), KvError>;

    /// Commits atomically: every buffered write or none.
    async fn commit(&mut self) -> Result<(), KvError>;

    /// Abandons the transaction (read-only transactions end this way too).
    async fn rollback(&mut self) -> Result<(), KvError>;
}
