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
use percolator_server::{Access, Remote, Server, ServerConfig, Token};
use percolator_testkit::{Harness, Needs};
use percolator_webindex::{CrawledPage, warc};
use tokio::io::AsyncWriteExt as _;

/// Chromium, headless, on `url`, with `extra` flags; its stdout.
async fn headless(url: String, extra: Vec<String>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--headless".to_owned(),
        "--no-sandbox".to_owned(), // CI runs as root
        "--disable-gpu".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-quic".to_owned(),
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

/// A server on the in-memory store, and a client with its token.
async fn serve() -> (Server<MemStore>, Remote) {
    let store = Arc::new(MemStore::new());
    let token = Token::generate();
    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), Access::new(token.clone()))
        .with_runtime(test_runtime_config());
    let server = Server::start(test_client(&store), config).await.unwrap();
    let remote = Remote::new(server.url()).with_token(token);
    (server, remote)
}

async fn the_search_page_works_in_a_real_browser() {
    let (server, remote) = serve().await;
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

    // An error answer (too many words) is shown with the server's message.
    let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let dom = headless(
        format!("{}/?q={}", server.url(), words.join("+")),
        vec!["--dump-dom".to_owned()],
    )
    .await;
    assert!(dom.contains("40 distinct words"), "{dom}");

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

/// Another web page the user visits (a second loopback origin) tries every write the server
/// has, as `no-cors` requests a page may send without asking: a WARC whose record URL is a
/// `javascript:` link that would wipe the index when clicked, JSON pages, and the wipe itself.
/// Nothing is written and nothing is deleted.
async fn another_origin_cannot_write() {
    let (server, remote) = serve().await;
    remote
        .ingest_pages(&[PageIn {
            url: "http://docs.example/kept.html".into(),
            html: "<title>Kept</title><p>still here</p>".into(),
        }])
        .await
        .unwrap();
    let mut hostile = Vec::new();
    warc::write_warc(
        &mut hostile,
        &[CrawledPage {
            url: "javascript:fetch('/api/delete-missing',{method:'POST'})//x".into(),
            html: bytes::Bytes::from_static(b"<title>click me</title><p>bait</p>"),
        }],
        false,
    )
    .unwrap();
    let warc_js = serde_json::to_string(&String::from_utf8(hostile).unwrap()).unwrap();
    let target = serde_json::to_string(&server.url()).unwrap();
    let page = format!(
        r#"<!doctype html><html><body><p id="state">running</p><script>
const target = {target};
const writes = [
  fetch(target + "/api/warc", {{method: "POST", mode: "no-cors", body: {warc_js}}}),
  fetch(target + "/api/warc", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body: {warc_js}}}),
  fetch(target + "/api/pages", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}},
    body: JSON.stringify([{{url: "http://evil.example/", html: "<p>planted</p>"}}])}}),
  fetch(target + "/api/delete-missing", {{method: "POST", mode: "no-cors",
    body: JSON.stringify({{prefix: "", keep: []}})}}),
];
Promise.allSettled(writes).then(r => {{
  document.getElementById("state").textContent = "sent " + r.length;
}});
</script></body></html>"#
    );
    // The other origin: a page server on another loopback port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let page = page.clone();
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut request).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    let dom = headless(format!("{origin}/"), vec!["--dump-dom".to_owned()]).await;
    assert!(
        dom.contains("sent 4"),
        "the page did not send its writes:\n{dom}"
    );
    serving.abort();
    let status = remote.status().await.unwrap();
    let metrics = reqwest::get(format!("{}/metrics", server.url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == "percolator_ingest_pages_total{outcome=\"loaded\"} 1"),
        "only the test's own page was written:\n{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l == "percolator_pages_deleted_total 0"),
        "nothing was deleted:\n{metrics}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while remote.status().await.unwrap().pending > 0 {
        assert!(Instant::now() < deadline, "never idle: {status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kept = remote
        .search("still", &percolator_webindex::SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(kept.total, 1, "{kept:?}");
    server.shutdown().await.unwrap();
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Chromium])
        .tokio(
            "the_search_page_works_in_a_real_browser",
            4,
            the_search_page_works_in_a_real_browser,
        )
        .tokio(
            "another_origin_cannot_write",
            4,
            another_origin_cannot_write,
        )
        .run()
}
