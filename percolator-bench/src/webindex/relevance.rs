//! A relevance test set: a small synthetic documentation site with known answers, and the
//! queries whose expected page must rank in the top 3.
//!
//! The site is a book of chapters and API pages among 150 notes pages. Each note is filler text
//! sprinkled with the book's topic words, so every query word occurs on many pages and only
//! ranking puts the right one first. The cases cover what a search engine must get right:
//! title matches ("HashMap" is the page titled HashMap, not the long notes that repeat the
//! word), term frequency and length, anchor text (a mirror index page called "Index of /pub"
//! that everyone links to as "the kernel archive"), inlinks as a tie-breaker, duplicates and
//! `<link rel="canonical">` (the answer is the canonical, not the copy), pages in ISO-8859-1 and
//! Shift_JIS, a term far down a page of 600 distinct words (every term of a page is indexed),
//! and OR queries. [`evaluate`] runs the cases against an index built from [`corpus`], and also
//! ranks the expected page the way an index without ranking would (by URL), as a baseline.

use bytes::Bytes;
use percolator_core::{Client, Result, RowStore};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use percolator_webindex::search::{MAX_LIMIT, Mode, SearchOptions, search};
use percolator_webindex::sources::CrawledPage;

/// The book's site.
const SITE: &str = "http://docs.example";

/// Neutral words the filler is made of.
#[rustfmt::skip]
const FILLER: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "on", "be", "at",
    "by", "this", "we", "you", "from", "or", "an", "are", "can", "which", "when", "will", "one",
    "all", "would", "there", "their", "what", "so", "up", "out", "if", "about", "who", "get", "go",
    "me", "make", "like", "time", "no", "just", "him", "know", "take", "people", "into", "year",
    "your", "good", "some", "could", "them", "see", "other", "than", "then", "now", "look", "only",
    "come", "its", "over", "think", "also", "back", "after", "use", "two", "how", "our", "work",
    "first", "well", "way", "even", "new", "want", "because", "any", "these", "give", "day",
    "most", "us", "value", "example", "code", "program", "function", "type", "data", "method",
    "call", "return", "number", "list", "section", "chapter", "note", "page", "result", "change",
    "case", "point", "part", "place", "system", "group", "problem", "fact",
];

/// Words the cases query, sprinkled over the notes so that each occurs on many pages.
#[rustfmt::skip]
const TOPICS: &[&str] = &[
    "unsafe",
    "ownership",
    "borrow",
    "checker",
    "hashmap",
    "lifetime",
    "annotations",
    "kernel",
    "archive",
    "iterators",
    "closures",
    "pattern",
    "matching",
    "smart",
    "pointers",
    "async",
    "runtime",
    "deadlock",
    "error",
    "handling",
    "cargo",
    "workspaces",
    "tests",
    "threads",
    "vec",
    "string",
    "trait",
    "objects",
    "macros",
    "borrowing",
    "rustonomicon",
    "writing",
];

/// One query with its known answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Case {
    /// The query.
    pub query: &'static str,
    /// AND or OR.
    pub mode: Mode,
    /// The page that must rank in the top 3.
    pub expected: String,
    /// What the case tests.
    pub why: &'static str,
}

/// How one case ranked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// The expected page's rank (1 = first), if found.
    pub rank: Option<usize>,
    /// Its rank in URL order (the order of unranked results), if found.
    pub url_order_rank: Option<usize>,
    /// Documents matching.
    pub total: usize,
    /// The first result's URL.
    pub top: Option<String>,
}

/// How the whole set ranked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelevanceReport {
    /// Per case.
    pub cases: Vec<CaseResult>,
}

impl RelevanceReport {
    /// Cases whose expected page ranks at most `k`.
    pub fn within(&self, k: usize) -> usize {
        self.cases
            .iter()
            .filter(|c| c.rank.is_some_and(|r| r <= k))
            .count()
    }

    /// The same in URL order.
    pub fn url_order_within(&self, k: usize) -> usize {
        self.cases
            .iter()
            .filter(|c| c.url_order_rank.is_some_and(|r| r <= k))
            .count()
    }

    /// Mean reciprocal rank (0 for a case not found).
    pub fn mean_reciprocal_rank(&self) -> f64 {
        mrr(self.cases.iter().map(|c| c.rank))
    }

    /// The same in URL order.
    pub fn url_order_mean_reciprocal_rank(&self) -> f64 {
        mrr(self.cases.iter().map(|c| c.url_order_rank))
    }
}

/// Mean reciprocal rank of `ranks` (0 for a query whose answer was not found).
pub(crate) fn mrr(ranks: impl ExactSizeIterator<Item = Option<usize>>) -> f64 {
    let n = ranks.len().max(1) as f64;
    ranks
        .map(|r| r.map_or(0.0, |r| 1.0 / r as f64))
        .sum::<f64>()
        / n
}

fn url(path: &str) -> String {
    format!("{SITE}/{path}")
}

/// `n` filler words, with `topic` words spliced in `times` times each at random places.
fn text(rng: &mut StdRng, n: usize, topic: &[(&str, usize)]) -> String {
    let mut words: Vec<&str> = (0..n)
        .map(|_| *FILLER.choose(rng).unwrap_or(&"the"))
        .collect();
    for &(word, times) in topic {
        for _ in 0..times {
            let at = rng.random_range(0..=words.len());
            words.insert(at, word);
        }
    }
    words.join(" ")
}

fn html(title: &str, head: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title>{head}</head>\
         <body><h1>{title}</h1><p>{body}</p></body></html>"
    )
}

fn page(path: &str, html: impl Into<Bytes>) -> CrawledPage {
    CrawledPage {
        url: url(path),
        html: html.into(),
    }
}

/// A book page: `title`, and a body of `words` filler words with `topic` spliced in.
fn chapter(
    rng: &mut StdRng,
    path: &str,
    title: &str,
    words: usize,
    topic: &[(&str, usize)],
) -> CrawledPage {
    page(path, html(title, "", &text(rng, words, topic)))
}

/// The pages of the test set (deterministic).
pub fn corpus() -> Vec<CrawledPage> {
    let mut rng = StdRng::seed_from_u64(0x5ea7c4);
    let mut pages = vec![
        chapter(
            &mut rng,
            "book/ch-unsafe.html",
            "Unsafe Rust",
            400,
            &[("unsafe", 12)],
        ),
        chapter(
            &mut rng,
            "book/ch-ownership.html",
            "Understanding Ownership",
            500,
            &[("ownership", 20), ("borrowing", 4)],
        ),
        chapter(
            &mut rng,
            "std/hashmap.html",
            "HashMap",
            120,
            &[("hashmap", 3)],
        ),
        chapter(
            &mut rng,
            "book/ch-borrow.html",
            "The Borrow Checker",
            300,
            &[("borrow", 6), ("checker", 5)],
        ),
        chapter(
            &mut rng,
            "book/ch-lifetimes.html",
            "Validating References with Lifetimes",
            400,
            &[("lifetime", 8), ("annotations", 6)],
        ),
        chapter(
            &mut rng,
            "book/ch-iterators.html",
            "Processing a Series of Items with Iterators",
            400,
            &[("iterators", 10)],
        ),
        chapter(
            &mut rng,
            "book/ch-patterns.html",
            "Patterns and Matching",
            400,
            &[("pattern", 9), ("matching", 7)],
        ),
        chapter(
            &mut rng,
            "book/ch-smart-pointers.html",
            "Smart Pointers",
            400,
            &[("smart", 8), ("pointers", 9)],
        ),
        chapter(
            &mut rng,
            "book/ch-async.html",
            "Async and Await",
            400,
            &[("async", 10), ("runtime", 4)],
        ),
        chapter(
            &mut rng,
            "book/ch-errors.html",
            "Error Handling",
            400,
            &[("error", 12), ("handling", 6)],
        ),
        chapter(
            &mut rng,
            "book/ch-workspaces.html",
            "Cargo Workspaces",
            300,
            &[("cargo", 6), ("workspaces", 7)],
        ),
        chapter(
            &mut rng,
            "book/ch-testing.html",
            "Writing Automated Tests",
            400,
            &[("tests", 10), ("writing", 3)],
        ),
        chapter(
            &mut rng,
            "book/ch-concurrency.html",
            "Fearless Concurrency",
            400,
            &[("threads", 10)],
        ),
        chapter(&mut rng, "std/vec.html", "Vec", 150, &[("vec", 4)]),
        chapter(&mut rng, "std/string.html", "String", 150, &[("string", 4)]),
        chapter(
            &mut rng,
            "book/ch-trait-objects.html",
            "Using Trait Objects",
            400,
            &[("trait", 8), ("objects", 8)],
        ),
        chapter(
            &mut rng,
            "book/ch-macros.html",
            "Macros",
            400,
            &[("macros", 10)],
        ),
        // Anchor text: a mirror listing that says little about itself, linked as "the kernel archive".
        page(
            "mirror/pub/index.html",
            html(
                "Index of /pub",
                "",
                "Parent Directory kernel/ archive/ linux-6.1.tar.xz",
            ),
        ),
        // Anchor text again: the nomicon is linked by that name; its title does not say it.
        chapter(
            &mut rng,
            "nomicon/index.html",
            "The Dark Arts of Advanced and Unsafe Programming",
            300,
            &[("rustonomicon", 1)],
        ),
        // Inlinks break a tie: two equal pages, the chapter is linked from the table of contents.
        chapter(
            &mut rng,
            "book/ch-closures.html",
            "Closures",
            300,
            &[("closures", 6)],
        ),
        // Length: the same word as often in a short page and a long one.
        chapter(
            &mut rng,
            "notes/deadlock-short.html",
            "Note 1001",
            80,
            &[("deadlock", 4)],
        ),
        chapter(
            &mut rng,
            "notes/deadlock-long.html",
            "Note 1002",
            3000,
            &[("deadlock", 5)],
        ),
    ];
    // The closures tie: as long, the same counts (other filler), no table-of-contents links.
    pages.push(chapter(
        &mut rng,
        "blog/closures.html",
        "Closures",
        300,
        &[("closures", 6)],
    ));
    // A duplicate of the patterns chapter on a mirror (the canonical stays the book's).
    pages.push(CrawledPage {
        url: "http://mirror.example/docs/book/ch-patterns.html".to_owned(),
        html: pages[6].html.clone(),
    });
    // A shorter copy of the smart pointers chapter that names the chapter canonical.
    let smart = String::from_utf8_lossy(&pages[7].html).replace(
        "<meta charset=\"utf-8\">",
        &format!(
            "<meta charset=\"utf-8\"><link rel=\"canonical\" href=\"{}\">",
            url("book/ch-smart-pointers.html")
        ),
    );
    pages.push(page("zz.html", smart));
    // ISO-8859-1 and Shift_JIS pages.
    let latin1 = "<html><head><meta charset=\"iso-8859-1\"><title>Caf\u{e9} cr\u{e8}me</title></head>\
                  <body><p>Une caf\u{e9} cr\u{e8}me et un croissant, la cr\u{e8}me de la cr\u{e8}me.</p></body></html>";
    let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode(latin1);
    pages.push(page("fr/cafe.html", bytes.into_owned()));
    let sjis = "<html><head><meta charset=\"shift_jis\"><title>東京 案内</title></head>\
                <body><p>東京 の 地図 と 東京 タワー</p></body></html>";
    let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(sjis);
    pages.push(page("ja/tokyo.html", bytes.into_owned()));
    // A glossary of 600 distinct words; the query's is near the end alphabetically.
    let mut glossary: Vec<String> = (0..599).map(|i| format!("gloss{i:03}")).collect();
    glossary.push("zymurgy".to_owned());
    pages.push(page(
        "book/glossary.html",
        html("Glossary", "", &glossary.join(" ")),
    ));

    // The table of contents links every chapter by number.
    let chapters: Vec<String> = pages
        .iter()
        .filter(|p| p.url.starts_with(&url("book/ch-")))
        .map(|p| p.url.clone())
        .collect();
    let mut toc = String::from("<html><head><title>Table of Contents</title></head><body><ul>");
    for (n, chapter) in chapters.iter().enumerate() {
        toc.push_str(&format!(
            "<li><a href=\"{chapter}\">Chapter {}</a></li>",
            n + 1
        ));
    }
    toc.push_str("</ul></body></html>");
    pages.push(page("book/toc.html", toc));

    // 150 notes all over the site (a/, b/, ... z/): filler with topic words sprinkled, linking to the mirror as "the kernel
    // archive", to the nomicon as "the Rustonomicon", and to random chapters.
    for i in 0..150 {
        let mut sprinkled: Vec<(&str, usize)> = Vec::new();
        for topic in TOPICS {
            if rng.random_bool(0.25) {
                sprinkled.push((topic, rng.random_range(1..=2)));
            }
        }
        // Some notes repeat the type names often (a long page about HashMap is not its page).
        if i % 10 == 0 {
            sprinkled.push(("hashmap", 4));
            sprinkled.push(("kernel", 2));
            sprinkled.push(("archive", 2));
        }
        let words = rng.random_range(200..600);
        let mut body = text(&mut rng, words, &sprinkled);
        if i % 10 < 3 {
            body.push_str(&format!(
                " <a href=\"{}\">the kernel archive</a>",
                url("mirror/pub/index.html")
            ));
        }
        if i % 10 == 5 {
            body.push_str(&format!(
                " <a href=\"{}\">the Rustonomicon</a>",
                url("nomicon/index.html")
            ));
        }
        if let Some(target) = chapters.choose(&mut rng) {
            body.push_str(&format!(" <a href=\"{target}\">see also</a>"));
        }
        pages.push(page(
            &format!("{}/note-{i:03}.html", char::from(b'a' + (i % 26) as u8)),
            html(&format!("Note {i}"), "", &body),
        ));
    }
    pages
}

/// The queries and their answers (24 cases).
pub fn cases() -> Vec<Case> {
    let case = |query, mode, path: &str, why| Case {
        query,
        mode,
        expected: url(path),
        why,
    };
    use Mode::{All, Any};
    vec![
        case("unsafe", All, "book/ch-unsafe.html", "title and frequency"),
        case(
            "ownership",
            All,
            "book/ch-ownership.html",
            "frequency among 40 pages",
        ),
        case(
            "hashmap",
            All,
            "std/hashmap.html",
            "a type's page is titled with its name",
        ),
        case(
            "borrow checker",
            All,
            "book/ch-borrow.html",
            "two terms, both in the title",
        ),
        case(
            "lifetime annotations",
            All,
            "book/ch-lifetimes.html",
            "two body terms",
        ),
        case(
            "kernel archive",
            All,
            "mirror/pub/index.html",
            "anchor text",
        ),
        case(
            "rustonomicon",
            All,
            "nomicon/index.html",
            "anchor text, not in the title",
        ),
        case(
            "iterators",
            All,
            "book/ch-iterators.html",
            "a word in a long title",
        ),
        case(
            "closures",
            All,
            "book/ch-closures.html",
            "inlinks break a tie",
        ),
        case(
            "pattern matching",
            All,
            "book/ch-patterns.html",
            "the canonical, not its mirror",
        ),
        case(
            "smart pointers",
            All,
            "book/ch-smart-pointers.html",
            "the declared canonical, not the copy",
        ),
        case(
            "async runtime",
            Any,
            "book/ch-async.html",
            "OR: the page with both terms",
        ),
        case(
            "deadlock",
            All,
            "notes/deadlock-short.html",
            "length normalization",
        ),
        case(
            "error handling",
            All,
            "book/ch-errors.html",
            "common words together",
        ),
        case(
            "cargo workspaces",
            All,
            "book/ch-workspaces.html",
            "title terms",
        ),
        case("writing tests", All, "book/ch-testing.html", "title terms"),
        case(
            "threads",
            All,
            "book/ch-concurrency.html",
            "frequency, not in the title",
        ),
        case("vec", All, "std/vec.html", "a short type name"),
        case(
            "string",
            All,
            "std/string.html",
            "a type name that is a common word",
        ),
        case(
            "trait objects",
            All,
            "book/ch-trait-objects.html",
            "title terms",
        ),
        case("macros", All, "book/ch-macros.html", "title and frequency"),
        case(
            "ownership borrowing",
            Any,
            "book/ch-ownership.html",
            "OR: both terms",
        ),
        case("crème", All, "fr/cafe.html", "an ISO-8859-1 page"),
        case("東京", All, "ja/tokyo.html", "a Shift_JIS page"),
        case(
            "zymurgy",
            All,
            "book/glossary.html",
            "a term past a page's first 200",
        ),
    ]
}

/// Runs every case against the index (built from [`corpus`]).
pub async fn evaluate<S: RowStore>(client: &Client<S>) -> Result<RelevanceReport> {
    let mut ranked = Vec::new();
    for case in cases() {
        let options = SearchOptions::default()
            .mode(case.mode)
            .limit(MAX_LIMIT)
            .snippets(false);
        let results = search(client, case.query, &options).await?;
        let rank = results
            .hits
            .iter()
            .position(|h| h.url == case.expected)
            .map(|i| i + 1);
        let mut by_url: Vec<&str> = results.hits.iter().map(|h| h.url.as_str()).collect();
        by_url.sort_unstable();
        let url_order_rank = by_url
            .iter()
            .position(|u| *u == case.expected)
            .map(|i| i + 1);
        ranked.push(CaseResult {
            rank,
            url_order_rank,
            total: results.total,
            top: results.hits.first().map(|h| h.url.clone()),
            case,
        });
    }
    Ok(RelevanceReport { cases: ranked })
}

/// How paging through one query went: the single request's order against the pages'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PagingCheck {
    /// Hits in the single request (up to [`MAX_LIMIT`]).
    pub single: usize,
    /// Hits the pages returned together.
    pub paged: usize,
    /// What went wrong (empty: the pages concatenate to the single request's order).
    pub problems: Vec<String>,
}

/// Pages through `query` `page` hits at a time, with `options`' mode and rerank pool, and
/// compares the pages, concatenated, with the order of one request for up to [`MAX_LIMIT`]
/// hits: the same URLs in the same order, none twice, none missing, and scores that never rise
/// down the order.
pub async fn check_paging<S: RowStore>(
    client: &Client<S>,
    query: &str,
    options: &SearchOptions,
    page: usize,
) -> Result<PagingCheck> {
    let base = options.snippets(false).offset(0);
    let all = search(client, query, &base.limit(MAX_LIMIT)).await?;
    let single: Vec<&str> = all.hits.iter().map(|h| h.url.as_str()).collect();
    let span = all.total.min(MAX_LIMIT);
    let mut paged = Vec::new();
    let mut problems = Vec::new();
    for offset in (0..span).step_by(page.max(1)) {
        let results = search(client, query, &base.offset(offset).limit(page)).await?;
        if results.total != all.total {
            problems.push(format!(
                "offset {offset}: total {} against {}",
                results.total, all.total
            ));
        }
        paged.extend(results.hits.into_iter().map(|h| h.url));
    }
    paged.truncate(single.len());
    if paged != single {
        let at = paged.iter().zip(&single).position(|(a, b)| a != b);
        problems.push(format!(
            "the pages differ from the single request's order (first at {at:?}; {} against {} hits)",
            paged.len(),
            single.len()
        ));
    }
    let distinct: std::collections::HashSet<&String> = paged.iter().collect();
    if distinct.len() != paged.len() {
        problems.push(format!("{} hits shown twice", paged.len() - distinct.len()));
    }
    if let Some(i) = all.hits.windows(2).position(|w| w[1].score > w[0].score) {
        problems.push(format!(
            "the score rises at {}: {} then {}",
            i + 1,
            all.hits[i].score,
            all.hits[i + 1].score
        ));
    }
    Ok(PagingCheck {
        single: single.len(),
        paged: paged.len(),
        problems,
    })
}
