//! Opening the backend chosen by cargo feature and `--backend`.

use std::path::Path;
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

/// The embedded default is fjall: a seventh of sled's disk, a sixth of its writes, and faster
/// indexing (README, "sled against fjall"). sled stays supported, and an existing sled
/// database is still opened as one ([`resolve`]).
impl Default for Backend {
    #[allow(unreachable_code)]
    fn default() -> Self {
        #[cfg(feature = "fjall")]
        return Backend::Fjall;
        #[cfg(feature = "sled")]
        return Backend::Sled;
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

/// The backend a command opens: `requested` (`--backend`) if given, else the embedded engine
/// whose files are already in `db`, else [`Backend::default`]. An embedded backend asked to open
/// the other engine's directory is refused, naming both, before anything is written there.
pub fn resolve(requested: Option<Backend>, db: &Path) -> Result<Backend, CliError> {
    let found = engines_in(db);
    let chosen = match (requested, found.as_slice()) {
        (Some(backend), [engine])
            if backend.has_db_dir() && backend.to_string().as_str() != *engine =>
        {
            return Err(format!(
                "{} holds a {engine} database, not a {backend} one: pass --backend {engine} \
                 (or leave --backend out), or choose another --db",
                db.display()
            )
            .into());
        }
        (Some(backend), _) => backend,
        (None, [engine]) => Backend::from_str(engine, false).map_err(|_| {
            format!(
                "{} holds a {engine} database, but this binary was built without the `{engine}` \
                 feature",
                db.display()
            )
        })?,
        (None, []) => Backend::default(),
        (None, _) => {
            return Err(format!(
                "{} holds the files of both sled and fjall: pass --backend sled or --backend fjall",
                db.display()
            )
            .into());
        }
    };
    Ok(chosen)
}

/// The embedded engines whose files are in `db` (`sled`, `fjall`), from the files each creates
/// when it opens a directory: none for a missing or empty directory or anything else, both for a
/// directory each engine was opened in.
fn engines_in(db: &Path) -> Vec<&'static str> {
    let sled = db.join("conf").is_file() && db.join("db").is_file();
    let fjall = db.join("version").is_file() && db.join("keyspaces").is_dir();
    [(sled, "sled"), (fjall, "fjall")]
        .into_iter()
        .filter_map(|(found, engine)| found.then_some(engine))
        .collect()
}

/// Opens the store and runs the command.
pub async fn run(cli: &Cli) -> Result<ExitCode, CliError> {
    if let crate::Command::Serve(_) = &cli.command
        && cli.backend().has_db_dir()
        && let Some(server) = percolator_server::discovery::find(&cli.db)
    {
        return Err(format!("{} is already served at {}", cli.db.display(), server.url).into());
    }
    if let Some(remote) = crate::remote_cmd::server_for(cli, cli.backend().has_db_dir())? {
        return crate::remote_cmd::run(&remote, cli).await;
    }
    match cli.backend() {
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
                return crate::compact_cmd::not_applicable("fjall", &cli.db);
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

#[cfg(all(test, feature = "sled", feature = "fjall", feature = "mem"))]
mod tests {
    use super::*;

    /// Each engine's directory is found from the files the engine itself writes, so an existing
    /// sled database keeps opening as sled now that fjall is the default.
    #[test]
    fn the_backend_follows_the_engine_already_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (sled_dir, fjall_dir) = (dir.path().join("s"), dir.path().join("f"));
        drop(percolator_backend_sled::SledStore::open(&sled_dir).unwrap());
        drop(percolator_backend_fjall::FjallStore::open(&fjall_dir).unwrap());

        let missing = dir.path().join("none");
        assert_eq!(resolve(None, &missing).unwrap(), Backend::Fjall);
        assert_eq!(resolve(None, dir.path()).unwrap(), Backend::Fjall);
        assert_eq!(resolve(None, &sled_dir).unwrap(), Backend::Sled);
        assert_eq!(resolve(None, &fjall_dir).unwrap(), Backend::Fjall);
        assert_eq!(
            resolve(Some(Backend::Sled), &missing).unwrap(),
            Backend::Sled
        );
        assert_eq!(
            resolve(Some(Backend::Mem), &sled_dir).unwrap(),
            Backend::Mem,
            "a backend without a directory ignores --db"
        );

        let refused = resolve(Some(Backend::Fjall), &sled_dir)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains(&sled_dir.display().to_string())
                && refused.contains("holds a sled database, not a fjall one"),
            "{refused}"
        );
        let refused = resolve(Some(Backend::Sled), &fjall_dir)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("holds a fjall database, not a sled one"),
            "{refused}"
        );

        // A directory both engines were opened in (possible before the refusal): either by
        // name, neither by guess.
        drop(percolator_backend_fjall::FjallStore::open(&sled_dir).unwrap());
        assert_eq!(
            resolve(Some(Backend::Fjall), &sled_dir).unwrap(),
            Backend::Fjall
        );
        assert_eq!(
            resolve(Some(Backend::Sled), &sled_dir).unwrap(),
            Backend::Sled
        );
        let refused = resolve(None, &sled_dir).unwrap_err().to_string();
        assert!(
            refused.contains("holds the files of both sled and fjall"),
            "{refused}"
        );
    }
}
