//! [`open()`]: a [`StoreSpec`] to a [`DynStore`] and the oracle its cluster imposes.

use std::sync::Arc;
use std::time::Duration;

use percolator_core::{DynStore, TimestampOracle};

use crate::spec::{SpecError, StoreSpec};

/// How to open a store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Key namespace inside a cluster (etcd, TiKV): several stores can share one cluster.
    pub namespace: String,
    /// How long to wait for an embedded database's lock held by a process that is exiting.
    pub lock_wait: Duration,
    /// Refuse to create an embedded database that does not exist yet (for commands that only
    /// read: a mistyped path must not become an empty database).
    pub must_exist: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            namespace: "percolator".to_owned(),
            lock_wait: Duration::from_secs(5),
            must_exist: false,
        }
    }
}

impl OpenOptions {
    /// Sets [`Self::namespace`].
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Sets [`Self::must_exist`].
    pub fn with_must_exist(mut self, must_exist: bool) -> Self {
        self.must_exist = must_exist;
        self
    }

    /// Sets [`Self::lock_wait`].
    pub fn with_lock_wait(mut self, lock_wait: Duration) -> Self {
        self.lock_wait = lock_wait;
        self
    }
}

/// An opened store.
#[non_exhaustive]
pub struct OpenedStore {
    /// The store.
    pub store: DynStore,
    /// The timestamp oracle every process on this store must use, where the store's cluster has
    /// one (PD's TSO on TiKV); `None` elsewhere. Pass it to `ClientBuilder::oracle`.
    pub oracle: Option<Arc<dyn TimestampOracle>>,
    /// What was opened.
    pub spec: StoreSpec,
}

impl OpenedStore {
    /// A client builder on the store, with the oracle its cluster imposes if it has one.
    pub fn client_builder(self) -> percolator_core::ClientBuilder<DynStore> {
        let builder = percolator_core::Client::builder(Arc::new(self.store));
        match self.oracle {
            Some(oracle) => builder.oracle(oracle),
            None => builder,
        }
    }
}

impl std::fmt::Debug for OpenedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedStore")
            .field("spec", &self.spec)
            .field("cluster_oracle", &self.oracle.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The spec itself is wrong.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// This build does not include the backend.
    #[error(
        "this build cannot open {spec}: it was built without the `{feature}` cargo feature \
         (rebuild with `--features {feature}`)"
    )]
    NotCompiled {
        /// The spec.
        spec: String,
        /// The feature that compiles the backend in.
        feature: &'static str,
    },
    /// A read-only open of an embedded database that does not exist.
    #[error("no database at {path} (commands that write, such as `webindex load`, create one)")]
    NoDatabase {
        /// The directory.
        path: String,
    },
    /// The backend refused to open it; `message` carries the causes (read-only, not a
    /// directory, locked, unreachable, …).
    #[error("cannot open {spec}: {message}")]
    Backend {
        /// The spec.
        spec: String,
        /// The backend's error and its causes.
        message: String,
    },
}

/// Opens the store `spec` names.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use percolator_registry::{OpenOptions, open};
///
/// let opened = open(&"fjall:target/wi".parse()?, &OpenOptions::default()).await?;
/// let client = opened.client_builder().build().await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn open(spec: &StoreSpec, options: &OpenOptions) -> Result<OpenedStore, OpenError> {
    compiled_in(spec, spec.backend())?;
    if let Some(dir) = spec.dir()
        && options.must_exist
        && !dir.exists()
    {
        return Err(OpenError::NoDatabase {
            path: dir.display().to_string(),
        });
    }
    let (store, oracle) = open_backend(spec, options).await?;
    Ok(OpenedStore {
        store,
        oracle,
        spec: spec.clone(),
    })
}

/// Refuses `spec` unless `backend` (its backend) is compiled into this build.
fn compiled_in(spec: &StoreSpec, backend: &crate::Backend) -> Result<(), OpenError> {
    if backend.compiled {
        return Ok(());
    }
    Err(OpenError::NotCompiled {
        spec: spec.to_string(),
        feature: backend.feature,
    })
}

type Opened = (DynStore, Option<Arc<dyn TimestampOracle>>);

/// The one match over backends that opens a store.
#[allow(unused_variables, clippy::needless_return)]
async fn open_backend(spec: &StoreSpec, options: &OpenOptions) -> Result<Opened, OpenError> {
    let failed = |e: &dyn std::error::Error| OpenError::Backend {
        spec: spec.to_string(),
        message: with_causes(e),
    };
    match spec {
        #[cfg(feature = "mem")]
        StoreSpec::Mem => Ok((Arc::new(percolator_backend_mem::MemStore::new()), None)),
        #[cfg(feature = "fjall")]
        StoreSpec::Fjall(path) => {
            let store = retry_while_locked(options.lock_wait, "Locked", || {
                percolator_backend_fjall::FjallStore::open(path)
            })
            .await
            .map_err(|e| failed(&e))?;
            Ok((Arc::new(store), None))
        }
        #[cfg(feature = "sled")]
        StoreSpec::Sled(path) => {
            let store = retry_while_locked(options.lock_wait, "could not acquire lock", || {
                percolator_backend_sled::SledStore::open(path)
            })
            .await
            .map_err(|e| failed(&e))?;
            Ok((Arc::new(store), None))
        }
        #[cfg(feature = "etcd")]
        StoreSpec::Etcd(endpoints) => {
            use percolator_backend_etcd::{EtcdConfig, EtcdStore};
            let config = EtcdConfig::new(endpoints.clone());
            let store = EtcdStore::connect(&config, options.namespace.as_bytes())
                .await
                .map_err(|e| failed(&e))?;
            Ok((Arc::new(store), None))
        }
        #[cfg(feature = "tikv")]
        StoreSpec::Tikv(pd) => {
            use percolator_backend_tikv::{TikvConfig, TikvStore};
            let store =
                TikvStore::connect(&TikvConfig::new(pd.clone()), options.namespace.as_bytes())
                    .await
                    .map_err(|e| failed(&e))?;
            let oracle = store.pd_oracle();
            Ok((Arc::new(store), Some(oracle)))
        }
        #[allow(unreachable_patterns)]
        _ => Err(OpenError::NotCompiled {
            spec: spec.to_string(),
            feature: spec.backend().feature,
        }),
    }
}

/// Opens with `open`, retrying for up to `wait` while the error (its `Debug` form) says the
/// database is locked by another process: one that is exiting lets go within moments.
#[cfg(any(feature = "fjall", feature = "sled"))]
async fn retry_while_locked<T, E: std::fmt::Debug>(
    wait: Duration,
    locked: &str,
    mut open: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match open() {
            Err(e) if std::time::Instant::now() < deadline && format!("{e:?}").contains(locked) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// `ERROR: CAUSE: …`: the causes too, not only the backend's summary.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

#[cfg(all(test, feature = "mem", feature = "fjall"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn opens_what_the_spec_names() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let read_only = OpenOptions::default().with_must_exist(true);
        let err = open(&StoreSpec::Fjall(db.clone()), &read_only)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no database at"), "{err}");
        assert!(!db.exists(), "a read-only open created the database");

        let opened = open(&StoreSpec::Fjall(db.clone()), &OpenOptions::default())
            .await
            .unwrap();
        assert_eq!(opened.store.name(), "fjall");
        assert!(opened.oracle.is_none());
        drop(opened);
        assert_eq!(StoreSpec::embedded(&db).unwrap(), StoreSpec::Fjall(db));

        let mem = open(&StoreSpec::Mem, &OpenOptions::default())
            .await
            .unwrap();
        assert_eq!(mem.store.name(), "mem");
    }

    #[test]
    fn a_backend_left_out_of_the_build_says_which_feature_to_enable() {
        let spec: StoreSpec = "sled:x".parse().unwrap();
        let mut sled = *spec.backend();
        sled.compiled = true;
        assert!(compiled_in(&spec, &sled).is_ok());
        sled.compiled = false;
        let err = compiled_in(&spec, &sled).unwrap_err().to_string();
        assert!(
            err.contains("cannot open sled:x") && err.contains("rebuild with `--features sled`"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_file_where_the_directory_should_be_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"not a database").unwrap();
        let err = open(&StoreSpec::Fjall(file.clone()), &OpenOptions::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("cannot open fjall:{}", file.display())),
            "{err}"
        );
    }
}
