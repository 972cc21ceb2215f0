//! The ranking function: BM25 over a page's title and body (title occurrences weigh
//! [`TITLE_WEIGHT`] body occurrences, BM25F-style), then, for the best candidates, a boost for
//! query terms in the anchor texts of links to the page and a static score from how many links
//! point at it.
//!
//! Scores are sums over the query's terms, so a page matching more (rarer) terms ranks higher;
//! length normalization keeps a long page from winning on volume alone.

use crate::terms::{AnchorTerms, Posting};

/// BM25's term frequency saturation.
pub const K1: f64 = 1.2;
/// BM25's length normalization (0: none, 1: full).
pub const B: f64 = 0.75;
/// How many body occurrences one title occurrence counts as.
pub const TITLE_WEIGHT: f64 = 4.0;
/// The weight of a query term in anchor texts, relative to its BM25 weight in the page.
pub const ANCHOR_WEIGHT: f64 = 1.5;
/// The weight of the static score `ln(1 + inlinks)`.
pub const STATIC_WEIGHT: f64 = 0.4;
/// The shortest length, as a share of the average, that length normalization gives a page:
/// shorter pages are normalized as if they were this long. BM25 rewards short pages without a
/// bound, so a stub of a few lines whose title holds the query's words (an old edition's page
/// that says it moved) outranks the long page it points to.
pub const LENGTH_FLOOR: f64 = 0.5;

/// BM25's inverse document frequency of a term in `df` of `documents` documents (never
/// negative).
pub fn idf(documents: u64, df: u64) -> f64 {
    let (n, df) = (documents.max(df) as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// One term's BM25 contribution for a page with this posting, given the term's `idf` and the
/// corpus' average length, with the [`LENGTH_FLOOR`].
pub fn term_score(idf: f64, posting: &Posting, average_length: f64) -> f64 {
    term_score_with_floor(idf, posting, average_length, LENGTH_FLOOR)
}

/// [`term_score`] with another length floor (0: plain BM25).
pub fn term_score_with_floor(
    idf: f64,
    posting: &Posting,
    average_length: f64,
    length_floor: f64,
) -> f64 {
    let tf = f64::from(posting.counts.body) + TITLE_WEIGHT * f64::from(posting.counts.title);
    if tf == 0.0 {
        return 0.0;
    }
    let average_length = average_length.max(1.0);
    let length = f64::from(posting.length).max(length_floor * average_length);
    let norm = 1.0 - B + B * length / average_length;
    idf * tf * (K1 + 1.0) / (tf + K1 * norm)
}

/// The anchor and static part of a page's score: for each query term (with its idf), the
/// saturated share of the page's anchors containing it; plus the static score.
pub fn anchor_score(terms: &[(String, f64)], anchors: &AnchorTerms) -> f64 {
    let total = anchors.anchors.max(0) as f64;
    let from_anchors: f64 = terms
        .iter()
        .map(|(term, idf)| {
            let n = anchors.terms.get(term).copied().unwrap_or(0).max(0) as f64;
            ANCHOR_WEIGHT * idf * n / (n + 1.0)
        })
        .sum();
    from_anchors + STATIC_WEIGHT * (1.0 + total).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_terms_weigh_more_and_idf_is_never_negative() {
        assert!(idf(1000, 1) > idf(1000, 10));
        assert!(idf(1000, 1000) > 0.0);
        assert!(idf(0, 5) > 0.0, "df above N (a racing count) stays sane");
    }

    #[test]
    fn title_frequency_and_length_order_pages() {
        let w = idf(100, 10);
        let title = term_score(w, &Posting::new(1, 0, 100), 100.0);
        let body_once = term_score(w, &Posting::new(0, 1, 100), 100.0);
        let body_often = term_score(w, &Posting::new(0, 5, 100), 100.0);
        assert!(title > body_once && body_often > body_once);
        let short = term_score(w, &Posting::new(0, 2, 50), 100.0);
        let long = term_score(w, &Posting::new(0, 2, 1000), 100.0);
        assert!(short > long);
        assert_eq!(term_score(w, &Posting::new(0, 0, 10), 100.0), 0.0);
    }

    #[test]
    fn pages_below_the_length_floor_score_as_if_that_long() {
        let w = idf(100, 10);
        let stub = Posting::new(1, 1, 5);
        let floor_long = Posting::new(1, 1, (LENGTH_FLOOR * 100.0) as u32);
        assert_eq!(
            term_score(w, &stub, 100.0),
            term_score(w, &floor_long, 100.0)
        );
        assert!(term_score_with_floor(w, &stub, 100.0, 0.0) > term_score(w, &stub, 100.0));
        let long = Posting::new(1, 1, 400);
        assert_eq!(
            term_score(w, &long, 100.0),
            term_score_with_floor(w, &long, 100.0, 0.0),
            "the floor leaves longer pages alone"
        );
    }

    #[test]
    fn anchors_and_inlinks_add_to_the_score() {
        let terms = vec![("kernel".to_owned(), 2.0)];
        let mut anchors = AnchorTerms::default();
        let none = anchor_score(&terms, &anchors);
        anchors.apply(b"the other page", 1);
        let linked = anchor_score(&terms, &anchors);
        anchors.apply(b"kernel archive", 1);
        let named = anchor_score(&terms, &anchors);
        assert!(none < linked && linked < named);
    }
}
