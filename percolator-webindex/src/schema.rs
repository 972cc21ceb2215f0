//! The web index's tables, columns and cell encodings, in one place.
//!
//! | table       | row                  | columns                                                        |
//! |-------------|----------------------|----------------------------------------------------------------|
//! | `documents` | URL                  | `raw` (HTML; observed), `hash` (observed), `title`, `terms` ([`PageTerms`]), `outlinks`, `declared_canonical`, `cluster` |
//! | `links`     | link target URL      | `from:<source URL>` = anchor text, `anchors` (weakly observed trigger), `forwarded_to`, `forwarded` ([`AnchorTerms`](crate::terms::AnchorTerms) it adds there) |
//! | `clusters`  | content hash         | `canonical` (observed), `exported` (URL and [`PageTerms`])      |
//! | `members`   | `<hash>/<URL>`       | `m` = the URL the member declares canonical (or empty)         |
//! | `anchor_terms` | canonical URL     | `summary` = [`AnchorTerms`](crate::terms::AnchorTerms) of the links to its cluster          |
//! | `index_queue` | `shard-<nn>` (4)   | `c:<hash>` = what the index holds for a changed cluster ([`Held`](crate::postings::Held)), `invert` (weakly observed trigger) |
//! | `index`     | term, or `~rare/<bucket>` | `<chunk>` = the term's postings in that chunk ([`PostingChunk`](crate::postings::PostingChunk)), or those of the bucket's terms rare in it ([`RareChunk`](crate::postings::RareChunk)) |
//! | `index_docs` | `<chunk>`           | `clusters` = the chunk's clusters by slot ([`Directory`](crate::postings::Directory)) |
//! | `corpus`    | `shard-<nn>` (4)     | `counts` = [`CorpusCounts`](crate::terms::CorpusCounts) of the indexed clusters of the shard, `next_chunk` |
//! | `sizes`     | `shard-<nn>` (4)     | `total` and `d:<start ts>` deltas = [`SizeCounts`](crate::sizes::SizeCounts), `fold` (weakly observed trigger) |
//!
//! A `<chunk>` key is `shard-<nn>/<number>` ([`chunk_key`]); `clusters:posted` names the chunk
//! holding a cluster's postings.
//!
//! **Index shards.** Every cluster belongs to one of [`INDEX_SHARDS`] shards ([`index_shard`]).
//! The exporter queues a changed cluster in its shard's `index_queue` row; the shard's inverter
//! turns the queued clusters into a new chunk (see [`crate::postings`]) and updates the shard's
//! corpus counts, in one transaction. Only a shard's inverter writes its chunks and counts, so
//! inverters never conflict with each other. Few shards make large batches; more would let more
//! workers invert at once.
//!
//! `anchor_terms` and `corpus` are summaries kept exact by the observers that change what they
//! summarize (the link forwarder, the inverter), in the same transactions as the change: two
//! runs changing one summary write the same cell, so snapshot isolation lets one of them commit
//! and retries the other. A query's snapshot sees a shard's postings and its corpus counts
//! change together.
//!
//! **The stated score.** The paper keeps the duplicate with the highest PageRank as canonical;
//! we have no link graph computation, so the score is stated. First the pages' own word: a
//! member that members of its cluster name in `<link rel="canonical">` wins, the most named
//! first (a declaration pointing outside the cluster, at other content, is ignored). Then the
//! URL with the fewest path segments, then the shorter URL, then the lexicographically smaller
//! one (a crawler's usual preference for the "home" copy over mirrors). [`choose_canonical`]
//! is that choice, [`canonical_rank`] the URL order.

use bytes::Bytes;

use crate::terms::PageTerms;

/// Documents by URL.
pub const DOCUMENTS: &[u8] = b"documents";
/// Raw HTML written by loaders (observed by the document processor).
pub const RAW: &[u8] = b"raw";
/// Content hash written by the document processor (observed by the clusterer).
pub const HASH: &[u8] = b"hash";
/// Page title.
pub const TITLE: &[u8] = b"title";
/// The page's term statistics ([`PageTerms`]).
pub const TERMS: &[u8] = b"terms";
/// Outgoing links, encoded by [`encode_outlinks`].
pub const OUTLINKS: &[u8] = b"outlinks";
/// The cluster (content hash) the clusterer last placed the document in.
pub const CLUSTER: &[u8] = b"cluster";
/// The URL the page declares canonical with `<link rel="canonical">` (absent when none).
pub const DECLARED_CANONICAL: &[u8] = b"declared_canonical";

/// Inverted links by target URL.
pub const LINKS: &[u8] = b"links";
/// Prefix of the per-source anchor columns of [`LINKS`].
pub const FROM_PREFIX: &[u8] = b"from:";
/// Weakly observed trigger column of [`LINKS`]: notified when a target's anchors or canonical
/// change; never written.
pub const ANCHORS: &[u8] = b"anchors";
/// The canonical URL the target's anchors are currently forwarded to.
pub const FORWARDED_TO: &[u8] = b"forwarded_to";
/// What the target's anchors add to [`FORWARDED_TO`]'s anchor terms: the
/// [`AnchorTerms`](crate::terms::AnchorTerms) of its anchors when they were last forwarded, so
/// that the next run can take exactly that back.
pub const FORWARDED: &[u8] = b"forwarded";

/// Duplicate clusters by content hash.
pub const CLUSTERS: &[u8] = b"clusters";
/// The cluster's canonical URL (observed by the exporter).
pub const CANONICAL: &[u8] = b"canonical";
/// What the exporter last exported for the cluster, encoded by [`encode_exported`].
pub const EXPORTED: &[u8] = b"exported";

/// Cluster membership rows `<hash>/<URL>`.
pub const MEMBERS: &[u8] = b"members";
/// The membership column of [`MEMBERS`]; its value is the member's [`DECLARED_CANONICAL`].
pub const MEMBER: &[u8] = b"m";

/// Per canonical: the terms of the anchor texts of links to its cluster's members
/// ([`AnchorTerms`](crate::terms::AnchorTerms)): the sum of their [`FORWARDED`] cells.
pub const ANCHOR_TERMS: &[u8] = b"anchor_terms";
/// The column of [`ANCHOR_TERMS`].
pub const SUMMARY: &[u8] = b"summary";

/// Which chunk holds the cluster's postings ([`chunk_key`]; absent: none).
pub const POSTED: &[u8] = b"posted";

/// Clusters waiting to be inverted into the index, one row per index shard.
pub const INDEX_QUEUE: &[u8] = b"index_queue";
/// Prefix of the [`INDEX_QUEUE`] columns naming a queued cluster.
pub const QUEUED_PREFIX: &[u8] = b"c:";
/// Weakly observed trigger column of [`INDEX_QUEUE`]: notified when a cluster is queued; never
/// written.
pub const INVERT: &[u8] = b"invert";

/// The term index: per term, one posting chunk per chunk that has the term.
pub const INDEX: &[u8] = b"index";

/// Chunk directories: the clusters of each chunk, by slot.
pub const INDEX_DOCS: &[u8] = b"index_docs";
/// The column of [`INDEX_DOCS`] naming a chunk's clusters by slot.
pub const CHUNK_CLUSTERS: &[u8] = b"clusters";
/// The column of [`INDEX_DOCS`] naming the terms with their own posting cell in the chunk
/// ([`crate::postings::OwnTerms`]); the chunk's other terms are in rare-term buckets.
pub const CHUNK_OWN_TERMS: &[u8] = b"own_terms";
/// The column of [`INDEX_DOCS`] naming the rare-term buckets with a cell in the chunk
/// ([`crate::postings::ChunkBuckets`]).
pub const CHUNK_BUCKETS: &[u8] = b"buckets";

/// Corpus counts for ranking: documents in the index and their total length, one row per index
/// shard.
pub const CORPUS: &[u8] = b"corpus";
/// The column of [`CORPUS`].
pub const COUNTS: &[u8] = b"counts";
/// The number the shard's next chunk gets (a column of [`CORPUS`]).
pub const NEXT_CHUNK: &[u8] = b"next_chunk";
/// Prefix of the [`CORPUS`] columns listing a chunk's dead slots
/// ([`crate::postings::DeadSlots`], column [`dead_column`]).
pub const DEAD_PREFIX: &[u8] = b"dead:";

/// Index shards (see the module docs). Fixed for a store: changing it would move clusters
/// between shards.
pub const INDEX_SHARDS: u64 = 4;

/// Every table of the web index (for status reports and end-of-run checks).
pub const TABLES: [&[u8]; 10] = [
    DOCUMENTS,
    LINKS,
    CLUSTERS,
    MEMBERS,
    ANCHOR_TERMS,
    INDEX_QUEUE,
    INDEX,
    INDEX_DOCS,
    CORPUS,
    crate::sizes::SIZES,
];

/// Longest URL the pipeline accepts (row keys and column names are built from URLs): longer ones
/// are refused by [`crate::url::normalize`], and longer link targets are not kept.
pub const MAX_URL_BYTES: usize = 1024;

/// The canonical of a cluster whose members are `(URL, declared canonical or empty)` (see the
/// module docs): the member most members declare, then the best [`canonical_rank`].
pub fn choose_canonical<'a, U, D>(
    members: impl IntoIterator<Item = (&'a U, &'a D)>,
) -> Option<&'a U>
where
    U: AsRef<[u8]> + 'a,
    D: AsRef<[u8]> + 'a,
{
    let members: Vec<(&U, &[u8])> = members.into_iter().map(|(u, d)| (u, d.as_ref())).collect();
    let mut votes: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for (_, declared) in &members {
        if !declared.is_empty() {
            *votes.entry(*declared).or_default() += 1;
        }
    }
    members
        .iter()
        .map(|(url, _)| (votes.get(url.as_ref()).copied().unwrap_or(0), *url))
        .min_by(|a, b| {
            b.0.cmp(&a.0)
                .then_with(|| canonical_rank(a.1.as_ref()).cmp(&canonical_rank(b.1.as_ref())))
        })
        .map(|(_, url)| url)
}

/// Sort key of a URL for canonical selection: smaller is better (see the module docs).
pub fn canonical_rank(url: &[u8]) -> (usize, usize, &[u8]) {
    let path = match url.windows(3).position(|w| w == b"://") {
        Some(i) => &url[i + 3..],
        None => url,
    };
    let segments = path
        .split(|&b| b == b'/')
        .skip(1)
        .filter(|s| !s.is_empty())
        .count();
    (segments, url.len(), url)
}

/// Row of [`MEMBERS`] for `url` in cluster `hash`.
pub fn member_row(hash: &[u8], url: &[u8]) -> Bytes {
    let mut row = members_prefix(hash).to_vec();
    row.extend_from_slice(url);
    row.into()
}

/// Prefix of every [`MEMBERS`] row of cluster `hash`.
pub fn members_prefix(hash: &[u8]) -> Bytes {
    let mut row = hash.to_vec();
    row.push(b'/');
    row.into()
}

/// Column of [`LINKS`] holding `source`'s anchor text.
pub fn from_column(source: &[u8]) -> Bytes {
    [FROM_PREFIX, source].concat().into()
}

/// The index shard of cluster `hash`.
pub fn index_shard(hash: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(hash) % INDEX_SHARDS
}

/// The key of index shard `shard`: its [`INDEX_QUEUE`] and [`CORPUS`] rows.
pub fn shard_key(shard: u64) -> Bytes {
    format!("shard-{shard:02}").into()
}

/// The [`INDEX_QUEUE`] and [`CORPUS`] rows of cluster `hash`.
pub fn shard_of(hash: &[u8]) -> Bytes {
    shard_key(index_shard(hash))
}

/// The key of chunk `number` of shard `shard`: its [`INDEX`] column and [`INDEX_DOCS`] row.
pub fn chunk_key(shard: u64, number: u64) -> Bytes {
    format!("shard-{shard:02}/{number:010}").into()
}

/// The shard and number of a [`chunk_key`]; `None` when `key` is not one.
pub fn parse_chunk_key(key: &[u8]) -> Option<(u64, u64)> {
    let key = std::str::from_utf8(key).ok()?;
    let (shard, number) = key.strip_prefix("shard-")?.split_once('/')?;
    let (shard, number) = (shard.parse().ok()?, number.parse().ok()?);
    (shard < INDEX_SHARDS && chunk_key(shard, number).as_ref() == key.as_bytes())
        .then_some((shard, number))
}

/// The [`CORPUS`] column (of the chunk's shard) listing the dead slots of chunk `chunk`.
pub fn dead_column(chunk: &[u8]) -> Bytes {
    [DEAD_PREFIX, chunk].concat().into()
}

/// The [`INDEX_QUEUE`] column queuing cluster `hash`.
pub fn queued_column(hash: &[u8]) -> Bytes {
    [QUEUED_PREFIX, hash].concat().into()
}

/// Encodes outgoing links as `target\tanchor` lines (tabs and newlines in anchors become spaces).
pub fn encode_outlinks<'a>(links: impl IntoIterator<Item = (&'a str, &'a str)>) -> Bytes {
    let mut out = String::new();
    for (target, anchor) in links {
        out.push_str(target);
        out.push('\t');
        out.extend(
            anchor
                .chars()
                .map(|c| if c == '\t' || c == '\n' { ' ' } else { c }),
        );
        out.push('\n');
    }
    out.into()
}

/// Decodes [`encode_outlinks`]; malformed lines are skipped.
pub fn decode_outlinks(bytes: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|line| {
            let (target, anchor) = line.split_once('\t')?;
            Some((target.to_owned(), anchor.to_owned()))
        })
        .collect()
}

/// Encodes what the exporter exported for a cluster: a NUL byte, the canonical URL's length
/// in decimal and a newline, the URL, then the canonical's [`TERMS`] cell as it was exported.
/// The length makes a URL of any bytes (a newline too) come back whole.
pub fn encode_exported(url: &[u8], terms: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(url.len() + terms.len() + 8);
    out.push(0);
    out.extend_from_slice(url.len().to_string().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(url);
    out.extend_from_slice(terms);
    out.into()
}

/// Splits [`encode_exported`] into the URL and the terms cell. A cell without the leading NUL
/// is in the earlier form, the URL up to the first newline.
fn split_exported(bytes: &[u8]) -> (&[u8], &[u8]) {
    let until_newline = |bytes| match memchr_newline(bytes) {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (bytes, &b""[..]),
    };
    let Some(rest) = bytes.strip_prefix(b"\0") else {
        return until_newline(bytes);
    };
    let (length, rest) = until_newline(rest);
    match std::str::from_utf8(length)
        .ok()
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|&l| l <= rest.len())
    {
        Some(l) => rest.split_at(l),
        None => (rest, &b""[..]),
    }
}

/// The position of the first newline in `bytes`.
fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Decodes [`encode_exported`] into the URL and the [`PageTerms`].
pub fn decode_exported(bytes: &[u8]) -> (Bytes, PageTerms) {
    let (url, terms) = split_exported(bytes);
    (Bytes::copy_from_slice(url), PageTerms::decode(terms))
}

/// The terms cell of [`encode_exported`], to read in place ([`crate::terms::PageTermsView`]).
pub fn exported_terms(bytes: &[u8]) -> &[u8] {
    split_exported(bytes).1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose<'a>(members: &'a [(&'a [u8], &'a [u8])]) -> Option<&'a [u8]> {
        choose_canonical(members.iter().map(|(u, d)| (u, d))).copied()
    }

    #[test]
    fn declared_canonicals_win_over_the_url_order() {
        let original: &[u8] = b"http://x.example/book/ch1.html";
        let copy: &[u8] = b"http://x.example/zz.html";
        // No declarations: the shorter, shallower copy.
        assert_eq!(choose(&[(original, b""), (copy, b"")]), Some(copy));
        // The copy names the original.
        assert_eq!(choose(&[(original, b""), (copy, original)]), Some(original));
        // A declaration outside the cluster is ignored.
        assert_eq!(
            choose(&[(original, b"http://elsewhere/"), (copy, b"")]),
            Some(copy)
        );
        // Two names: the most named wins, then the URL order.
        let third: &[u8] = b"http://x.example/a/b/c.html";
        assert_eq!(
            choose(&[(original, third), (copy, original), (third, third)]),
            Some(third)
        );
        assert_eq!(choose(&[(original, original), (copy, copy)]), Some(copy));
        assert_eq!(choose(&[]), None);
    }

    #[test]
    fn rank_prefers_shallow_short_urls() {
        let mut urls = [
            &b"http://mirror1.example/site3/p7"[..],
            b"http://site3.example/p7",
            b"http://site3.example/a/p7",
            b"http://a.example/p7",
        ];
        urls.sort_by_key(|u| canonical_rank(u));
        assert_eq!(urls[0], b"http://a.example/p7");
        assert_eq!(urls[1], b"http://site3.example/p7");
        assert_eq!(urls[3], b"http://mirror1.example/site3/p7");
    }

    #[test]
    fn encodings_round_trip() {
        let links = encode_outlinks([("http://a/x", "one\ttwo"), ("http://b/", "")]);
        assert_eq!(
            decode_outlinks(&links),
            vec![
                ("http://a/x".to_owned(), "one two".to_owned()),
                ("http://b/".to_owned(), String::new())
            ]
        );
        let terms = PageTerms::of("alpha", "beta beta");
        let (url, back) = decode_exported(&encode_exported(b"http://a/", &terms.encode()));
        assert_eq!(
            (url.as_ref(), back.clone()),
            (&b"http://a/"[..], terms.clone())
        );
        // A URL of any bytes comes back whole; the earlier form still reads.
        let odd = b"http://a/\n7\n\0x\xff";
        let (url, back) = decode_exported(&encode_exported(odd, &terms.encode()));
        assert_eq!((url.as_ref(), back.clone()), (&odd[..], terms.clone()));
        let earlier = [&b"http://a/\n"[..], &terms.encode()].concat();
        assert_eq!(decode_exported(&earlier).1, terms);
        for garbage in [&b"\0"[..], b"\09\nshort", b"\0x\ny", b""] {
            let _ = decode_exported(garbage);
        }
        assert!(shard_of(b"0123abcd").starts_with(b"shard-"));
        assert_eq!(shard_key(7), Bytes::from_static(b"shard-07"));
        assert_eq!(queued_column(b"h"), Bytes::from_static(b"c:h"));
        let chunk = chunk_key(3, 42);
        assert_eq!(chunk, Bytes::from_static(b"shard-03/0000000042"));
        assert_eq!(parse_chunk_key(&chunk), Some((3, 42)));
        for bad in [
            &b"shard-03/42"[..],
            b"shard-99/0000000042",
            b"shard-03",
            b"x",
            b"\xff",
        ] {
            assert_eq!(parse_chunk_key(bad), None, "{bad:?}");
        }
    }
}
