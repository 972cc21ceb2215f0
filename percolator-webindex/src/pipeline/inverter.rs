//! The inverter: applies the clusters queued in one index shard as a batch, writing their
//! postings into one new chunk, removing their old postings from the chunks that hold them, and
//! updating the shard's corpus counts, in one transaction (see [`crate::postings`]). A run
//! that finds a chunk of its shard with half its postings dead compacts that chunk instead
//! ([`removal`]).

mod removal;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::try_join_all;
use percolator_core::{Error, ObservedColumn, Result, RowStore, Transaction};
use percolator_observers::{Change, Observer};

use super::{lossy, scan_row};
use crate::postings::{
    ChunkBuckets, DeadSlots, Directory, Held, OwnTerms, PostingChunk, RareChunk, bucket_row,
    rare_bucket, rare_limit,
};
use crate::schema::*;
use crate::terms::{CorpusCounts, PageTerms, PageTermsView, Posting};

/// The most queued clusters one inverter run applies (one chunk); more are left for the next
/// run, which the run notifies.
pub const INVERT_BATCH: usize = 1024;
/// The most rows one inverter run touches (terms, rare-term buckets, clusters and
/// bookkeeping, counted as over-estimates), below the store's own limit: an inverter run is one
/// transaction, which holds every cell it writes in memory and locks each in prewrite, so a
/// backlog of large pages is applied in runs of bounded memory. Not much lower: a term's row is
/// written once per chunk, so smaller runs write more rows per page (at 16 384 the index fell
/// minutes behind the documents under the serve load test).
pub const INVERT_MAX_ROWS: usize = 64 * 1024;
/// How long a shard's queue collects clusters before its inverter runs
/// ([`Observer::batch_delay`]): the index lags the documents by about this much, and chunks
/// are as large as what the exporters queue meanwhile.
pub const INVERT_DELAY: Duration = Duration::from_secs(2);

/// Rows an inverter run writes besides terms and clusters: the queue row, the corpus row, the
/// new chunk's directory, and old chunks' directories (a few).
const BOOKKEEPING_ROWS: usize = 8;

/// Turns a shard's queued clusters into a new posting chunk, removes the postings of the
/// clusters that changed or left from the chunks holding them, and updates the shard's corpus
/// counts (see [`crate::postings`]).
#[derive(Debug, Clone, Copy)]
pub struct Inverter {
    /// Its [`Observer::batch_delay`].
    pub delay: Duration,
}

/// A queued cluster as an inverter run sees it.
struct QueuedCluster {
    hash: Bytes,
    /// What the index holds for it.
    old: Option<PageTerms>,
    /// What it should hold: its `exported` cell (decoded one cluster at a time, to keep a
    /// batch's memory small).
    exported: Option<Bytes>,
    /// The chunk holding its postings.
    posted: Option<Bytes>,
}

#[async_trait]
impl<S: RowStore> Observer<S> for Inverter {
    fn name(&self) -> &str {
        "inverter"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak(INDEX_QUEUE, INVERT)
    }

    fn batch_delay(&self) -> Duration {
        self.delay
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let row = change.row.clone();
        let Some(shard) = (0..INDEX_SHARDS).find(|s| shard_key(*s) == row) else {
            return Err(Error::Corrupt(format!(
                "index_queue row {:?} is not an index shard",
                lossy(&row)
            )));
        };
        // Batches fit the store's limits: the queue row takes a delete per cluster (two store
        // operations each in prewrite) and the run's own notification; the transaction's rows
        // are the touched terms, the clusters and the shard's few bookkeeping rows.
        let limits = txn.store_limits();
        let max_rows = limits.max_batch_rows.min(INVERT_MAX_ROWS);
        let max_clusters = INVERT_BATCH
            .min(limits.max_row_ops.saturating_sub(3) / 2)
            .max(1);
        let corpus_row = ShardCorpus::read(txn, &row).await?;
        // A chunk with half its postings dead is compacted first, in a run of its own (its
        // cells are about as many as a run writes); the queue waits for the next run.
        if let Some((chunk, dead)) = corpus_row.dead.iter().find(|(_, d)| d.needs_compaction()) {
            removal::compact(txn, &row, chunk, dead).await?;
            txn.notify(INDEX_QUEUE, &row, INVERT)?;
            return Ok(());
        }
        let (queued, mut more) = read_queue(txn, &row, max_clusters).await?;
        if queued.is_empty() {
            return Ok(());
        }
        let mut lists = old_chunk_lists(txn, &queued).await?;
        let next_chunk = corpus_row.next_chunk;
        let chunk = chunk_key(shard, next_chunk);

        let mut directory = Directory::default();
        // term -> the new chunk's postings, in slot order
        // (foldhash maps are seeded per process: the terms are crawled text)
        let mut added: foldhash::HashMap<String, Vec<(u32, Posting)>> = Default::default();
        // chunk -> (cluster, the terms it has postings for there)
        let mut removed: BTreeMap<Bytes, Vec<(Bytes, PageTerms)>> = BTreeMap::new();
        let mut corpus = CorpusCounts::default();
        // Term rows the removals touch (besides those of `added`).
        let mut removed_terms: foldhash::HashSet<String> = Default::default();
        for (taken, cluster) in queued.into_iter().enumerate() {
            // The exported terms, read in place; a cell in another form than the document
            // processor writes is decoded and read in its re-encoded form.
            let reencoded;
            let new = match cluster.exported.as_deref().map(exported_terms) {
                None => None,
                Some(cell) => Some(match PageTermsView::parse(cell) {
                    Some(view) => view,
                    None => {
                        reencoded = PageTerms::decode(cell).encode();
                        PageTermsView::parse(&reencoded).ok_or_else(|| {
                            Error::Corrupt(format!(
                                "cluster {:?}: exported terms do not re-encode",
                                lossy(&cluster.hash)
                            ))
                        })?
                    }
                }),
            };
            // Removing its postings rewrites its terms' cells only where its chunk does not
            // list its cells (else the removal is lazy).
            let removes_terms = cluster.old.is_some()
                && cluster
                    .posted
                    .as_ref()
                    .and_then(|chunk| lists.get(chunk))
                    .is_some_and(|chunk_lists| !chunk_lists.is_lazy());
            // A term both in `old` and `new` counts twice: an overestimate, which is safe. The
            // terms already counted are looked up only when the cluster's terms might not fit
            // (embedded stores have no row limit to speak of).
            let fits = {
                let rows = added.len()
                    + removed_terms.len()
                    + 2 * (taken + 1)
                    + removed.len()
                    + BOOKKEEPING_ROWS;
                // A lazy removal touches no term's row.
                let old = cluster.old.as_ref().filter(|_| removes_terms);
                let old_terms = old.iter().flat_map(|t| t.counts.keys());
                let new_terms = new.iter().flat_map(|v| v.iter().map(|(t, _)| t));
                rows + old.map_or(0, |t| t.counts.len())
                    + new.as_ref().map_or(0, PageTermsView::len)
                    <= max_rows
                    || rows
                        + old_terms
                            .map(String::as_str)
                            .chain(new_terms)
                            .filter(|t| !added.contains_key(*t) && !removed_terms.contains(*t))
                            .count()
                        <= max_rows
            };
            if taken > 0 && !fits {
                more = true; // the rest waits for the next run
                break;
            }
            txn.delete(INDEX_QUEUE, &row, queued_column(&cluster.hash))?;
            let unchanged = match (&cluster.old, &new) {
                (None, None) => true,
                (Some(old), Some(new)) => new.same_as(old),
                _ => false,
            };
            if unchanged {
                continue; // e.g. the canonical moved to a duplicate: same text
            }
            if let Some(old) = cluster.old {
                let Some(posted) = cluster.posted else {
                    return Err(Error::Corrupt(format!(
                        "cluster {:?} is queued as indexed but names no chunk",
                        lossy(&cluster.hash)
                    )));
                };
                corpus = corpus.plus(CorpusCounts {
                    documents: -1,
                    length: -i64::from(old.length),
                    postings: -i64::try_from(old.counts.len()).unwrap_or(i64::MAX),
                });
                if removes_terms {
                    removed_terms.extend(
                        old.counts
                            .keys()
                            .filter(|t| !added.contains_key(*t))
                            .cloned(),
                    );
                }
                removed
                    .entry(posted)
                    .or_default()
                    .push((cluster.hash.clone(), old));
            }
            match new {
                Some(new) => {
                    let slot = u32::try_from(directory.clusters.len()).unwrap_or(u32::MAX);
                    directory.clusters.push(cluster.hash.clone());
                    corpus = corpus.plus(CorpusCounts {
                        documents: 1,
                        length: i64::from(new.length),
                        postings: i64::try_from(new.len()).unwrap_or(i64::MAX),
                    });
                    for (term, counts) in new.iter() {
                        let posting = (
                            slot,
                            Posting {
                                counts,
                                length: new.length,
                            },
                        );
                        // An owned key only for a term new to the batch.
                        match added.get_mut(term) {
                            Some(postings) => postings.push(posting),
                            None => {
                                added.insert(term.to_owned(), vec![posting]);
                            }
                        }
                    }
                    txn.set(CLUSTERS, &cluster.hash, POSTED, chunk.clone())?;
                }
                None => txn.delete(CLUSTERS, &cluster.hash, POSTED)?,
            }
        }
        for (old_chunk, clusters) in removed {
            let dead = corpus_row.dead.get(&old_chunk);
            let chunk_lists = match lists.remove(&old_chunk) {
                Some(chunk_lists) => chunk_lists,
                None => removal::ChunkLists::read(txn, &old_chunk).await?,
            };
            // A chunk now half dead is compacted by the next run.
            more |= removal::remove_postings(txn, &row, &old_chunk, &chunk_lists, clusters, dead)
                .await?;
        }
        if !directory.clusters.is_empty() {
            // Blind writes: nothing was ever written under the new chunk's key. A term with
            // few postings here shares its bucket's cell: most of a batch's terms are rare, and
            // each cell costs a lock, a write record and its flush and compaction.
            let mut rare: BTreeMap<u16, RareChunk> = BTreeMap::new();
            let rare_below = rare_limit(directory.clusters.len());
            let mut own = Vec::new();
            for (term, postings) in added {
                if postings.len() < rare_below {
                    let postings = PostingChunk {
                        postings: postings.into_iter().collect(),
                    };
                    rare.entry(rare_bucket(&term))
                        .or_default()
                        .terms
                        .insert(term, postings);
                } else {
                    let cell = PostingChunk::encode_sorted(postings.into_iter());
                    txn.set(INDEX, term.as_str(), &chunk, cell)?;
                    own.push(term);
                }
            }
            txn.set(
                INDEX_DOCS,
                &chunk,
                CHUNK_OWN_TERMS,
                OwnTerms::new(own).encode(),
            )?;
            txn.set(
                INDEX_DOCS,
                &chunk,
                CHUNK_BUCKETS,
                ChunkBuckets::new(rare.keys().copied().collect()).encode(),
            )?;
            for (bucket, postings) in rare {
                txn.set(INDEX, bucket_row(bucket), &chunk, postings.encode())?;
            }
            txn.set(INDEX_DOCS, &chunk, CHUNK_CLUSTERS, directory.encode())?;
            txn.set(CORPUS, &row, NEXT_CHUNK, (next_chunk + 1).to_string())?;
        }
        if corpus != CorpusCounts::default() {
            let now = corpus_row.counts.plus(corpus);
            txn.set(CORPUS, &row, COUNTS, now.encode())?;
        }
        if more {
            txn.notify(INDEX_QUEUE, &row, INVERT)?;
        }
        Ok(())
    }
}

/// The first `limit` clusters queued in shard row `row`, with what the index holds for each and
/// what it should hold, and whether more are queued.
async fn read_queue<S: RowStore>(
    txn: &Transaction<S>,
    row: &Bytes,
    limit: usize,
) -> Result<(Vec<QueuedCluster>, bool)> {
    let mut queued = Vec::new();
    let mut more = false;
    for item in scan_row(txn, INDEX_QUEUE, row).await? {
        if queued.len() == limit {
            more |= item.column.starts_with(QUEUED_PREFIX);
            continue;
        }
        let Some(hash) = item.column.strip_prefix(QUEUED_PREFIX) else {
            continue; // the trigger's notifications, the inverter's ack
        };
        let hash = Bytes::copy_from_slice(hash);
        if shard_of(&hash) != row {
            return Err(Error::Corrupt(format!(
                "index_queue row {:?} queues cluster {:?} of another shard",
                lossy(row),
                lossy(&hash)
            )));
        }
        let old = match Held::decode(&item.value) {
            Some(Held::Terms(terms)) => Some(terms),
            Some(Held::Nothing) => None,
            None => {
                return Err(Error::Corrupt(format!(
                    "index_queue cell {:?}/{:?} is not a held state",
                    lossy(row),
                    lossy(&item.column)
                )));
            }
        };
        queued.push(QueuedCluster {
            hash,
            old,
            exported: None,
            posted: None,
        });
    }
    let states = try_join_all(queued.iter().map(|cluster| async move {
        let exported = txn.get(CLUSTERS, &cluster.hash, EXPORTED).await?;
        let posted = txn.get(CLUSTERS, &cluster.hash, POSTED).await?;
        Ok::<_, Error>((exported, posted))
    }))
    .await?;
    for (cluster, (exported, posted)) in queued.iter_mut().zip(states) {
        cluster.exported = exported;
        cluster.posted = posted;
    }
    Ok((queued, more))
}

/// The lists of cells of the chunks holding the queued clusters' postings.
async fn old_chunk_lists<S: RowStore>(
    txn: &Transaction<S>,
    queued: &[QueuedCluster],
) -> Result<BTreeMap<Bytes, removal::ChunkLists>> {
    let old_chunks: BTreeSet<&Bytes> = queued
        .iter()
        .filter(|c| c.old.is_some())
        .filter_map(|c| c.posted.as_ref())
        .collect();
    try_join_all(old_chunks.into_iter().map(|chunk| async move {
        Ok::<_, Error>((chunk.clone(), removal::ChunkLists::read(txn, chunk).await?))
    }))
    .await
    .map(|lists| lists.into_iter().collect())
}

/// A shard's `corpus` row: its counts, the number of its next chunk, and its chunks' dead
/// slots.
struct ShardCorpus {
    counts: CorpusCounts,
    next_chunk: u64,
    dead: BTreeMap<Bytes, DeadSlots>,
}

impl ShardCorpus {
    async fn read<S: RowStore>(txn: &Transaction<S>, row: &Bytes) -> Result<Self> {
        let mut corpus = Self {
            counts: CorpusCounts::default(),
            next_chunk: 0,
            dead: BTreeMap::new(),
        };
        let bad = |item: &percolator_core::ScanItem| {
            Error::Corrupt(format!(
                "corpus {:?} {:?} is {:?}",
                lossy(row),
                lossy(&item.column),
                lossy(&item.value)
            ))
        };
        for item in scan_row(txn, CORPUS, row).await? {
            if item.column == COUNTS {
                corpus.counts = CorpusCounts::decode(&item.value);
            } else if item.column == NEXT_CHUNK {
                corpus.next_chunk = std::str::from_utf8(&item.value)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad(&item))?;
            } else if let Some(chunk) = item.column.strip_prefix(DEAD_PREFIX) {
                let dead = DeadSlots::decode(&item.value).ok_or_else(|| bad(&item))?;
                corpus.dead.insert(Bytes::copy_from_slice(chunk), dead);
            }
        }
        Ok(corpus)
    }
}
