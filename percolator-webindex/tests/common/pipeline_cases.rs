//! The web-index cases every backend runs: plain async functions over a `StoreFactory`, shared
//! by `pipeline.rs` (the in-process backends) and `pipeline_etcd.rs` (an etcd cluster), plus the
//! helpers the other pipeline tests use.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use bytes::Bytes;
use percolator_core::RowStore;
use percolator_core::conformance::StoreFactory;
use percolator_observers::conformance::{idle, start, writer};
use percolator_webindex::{
    self as webindex, CrawledPage, SearchOptions, synthetic::SyntheticCrawl, warc,
};

pub async fn load<S: RowStore>(client: &percolator_core::Client<S>, pages: Vec<CrawledPage>) {
    let pages = pages.into_iter().map(Ok::<_, std::convert::Infallible>);
    webindex::load_pages(client, pages, 8, |_, _| {})
        .await
        .unwrap();
}

pub async fn search<S: RowStore>(
    client: &percolator_core::Client<S>,
    query: &str,
    limit: usize,
) -> webindex::SearchResults {
    webindex::search(client, query, &SearchOptions::default().limit(limit))
        .await
        .unwrap()
}

/// The URLs a query finds, best first.
pub async fn urls<S: RowStore>(client: &percolator_core::Client<S>, query: &str) -> Vec<String> {
    search(client, query, 10)
        .await
        .hits
        .into_iter()
        .map(|h| h.url)
        .collect()
}

pub async fn assert_invariants<S: RowStore>(
    client: &percolator_core::Client<S>,
) -> webindex::IndexSummary {
    let report = webindex::check(client).await.unwrap();
    assert!(
        report.violations.is_empty(),
        "violations: {:#?}",
        report.violations
    );
    report.summary
}

/// The web index over a synthetic crawl with duplicates, then two rounds of recrawls with
/// changed content: after each round, every invariant holds and queries find canonicals.
pub async fn webindex_synthetic_with_recrawls<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(120, 11);
    load(&client, crawl.initial().collect()).await;
    idle(&runtime).await;
    let first = assert_invariants(&client).await;
    assert_eq!(first.documents, 120);
    assert_eq!(first.processed, 120);
    assert!(first.duplicates > 0, "the crawl has mirrors: {first:?}");
    assert!(
        first.inlinks > 0 && first.terms > 0 && first.postings > 0,
        "{first:?}"
    );
    for (generation, fraction) in [(1, 0.3), (2, 0.25)] {
        load(&client, crawl.recrawl(generation, fraction)).await;
        idle(&runtime).await;
        assert_invariants(&client).await;
    }
    // A canonical document is found by one of its terms.
    let reader = client.begin().await.unwrap();
    let url = crawl.url(0);
    let terms = reader
        .get(webindex::schema::DOCUMENTS, &url, webindex::schema::TERMS)
        .await
        .unwrap()
        .unwrap();
    let terms = webindex::terms::PageTerms::decode(&terms);
    // Its alphabetically last term (on a large page, far down its terms: every term is indexed).
    let term = terms.counts.keys().last().unwrap().clone();
    let results = search(&client, &term, 1000).await;
    assert!(
        results.hits.iter().any(|h| h.url == url),
        "{url} not found by {term}: {results:?}"
    );
    assert_eq!(results.total, results.hits.len());
    let stats = runtime.shutdown().await.unwrap();
    assert!(stats.notifications_processed > 0);
}

/// A WARC file (gzip, Common Crawl style) written by the test is loaded and indexed.
pub async fn webindex_warc<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let page = |url: &str, body: &str| CrawledPage {
        url: url.into(),
        html: Bytes::from(format!(
            "<html><head><title>{body}</title></head><body><p>{body} words here</p>\
             <a href=\"http://b.example/\">see bee</a></body></html>"
        )),
    };
    let pages = vec![
        page("http://a.example/", "alpha page"),
        page("http://b.example/", "beta page"),
        page("http://mirror.example/a/copy", "alpha page"),
        page("http://c.example/x", "gamma page"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crawl.warc.gz");
    warc::write_warc(std::fs::File::create(&path).unwrap(), &pages, true).unwrap();
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let reader = warc::open(&path).unwrap();
    let report = webindex::load_pages(&client, warc::html_pages(reader), 4, |_, _| {})
        .await
        .unwrap();
    assert_eq!(report.loaded, 4);
    idle(&runtime).await;
    let summary = assert_invariants(&client).await;
    assert_eq!((summary.documents, summary.clusters), (4, 3));
    assert_eq!(
        urls(&client, "alpha").await,
        vec!["http://a.example/"],
        "the mirror is not canonical"
    );
    // More words than a query may have is an error that says so, not a silently cut query.
    let long: Vec<String> = (0..=webindex::search::MAX_QUERY_TERMS)
        .map(|i| format!("w{i:04}"))
        .collect();
    let err = webindex::search(&client, &long.join(" "), &SearchOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("33 distinct words"), "{err}");
    let txn = client.begin().await.unwrap();
    let summary = txn
        .get(
            webindex::schema::ANCHOR_TERMS,
            "http://b.example/",
            webindex::schema::SUMMARY,
        )
        .await
        .unwrap()
        .map(|b| webindex::terms::AnchorTerms::decode(&b))
        .unwrap_or_default();
    assert_eq!(summary.anchors, 3, "three pages link to b: {summary:?}");
    runtime.shutdown().await.unwrap();
}

/// `<link rel="canonical">` chooses the canonical: a copy with the shorter URL names the
/// original chapter, which wins, and its anchors and index entries go to the original; when the
/// copy stops declaring it (content unchanged), the URL order decides again.
pub async fn webindex_declared_canonical<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let chapter = "http://book.example/ch/unsafe-rust.html";
    let copy = "http://book.example/zz.html";
    let page = |declared: Option<&str>| {
        let link = declared
            .map(|c| format!("<link rel=\"canonical\" href=\"{c}\">"))
            .unwrap_or_default();
        Bytes::from(format!(
            "<html><head><title>Unsafe Rust</title>{link}</head><body><p>unsafe superpowers</p>\
             </body></html>"
        ))
    };
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let linker = CrawledPage {
        url: "http://blog.example/".into(),
        html: Bytes::from(format!("<p><a href=\"{copy}\">read the chapter</a></p>")),
    };
    load(
        &client,
        vec![
            CrawledPage {
                url: chapter.into(),
                html: page(Some(chapter)),
            },
            CrawledPage {
                url: copy.into(),
                html: page(Some(chapter)),
            },
            linker,
        ],
    )
    .await;
    idle(&runtime).await;
    let summary = assert_invariants(&client).await;
    assert_eq!((summary.documents, summary.clusters), (3, 2));
    assert_eq!(
        urls(&client, "unsafe").await,
        vec![chapter],
        "the declared canonical wins over the shorter copy"
    );
    assert_eq!(
        anchors_at(&client, chapter).await,
        (1, true),
        "the anchor to the copy goes to the chapter"
    );
    assert_eq!(anchors_at(&client, copy).await, (0, false));

    // Neither page declares anything any more: the shorter copy wins by the URL order.
    load(
        &client,
        vec![
            CrawledPage {
                url: chapter.into(),
                html: page(None),
            },
            CrawledPage {
                url: copy.into(),
                html: page(None),
            },
        ],
    )
    .await;
    idle(&runtime).await;
    assert_invariants(&client).await;
    assert_eq!(urls(&client, "unsafe").await, vec![copy]);
    assert_eq!(
        anchors_at(&client, copy).await,
        (1, true),
        "the anchor follows the canonical back to the copy"
    );
    assert_eq!(anchors_at(&client, chapter).await, (0, false));
    runtime.shutdown().await.unwrap();
}

/// How many anchors count toward canonical `url`'s anchor terms, and whether "chapter" is one of
/// their terms.
pub async fn anchors_at<S: RowStore>(
    client: &percolator_core::Client<S>,
    url: &str,
) -> (i64, bool) {
    let txn = client.begin().await.unwrap();
    let summary = txn
        .get(
            webindex::schema::ANCHOR_TERMS,
            url,
            webindex::schema::SUMMARY,
        )
        .await
        .unwrap()
        .map(|b| webindex::terms::AnchorTerms::decode(&b))
        .unwrap_or_default();
    (summary.anchors, summary.terms.contains_key("chapter"))
}
