//! The search page in a real browser: headless Chromium (Debian's `chromium`) loads `/?q=…`
//! from a server holding the relevance test set; the page's script submits the query through
//! its form, renders ranked results with marked snippets, and fills the status panel from
//! `/api/status`. The DOM Chromium dumps after running the scripts is checked. Without Chromium
//! the test prints why it did not run, except under `CI`, where that fails (CI installs it).
//!
//! With `PERCOLATOR_SCREENSHOT=path.png` it also saves a screenshot (the one in the docs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_backend_mem::MemStore;
use percolator_bench::webindex::relevance;
use percolator_observers::conformance::{test_client, test_runtime_config};
use percolator_server::wire::PageIn;
use percolator_server::{Remote, Server, ServerConfig};
use percolator_testkit::{Harness, Needs};

/// Chromium, headless, on `url`, with `extra` flags; its stdout.
async fn headless(url: String, extra: Vec<String>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--headless".to_owned(),
        "--no-sandbox".to_owned(), // CI runs as root
        "--disable-gpu".to_owned(),
        "--no-first-run".to_owned(),
        format!("--user-data-dir={}", profile.path().display()),
        "--virtual-time-budget=8000".to_owned(),
    ];
    args.extend(extra);
    args.push(url);
    let out = tokio::task::spawn_blocking(move || Command::new("chromium").args(&args).output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn the_search_page_works_in_a_real_browser() {
    let store = Arc::new(MemStore::new());
    let config =
        ServerConfig::new("127.0.0.1:0".parse().unwrap()).with_runtime(test_runtime_config());
    let server = Server::start(test_client(&store), config).await.unwrap();
    let remote = Remote::new(server.url());
    // The relevance set's UTF-8 pages, through the API.
    let pages: Vec<PageIn> = relevance::corpus()
        .into_iter()
        .filter_map(|p| {
            Some(PageIn {
                html: String::from_utf8(p.html.to_vec()).ok()?,
                url: p.url,
            })
        })
        .collect();
    remote.ingest_pages(&pages).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while remote.status().await.unwrap().pending > 0 {
        assert!(Instant::now() < deadline, "never idle");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let dom = headless(
        format!("{}/?q=unsafe+rust", server.url()),
        vec!["--dump-dom".to_owned()],
    )
    .await;
    // Ranked hits, the best first, with its snippet's words marked.
    let first = dom
        .find("<li class=\"hit\">")
        .unwrap_or_else(|| panic!("no hits in\n{dom}"));
    let hit = &dom[first..];
    let hit = &hit[..hit.find("</li>").unwrap_or(hit.len())];
    assert!(
        hit.contains("<a href=\"http://docs.example/book/ch-unsafe.html\">"),
        "the Unsafe Rust chapter is not first:\n{dom}"
    );
    assert!(hit.contains(">Unsafe Rust</a>"), "{dom}");
    assert!(
        dom.contains("<mark>unsafe</mark>") || dom.contains("<mark>Unsafe</mark>"),
        "{dom}"
    );
    assert!(
        dom.contains("documents contain all of: rust unsafe"),
        "{dom}"
    );
    // The status panel was filled from /api/status.
    assert!(
        dom.contains("data-loaded=\"1\""),
        "status panel not loaded:\n{dom}"
    );
    assert!(dom.contains("<dd id=\"s-pending\">0</dd>"), "{dom}");
    let documents = remote.status().await.unwrap().documents;
    assert!(
        dom.contains(&format!("<dd id=\"s-documents\">{documents}</dd>")),
        "{dom}"
    );

    // OR through the checkbox's URL form, and a query with no results.
    let dom = headless(
        format!("{}/?q=zymurgy+nosuchword&any=1", server.url()),
        vec!["--dump-dom".to_owned()],
    )
    .await;
    assert!(
        dom.contains("documents contain any of: nosuchword zymurgy"),
        "{dom}"
    );
    assert!(
        dom.contains("http://docs.example/book/glossary.html"),
        "{dom}"
    );
    let dom = headless(
        format!("{}/?q=nosuchword", server.url()),
        vec!["--dump-dom".to_owned()],
    )
    .await;
    assert!(
        dom.contains(">0 of ") && !dom.contains("<li class=\"hit\">"),
        "{dom}"
    );

    if let Ok(path) = std::env::var("PERCOLATOR_SCREENSHOT") {
        headless(
            format!("{}/?q=unsafe+rust", server.url()),
            vec![
                format!("--screenshot={path}"),
                "--window-size=1100,760".to_owned(),
            ],
        )
        .await;
    }
    server.shutdown().await.unwrap();
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Chromium])
        .tokio(
            "the_search_page_works_in_a_real_browser",
            4,
            the_search_page_works_in_a_real_browser,
        )
        .run()
}
