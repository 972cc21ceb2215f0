//! Posting chunks: how the term index stores its postings, many to a cell.
//!
//! A cell per posting would make every exported page cost over a thousand transactional writes
//! (one per distinct term), and the index most of the bytes stored. Instead, the inverter
//! ([`crate::pipeline::Inverter`]) applies the clusters queued in one index shard as a batch,
//! and the batch becomes a **chunk**:
//!
//! - the chunk's **directory** ([`Directory`], one `index_docs` cell) lists the batch's
//!   clusters; a cluster's place in that list is its *slot*;
//! - per term, the postings of the chunk's clusters that contain the term, by slot: in a cell
//!   of the term's own ([`PostingChunk`], row = the term) when the term has at least
//!   [`RARE_POSTINGS`] of them, else in its **rare-term bucket**'s cell ([`RareChunk`], row =
//!   [`rare_row`], one of [`RARE_BUCKETS`]), shared with the other rare terms of that bucket;
//! - the chunk's **own terms** ([`OwnTerms`], a second `index_docs` cell) list the terms with a
//!   cell of their own, so that removing a cluster's postings reads only the cells that hold
//!   them: a term's own cell if listed, else its bucket's.
//!
//! Most of a batch's distinct terms are rare in it (a Zipf vocabulary: the great majority of
//! the terms of a batch of realistic pages have fewer than 8 postings), and every cell costs a
//! lock, a write record, and its share of flushes and compactions; buckets cut a batch's cells
//! several times over. A query reads the term's row and its bucket's row, and decodes only the
//! term's entry of each bucket cell.
//!
//! A batch writes only new cells, without reading any (blind writes cannot conflict, and cost
//! no reads), and lists them: its own terms and its buckets ([`ChunkBuckets`]). Only a cluster
//! that changes or leaves after it was inverted has its postings removed from the chunk that
//! holds them (its `clusters:posted` cell names the chunk), and lazily: its slot becomes one of
//! the chunk's [`DeadSlots`], which searches skip, until the chunk is compacted. The number of
//! cells grows with the batches, not with the postings, and a batch's cost does not grow with
//! the index.
//!
//! A chunk cell is binary, since chunks are the bulk of the index: a version byte, then per
//! posting in slot order the slot's distance from the previous posting's slot, the term's
//! counts in the title and the body, and the document's length, as LEB128 varints (about 5
//! bytes a posting). Decoding never panics: a malformed chunk is a [`ChunkError`] naming what is
//! wrong. Directories, own-term lists and [`Held`] states are text, readable in `percolator
//! scan`.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::terms::{PageTerms, Posting, TermCounts};

/// The first byte of every chunk: the encoding's version.
const CHUNK_VERSION: u8 = 1;

/// Why a chunk could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// The chunk is empty or starts with an unknown version byte.
    #[error("posting chunk has version {0:?}, expected {CHUNK_VERSION}")]
    Version(Option<u8>),
    /// The chunk ends inside a posting, or a number does not fit.
    #[error("posting chunk is malformed at byte {0}")]
    Malformed(usize),
}

/// The postings of one term in one chunk, by slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostingChunk {
    /// Postings by slot (the cluster's place in the chunk's [`Directory`]).
    pub postings: BTreeMap<u32, Posting>,
}

impl PostingChunk {
    /// Encodes the chunk (see the module docs).
    pub fn encode(&self) -> Bytes {
        Self::encode_sorted(
            self.postings
                .iter()
                .map(|(slot, posting)| (*slot, *posting)),
        )
    }

    /// Encodes postings given in increasing slot order (as [`PostingChunk::encode`] would the
    /// chunk holding them), without building the map.
    pub fn encode_sorted(postings: impl ExactSizeIterator<Item = (u32, Posting)>) -> Bytes {
        let mut out = Vec::with_capacity(1 + postings.len() * 6);
        out.push(CHUNK_VERSION);
        let mut previous = 0u32;
        for (slot, posting) in postings {
            put_varint(&mut out, u64::from(slot.saturating_sub(previous)));
            previous = slot;
            put_varint(&mut out, u64::from(posting.counts.title));
            put_varint(&mut out, u64::from(posting.counts.body));
            put_varint(&mut out, u64::from(posting.length));
        }
        out.into()
    }

    /// Decodes [`PostingChunk::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Self, ChunkError> {
        Ok(Self {
            postings: ChunkIter::new(bytes)?.collect::<Result<_, _>>()?,
        })
    }

    /// Whether the chunk holds no posting.
    pub fn is_empty(&self) -> bool {
        self.postings.is_empty()
    }
}

/// The postings of an encoded chunk in slot order, without building a map (queries read
/// chunks this way).
pub struct ChunkIter<'a> {
    bytes: &'a [u8],
    at: usize,
    slot: Option<u32>,
    failed: bool,
}

impl<'a> ChunkIter<'a> {
    /// Iterates over an encoded chunk; fails at once on an unknown version.
    pub fn new(bytes: &'a [u8]) -> Result<Self, ChunkError> {
        match bytes.first() {
            Some(&CHUNK_VERSION) => Ok(Self {
                bytes,
                at: 1,
                slot: None,
                failed: false,
            }),
            other => Err(ChunkError::Version(other.copied())),
        }
    }

    fn next_posting(&mut self) -> Result<(u32, Posting), ChunkError> {
        let start = self.at;
        let gap = self.u32()?;
        // Slots strictly increase: only the first posting may have a zero gap.
        let slot = match self.slot {
            None => gap,
            Some(_) if gap == 0 => return Err(ChunkError::Malformed(start)),
            Some(previous) => previous
                .checked_add(gap)
                .ok_or(ChunkError::Malformed(start))?,
        };
        let title = self.u32()?;
        let body = self.u32()?;
        let length = self.u32()?;
        self.slot = Some(slot);
        Ok((
            slot,
            Posting {
                counts: TermCounts { title, body },
                length,
            },
        ))
    }

    fn u32(&mut self) -> Result<u32, ChunkError> {
        let start = self.at;
        // A u32 takes at most 5 bytes.
        let (n, used) =
            get_varint(&self.bytes[self.at..], 5).ok_or(ChunkError::Malformed(start))?;
        self.at += used;
        u32::try_from(n).map_err(|_| ChunkError::Malformed(start))
    }
}

impl Iterator for ChunkIter<'_> {
    type Item = Result<(u32, Posting), ChunkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.bytes.len() {
            return None;
        }
        let posting = self.next_posting();
        self.failed = posting.is_err();
        Some(posting)
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The first byte of every [`RareChunk`]: its encoding's version (distinct from a
/// [`PostingChunk`]'s).
const RARE_VERSION: u8 = 2;

/// A term with fewer postings than this in a new chunk shares its bucket's cell of that chunk
/// ([`RareChunk`]) instead of getting a cell of its own, whatever the chunk's size (see
/// [`rare_limit`]).
pub const RARE_POSTINGS: usize = 8;

/// In a chunk of this many clusters per posting or more, a term is rare below that many
/// postings ([`rare_limit`]).
pub const RARE_SHARE: usize = 32;

/// Below how many postings a term is rare in a chunk of `clusters` clusters: [`RARE_POSTINGS`],
/// or 1 in [`RARE_SHARE`] clusters in large chunks. In a Zipf vocabulary the terms with few
/// postings grow with the chunk (in a large chunk, far more terms reach 8 postings than reach
/// 32), while a bucket's cell stays small (about 80 postings in 1 000 clusters over 4 096
/// buckets).
pub fn rare_limit(clusters: usize) -> usize {
    (clusters / RARE_SHARE).max(RARE_POSTINGS)
}

/// How many rare-term buckets there are ([`rare_row`]): a query for a term reads the term's own
/// row and its bucket's row, which holds about 1/`RARE_BUCKETS` of the rare postings.
pub const RARE_BUCKETS: u64 = 4096;

/// Prefix of every rare-term bucket row of `index`. Terms are alphanumeric, so no term row
/// starts with it.
pub const RARE_ROW_PREFIX: &[u8] = b"~rare/";

/// The `index` row of the bucket that holds `term`'s postings in chunks where it is rare.
pub fn rare_row(term: &str) -> Bytes {
    bucket_row(rare_bucket(term))
}

/// The number of the bucket of `term` (below [`RARE_BUCKETS`]).
pub fn rare_bucket(term: &str) -> u16 {
    // RARE_BUCKETS fits 16 bits.
    (xxhash_rust::xxh3::xxh3_64(term.as_bytes()) % RARE_BUCKETS) as u16
}

/// The `index` row of bucket number `bucket`.
pub fn bucket_row(bucket: u16) -> Bytes {
    let mut row = Vec::with_capacity(RARE_ROW_PREFIX.len() + 4);
    row.extend_from_slice(RARE_ROW_PREFIX);
    row.extend_from_slice(format!("{bucket:04x}").as_bytes());
    row.into()
}

/// The number of bucket row `row` ([`bucket_row`]); `None` when `row` is not one.
pub fn bucket_of_row(row: &[u8]) -> Option<u16> {
    let hex = std::str::from_utf8(row.strip_prefix(RARE_ROW_PREFIX)?).ok()?;
    u16::from_str_radix(hex, 16)
        .ok()
        .filter(|bucket| u64::from(*bucket) < RARE_BUCKETS && bucket_row(*bucket) == row)
}

/// Whether `row` of `index` is a rare-term bucket ([`rare_row`]) rather than a term.
pub fn is_rare_row(row: &[u8]) -> bool {
    row.starts_with(RARE_ROW_PREFIX)
}

/// The postings of the rare terms of one bucket in one chunk, by term: the cell of a
/// [`rare_row`] in a chunk's column.
///
/// Encoded as a version byte, then per term in increasing order the term's length and UTF-8
/// bytes, and its [`PostingChunk`] encoding's length and bytes (lengths as LEB128 varints).
/// Decoding never panics: a malformed cell is a [`ChunkError`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RareChunk {
    /// Postings by term.
    pub terms: BTreeMap<String, PostingChunk>,
}

impl RareChunk {
    /// Encodes the bucket (see the type's docs).
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(1 + self.terms.len() * 24);
        out.push(RARE_VERSION);
        for (term, postings) in &self.terms {
            let postings = postings.encode();
            put_varint(&mut out, term.len() as u64);
            out.extend_from_slice(term.as_bytes());
            put_varint(&mut out, postings.len() as u64);
            out.extend_from_slice(&postings);
        }
        out.into()
    }

    /// Decodes [`RareChunk::encode`]: every term once, in increasing order, with well-formed
    /// postings.
    pub fn decode(bytes: &[u8]) -> Result<Self, ChunkError> {
        let mut terms = BTreeMap::new();
        for entry in RareIter::new(bytes)? {
            let (term, postings) = entry?;
            terms.insert(term.to_owned(), PostingChunk::decode(postings)?);
        }
        Ok(Self { terms })
    }

    /// The postings `term` has in an encoded bucket, without decoding the other terms' (queries
    /// read buckets this way); `None` when the term is not in it.
    pub fn postings_of<'a>(
        bytes: &'a [u8],
        term: &str,
    ) -> Result<Option<ChunkIter<'a>>, ChunkError> {
        for entry in RareIter::new(bytes)? {
            let (found, postings) = entry?;
            match found.cmp(term) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return ChunkIter::new(postings).map(Some),
                std::cmp::Ordering::Greater => break,
            }
        }
        Ok(None)
    }
}

/// The (term, encoded postings) entries of an encoded [`RareChunk`], in order.
struct RareIter<'a> {
    bytes: &'a [u8],
    at: usize,
    previous: Option<&'a str>,
    failed: bool,
}

impl<'a> RareIter<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, ChunkError> {
        match bytes.first() {
            Some(&RARE_VERSION) => Ok(Self {
                bytes,
                at: 1,
                previous: None,
                failed: false,
            }),
            other => Err(ChunkError::Version(other.copied())),
        }
    }

    fn slice(&mut self) -> Result<&'a [u8], ChunkError> {
        let start = self.at;
        let bytes: &'a [u8] = self.bytes;
        let (len, used) = get_varint(&bytes[self.at..], 10).ok_or(ChunkError::Malformed(start))?;
        let from = self.at + used;
        let to = usize::try_from(len)
            .ok()
            .and_then(|len| from.checked_add(len))
            .filter(|to| *to <= bytes.len())
            .ok_or(ChunkError::Malformed(start))?;
        self.at = to;
        Ok(&bytes[from..to])
    }

    fn entry(&mut self) -> Result<(&'a str, &'a [u8]), ChunkError> {
        let start = self.at;
        let term = std::str::from_utf8(self.slice()?).map_err(|_| ChunkError::Malformed(start))?;
        // Terms strictly increase: each is in a bucket once.
        if self.previous.is_some_and(|previous| previous >= term) {
            return Err(ChunkError::Malformed(start));
        }
        self.previous = Some(term);
        let postings = self.slice()?;
        Ok((term, postings))
    }
}

impl<'a> Iterator for RareIter<'a> {
    type Item = Result<(&'a str, &'a [u8]), ChunkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.bytes.len() {
            return None;
        }
        let entry = self.entry();
        self.failed = entry.is_err();
        Some(entry)
    }
}

/// A LEB128 varint of at most `max_bytes` bytes (10 for any u64) at the start of `bytes`, and
/// how many bytes it took; `None` when it does not end within them or does not fit 64 bits.
fn get_varint(bytes: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut n = 0u64;
    for (i, byte) in bytes.iter().take(max_bytes.min(10)).enumerate() {
        let part = u64::from(byte & 0x7f);
        let shift = 7 * i as u32;
        if shift == 63 && part > 1 {
            return None;
        }
        n |= part << shift;
        if byte & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
}

/// The clusters of one chunk, by slot: one cluster key (content hash) per line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directory {
    /// Cluster keys; a cluster's index here is its slot.
    pub clusters: Vec<Bytes>,
}

impl Directory {
    /// One key per line.
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.clusters.len() * 33);
        for cluster in &self.clusters {
            out.extend_from_slice(cluster);
            out.push(b'\n');
        }
        out.into()
    }

    /// Decodes [`Directory::encode`] (keys never contain a newline).
    pub fn decode(bytes: &[u8]) -> Self {
        let mut clusters: Vec<Bytes> = bytes
            .split(|&b| b == b'\n')
            .map(Bytes::copy_from_slice)
            .collect();
        // The encoding ends every key with a newline: the last piece is empty.
        if clusters.last().is_some_and(Bytes::is_empty) {
            clusters.pop();
        }
        Self { clusters }
    }

    /// The cluster in `slot`.
    pub fn cluster(&self, slot: u32) -> Option<&Bytes> {
        self.clusters.get(usize::try_from(slot).ok()?)
    }
}

/// The terms with their own posting cell in one chunk; the chunk's other terms are in their
/// rare-term buckets ([`rare_row`]). A chunk is written once, so the list stays exact, except
/// that a term whose postings all left has no cell any more.
///
/// Removing a cluster's postings from a chunk reads the cell of each term it has there: its
/// own cell, or its bucket's. Without this list each term's own cell has to be tried first,
/// and most terms are rare: a recrawled page of a thousand terms cost a thousand reads that
/// found nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnTerms {
    /// Sorted.
    terms: Vec<String>,
}

impl OwnTerms {
    /// Marks the encoding (an empty list is not an empty cell).
    const MAGIC: &'static [u8] = b"own\n";

    /// The list of `terms` (any order).
    pub fn new(mut terms: Vec<String>) -> Self {
        terms.sort_unstable();
        terms.dedup();
        Self { terms }
    }

    /// Whether `term` has its own cell in the chunk.
    pub fn contains(&self, term: &str) -> bool {
        self.terms
            .binary_search_by(|t| t.as_str().cmp(term))
            .is_ok()
    }

    /// The listed terms, in order.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// How many terms are listed.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether no term is listed.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The marker line, then one term per line (terms are alphanumeric: no newline).
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(
            Self::MAGIC.len() + self.terms.iter().map(|t| t.len() + 1).sum::<usize>(),
        );
        out.extend_from_slice(Self::MAGIC);
        for term in &self.terms {
            out.extend_from_slice(term.as_bytes());
            out.push(b'\n');
        }
        out.into()
    }

    /// Decodes [`OwnTerms::encode`]; `None` for other bytes.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        Some(Self::new(
            listed_lines(bytes, Self::MAGIC)?
                .map(str::to_owned)
                .collect(),
        ))
    }
}

/// The lines of a list cell after its marker line `magic` (none for an empty list); `None`
/// when the cell does not start with the marker or is not UTF-8.
fn listed_lines<'a>(bytes: &'a [u8], magic: &[u8]) -> Option<impl Iterator<Item = &'a str>> {
    let body = std::str::from_utf8(bytes.strip_prefix(magic)?).ok()?;
    let body = body.strip_suffix('\n').unwrap_or(body);
    Some(body.split('\n').filter(move |_| !body.is_empty()))
}

/// The rare-term buckets with a cell in one chunk ([`bucket_row`]). With [`OwnTerms`] it names
/// every cell of the chunk, so that compaction reads or deletes exactly those (a chunk with both
/// lists has its removals made lazily: see [`DeadSlots`]). A chunk is written once, so the list
/// stays exact, except that a bucket a compaction emptied has no cell any more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkBuckets {
    /// Sorted bucket numbers.
    buckets: Vec<u16>,
}

impl ChunkBuckets {
    /// Marks the encoding (an empty list is not an empty cell).
    const MAGIC: &'static [u8] = b"buckets\n";

    /// The list of `buckets` (any order).
    pub fn new(mut buckets: Vec<u16>) -> Self {
        buckets.sort_unstable();
        buckets.dedup();
        Self { buckets }
    }

    /// Whether `row` of `index` is a bucket listed here.
    pub fn contains_row(&self, row: &[u8]) -> bool {
        bucket_of_row(row).is_some_and(|bucket| self.buckets.binary_search(&bucket).is_ok())
    }

    /// The listed buckets' rows, in order.
    pub fn rows(&self) -> impl Iterator<Item = Bytes> + '_ {
        self.buckets.iter().map(|&bucket| bucket_row(bucket))
    }

    /// How many buckets are listed.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no bucket is listed.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The marker line, then one bucket number per line, as in its row (four hex digits).
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(Self::MAGIC.len() + 5 * self.buckets.len());
        out.extend_from_slice(Self::MAGIC);
        for bucket in &self.buckets {
            out.extend_from_slice(format!("{bucket:04x}\n").as_bytes());
        }
        out.into()
    }

    /// Decodes [`ChunkBuckets::encode`]; `None` for other bytes, or a number that is not a
    /// bucket's.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let buckets = listed_lines(bytes, Self::MAGIC)?
            .map(|hex| {
                u16::from_str_radix(hex, 16)
                    .ok()
                    .filter(|b| hex.len() == 4 && u64::from(*b) < RARE_BUCKETS)
            })
            .collect::<Option<Vec<u16>>>()?;
        Some(Self::new(buckets))
    }
}

/// The slots of one chunk whose clusters left it but whose postings are still in its cells:
/// the value of the chunk's `corpus` cell ([`crate::schema::dead_column`]).
///
/// Removing a recrawled page's postings from the chunk that holds them would rewrite a cell
/// per term of the page (its own cell or its bucket's, which other pages share): a thousand
/// cells a page, and the same bucket cells again for each later page of the chunk. Instead, a
/// chunk listing its cells ([`OwnTerms`], [`ChunkBuckets`]) has its removals made lazily, as a
/// search engine's segments keep a list of deleted documents: the slot is emptied in the
/// directory and added here, and searches skip the postings of these slots. Once half of the
/// slots holding postings are dead ([`DeadSlots::needs_compaction`]), the inverter compacts the
/// chunk: it rewrites its cells without them, or deletes them all when no slot is live. Each
/// chunk is then rewritten a few times in its life, whatever its pages' recrawls.
///
/// The list lives in the shard's `corpus` row, which every search reads whole, so a search
/// knows the dead slots of every chunk in one read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadSlots {
    /// How many of the chunk's slots hold postings: the live ones and these.
    pub holding: u32,
    /// Sorted, distinct.
    slots: Vec<u32>,
}

impl DeadSlots {
    /// Marks the encoding.
    const MAGIC: &'static str = "dead of ";

    /// Adds `slot`.
    pub fn insert(&mut self, slot: u32) {
        if let Err(at) = self.slots.binary_search(&slot) {
            self.slots.insert(at, slot);
        }
    }

    /// Whether `slot`'s postings are dead.
    pub fn contains(&self, slot: u32) -> bool {
        self.slots.binary_search(&slot).is_ok()
    }

    /// The dead slots, in order.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// How many slots are dead.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no slot is dead.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether no slot holding postings is live.
    pub fn all_dead(&self) -> bool {
        self.slots.len() >= self.holding as usize
    }

    /// Whether at least half the slots holding postings are dead, so the chunk is worth
    /// compacting.
    pub fn needs_compaction(&self) -> bool {
        !self.slots.is_empty() && 2 * self.slots.len() >= self.holding as usize
    }

    /// `dead of <holding>`, then one slot per line.
    pub fn encode(&self) -> Bytes {
        let mut out = format!("{}{}\n", Self::MAGIC, self.holding);
        for slot in &self.slots {
            out.push_str(&slot.to_string());
            out.push('\n');
        }
        out.into()
    }

    /// Decodes [`DeadSlots::encode`]; `None` for other bytes, unsorted or repeated slots, or
    /// more dead slots than slots holding postings.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.strip_suffix('\n')?.split('\n');
        let holding = lines.next()?.strip_prefix(Self::MAGIC)?.parse().ok()?;
        let slots = lines
            .map(|line| line.parse().ok())
            .collect::<Option<Vec<u32>>>()?;
        let sorted = slots.windows(2).all(|w| w[0] < w[1]);
        (sorted && slots.len() <= holding as usize).then_some(Self { holding, slots })
    }
}

/// What the index holds for a queued cluster: the value of its `index_queue` cell. The
/// exporter records it when it first queues a cluster (what it had exported before), and keeps
/// it while the cluster stays queued, so the inverter knows which postings to remove.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Held {
    /// No posting of the cluster is in the index.
    #[default]
    Nothing,
    /// The postings of these page terms are (one per term, and the length in the corpus).
    Terms(PageTerms),
}

impl Held {
    /// `-` for nothing, `+` then the [`PageTerms`] encoding.
    pub fn encode(&self) -> Bytes {
        match self {
            Held::Nothing => Bytes::from_static(b"-"),
            Held::Terms(terms) => [&b"+"[..], &terms.encode()].concat().into(),
        }
    }

    /// Decodes [`Held::encode`]; `None` when malformed.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        match bytes.split_first() {
            Some((b'-', [])) => Some(Held::Nothing),
            Some((b'+', rest)) => Some(Held::Terms(PageTerms::decode(rest))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_in_about_five_bytes_a_posting() {
        let mut chunk = PostingChunk::default();
        chunk.postings.insert(0, Posting::new(1, 2, 300));
        chunk.postings.insert(7, Posting::new(0, 70_000, 1));
        chunk
            .postings
            .insert(u32::MAX, Posting::new(u32::MAX, 0, 5));
        let encoded = chunk.encode();
        assert_eq!(PostingChunk::decode(&encoded).unwrap(), chunk);
        // 1 + (1+1+1+2) + (1+1+3+1) + (5+5+1+1)
        assert_eq!(encoded.len(), 24);
        assert_eq!(
            PostingChunk::decode(&PostingChunk::default().encode()).unwrap(),
            PostingChunk::default()
        );
    }

    #[test]
    fn corrupt_chunks_are_errors_not_panics() {
        let mut chunk = PostingChunk::default();
        chunk.postings.insert(3, Posting::new(1, 1, 1));
        chunk.postings.insert(4, Posting::new(1, 1, 1));
        let good = chunk.encode();
        assert_eq!(PostingChunk::decode(b""), Err(ChunkError::Version(None)));
        assert_eq!(
            PostingChunk::decode(b"\x09"),
            Err(ChunkError::Version(Some(9)))
        );
        // Each posting is 4 bytes: a cut between the two is a shorter chunk, any other cut is
        // an error.
        assert_eq!(good.len(), 9);
        for cut in 2..good.len() {
            match PostingChunk::decode(&good[..cut]) {
                Ok(shorter) => assert_eq!((cut, shorter.postings.len()), (5, 1)),
                Err(e) => assert!(matches!(e, ChunkError::Malformed(_)), "cut at {cut}: {e}"),
            }
        }
        // A repeated slot (zero gap after the first posting).
        assert_eq!(
            PostingChunk::decode(b"\x01\x03\x01\x01\x01\x00\x01\x01\x01"),
            Err(ChunkError::Malformed(5))
        );
        // Numbers too large for 32 bits, and slots past the end of the range.
        assert!(PostingChunk::decode(b"\x01\xff\xff\xff\xff\x7f\x01\x01\x01").is_err());
        assert!(
            PostingChunk::decode(b"\x01\xff\xff\xff\xff\x0f\x01\x01\x01\x01\x01\x01\x01").is_err()
        );
        assert!(PostingChunk::decode(b"\x01\x80\x80\x80\x80\x80\x80").is_err());
    }

    fn chunk(slots: &[u32]) -> PostingChunk {
        let mut chunk = PostingChunk::default();
        for &slot in slots {
            chunk
                .postings
                .insert(slot, Posting::new(1, slot + 1, 10 * slot + 5));
        }
        chunk
    }

    #[test]
    fn rare_buckets_round_trip_and_find_one_term() {
        let mut rare = RareChunk::default();
        rare.terms.insert("apple".into(), chunk(&[0, 5]));
        rare.terms.insert("straße".into(), chunk(&[3]));
        rare.terms.insert("zebra".into(), chunk(&[1, 2, 9]));
        let encoded = rare.encode();
        assert_eq!(RareChunk::decode(&encoded).unwrap(), rare);
        let found: Vec<_> = RareChunk::postings_of(&encoded, "straße")
            .unwrap()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(found, vec![(3, Posting::new(1, 4, 35))]);
        assert!(
            RareChunk::postings_of(&encoded, "banana")
                .unwrap()
                .is_none()
        );
        assert!(RareChunk::postings_of(&encoded, "zz").unwrap().is_none());
        assert_eq!(
            RareChunk::decode(&RareChunk::default().encode()).unwrap(),
            RareChunk::default()
        );
        // A posting chunk is not a bucket, nor the other way round.
        assert_eq!(
            RareChunk::decode(&chunk(&[1]).encode()),
            Err(ChunkError::Version(Some(CHUNK_VERSION)))
        );
        assert_eq!(
            PostingChunk::decode(&encoded),
            Err(ChunkError::Version(Some(RARE_VERSION)))
        );
    }

    #[test]
    fn corrupt_rare_buckets_are_errors_not_panics() {
        let mut rare = RareChunk::default();
        rare.terms.insert("ab".into(), chunk(&[0]));
        rare.terms.insert("cd".into(), chunk(&[1, 4]));
        let good = rare.encode();
        // Every cut is either a bucket with fewer terms or an error.
        for cut in 1..good.len() {
            if let Ok(shorter) = RareChunk::decode(&good[..cut]) {
                assert!(shorter.terms.len() < 2, "cut at {cut}");
            }
        }
        // Terms out of order, repeated, not UTF-8; a length past the end.
        let entry = |term: &[u8]| {
            let mut out = Vec::new();
            put_varint(&mut out, term.len() as u64);
            out.extend_from_slice(term);
            let postings = chunk(&[0]).encode();
            put_varint(&mut out, postings.len() as u64);
            out.extend_from_slice(&postings);
            out
        };
        let bucket = |entries: &[Vec<u8>]| [vec![RARE_VERSION], entries.concat()].concat();
        assert!(RareChunk::decode(&bucket(&[entry(b"b"), entry(b"a")])).is_err());
        assert!(RareChunk::decode(&bucket(&[entry(b"a"), entry(b"a")])).is_err());
        assert!(RareChunk::decode(&bucket(&[entry(b"\xff")])).is_err());
        assert!(RareChunk::decode(&[RARE_VERSION, 0x7f, b'a']).is_err());
        assert!(
            RareChunk::decode(&[
                RARE_VERSION,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0x7f
            ])
            .is_err()
        );
        assert_eq!(RareChunk::decode(b""), Err(ChunkError::Version(None)));
    }

    #[test]
    fn rare_limit_grows_with_large_chunks_only() {
        assert_eq!(rare_limit(0), RARE_POSTINGS);
        assert_eq!(rare_limit(256), RARE_POSTINGS);
        assert_eq!(rare_limit(1024), 32);
    }

    #[test]
    fn rare_rows_are_not_terms_and_spread_over_the_buckets() {
        let rows: std::collections::HashSet<Bytes> =
            (0..20_000).map(|i| rare_row(&format!("term{i}"))).collect();
        assert!(rows.iter().all(|row| is_rare_row(row)));
        assert!(
            rows.len() > RARE_BUCKETS as usize * 9 / 10,
            "{}",
            rows.len()
        );
        assert!(!is_rare_row(b"rare"));
        assert_eq!(rare_row("apple"), rare_row("apple"));
    }

    #[test]
    fn directories_and_held_states_round_trip() {
        let directory = Directory {
            clusters: vec![Bytes::from_static(b"aa"), Bytes::from_static(b"bb")],
        };
        assert_eq!(Directory::decode(&directory.encode()), directory);
        assert_eq!(directory.cluster(1), Some(&Bytes::from_static(b"bb")));
        assert_eq!(directory.cluster(2), None);
        assert_eq!(Directory::decode(b""), Directory::default());

        let terms = PageTerms::of("t", "a b b");
        for held in [Held::Nothing, Held::Terms(terms)] {
            assert_eq!(Held::decode(&held.encode()), Some(held));
        }
        assert_eq!(Held::decode(b""), None);
        assert_eq!(Held::decode(b"-x"), None);
    }

    #[test]
    fn own_terms_round_trip_and_refuse_other_bytes() {
        let own = OwnTerms::new(vec!["zeta".into(), "alpha".into(), "zeta".into()]);
        assert_eq!(own.len(), 2);
        assert!(own.contains("alpha") && own.contains("zeta") && !own.contains("beta"));
        assert_eq!(OwnTerms::decode(&own.encode()), Some(own));
        let empty = OwnTerms::default();
        assert_eq!(OwnTerms::decode(&empty.encode()), Some(empty));
        assert!(!OwnTerms::default().encode().is_empty());
        assert_eq!(OwnTerms::decode(b"alpha\nzeta\n"), None, "no marker");
        assert_eq!(OwnTerms::decode(b"own\n\xff\n"), None, "not UTF-8");
    }

    #[test]
    fn bucket_lists_round_trip_name_rows_and_refuse_other_bytes() {
        let term_bucket = rare_bucket("alpha");
        assert_eq!(bucket_row(term_bucket), rare_row("alpha"));
        let list = ChunkBuckets::new(vec![4095, term_bucket, 0, 4095]);
        assert_eq!(
            list.len(),
            if term_bucket == 0 || term_bucket == 4095 {
                2
            } else {
                3
            }
        );
        assert!(list.contains_row(&rare_row("alpha")));
        assert!(list.contains_row(b"~rare/0fff") && list.contains_row(b"~rare/0000"));
        assert!(!list.contains_row(b"~rare/fff") && !list.contains_row(b"alpha"));
        assert_eq!(list.rows().count(), list.len());
        assert_eq!(ChunkBuckets::decode(&list.encode()), Some(list));
        let empty = ChunkBuckets::default();
        assert_eq!(ChunkBuckets::decode(&empty.encode()), Some(empty));
        assert_eq!(ChunkBuckets::decode(b"0000\n"), None, "no marker");
        assert_eq!(
            ChunkBuckets::decode(b"buckets\n1000\n"),
            None,
            "not a bucket"
        );
        assert_eq!(
            ChunkBuckets::decode(b"buckets\n12\n"),
            None,
            "not four digits"
        );
        assert_eq!(ChunkBuckets::decode(b"buckets\nzzzz\n"), None, "not hex");
    }

    #[test]
    fn dead_slots_round_trip_say_when_to_compact_and_refuse_other_bytes() {
        let mut dead = DeadSlots {
            holding: 5,
            ..DeadSlots::default()
        };
        dead.insert(3);
        dead.insert(1);
        dead.insert(3);
        assert_eq!(dead.slots(), &[1, 3]);
        assert!(dead.contains(1) && !dead.contains(2));
        assert!(!dead.needs_compaction(), "2 of 5 dead");
        assert_eq!(DeadSlots::decode(&dead.encode()), Some(dead.clone()));
        dead.insert(0);
        assert!(dead.needs_compaction() && !dead.all_dead(), "3 of 5 dead");
        dead.insert(2);
        dead.insert(4);
        assert!(dead.all_dead());
        assert!(!DeadSlots::default().needs_compaction());
        assert_eq!(DeadSlots::decode(b"dead of 2\n1\n0\n"), None, "unsorted");
        assert_eq!(DeadSlots::decode(b"dead of 2\n1\n1\n"), None, "repeated");
        assert_eq!(
            DeadSlots::decode(b"dead of 1\n0\n1\n"),
            None,
            "more than held"
        );
        assert_eq!(DeadSlots::decode(b"dead of x\n"), None);
        assert_eq!(DeadSlots::decode(b"1\n2\n"), None, "no marker");
        assert_eq!(DeadSlots::decode(b"dead of 2\n-1\n"), None);
    }
}
