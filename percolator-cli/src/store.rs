//! From the command line to a store: the flags become a [`StoreSpec`], and
//! `percolator-registry` opens it. A command goes through a running server instead when one owns
//! the database (`cmd/remote.rs`).

use std::process::ExitCode;
use std::sync::Arc;

use percolator_registry::{OpenOptions, StoreSpec, catalogue};

use crate::{Cli, CliError, Command, dispatch};

/// The names `--backend` accepts: the backends compiled into this binary.
pub fn backend_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(catalogue::compiled().map(|b| b.name))
}

/// The store the flags name: `--store`, else `--backend` with `--db`, `--endpoints` or `--pd`,
/// else the engine already in `--db` (fjall for a new one). Naming the other embedded engine
/// than the directory holds is refused, naming both, before anything is written there.
pub fn spec(cli: &Cli) -> Result<StoreSpec, CliError> {
    if let Some(spec) = &cli.store {
        return Ok(spec.clone());
    }
    Ok(StoreSpec::from_flags(
        cli.backend.as_deref(),
        &cli.db,
        &cli.endpoints,
        &cli.pd,
    )?)
}

/// Opens the store and runs the command (or sends it to the server that owns the database).
pub async fn run(cli: &Cli, spec: &StoreSpec) -> Result<ExitCode, CliError> {
    if let Command::Locks { command } = &cli.command {
        return crate::cmd::locks::run(command).await;
    }
    let dir = spec.dir();
    if let Command::Serve(_) = &cli.command
        && let Some(dir) = dir
        && let Some(server) = percolator_server::discovery::find(dir)
    {
        return Err(format!("{} is already served at {}", dir.display(), server.url).into());
    }
    if let Some(remote) = crate::cmd::remote::server_for(cli, dir)? {
        return crate::cmd::remote::run(&remote, cli).await;
    }
    if let Command::Compact(args) = &cli.command {
        return crate::cmd::compact::run(spec, args);
    }
    let options = OpenOptions::default()
        .with_namespace(cli.namespace.clone())
        .with_must_exist(cli.command.reads_only());
    let opened = percolator_registry::open(spec, &options).await?;
    dispatch(Arc::new(opened.store), opened.oracle, cli, dir).await
}
