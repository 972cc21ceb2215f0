//! `percolator compact`: gives a sled database's free space back to the file system.
//!
//! Garbage collection deletes old versions, but sled keeps the space they took inside its
//! log segments. This copies the live keys into a fresh database and swaps it in
//! (`percolator_registry::compact`): offline, because sled admits one process per database —
//! stop the workers first; a crash midway loses nothing.

use std::path::PathBuf;
use std::process::ExitCode;

use percolator_registry::StoreSpec;

use crate::CliError;
use crate::output::{bar, out, table, write_json};

/// Arguments of `percolator compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// Also write the sizes as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Compacts the store `spec` names and prints sizes before and after (sled only; the other
/// backends say what manages their space instead).
pub fn run(spec: &StoreSpec, args: &CompactArgs) -> Result<ExitCode, CliError> {
    let progress = bar(None, "compact");
    let report = percolator_registry::compact(spec, |keys| progress.set_position(keys));
    progress.finish_and_clear();
    let report = report?;
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let ratio = |b: u64| format!("{:.1}×", b as f64 / report.live_bytes.max(1) as f64);
    out!(
        "{}",
        table(
            &format!("compacted {spec}"),
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
