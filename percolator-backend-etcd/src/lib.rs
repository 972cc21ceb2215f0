//! # percolator-backend-etcd
//!
//! A [`RowStore`] on an [etcd](https://etcd.io) v3 cluster: a real Raft-replicated, linearizable
//! key-value store that runs on one machine in seconds (`cargo xtask cluster up`), so that the
//! distributed protocol — many processes, one shared store, members dying — is exercised end to
//! end. TiKV remains the backend for large clusters; etcd suits small ones (its whole data set
//! lives on every member, within etcd's storage quota).
//!
//! ## Mapping
//! - Key = `enc(namespace) ++ 'f' ++ family ++ CellKey::encode(table, row, column, ts)` (as in the
//!   TiKV backend): one key range per family (the notify family scans alone), rows contiguous
//!   inside it, versions newest first. The namespace lets several stores share a cluster.
//! - `read_row`: the ranges of every requested family of the row in **one read-only etcd
//!   transaction** (one linearizable read at one revision); if the cluster's `--max-txn-ops`
//!   forces several, the later ones read at the first one's revision.
//! - `scan`: pages of 512 keys over the family's key range, every page at the revision of the
//!   first (one consistent snapshot).
//! - `mutate_rows`: see "What is atomic".
//!
//! ## What is atomic (the correctness argument)
//! Each row mutation is **one etcd transaction** (nested inside a top-level transaction that
//! carries several rows): its conditions are the transaction's compares, its mutations the
//! success branch. etcd evaluates the compares and applies the branch atomically at one revision
//! of its linearizable, replicated state machine, so a row mutation is applied exactly when its
//! conditions hold at the moment it applies: Bigtable's conditional single-row mutation, which
//! is all Percolator needs. `Absent` becomes `CREATE == 0` over the versions' key range (true
//! exactly when no key exists in it), `Exists` becomes `CREATE > 0` on one key, `Equals` becomes
//! `VALUE ==` on one key (module `mutate`). The failure branch reads back what the compares
//! looked at, at the same revision, so a failed item reports its first failing condition.
//!
//! ## Why a row never splits across two etcd transactions
//! A row mutation's compares and operations are built into a single nested transaction; a
//! batch is cut only **between** row mutations. A row mutation that alone exceeds the cluster's
//! limits (`--max-txn-ops` compares or operations, `--max-request-bytes`) is rejected with
//! `StoreError::TooLarge` before anything is sent, never split. Two mutations of the same row in
//! one batch go to different etcd transactions, in batch order, because etcd evaluates every
//! compare of a transaction before applying any of its operations.
//!
//! ## How ambiguity is settled
//! Every error after which a write may have been applied — a timeout, a connection reset
//! mid-request, `leader changed`, `request timed out` — is returned as
//! `StoreError::Unavailable` ("outcome unknown"), never as a failure. The transaction layer
//! then settles it by reading back: a prewrite recognises its own lock, a primary commit reads
//! its write record, a cleaner re-reads the lock. Errors that prove nothing happened (no
//! connection to the member, `no leader`, `too many requests`, an expired token) are retried
//! by the client on the next endpoint, with backoff. Reads are retried on any transient error.
//! See [`client`].
//!
//! ## Limits and durability
//! Encoded cell keys up to 4 KiB, values up to 1 MiB (etcd's default request limit is 1.5 MiB),
//! at most [`EtcdConfig::max_txn_ops`] conditions and mutations per row mutation (etcd's
//! default 128; the transaction layer checks a transaction's rows against it before writing any
//! lock). etcd acknowledges a write once a majority of members has it in their fsynced logs, so
//! data is durable when `mutate_rows` returns; `sync` has nothing to do. Snapshot reads are not
//! tracked (`tracks_snapshot_reads` is false): single-row transactions commit in two phases.
//!
//! ## Running it
//! ```text
//! apt-get install etcd-server                 # etcd 3.4
//! cargo xtask cluster up                      # 3 members on loopback; prints the endpoints
//! cargo xtask conformance --backend etcd      # starts (and stops) its own cluster
//! ```

pub mod client;
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod keys;
mod mutate;
pub mod proto;
mod read;

use async_trait::async_trait;
use bytes::Bytes;
use percolator_core::backend::validate::validate_batch;
use percolator_core::{
    Cell, MutationOutcome, ReadRow, RowCells, RowMutation, RowStore, Scan, StoreError, StoreLimits,
};

pub use client::{EtcdClient, EtcdError};
pub use config::{EtcdConfig, EtcdTls};
pub use keys::MAX_NAMESPACE;

use crate::client::Idempotence;
use crate::keys::Layout;

/// Largest value of one cell.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;
/// Largest encoded cell key.
pub const MAX_KEY_BYTES: usize = 4 * 1024;

pub(crate) fn store_error(e: EtcdError) -> StoreError {
    match e {
        EtcdError::Unavailable(m) | EtcdError::Ambiguous(m) | EtcdError::Compacted(m) => {
            StoreError::Unavailable(m)
        }
        EtcdError::TooLarge(m) => StoreError::InvalidInput(m),
        EtcdError::Rejected(m) => StoreError::Backend {
            message: m,
            source: None,
        },
    }
}

/// The etcd-backed store.
pub struct EtcdStore {
    client: std::sync::Arc<EtcdClient>,
    layout: Layout,
    namespace: Vec<u8>,
    id: String,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("cluster", &self.client.cluster())
            .field("id", &self.id)
            .finish()
    }
}

impl EtcdStore {
    /// Connects to the cluster of `config` and uses `namespace` as this store's key prefix.
    pub async fn connect(config: &EtcdConfig, namespace: &[u8]) -> Result<Self, StoreError> {
        let client = EtcdClient::connect(config).await.map_err(store_error)?;
        Self::new(std::sync::Arc::new(client), namespace)
    }

    /// A store over an existing client (several namespaces can share one client).
    pub fn new(client: std::sync::Arc<EtcdClient>, namespace: &[u8]) -> Result<Self, StoreError> {
        let layout = Layout::new(namespace)?;
        Ok(Self {
            id: format!("etcd:{}/{}", client.cluster(), namespace.escape_ascii()),
            client,
            layout,
            namespace: namespace.to_vec(),
        })
    }

    /// The namespace this store's keys live under.
    pub fn namespace(&self) -> &[u8] {
        &self.namespace
    }

    /// The client.
    pub fn client(&self) -> &std::sync::Arc<EtcdClient> {
        &self.client
    }

    /// A raw etcd put of `key` under this store's namespace, outside the `RowStore` contract:
    /// the benchmarks' baseline for one write round trip.
    pub async fn raw_put(&self, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        let k = [self.layout.namespace(), b"r", key].concat();
        self.client
            .put(Bytes::from(k), value)
            .await
            .map_err(store_error)
    }

    /// A raw linearizable etcd get of `key` under this store's namespace (the read baseline).
    pub async fn raw_get(&self, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
        let k = [self.layout.namespace(), b"r", key].concat();
        let answer = self
            .client
            .range(proto::RangeRequest {
                key: Bytes::from(k),
                ..proto::RangeRequest::default()
            })
            .await
            .map_err(store_error)?;
        Ok(answer.kvs.into_iter().next().map(|kv| kv.value))
    }
}

#[async_trait]
impl RowStore for EtcdStore {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn limits(&self) -> StoreLimits {
        let ops = self.client.config().max_txn_ops;
        StoreLimits::new(MAX_KEY_BYTES, MAX_VALUE_BYTES, 16 * 1024)
            .with_persistent(true)
            .with_durable_after_sync(true)
            .with_distributed(true)
            // A nested transaction gets what its parent leaves: at least one operation.
            .with_max_row_ops(ops.saturating_sub(1))
    }

    /// `etcd:` the sorted endpoint URLs, `/`, and the namespace (non-printable bytes escaped).
    fn store_id(&self) -> String {
        self.id.clone()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        read::read_row(&self.client, &self.layout, request).await
    }

    async fn read_rows(&self, requests: Vec<ReadRow>) -> Result<Vec<Vec<Vec<Cell>>>, StoreError> {
        read::read_rows(&self.client, &self.layout, requests).await
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        read::scan(&self.client, &self.layout, &request).await
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        validate_batch(&batch, &self.limits())?;
        let config = self.client.config();
        let (max_ops, max_request) = (config.max_txn_ops, config.max_request_bytes);
        let prepared = batch
            .iter()
            .map(|item| mutate::prepare(&self.layout, item, max_ops, max_request))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outcomes = vec![None; prepared.len()];
        for indexes in mutate::plan(&prepared, max_ops, max_request) {
            let txn = mutate::envelope(&prepared, &indexes);
            let answer = self
                .client
                .txn(txn, Idempotence::Write)
                .await
                .map_err(store_error)?;
            for (position, &i) in indexes.iter().enumerate() {
                outcomes[i] = Some(mutate::outcome(
                    &prepared[i],
                    answer.responses.get(position),
                )?);
            }
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.ok_or_else(|| StoreError::Corrupt("a row mutation got no etcd answer".into()))
            })
            .collect()
    }

    /// Nothing to do: etcd acknowledges a write once a majority has it in fsynced logs.
    async fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn tables(&self) -> Result<Vec<Bytes>, StoreError> {
        read::tables(&self.client, &self.layout).await
    }

    /// etcd keeps every revision of every key until the cluster is compacted, so deleting
    /// versions alone would not bound its size. Each run records the cluster's revision under the
    /// namespace's GC mark and compacts up to the mark the previous run recorded: only a scan
    /// older than a whole GC interval can meet a compacted revision (and restarts, see
    /// `read::scan`). The safe point plays no part: cells' versions are keys of their own, and
    /// no read needs an old etcd revision of them. Compaction is cluster-wide — it also trims
    /// other namespaces' history, which none of them reads either.
    async fn collect_garbage(&self, _safe_point: u64) -> Result<(), StoreError> {
        let mark = Bytes::from(self.layout.gc_mark());
        let answer = self
            .client
            .range(proto::RangeRequest {
                key: mark.clone(),
                ..proto::RangeRequest::default()
            })
            .await
            .map_err(store_error)?;
        let now = answer.header.as_ref().map_or(0, |h| h.revision);
        let previous = answer
            .kvs
            .first()
            .and_then(|kv| <[u8; 8]>::try_from(kv.value.as_ref()).ok())
            .map(i64::from_be_bytes);
        self.client
            .put(mark, Bytes::copy_from_slice(&now.to_be_bytes()))
            .await
            .map_err(store_error)?;
        match previous {
            Some(revision) if revision > 0 && revision < now => {
                match self.client.compact(revision).await {
                    // Already compacted past it (another namespace's GC, or a re-sent call).
                    Ok(()) | Err(EtcdError::Compacted(_)) => Ok(()),
                    Err(e) => Err(store_error(e)),
                }
            }
            _ => Ok(()),
        }
    }
}
