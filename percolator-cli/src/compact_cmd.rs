//! `percolator compact`: gives a sled database's free space back to the file system.
//!
//! Garbage collection deletes old versions, but sled keeps the space they took inside its
//! log segments. This copies the live keys into a fresh database and swaps it in (see
//! `percolator_backend_sled::compact`): offline, because sled admits one process per database —
//! stop the workers first; a crash midway loses nothing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::CliError;
use crate::output::{bar, table, write_json};

/// Arguments of `percolator compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// Also write the sizes as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Compacts the sled database at `db` and prints sizes before and after.
#[cfg(feature = "sled")]
pub fn run_sled(db: &Path, args: &CompactArgs) -> Result<ExitCode, CliError> {
    use percolator_backend_sled::compact;
    let progress = bar(None, "compact");
    let report = compact::compact(db, |keys| progress.set_position(keys));
    progress.finish_and_clear();
    let report = report.map_err(|e| format!("cannot compact {}: {e}", db.display()))?;
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let ratio = |b: u64| format!("{:.1}×", b as f64 / report.live_bytes.max(1) as f64);
    print!(
        "{}",
        table(
            &format!("compacted {}", db.display()),
            &[
                ("keys", report.keys.to_string()),
                ("live data (keys + values)", mb(report.live_bytes)),
                ("on disk before", mb(report.disk_bytes_before)),
                ("on disk after", mb(report.disk_bytes_after)),
                ("disk ÷ live before", ratio(report.disk_bytes_before)),
                ("disk ÷ live after", ratio(report.disk_bytes_after)),
            ],
        )
    );
    let json = serde_json::json!({
        "keys": report.keys,
        "live_bytes": report.live_bytes,
        "disk_bytes_before": report.disk_bytes_before,
        "disk_bytes_after": report.disk_bytes_after,
    });
    write_json(args.json.as_deref(), &json)?;
    Ok(ExitCode::SUCCESS)
}

/// What `compact` means on a backend that is not sled (fjall: for the database at `db`).
pub fn not_applicable(backend: &str, db: &Path) -> Result<ExitCode, CliError> {
    Err(match backend {
        "fjall" if !db.exists() => format!(
            "{} does not exist: there is no database to compact",
            db.display()
        ),
        "fjall" => format!(
            "{} holds a fjall database, which compacts its files itself, online: `compact` is for \
             sled",
            db.display()
        ),
        "mem" => "compact: the mem backend keeps nothing on disk".to_owned(),
        "etcd" => "compact: etcd compacts its own history (the store's GC compacts revisions); \
                   run `etcdctl defrag` on each member to give the file space back"
            .to_owned(),
        other => format!("compact: {other} manages its own storage (TiKV compacts with RocksDB)"),
    }
    .into())
}
