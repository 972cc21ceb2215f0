//! Removing a cluster's postings from the chunk that holds them, and compacting chunks.
//!
//! A chunk that lists its cells (its own terms and its buckets) has removals made lazily: the
//! cluster's slot is emptied in the directory and added to the chunk's [`DeadSlots`], and
//! searches skip the postings of dead slots. Once half the slots holding postings are dead, the
//! shard's next inverter run [compacts](compact) the chunk instead of applying its queue: it
//! rewrites the chunk's cells without the dead postings, or deletes them all when no slot is
//! live. A chunk without both lists (written before chunks listed their cells) has its
//! postings removed at once, cell by cell.
//!
//! Lazily, removing a recrawled page costs two cells (the directory and the dead list) instead
//! of one per term of the page, and each cell of a chunk is rewritten a few times in its life
//! instead of once per page of it that changes: under a steady recrawl, eager removals made
//! inverter transactions of about 45 000 cells and the index stopped advancing.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use percolator_core::{Error, Result, RowStore, Transaction};

use super::super::lossy;
use crate::postings::{
    ChunkBuckets, DeadSlots, Directory, OwnTerms, PostingChunk, RareChunk, bucket_of_row,
    is_rare_row, rare_row,
};
use crate::schema::*;
use crate::terms::PageTerms;

/// How many cells a compaction reads at once.
const COMPACTION_READS: usize = 64;

fn corrupt(chunk: &[u8], what: impl std::fmt::Display) -> Error {
    Error::Corrupt(format!("index chunk {:?}: {what}", lossy(chunk)))
}

/// A chunk's lists of cells as stored: its own terms and its buckets, each `None` when absent.
/// Read once per chunk a run removes from: the run sizes its batch by whether removals are
/// lazy, and the removal then decodes them.
pub(super) struct ChunkLists {
    own: Option<Bytes>,
    buckets: Option<Bytes>,
}

impl ChunkLists {
    pub(super) async fn read<S: RowStore>(txn: &Transaction<S>, chunk: &Bytes) -> Result<Self> {
        let (own, buckets) = futures::try_join!(
            txn.get(INDEX_DOCS, chunk, CHUNK_OWN_TERMS),
            txn.get(INDEX_DOCS, chunk, CHUNK_BUCKETS)
        )?;
        Ok(Self { own, buckets })
    }

    /// Whether removals from the chunk are lazy: it lists its cells. (A list that does not
    /// decode counts as listed: the removal reports it.)
    pub(super) fn is_lazy(&self) -> bool {
        self.own.is_some() && self.buckets.is_some()
    }

    /// The lists of chunk `chunk`, decoded; an error names a list that does not decode.
    fn decode(&self, chunk: &[u8]) -> Result<(Option<OwnTerms>, Option<ChunkBuckets>)> {
        let own = self
            .own
            .as_ref()
            .map(|cell| {
                OwnTerms::decode(cell).ok_or_else(|| corrupt(chunk, "own terms do not decode"))
            })
            .transpose()?;
        let buckets = self
            .buckets
            .as_ref()
            .map(|cell| {
                ChunkBuckets::decode(cell)
                    .ok_or_else(|| corrupt(chunk, "bucket list does not decode"))
            })
            .transpose()?;
        Ok((own, buckets))
    }
}

/// Removes the postings of `clusters` (each with the terms it was inverted with) from chunk
/// `chunk` of shard `shard_row`, and empties their slots in its directory: lazily when the
/// chunk lists its cells (`lists`; `dead` is its current list of dead slots), else at once.
/// Returns whether the chunk now needs compacting.
pub(super) async fn remove_postings<S: RowStore>(
    txn: &mut Transaction<S>,
    shard_row: &Bytes,
    chunk: &Bytes,
    lists: &ChunkLists,
    clusters: Vec<(Bytes, PageTerms)>,
    dead: Option<&DeadSlots>,
) -> Result<bool> {
    let directory = txn
        .get(INDEX_DOCS, chunk, CHUNK_CLUSTERS)
        .await?
        .map(|b| Directory::decode(&b))
        .ok_or_else(|| corrupt(chunk, "no directory"))?;
    match lists.decode(chunk)? {
        (Some(_), Some(_)) => remove_lazily(txn, shard_row, chunk, directory, clusters, dead),
        _ if dead.is_some() => Err(corrupt(
            chunk,
            "it has dead slots but does not list its cells",
        )),
        (own, _) => {
            remove_at_once(txn, chunk, directory, own, clusters).await?;
            Ok(false)
        }
    }
}

/// The slot of `cluster` in `directory`.
fn slot_of(chunk: &[u8], directory: &Directory, cluster: &Bytes) -> Result<usize> {
    directory
        .clusters
        .iter()
        .position(|c| c == cluster)
        .ok_or_else(|| {
            corrupt(
                chunk,
                format_args!("cluster {:?} is not in it", lossy(cluster)),
            )
        })
}

/// Empties the clusters' slots and adds them to the chunk's dead slots; returns whether the
/// chunk now needs compacting.
fn remove_lazily<S: RowStore>(
    txn: &mut Transaction<S>,
    shard_row: &Bytes,
    chunk: &Bytes,
    mut directory: Directory,
    clusters: Vec<(Bytes, PageTerms)>,
    dead: Option<&DeadSlots>,
) -> Result<bool> {
    let mut dead = dead.cloned().unwrap_or_default();
    let live = directory.clusters.iter().filter(|c| !c.is_empty()).count();
    dead.holding =
        u32::try_from(live + dead.len()).map_err(|_| corrupt(chunk, "too many slots"))?;
    for (hash, _) in clusters {
        let slot = slot_of(chunk, &directory, &hash)?;
        directory.clusters[slot] = Bytes::new();
        dead.insert(u32::try_from(slot).map_err(|_| corrupt(chunk, "too many slots"))?);
    }
    txn.set(INDEX_DOCS, chunk, CHUNK_CLUSTERS, directory.encode())?;
    txn.set(CORPUS, shard_row, dead_column(chunk), dead.encode())?;
    Ok(dead.needs_compaction())
}

/// Removes the clusters' postings from each cell that holds them, and empties their slots (the
/// directory goes with the last one).
async fn remove_at_once<S: RowStore>(
    txn: &mut Transaction<S>,
    chunk: &Bytes,
    mut directory: Directory,
    own: Option<OwnTerms>,
    clusters: Vec<(Bytes, PageTerms)>,
) -> Result<()> {
    let mut slots: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (hash, terms) in clusters {
        let slot = slot_of(chunk, &directory, &hash)?;
        directory.clusters[slot] = Bytes::new();
        let slot = u32::try_from(slot).map_err(|_| corrupt(chunk, "too many slots"))?;
        for term in terms.counts.into_keys() {
            slots.entry(term).or_default().push(slot);
        }
    }
    // A term's postings in a chunk are in its own cell, or else in its bucket's; a chunk
    // without a list of own terms has each term's own cell tried first.
    let mut rare: BTreeMap<Bytes, Vec<(String, Vec<u32>)>> = BTreeMap::new();
    for (term, slots) in slots {
        let cell = if own.as_ref().is_none_or(|own| own.contains(&term)) {
            txn.get(INDEX, term.as_str(), chunk).await?
        } else {
            None
        };
        let Some(cell) = cell else {
            rare.entry(rare_row(&term)).or_default().push((term, slots));
            continue;
        };
        let mut postings = PostingChunk::decode(&cell)
            .map_err(|e| corrupt(chunk, format_args!("term {term:?}: {e}")))?;
        for slot in slots {
            postings.postings.remove(&slot);
        }
        write_cell(txn, term.as_bytes(), chunk, &postings)?;
    }
    for (row, terms) in rare {
        let Some(cell) = txn.get(INDEX, &row, chunk).await? else {
            continue;
        };
        let mut bucket = RareChunk::decode(&cell)
            .map_err(|e| corrupt(chunk, format_args!("bucket {:?}: {e}", lossy(&row))))?;
        for (term, slots) in terms {
            if let Some(postings) = bucket.terms.get_mut(&term) {
                for slot in slots {
                    postings.postings.remove(&slot);
                }
                if postings.is_empty() {
                    bucket.terms.remove(&term);
                }
            }
        }
        write_bucket(txn, &row, chunk, &bucket)?;
    }
    if directory.clusters.iter().all(Bytes::is_empty) {
        txn.delete(INDEX_DOCS, chunk, CHUNK_CLUSTERS)?;
        if own.is_some() {
            txn.delete(INDEX_DOCS, chunk, CHUNK_OWN_TERMS)?;
        }
    } else {
        txn.set(INDEX_DOCS, chunk, CHUNK_CLUSTERS, directory.encode())?;
    }
    Ok(())
}

/// Writes a term's own cell, or deletes it when it holds no posting.
fn write_cell<S: RowStore>(
    txn: &mut Transaction<S>,
    row: &[u8],
    chunk: &Bytes,
    postings: &PostingChunk,
) -> Result<()> {
    if postings.is_empty() {
        txn.delete(INDEX, row, chunk)
    } else {
        txn.set(INDEX, row, chunk, postings.encode())
    }
}

/// Writes a bucket's cell, or deletes it when it holds no term.
fn write_bucket<S: RowStore>(
    txn: &mut Transaction<S>,
    row: &[u8],
    chunk: &Bytes,
    bucket: &RareChunk,
) -> Result<()> {
    if bucket.terms.is_empty() {
        txn.delete(INDEX, row, chunk)
    } else {
        txn.set(INDEX, row, chunk, bucket.encode())
    }
}

/// Compacts chunk `chunk` of shard `shard_row`, whose dead slots are `dead`: deletes every
/// cell of the chunk when no slot is live, else rewrites its cells without the dead slots'
/// postings (dropping the cells left empty from its lists); either way its dead list goes.
pub(super) async fn compact<S: RowStore>(
    txn: &mut Transaction<S>,
    shard_row: &Bytes,
    chunk: &Bytes,
    dead: &DeadSlots,
) -> Result<()> {
    let (Some(own), Some(buckets)) = ChunkLists::read(txn, chunk).await?.decode(chunk)? else {
        return Err(corrupt(
            chunk,
            "it has dead slots but does not list its cells",
        ));
    };
    let rows: Vec<Bytes> = own
        .terms()
        .iter()
        .map(|term| Bytes::copy_from_slice(term.as_bytes()))
        .chain(buckets.rows())
        .collect();
    txn.delete(CORPUS, shard_row, dead_column(chunk))?;
    if dead.all_dead() {
        for row in &rows {
            txn.delete(INDEX, row, chunk)?;
        }
        for column in [CHUNK_CLUSTERS, CHUNK_OWN_TERMS, CHUNK_BUCKETS] {
            txn.delete(INDEX_DOCS, chunk, column)?;
        }
        return Ok(());
    }
    let cells: Vec<(Bytes, Option<Bytes>)> = futures::stream::iter(rows)
        .map(|row| {
            let txn = &*txn;
            async move {
                let cell = txn.get(INDEX, &row, chunk).await?;
                Ok::<_, Error>((row, cell))
            }
        })
        .buffered(COMPACTION_READS)
        .try_collect()
        .await?;
    let (mut kept_terms, mut kept_buckets) = (Vec::new(), Vec::new());
    for (row, cell) in cells {
        let Some(cell) = cell else { continue };
        if is_rare_row(&row) {
            let mut bucket = RareChunk::decode(&cell)
                .map_err(|e| corrupt(chunk, format_args!("bucket {:?}: {e}", lossy(&row))))?;
            let before = bucket
                .terms
                .values()
                .map(|p| p.postings.len())
                .sum::<usize>();
            for postings in bucket.terms.values_mut() {
                postings.postings.retain(|slot, _| !dead.contains(*slot));
            }
            bucket.terms.retain(|_, postings| !postings.is_empty());
            if !bucket.terms.is_empty() {
                kept_buckets.push(row.clone());
            }
            if bucket
                .terms
                .values()
                .map(|p| p.postings.len())
                .sum::<usize>()
                != before
            {
                write_bucket(txn, &row, chunk, &bucket)?;
            }
        } else {
            let mut postings = PostingChunk::decode(&cell)
                .map_err(|e| corrupt(chunk, format_args!("term {:?}: {e}", lossy(&row))))?;
            let before = postings.postings.len();
            postings.postings.retain(|slot, _| !dead.contains(*slot));
            if !postings.is_empty() {
                kept_terms.push(String::from_utf8_lossy(&row).into_owned());
            }
            if postings.postings.len() != before {
                write_cell(txn, &row, chunk, &postings)?;
            }
        }
    }
    if kept_terms.len() != own.len() {
        txn.set(
            INDEX_DOCS,
            chunk,
            CHUNK_OWN_TERMS,
            OwnTerms::new(kept_terms).encode(),
        )?;
    }
    if kept_buckets.len() != buckets.len() {
        let kept = kept_buckets
            .iter()
            .filter_map(|row| bucket_of_row(row))
            .collect();
        txn.set(
            INDEX_DOCS,
            chunk,
            CHUNK_BUCKETS,
            ChunkBuckets::new(kept).encode(),
        )?;
    }
    Ok(())
}
