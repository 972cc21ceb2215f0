//! How to reach an etcd cluster, and the cluster's limits this backend must respect.

use std::path::PathBuf;
use std::time::Duration;

/// etcd's default `--max-txn-ops`.
pub const DEFAULT_MAX_TXN_OPS: usize = 128;
/// etcd's default `--max-request-bytes` (1.5 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1536 * 1024;

/// Connection settings and cluster limits. Build with [`EtcdConfig::new`] and the `with_*`
/// setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct EtcdConfig {
    /// Client URLs of the members (`http://127.0.0.1:2379`, or `host:port`, which becomes
    /// `http://` or, with TLS, `https://`).
    pub endpoints: Vec<String>,
    /// TLS (server CA, client certificate); `None` for plain HTTP/2.
    pub tls: Option<EtcdTls>,
    /// User name and password, for clusters with authentication enabled.
    pub user: Option<(String, String)>,
    /// Longest wait for a TCP/TLS connection to a member.
    pub connect_timeout: Duration,
    /// Longest wait for one request's answer; past it, a write's outcome is unknown.
    pub request_timeout: Duration,
    /// Attempts of one call across endpoints (leader changes, members down) before giving up.
    pub attempts: usize,
    /// The cluster's `--max-txn-ops`: most compares, and most operations per branch, in one
    /// transaction (nested transactions count on their own).
    pub max_txn_ops: usize,
    /// The cluster's `--max-request-bytes`.
    pub max_request_bytes: usize,
    /// Largest answer this client decodes.
    pub max_response_bytes: usize,
}

impl std::fmt::Debug for EtcdConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdConfig")
            .field("endpoints", &self.endpoints)
            .field("tls", &self.tls)
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("attempts", &self.attempts)
            .field("max_txn_ops", &self.max_txn_ops)
            .field("max_request_bytes", &self.max_request_bytes)
            .finish_non_exhaustive()
    }
}

/// TLS material, as PEM files.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct EtcdTls {
    /// CA certificate that signed the members' certificates.
    pub ca: Option<PathBuf>,
    /// Client certificate (with [`Self::key`]), for clusters that verify clients.
    pub cert: Option<PathBuf>,
    /// Client private key.
    pub key: Option<PathBuf>,
    /// Server name to verify, if it differs from the endpoint's host.
    pub domain: Option<String>,
}

impl EtcdTls {
    /// TLS verifying members against `ca`.
    pub fn with_ca(ca: impl Into<PathBuf>) -> Self {
        Self {
            ca: Some(ca.into()),
            ..Self::default()
        }
    }

    /// Adds a client certificate and key.
    #[must_use]
    pub fn with_client_identity(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.cert = Some(cert.into());
        self.key = Some(key.into());
        self
    }

    /// Sets the server name to verify.
    #[must_use]
    pub fn with_domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }
}

impl EtcdConfig {
    /// The defaults for these endpoints: no TLS, no user, etcd's default limits.
    pub fn new<I, E>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = E>,
        E: Into<String>,
    {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            tls: None,
            user: None,
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            attempts: 40,
            max_txn_ops: DEFAULT_MAX_TXN_OPS,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_response_bytes: 256 * 1024 * 1024,
        }
    }

    /// Sets [`Self::tls`].
    #[must_use]
    pub fn with_tls(mut self, tls: EtcdTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sets [`Self::user`].
    #[must_use]
    pub fn with_user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((name.into(), password.into()));
        self
    }

    /// Sets [`Self::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`Self::request_timeout`].
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets [`Self::attempts`].
    #[must_use]
    pub fn with_attempts(mut self, attempts: usize) -> Self {
        self.attempts = attempts;
        self
    }

    /// Sets [`Self::max_txn_ops`] (the cluster's `--max-txn-ops`).
    #[must_use]
    pub fn with_max_txn_ops(mut self, ops: usize) -> Self {
        self.max_txn_ops = ops;
        self
    }

    /// Sets [`Self::max_request_bytes`] (the cluster's `--max-request-bytes`).
    #[must_use]
    pub fn with_max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }
}
