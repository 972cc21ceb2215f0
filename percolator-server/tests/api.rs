//! The HTTP API end to end on the in-memory backend: ingest (JSON pages, a gzip WARC upload with
//! a non-UTF-8 page, deletes), ranked search, status, stats, metrics, the search page, and
//! errors that name what failed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_backend_mem::MemStore;
use percolator_observers::conformance::{test_client, test_runtime_config};
use percolator_server::wire::PageIn;
use percolator_server::{Access, Remote, RemoteError, Server, ServerConfig, Token};
use percolator_webindex::{CrawledPage, Mode, SearchOptions, warc};

async fn serve() -> (Server<MemStore>, Remote) {
    let store = Arc::new(MemStore::new());
    let token = Token::generate();
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), Access::new(token.clone()))
        .with_runtime(test_runtime_config());
    let server = Server::start(test_client(&store), config).await.unwrap();
    let remote = Remote::new(server.url()).with_token(token);
    (server, remote)
}

/// Waits until the server reports nothing pending.
async fn settle(remote: &Remote) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = remote.status().await.unwrap();
        if status.pending == 0 && status.tables.iter().all(|t| t.locks == 0) {
            return;
        }
        assert!(Instant::now() < deadline, "never settled: {status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn page(url: &str, html: &str) -> PageIn {
    PageIn {
        url: url.into(),
        html: html.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_ingests_searches_and_reports() {
    let (server, remote) = serve().await;

    // Ingest: a page, its mirror, and a page linking to the mirror.
    let report = remote
        .ingest_pages(&[
            page("http://a.example/", "<title>Alpha page</title><p>alpha words here</p>"),
            page("http://copy.example/x/a", "<title>Alpha page</title><p>alpha words here</p>"),
            page(
                "http://b.example/",
                "<title>Beta</title><p>beta words <a href='http://copy.example/x/a'>the copy</a></p>",
            ),
        ])
        .await
        .unwrap();
    assert_eq!((report.loaded, report.unchanged, report.skipped), (3, 0, 0));
    settle(&remote).await;

    let results = remote
        .search("alpha", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(results.total, 1, "the mirror is not canonical: {results:?}");
    let hit = &results.hits[0];
    assert_eq!(
        (hit.url.as_str(), hit.title.as_str()),
        ("http://a.example/", "Alpha page")
    );
    assert_eq!(
        hit.inlinks, 1,
        "the link to the mirror counts for the canonical"
    );
    assert_eq!(hit.snippet.marked(), "[alpha] words here");
    let either = remote
        .search("alpha beta", &SearchOptions::default().mode(Mode::Any))
        .await
        .unwrap();
    assert_eq!(either.total, 2);

    // A gzip WARC upload, one page in ISO-8859-1 (bytes that are not UTF-8), then the same
    // upload again: unchanged.
    let latin1: &[u8] = b"<html><head><meta charset=\"iso-8859-1\"><title>Caf\xe9</title></head><body>cr\xe8me br\xfbl\xe9e</body></html>";
    let mut warc_bytes = Vec::new();
    warc::write_warc(
        &mut warc_bytes,
        &[
            CrawledPage {
                url: "http://fr.example/".into(),
                html: Bytes::from_static(latin1),
            },
            CrawledPage {
                url: "http://c.example/".into(),
                html: Bytes::from_static(b"<p>gamma</p>"),
            },
        ],
        true,
    )
    .unwrap();
    let report = remote.ingest_warc(warc_bytes.clone().into()).await.unwrap();
    // write_warc starts with a warcinfo record: counted, skipped.
    assert_eq!(
        (report.records, report.loaded, report.other_records),
        (3, 2, 1)
    );
    let again = remote.ingest_warc(warc_bytes.into()).await.unwrap();
    assert_eq!((again.loaded, again.unchanged), (0, 2));
    settle(&remote).await;
    let french = remote
        .search("crème", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(french.hits[0].url, "http://fr.example/");
    assert_eq!(french.hits[0].title, "Café");

    // Deletes: one stored, one not.
    let deleted = remote
        .delete(vec![
            "http://b.example/".into(),
            "http://nowhere.example/".into(),
        ])
        .await
        .unwrap();
    assert_eq!(deleted.deleted, 1);
    assert_eq!(deleted.missing, ["http://nowhere.example/"]);
    settle(&remote).await;
    let beta = remote
        .search("beta", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(beta.total, 0, "{beta:?}");
    let gone = remote
        .delete_missing("http://c.example/".into(), Vec::new())
        .await
        .unwrap();
    assert_eq!(gone.deleted, 1);
    settle(&remote).await;

    // Status, stats, metrics.
    let status = remote.status().await.unwrap();
    assert_eq!((status.pending, status.documents), (0, 2), "{status:?}");
    assert!(status.processed > 0 && status.searches == 4, "{status:?}");
    assert!(status.freshness_samples >= 4, "{status:?}");
    let checked = remote.check().await.unwrap();
    assert_eq!(checked.pending, 0);
    assert!(
        checked.report.violations.is_empty(),
        "{:?}",
        checked.report.violations
    );
    assert_eq!(checked.report.summary.clusters, 2);
    // The kept sizes agree with the check's count, without reading the index.
    let stats = remote.stats().await.unwrap();
    assert_eq!(stats.pending, 0);
    // a, its mirror and fr.example: three documents, two clusters.
    assert_eq!(
        (
            stats.sizes.documents,
            stats.sizes.clusters,
            stats.sizes.duplicates
        ),
        (3, 2, 1),
        "{stats:?}"
    );
    assert_eq!(
        stats.sizes.documents,
        i64::try_from(checked.report.summary.documents).unwrap()
    );
    assert_eq!(
        stats.sizes.postings, checked.report.summary.postings as i64,
        "{stats:?}"
    );
    let http = reqwest::Client::new();
    let metrics = http
        .get(format!("{}/metrics", server.url()))
        .send()
        .await
        .unwrap();
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let metrics = metrics.text().await.unwrap();
    for line in [
        "percolator_pending_notifications 0",
        "percolator_index_documents 2",
        "percolator_ingest_pages_total{outcome=\"loaded\"} 5",
        "percolator_ingest_pages_total{outcome=\"unchanged\"} 2",
        "percolator_pages_deleted_total 2",
        "# TYPE percolator_search_seconds summary",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line:?} in\n{metrics}"
        );
    }

    // The search page.
    let page = http.get(server.url()).send().await.unwrap();
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    assert!(
        html.contains("id=\"search-form\"")
            && !html.contains("http://")
            && !html.contains("https://"),
        "the page loads nothing from elsewhere"
    );

    // Errors name what failed.
    let too_many = (0..40)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    match remote.search(&too_many, &SearchOptions::default()).await {
        Err(RemoteError::Api {
            status: 400,
            message,
            ..
        }) => {
            assert!(message.contains("40 distinct words"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let bad_mode = http
        .get(format!("{}/api/search?q=x&mode=xor", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_mode.status(), 400);
    assert!(
        bad_mode
            .text()
            .await
            .unwrap()
            .contains("search mode \\\"xor\\\"")
    );
    let bad_json = http
        .post(format!("{}/api/pages", server.url()))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 401, "no token");
    let dead = Remote::new("http://127.0.0.1:9");
    assert!(matches!(
        dead.status().await,
        Err(RemoteError::Unreachable { .. })
    ));

    let stats = server.shutdown().await.unwrap();
    assert!(stats.notifications_processed > 0);
}

/// Both ingest APIs count cut pages the same way, as the loader cuts them: a page over the
/// server's `max_page_bytes` is stored cut and counted in `truncated`, a short one is not, and
/// the stats count the pages stored cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_ingest_apis_count_cut_pages() {
    let store = Arc::new(MemStore::new());
    let token = Token::generate();
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), Access::new(token.clone()))
        .with_runtime(test_runtime_config())
        .with_max_page_bytes(2_000);
    let server = Server::start(test_client(&store), config).await.unwrap();
    let remote = Remote::new(server.url()).with_token(token);
    let long = format!("<p>{}</p>", "long words ".repeat(500));

    let report = remote
        .ingest_pages(&[
            page("http://short.example/", "<p>short</p>"),
            page("http://long.example/", &long),
        ])
        .await
        .unwrap();
    assert_eq!((report.loaded, report.truncated), (2, 1), "{report:?}");

    let mut warc_bytes = Vec::new();
    warc::write_warc(
        &mut warc_bytes,
        &[
            CrawledPage {
                url: "http://short.example/warc".into(),
                html: Bytes::from_static(b"<p>short</p>"),
            },
            CrawledPage {
                url: "http://long.example/warc".into(),
                html: Bytes::from(long),
            },
        ],
        true,
    )
    .unwrap();
    let report = remote.ingest_warc(warc_bytes.into()).await.unwrap();
    assert_eq!((report.loaded, report.truncated), (2, 1), "{report:?}");
    settle(&remote).await;
    assert_eq!(remote.stats().await.unwrap().sizes.cut_pages, 2);
    server.shutdown().await.unwrap();
}
