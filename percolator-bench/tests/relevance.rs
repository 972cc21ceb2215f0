//! The relevance test set ([`percolator_bench::webindex::relevance`]): every query's expected page
//! ranks in the top 3, total counts are exact, snippets mark the query's words, and paging and
//! OR work. Runs the whole pipeline (concurrent observers) on the in-memory backend.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use percolator_backend_mem::MemStore;
use percolator_bench::webindex::relevance;
use percolator_observers::conformance::{idle, start, writer};
use percolator_webindex::{self as webindex, Mode, SearchOptions, html};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relevance_set_ranks_every_answer_in_the_top_3() {
    let store = std::sync::Arc::new(MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let corpus = relevance::corpus();
    let pages = corpus
        .clone()
        .into_iter()
        .map(Ok::<_, std::convert::Infallible>);
    webindex::load_pages(&client, pages, 8, |_, _| {})
        .await
        .unwrap();
    idle(&runtime).await;
    let report = webindex::check(&client).await.unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);

    let result = relevance::evaluate(&client).await.unwrap();
    println!(
        "{:<22} {:>4} {:>9} {:>6}  expected",
        "query", "rank", "URL order", "total"
    );
    for c in &result.cases {
        println!(
            "{:<22} {:>4} {:>9} {:>6}  {}",
            c.case.query,
            c.rank.map_or("-".into(), |r| r.to_string()),
            c.url_order_rank.map_or("-".into(), |r| r.to_string()),
            c.total,
            c.case.expected
        );
    }
    assert!(result.cases.len() >= 20);
    let misses: Vec<_> = result
        .cases
        .iter()
        .filter(|c| c.rank.is_none_or(|r| r > 3))
        .collect();
    assert!(misses.is_empty(), "not in the top 3: {misses:#?}");
    // The baseline (URL order, as unranked results come) does worse.
    println!(
        "top 3: {} of {} (URL order {}); mean reciprocal rank {:.2} (URL order {:.2})",
        result.within(3),
        result.cases.len(),
        result.url_order_within(3),
        result.mean_reciprocal_rank(),
        result.url_order_mean_reciprocal_rank()
    );
    assert!(result.url_order_within(3) < result.within(3));
    assert!(result.url_order_mean_reciprocal_rank() < result.mean_reciprocal_rank());

    // Totals are exact: the canonical pages containing every term (the two copies are not
    // canonical).
    let copies = [
        "http://mirror.example/docs/book/ch-patterns.html",
        "http://docs.example/zz.html",
    ];
    let parsed: Vec<(String, html::ParsedPage)> = corpus
        .iter()
        .filter(|p| !copies.contains(&p.url.as_str()))
        .map(|p| (p.url.clone(), html::parse_page(&p.url, &p.html)))
        .collect();
    for c in &result.cases {
        let terms = webindex::terms::distinct_terms(c.case.query);
        let expected = parsed
            .iter()
            .filter(|(_, page)| match c.case.mode {
                Mode::Any => terms.iter().any(|t| page.terms.contains(t)),
                _ => terms.iter().all(|t| page.terms.contains(t)),
            })
            .count();
        assert_eq!(c.total, expected, "total for {:?}", c.case.query);
    }

    // Snippets mark the query's words; paging walks the same ranking.
    let all = webindex::search(&client, "unsafe", &SearchOptions::default().limit(1000))
        .await
        .unwrap();
    let first = &all.hits[0];
    assert_eq!(first.url, "http://docs.example/book/ch-unsafe.html");
    assert_eq!(first.title, "Unsafe Rust");
    assert!(!first.snippet.highlights.is_empty(), "{:?}", first.snippet);
    for &(a, b) in &first.snippet.highlights {
        assert_eq!(first.snippet.text[a..b].to_lowercase(), "unsafe");
    }
    assert!(all.hits.windows(2).all(|w| w[0].score >= w[1].score));
    let mut paged = Vec::new();
    for offset in (0..all.total).step_by(7) {
        let page = webindex::search(
            &client,
            "unsafe",
            &SearchOptions::default()
                .limit(7)
                .offset(offset)
                .snippets(false),
        )
        .await
        .unwrap();
        assert_eq!(page.total, all.total);
        paged.extend(page.hits.into_iter().map(|h| h.url));
    }
    let urls: Vec<String> = all.hits.iter().map(|h| h.url.clone()).collect();
    assert_eq!(paged, urls);
    assert_eq!(urls.iter().collect::<BTreeSet<_>>().len(), urls.len());

    // AND is the intersection, OR the union.
    let both = webindex::search(&client, "async runtime", &SearchOptions::default())
        .await
        .unwrap();
    let either = webindex::search(
        &client,
        "async runtime",
        &SearchOptions::default().mode(Mode::Any),
    )
    .await
    .unwrap();
    let one = |q: &str| {
        let client = &client;
        let q = q.to_owned();
        async move {
            webindex::search(client, &q, &SearchOptions::default())
                .await
                .unwrap()
                .total
        }
    };
    let (a, r) = (one("async").await, one("runtime").await);
    assert!(both.total <= a.min(r) && either.total >= a.max(r));
    assert_eq!(either.total, a + r - both.total);
    // Nothing matches: empty, total 0.
    let none = webindex::search(&client, "nosuchwordanywhere", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!((none.total, none.hits.len()), (0, 0));
    // No word to search for: an error that says so.
    for q in ["", "!!", " ;-) "] {
        let err = webindex::search(&client, q, &SearchOptions::default())
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("no word to search for"),
            "{q:?}: {err}"
        );
    }

    // Every case's query, paged 10 at a time, concatenates to the single request's order; so
    // does it with a rerank pool of 7, where the order crosses from the pool (anchors and
    // inlinks added) to the matches ranked by text alone.
    for case in relevance::cases() {
        for pool in [webindex::search::RERANK_POOL, 7] {
            let options = SearchOptions::default().mode(case.mode).rerank_pool(pool);
            let check = relevance::check_paging(&client, case.query, &options, 10)
                .await
                .unwrap();
            assert!(
                check.problems.is_empty(),
                "{:?} (pool {pool}): {:?}",
                case.query,
                check.problems
            );
            assert!(check.single > 0, "{:?}", case.query);
        }
    }
    let small_pool = webindex::search(
        &client,
        "unsafe",
        &SearchOptions::default().rerank_pool(7).limit(1000),
    )
    .await
    .unwrap();
    assert_eq!(small_pool.scored, 7);
    assert!(small_pool.total > 7, "{}", small_pool.total);
    assert_eq!(all.scored, all.total, "fewer than a pool match: all scored");
    runtime.shutdown().await.unwrap();
}
