//! The peer baseline on fjall: the same frames on fjall's own optimistic transactions
//! (`OptimisticTxDatabase`), one keyspace holding every table (`table \0 row`, as on sled).
//!
//! **Isolation.** Read-write frames run in a fjall write transaction: serializable (fjall checks
//! the keys and ranges a transaction read against what committed since its snapshot, and a
//! conflict retries the frame). Read-only frames read one fjall snapshot: a consistent point in
//! time, which is what Percolator's snapshot gives them. Percolator gives snapshot isolation to
//! both, so the peer's isolation is at least ours; it never runs a frame without a transaction
//! or a snapshot (the sled peer's read-only frames read the tree directly).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use fjall::{
    KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace, OptimisticWriteTx, Readable,
    Snapshot,
};
use percolator_core::{Error, Result};

use super::check::{self, InvariantReport};
use super::engine::{Executed, MAX_ATTEMPTS};
use super::frames::{self, TxnInput};
use super::kv::{Kv, sled_key};
use super::market::Market;
use super::peer::{Peer, PeerCore, empty_dir};
use super::schema::Scale;

fn io(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Application(format!("fjall {what}: {e}"))
}

/// How a frame reaches fjall.
enum Access<'a> {
    /// A read-only frame: one snapshot.
    Snapshot(&'a Snapshot),
    /// A read-write frame: a write transaction.
    Transaction(&'a mut OptimisticWriteTx),
}

/// The frames on fjall.
struct FjallKv<'a> {
    access: Access<'a>,
    keyspace: &'a OptimisticTxKeyspace,
}

impl FjallKv<'_> {
    fn read(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let got = match &self.access {
            Access::Snapshot(snapshot) => snapshot.get(self.keyspace, key),
            Access::Transaction(tx) => tx.get(self.keyspace, key),
        };
        Ok(got
            .map_err(|e| io("read", e))?
            .map(|v| Bytes::copy_from_slice(&v)))
    }

    fn transaction(&mut self) -> Result<&mut OptimisticWriteTx> {
        match &mut self.access {
            Access::Transaction(tx) => Ok(tx),
            Access::Snapshot(_) => Err(Error::InvalidInput(
                "a read-only fjall frame tried to write".into(),
            )),
        }
    }
}

impl Kv for FjallKv<'_> {
    async fn get(&mut self, table: &'static str, row: &[u8]) -> Result<Option<Bytes>> {
        self.read(&sled_key(table, row))
    }

    async fn scan_prefix(
        &mut self,
        table: &'static str,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let start = sled_key(table, prefix);
        let iter = match &self.access {
            Access::Snapshot(snapshot) => snapshot.prefix(self.keyspace, &start),
            Access::Transaction(tx) => tx.prefix(self.keyspace, &start),
        };
        let skip = table.len() + 1;
        let mut out = Vec::new();
        for guard in iter.take(limit) {
            let (key, value) = guard.into_inner().map_err(|e| io("scan", e))?;
            out.push((
                Bytes::copy_from_slice(key.get(skip..).unwrap_or_default()),
                Bytes::copy_from_slice(&value),
            ));
        }
        Ok(out)
    }

    fn put(&mut self, table: &'static str, row: &[u8], value: Bytes) -> Result<()> {
        let keyspace = self.keyspace;
        self.transaction()?
            .insert(keyspace, sled_key(table, row), value.as_ref());
        Ok(())
    }

    fn delete(&mut self, table: &'static str, row: &[u8]) -> Result<()> {
        let keyspace = self.keyspace;
        self.transaction()?.remove(keyspace, sled_key(table, row));
        Ok(())
    }
}

/// The fjall peer's state (see [`FjallPeer`]).
pub struct FjallShared {
    db: OptimisticTxDatabase,
    keyspace: OptimisticTxKeyspace,
    scale: Scale,
}

impl PeerCore for FjallShared {
    fn name(&self) -> String {
        "fjall transactions (peer)".into()
    }

    async fn execute(&self, input: &TxnInput) -> Result<Executed> {
        if input.kind().is_read_only() {
            let snapshot = self.db.read_tx();
            let mut kv = FjallKv {
                access: Access::Snapshot(&snapshot),
                keyspace: &self.keyspace,
            };
            let output = futures::executor::block_on(frames::run(&mut kv, input, &self.scale))?;
            return Ok(Executed {
                output,
                attempts: 1,
            });
        }
        for attempts in 1..=MAX_ATTEMPTS {
            let mut tx = self.db.write_tx().map_err(|e| io("begin", e))?;
            let mut kv = FjallKv {
                access: Access::Transaction(&mut tx),
                keyspace: &self.keyspace,
            };
            let output = futures::executor::block_on(frames::run(&mut kv, input, &self.scale))?;
            match tx.commit().map_err(|e| io("commit", e))? {
                Ok(()) => return Ok(Executed { output, attempts }),
                Err(_conflict) => continue,
            }
        }
        Err(Error::Application(format!(
            "fjall: still conflicting after {MAX_ATTEMPTS} attempts"
        )))
    }

    async fn verify(&self) -> Result<InvariantReport> {
        let snapshot = self.db.read_tx();
        let mut kv = FjallKv {
            access: Access::Snapshot(&snapshot),
            keyspace: &self.keyspace,
        };
        futures::executor::block_on(check::verify(&mut kv, &self.scale))
    }

    async fn close(&self) -> Result<()> {
        self.db
            .persist(fjall::PersistMode::SyncAll)
            .map_err(|e| io("persist", e))
    }
}

/// The peer baseline on fjall's own transactions.
pub type FjallPeer = Peer<FjallShared>;

impl Peer<FjallShared> {
    /// Opens (emptied first) a fjall database at `path` and starts `executors` Trade-Result
    /// tasks.
    pub fn open_fjall(
        path: &Path,
        scale: Scale,
        market: Arc<Market>,
        executors: usize,
    ) -> Result<Self> {
        empty_dir(path)?;
        let db = OptimisticTxDatabase::builder(path)
            .open()
            .map_err(|e| io(&format!("opening {}", path.display()), e))?;
        let keyspace = db
            .keyspace("tpce", KeyspaceCreateOptions::default)
            .map_err(|e| io("opening the keyspace", e))?;
        let core = FjallShared {
            db,
            keyspace,
            scale,
        };
        Ok(Peer::start(core, market, executors))
    }
}
