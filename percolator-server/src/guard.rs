//! The checks every request passes before a handler sees it, and what every response gets after.
//!
//! A server on loopback is reachable by more than its owner: every web page the owner visits
//! can send it simple requests, and DNS rebinding can point any name at it. So, in order:
//!
//! 1. a URI longer than [`MAX_URI_BYTES`] is refused (414);
//! 2. the `Host` header must name this server: its listen address, `localhost` or a loopback
//!    address when it listens there, or a name given with `--allowed-host` (421 otherwise: a
//!    rebound name is refused);
//! 3. an `Origin` header, when present, must be this server's own (403 otherwise: another web
//!    page's request);
//! 4. writes and expensive requests need the bearer token, reads too unless they are open
//!    ([`ReadAccess`]); 401 otherwise;
//! 5. a write must carry its own content type (`application/json`; a WARC upload
//!    `application/warc` or `application/octet-stream`), so that no simple cross-site request
//!    (`text/plain`, a form) can write (415 otherwise);
//! 6. a body whose `Content-Length` is over the route's limit is refused before it is read
//!    (413).
//!
//! Every response gets `X-Content-Type-Options: nosniff`, a content security policy that
//! allows the search page's own script and style only, and no framing; every error response is
//! made the one JSON shape ([`ApiError`]) and logged on one line.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::{Access, ReadAccess};
use crate::error::{ApiError, ErrorKind};

/// The longest request URI (path and query) answered.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// The largest WARC upload.
pub const MAX_WARC_BYTES: u64 = 512 * 1024 * 1024;
/// The largest `POST /api/pages` body.
pub const MAX_PAGES_BYTES: u64 = 64 * 1024 * 1024;
/// The largest body of the other requests.
pub const MAX_SMALL_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// The content security policy of every response: the search page's own script, style and API,
/// nothing inline, nothing from elsewhere, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// What a route is, for the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Search, status, metrics, the search page.
    Read,
    /// Changes the index.
    Write(Takes),
    /// Costs far more than a read (the full check).
    Expensive,
    /// Anything else (the router answers 404 or 405).
    Unknown,
}

/// The body a write takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    /// JSON of at most this many bytes.
    Json(u64),
    /// A WARC file (at most [`MAX_WARC_BYTES`]).
    Warc,
}

fn classify(method: &Method, path: &str) -> Class {
    match (method, path) {
        (&Method::GET | &Method::HEAD, "/" | "/app.js" | "/app.css") => Class::Read,
        (
            &Method::GET | &Method::HEAD,
            "/api/search" | "/api/status" | "/api/stats" | "/metrics",
        ) => Class::Read,
        (&Method::POST, "/api/pages") => Class::Write(Takes::Json(MAX_PAGES_BYTES)),
        (&Method::POST, "/api/warc") => Class::Write(Takes::Warc),
        (&Method::POST, "/api/delete" | "/api/delete-missing") => {
            Class::Write(Takes::Json(MAX_SMALL_BODY_BYTES))
        }
        (&Method::POST, "/api/check") => Class::Expensive,
        _ => Class::Unknown,
    }
}

/// The checks' configuration: who may do what, and which names are this server's.
#[derive(Debug)]
pub(crate) struct Guard {
    access: Access,
    /// `host:port` (lowercase; IPv6 in brackets) a request may be addressed to.
    hosts: Vec<String>,
}

impl Guard {
    /// The checks for a server listening on `listen` (the bound address: its real port).
    pub(crate) fn new(access: Access, listen: SocketAddr) -> Self {
        let port = listen.port();
        let mut hosts = vec![host_port(&listen.ip().to_string(), port, listen.ip())];
        if listen.ip().is_loopback() || listen.ip().is_unspecified() {
            for name in ["localhost", "127.0.0.1", "::1"] {
                let ip = name.parse().unwrap_or(listen.ip());
                hosts.push(host_port(name, port, ip));
            }
        }
        for allowed in &access.allowed_hosts {
            let allowed = allowed.trim().to_ascii_lowercase();
            if split_port(&allowed).1.is_some() {
                hosts.push(allowed);
            } else {
                let bare = allowed.trim_start_matches('[').trim_end_matches(']');
                let ip = bare.parse().unwrap_or(listen.ip());
                hosts.push(host_port(bare, port, ip));
            }
        }
        Self { access, hosts }
    }

    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    /// Whether `origin` (`scheme://host[:port]`) is this server's own.
    fn allows_origin(&self, origin: &str) -> bool {
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return false,
        };
        let rest = rest.trim_end_matches('/');
        match split_port(rest) {
            (_, Some(_)) => self.allows_host(rest),
            (name, None) => self.allows_host(&format!("{name}:{default_port}")),
        }
    }

    /// Whether the headers carry this server's token.
    fn authorized(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|presented| self.access.token.matches(presented.trim().as_bytes()))
    }
}

/// `name:port`, IPv6 addresses in brackets.
fn host_port(name: &str, port: u16, ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(_) if name.contains(':') => format!("[{name}]:{port}"),
        _ => format!("{}:{port}", name.to_ascii_lowercase()),
    }
}

/// `("name", Some(port))` of `name:port` or `[v6]:port`; `(host, None)` without a port.
fn split_port(host: &str) -> (&str, Option<&str>) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, tail)) => (name, tail.strip_prefix(':')),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            (name, Some(port))
        }
        _ => (host, None),
    }
}

/// Whether the request's content type is `wanted` (parameters such as `charset` aside).
fn content_type_is(headers: &HeaderMap, wanted: &[&str]) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|v| wanted.contains(&v.as_str()))
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// The checks before a request reaches its handler (the module docs, 1–6).
fn check(guard: &Guard, request: &Request) -> Result<(), ApiError> {
    let uri = request.uri();
    let uri_len = uri.path_and_query().map_or(0, |p| p.as_str().len());
    if uri_len > MAX_URI_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the request URI has {uri_len} bytes; at most {MAX_URI_BYTES} are read"),
        ));
    }
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !guard.allows_host(host) {
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_host",
            format!(
                "this server does not answer for Host {}: start it with --allowed-host NAME to \
                 serve under another name",
                escape(host, 100)
            ),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !guard.allows_origin(origin) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "cross_origin",
                format!(
                    "requests from another origin ({}) are refused",
                    escape(origin, 100)
                ),
            ));
        }
    }
    let class = classify(request.method(), uri.path());
    let needs_token = match class {
        Class::Read => guard.access.reads == ReadAccess::Token,
        Class::Write(_) | Class::Expensive => true,
        Class::Unknown => false,
    };
    if needs_token && !guard.authorized(headers) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this request needs the server's token: `Authorization: Bearer <token>` (the token \
             is in the database directory's percolator-serve.token; the CLI sends it itself)",
        ));
    }
    let limit = match class {
        Class::Write(Takes::Json(limit)) => {
            if !content_type_is(headers, &["application/json"]) {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    "this request takes Content-Type: application/json",
                ));
            }
            limit
        }
        Class::Write(Takes::Warc) => {
            if !content_type_is(headers, &["application/warc", "application/octet-stream"]) {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    "a WARC upload takes Content-Type: application/warc (or \
                     application/octet-stream)",
                ));
            }
            MAX_WARC_BYTES
        }
        Class::Expensive | Class::Read | Class::Unknown => MAX_SMALL_BODY_BYTES,
    };
    if let Some(length) = content_length(headers)
        && length > limit
    {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body has {length} bytes; this request takes at most {limit}"),
        ));
    }
    Ok(())
}

/// The middleware: [`check`], the handler, then the response's headers, its error shape and
/// the log line of a failure.
pub(crate) async fn guard(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let began = Instant::now();
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let response = match check(&guard, &request) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    };
    let mut response = as_json_error(response).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    let status = response.status();
    if status.is_client_error() || status.is_server_error() {
        let kind = response
            .extensions()
            .get::<ErrorKind>()
            .map_or_else(|| ApiError::kind_of(status), |k| k.0);
        tracing::warn!(
            method = %method,
            path = %escape(&path, 200),
            status = status.as_u16(),
            latency_ms = began.elapsed().as_millis() as u64,
            kind,
            "request failed"
        );
    }
    response
}

/// An error response in the one JSON shape: those the handlers made already are; the others
/// (axum's rejections, 404, 405, a body over the limit) are rewritten with their text as the
/// message.
async fn as_json_error(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<ErrorKind>().is_some()
    {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut rewritten = ApiError::new(status, ApiError::kind_of(status), message).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}

/// Text from a request (a header, a path) made safe for a message or a log line: control and
/// other non-printing characters escaped, cut to `max` characters.
pub(crate) fn escape(text: &str, max: usize) -> String {
    let escaped: String = text.chars().flat_map(char::escape_debug).collect();
    if escaped.chars().count() > max {
        let cut: String = escaped.chars().take(max).collect();
        format!("{cut}…")
    } else {
        escaped
    }
}

/// An empty body, for tests of the checks.
#[cfg(test)]
fn request(method: Method, uri: &str, headers: &[(&str, &str)]) -> Request {
    let mut builder = axum::http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder
        .body(axum::body::Body::empty())
        .unwrap_or_else(|e| panic!("test request: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use crate::auth::Token;

    fn guard(reads: ReadAccess) -> (Guard, String) {
        let token = Token::generate();
        let secret = token.secret().to_owned();
        let access = Access::new(token)
            .with_reads(reads)
            .with_allowed_host("search.example");
        (
            Guard::new(access, "127.0.0.1:8080".parse().unwrap()),
            secret,
        )
    }

    fn status(guard: &Guard, method: Method, uri: &str, headers: &[(&str, &str)]) -> u16 {
        match check(guard, &request(method, uri, headers)) {
            Ok(()) => 200,
            Err(e) => e.status.as_u16(),
        }
    }

    #[test]
    fn only_this_servers_names_are_answered() {
        let (g, _) = guard(ReadAccess::Open);
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
        ] {
            assert_eq!(
                status(&g, Method::GET, "/", &[("host", host)]),
                200,
                "{host}"
            );
        }
        assert_eq!(
            status(&g, Method::GET, "/", &[("host", "search.example:8080")]),
            200
        );
        for host in [
            "attacker.example",
            "attacker.example:8080",
            "localhost:9999",
            "",
        ] {
            assert_eq!(
                status(&g, Method::GET, "/", &[("host", host)]),
                421,
                "{host}"
            );
        }
    }

    #[test]
    fn other_origins_and_missing_tokens_are_refused() {
        let (g, secret) = guard(ReadAccess::Open);
        let host = ("host", "127.0.0.1:8080");
        let bearer = format!("Bearer {secret}");
        let json = ("content-type", "application/json");
        assert_eq!(
            status(
                &g,
                Method::GET,
                "/api/search?q=x",
                &[host, ("origin", "http://127.0.0.1:8080")]
            ),
            200
        );
        assert_eq!(
            status(
                &g,
                Method::GET,
                "/api/search?q=x",
                &[host, ("origin", "http://evil.example")]
            ),
            403
        );
        assert_eq!(status(&g, Method::POST, "/api/pages", &[host, json]), 401);
        assert_eq!(
            status(
                &g,
                Method::POST,
                "/api/pages",
                &[host, json, ("authorization", "Bearer nope")]
            ),
            401
        );
        let auth = ("authorization", bearer.as_str());
        assert_eq!(
            status(&g, Method::POST, "/api/pages", &[host, json, auth]),
            200
        );
        assert_eq!(status(&g, Method::POST, "/api/check", &[host]), 401);
        assert_eq!(status(&g, Method::POST, "/api/check", &[host, auth]), 200);
        // The simple requests another page can send write nothing.
        for simple in [
            "text/plain",
            "multipart/form-data; boundary=x",
            "application/x-www-form-urlencoded",
        ] {
            let ct = ("content-type", simple);
            assert_eq!(
                status(&g, Method::POST, "/api/warc", &[host, ct, auth]),
                415,
                "{simple}"
            );
            assert_eq!(
                status(&g, Method::POST, "/api/pages", &[host, ct, auth]),
                415,
                "{simple}"
            );
        }
        let warc = ("content-type", "application/warc");
        assert_eq!(
            status(&g, Method::POST, "/api/warc", &[host, warc, auth]),
            200
        );
        let big = ("content-length", "999999999999");
        assert_eq!(
            status(&g, Method::POST, "/api/warc", &[host, warc, auth, big]),
            413
        );
        let long = format!("/api/search?q={}", "x".repeat(MAX_URI_BYTES));
        assert_eq!(status(&g, Method::GET, &long, &[host]), 414);

        let (closed, _) = guard(ReadAccess::Token);
        assert_eq!(
            status(&closed, Method::GET, "/api/search?q=x", &[host]),
            401
        );
    }

    #[test]
    fn hosts_and_ports_split() {
        assert_eq!(split_port("a.example:80"), ("a.example", Some("80")));
        assert_eq!(split_port("[::1]:80"), ("::1", Some("80")));
        assert_eq!(split_port("[::1]"), ("::1", None));
        assert_eq!(split_port("a.example"), ("a.example", None));
        assert_eq!(escape("a\u{1b}[2J\n", 100), "a\\u{1b}[2J\\n");
    }
}
