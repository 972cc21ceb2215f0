//! [`Remote`]: the API's client, used by the CLI when a server owns the database.

use bytes::Bytes;
use percolator_webindex::{Mode, SearchOptions};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::Token;
use crate::wire::*;

/// Why a request to the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The server could not be reached or the exchange broke off.
    #[error("cannot reach the server at {url}: {source}")]
    Unreachable {
        /// The request's URL.
        url: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The server answered with an error.
    #[error("the server at {url} answered {status}: {message}")]
    Api {
        /// The request's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The error's kind (`unauthorized`, `busy`, …; empty if the answer was not the API's).
        kind: String,
        /// The server's message.
        message: String,
        /// Seconds the server asked to wait before a retry (`Retry-After`), if it did.
        retry_after_secs: Option<u64>,
    },
}

/// A client of one server.
#[derive(Debug, Clone)]
pub struct Remote {
    base: String,
    http: reqwest::Client,
    token: Option<Token>,
}

impl Remote {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:8080`), without a token: it
    /// can read where reads are open, but not write.
    pub fn new(base: impl Into<String>) -> Self {
        Self {
            base: base.into().trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            token: None,
        }
    }

    /// Sending `token` with every request.
    pub fn with_token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// A request with the token, if there is one.
    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, url);
        match &self.token {
            Some(token) => request.bearer_auth(token.secret()),
            None => request,
        }
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    async fn answer<T: DeserializeOwned>(
        url: String,
        sent: Result<reqwest::Response, reqwest::Error>,
    ) -> Result<T, RemoteError> {
        let response = sent.map_err(|source| RemoteError::Unreachable {
            url: url.clone(),
            source,
        })?;
        let status = response.status();
        if !status.is_success() {
            let retry_after_secs = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok());
            let text = response.text().await.unwrap_or_default();
            let (kind, message) = match serde_json::from_str::<ErrorBody>(&text) {
                Ok(body) => (body.error.kind, body.error.message),
                Err(_) => (String::new(), text),
            };
            return Err(RemoteError::Api {
                url,
                status: status.as_u16(),
                kind,
                message,
                retry_after_secs,
            });
        }
        response
            .json()
            .await
            .map_err(|source| RemoteError::Unreachable { url, source })
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, RemoteError> {
        let url = format!("{}{path}", self.base);
        let sent = self
            .request(reqwest::Method::GET, &url)
            .query(query)
            .send()
            .await;
        Self::answer(url, sent).await
    }

    async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, RemoteError> {
        let url = format!("{}{path}", self.base);
        let sent = self
            .request(reqwest::Method::POST, &url)
            .json(body)
            .send()
            .await;
        Self::answer(url, sent).await
    }

    /// `GET /api/search`.
    pub async fn search(
        &self,
        query: &str,
        options: &SearchOptions,
    ) -> Result<SearchResults, RemoteError> {
        let mode = match options.mode {
            Mode::Any => "any",
            _ => "all",
        };
        let params = [
            ("q", query.to_owned()),
            ("mode", mode.to_owned()),
            ("limit", options.limit.to_string()),
            ("offset", options.offset.to_string()),
            ("snippets", options.snippets.to_string()),
        ];
        self.get("/api/search", &params).await
    }

    /// `POST /api/pages`.
    pub async fn ingest_pages(&self, pages: &[PageIn]) -> Result<IngestReport, RemoteError> {
        self.post("/api/pages", pages).await
    }

    /// `POST /api/warc`: a WARC file (gzip or plain), bytes kept as they are.
    pub async fn ingest_warc(&self, warc: Bytes) -> Result<IngestReport, RemoteError> {
        let url = format!("{}/api/warc", self.base);
        let sent = self
            .request(reqwest::Method::POST, &url)
            .header("content-type", "application/warc")
            .body(warc)
            .send()
            .await;
        Self::answer(url, sent).await
    }

    /// `POST /api/delete`.
    pub async fn delete(&self, urls: Vec<String>) -> Result<DeleteReport, RemoteError> {
        self.post("/api/delete", &DeleteRequest { urls }).await
    }

    /// `POST /api/delete-missing`.
    pub async fn delete_missing(
        &self,
        prefix: String,
        keep: Vec<String>,
    ) -> Result<DeleteReport, RemoteError> {
        self.post(
            "/api/delete-missing",
            &DeleteMissingRequest { prefix, keep },
        )
        .await
    }

    /// `GET /api/status`.
    pub async fn status(&self) -> Result<Status, RemoteError> {
        self.get("/api/status", &[]).await
    }

    /// `GET /api/stats`: the sizes the pipeline keeps.
    pub async fn stats(&self) -> Result<Sizes, RemoteError> {
        self.get("/api/stats", &[]).await
    }

    /// `POST /api/check`: the full check (needs the token).
    pub async fn check(&self) -> Result<Checked, RemoteError> {
        let url = format!("{}/api/check", self.base);
        let sent = self.request(reqwest::Method::POST, &url).send().await;
        Self::answer(url, sent).await
    }
}
