//! Opening the backend chosen by cargo feature and `--backend`.

use std::process::ExitCode;
use std::sync::Arc;

use clap::ValueEnum;

use crate::{Cli, CliError, dispatch};

/// The backends compiled into this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Embedded, persistent (sled), in `--db`.
    #[cfg(feature = "sled")]
    Sled,
    /// Embedded, persistent (the fjall LSM engine), in `--db`.
    #[cfg(feature = "fjall")]
    Fjall,
    /// In memory: gone when the process ends.
    #[cfg(feature = "mem")]
    Mem,
    /// A TiKV cluster reached through `--pd`.
    #[cfg(feature = "tikv")]
    Tikv,
    /// An etcd cluster reached through `--endpoints`.
    #[cfg(feature = "etcd")]
    Etcd,
}

impl Default for Backend {
    #[allow(unreachable_code)]
    fn default() -> Self {
        #[cfg(feature = "sled")]
        return Backend::Sled;
        #[cfg(feature = "fjall")]
        return Backend::Fjall;
        #[cfg(feature = "mem")]
        return Backend::Mem;
        #[cfg(feature = "tikv")]
        return Backend::Tikv;
        #[cfg(feature = "etcd")]
        return Backend::Etcd;
    }
}

impl Backend {
    /// Whether the database is a local directory (`--db`), where a server records itself.
    pub fn has_db_dir(self) -> bool {
        match self {
            #[cfg(feature = "sled")]
            Backend::Sled => true,
            #[cfg(feature = "fjall")]
            Backend::Fjall => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => f.write_str("?"),
        }
    }
}

/// Opens the store and runs the command.
pub async fn run(cli: &Cli) -> Result<ExitCode, CliError> {
    if let crate::Command::Serve(_) = &cli.command
        && cli.backend.has_db_dir()
        && let Some(server) = percolator_server::discovery::find(&cli.db)
    {
        return Err(format!("{} is already served at {}", cli.db.display(), server.url).into());
    }
    if let Some(remote) = crate::remote_cmd::server_for(cli, cli.backend.has_db_dir())? {
        return crate::remote_cmd::run(&remote, cli).await;
    }
    match cli.backend {
        #[cfg(feature = "sled")]
        Backend::Sled => {
            if let crate::Command::Compact(args) = &cli.command {
                return crate::compact_cmd::run_sled(&cli.db, args);
            }
            refuse_to_create_for_reading(cli)?;
            let store = open_sled(&cli.db).await?;
            dispatch(Arc::new(store), None, cli).await
        }
        #[cfg(feature = "fjall")]
        Backend::Fjall => {
            if let crate::Command::Compact(_) = &cli.command {
                return Err(
                    "fjall compacts its files itself, online: `compact` is for sled".into(),
                );
            }
            refuse_to_create_for_reading(cli)?;
            let store = open_fjall(&cli.db).await?;
            dispatch(Arc::new(store), None, cli).await
        }
        #[cfg(feature = "mem")]
        Backend::Mem => {
            dispatch(Arc::new(percolator_backend_mem::MemStore::new()), None, cli).await
        }
        #[cfg(feature = "tikv")]
        Backend::Tikv => {
            use percolator_backend_tikv::{PdOracle, TikvConfig, TikvStore};
            if cli.pd.is_empty() {
                return Err("the tikv backend needs --pd HOST:PORT (or PERCOLATOR_TIKV_PD)".into());
            }
            let store =
                TikvStore::connect(&TikvConfig::new(cli.pd.clone()), cli.namespace.as_bytes())
                    .await?;
            let oracle: Arc<dyn percolator_core::TimestampOracle> =
                Arc::new(PdOracle::new(Arc::clone(store.api())));
            dispatch(Arc::new(store), Some(oracle), cli).await
        }
        #[cfg(feature = "etcd")]
        Backend::Etcd => {
            use percolator_backend_etcd::{EtcdConfig, EtcdStore};
            if cli.endpoints.is_empty() {
                return Err(
                    "the etcd backend needs --endpoints URL[,URL…] (or PERCOLATOR_ETCD_ENDPOINTS; \
                     `cargo xtask cluster up` starts a local cluster and prints them)"
                        .into(),
                );
            }
            let config = EtcdConfig::new(cli.endpoints.clone());
            let store = EtcdStore::connect(&config, cli.namespace.as_bytes())
                .await
                .map_err(|e| format!("cannot reach etcd at {}: {e}", cli.endpoints.join(",")))?;
            dispatch(Arc::new(store), None, cli).await
        }
    }
}

/// Read-only commands on an embedded backend never create a database at a mistyped path.
#[cfg(any(feature = "sled", feature = "fjall"))]
fn refuse_to_create_for_reading(cli: &Cli) -> Result<(), CliError> {
    if cli.command.reads_only() && !cli.db.exists() {
        return Err(format!(
            "no database at {} (`percolator --db {} webindex load …` creates one)",
            cli.db.display(),
            cli.db.display()
        )
        .into());
    }
    Ok(())
}

/// Opens fjall, waiting briefly for the lock of a process that is just exiting.
#[cfg(feature = "fjall")]
async fn open_fjall(
    path: &std::path::Path,
) -> Result<percolator_backend_fjall::FjallStore, CliError> {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match percolator_backend_fjall::FjallStore::open(path) {
            Ok(store) => return Ok(store),
            Err(e) if Instant::now() < deadline && format!("{e:?}").contains("Locked") => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(with_causes(path, &e).into()),
        }
    }
}

/// `cannot open PATH: ERROR: CAUSE: …`: the causes, not only the backend's summary (read-only,
/// not a directory, locked, ...).
#[cfg(any(feature = "sled", feature = "fjall"))]
fn with_causes(path: &std::path::Path, e: &dyn std::error::Error) -> String {
    let mut message = format!("cannot open {}: {e}", path.display());
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// Opens sled, waiting briefly for the file lock of a process that is just exiting.
#[cfg(feature = "sled")]
async fn open_sled(path: &std::path::Path) -> Result<percolator_backend_sled::SledStore, CliError> {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match percolator_backend_sled::SledStore::open(path) {
            Ok(store) => return Ok(store),
            Err(e)
                if Instant::now() < deadline
                    && format!("{e:?}").contains("could not acquire lock") =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => {
                return Err(with_causes(path, &e).into());
            }
        }
    }
}

#[cfg(not(any(
    feature = "sled",
    feature = "fjall",
    feature = "mem",
    feature = "tikv",
    feature = "etcd"
)))]
compile_error!(
    "the percolator binary needs at least one backend feature: sled, fjall, mem, tikv or etcd"
);
