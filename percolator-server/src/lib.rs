//! # percolator-server
//!
//! `percolator serve`: one long-running process owns the web index's database and runs its
//! observers, and other processes use it over HTTP. That is how an embedded store (sled and
//! fjall admit one process per database) keeps receiving pages while the pipeline works on
//! them: new pages go in through the API and come out indexed, without stopping anything.
//!
//! - [`Server`] starts the observer runtime and the HTTP API ([`api`](mod@api)): ingest
//!   (`POST /api/pages`, `/api/warc`, `/api/delete`, `/api/delete-missing`), `GET /api/search`,
//!   `/api/status`, `/api/stats` (the kept sizes), `POST /api/check` (the full check, queued),
//!   `/metrics` (Prometheus text),
//!   and the search page at `/`.
//! - Every request passes the [`guard`](mod@guard) first: the `Host` and `Origin` checks, the
//!   bearer token ([`auth`]) that writes and expensive requests need, each write's own content
//!   type and body limit; every error answers one JSON shape ([`ApiError`]).
//! - [`Remote`] is the client the CLI uses when a server owns the database ([`discovery`]: the
//!   server leaves its URL in the database directory) or when given `--server URL`.
//! - [`wire`] holds the JSON bodies both sides share.

pub mod api;
pub mod auth;
pub mod discovery;
mod error;
pub mod guard;
mod metrics;
pub mod remote;
mod state;
pub mod wire;

use std::net::SocketAddr;
use std::sync::Arc;

use percolator_core::{ClientBuilder, RowStore};
use percolator_observers::{Runtime, RuntimeConfig, RuntimeStats};
use percolator_webindex as webindex;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use auth::{Access, ReadAccess, Token};
pub use error::ApiError;
pub use remote::{Remote, RemoteError};

/// How to serve.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Address to listen on (port 0: any free port; see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// The observer runtime's settings.
    pub runtime: RuntimeConfig,
    /// Pages an ingest loads at once.
    pub load_concurrency: usize,
    /// The most HTML kept of a page (16 MiB by default); longer pages are cut, and counted as
    /// `truncated` in the ingest reports. See `percolator_webindex::LoadConfig`.
    pub max_page_bytes: usize,
    /// Who may do what: the token and the read access.
    pub access: Access,
}

impl ServerConfig {
    /// Listening on `listen` with `access`, and the default runtime settings.
    pub fn new(listen: SocketAddr, access: Access) -> Self {
        Self {
            listen,
            runtime: RuntimeConfig::default(),
            load_concurrency: 8,
            max_page_bytes: webindex::raw::DEFAULT_MAX_PAGE_BYTES,
            access,
        }
    }

    /// Keeping at most `max_page_bytes` of a page's HTML.
    #[must_use]
    pub fn with_max_page_bytes(mut self, max_page_bytes: usize) -> Self {
        self.max_page_bytes = max_page_bytes;
        self
    }

    /// With these runtime settings.
    pub fn with_runtime(mut self, runtime: RuntimeConfig) -> Self {
        self.runtime = runtime;
        self
    }
}

/// Why the server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The address could not be bound (in use, not local, no permission).
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP server failed.
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
    /// The store or the runtime failed.
    #[error(transparent)]
    Store(#[from] percolator_core::Error),
    /// The runtime was still shared 10 s after the server stopped (a bug).
    #[error("the observer runtime is still in use")]
    RuntimeInUse,
}

/// A running server: the observers and the HTTP API.
pub struct Server<S: RowStore> {
    shared: Arc<state::Shared<S>>,
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    http: JoinHandle<std::io::Result<()>>,
    background: Vec<JoinHandle<()>>,
}

impl<S: RowStore> Server<S> {
    /// Starts the web index's observers on `client` and the HTTP API on `config.listen`.
    pub async fn start(
        client: ClientBuilder<S>,
        config: ServerConfig,
    ) -> Result<Self, ServerError> {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Listen {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(ServerError::Http)?;
        let (probe, clustered) = tokio::sync::mpsc::unbounded_channel();
        let runtime = Runtime::start(
            client.observe_all(&webindex::observed_columns()),
            webindex::observers(Some(probe)),
            config.runtime,
        )
        .await?;
        let load = webindex::LoadConfig::new(config.load_concurrency.max(1))
            .with_max_page_bytes(config.max_page_bytes);
        let shared = Arc::new(state::Shared::new(runtime, load));
        let background = vec![
            tokio::spawn(state::sample(Arc::clone(&shared))),
            tokio::spawn(state::follow_clustering(Arc::clone(&shared), clustered)),
        ];
        let (stop, stopped) = oneshot::channel::<()>();
        let guard = Arc::new(guard::Guard::new(config.access, addr));
        let app = api::router(Arc::clone(&shared), guard);
        let http = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(Self {
            shared,
            addr,
            stop,
            http,
            background,
        })
    }

    /// The address the API listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API's base URL, e.g. `http://127.0.0.1:8080`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The observer runtime's counters.
    pub fn stats(&self) -> RuntimeStats {
        self.shared.runtime.stats()
    }

    /// Stops accepting requests, lets the ones in flight finish, then stops the observers
    /// (their in-flight runs finish or leave notifications for the next start).
    pub async fn shutdown(self) -> Result<RuntimeStats, ServerError> {
        let _ = self.stop.send(());
        let served = self
            .http
            .await
            .map_err(|e| ServerError::Http(std::io::Error::other(e)))?;
        for task in &self.background {
            task.abort();
        }
        for task in self.background {
            let _ = task.await;
        }
        served.map_err(ServerError::Http)?;
        let shared = sole_owner(self.shared).await?;
        let runtime = sole_owner(shared.runtime).await?;
        Ok(runtime.shutdown().await?)
    }
}

/// How long [`Server::shutdown`] waits for the last connection tasks to let go of the state.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Takes `shared` once nothing else holds it: a connection's task may drop its clone of the
/// router a moment after the server stopped accepting and answering.
async fn sole_owner<T>(mut shared: Arc<T>) -> Result<T, ServerError> {
    let deadline = tokio::time::Instant::now() + RELEASE_WAIT;
    loop {
        match Arc::try_unwrap(shared) {
            Ok(owned) => return Ok(owned),
            Err(still) if tokio::time::Instant::now() < deadline => {
                shared = still;
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Err(_) => return Err(ServerError::RuntimeInUse),
        }
    }
}
