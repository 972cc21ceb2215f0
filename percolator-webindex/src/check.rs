//! The web index's invariants, checked in one snapshot whenever no notification is pending:
//!
//! 1. every document with a content hash is a member of exactly the cluster of that hash, and
//!    its `cluster` bookkeeping says so; every membership row belongs to such a document;
//! 2. every cluster with members has exactly one canonical, the member [`choose_canonical`]
//!    picks (its duplicates' `<link rel="canonical">`, then the best [`canonical_rank`]), and
//!    each membership holds what its document declares; a cluster without members has none;
//! 3. inverted links point at canonicals: each link target says it forwarded its anchors to its
//!    canonical (`forwarded_to`), with the terms its anchors have (`forwarded`); a target nothing
//!    links to forwards nothing;
//! 4. the index holds, for each cluster, exactly the terms of its canonical document, each
//!    posting with the term's counts and the document's length;
//! 5. each canonical's anchor terms (`anchor_terms`) are those of the anchors of every link to
//!    its cluster's members;
//! 6. each corpus shard counts exactly the clusters hashing to it and their canonicals' lengths;
//! 7. no cluster is still queued for the inverter (`index_queue`); every posting chunk decodes
//!    and names a listed slot; each indexed cluster is listed in exactly the chunk its
//!    `clusters:posted` names, a chunk of its shard.
//!
//! Also counts what is in the index ([`IndexSummary`]).
//!
//! Memory stays bounded by the number of documents and clusters, not by the bytes stored: every
//! table is read a page at a time ([`Transaction::scan_page`]), and invariants 4 and 5 compare,
//! per cluster or canonical, the number and a 64-bit fingerprint (a wrapping sum of xxh3
//! hashes) of what should be there — its terms, its anchor terms — with what is there, instead
//! of holding both sets.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound;

use bytes::Bytes;
use percolator_core::{Client, Columns, Result, RowStore, ScanItem, Transaction};
use serde::{Deserialize, Serialize};

use super::postings::{Directory, PostingChunk, RareChunk, is_rare_row, rare_row};
use super::schema::*;
use super::terms::{AnchorTerms, CorpusCounts, PageTerms, encode_posting};

/// Sizes of the web index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IndexSummary {
    /// Documents with raw HTML.
    pub documents: usize,
    /// Documents processed (with a content hash).
    pub processed: usize,
    /// Non-empty duplicate clusters (= canonical documents).
    pub clusters: usize,
    /// Documents that are not their cluster's canonical.
    pub duplicates: usize,
    /// Link targets with anchor text.
    pub link_targets: usize,
    /// Anchor texts of links to crawled or uncrawled pages (each counts toward its target's
    /// canonical).
    pub inlinks: usize,
    /// Distinct terms in the index.
    pub terms: usize,
    /// Index entries (term, cluster), summed over the posting blocks.
    pub postings: usize,
}

/// The result of a check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckReport {
    /// What the index holds.
    pub summary: IndexSummary,
    /// Every invariant violation found (empty: all hold).
    pub violations: Vec<String>,
}

/// One link target's `links` row as the check reads it.
struct ForwardedLinks {
    row: Bytes,
    /// The terms of its anchors (one anchor per page linking to it).
    anchors: AnchorTerms,
    forwarded_to: Option<Bytes>,
    forwarded: Option<AnchorTerms>,
}

impl ForwardedLinks {
    fn new(row: Bytes) -> Self {
        Self {
            row,
            anchors: AnchorTerms::default(),
            forwarded_to: None,
            forwarded: None,
        }
    }
}

/// Calls `f` on every cell of `table`, reading [`PAGE_ROWS`] rows at a time.
async fn for_each_item<S: RowStore>(
    txn: &Transaction<S>,
    table: &[u8],
    mut f: impl FnMut(ScanItem),
) -> Result<()> {
    let mut start = Bound::Unbounded;
    loop {
        let page = txn.scan_page(table, start, Columns::All, PAGE_ROWS).await?;
        page.items.into_iter().for_each(&mut f);
        match page.next {
            Some(next) => start = next,
            None => return Ok(()),
        }
    }
}

/// A document's `hash`, `cluster` and `declared_canonical` cells, and its postings'
/// [`TermPrint`] with its length.
type DocCells = (
    Option<Bytes>,
    Option<Bytes>,
    Option<(TermPrint, u32)>,
    Option<Bytes>,
);

/// Rows per page of the paged scans.
const PAGE_ROWS: usize = 64;

/// How many terms, and a fingerprint of which: equal sets give equal prints, and different
/// sets collide with probability about 2⁻⁶⁴.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TermPrint {
    count: usize,
    sum: u64,
}

impl TermPrint {
    fn add(&mut self, term: &[u8]) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(xxhash_rust::xxh3::xxh3_64(term));
    }

    /// Adds a `(column, value)` pair (length-prefixed, so no two pairs hash alike by
    /// construction).
    fn add_pair(&mut self, column: &[u8], value: &[u8]) {
        let mut buf = Vec::with_capacity(8 + column.len() + value.len());
        buf.extend_from_slice(&(column.len() as u64).to_le_bytes());
        buf.extend_from_slice(column);
        buf.extend_from_slice(value);
        self.add(&buf);
    }

    /// The print of a page's postings (term, posting value) and its length.
    fn of_postings(terms_cell: &[u8]) -> (Self, u32) {
        let page = PageTerms::decode(terms_cell);
        let mut print = Self::default();
        for (term, posting) in page.postings() {
            print.add_pair(term.as_bytes(), &posting);
        }
        (print, page.length)
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Checks every invariant in one snapshot (a read-only transaction).
pub async fn check<S: RowStore>(client: &Client<S>) -> Result<CheckReport> {
    let txn = client.begin().await?;
    let mut violations = Vec::new();
    let mut summary = IndexSummary::default();

    let mut docs: BTreeMap<Bytes, DocCells> = BTreeMap::new();
    // Every column, though four are used: reading a cell resolves a lock a dead worker left on
    // it (lazily, as any reader does), and a check that leaves such locks behind would report
    // a finished pipeline that `status` still shows locks in.
    let mut start = Bound::Unbounded;
    loop {
        let page = txn
            .scan_page(DOCUMENTS, start, Columns::All, PAGE_ROWS)
            .await?;
        for item in page.items {
            let entry = docs.entry(item.row.clone()).or_default();
            match item.column.as_ref() {
                c if c == RAW => summary.documents += 1,
                c if c == HASH => entry.0 = Some(item.value),
                c if c == CLUSTER => entry.1 = Some(item.value),
                c if c == TERMS => entry.2 = Some(TermPrint::of_postings(&item.value)),
                c if c == DECLARED_CANONICAL => entry.3 = Some(item.value),
                _ => {}
            }
        }
        match page.next {
            Some(next) => start = next,
            None => break,
        }
    }
    // hash -> member URL -> the URL it declares canonical (empty: none)
    let mut clusters: BTreeMap<Bytes, BTreeMap<Bytes, Bytes>> = BTreeMap::new();
    for item in txn.scan::<Bytes>(MEMBERS, .., Columns::one(MEMBER)).await? {
        match item.row.iter().position(|&b| b == b'/') {
            Some(i) => {
                clusters
                    .entry(item.row.slice(..i))
                    .or_default()
                    .insert(item.row.slice(i + 1..), item.value);
            }
            None => violations.push(format!("malformed membership row {:?}", lossy(&item.row))),
        }
    }

    // 1. membership
    for (url, (hash, cluster, _, declared)) in &docs {
        let Some(hash) = hash else { continue };
        summary.processed += 1;
        match clusters.get(hash).and_then(|m| m.get(url)) {
            None => violations.push(format!(
                "{} has hash {} but is not a member of its cluster",
                lossy(url),
                lossy(hash)
            )),
            Some(listed) if listed != declared.as_ref().unwrap_or(&Bytes::new()) => {
                violations.push(format!(
                    "{} declares canonical {:?} but its membership says {:?}",
                    lossy(url),
                    declared.as_deref().map(lossy),
                    lossy(listed)
                ));
            }
            Some(_) => {}
        }
        if cluster.as_ref() != Some(hash) {
            violations.push(format!(
                "{} has hash {} but its cluster column says {:?}",
                lossy(url),
                lossy(hash),
                cluster.as_deref().map(lossy)
            ));
        }
    }
    for (hash, members) in &clusters {
        for url in members.keys() {
            if docs.get(url).and_then(|d| d.0.as_ref()) != Some(hash) {
                violations.push(format!(
                    "{} is listed in cluster {} but its hash differs",
                    lossy(url),
                    lossy(hash)
                ));
            }
        }
    }

    // 2. one canonical per cluster (the `exported` cells hold term lists: paged too)
    let mut canonicals: BTreeMap<Bytes, Bytes> = BTreeMap::new();
    let mut exported_clusters = 0;
    let mut posted: BTreeMap<Bytes, Bytes> = BTreeMap::new();
    for_each_item(&txn, CLUSTERS, |item| {
        if item.column.as_ref() == CANONICAL {
            canonicals.insert(item.row, item.value);
        } else if item.column.as_ref() == EXPORTED {
            exported_clusters += 1;
        } else if item.column.as_ref() == POSTED {
            posted.insert(item.row, item.value);
        }
    })
    .await?;
    for (hash, members) in &clusters {
        let best = choose_canonical(members);
        if canonicals.get(hash) != best {
            violations.push(format!(
                "cluster {} has canonical {:?}, expected {:?}",
                lossy(hash),
                canonicals.get(hash).map(|c| lossy(c)),
                best.map(|b| lossy(b))
            ));
        }
    }
    for hash in canonicals.keys() {
        if !clusters.contains_key(hash) {
            violations.push(format!(
                "cluster {} has a canonical but no members",
                lossy(hash)
            ));
        }
    }
    summary.clusters = canonicals.len();
    summary.duplicates = summary.processed.saturating_sub(summary.clusters);
    let canonical_of = |url: &Bytes| -> Bytes {
        docs.get(url)
            .and_then(|d| d.1.as_ref())
            .and_then(|h| canonicals.get(h))
            .cloned()
            .unwrap_or_else(|| url.clone())
    };

    // 3. inverted links, a target at a time: its anchors' terms are what it says it forwarded,
    // to its canonical; 5. (gathered here) per canonical, the prints of its targets' anchor
    // terms, to compare with its summary (prints add up, so no canonical's terms are held).
    let mut anchor_terms: HashMap<Bytes, (i64, u64)> = HashMap::new();
    let mut current: Option<ForwardedLinks> = None;
    let mut finish = |target: Option<ForwardedLinks>, violations: &mut Vec<String>| {
        let Some(target) = target else { return };
        let canonical = canonical_of(&target.row);
        if target.anchors.anchors > 0 {
            summary.link_targets += 1;
            summary.inlinks += usize::try_from(target.anchors.anchors).unwrap_or(0);
            if target.forwarded_to.as_ref() != Some(&canonical) {
                violations.push(format!(
                    "links to {} are forwarded to {:?}, not to its canonical {}",
                    lossy(&target.row),
                    target.forwarded_to.as_deref().map(lossy),
                    lossy(&canonical)
                ));
            }
            if target.forwarded.as_ref() != Some(&target.anchors) {
                violations.push(format!(
                    "the anchor terms forwarded from {} are not those of its links",
                    lossy(&target.row)
                ));
            }
            let (anchors, terms) = target.anchors.print();
            let sum = anchor_terms.entry(canonical).or_default();
            *sum = (sum.0 + anchors, sum.1.wrapping_add(terms));
        } else if target.forwarded_to.is_some() || target.forwarded.is_some() {
            violations.push(format!(
                "{} has no links but forwards anchor terms to {:?}",
                lossy(&target.row),
                target.forwarded_to.as_deref().map(lossy)
            ));
        }
    };
    for_each_item(&txn, LINKS, |item| {
        if current.as_ref().map(|t| &t.row) != Some(&item.row) {
            finish(current.take(), &mut violations);
            current = Some(ForwardedLinks::new(item.row.clone()));
        }
        let Some(target) = current.as_mut() else {
            return;
        };
        if item.column.starts_with(FROM_PREFIX) {
            target.anchors.apply(&item.value, 1);
        } else if item.column.as_ref() == FORWARDED_TO {
            target.forwarded_to = Some(item.value);
        } else if item.column.as_ref() == FORWARDED {
            target.forwarded = Some(AnchorTerms::decode(&item.value));
        }
    })
    .await?;
    finish(current.take(), &mut violations);

    // 4. the index, a page at a time: per cluster, how many postings and which terms. The
    // chunk directories name the clusters (one line per cluster: bounded like the documents).
    let mut directories: HashMap<Bytes, Directory> = HashMap::new();
    let mut misplaced = 0usize;
    for_each_item(&txn, INDEX_DOCS, |item| {
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
    drop(terms);
    for (hash, chunk) in &posted {
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
    let (mut missing, mut stray) = (0usize, 0usize);
    for (hash, canonical) in &canonicals {
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
    if exported_clusters != canonicals.len() {
        violations.push(format!(
            "{exported_clusters} clusters exported, {} have a canonical",
            canonicals.len()
        ));
    }

    // 5. anchor terms
    let mut stored: HashMap<Bytes, (i64, u64)> = HashMap::new();
    for_each_item(&txn, ANCHOR_TERMS, |item| {
        stored.insert(item.row, AnchorTerms::decode(&item.value).print());
    })
    .await?;
    let mut rows: BTreeSet<&Bytes> = anchor_terms.keys().collect();
    rows.extend(stored.keys());
    for row in rows {
        match (anchor_terms.get(row), stored.get(row)) {
            (Some(want), Some(got)) if want == got => {}
            (Some(_), None) => violations.push(format!(
                "{} has links to its cluster but no anchor terms",
                lossy(row)
            )),
            (None, Some(_)) => violations.push(format!(
                "{} has anchor terms but no links to its cluster",
                lossy(row)
            )),
            _ => violations.push(format!(
                "the anchor terms of {} are not those of the links to its cluster",
                lossy(row)
            )),
        }
    }

    // 6. corpus counts, per shard
    let mut want: BTreeMap<Bytes, CorpusCounts> = BTreeMap::new();
    for (hash, canonical) in &canonicals {
        let length = docs.get(canonical).and_then(|d| d.2).map_or(0, |(_, l)| l);
        let shard = want.entry(shard_of(hash)).or_default();
        *shard = shard.plus(CorpusCounts {
            documents: 1,
            length: i64::from(length),
        });
    }
    let mut got: BTreeMap<Bytes, CorpusCounts> = BTreeMap::new();
    for_each_item(&txn, CORPUS, |item| {
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

    // 7. nothing waits to be inverted
    let mut queued = 0usize;
    for_each_item(&txn, INDEX_QUEUE, |item| {
        if item.column.starts_with(QUEUED_PREFIX) {
            queued += 1;
        }
    })
    .await?;
    if queued > 0 {
        violations.push(format!("{queued} cluster(s) still queued for the inverter"));
    }
    Ok(CheckReport {
        summary,
        violations,
    })
}
