//! Term statistics and their cell encodings: what the search index ([`search`](mod@crate::search)) ranks
//! with.
//!
//! - [`PageTerms`]: every distinct term of a page with how often it occurs in the title and in
//!   the body, and the page's length in tokens. The document processor writes it to
//!   `documents:terms`; the inverter turns it into postings.
//! - A posting's value ([`encode_posting`]): the term's counts and the document's length, so a
//!   query ranks from the postings alone.
//! - [`AnchorTerms`]: the anchor texts forwarded to one canonical: how many, and per term how
//!   many of them contain it. The link forwarder keeps it exact by applying what each run
//!   changes.
//! - [`CorpusCounts`]: one shard of the corpus-wide document count and total length (BM25's N
//!   and average length). The inverter keeps it exact the same way.
//!
//! Text formats (readable in `percolator scan`), decoded without panics: a malformed line is
//! skipped, a malformed header reads as zero, so corrupt bytes degrade ranking and are reported
//! by the check, never crash a query.

use std::collections::BTreeMap;

use bytes::Bytes;

/// The shortest term (in chars) [`tokens`] keeps.
const MIN_TERM_CHARS: usize = 2;
/// The longest term (in chars) [`tokens`] keeps.
const MAX_TERM_CHARS: usize = 32;

/// The terms of `lowercase` text in order, repeats included: maximal runs of (Unicode)
/// alphanumeric chars of 2 to 32 chars, with their byte ranges.
pub fn tokens(lowercase: &str) -> Tokens<'_> {
    Tokens {
        text: lowercase,
        at: 0,
    }
}

/// The iterator [`tokens`] returns. ASCII bytes are classified without decoding a char: page
/// text is mostly ASCII, and splitting it is a sizeable part of the document processor's work.
#[derive(Debug, Clone)]
pub struct Tokens<'a> {
    text: &'a str,
    /// Byte offset of the next char to look at (always a char boundary).
    at: usize,
}

impl<'a> Tokens<'a> {
    /// Whether the char at byte `at` (a char boundary before the end) is alphanumeric, and its
    /// length in bytes.
    fn classify(&self, at: usize) -> (bool, usize) {
        let byte = self.text.as_bytes()[at];
        if byte.is_ascii() {
            return (byte.is_ascii_alphanumeric(), 1);
        }
        match self.text[at..].chars().next() {
            Some(c) => (c.is_alphanumeric(), c.len_utf8()),
            None => (false, 1), // unreachable: `at` is a boundary before the end
        }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let end = self.text.len();
        loop {
            // Skip to the start of the next run.
            let start = loop {
                if self.at >= end {
                    return None;
                }
                let (alphanumeric, len) = self.classify(self.at);
                if alphanumeric {
                    break self.at;
                }
                self.at += len;
            };
            // Take the run, counting its chars.
            let mut chars = 0usize;
            while self.at < end {
                let (alphanumeric, len) = self.classify(self.at);
                if !alphanumeric {
                    break;
                }
                self.at += len;
                chars += 1;
            }
            if (MIN_TERM_CHARS..=MAX_TERM_CHARS).contains(&chars) {
                return Some((start, &self.text[start..self.at]));
            }
        }
    }
}

/// Every distinct term of `text` (lowercased, as [`tokens`] splits it), sorted.
pub fn distinct_terms(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let terms: std::collections::BTreeSet<&str> = tokens(&lower).map(|(_, t)| t).collect();
    terms.into_iter().map(str::to_owned).collect()
}

/// How often a term occurs in one page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TermCounts {
    /// Occurrences in the title.
    pub title: u32,
    /// Occurrences in the body.
    pub body: u32,
}

/// Every distinct term of a page with its [`TermCounts`], and the page's length in tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageTerms {
    /// Tokens in the title and the body together, repeats included.
    pub length: u32,
    /// Per distinct term, sorted.
    pub counts: BTreeMap<String, TermCounts>,
}

impl PageTerms {
    /// The statistics of a page with this title and body text.
    pub fn of(title: &str, body: &str) -> Self {
        // Counted in a hash map of borrowed terms, sorted once at the end: a page has thousands
        // of tokens and some hundreds of distinct terms, so an owned key per token and a tree
        // walk per token would be most of the indexing's text work.
        let lower = [title.to_lowercase(), body.to_lowercase()];
        let mut length = 0u32;
        // Seeded per process (foldhash): the keys are crawled text, so a fixed hash function
        // would let a page pick colliding terms.
        let mut counts: foldhash::HashMap<&str, TermCounts> =
            foldhash::HashMapExt::with_capacity(lower[1].len() / 16);
        for (text, in_title) in [(&lower[0], true), (&lower[1], false)] {
            for (_, term) in tokens(text) {
                length = length.saturating_add(1);
                let counts = counts.entry(term).or_default();
                let slot = if in_title {
                    &mut counts.title
                } else {
                    &mut counts.body
                };
                *slot = slot.saturating_add(1);
            }
        }
        Self {
            length,
            counts: counts
                .into_iter()
                .map(|(term, counts)| (term.to_owned(), counts))
                .collect(),
        }
    }

    /// Whether `term` occurs in the page.
    pub fn contains(&self, term: &str) -> bool {
        self.counts.contains_key(term)
    }

    /// The `documents:terms` cell: a header line `<length>`, then `<term> <title> <body>` per
    /// term.
    pub fn encode(&self) -> Bytes {
        let mut out = String::with_capacity(16 + self.counts.len() * 16);
        let mut number = itoa::Buffer::new();
        out.push_str(number.format(self.length));
        out.push('\n');
        for (term, c) in &self.counts {
            out.push_str(term);
            out.push(' ');
            out.push_str(number.format(c.title));
            out.push(' ');
            out.push_str(number.format(c.body));
            out.push('\n');
        }
        out.into()
    }

    /// Decodes [`PageTerms::encode`] (see the module docs for malformed bytes).
    pub fn decode(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let (length, lines) = header_and_lines(&text);
        let counts = lines
            .filter_map(term_line)
            .map(|(term, counts)| (term.to_owned(), counts))
            .collect();
        Self { length, counts }
    }

    /// Each term with its posting value ([`encode_posting`]).
    pub fn postings(&self) -> impl Iterator<Item = (&str, Bytes)> {
        self.counts
            .iter()
            .map(|(term, counts)| (term.as_str(), encode_posting(*counts, self.length)))
    }
}

/// A [`PageTerms`] cell read in place: the same terms and counts as [`PageTerms::decode`], without
/// an owned string or a tree node per term. The inverter reads a thousand exported pages per
/// run, most of whose terms are already in its batch, so decoding each into a `PageTerms` would
/// be a large part of its work. The lines are parsed once, into borrowed terms: parsing them
/// once to check their order and again for the postings costs the inverter markedly more.
#[derive(Debug, Clone)]
pub struct PageTermsView<'a> {
    /// As [`PageTerms::length`].
    pub length: u32,
    /// The well-formed lines (distinct terms), in increasing order.
    terms: Vec<(&'a str, TermCounts)>,
}

impl<'a> PageTermsView<'a> {
    /// Reads a cell in place, or `None` when it is not in the form [`PageTerms::encode`] writes
    /// (not UTF-8, or its terms not in strictly increasing order): then [`PageTerms::decode`]
    /// gives its meaning, and a view of that re-encoded reads the same.
    pub fn parse(bytes: &'a [u8]) -> Option<Self> {
        let (length, lines) = header_and_lines(std::str::from_utf8(bytes).ok()?);
        // A line is some 12 bytes: a term and two small counts.
        let mut terms: Vec<(&'a str, TermCounts)> = Vec::with_capacity(bytes.len() / 12);
        for (term, counts) in lines.filter_map(term_line) {
            if terms.last().is_some_and(|(previous, _)| *previous >= term) {
                return None;
            }
            terms.push((term, counts));
        }
        Some(Self { length, terms })
    }

    /// Distinct terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether the page has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms with their counts, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, TermCounts)> + Clone + use<'_, 'a> {
        self.terms.iter().copied()
    }

    /// Whether `page` has the same length, terms and counts.
    pub fn same_as(&self, page: &PageTerms) -> bool {
        self.length == page.length
            && self.terms.len() == page.counts.len()
            && self
                .iter()
                .zip(&page.counts)
                .all(|((term, counts), (t, c))| term == t && counts == *c)
    }

    /// The owned form.
    pub fn to_owned_terms(&self) -> PageTerms {
        PageTerms {
            length: self.length,
            counts: self.iter().map(|(t, c)| (t.to_owned(), c)).collect(),
        }
    }
}

/// A [`PageTerms`] cell's header (its length; zero if malformed) and its other lines.
fn header_and_lines(text: &str) -> (u32, std::str::Lines<'_>) {
    let mut lines = text.lines();
    let length = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    (length, lines)
}

/// One `<term> <title> <body>` line of a [`PageTerms`] cell, or `None` if malformed (skipped, as
/// [`PageTerms::decode`] skips it).
fn term_line(line: &str) -> Option<(&str, TermCounts)> {
    let mut parts = line.split(' ');
    let term = parts.next().filter(|t| !t.is_empty())?;
    let title = parts.next()?.parse().ok()?;
    let body = parts.next()?.parse().ok()?;
    Some((term, TermCounts { title, body }))
}

/// One posting's value: the term's counts in the document and the document's length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Posting {
    /// The term's counts.
    pub counts: TermCounts,
    /// The document's length in tokens.
    pub length: u32,
}

impl Posting {
    /// A posting: the term `title` times in the title and `body` times in the body of a
    /// document `length` tokens long.
    pub fn new(title: u32, body: u32, length: u32) -> Self {
        Self {
            counts: TermCounts { title, body },
            length,
        }
    }
}

/// The value of an `index` cell: `<title> <body> <length>`.
pub fn encode_posting(counts: TermCounts, length: u32) -> Bytes {
    format!("{} {} {}", counts.title, counts.body, length).into()
}

/// Decodes [`encode_posting`]; `None` when malformed (an old or corrupt cell).
pub fn decode_posting(bytes: &[u8]) -> Option<Posting> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut parts = text.split(' ');
    let title = parts.next()?.parse().ok()?;
    let body = parts.next()?.parse().ok()?;
    let length = parts.next()?.parse().ok()?;
    Some(Posting {
        counts: TermCounts { title, body },
        length,
    })
}

/// The anchor texts of links to one canonical's cluster (or of one target's links): how many,
/// and per term how many contain it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnchorTerms {
    /// Anchors (links to the canonical's cluster).
    pub anchors: i64,
    /// Per term: the anchors containing it.
    pub terms: BTreeMap<String, i64>,
}

impl AnchorTerms {
    /// Adds (`sign` 1) or removes (`sign` -1) one anchor text.
    pub fn apply(&mut self, anchor: &[u8], sign: i64) {
        self.anchors += sign;
        for term in distinct_terms(&String::from_utf8_lossy(anchor)) {
            *self.terms.entry(term).or_default() += sign;
        }
    }

    /// Adds `other` (a delta) to these counts, dropping terms that reach zero.
    pub fn merge(&mut self, other: &AnchorTerms) {
        self.anchors += other.anchors;
        for (term, n) in &other.terms {
            *self.terms.entry(term.clone()).or_default() += n;
        }
        self.terms.retain(|_, n| *n != 0);
    }

    /// These counts taken away (as a delta).
    pub fn negated(&self) -> AnchorTerms {
        AnchorTerms {
            anchors: -self.anchors,
            terms: self.terms.iter().map(|(t, n)| (t.clone(), -n)).collect(),
        }
    }

    /// A fingerprint that adds up: the print of a sum of counts is the (wrapping) sum of their
    /// prints, so a canonical's summary can be checked against its targets' counts without
    /// holding them (a random 64-bit hash per term: different counts give equal prints with
    /// negligible probability).
    pub fn print(&self) -> (i64, u64) {
        let terms = self.terms.iter().fold(0u64, |sum, (term, n)| {
            sum.wrapping_add(xxhash_rust::xxh3::xxh3_64(term.as_bytes()).wrapping_mul(*n as u64))
        });
        (self.anchors, terms)
    }

    /// Whether nothing changes (as a delta) or nothing is there (as counts).
    pub fn is_empty(&self) -> bool {
        self.anchors == 0 && self.terms.values().all(|n| *n == 0)
    }

    /// The `anchor_terms:s` cell: a header line `<anchors>`, then `<term> <anchors>` per term.
    pub fn encode(&self) -> Bytes {
        let mut out = format!("{}\n", self.anchors);
        for (term, n) in self.terms.iter().filter(|(_, n)| **n != 0) {
            out.push_str(term);
            out.push(' ');
            out.push_str(&n.to_string());
            out.push('\n');
        }
        out.into()
    }

    /// Decodes [`AnchorTerms::encode`] (see the module docs for malformed bytes).
    pub fn decode(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.lines();
        let anchors = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        let terms = lines
            .filter_map(|line| {
                let (term, n) = line.split_once(' ')?;
                Some((term.to_owned(), n.parse().ok()?))
            })
            .collect();
        Self { anchors, terms }
    }
}

/// One shard of the corpus counts: exported documents, their total length and their postings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CorpusCounts {
    /// Documents in the index (exported canonicals).
    pub documents: i64,
    /// Their lengths in tokens, summed.
    pub length: i64,
    /// Their postings (distinct terms per document), summed: the index's entries, for
    /// `webindex stats`. A cell written without it reads as 0, which `check` reports.
    pub postings: i64,
}

impl CorpusCounts {
    /// `<documents> <length> <postings>`.
    pub fn encode(&self) -> Bytes {
        format!("{} {} {}", self.documents, self.length, self.postings).into()
    }

    /// Decodes [`CorpusCounts::encode`] (and its two-field form, without postings); malformed
    /// bytes read as zero.
    pub fn decode(bytes: &[u8]) -> Self {
        Self::parse(bytes).unwrap_or_default()
    }

    /// Decodes [`CorpusCounts::encode`]; `None` when `bytes` are not its form.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let fields: Vec<i64> = text
            .split(' ')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        match fields[..] {
            [documents, length] => Some(Self {
                documents,
                length,
                postings: 0,
            }),
            [documents, length, postings] => Some(Self {
                documents,
                length,
                postings,
            }),
            _ => None,
        }
    }

    /// The sum of two counts (or a count and a delta).
    pub fn plus(self, other: Self) -> Self {
        Self {
            documents: self.documents + other.documents,
            length: self.length + other.length,
            postings: self.postings + other.postings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_lowercase_runs_of_two_to_32_chars() {
        let lower = "zebra apple apple x b2 ünïcödé straße 東京 a-b".to_lowercase();
        let got: Vec<&str> = tokens(&lower).map(|(_, t)| t).collect();
        assert_eq!(
            got,
            ["zebra", "apple", "apple", "b2", "ünïcödé", "straße", "東京"]
        );
        let long = "y".repeat(33);
        let just_fits = "z".repeat(32);
        assert_eq!(distinct_terms(&format!("{long} {just_fits}")), [just_fits]);
        let offsets: Vec<usize> = tokens("ab, cd").map(|(i, _)| i).collect();
        assert_eq!(offsets, [0, 4]);
    }

    /// Random text from ASCII letters, digits, punctuation, whitespace and multi-byte chars
    /// (alphanumeric and not).
    fn random_text(rng: &mut impl rand::Rng, len: usize) -> String {
        const PIECES: &[&str] = &[
            "a", "z", "q", "0", "7", " ", "  ", "\n", "-", ".", ",", "é", "ß", "東", "京", "—",
            "\u{a0}", "\u{2003}", "½", "٣", "🦀", "x",
        ];
        (0..len)
            .map(|_| PIECES[rng.random_range(0..PIECES.len())])
            .collect()
    }

    #[test]
    fn tokens_match_a_char_by_char_split() {
        // The reference: runs of `char::is_alphanumeric`, kept when 2 to 32 chars long.
        fn reference(text: &str) -> Vec<(usize, &str)> {
            let mut out = Vec::new();
            let mut start = None;
            for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
                if c.is_alphanumeric() {
                    start.get_or_insert(i);
                } else if let Some(s) = start.take() {
                    let run = &text[s..i];
                    if (2..=32).contains(&run.chars().count()) {
                        out.push((s, run));
                    }
                }
            }
            out
        }
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(7);
        for len in (0..400).chain([2_000, 20_000]) {
            let text = random_text(&mut rng, len);
            assert_eq!(
                tokens(&text).collect::<Vec<_>>(),
                reference(&text),
                "{text:?}"
            );
        }
        let long_runs = format!("{} {}", "é".repeat(32), "7".repeat(33));
        assert_eq!(tokens(&long_runs).count(), 1);
    }

    #[test]
    fn a_view_reads_what_decode_reads() {
        use rand::Rng;
        let page = PageTerms::of("A title", "body text body and more text");
        let cell = page.encode();
        let view = PageTermsView::parse(&cell).unwrap();
        assert_eq!(view.to_owned_terms(), page);
        assert!(view.same_as(&page));
        assert_eq!(view.len(), page.counts.len());
        let mut other = page.clone();
        other.counts.get_mut("body").unwrap().body += 1;
        assert!(!view.same_as(&other));

        // Random cells near the format: for each, the view (or, where it declines, the view of
        // the decoded cell re-encoded) reads exactly what `decode` reads.
        let pieces: [&[u8]; 14] = [
            b"7", b"\n", b"\r", b" ", b"ab", b"cd", b"1", b"22", b"x", b"", b"\xff", b"-1",
            b"\r\n", b"zz",
        ];
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(11);
        let mut declined = 0;
        for _ in 0..20_000 {
            let cell: Vec<u8> = (0..rng.random_range(0..24))
                .flat_map(|_| pieces[rng.random_range(0..pieces.len())].iter().copied())
                .collect();
            let decoded = PageTerms::decode(&cell);
            let view = match PageTermsView::parse(&cell) {
                Some(view) => view,
                None => {
                    declined += 1;
                    let reencoded = decoded.encode();
                    let view = PageTermsView::parse(&reencoded).expect("re-encoded cells parse");
                    assert_eq!(view.to_owned_terms(), decoded, "{cell:?}");
                    continue;
                }
            };
            assert_eq!(view.to_owned_terms(), decoded, "{cell:?}");
            assert!(view.same_as(&decoded), "{cell:?}");
            assert_eq!(view.len(), decoded.counts.len(), "{cell:?}");
        }
        assert!(
            declined > 100,
            "the random cells exercise the fallback ({declined})"
        );
    }

    #[test]
    fn every_term_of_a_page_is_counted() {
        let many: Vec<String> = (0..500).map(|i| format!("w{i:03}")).collect();
        let page = PageTerms::of("Unsafe Rust", &format!("unsafe code {}", many.join(" ")));
        assert_eq!(page.counts.len(), 503);
        assert!(page.contains("w499"));
        assert_eq!(page.counts["unsafe"], TermCounts { title: 1, body: 1 });
        assert_eq!(page.counts["rust"], TermCounts { title: 1, body: 0 });
        assert_eq!(page.length, 504);
    }

    #[test]
    fn cells_round_trip_and_corrupt_bytes_do_not_panic() {
        let page = PageTerms::of("A title", "body text body");
        assert_eq!(PageTerms::decode(&page.encode()), page);
        let (term, value) = page.postings().next().unwrap();
        assert_eq!(term, "body");
        assert_eq!(
            decode_posting(&value),
            Some(Posting {
                counts: TermCounts { title: 0, body: 2 },
                length: 4
            })
        );
        let mut anchors = AnchorTerms::default();
        anchors.apply(b"Read the Book", 1);
        anchors.apply(b"the book", 1);
        assert_eq!(anchors.terms["book"], 2);
        assert_eq!(AnchorTerms::decode(&anchors.encode()), anchors);
        let mut back = anchors.clone();
        let mut delta = AnchorTerms::default();
        delta.apply(b"the book", -1);
        back.merge(&delta);
        assert_eq!((back.anchors, back.terms.get("read")), (1, Some(&1)));
        let counts = CorpusCounts {
            documents: 3,
            length: 99,
            postings: 40,
        };
        assert_eq!(CorpusCounts::decode(&counts.encode()), counts);
        assert_eq!(
            CorpusCounts::parse(b"3 99"),
            Some(CorpusCounts {
                postings: 0,
                ..counts
            })
        );
        assert_eq!(CorpusCounts::parse(b"3 99 1 2"), None);

        for garbage in [
            &b"\xff\xfe"[..],
            b"x\ny",
            b"12\nterm one two\n\n",
            b"",
            b" 1 2",
        ] {
            let _ = PageTerms::decode(garbage);
            let _ = AnchorTerms::decode(garbage);
            assert_eq!(decode_posting(garbage), None);
            let _ = CorpusCounts::decode(garbage);
        }
        assert_eq!(PageTerms::decode(b"7\nok 1 2\nbad 1\n").counts.len(), 1);
    }
}
