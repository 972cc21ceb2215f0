//! The peer baseline on etcd: the same frames on etcd's own mini-transactions, used the way its
//! STM (`clientv3/concurrency`) uses them. A frame reads at one revision (the first read fixes
//! it; reads of several rows go out together), buffers its writes, and commits with one `Txn`
//! that compares every key it read or writes against that revision (`mod_revision < revision +
//! 1`: untouched since) and, if they all hold, applies the writes. A failed compare re-runs the
//! frame. Keys live under a namespace of their own (`tpce-peer/<random>/`), one key per row
//! (`table \0 row`, as on sled and fjall).
//!
//! **Isolation.** Every read of a frame sees the cluster at one revision, and the commit fails if
//! any key the frame read or writes changed after it: serializable for what a frame reads by key
//! (etcd STM's `SerializableSnapshot`, with written keys checked too, so also no lost update).
//! Rows a prefix scan returned are checked like any read; a row inserted into a scanned range is
//! not (no phantom protection: snapshot isolation for scans, which is what Percolator gives).
//! Read-only frames read one revision and commit nothing. So the peer's isolation is at least
//! ours.
//!
//! **Load.** A load frame writes up to a few hundred new rows without reading any; where that
//! is more than the cluster's `--max-txn-ops`, its writes go in several `Txn`s (the load is not
//! measured, and nothing reads the rows before it ends).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use percolator_backend_etcd::{EtcdClient, EtcdConfig, proto};
use percolator_core::{Error, Result};

use super::check::{self, InvariantReport};
use super::engine::{Executed, MAX_ATTEMPTS};
use super::frames::{self, TxnInput};
use super::kv::{Kv, sled_key};
use super::market::Market;
use super::peer::{Peer, PeerCore};
use super::schema::Scale;

fn etcd_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Application(format!("etcd peer {what}: {e}"))
}

/// etcd's `range_end` for the keys starting with `prefix`: the first key past them, or `\0`
/// (etcd's "to the end of the key space") when there is none.
fn range_end(prefix: &[u8]) -> Bytes {
    super::kv::prefix_end(prefix).map_or(Bytes::from_static(&[0]), Bytes::from)
}

/// One frame's view of etcd: reads at one revision, buffered writes, the keys to compare.
struct EtcdKv<'a> {
    client: &'a EtcdClient,
    namespace: &'a [u8],
    /// The revision every read of the frame reads at, fixed by its first read.
    revision: Option<i64>,
    /// Keys the frame read (their rows as of `revision`).
    read: BTreeSet<Bytes>,
    /// Buffered writes: `None` deletes.
    writes: BTreeMap<Bytes, Option<Bytes>>,
}

impl<'a> EtcdKv<'a> {
    fn new(client: &'a EtcdClient, namespace: &'a [u8]) -> Self {
        Self {
            client,
            namespace,
            revision: None,
            read: BTreeSet::new(),
            writes: BTreeMap::new(),
        }
    }

    fn key(&self, table: &str, row: &[u8]) -> Bytes {
        Bytes::from([self.namespace, &sled_key(table, row)].concat())
    }

    /// A range read at the frame's revision (fixing it if this is the first read).
    async fn range(
        &mut self,
        key: Bytes,
        range_end: Bytes,
        limit: i64,
    ) -> Result<Vec<proto::KeyValue>> {
        let answer = self
            .client
            .range(proto::RangeRequest {
                key,
                range_end,
                limit,
                revision: self.revision.unwrap_or(0),
                ..proto::RangeRequest::default()
            })
            .await
            .map_err(|e| etcd_error("read", e))?;
        if self.revision.is_none() {
            self.revision = answer.header.map(|h| h.revision);
        }
        Ok(answer.kvs)
    }

    /// Reads `keys` (none buffered) at the frame's revision: in one read-only `Txn` when it is
    /// the frame's first read (which fixes the revision), else all at once.
    async fn read_keys(&mut self, keys: &[Bytes]) -> Result<Vec<Option<Bytes>>> {
        let values = match self.revision {
            None if keys.len() > 1 => {
                let request = proto::TxnRequest {
                    compare: Vec::new(),
                    success: keys
                        .iter()
                        .map(|key| proto::RequestOp {
                            request: Some(proto::request_op::Request::RequestRange(
                                proto::RangeRequest {
                                    key: key.clone(),
                                    ..proto::RangeRequest::default()
                                },
                            )),
                        })
                        .collect(),
                    failure: Vec::new(),
                };
                let answer = self
                    .client
                    .txn_once(request)
                    .await
                    .map_err(|e| etcd_error("batch read", e))?;
                self.revision = answer.header.map(|h| h.revision);
                answer
                    .responses
                    .into_iter()
                    .map(|op| match op.response {
                        Some(proto::response_op::Response::ResponseRange(r)) => {
                            r.kvs.into_iter().next().map(|kv| kv.value)
                        }
                        _ => None,
                    })
                    .collect()
            }
            None => {
                let mut values = Vec::with_capacity(keys.len());
                for key in keys {
                    let kvs = self.range(key.clone(), Bytes::new(), 1).await?;
                    values.push(kvs.into_iter().next().map(|kv| kv.value));
                }
                values
            }
            Some(revision) => {
                let reads = keys.iter().map(|key| {
                    self.client.range(proto::RangeRequest {
                        key: key.clone(),
                        revision,
                        ..proto::RangeRequest::default()
                    })
                });
                futures::future::try_join_all(reads)
                    .await
                    .map_err(|e| etcd_error("read", e))?
                    .into_iter()
                    .map(|r| r.kvs.into_iter().next().map(|kv| kv.value))
                    .collect()
            }
        };
        self.read.extend(keys.iter().cloned());
        Ok(values)
    }

    /// Commits the buffered writes if nothing the frame read or writes changed since its
    /// revision: `Ok(false)` on a conflict.
    async fn commit(self) -> Result<bool> {
        if self.writes.is_empty() {
            return Ok(true);
        }
        let max_ops = self.client.config().max_txn_ops.max(1);
        let compare: Vec<proto::Compare> = match self.revision {
            // Nothing read: blind writes (the load) have nothing to compare.
            None => Vec::new(),
            Some(revision) => self
                .read
                .iter()
                .chain(self.writes.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|key| proto::Compare {
                    result: proto::CompareResult::Less as i32,
                    target: proto::CompareTarget::Mod as i32,
                    key: key.clone(),
                    target_union: Some(proto::compare::TargetUnion::ModRevision(revision + 1)),
                    range_end: Bytes::new(),
                })
                .collect(),
        };
        let ops: Vec<proto::RequestOp> = self
            .writes
            .into_iter()
            .map(|(key, value)| proto::RequestOp {
                request: Some(match value {
                    Some(value) => proto::request_op::Request::RequestPut(proto::PutRequest {
                        key,
                        value,
                        lease: 0,
                    }),
                    None => {
                        proto::request_op::Request::RequestDeleteRange(proto::DeleteRangeRequest {
                            key,
                            range_end: Bytes::new(),
                        })
                    }
                }),
            })
            .collect();
        if compare.len() > max_ops || (!compare.is_empty() && ops.len() > max_ops) {
            return Err(Error::TooLarge {
                what: "keys one TPC-E frame reads or writes on the etcd peer (--max-txn-ops)",
                size: compare.len().max(ops.len()),
                limit: max_ops,
            });
        }
        for chunk in ops.chunks(max_ops) {
            let answer = self
                .client
                .txn_once(proto::TxnRequest {
                    compare: compare.clone(),
                    success: chunk.to_vec(),
                    failure: Vec::new(),
                })
                .await
                .map_err(|e| etcd_error("commit", e))?;
            if !answer.succeeded {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Kv for EtcdKv<'_> {
    async fn get(&mut self, table: &'static str, row: &[u8]) -> Result<Option<Bytes>> {
        let key = self.key(table, row);
        if let Some(buffered) = self.writes.get(&key) {
            return Ok(buffered.clone());
        }
        Ok(self.read_keys(&[key]).await?.pop().flatten())
    }

    async fn get_many(&mut self, rows: &[(&'static str, Bytes)]) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<Bytes> = rows.iter().map(|(t, r)| self.key(t, r)).collect();
        let unbuffered: Vec<Bytes> = keys
            .iter()
            .filter(|k| !self.writes.contains_key(*k))
            .cloned()
            .collect();
        let mut read = self.read_keys(&unbuffered).await?.into_iter();
        Ok(keys
            .iter()
            .map(|k| match self.writes.get(k) {
                Some(buffered) => buffered.clone(),
                None => read.next().flatten(),
            })
            .collect())
    }

    async fn scan_prefix(
        &mut self,
        table: &'static str,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let start = self.key(table, prefix);
        let end = range_end(&start);
        let skip = self.namespace.len() + table.len() + 1;
        // Rows the frame wrote in the range count as they are buffered.
        let buffered: Vec<(Bytes, Option<Bytes>)> = self
            .writes
            .range(start.clone()..end.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let fetch = limit.saturating_add(buffered.len());
        let kvs = self
            .range(start, end, i64::try_from(fetch).unwrap_or(i64::MAX))
            .await?;
        let mut rows: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        for kv in kvs {
            self.read.insert(kv.key.clone());
            rows.insert(kv.key, kv.value);
        }
        for (key, value) in buffered {
            match value {
                Some(value) => rows.insert(key, value),
                None => rows.remove(&key),
            };
        }
        Ok(rows
            .into_iter()
            .take(limit)
            .map(|(k, v)| (k.slice(skip.min(k.len())..), v))
            .collect())
    }

    fn put(&mut self, table: &'static str, row: &[u8], value: Bytes) -> Result<()> {
        let key = self.key(table, row);
        self.writes.insert(key, Some(value));
        Ok(())
    }

    fn delete(&mut self, table: &'static str, row: &[u8]) -> Result<()> {
        let key = self.key(table, row);
        self.writes.insert(key, None);
        Ok(())
    }
}

/// The etcd peer's state (see [`EtcdPeer`]).
pub struct EtcdShared {
    client: Arc<EtcdClient>,
    namespace: Bytes,
    scale: Scale,
}

impl PeerCore for EtcdShared {
    fn name(&self) -> String {
        "etcd mini-transactions, STM style (peer)".into()
    }

    async fn execute(&self, input: &TxnInput) -> Result<Executed> {
        for attempts in 1..=MAX_ATTEMPTS {
            let mut kv = EtcdKv::new(&self.client, &self.namespace);
            let output = frames::run(&mut kv, input, &self.scale).await?;
            if kv.commit().await? {
                return Ok(Executed { output, attempts });
            }
        }
        Err(Error::Application(format!(
            "etcd peer: still conflicting after {MAX_ATTEMPTS} attempts"
        )))
    }

    async fn verify(&self) -> Result<InvariantReport> {
        let mut kv = EtcdKv::new(&self.client, &self.namespace);
        check::verify(&mut kv, &self.scale).await
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// The peer baseline on etcd's own mini-transactions.
pub type EtcdPeer = Peer<EtcdShared>;

impl Peer<EtcdShared> {
    /// Connects to the etcd cluster at `endpoints` (comma-separated client URLs) and starts
    /// `executors` Trade-Result tasks; its rows go under a fresh namespace.
    pub async fn open_etcd(
        endpoints: &str,
        scale: Scale,
        market: Arc<Market>,
        executors: usize,
    ) -> Result<Self> {
        let config = EtcdConfig::new(
            endpoints
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty()),
        );
        let client = EtcdClient::connect(&config)
            .await
            .map_err(|e| etcd_error(&format!("connecting to {endpoints}"), e))?;
        let namespace = Bytes::from(format!("tpce-peer/{:016x}/", rand::random::<u64>()));
        let core = EtcdShared {
            client: Arc::new(client),
            namespace,
            scale,
        };
        Ok(Peer::start(core, market, executors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_end_is_the_first_key_past_the_prefix() {
        assert_eq!(range_end(b"ab"), Bytes::from_static(b"ac"));
        assert_eq!(range_end(b"a\xff"), Bytes::from_static(b"b"));
        assert_eq!(range_end(b"\xff\xff"), Bytes::from_static(&[0]));
    }
}
