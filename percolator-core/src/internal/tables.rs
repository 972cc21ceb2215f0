//! Reserved names: the tables Percolator itself keeps in the store (oracle, worker leases) and
//! the per-row columns it keeps in user tables (observer acks), with the checks that keep
//! application transactions out of them.

use crate::error::{Error, Result};

/// Prefix of every table name reserved for Percolator's own bookkeeping.
pub const RESERVED_PREFIX: &[u8] = b"__percolator";
/// Oracle high-water mark and other metadata.
pub const META_TABLE: &[u8] = b"__percolator_meta";
/// Row of [`META_TABLE`] holding the oracle's high-water mark.
pub const ORACLE_ROW: &[u8] = b"oracle";
/// Worker liveness registrations (one row per worker id).
pub const WORKERS_TABLE: &[u8] = b"__percolator_workers";
/// The observed-columns registry (see [`crate::observer_registry`]).
pub const OBSERVERS_TABLE: &[u8] = b"__percolator_observers";
/// Changes parked after their observer failed too often (see `percolator-observers`).
pub const PARKED_TABLE: &[u8] = b"__percolator_parked";

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

/// Prefix of column names reserved for Percolator's own per-row bookkeeping (the observers'
/// acknowledgement columns). Application transactions may not write such columns, and scans of
/// all columns leave them out.
pub const RESERVED_COLUMN_PREFIX: &[u8] = b"\xff\xff__percolator/";

/// Whether `column` is reserved (see [`RESERVED_COLUMN_PREFIX`]).
pub fn is_reserved_column(column: &[u8]) -> bool {
    column.starts_with(RESERVED_COLUMN_PREFIX)
}

/// Errors unless application transactions may write `column`.
pub fn check_user_column(column: &[u8]) -> Result<()> {
    if is_reserved_column(column) {
        return Err(Error::InvalidInput(format!(
            "column {:?} uses the reserved prefix {:?}",
            String::from_utf8_lossy(column),
            String::from_utf8_lossy(RESERVED_COLUMN_PREFIX)
        )));
    }
    Ok(())
}

/// The acknowledgement column of observer `observer` for the observed `column` (the paper's
/// `c:ack_O`): a transactional cell in the observed row holding the start timestamp of the
/// observer's last run. Unambiguous for any observer name and column bytes.
pub fn ack_column(observer: &str, column: &[u8]) -> bytes::Bytes {
    let name = observer.as_bytes();
    let mut out = Vec::with_capacity(RESERVED_COLUMN_PREFIX.len() + 6 + name.len() + column.len());
    out.extend_from_slice(RESERVED_COLUMN_PREFIX);
    out.extend_from_slice(b"ack/");
    // Names are short; a longer one is cut at the length field's limit, still unambiguous
    // because the length written is the length kept.
    let kept = &name[..name.len().min(usize::from(u16::MAX))];
    out.extend_from_slice(&u16::try_from(kept.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(kept);
    out.extend_from_slice(column);
    out.into()
}

/// The observer name and observed column an [`ack_column`] stands for (`None`: not an ack
/// column, or malformed).
pub fn parse_ack_column(column: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = column
        .strip_prefix(RESERVED_COLUMN_PREFIX)?
        .strip_prefix(&b"ack/"[..])?;
    let (len, rest) = rest.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len));
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_columns_are_reserved_and_distinct() {
        let a = ack_column("o", b"ab");
        let b = ack_column("oa", b"b");
        assert_ne!(a, b);
        assert!(is_reserved_column(&a));
        assert!(check_user_column(&a).is_err());
        assert!(check_user_column(b"plain").is_ok());
        assert!(check_user_column(b"\xff\xff").is_ok());
    }

    #[test]
    fn ack_columns_parse_back() {
        let ack = ack_column("exporter", b"canonical");
        assert_eq!(
            parse_ack_column(&ack),
            Some((&b"exporter"[..], &b"canonical"[..]))
        );
        assert_eq!(parse_ack_column(b"canonical"), None);
        assert_eq!(parse_ack_column(&ack[..ack.len() - 12]), None, "cut short");
    }
}
