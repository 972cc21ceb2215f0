//! [`Remote`]: the API's client, used by the CLI when a server owns the database.

use bytes::Bytes;
use percolator_webindex::{Mode, SearchOptions};
use serde::Serialize;
use serde::de::DeserializeOwned;

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
        /// The server's message.
        message: String,
    },
}

/// A client of one server.
#[derive(Debug, Clone)]
pub struct Remote {
    base: String,
    http: reqwest::Client,
}

impl Remote {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: impl Into<String>) -> Self {
        Self {
            base: base.into().trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
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
            let text = response.text().await.unwrap_or_default();
            let message = serde_json::from_str::<ErrorBody>(&text)
                .map(|b| b.error)
                .unwrap_or(text);
            return Err(RemoteError::Api {
                url,
                status: status.as_u16(),
                message,
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
        let sent = self.http.get(&url).query(query).send().await;
        Self::answer(url, sent).await
    }

    async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, RemoteError> {
        let url = format!("{}{path}", self.base);
        let sent = self.http.post(&url).json(body).send().await;
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
            .http
            .post(&url)
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

    /// `GET /api/stats`.
    pub async fn stats(&self) -> Result<Stats, RemoteError> {
        self.get("/api/stats", &[]).await
    }
}
