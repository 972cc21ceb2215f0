//! The relevance set on real HTML ([`percolator_bench::webindex::rust_docs`]): the Rust
//! toolchain's book and its most searched standard library pages, indexed by the whole
//! pipeline on the in-memory backend, then every hand-judged query ranked as a first page is
//! ranked now and as it was before the rerank pool was fixed. Prints the table; asserts that
//! every judged answer is in the index, that paging through every query 10 at a time gives the
//! single request's order, and the scores below. Skipped, saying why, without the docs
//! (`rustup component add rust-docs`); under `CI` that fails instead.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use percolator_backend_mem::MemStore;
use percolator_bench::webindex::rust_docs::{self, BASE, Corpus, Ranking};
use percolator_observers::conformance::{idle, start, writer};
use percolator_testkit::{Harness, Needs};
use percolator_webindex as webindex;

async fn rust_docs_rank_their_answers() {
    let dir = rust_docs::docs_dir().expect("the harness checked for the docs");
    let store = Arc::new(MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let pages = rust_docs::pages(&dir, Corpus::Subset).unwrap();
    webindex::load_pages(&client, pages, 8, |_, _| {})
        .await
        .unwrap();
    idle(&runtime).await;

    let rankings = [Ranking::BEFORE, Ranking::NOW, Ranking::POINTERS_AS_SCORED];
    let report = rust_docs::evaluate(&client, Corpus::Subset, &rankings)
        .await
        .unwrap();
    println!("{}", report.table());
    // Every judged answer in the subset is a page of the index (a typo in the set would count
    // as a miss), and every case has one there.
    let txn = client.begin().await.unwrap();
    for case in &report.cases {
        let here: Vec<&str> = case
            .case
            .answers
            .iter()
            .copied()
            .filter(|a| Corpus::Subset.contains(a))
            .collect();
        assert!(
            !here.is_empty(),
            "{:?}: no answer in the subset",
            case.case.query
        );
        for answer in here {
            let url = format!("{BASE}{answer}");
            let raw = txn
                .get(webindex::schema::DOCUMENTS, &url, webindex::schema::RAW)
                .await
                .unwrap();
            assert!(raw.is_some(), "{:?}: {url} is not indexed", case.case.query);
        }
    }
    let failures = report.paging_failures();
    assert!(failures.is_empty(), "paging: {failures:#?}");
    assert!(report.cases.len() >= 40);
    // Ranked now, at least as many answers on top and in the top 3 as before, and a better MRR.
    let (before, now) = (
        report.scores_of("before").unwrap(),
        report.scores_of("now").unwrap(),
    );
    assert!(
        now.top1 >= before.top1 && now.top3 >= before.top3 && now.mrr > before.mrr,
        "{before:?} → {now:?}"
    );
    // Two stubs of old editions (a title and a line pointing to the current book) no longer
    // outrank the chapter: the length floor.
    let stubbed = report
        .cases
        .iter()
        .find(|c| c.case.query == "environment variables")
        .unwrap();
    assert_eq!(report.rank_with(stubbed, "before"), Some(3), "{stubbed:?}");
    assert_eq!(report.rank_with(stubbed, "now"), Some(1), "{stubbed:?}");
    // Stubs whose title matches the query better than the chapter's body does: the length
    // floor leaves them on top, and pointers ranking below what they point to (the chapter,
    // with the same title) puts the chapter first.
    for query in ["recoverable errors result", "graceful shutdown"] {
        let case = report.cases.iter().find(|c| c.case.query == query).unwrap();
        assert_eq!(
            report.rank_with(case, "pointers as scored"),
            Some(3),
            "{case:?}"
        );
        assert_eq!(report.rank_with(case, "now"), Some(1), "{case:?}");
    }
    let as_scored = report.scores_of("pointers as scored").unwrap();
    assert!(
        now.top1 > as_scored.top1 && now.top3 >= as_scored.top3 && now.mrr > as_scored.mrr,
        "{as_scored:?} → {now:?}"
    );
    // A word past the first 512 KiB of a page's HTML (the old cut): pages are kept whole now.
    let driftsort = webindex::search(&client, "driftsort", &webindex::SearchOptions::default())
        .await
        .unwrap();
    // Vec's page documents the slice methods too (Vec derefs to a slice): both are answers.
    let slice = format!("{BASE}std/primitive.slice.html");
    assert!(
        driftsort.hits.iter().any(|h| h.url == slice),
        "{driftsort:#?}"
    );
    let answers = report
        .cases
        .iter()
        .find(|c| c.case.query == "driftsort")
        .unwrap();
    assert_eq!(report.rank_with(answers, "now"), Some(1), "{answers:?}");
    let sizes = webindex::sizes::read(&client.begin().await.unwrap())
        .await
        .unwrap();
    assert_eq!(sizes.cut_pages, 0, "{sizes:?}");
    runtime.shutdown().await.unwrap();
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::RustDocs])
        .tokio(
            "rust_docs_rank_their_answers",
            4,
            rust_docs_rank_their_answers,
        )
        .run()
}
