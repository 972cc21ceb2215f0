//! Reserved tables that Percolator itself keeps in the store, and the check that keeps user
//! transactions out of them.

use crate::error::{Error, Result};

/// Prefix of every table name reserved for Percolator's own bookkeeping.
pub const RESERVED_PREFIX: &[u8] = b"__percolator";
/// Oracle high-water mark and other metadata.
pub const META_TABLE: &[u8] = b"__percolator_meta";
/// Row of [`META_TABLE`] holding the oracle's high-water mark.
pub const ORACLE_ROW: &[u8] = b"oracle";
/// Worker liveness registrations (one row per worker id).
pub const WORKERS_TABLE: &[u8] = b"__percolator_workers";

/// Errors unless `table` may be used by application transactions.
pub fn check_user_table(table: &[u8]) -> Result<()> {
    if table.is_empty() {
        return Err(Error::InvalidInput("table name must not be empty".into()));
    }
    if table.starts_with(RESERVED_PREFIX) {
        return Err(Error::InvalidInput(format!(
            "table name {:?} uses the reserved prefix {:?}",
            String::from_utf8_lossy(table),
            String::from_utf8_lossy(RESERVED_PREFIX)
        )));
    }
    Ok(())
}
