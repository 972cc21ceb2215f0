//! Search over the exported index: ranked, with a total count and snippets.
//!
//! A query is split into terms the way pages are ([`distinct_terms`]). [`Mode::All`] (the
//! default, AND) finds the canonical documents containing every term, in the title or the body;
//! [`Mode::Any`] (OR) those containing at least one. Every query reads one snapshot:
//!
//! 1. the corpus counts (`corpus`, one cell per index shard: documents N and their total
//!    length);
//! 2. every posting of every query term (its `index` row: one cell per chunk holding the term,
//!    see [`crate::postings`]), but those of dead slots (the chunks' [`DeadSlots`], read with
//!    the corpus counts). A term's document frequency is the number of its live postings in
//!    that snapshot, so it is exact: the inverter writes a shard's postings, its dead slots and
//!    its corpus counts in one transaction;
//! 3. BM25 over title and body ([`rank`]) for every matching document: the total is their
//!    number;
//! 4. for the best [`RERANK_POOL`] of them by that text score, whatever page is asked for: the
//!    cluster (from the chunk's directory: postings name a slot), its canonical URL, the anchor
//!    terms of links to the document and its inlink count (`anchor_terms`), added to the score;
//!    then **pointers** among them drop below what they point to: a short page (under
//!    [`rank::LENGTH_FLOOR`] of the average length) that links to a longer match of the same
//!    query in the pool with the same title — an old edition's stub saying "see the current
//!    chapter" — ranks just below that match (the titles and outlinks of short pool members,
//!    and the titles of the members they link to, are read for this);
//! 5. for the page of hits returned: the title and a [`snippet`](mod@snippet) from the stored
//!    HTML.
//!
//! **One order per query.** The matches form one total order in a snapshot, and every page is
//! a slice of it, so paging through a query with any `limit` gives each match once: first the
//! pool, by its full score (ties by URL), then the matches past the pool by their text score
//! alone (ties by posting: chunk and slot). Every score in the pool is at least its text score
//! (a pointer's at least the best text score past the pool), and the pool holds the best text
//! scores, so scores never rise down the order.
//! [`SearchResults::scored`] says how many matches got the full score. A match whose cluster has
//! no canonical in the snapshot (a stray posting, which the check reports) cannot be shown: it
//! is left out where it stands, so a page may hold fewer hits than asked for.
//!
//! A query's cost grows with the postings of its terms, so a query for a word on every page
//! reads every document's posting for it.

pub mod rank;
pub mod snippet;

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use percolator_core::{Client, Columns, Error, Result, RowStore, Transaction};
use serde::{Deserialize, Serialize};

use crate::html::page_text;
use crate::postings::{ChunkIter, DeadSlots, Directory, RareChunk, rare_row};
use crate::schema::{
    ANCHOR_TERMS, CANONICAL, CHUNK_CLUSTERS, CLUSTERS, CORPUS, COUNTS, DEAD_PREFIX, DOCUMENTS,
    INDEX, INDEX_DOCS, OUTLINKS, RAW, SUMMARY, TITLE, decode_outlinks,
};
use crate::terms::{AnchorTerms, CorpusCounts, Posting, distinct_terms};
pub use snippet::Snippet;

/// The most HTML parsed for a hit's snippet (1 MiB): pages are kept up to 16 MiB, and parsing
/// all of one costs a tenth of a second; the first megabyte holds a snippet for nearly every
/// page (its title stands in when the body does not).
const SNIPPET_HTML_BYTES: usize = 1024 * 1024;

/// The most distinct terms a query may have (more is an error, never a silently cut query).
pub const MAX_QUERY_TERMS: usize = 32;
/// The most postings one query reads: its cost grows with them (a word on every page has a
/// posting per page), so a query whose words have more is refused with an error that says so,
/// instead of answering after seconds. About eight words that are on every page of a
/// 50 000-page index.
pub const MAX_POSTINGS_READ: usize = 400_000;
/// The most hits one query returns.
pub const MAX_LIMIT: usize = 1000;
/// The matches scored with their anchors and inlinks: the best this many by text score (see
/// the module docs). Independent of the page asked for, so that every page is a slice of one
/// order; large enough that a page whose text score is low for its length (a long reference
/// page) but whose anchors name the query still reaches the top.
pub const RERANK_POOL: usize = 250;

/// How a query's terms combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// Documents containing every term (AND).
    #[default]
    All,
    /// Documents containing at least one term (OR).
    Any,
}

impl std::str::FromStr for Mode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "all" | "and" => Ok(Mode::All),
            "any" | "or" => Ok(Mode::Any),
            _ => Err(Error::InvalidInput(format!(
                "search mode {s:?}: expected `all` (AND) or `any` (OR)"
            ))),
        }
    }
}

/// What to return.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct SearchOptions {
    /// AND or OR.
    pub mode: Mode,
    /// Hits to return (at most [`MAX_LIMIT`]).
    pub limit: usize,
    /// Hits to skip first (for paging).
    pub offset: usize,
    /// Whether to read the pages for snippets.
    pub snippets: bool,
    /// The most postings the query may read ([`MAX_POSTINGS_READ`] by default).
    pub max_postings: usize,
    /// How many of the best matches by text score get their anchors and inlinks added
    /// ([`RERANK_POOL`] by default; see the module docs). The order, and so every page, depends
    /// on it: keep it the same while paging.
    pub rerank_pool: usize,
    /// The length floor of BM25's length normalization, as a share of the average length
    /// ([`rank::LENGTH_FLOOR`] by default; 0: plain BM25).
    pub length_floor: f64,
    /// Whether pointers rank below what they point to (see the module docs; on by default).
    pub demote_pointers: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            mode: Mode::All,
            limit: 10,
            offset: 0,
            snippets: true,
            max_postings: MAX_POSTINGS_READ,
            rerank_pool: RERANK_POOL,
            length_floor: rank::LENGTH_FLOOR,
            demote_pointers: true,
        }
    }
}

impl SearchOptions {
    /// With this mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Returning at most `limit` hits.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Skipping the first `offset` hits.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// With or without snippets.
    pub fn snippets(mut self, snippets: bool) -> Self {
        self.snippets = snippets;
        self
    }

    /// Reading at most `max_postings` postings (more refuses the query as too broad).
    pub fn max_postings(mut self, max_postings: usize) -> Self {
        self.max_postings = max_postings;
        self
    }

    /// Normalizing pages shorter than `floor` × the average length as if they were that long.
    pub fn length_floor(mut self, floor: f64) -> Self {
        self.length_floor = floor;
        self
    }

    /// Adding anchors and inlinks to the best `pool` matches by text score.
    pub fn rerank_pool(mut self, pool: usize) -> Self {
        self.rerank_pool = pool;
        self
    }

    /// Ranking pointers below what they point to, or not.
    pub fn demote_pointers(mut self, demote: bool) -> Self {
        self.demote_pointers = demote;
        self
    }
}

/// One ranked result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Canonical URL.
    pub url: String,
    /// Its title.
    pub title: String,
    /// Its score (higher is better; comparable within one query only).
    pub score: f64,
    /// Links pointing at it (anchors forwarded to it).
    pub inlinks: i64,
    /// Where the query's terms occur in it (empty without snippets).
    pub snippet: Snippet,
}

/// The answer to a query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    /// The query's terms, as searched.
    pub terms: Vec<String>,
    /// How they combined.
    pub mode: Mode,
    /// Documents matching (all of them, not just the ones returned).
    pub total: usize,
    /// Matches scored with their anchors and inlinks: the best [`SearchOptions::rerank_pool`]
    /// by text score (every match, when fewer match). The rest follow by text score alone.
    #[serde(default)]
    pub scored: usize,
    /// Documents in the index.
    pub documents: i64,
    /// The page of hits asked for, best first.
    pub hits: Vec<Hit>,
}

/// A matching document while ranking.
struct Candidate {
    /// Where its postings are: the chunk and the slot in it.
    slot: (Bytes, u32),
    /// Its canonical URL, once looked up (empty before).
    url: Bytes,
    score: f64,
    inlinks: i64,
    /// The document's length in tokens.
    length: u32,
}

/// Searches the index (see the module docs).
pub async fn search<S: RowStore>(
    client: &Client<S>,
    query: &str,
    options: &SearchOptions,
) -> Result<SearchResults> {
    let terms = distinct_terms(query);
    if terms.len() > MAX_QUERY_TERMS {
        return Err(Error::InvalidInput(format!(
            "the query has {} distinct words; at most {MAX_QUERY_TERMS} are allowed",
            terms.len()
        )));
    }
    if options.limit > MAX_LIMIT {
        return Err(Error::InvalidInput(format!(
            "limit {} is above the most a query returns, {MAX_LIMIT}",
            options.limit
        )));
    }
    let txn = client.begin().await?;
    let (corpus, dead) = corpus_counts(&txn).await?;
    let mut results = SearchResults {
        terms,
        mode: options.mode,
        total: 0,
        scored: 0,
        documents: corpus.documents,
        hits: Vec::new(),
    };
    if results.terms.is_empty() {
        return Err(Error::InvalidInput(format!(
            "the query {} has no word to search for (a word is 2 to 32 letters or digits)",
            quoted_prefix(query)
        )));
    }
    let average_length = if corpus.documents > 0 {
        corpus.length as f64 / corpus.documents as f64
    } else {
        1.0
    };

    // BM25 over every matching document.
    // Per matching posting: the text score, the terms matched, the document's length.
    let mut matches: HashMap<(Bytes, u32), (f64, usize, u32)> = HashMap::new();
    let mut weights = Vec::with_capacity(results.terms.len());
    let mut postings_read = 0usize;
    for term in &results.terms {
        // The term's postings are in its own row where it was frequent in a chunk, and in its
        // rare-term bucket where it was not (see `crate::postings`).
        let (own, bucket) = (Bytes::from(term.clone()), rare_row(term));
        let (own, rare) = futures::try_join!(
            txn.scan(INDEX, own.clone()..=own, Columns::All),
            txn.scan(INDEX, bucket.clone()..=bucket, Columns::All),
        )?;
        // A corrupt chunk reads as far as it decodes (the check reports it).
        let postings: Vec<((Bytes, u32), Posting)> = own
            .iter()
            .filter_map(|item| Some((&item.column, ChunkIter::new(&item.value).ok()?)))
            .chain(rare.iter().filter_map(|item| {
                Some((
                    &item.column,
                    RareChunk::postings_of(&item.value, term).ok()??,
                ))
            }))
            .flat_map(|(chunk, postings)| {
                // The postings of a chunk's dead slots are not the index's any more.
                let dead = dead.get(chunk);
                postings
                    .map_while(std::result::Result::ok)
                    .filter(move |(slot, _)| !dead.is_some_and(|d| d.contains(*slot)))
                    .map(move |(slot, posting)| ((chunk.clone(), slot), posting))
            })
            .collect();
        postings_read += postings.len();
        if postings_read > options.max_postings {
            return Err(Error::InvalidInput(format!(
                "the query's words are on more than {} pages in all: too broad a query to rank; \
                 use fewer or rarer words",
                options.max_postings
            )));
        }
        let idf = rank::idf(corpus.documents.max(0) as u64, postings.len() as u64);
        weights.push((term.clone(), idf));
        for (key, posting) in postings {
            let entry = matches.entry(key).or_default();
            entry.0 +=
                rank::term_score_with_floor(idf, &posting, average_length, options.length_floor);
            entry.1 += 1;
            entry.2 = posting.length;
        }
    }
    let needed = match options.mode {
        Mode::All => results.terms.len(),
        Mode::Any => 1,
    };
    let mut candidates: Vec<Candidate> = matches
        .into_iter()
        .filter(|(_, (_, matched, _))| *matched >= needed)
        .map(|(slot, (score, _, length))| Candidate {
            slot,
            url: Bytes::new(),
            score,
            inlinks: 0,
            length,
        })
        .collect();
    results.total = candidates.len();
    sort(&mut candidates);

    // The pool: anchors and inlinks added, strays left out, ordered by the full score.
    let rest = candidates.split_off(candidates.len().min(options.rerank_pool));
    results.scored = candidates.len();
    resolve(&txn, &mut candidates, Some(&weights)).await?;
    candidates.retain(|c| !c.url.is_empty());
    if options.demote_pointers {
        let short_below = rank::LENGTH_FLOOR * average_length;
        let floor = rest.first().map_or(0.0, |c| c.score);
        demote_pointers(&txn, &mut candidates, short_below, floor).await?;
    }
    sort(&mut candidates);

    // The page: a slice of the pool, then of the rest (already in text-score order).
    let from_rest_at = options.offset.saturating_sub(candidates.len());
    let mut page: Vec<Candidate> = candidates
        .into_iter()
        .skip(options.offset)
        .take(options.limit)
        .collect();
    let mut tail: Vec<Candidate> = rest
        .into_iter()
        .skip(from_rest_at)
        .take(options.limit - page.len())
        .collect();
    resolve(&txn, &mut tail, None).await?;
    page.extend(tail.into_iter().filter(|c| !c.url.is_empty()));
    // The page's titles (and pages, for snippets) in one batched read.
    let columns: &[&[u8]] = if options.snippets {
        &[TITLE, RAW]
    } else {
        &[TITLE]
    };
    let cells = txn
        .get_many(page.iter().flat_map(|c| {
            columns
                .iter()
                .map(move |column| (DOCUMENTS, c.url.as_ref(), *column))
        }))
        .await?;
    results.hits = page
        .into_iter()
        .zip(cells.chunks(columns.len()))
        .map(|(candidate, cells)| {
            let title = cells.first().cloned().flatten().unwrap_or_default();
            let raw = cells.get(1).cloned().flatten();
            hit(candidate, title, raw, &results.terms)
        })
        .collect();
    Ok(results)
}

/// Looks up each candidate's canonical URL and the anchors of links to it (its inlinks); with
/// the query's term `weights`, adds the anchor and static score. A candidate whose cluster has
/// no canonical in the snapshot keeps an empty URL.
async fn resolve<S: RowStore>(
    txn: &Transaction<S>,
    candidates: &mut [Candidate],
    weights: Option<&[(String, f64)]>,
) -> Result<()> {
    // Three batched reads (one store round trip each where the store batches): the chunks'
    // directories, the clusters' canonical URLs, and those URLs' anchor summaries.
    let chunks = distinct(candidates.iter().map(|c| &c.slot.0));
    let cells = txn
        .get_many(
            chunks
                .iter()
                .map(|c| (INDEX_DOCS, c.as_ref(), CHUNK_CLUSTERS)),
        )
        .await?;
    let directories: HashMap<&Bytes, Directory> = chunks
        .into_iter()
        .zip(cells)
        .map(|(chunk, cell)| (chunk, Directory::decode(&cell.unwrap_or_default())))
        .collect();
    // Postings name a slot of a chunk, the chunk's directory the cluster, and the cluster its
    // canonical URL.
    let clustered: Vec<(usize, &Bytes)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let cluster = directories.get(&c.slot.0)?.cluster(c.slot.1)?;
            (!cluster.is_empty()).then_some((i, cluster))
        })
        .collect();
    let urls = txn
        .get_many(
            clustered
                .iter()
                .map(|(_, cluster)| (CLUSTERS, cluster.as_ref(), CANONICAL)),
        )
        .await?;
    let found: Vec<(usize, Bytes)> = clustered
        .iter()
        .zip(urls)
        .filter_map(|((i, _), url)| Some((*i, url?)))
        .collect();
    let summaries = txn
        .get_many(
            found
                .iter()
                .map(|(_, url)| (ANCHOR_TERMS, url.as_ref(), SUMMARY)),
        )
        .await?;
    for ((i, url), summary) in found.into_iter().zip(summaries) {
        let candidate = &mut candidates[i];
        let anchors = summary.map(|b| AnchorTerms::decode(&b)).unwrap_or_default();
        if let Some(weights) = weights {
            candidate.score += rank::anchor_score(weights, &anchors);
        }
        candidate.inlinks = anchors.anchors;
        candidate.url = url;
    }
    Ok(())
}

/// The distinct items of `items` (in no particular order): the cells a batch reads once each.
fn distinct<'a>(items: impl Iterator<Item = &'a Bytes>) -> Vec<&'a Bytes> {
    items.collect::<HashSet<_>>().into_iter().collect()
}

/// How far below its target a pointer ranks: a share of the target's score.
const POINTER_MARGIN: f64 = 1e-6;

/// Ranks each short member of `pool` (under `short_below` tokens) that links to a longer member
/// with the same title just below the best-scoring such member, when it scored above it; never
/// below `floor`, the best text score past the pool (so scores still never rise down the
/// order). A short page whose title is another page's, and which links to it, is a pointer to
/// that page: the old editions' stubs of the Rust book ("no longer distributed… see the current
/// version") are.
async fn demote_pointers<S: RowStore>(
    txn: &Transaction<S>,
    pool: &mut [Candidate],
    short_below: f64,
    floor: f64,
) -> Result<()> {
    let short: Vec<usize> = (0..pool.len())
        .filter(|&i| f64::from(pool[i].length) < short_below)
        .collect();
    if short.is_empty() {
        return Ok(());
    }
    let members: HashMap<Bytes, (f64, u32)> = pool
        .iter()
        .map(|c| (c.url.clone(), (c.score, c.length)))
        .collect();
    // Each short member's title and its links to longer members.
    // The short members' titles and outlinks in one batched read, then the titles of the
    // longer members they link to in another.
    let cells = txn
        .get_many(short.iter().flat_map(|&i| {
            let url = pool[i].url.as_ref();
            [(DOCUMENTS, url, TITLE), (DOCUMENTS, url, OUTLINKS)]
        }))
        .await?;
    let pointers: Vec<(usize, Bytes, Vec<Bytes>)> = short
        .iter()
        .zip(cells.chunks(2))
        .map(|(&i, cells)| {
            let length = pool[i].length;
            let title = cells.first().cloned().flatten().unwrap_or_default();
            let targets = cells
                .get(1)
                .cloned()
                .flatten()
                .map(|links| decode_outlinks(&links))
                .unwrap_or_default()
                .into_iter()
                .map(|(target, _)| Bytes::from(target))
                .filter(|t| members.get(t).is_some_and(|(_, l)| *l > length))
                .collect();
            (i, title, targets)
        })
        .collect();
    let linked = distinct(pointers.iter().flat_map(|(_, _, t)| t));
    let linked_titles = txn
        .get_many(linked.iter().map(|url| (DOCUMENTS, url.as_ref(), TITLE)))
        .await?;
    let titles: HashMap<&Bytes, Bytes> = linked
        .into_iter()
        .zip(linked_titles)
        .map(|(url, title)| (url, title.unwrap_or_default()))
        .collect();
    for (i, title, targets) in &pointers {
        if title.is_empty() {
            continue;
        }
        let target = targets
            .iter()
            .filter(|t| titles.get(t) == Some(title))
            .filter_map(|t| members.get(t).map(|(score, _)| *score))
            .max_by(f64::total_cmp);
        let pointer = &mut pool[*i];
        if let Some(target) = target
            && target <= pointer.score
        {
            pointer.score = (target * (1.0 - POINTER_MARGIN)).max(floor);
        }
    }
    Ok(())
}

/// The start of `query`, quoted, for an error message (a query may be very long).
fn quoted_prefix(query: &str) -> String {
    const SHOWN: usize = 40;
    match query.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{:?}…", &query[..cut]),
        None => format!("{query:?}"),
    }
}

/// Best score first, then URL order (deterministic ties; before the URLs are looked up, the
/// cluster hash's).
fn sort(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.url.cmp(&b.url))
            .then_with(|| a.slot.cmp(&b.slot))
    });
}

/// Documents in the index (the corpus counts summed over their shards), in one snapshot.
pub async fn documents<S: RowStore>(client: &Client<S>) -> Result<i64> {
    let txn = client.begin().await?;
    Ok(corpus_counts(&txn).await?.0.documents)
}

/// The corpus counts summed over their shards, and the chunks' dead slots (in the same rows).
async fn corpus_counts<S: RowStore>(
    txn: &Transaction<S>,
) -> Result<(CorpusCounts, HashMap<Bytes, DeadSlots>)> {
    let mut counts = CorpusCounts::default();
    let mut dead = HashMap::new();
    for item in txn.scan::<Bytes>(CORPUS, .., Columns::All).await? {
        if item.column == COUNTS {
            counts = counts.plus(CorpusCounts::decode(&item.value));
        } else if let Some(chunk) = item.column.strip_prefix(DEAD_PREFIX)
            // A list that does not decode is skipped (the check reports it).
            && let Some(slots) = DeadSlots::decode(&item.value)
        {
            dead.insert(Bytes::copy_from_slice(chunk), slots);
        }
    }
    Ok((counts, dead))
}

/// A candidate's hit: its `title`, and a snippet from its stored page `raw` (none without).
fn hit(candidate: Candidate, title: Bytes, raw: Option<Bytes>, terms: &[String]) -> Hit {
    let url = candidate.url;
    let snippet = match raw {
        Some(cell) => {
            let html = crate::raw::html_or_stored(&cell);
            let text = page_text(&html[..crate::raw::cut_at(&html, SNIPPET_HTML_BYTES)]);
            let body = if text.body.is_empty() {
                text.title
            } else {
                text.body
            };
            snippet::snippet(&body, terms)
        }
        None => Snippet::default(),
    };
    Hit {
        url: String::from_utf8_lossy(&url).into_owned(),
        title: String::from_utf8_lossy(&title).into_owned(),
        score: candidate.score,
        inlinks: candidate.inlinks,
        snippet,
    }
}
