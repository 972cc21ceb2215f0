//! Invariants 4, 6 and 7: the index, its corpus counts and its queue. The index is streamed a
//! page at a time and compared, per cluster, by the print of its postings ([`TermPrint`]); the
//! chunk directories are held, one line per cluster, like the walk's documents.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use percolator_core::{Result, RowStore, Transaction};

use super::IndexSummary;
use super::violations::{Violations, at, cell, escaped, row_name};
use super::walk::{ProgressFn, TermPrint, Walk, for_each_item};
use crate::postings::{
    ChunkBuckets, DeadSlots, Directory, OwnTerms, PostingChunk, RareChunk, is_rare_row, rare_row,
};
use crate::schema::*;
use crate::terms::{CorpusCounts, encode_posting};

/// The chunks' rows of `index_docs`, and their dead slots from `corpus`: per chunk, its
/// directory, its lists of terms with their own cell and of buckets with a cell (absent in a
/// chunk written without them), and its dead slots (absent when none).
#[derive(Default)]
pub(super) struct Chunks {
    directories: HashMap<Bytes, Directory>,
    own_terms: HashMap<Bytes, OwnTerms>,
    buckets: HashMap<Bytes, ChunkBuckets>,
    dead: HashMap<Bytes, DeadSlots>,
}

impl Chunks {
    /// Whether `slot` of `chunk` is dead (its postings are not the index's).
    fn is_dead(&self, chunk: &[u8], slot: u32) -> bool {
        self.dead.get(chunk).is_some_and(|dead| dead.contains(slot))
    }
}

/// Reads the chunk directories (`index_docs`) for invariants 4 and 7, and checks the part of
/// invariant 7 they hold: each row is a chunk key, each cluster a chunk lists hashes to the
/// chunk's shard and names that chunk in `clusters:posted` (`posted`), and a chunk's list of
/// own terms decodes. Returns the directories and lists by chunk.
///
/// It holds because the inverter writes a new chunk's directory and its list of own terms and
/// sets `clusters:posted` of each of its clusters to that chunk in one transaction, and
/// empties a cluster's slot in its old chunk in the transaction that moves or removes it; a
/// shard's inverter only inverts clusters queued in that shard, which are the clusters hashing
/// to it, into chunks of its shard.
pub(super) async fn read_directories<S: RowStore>(
    txn: &Transaction<S>,
    posted: &BTreeMap<Bytes, Bytes>,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<Chunks> {
    // The chunk directories name the clusters (one line per cluster: bounded like the
    // documents).
    let mut chunks = Chunks::default();
    for_each_item(txn, INDEX_DOCS, None, progress, |item| {
        let Some((shard, _)) = parse_chunk_key(&item.row) else {
            violations.add(
                7,
                "chunk directory under a row that is not a chunk key",
                row_name(INDEX_DOCS, &item.row),
            );
            return;
        };
        // A list that does not decode is reported, and the chunk read as if it had none.
        let undecodable = |violations: &mut Violations, what: &str| {
            violations.add(
                7,
                what,
                at(
                    INDEX_DOCS,
                    &item.row,
                    format_args!("{}", escaped(&item.column)),
                ),
            );
        };
        if item.column == CHUNK_BUCKETS {
            match ChunkBuckets::decode(&item.value) {
                Some(buckets) => {
                    chunks.buckets.insert(item.row, buckets);
                }
                None => undecodable(violations, "chunk's list of buckets does not decode"),
            }
            return;
        }
        if item.column == CHUNK_OWN_TERMS {
            match OwnTerms::decode(&item.value) {
                Some(own) => {
                    chunks.own_terms.insert(item.row, own);
                }
                None => undecodable(violations, "chunk's list of own terms does not decode"),
            }
            return;
        }
        if item.column != CHUNK_CLUSTERS {
            violations.add(
                7,
                "chunk row holds an unknown column",
                at(
                    INDEX_DOCS,
                    &item.row,
                    format_args!("{}", escaped(&item.column)),
                ),
            );
            return;
        }
        let directory = Directory::decode(&item.value);
        for cluster in directory.clusters.iter().filter(|c| !c.is_empty()) {
            if index_shard(cluster) != shard {
                violations.add(
                    7,
                    "chunk lists a cluster of another shard",
                    at(
                        INDEX_DOCS,
                        &item.row,
                        format_args!(
                            "cluster {} is of shard {}",
                            escaped(cluster),
                            index_shard(cluster)
                        ),
                    ),
                );
            }
            if posted.get(cluster) != Some(&item.row) {
                violations.add(
                    7,
                    "chunk lists a cluster whose postings are in another chunk",
                    at(
                        INDEX_DOCS,
                        &item.row,
                        format_args!(
                            "cluster {} is posted in {}",
                            escaped(cluster),
                            cell(posted.get(cluster).map(|c| &c[..]))
                        ),
                    ),
                );
            }
        }
        chunks.directories.insert(item.row, directory);
    })
    .await?;
    read_dead_slots(txn, &mut chunks, progress, violations).await?;
    Ok(chunks)
}

/// Reads the chunks' dead slots (`corpus`, a few cells per shard) into `chunks`, and checks
/// the part of invariant 7 they hold: a list decodes and names a chunk of its shard that lists
/// its cells, its slots are empty in the chunk's directory, and it counts the slots holding
/// postings (the live ones and the dead).
///
/// It holds because the inverter, removing clusters from a chunk that lists its cells, empties
/// their slots in the directory and writes the chunk's dead slots, with that count, in the same
/// transaction; and compacting a chunk deletes its list with the dead postings.
async fn read_dead_slots<S: RowStore>(
    txn: &Transaction<S>,
    chunks: &mut Chunks,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<()> {
    let mut lists = Vec::new();
    for_each_item(txn, CORPUS, None, progress, |item| {
        let Some(chunk) = item.column.strip_prefix(DEAD_PREFIX) else {
            return;
        };
        let place = || at(CORPUS, &item.row, format_args!("{}", escaped(&item.column)));
        let Some(dead) = DeadSlots::decode(&item.value) else {
            violations.add(7, "chunk's list of dead slots does not decode", place());
            return;
        };
        match parse_chunk_key(chunk) {
            Some((shard, _)) if shard_key(shard) == item.row => {
                lists.push((Bytes::copy_from_slice(chunk), dead));
            }
            _ => violations.add(
                7,
                "dead slots of a chunk that is not of the row's shard",
                place(),
            ),
        }
    })
    .await?;
    for (chunk, dead) in lists {
        let place = |what: std::fmt::Arguments<'_>| {
            at(
                CORPUS,
                &shard_of_chunk(&chunk),
                format_args!("{} {what}", escaped(&dead_column(&chunk))),
            )
        };
        let Some(directory) = chunks.directories.get(&chunk) else {
            violations.add(
                7,
                "dead slots of a chunk without a directory",
                place(format_args!("")),
            );
            continue;
        };
        if !chunks.own_terms.contains_key(&chunk) || !chunks.buckets.contains_key(&chunk) {
            violations.add(
                7,
                "dead slots of a chunk that does not list its cells",
                place(format_args!("")),
            );
        }
        for &slot in dead.slots() {
            if directory.cluster(slot).is_some_and(|c| !c.is_empty()) {
                violations.add(
                    7,
                    "dead slot still names a cluster in its chunk's directory",
                    place(format_args!("slot {slot}")),
                );
            }
        }
        let live = directory.clusters.iter().filter(|c| !c.is_empty()).count();
        if live + dead.len() != dead.holding as usize {
            violations.add(
                7,
                "dead slots miscount the chunk's slots holding postings",
                place(format_args!(
                    "says {}, the chunk has {live} live and {} dead",
                    dead.holding,
                    dead.len()
                )),
            );
        }
        chunks.dead.insert(chunk, dead);
    }
    Ok(())
}

/// The `corpus` row of the shard of chunk key `chunk`.
fn shard_of_chunk(chunk: &[u8]) -> Bytes {
    parse_chunk_key(chunk).map_or_else(Bytes::new, |(shard, _)| shard_key(shard))
}

/// The `index` row and column of an index cell, for a violation.
fn index_cell(row: &[u8], chunk: &[u8]) -> String {
    format!("{} chunk {}", row_name(INDEX, row), escaped(chunk))
}

/// Reads the index (`index`) a page at a time for invariants 4 and 7, and checks the part of
/// invariant 7 it holds: every chunk cell decodes, a bucket holds only terms of its own, a
/// term's own cell is in its chunk's list of own terms and a bucket's cell in its list of
/// buckets (when the chunk has them), and every posting names a listed slot of its chunk or a
/// dead one. Counts the distinct terms and the postings of live slots (dead ones left the
/// index).
/// Returns, per cluster the directories of `chunks` name, the print of its postings (term and
/// posting).
///
/// It holds because only the inverter writes the index, with the encodings these decode, puts
/// a term rare in a chunk in the bucket of that term ([`rare_row`]) and lists the others.
pub(super) async fn read_postings<S: RowStore>(
    txn: &Transaction<S>,
    chunks: &Chunks,
    progress: ProgressFn<'_>,
    summary: &mut IndexSummary,
    violations: &mut Violations,
) -> Result<HashMap<Bytes, TermPrint>> {
    let mut found: HashMap<Bytes, TermPrint> = HashMap::new();
    // Distinct terms, by 64-bit hash (a term is in its own row, its bucket's, or both).
    let mut terms: HashSet<u64> = HashSet::new();
    for_each_item(txn, INDEX, None, progress, |item| {
        // An own-row cell holds one term's postings; a bucket cell those of its rare terms.
        let decoded = if is_rare_row(&item.row) {
            RareChunk::decode(&item.value).map(|bucket| {
                bucket
                    .terms
                    .into_iter()
                    .map(|(term, postings)| (Bytes::from(term), postings))
                    .collect::<Vec<_>>()
            })
        } else {
            PostingChunk::decode(&item.value).map(|chunk| vec![(item.row.clone(), chunk)])
        };
        let decoded = match decoded {
            Ok(decoded) => decoded,
            Err(e) => {
                violations.add(
                    7,
                    "index cell does not decode",
                    format!("{} ({e})", index_cell(&item.row, &item.column)),
                );
                return;
            }
        };
        let directory = chunks.directories.get(&item.column);
        // Removal and compaction look for a term's postings in its own cell only if the chunk
        // lists it, and compaction in the buckets it lists.
        if is_rare_row(&item.row)
            && let Some(buckets) = chunks.buckets.get(&item.column)
            && !buckets.contains_row(&item.row)
        {
            violations.add(
                7,
                "bucket has a cell in a chunk whose list of buckets leaves it out",
                index_cell(&item.row, &item.column),
            );
        }
        if !is_rare_row(&item.row)
            && let Some(own) = chunks.own_terms.get(&item.column)
            && !own.contains(&String::from_utf8_lossy(&item.row))
        {
            violations.add(
                7,
                "term has its own cell in a chunk whose list of own terms leaves it out",
                index_cell(&item.row, &item.column),
            );
        }
        for (term, chunk) in decoded {
            if is_rare_row(&item.row) && rare_row(&String::from_utf8_lossy(&term)) != item.row {
                violations.add(
                    7,
                    "bucket holds a term of another bucket",
                    format!(
                        "{} (term {})",
                        index_cell(&item.row, &item.column),
                        escaped(&term)
                    ),
                );
                continue;
            }
            let mut live = false;
            for (slot, posting) in chunk.postings {
                if chunks.is_dead(&item.column, slot) {
                    continue; // left the index; kept until the chunk is compacted
                }
                live = true;
                summary.postings += 1;
                match directory
                    .and_then(|d| d.cluster(slot))
                    .filter(|c| !c.is_empty())
                {
                    Some(cluster) => found
                        .entry(cluster.clone())
                        .or_default()
                        .add_pair(&term, &encode_posting(posting.counts, posting.length)),
                    None => violations.add(
                        7,
                        "posting names an empty or missing slot of its chunk",
                        format!(
                            "{} (term {}, slot {slot})",
                            index_cell(&item.row, &item.column),
                            escaped(&term)
                        ),
                    ),
                }
            }
            if live {
                terms.insert(xxhash_rust::xxh3::xxh3_64(&term));
            }
        }
    })
    .await?;
    summary.terms = terms.len();
    Ok(found)
}

/// Checks the part of invariant 7 that `clusters:posted` holds: a cluster has postings in a
/// chunk exactly when it has a canonical.
///
/// It holds because the exporter queues every cluster whose canonical changes, and the
/// inverter, once the queue is empty (the rest of invariant 7), has set `posted` for each
/// cluster it indexed and deleted it for each cluster that left.
pub(super) fn check_posted(walk: &Walk, violations: &mut Violations) {
    let (canonicals, posted) = (&walk.canonicals, &walk.posted);
    for (hash, chunk) in posted {
        if !canonicals.contains_key(hash) {
            violations.add(
                7,
                "cluster without a canonical is posted in a chunk",
                at(CLUSTERS, hash, format_args!("posted in {}", escaped(chunk))),
            );
        }
    }
    for hash in canonicals.keys() {
        if !posted.contains_key(hash) {
            violations.add(
                7,
                "cluster with a canonical is in no chunk",
                row_name(CLUSTERS, hash),
            );
        }
    }
}

/// Checks invariant 4 (the index holds the canonicals' terms): per cluster, the print of the
/// postings [`read_postings`] found is that of its canonical document's terms, each with the
/// term's counts and the document's length; postings of clusters without a canonical are
/// stray.
///
/// It holds because the exporter records a cluster's canonical terms (`clusters:exported`)
/// and queues the cluster whenever its canonical changes, and the inverter posts those terms
/// and removes the postings the cluster had before; a document's terms change only with its
/// content hash, so with its cluster.
pub(super) fn check_index_terms(
    walk: &Walk,
    mut found: HashMap<Bytes, TermPrint>,
    violations: &mut Violations,
) {
    let (docs, canonicals) = (&walk.docs, &walk.canonicals);
    for (hash, canonical) in canonicals {
        let expected = docs
            .get(canonical)
            .and_then(|d| d.terms)
            .map(|(print, _)| print)
            .unwrap_or_default();
        let got = found.remove(hash).unwrap_or_default();
        let details = || {
            at(
                CLUSTERS,
                hash,
                format_args!(
                    "canonical {}: {} terms, {} postings",
                    escaped(canonical),
                    expected.count,
                    got.count
                ),
            )
        };
        if got.count < expected.count {
            violations.add_n(
                4,
                "index entries missing for a canonical's terms",
                (expected.count - got.count) as u64,
                details(),
            );
        } else if got.count > expected.count {
            violations.add_n(
                4,
                "index entries for terms the canonical does not have",
                (got.count - expected.count) as u64,
                details(),
            );
        } else if got.sum != expected.sum {
            violations.add(
                4,
                "index entries are not the canonical's terms and counts",
                details(),
            );
        }
    }
    let mut stray: Vec<(Bytes, TermPrint)> = found.into_iter().collect();
    stray.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (hash, print) in stray {
        violations.add_n(
            4,
            "index entries of a cluster without a canonical",
            print.count as u64,
            at(CLUSTERS, &hash, format_args!("{} postings", print.count)),
        );
    }
}

/// Checks the exports behind invariant 4: a cluster has an `exported` cell exactly when it has
/// a canonical.
///
/// It holds because the exporter, observing `clusters:canonical`, writes `exported` when the
/// cluster has a canonical and deletes it when the canonical is deleted.
pub(super) fn check_exported(walk: &Walk, violations: &mut Violations) {
    let (exported, canonicals) = (&walk.exported, &walk.canonicals);
    for hash in canonicals.keys().filter(|h| !exported.contains(*h)) {
        violations.add(
            4,
            "cluster with a canonical is not exported",
            row_name(CLUSTERS, hash),
        );
    }
    for hash in exported.iter().filter(|h| !canonicals.contains_key(*h)) {
        violations.add(
            4,
            "cluster without a canonical is exported",
            row_name(CLUSTERS, hash),
        );
    }
}

/// Checks invariant 6 (corpus counts): each shard's `corpus:counts` is the number of clusters
/// hashing to it with a canonical, the sum of their canonicals' lengths and of their terms
/// (postings). Streams `corpus` (a row per shard).
///
/// It holds because the inverter updates its shard's counts in the transaction that changes
/// the shard's postings: one document, its length and its terms more for each cluster it
/// posts, and the old ones less for each cluster whose postings it removes.
pub(super) async fn check_corpus_counts<S: RowStore>(
    txn: &Transaction<S>,
    walk: &Walk,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<()> {
    let (docs, canonicals) = (&walk.docs, &walk.canonicals);
    let mut want: BTreeMap<Bytes, CorpusCounts> = BTreeMap::new();
    for (hash, canonical) in canonicals {
        let (print, length) = docs
            .get(canonical)
            .and_then(|d| d.terms)
            .unwrap_or_default();
        let shard = want.entry(shard_of(hash)).or_default();
        *shard = shard.plus(CorpusCounts {
            documents: 1,
            length: i64::from(length),
            postings: i64::try_from(print.count).unwrap_or(i64::MAX),
        });
    }
    let mut got: BTreeMap<Bytes, CorpusCounts> = BTreeMap::new();
    for_each_item(txn, CORPUS, None, progress, |item| {
        if item.column.as_ref() != COUNTS {
            return;
        }
        match CorpusCounts::parse(&item.value) {
            Some(counts) => {
                got.insert(item.row, counts);
            }
            None => violations.add(
                6,
                "corpus counts do not decode",
                at(CORPUS, &item.row, escaped(&item.value)),
            ),
        }
    })
    .await?;
    let shards: std::collections::BTreeSet<&Bytes> = want.keys().chain(got.keys()).collect();
    for shard in shards {
        let (w, g) = (
            want.get(shard).copied().unwrap_or_default(),
            got.get(shard).copied().unwrap_or_default(),
        );
        if w != g {
            violations.add(
                6,
                "corpus counts are not those of the shard's indexed clusters",
                at(
                    CORPUS,
                    shard,
                    format_args!(
                        "says {} documents, {} tokens, {} postings; the index has {}, {}, {}",
                        g.documents, g.length, g.postings, w.documents, w.length, w.postings
                    ),
                ),
            );
        }
    }
    Ok(())
}

/// Checks the part of invariant 7 that the queue holds: no cluster is still queued for the
/// inverter (`index_queue`).
///
/// It holds because the inverter deletes each queue cell it applies and, when it leaves some
/// for a later run, notifies its shard again: with no notification pending, every queued
/// cluster has been applied.
pub(super) async fn check_queue_empty<S: RowStore>(
    txn: &Transaction<S>,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<()> {
    for_each_item(txn, INDEX_QUEUE, None, progress, |item| {
        if let Some(hash) = item.column.strip_prefix(QUEUED_PREFIX) {
            violations.add(
                7,
                "cluster still queued for the inverter",
                at(
                    INDEX_QUEUE,
                    &item.row,
                    format_args!("cluster {}", escaped(hash)),
                ),
            );
        }
    })
    .await?;
    Ok(())
}
