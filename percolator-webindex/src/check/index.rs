//! Invariants 4, 6 and 7: the index, its corpus counts and its queue. The index is streamed a
//! page at a time and compared, per cluster, by the print of its postings ([`TermPrint`]); the
//! chunk directories are held, one line per cluster, like the walk's documents.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;

use bytes::Bytes;
use percolator_core::{Columns, Result, RowStore, Transaction};

use super::walk::{PAGE_ROWS, TermPrint, Walk, for_each_item};
use super::{IndexSummary, lossy};
use crate::postings::{Directory, PostingChunk, RareChunk, is_rare_row, rare_row};
use crate::schema::*;
use crate::terms::{CorpusCounts, encode_posting};

/// Reads the chunk directories (`index_docs`) for invariants 4 and 7, and checks the part of
/// invariant 7 they hold: each row is a chunk key, and each cluster a chunk lists names that
/// chunk in `clusters:posted` (`posted`). Returns the directories by chunk, and how many
/// listed clusters are in a chunk of another shard than their own.
///
/// It holds because the inverter writes a new chunk's directory and sets `clusters:posted` of
/// each of its clusters to that chunk in one transaction, and empties a cluster's slot in its
/// old chunk in the transaction that moves or removes it; a shard's inverter only inverts
/// clusters queued in that shard, which are the clusters hashing to it, into chunks of its
/// shard.
pub(super) async fn read_directories<S: RowStore>(
    txn: &Transaction<S>,
    posted: &BTreeMap<Bytes, Bytes>,
    violations: &mut Vec<String>,
) -> Result<(HashMap<Bytes, Directory>, usize)> {
    // The chunk directories name the clusters (one line per cluster: bounded like the
    // documents).
    let mut directories: HashMap<Bytes, Directory> = HashMap::new();
    let mut misplaced = 0usize;
    for_each_item(txn, INDEX_DOCS, |item| {
        let directory = Directory::decode(&item.value);
        match parse_chunk_key(&item.row) {
            None => violations.push(format!(
                "index_docs row {:?} is not a chunk key",
                lossy(&item.row)
            )),
            Some((shard, _)) => {
                for cluster in directory.clusters.iter().filter(|c| !c.is_empty()) {
                    if index_shard(cluster) != shard {
                        misplaced += 1;
                    }
                    if posted.get(cluster) != Some(&item.row) {
                        violations.push(format!(
                            "chunk {} lists cluster {} whose postings are in {:?}",
                            lossy(&item.row),
                            lossy(cluster),
                            posted.get(cluster).map(|c| lossy(c))
                        ));
                    }
                }
            }
        }
        directories.insert(item.row, directory);
    })
    .await?;
    Ok((directories, misplaced))
}

/// Reads the index (`index`) a page at a time for invariants 4 and 7, and checks the part of
/// invariant 7 it holds: every chunk cell decodes, and a bucket holds only terms of its own.
/// Counts the distinct terms and the postings. Returns, per cluster its `directories` name,
/// the print of its postings (term and posting), and how many postings name an empty or
/// missing slot of their chunk.
///
/// It holds because only the inverter writes the index, with the encodings these decode, and
/// puts a term rare in a chunk in the bucket of that term ([`rare_row`]).
pub(super) async fn read_postings<S: RowStore>(
    txn: &Transaction<S>,
    directories: &HashMap<Bytes, Directory>,
    summary: &mut IndexSummary,
    violations: &mut Vec<String>,
) -> Result<(HashMap<Bytes, TermPrint>, usize)> {
    let mut found: HashMap<Bytes, TermPrint> = HashMap::new();
    let mut start = Bound::Unbounded;
    // Distinct terms, by 64-bit hash (a term is in its own row, its bucket's, or both).
    let mut terms: HashSet<u64> = HashSet::new();
    let mut orphans = 0usize;
    loop {
        let page = txn.scan_page(INDEX, start, Columns::All, PAGE_ROWS).await?;
        for item in page.items {
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
                    violations.push(format!(
                        "index chunk {}/{}: {e}",
                        lossy(&item.row),
                        lossy(&item.column)
                    ));
                    continue;
                }
            };
            let directory = directories.get(&item.column);
            for (term, chunk) in decoded {
                if is_rare_row(&item.row) && rare_row(&String::from_utf8_lossy(&term)) != item.row {
                    violations.push(format!(
                        "index bucket {}/{} holds term {:?} of another bucket",
                        lossy(&item.row),
                        lossy(&item.column),
                        lossy(&term)
                    ));
                    continue;
                }
                terms.insert(xxhash_rust::xxh3::xxh3_64(&term));
                for (slot, posting) in chunk.postings {
                    summary.postings += 1;
                    match directory
                        .and_then(|d| d.cluster(slot))
                        .filter(|c| !c.is_empty())
                    {
                        Some(cluster) => found
                            .entry(cluster.clone())
                            .or_default()
                            .add_pair(&term, &encode_posting(posting.counts, posting.length)),
                        None => orphans += 1,
                    }
                }
            }
        }
        match page.next {
            Some(next) => start = next,
            None => break,
        }
    }
    summary.terms = terms.len();
    Ok((found, orphans))
}

/// Checks the part of invariant 7 that `clusters:posted` holds: a cluster has postings in a
/// chunk exactly when it has a canonical.
///
/// It holds because the exporter queues every cluster whose canonical changes, and the
/// inverter, once the queue is empty (the rest of invariant 7), has set `posted` for each
/// cluster it indexed and deleted it for each cluster that left.
pub(super) fn check_posted(walk: &Walk, violations: &mut Vec<String>) {
    let (canonicals, posted) = (&walk.canonicals, &walk.posted);
    for (hash, chunk) in posted {
        if !canonicals.contains_key(hash) {
            violations.push(format!(
                "cluster {} has no canonical but its postings are in {}",
                lossy(hash),
                lossy(chunk)
            ));
        }
    }
    for hash in canonicals.keys() {
        if !posted.contains_key(hash) {
            violations.push(format!("cluster {} is in no chunk", lossy(hash)));
        }
    }
}

/// Checks invariant 4 (the index holds the canonicals' terms): per cluster, the print of the
/// postings [`read_postings`] found is that of its canonical document's terms, each with the
/// term's counts and the document's length; postings of clusters without a canonical are
/// stray. Reports the entries missing and stray in all.
///
/// It holds because the exporter records a cluster's canonical terms (`clusters:exported`)
/// and queues the cluster whenever its canonical changes, and the inverter posts those terms
/// and removes the postings the cluster had before; a document's terms change only with its
/// content hash, so with its cluster.
pub(super) fn check_index_terms(
    walk: &Walk,
    mut found: HashMap<Bytes, TermPrint>,
    violations: &mut Vec<String>,
) {
    let (docs, canonicals) = (&walk.docs, &walk.canonicals);
    let (mut missing, mut stray) = (0usize, 0usize);
    for (hash, canonical) in canonicals {
        let expected = docs
            .get(canonical)
            .and_then(|d| d.2)
            .map(|(print, _)| print)
            .unwrap_or_default();
        let got = found.remove(hash).unwrap_or_default();
        if got.count < expected.count {
            missing += expected.count - got.count;
        } else if got.count > expected.count {
            stray += got.count - expected.count;
        } else if got.sum != expected.sum {
            // As many postings as terms, but not the same ones (or other counts).
            missing += 1;
            stray += 1;
        }
    }
    stray += found.values().map(|p| p.count).sum::<usize>();
    if missing > 0 {
        violations.push(format!(
            "{missing} index entries missing for canonical documents' terms"
        ));
    }
    if stray > 0 {
        violations.push(format!(
            "{stray} index entries for non-canonical documents or absent terms (or clusters)"
        ));
    }
}

/// Checks the part of invariant 7 that the slots hold: no cluster is listed in a chunk of
/// another shard (`misplaced`, from [`read_directories`]), and no posting names an empty or
/// missing slot (`orphans`, from [`read_postings`]).
///
/// It holds because a shard's inverter builds its chunks from the clusters queued in its
/// shard, and removes a cluster's postings from its old chunk in the transaction that empties
/// its slot there.
pub(super) fn check_chunk_slots(misplaced: usize, orphans: usize, violations: &mut Vec<String>) {
    if misplaced > 0 {
        violations.push(format!(
            "{misplaced} cluster(s) in a chunk of another shard than their own"
        ));
    }
    if orphans > 0 {
        violations.push(format!(
            "{orphans} index entries name an empty or missing slot of their chunk"
        ));
    }
}

/// Checks the exports behind invariant 4: as many clusters have an `exported` cell as have a
/// canonical.
///
/// It holds because the exporter, observing `clusters:canonical`, writes `exported` when the
/// cluster has a canonical and deletes it when the canonical is deleted.
pub(super) fn check_exported(walk: &Walk, violations: &mut Vec<String>) {
    let (exported_clusters, canonicals) = (walk.exported_clusters, &walk.canonicals);
    if exported_clusters != canonicals.len() {
        violations.push(format!(
            "{exported_clusters} clusters exported, {} have a canonical",
            canonicals.len()
        ));
    }
}

/// Checks invariant 6 (corpus counts): each shard's `corpus:counts` is the number of clusters
/// hashing to it with a canonical, and the sum of their canonicals' lengths. Streams `corpus`
/// (a row per shard).
///
/// It holds because the inverter updates its shard's counts in the transaction that changes
/// the shard's postings: one document and its length more for each cluster it posts, one and
/// the old length less for each cluster whose postings it removes.
pub(super) async fn check_corpus_counts<S: RowStore>(
    txn: &Transaction<S>,
    walk: &Walk,
    violations: &mut Vec<String>,
) -> Result<()> {
    let (docs, canonicals) = (&walk.docs, &walk.canonicals);
    let mut want: BTreeMap<Bytes, CorpusCounts> = BTreeMap::new();
    for (hash, canonical) in canonicals {
        let length = docs.get(canonical).and_then(|d| d.2).map_or(0, |(_, l)| l);
        let shard = want.entry(shard_of(hash)).or_default();
        *shard = shard.plus(CorpusCounts {
            documents: 1,
            length: i64::from(length),
        });
    }
    let mut got: BTreeMap<Bytes, CorpusCounts> = BTreeMap::new();
    for_each_item(txn, CORPUS, |item| {
        if item.column.as_ref() == COUNTS {
            got.insert(item.row, CorpusCounts::decode(&item.value));
        }
    })
    .await?;
    got.retain(|_, c| *c != CorpusCounts::default());
    if want != got {
        let total = |m: &BTreeMap<Bytes, CorpusCounts>| {
            m.values().fold(CorpusCounts::default(), |a, c| a.plus(*c))
        };
        let (w, g) = (total(&want), total(&got));
        violations.push(format!(
            "corpus counts say {} documents of {} tokens, the index has {} of {}{}",
            g.documents,
            g.length,
            w.documents,
            w.length,
            if w == g { " (in other shards)" } else { "" }
        ));
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
    violations: &mut Vec<String>,
) -> Result<()> {
    let mut queued = 0usize;
    for_each_item(txn, INDEX_QUEUE, |item| {
        if item.column.starts_with(QUEUED_PREFIX) {
            queued += 1;
        }
    })
    .await?;
    if queued > 0 {
        violations.push(format!("{queued} cluster(s) still queued for the inverter"));
    }
    Ok(())
}
