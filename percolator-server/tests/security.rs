//! The server as a hostile client meets it: requests without the token, from another origin, to
//! a rebound name, with the content types a web page can send without asking, with URLs that
//! would run script, too large or too many at once. Each is refused with the one JSON error
//! shape, and nothing is written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_backend_mem::MemStore;
use percolator_observers::conformance::{test_client, test_runtime_config};
use percolator_server::wire::PageIn;
use percolator_server::{Access, ReadAccess, Remote, RemoteError, Server, ServerConfig, Token};
use percolator_webindex::{CrawledPage, SearchOptions, warc};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

struct Served {
    server: Server<MemStore>,
    token: Token,
    http: reqwest::Client,
}

impl Served {
    async fn start(access: impl FnOnce(Token) -> Access) -> Self {
        let store = Arc::new(MemStore::new());
        let token = Token::generate();
        let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), access(token.clone()))
            .with_runtime(test_runtime_config());
        let server = Server::start(test_client(&store), config).await.unwrap();
        Self {
            server,
            token,
            http: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url())
    }

    fn remote(&self) -> Remote {
        Remote::new(self.server.url()).with_token(self.token.clone())
    }

    /// Pages the API has written (its ingest counter, from `/metrics`).
    async fn pages_loaded(&self) -> u64 {
        let metrics = self.http.get(self.url("/metrics")).send().await.unwrap();
        let text = metrics.text().await.unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("percolator_ingest_pages_total{outcome=\"loaded\"} "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no loaded-pages counter in\n{text}"))
    }
}

/// The body of an error answer: its kind and message.
async fn error_of(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let json: serde_json::Value = response.json().await.expect("an error answers JSON");
    (
        status,
        json["error"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        json["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn warc_of(url: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    warc::write_warc(
        &mut bytes,
        &[CrawledPage {
            url: url.into(),
            html: Bytes::from_static(b"<title>hostile</title><p>click me</p>"),
        }],
        false,
    )
    .unwrap();
    bytes
}

/// Finding 1: nothing writes without the token; a wrong token is no better.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_the_token() {
    let s = Served::start(Access::new).await;
    let all = serde_json::json!({"prefix": "", "keep": []});
    for (path, body) in [
        ("/api/delete-missing", all.to_string()),
        (
            "/api/pages",
            r#"[{"url":"http://a.example/","html":"x"}]"#.to_owned(),
        ),
        (
            "/api/delete",
            r#"{"urls":["http://a.example/"]}"#.to_owned(),
        ),
    ] {
        for auth in [None, Some("Bearer wrong-token-wrong-token")] {
            let mut request = s
                .http
                .post(s.url(path))
                .header("content-type", "application/json")
                .body(body.clone());
            if let Some(auth) = auth {
                request = request.header("authorization", auth);
            }
            let (status, kind, message) = error_of(request.send().await.unwrap()).await;
            assert_eq!(
                (status, kind.as_str()),
                (401, "unauthorized"),
                "{path}: {message}"
            );
        }
    }
    let warc = s
        .http
        .post(s.url("/api/warc"))
        .header("content-type", "application/warc")
        .body(warc_of("http://a.example/"))
        .send()
        .await
        .unwrap();
    assert_eq!(warc.status(), 401);
    let check = s.http.post(s.url("/api/check")).send().await.unwrap();
    assert_eq!(
        check.status(),
        401,
        "the full check is expensive: it needs the token"
    );
    let get_check = s.http.get(s.url("/api/check")).send().await.unwrap();
    let (status, kind, _) = error_of(get_check).await;
    assert_eq!((status, kind.as_str()), (405, "method_not_allowed"));
    // The kept sizes are a read: a few cells.
    let sizes = s.http.get(s.url("/api/stats")).send().await.unwrap();
    assert_eq!(sizes.status(), 200);
    assert_eq!(s.pages_loaded().await, 0, "nothing was written");
    // With the token: written, and the check answers with its age.
    let remote = s.remote();
    let report = remote
        .ingest_pages(&[PageIn {
            url: "http://a.example/".into(),
            html: "<title>A</title><p>alpha</p>".into(),
        }])
        .await
        .unwrap();
    assert_eq!(report.loaded, 1);
    assert!(remote.check().await.unwrap().age_secs >= 0.0);
}

/// Finding 2: the simple requests any web page can send (no preflight) write nothing, with or
/// without credentials a browser might attach; another origin is refused outright.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_write_nothing() {
    let s = Served::start(Access::new).await;
    let bearer = format!("Bearer {}", s.token.secret());
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        for path in ["/api/warc", "/api/pages", "/api/delete-missing"] {
            let response = s
                .http
                .post(s.url(path))
                .header("content-type", content_type)
                .header("authorization", &bearer)
                .body(warc_of("http://a.example/"))
                .send()
                .await
                .unwrap();
            let (status, kind, _) = error_of(response).await;
            assert_eq!(
                (status, kind.as_str()),
                (415, "unsupported_media_type"),
                "{path}"
            );
        }
    }
    let from_elsewhere = s
        .http
        .post(s.url("/api/warc"))
        .header("content-type", "application/warc")
        .header("authorization", &bearer)
        .header("origin", "http://attacker.example")
        .body(warc_of("http://a.example/"))
        .send()
        .await
        .unwrap();
    let (status, kind, _) = error_of(from_elsewhere).await;
    assert_eq!((status, kind.as_str()), (403, "cross_origin"));
    let own = s
        .http
        .get(s.url("/api/search?q=xy"))
        .header("origin", s.server.url())
        .send()
        .await
        .unwrap();
    assert_eq!(
        own.status(),
        200,
        "the search page's own requests are served"
    );
    assert_eq!(s.pages_loaded().await, 0);
}

/// Finding 3: URLs that would run script or name no web page are refused on every ingest path
/// of the API (pages and WARC), counted as skipped, and never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_urls_are_refused_at_ingest() {
    let s = Served::start(Access::new).await;
    let remote = s.remote();
    let hostile = [
        "javascript:fetch('/api/delete-missing',{method:'POST'})//x",
        "JavaScript:alert(document.domain)",
        "data:text/html,<script>alert(1)</script>",
        "../../etc/passwd",
        "file:///etc/passwd",
        "http://a.example/\nSet-Cookie: x",
        "http://a.example/\u{0}",
    ];
    let pages: Vec<PageIn> = hostile
        .iter()
        .map(|url| PageIn {
            url: (*url).to_owned(),
            html: "<title>hostile</title><p>click me</p>".into(),
        })
        .collect();
    let report = remote.ingest_pages(&pages).await.unwrap();
    assert_eq!((report.loaded, report.skipped), (0, hostile.len()));
    for url in &hostile[..4] {
        let report = remote.ingest_warc(warc_of(url).into()).await.unwrap();
        assert_eq!(report.loaded, 0, "{url}");
    }
    assert_eq!(s.pages_loaded().await, 0);
    let results = remote
        .search("click", &SearchOptions::default())
        .await
        .unwrap();
    assert!(results.hits.is_empty(), "{results:?}");
}

/// Finding 4: a request addressed to another name (DNS rebinding: attacker.example resolving
/// to 127.0.0.1) is refused, reads included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_for_other_hosts_are_refused() {
    let s = Served::start(|t| Access::new(t).with_allowed_host("index.example")).await;
    for path in ["/", "/api/search?q=xy", "/api/status", "/metrics"] {
        let response = s
            .http
            .get(s.url(path))
            .header("host", "attacker.example")
            .send()
            .await
            .unwrap();
        let (status, kind, message) = error_of(response).await;
        assert_eq!((status, kind.as_str()), (421, "misdirected_host"), "{path}");
        assert!(message.contains("--allowed-host"), "{message}");
    }
    let port = s.server.local_addr().port();
    let allowed = s
        .http
        .get(s.url("/api/status"))
        .header("host", format!("index.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
}

/// Reads can be closed too; the page and the API then need the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_can_need_the_token() {
    let s = Served::start(|t| Access::new(t).with_reads(ReadAccess::Token)).await;
    for path in ["/", "/api/search?q=xy", "/api/status", "/metrics"] {
        let response = s.http.get(s.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 401, "{path}");
    }
    assert!(s.remote().status().await.is_ok());
    let anonymous = Remote::new(s.server.url());
    assert!(matches!(
        anonymous.status().await,
        Err(RemoteError::Api { status: 401, .. })
    ));
}

/// Finding 6: a body over the limit is refused by its `Content-Length` before it is read; the
/// full check is a POST; a query's work is bounded; every error has the one shape; the page
/// allows no inline script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costly_requests_are_bounded() {
    let s = Served::start(Access::new).await;
    // Headers promising 600 MB, and no body: the answer comes at once.
    let mut stream = tokio::net::TcpStream::connect(s.server.local_addr())
        .await
        .unwrap();
    let head = format!(
        "POST /api/warc HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: \
         application/warc\r\nContent-Length: 600000000\r\n\r\n",
        s.server.local_addr(),
        s.token.secret()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let began = Instant::now();
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut answer))
        .await
        .expect("answered without the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_too_large"), "{answer}");
    assert!(began.elapsed() < Duration::from_secs(30));

    // Too long a URI, too many words, an unknown path, a bad JSON body: the one shape.
    let long = s.url(&format!("/api/search?q={}", "x".repeat(10_000)));
    let (status, kind, _) = error_of(s.http.get(long).send().await.unwrap()).await;
    assert_eq!((status, kind.as_str()), (414, "uri_too_long"));
    let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let many = s.url(&format!("/api/search?q={}", words.join("+")));
    let (status, _, message) = error_of(s.http.get(many).send().await.unwrap()).await;
    assert_eq!(status, 400);
    assert!(message.contains("40 distinct words"), "{message}");
    let (status, kind, _) = error_of(s.http.get(s.url("/nowhere")).send().await.unwrap()).await;
    assert_eq!((status, kind.as_str()), (404, "not_found"));
    let bad_json = s
        .http
        .post(s.url("/api/pages"))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {}", s.token.secret()))
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (status, _, message) = error_of(bad_json).await;
    assert!(status == 400 || status == 422, "{status}");
    assert!(!message.is_empty());

    // The search page: its script is a file of its own, and inline script is forbidden.
    let page = s.http.get(s.url("/")).send().await.unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(
        !html.contains("<script>") && html.contains("src=\"/app.js\""),
        "{html}"
    );
    let js = s.http.get(s.url("/app.js")).send().await.unwrap();
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
}

/// Uploads are capped: past the cap, 503 with `Retry-After`, which the client reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_uploads_are_capped() {
    let s = Served::start(Access::new).await;
    let bearer = format!("Bearer {}", s.token.secret());
    // Two uploads that hold their slot: their bodies never end while the third is sent.
    let hold = || {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        let _ = tx.try_send(Ok(Bytes::from_static(b"WARC/1.0\r\n")));
        let body = reqwest::Body::wrap_stream(tokio_stream_of(rx));
        let request = s
            .http
            .post(s.url("/api/warc"))
            .header("content-type", "application/warc")
            .header("authorization", &bearer)
            .body(body);
        (tokio::spawn(request.send()), tx)
    };
    let mut held: Vec<_> = (0..percolator_server::api::MAX_CONCURRENT_UPLOADS)
        .map(|_| hold())
        .collect();
    // The third is refused once the two hold their slots.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        // An upload that arrived while the previous third held a slot was refused itself (a
        // busy machine makes that likely): send it again, so that two hold their slots.
        for slot in &mut held {
            if slot.0.is_finished() {
                *slot = hold();
            }
        }
        let third = s
            .remote()
            .ingest_pages(&[PageIn {
                url: "http://a.example/".into(),
                html: "<p>x</p>".into(),
            }])
            .await;
        match third {
            Err(RemoteError::Api {
                status: 503,
                kind,
                retry_after_secs,
                ..
            }) => break (kind, retry_after_secs),
            // The held uploads have not reached the server yet.
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(refused, ("busy".to_owned(), Some(1)));
    for (upload, sender) in held {
        drop(sender);
        let _ = upload.await;
    }
}

/// A stream of a channel's items, for a request body sent a piece at a time.
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
