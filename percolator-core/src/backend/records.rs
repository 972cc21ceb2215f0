//! The bytes Percolator stores in the `lock` and `write` families (paper Table 1 / Figure 4).
//!
//! - A **lock** (`c:lock` at the writer's start_ts) names the transaction's primary cell, the
//!   worker that owns it and a wall-clock heartbeat with a TTL, so that a cleaner can decide
//!   whether the owner is gone. A put of a **short value** (up to [`SHORT_VALUE_MAX`] bytes)
//!   keeps the value in its lock instead of a data version; the commit — or a cleaner rolling
//!   the cell forward — writes it inline in the write record (TiKV's short values in locks).
//! - A **write record** (`c:write` at commit_ts) points at the data version (the start_ts) and
//!   says whether it is a put, a delete, or a **rollback** marker (at the aborted start_ts itself)
//!   that forbids a late prewrite of that transaction from ever succeeding. A put of a short
//!   value carries it **inline** (up to [`SHORT_VALUE_MAX`] bytes, TiKV's "short value"): then
//!   there is no data version, a one-phase commit is one cell instead of two, a two-phase one
//!   three cell writes instead of four, and a reader needs no second lookup.
//!
//! - A **notify record** (`c:notify` at a timestamp) says that the cell changed and observers
//!   should run. Written by a transaction during prewrite it names the writer's primary, so that
//!   a notification is only consumed by an observer whose snapshot includes the writer's commit
//!   (see `txn::notify`); written directly it names no writer.
//!
//! All are versioned, hand-rolled binary formats: tiny, no serde, and decoding arbitrary bytes
//! returns [`Error::Corrupt`] instead of panicking.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};

const LOCK_FORMAT: u8 = 1;
/// A put's lock followed by its short value (no data version).
const LOCK_FORMAT_VALUE: u8 = 2;
const WRITE_FORMAT: u8 = 1;
/// A put write record followed by its value (no data version).
const WRITE_FORMAT_INLINE: u8 = 2;
/// The longest value a write record carries inline (see the module docs).
pub const SHORT_VALUE_MAX: usize = 255;
const NOTIFY_FORMAT: u8 = 1;

/// What a transaction does to a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// A new value (stored in `c:data` at start_ts).
    Put,
    /// A deletion (no data version).
    Delete,
    /// The transaction with this start_ts was rolled back (write record only).
    Rollback,
}

impl WriteKind {
    fn to_byte(self) -> u8 {
        match self {
            WriteKind::Put => 1,
            WriteKind::Delete => 2,
            WriteKind::Rollback => 3,
        }
    }

    fn from_byte(b: u8) -> Result<Self> {
        match b {
            1 => Ok(WriteKind::Put),
            2 => Ok(WriteKind::Delete),
            3 => Ok(WriteKind::Rollback),
            other => Err(Error::Corrupt(format!("unknown write kind {other}"))),
        }
    }
}

/// Address of one Percolator cell: `(table, row, column)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellAddr {
    /// Table.
    pub table: Bytes,
    /// Row.
    pub row: Bytes,
    /// Column.
    pub column: Bytes,
}

impl CellAddr {
    /// Builds an address.
    ///
    /// ```
    /// # use percolator_core::CellAddr;
    /// let addr = CellAddr::new("docs", "https://example.com/", "contents");
    /// assert_eq!(&addr.row[..], b"https://example.com/");
    /// assert_eq!(addr.to_string(), "docs/https://example.com//contents");
    /// ```
    pub fn new(table: impl Into<Bytes>, row: impl Into<Bytes>, column: impl Into<Bytes>) -> Self {
        Self {
            table: table.into(),
            row: row.into(),
            column: column.into(),
        }
    }
}

impl std::fmt::Display for CellAddr {
    /// `table/row/column`, non-printable bytes escaped.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.table.escape_ascii(),
            self.row.escape_ascii(),
            self.column.escape_ascii()
        )
    }
}

/// Contents of a `c:lock` cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRecord {
    /// Put or Delete (never Rollback).
    pub kind: WriteKind,
    /// The transaction's primary cell; cleaners consult it to learn the outcome.
    pub primary: CellAddr,
    /// Worker id of the owner (see [`crate::liveness`]).
    pub owner: u64,
    /// Oracle time ([`crate::oracle::time`]) of the owner's last write of this lock (prewrite or
    /// heartbeat), in milliseconds.
    pub oracle_ms: u64,
    /// Milliseconds after `oracle_ms` at which the lock may be cleaned up even if the owner lives.
    pub ttl_ms: u64,
    /// A put's value when it is short (at most [`SHORT_VALUE_MAX`] bytes): the transaction wrote
    /// no data version, and committing the cell writes this value inline in its write record.
    /// `None` for deletes and for longer values (those are data versions at start_ts).
    pub value: Option<Bytes>,
}

impl LockRecord {
    /// Whether the lock's TTL has run out at oracle time `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms > self.oracle_ms.saturating_add(self.ttl_ms)
    }

    /// Serializes the record.
    pub fn encode(&self) -> Bytes {
        let p = &self.primary;
        let mut out =
            BytesMut::with_capacity(2 + 12 + p.table.len() + p.row.len() + p.column.len() + 24);
        out.put_u8(if self.value.is_some() {
            LOCK_FORMAT_VALUE
        } else {
            LOCK_FORMAT
        });
        out.put_u8(self.kind.to_byte());
        for part in [&p.table, &p.row, &p.column] {
            // Lengths are bounded by the store's key limit, far below u32::MAX.
            out.put_u32_le(u32::try_from(part.len()).unwrap_or(u32::MAX));
            out.put_slice(part);
        }
        out.put_u64_le(self.owner);
        out.put_u64_le(self.oracle_ms);
        out.put_u64_le(self.ttl_ms);
        if let Some(value) = &self.value {
            out.put_slice(value);
        }
        out.freeze()
    }

    /// Parses bytes written by [`LockRecord::encode`].
    pub fn decode(bytes: &Bytes) -> Result<Self> {
        let mut r = Reader { bytes, pos: 0 };
        let format = r.u8()?;
        if format != LOCK_FORMAT && format != LOCK_FORMAT_VALUE {
            return Err(Error::Corrupt(format!("unknown lock format {format}")));
        }
        let kind = WriteKind::from_byte(r.u8()?)?;
        if kind == WriteKind::Rollback {
            return Err(Error::Corrupt("lock with rollback kind".into()));
        }
        let table = r.slice()?;
        let row = r.slice()?;
        let column = r.slice()?;
        let owner = r.u64()?;
        let oracle_ms = r.u64()?;
        let ttl_ms = r.u64()?;
        let value = if format == LOCK_FORMAT_VALUE {
            let value = bytes.slice(r.pos..);
            if kind != WriteKind::Put || value.len() > SHORT_VALUE_MAX {
                return Err(Error::Corrupt(format!(
                    "{kind:?} lock carrying a value of {} bytes (only a put's value of at most {SHORT_VALUE_MAX} bytes)",
                    value.len()
                )));
            }
            Some(value)
        } else {
            r.finish("lock")?;
            None
        };
        Ok(Self {
            kind,
            primary: CellAddr { table, row, column },
            owner,
            oracle_ms,
            ttl_ms,
            value,
        })
    }
}

/// Contents of a `c:write` cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRecord {
    /// Put, Delete or Rollback.
    pub kind: WriteKind,
    /// Start timestamp of the transaction (where its data lives).
    pub start_ts: u64,
}

impl WriteRecord {
    /// Serializes the record (10 bytes).
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(10);
        out.put_u8(WRITE_FORMAT);
        out.put_u8(self.kind.to_byte());
        out.put_u64_le(self.start_ts);
        out.freeze()
    }

    /// Serializes a put record carrying `value` inline (10 bytes plus the value); its
    /// transaction writes no data version. Only for values up to [`SHORT_VALUE_MAX`] bytes.
    pub fn encode_inline(start_ts: u64, value: &[u8]) -> Bytes {
        let mut out = BytesMut::with_capacity(10 + value.len());
        out.put_u8(WRITE_FORMAT_INLINE);
        out.put_u8(WriteKind::Put.to_byte());
        out.put_u64_le(start_ts);
        out.put_slice(value);
        out.freeze()
    }

    /// Parses bytes written by [`WriteRecord::encode`] or [`WriteRecord::encode_inline`]
    /// (ignoring an inline value).
    pub fn decode(bytes: &Bytes) -> Result<Self> {
        Ok(Self::decode_with_value(bytes)?.0)
    }

    /// Parses a write record and its inline value, if it has one (a zero-copy slice of
    /// `bytes`).
    pub fn decode_with_value(bytes: &Bytes) -> Result<(Self, Option<Bytes>)> {
        let mut r = Reader { bytes, pos: 0 };
        let format = r.u8()?;
        if format != WRITE_FORMAT && format != WRITE_FORMAT_INLINE {
            return Err(Error::Corrupt(format!("unknown write format {format}")));
        }
        let kind = WriteKind::from_byte(r.u8()?)?;
        let start_ts = r.u64()?;
        let record = Self { kind, start_ts };
        if format == WRITE_FORMAT {
            r.finish("write record")?;
            return Ok((record, None));
        }
        if kind != WriteKind::Put {
            return Err(Error::Corrupt(format!(
                "{kind:?} write record with an inline value"
            )));
        }
        Ok((record, Some(bytes.slice(r.pos..))))
    }
}

/// Contents of a `c:notify` cell (the timestamp is the cell's version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyRecord {
    /// The primary cell of the transaction that wrote the notification (its start_ts is the
    /// notify cell's version), or `None` for a notification written outside a transaction or by
    /// a transaction without writes.
    pub writer: Option<CellAddr>,
    /// The writer's commit timestamp, when the notification went into the store in the same
    /// atomic mutation as the writer's commit (a one-phase commit, [`crate::txn`]): the version
    /// then exists only because its writer committed, at this timestamp, and a reader needs no
    /// status read to know it. `None` for a notification written at prewrite (two-phase
    /// commit), whose writer may still be pending, and for one without a writer (it is stored
    /// only with a writer).
    pub committed_at: Option<u64>,
}

impl NotifyRecord {
    /// Serializes the record.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(2);
        out.put_u8(NOTIFY_FORMAT);
        match &self.writer {
            None => out.put_u8(0),
            Some(p) => {
                out.put_u8(if self.committed_at.is_some() { 2 } else { 1 });
                for part in [&p.table, &p.row, &p.column] {
                    out.put_u32_le(u32::try_from(part.len()).unwrap_or(u32::MAX));
                    out.put_slice(part);
                }
                if let Some(commit_ts) = self.committed_at {
                    out.put_u64_le(commit_ts);
                }
            }
        }
        out.freeze()
    }

    /// Parses bytes written by [`NotifyRecord::encode`].
    pub fn decode(bytes: &Bytes) -> Result<Self> {
        let mut r = Reader { bytes, pos: 0 };
        let format = r.u8()?;
        if format != NOTIFY_FORMAT {
            return Err(Error::Corrupt(format!("unknown notify format {format}")));
        }
        let (writer, committed_at) = match r.u8()? {
            0 => (None, None),
            tag @ (1 | 2) => {
                let table = r.slice()?;
                let row = r.slice()?;
                let column = r.slice()?;
                let committed_at = if tag == 2 { Some(r.u64()?) } else { None };
                (Some(CellAddr { table, row, column }), committed_at)
            }
            other => return Err(Error::Corrupt(format!("unknown notify writer tag {other}"))),
        };
        r.finish("notify record")?;
        Ok(Self {
            writer,
            committed_at,
        })
    }
}

struct Reader<'a> {
    bytes: &'a Bytes,
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(Error::Corrupt(format!(
                "record truncated: need {n} bytes at offset {}, have {}",
                self.pos,
                self.bytes.len()
            )));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn slice(&mut self) -> Result<Bytes> {
        let len = self.u32()? as usize;
        let start = self.pos;
        self.take(len)?;
        Ok(self.bytes.slice(start..start + len))
    }

    fn finish(&self, what: &str) -> Result<()> {
        if self.pos != self.bytes.len() {
            return Err(Error::Corrupt(format!(
                "{} trailing bytes after {what}",
                self.bytes.len() - self.pos
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lock_round_trip() {
        let lock = LockRecord {
            kind: WriteKind::Delete,
            primary: CellAddr::new(&b"t"[..], &b"\x00\xff"[..], &b""[..]),
            owner: 42,
            oracle_ms: 1_700_000_000_000,
            ttl_ms: 3000,
            value: None,
        };
        assert_eq!(LockRecord::decode(&lock.encode()).unwrap(), lock);
        assert!(!lock.expired(1_700_000_003_000));
        assert!(lock.expired(1_700_000_003_001));
    }

    /// A put's lock carrying `value`.
    fn put_lock(value: &[u8]) -> LockRecord {
        LockRecord {
            kind: WriteKind::Put,
            primary: CellAddr::new(&b"t"[..], &b"r"[..], &b"c"[..]),
            owner: 1,
            oracle_ms: 2,
            ttl_ms: 3,
            value: Some(Bytes::copy_from_slice(value)),
        }
    }

    #[test]
    fn lock_with_short_value_round_trip() {
        for value in [&b""[..], b"v", &[7u8; SHORT_VALUE_MAX]] {
            let lock = put_lock(value);
            assert_eq!(LockRecord::decode(&lock.encode()).unwrap(), lock);
        }
        // Only a put's short value rides in a lock.
        let put = put_lock(b"v");
        let mut delete = put.encode().to_vec();
        delete[1] = WriteKind::Delete.to_byte();
        let long = LockRecord {
            value: Some(Bytes::from(vec![1u8; SHORT_VALUE_MAX + 1])),
            ..put
        };
        for bad in [Bytes::from(delete), long.encode()] {
            assert!(matches!(LockRecord::decode(&bad), Err(Error::Corrupt(_))));
        }
    }

    #[test]
    fn write_round_trip() {
        for kind in [WriteKind::Put, WriteKind::Delete, WriteKind::Rollback] {
            let w = WriteRecord { kind, start_ts: 77 };
            assert_eq!(WriteRecord::decode(&w.encode()).unwrap(), w);
        }
    }

    #[test]
    fn inline_write_round_trip() {
        for value in [&b""[..], b"v", &[7u8; SHORT_VALUE_MAX]] {
            let bytes = WriteRecord::encode_inline(77, value);
            let put = WriteRecord {
                kind: WriteKind::Put,
                start_ts: 77,
            };
            assert_eq!(
                WriteRecord::decode_with_value(&bytes).unwrap(),
                (put, Some(Bytes::copy_from_slice(value)))
            );
            assert_eq!(WriteRecord::decode(&bytes).unwrap(), put);
        }
        let plain = WriteRecord {
            kind: WriteKind::Delete,
            start_ts: 5,
        };
        assert_eq!(
            WriteRecord::decode_with_value(&plain.encode()).unwrap(),
            (plain, None)
        );
        // Only a put carries a value; a cut-short header is corrupt.
        let mut delete_with_value = WriteRecord::encode_inline(5, b"v").to_vec();
        delete_with_value[1] = 2;
        for bad in [delete_with_value, vec![2, 1, 0, 0]] {
            assert!(matches!(
                WriteRecord::decode_with_value(&Bytes::from(bad)),
                Err(Error::Corrupt(_))
            ));
        }
    }

    #[test]
    fn corrupt_records_are_errors() {
        assert!(matches!(
            WriteRecord::decode(&Bytes::from_static(b"")),
            Err(Error::Corrupt(_))
        ));
        assert!(matches!(
            WriteRecord::decode(&Bytes::from_static(&[1, 9, 0, 0, 0, 0, 0, 0, 0, 0])),
            Err(Error::Corrupt(_))
        ));
        let mut lock = LockRecord {
            kind: WriteKind::Put,
            primary: CellAddr::new(&b"t"[..], &b"r"[..], &b"c"[..]),
            owner: 1,
            oracle_ms: 2,
            ttl_ms: 3,
            value: None,
        }
        .encode()
        .to_vec();
        lock[2] = 0xFF; // absurd table length
        assert!(matches!(
            LockRecord::decode(&Bytes::from(lock)),
            Err(Error::Corrupt(_))
        ));
    }

    #[test]
    fn notify_round_trip() {
        let writer = CellAddr::new(&b"t"[..], &b""[..], &b"\x00c"[..]);
        for (writer, committed_at) in [
            (None, None),
            (Some(writer.clone()), None),
            (Some(writer), Some(u64::MAX - 3)),
        ] {
            let n = NotifyRecord {
                writer,
                committed_at,
            };
            assert_eq!(NotifyRecord::decode(&n.encode()).unwrap(), n);
        }
        // A committed writer's record cut before its commit timestamp is corrupt.
        let committed = NotifyRecord {
            writer: Some(CellAddr::new(&b"t"[..], &b"r"[..], &b"c"[..])),
            committed_at: Some(7),
        }
        .encode();
        assert!(matches!(
            NotifyRecord::decode(&committed.slice(..committed.len() - 1)),
            Err(Error::Corrupt(_))
        ));
        assert!(matches!(
            NotifyRecord::decode(&Bytes::from_static(&[1, 7])),
            Err(Error::Corrupt(_))
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let b = Bytes::from(b);
            let _ = LockRecord::decode(&b);
            let _ = WriteRecord::decode(&b);
            let _ = NotifyRecord::decode(&b);
        }
    }
}
