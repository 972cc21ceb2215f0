//! The search page in a real browser: headless Chromium (Debian's `chromium`) loads `/?q=…`
//! from a server holding the relevance test set; the page's script submits the query through
//! its form, renders ranked results with marked snippets, and fills the status panel from
//! `/api/status`. The DOM Chromium dumps after running the scripts is checked. Without Chromium
//! the test prints why it did not run, except under `CI`, where that fails (CI installs it).
//!
//! Paging is driven over the DevTools protocol ([`Browser`]): next page, Back, Forward and a
//! reload on page 2 each show the page the address names, and a loaded address with an offset
//! shows that page.
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

/// A headless Chromium driven over the DevTools protocol: navigate, evaluate script in the
/// page (DevTools' evaluation is not bound by the page's Content-Security-Policy), reload.
struct Browser {
    child: std::process::Child,
    _profile: tempfile::TempDir,
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts Chromium on a blank page and attaches to that page.
    async fn launch() -> Self {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Chromium writes the port it picked into the profile.
        let active = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Some(port) = std::fs::read_to_string(&active)
                .ok()
                .and_then(|s| s.lines().next().map(str::to_owned))
                .filter(|p| !p.is_empty())
            {
                break port;
            }
            assert!(Instant::now() < deadline, "chromium never opened DevTools");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let targets: serde_json::Value = reqwest::get(format!("http://127.0.0.1:{port}/json/list"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let page = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .unwrap_or_else(|| panic!("no page target: {targets}"));
        let url = page["webSocketDebuggerUrl"].as_str().unwrap().to_owned();
        let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Self {
            child,
            _profile: profile,
            socket,
            next_id: 0,
        }
    }

    /// Calls a DevTools method and returns its result.
    async fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        use futures::{SinkExt as _, StreamExt as _};
        self.next_id += 1;
        let id = self.next_id;
        let request = serde_json::json!({"id": id, "method": method, "params": params});
        self.socket
            .send(tokio_tungstenite::tungstenite::Message::text(
                request.to_string(),
            ))
            .await
            .unwrap();
        loop {
            let message = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer"))
                .unwrap()
                .unwrap();
            let Ok(text) = message.to_text() else {
                continue;
            };
            let Ok(answer) = serde_json::from_str::<serde_json::Value>(text) else {
                continue;
            };
            if answer["id"] == id {
                assert!(answer["error"].is_null(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// The value of `expression` evaluated in the page.
    async fn eval(&mut self, expression: &str) -> serde_json::Value {
        let result = self
            .call(
                "Runtime.evaluate",
                serde_json::json!({"expression": expression, "returnByValue": true}),
            )
            .await;
        result["result"]["value"].clone()
    }

    /// Evaluates `expression` until it is neither null nor false (for at most 30 s).
    async fn wait_for(&mut self, expression: &str, what: &str) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let value = self.eval(expression).await;
            if !(value.is_null() || value == false) {
                return value;
            }
            if Instant::now() >= deadline {
                let dom = self.eval("document.body.innerText").await;
                panic!("never {what}; the page shows:\n{dom}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The URLs of the hits shown once page `offset` is shown (and the document is not the one
    /// marked before a reload).
    async fn hits_at(&mut self, offset: usize) -> Vec<String> {
        let expression = format!(
            "(() => {{ const h = document.getElementById('hits'); \
             if (window.beforeReload || !h || h.dataset.offset !== '{offset}' || \
                 h.children.length === 0) return null; \
             return [...h.querySelectorAll('li.hit .url')].map(e => e.textContent); }})()"
        );
        let urls = self
            .wait_for(&expression, &format!("showed the page at offset {offset}"))
            .await;
        let location = self.eval("location.search").await;
        assert!(
            location
                .as_str()
                .unwrap()
                .contains(&format!("offset={offset}")),
            "the address does not name offset {offset}: {location}"
        );
        serde_json::from_value(urls).unwrap()
    }
}

/// Paging in the browser: next page, Back, Forward and a reload on page 2 each show the page
/// the address names, with the same hits as the API's page; a loaded address with an offset
/// shows that page; a query with no word says so.
async fn paging_moves_through_history(server: &Server<MemStore>, remote: &Remote) {
    let api_page = |offset: usize| {
        let remote = remote.clone();
        async move {
            let options = percolator_webindex::SearchOptions::default()
                .offset(offset)
                .snippets(false);
            let page = remote.search("unsafe", &options).await.unwrap();
            assert!(page.total > 30, "too few hits to page: {}", page.total);
            page.hits.into_iter().map(|h| h.url).collect::<Vec<_>>()
        }
    };
    let mut browser = Browser::launch().await;
    browser
        .call(
            "Page.navigate",
            serde_json::json!({"url": format!("{}/?q=unsafe", server.url())}),
        )
        .await;
    let first = browser.hits_at(0).await;
    assert_eq!(first, api_page(0).await);

    browser
        .eval("document.querySelector('#pager .next').click()")
        .await;
    let second = browser.hits_at(10).await;
    assert_eq!(second, api_page(10).await);
    assert!(
        first.iter().all(|u| !second.contains(u)),
        "a hit on both pages"
    );

    browser.eval("history.back()").await;
    assert_eq!(browser.hits_at(0).await, first, "Back shows page 1 again");
    browser.eval("history.forward()").await;
    assert_eq!(
        browser.hits_at(10).await,
        second,
        "Forward shows page 2 again"
    );

    browser.eval("window.beforeReload = true").await;
    browser.call("Page.reload", serde_json::json!({})).await;
    assert_eq!(
        browser.hits_at(10).await,
        second,
        "a reload stays on page 2"
    );
    assert_eq!(
        browser.eval("document.getElementById('q').value").await,
        "unsafe"
    );
    browser.eval("history.back()").await;
    assert_eq!(browser.hits_at(0).await, first, "Back after the reload");

    // A shared address on page 3.
    browser
        .call(
            "Page.navigate",
            serde_json::json!({"url": format!("{}/?q=unsafe&any=0&offset=20", server.url())}),
        )
        .await;
    assert_eq!(browser.hits_at(20).await, api_page(20).await);

    // No word to search for: the server's message.
    browser
        .call(
            "Page.navigate",
            serde_json::json!({"url": format!("{}/?q=%21%21%20%3B-%29", server.url())}),
        )
        .await;
    let error = browser
        .wait_for(
            "(() => { const e = document.querySelector('#summary .error'); \
             return e ? e.textContent : null; })()",
            "showed an error",
        )
        .await;
    assert!(
        error.as_str().unwrap().contains("no word to search for"),
        "{error}"
    );
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

    paging_moves_through_history(&server, &remote).await;

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
