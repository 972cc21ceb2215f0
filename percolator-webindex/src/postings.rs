//! Posting chunks: how the term index stores its postings, many to a cell.
//!
//! A cell per posting made every exported page cost about 1 400 transactional writes (one per
//! distinct term), and the index most of the bytes stored. Instead, the inverter
//! ([`crate::pipeline::Inverter`]) applies the clusters queued in one index shard as a batch,
//! and the batch becomes a **chunk**:
//!
//! - the chunk's **directory** ([`Directory`], one `index_docs` cell) lists the batch's
//!   clusters; a cluster's place in that list is its *slot*;
//! - per term, one `index` cell ([`PostingChunk`]) holds the postings of the chunk's clusters
//!   that contain the term, by slot.
//!
//! A batch writes only new cells, without reading any (blind writes cannot conflict, and cost
//! no reads); only a cluster that changes or leaves after it was inverted has its postings
//! removed from the chunk that holds them (its `clusters:posted` cell names the chunk). The
//! number of cells grows with the batches, not with the postings, and a batch's cost does not
//! grow with the index.
//!
//! A chunk cell is binary, since chunks are the bulk of the index: a version byte, then per
//! posting in slot order the slot's distance from the previous posting's slot, the term's
//! counts in the title and the body, and the document's length, as LEB128 varints (about 5
//! bytes a posting). Decoding never panics: a malformed chunk is a [`ChunkError`] naming what is
//! wrong. Directories and [`Held`] states are text, readable in `percolator scan`.

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
        let mut n = 0u64;
        for shift in (0..35).step_by(7) {
            let byte = *self
                .bytes
                .get(self.at)
                .ok_or(ChunkError::Malformed(start))?;
            self.at += 1;
            n |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return u32::try_from(n).map_err(|_| ChunkError::Malformed(start));
            }
        }
        Err(ChunkError::Malformed(start))
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
}
