//! Worker liveness: the replacement for the paper's Chubby tokens.
//!
//! Every [`crate::Client`] registers a worker id with a **lease** (a deadline in oracle time,
//! [`crate::oracle::time`]) in the reserved workers table and refreshes it in the background.
//! Locks carry their owner's worker id; a cleaner that finds a lock asks [`Liveness::is_alive`]
//! and may roll the transaction back at once if the owner's lease has run out, without waiting
//! for the lock's own TTL. A crashed process simply stops refreshing, so its lease expires.
//! Deadline and check are both oracle time, so machines whose wall clocks disagree agree on
//! when a lease ran out.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::oracle::OracleClock;
use crate::store::{Columns, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore};
use crate::tables::WORKERS_TABLE;

const LEASE_COLUMN: &[u8] = b"lease_until_ms";

/// Answers whether the worker that owns a lock is still running.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Liveness: Send + Sync + 'static {
    /// Whether `worker` holds a lease that has not run out at oracle time `now_ms`.
    async fn is_alive(&self, worker: u64, now_ms: u64) -> Result<bool>;
}

/// Leases stored in the reserved workers table of a [`RowStore`].
pub struct StoreLiveness<S: RowStore> {
    store: Arc<S>,
}

impl<S: RowStore> StoreLiveness<S> {
    /// Liveness backed by `store`.
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }

    /// Writes (or refreshes) `worker`'s lease to end `lease` from now in oracle time (`clock`).
    pub async fn register(&self, worker: u64, clock: &OracleClock, lease: Duration) -> Result<()> {
        let until = clock
            .now_ms()
            .saturating_add(u64::try_from(lease.as_millis()).unwrap_or(u64::MAX));
        self.store
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(WORKERS_TABLE),
                row: Bytes::copy_from_slice(&worker.to_be_bytes()),
                conditions: vec![],
                mutations: vec![Mutation::Put {
                    family: Family::Data,
                    column: Bytes::from_static(LEASE_COLUMN),
                    ts: 0,
                    value: Bytes::copy_from_slice(&until.to_be_bytes()),
                }],
            }])
            .await?;
        Ok(())
    }

    /// Removes `worker`'s lease (graceful shutdown).
    pub async fn deregister(&self, worker: u64) -> Result<()> {
        self.store
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(WORKERS_TABLE),
                row: Bytes::copy_from_slice(&worker.to_be_bytes()),
                conditions: vec![],
                mutations: vec![Mutation::Delete {
                    family: Family::Data,
                    column: Bytes::from_static(LEASE_COLUMN),
                    ts: 0,
                }],
            }])
            .await?;
        Ok(())
    }
}

#[async_trait]
impl<S: RowStore> Liveness for StoreLiveness<S> {
    async fn is_alive(&self, worker: u64, now_ms: u64) -> Result<bool> {
        let cells = self
            .store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: Bytes::from_static(WORKERS_TABLE),
                row: Bytes::copy_from_slice(&worker.to_be_bytes()),
                reads: vec![
                    FamilyRead::all(Family::Data)
                        .columns(Columns::one(Bytes::from_static(LEASE_COLUMN)))
                        .max_versions(1),
                ],
            })
            .await?;
        let Some(cell) = cells.first().and_then(|c| c.first()) else {
            return Ok(false);
        };
        let bytes: [u8; 8] = cell.value.as_ref().try_into().map_err(|_| {
            Error::Corrupt(format!(
                "worker lease is {} bytes, expected 8",
                cell.value.len()
            ))
        })?;
        Ok(u64::from_be_bytes(bytes) >= now_ms)
    }
}
