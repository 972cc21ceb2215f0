//! The bank-transfer workload: accounts whose total must never change (feature `workload`).
//!
//! Used by the conformance suite's invariant tests, by the crash test of persistent backends and
//! by the `percolator bank` demo (`percolator-cli`). Balances are big-endian `i64`s in column
//! `balance` of one row per account; every committed transfer also writes a receipt row in the
//! `transfers` table, so a crash test can check that each acknowledged transfer survived.

use bytes::Bytes;
use futures::future::BoxFuture;

use crate::error::{Error, Result};
use crate::store::{Columns, RowStore};
use crate::txn::{Client, CommitInfo, Transaction};

/// Table of account balances.
pub const ACCOUNTS: &str = "bank";
/// Column holding a balance.
pub const BALANCE: &str = "balance";
/// Table of transfer receipts (row = transfer id).
pub const TRANSFERS: &str = "transfers";

/// Row key of account `i` (fixed width, so rows sort numerically).
pub fn account_key(i: usize) -> String {
    format!("acct{i:06}")
}

fn decode_balance(value: &Bytes) -> Result<i64> {
    let bytes: [u8; 8] = value
        .as_ref()
        .try_into()
        .map_err(|_| Error::Corrupt(format!("balance is {} bytes, expected 8", value.len())))?;
    Ok(i64::from_be_bytes(bytes))
}

fn encode_balance(v: i64) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

/// Creates `accounts` accounts holding `initial` each, in one transaction.
pub async fn create_accounts<S: RowStore>(
    client: &Client<S>,
    accounts: usize,
    initial: i64,
) -> Result<()> {
    let mut txn = client.begin().await?;
    for i in 0..accounts {
        txn.set(ACCOUNTS, account_key(i), BALANCE, encode_balance(initial))?;
    }
    txn.commit().await?;
    Ok(())
}

/// Moves `amount` from account `from` to account `to` (reads both balances, writes both, plus a
/// receipt row `id`) within `txn`. Does not commit.
pub async fn transfer_in<S: RowStore>(
    txn: &mut Transaction<S>,
    from: usize,
    to: usize,
    amount: i64,
    id: &str,
) -> Result<()> {
    let (fk, tk) = (account_key(from), account_key(to));
    let fb = match txn.get(ACCOUNTS, &fk, BALANCE).await? {
        Some(v) => decode_balance(&v)?,
        None => 0,
    };
    let tb = match txn.get(ACCOUNTS, &tk, BALANCE).await? {
        Some(v) => decode_balance(&v)?,
        None => 0,
    };
    txn.set(ACCOUNTS, &fk, BALANCE, encode_balance(fb - amount))?;
    txn.set(ACCOUNTS, &tk, BALANCE, encode_balance(tb + amount))?;
    txn.set(
        TRANSFERS,
        id,
        "receipt",
        Bytes::from(format!("{from}->{to}:{amount}")),
    )?;
    Ok(())
}

/// One transfer in its own transaction, without retries.
pub async fn transfer_once<S: RowStore>(
    client: &Client<S>,
    from: usize,
    to: usize,
    amount: i64,
    id: &str,
) -> Result<CommitInfo> {
    let mut txn = client.begin().await?;
    transfer_in(&mut txn, from, to, amount, id).await?;
    txn.commit().await
}

/// One transfer, re-run on conflicts by [`Client::run`].
pub async fn transfer<S: RowStore>(
    client: &Client<S>,
    from: usize,
    to: usize,
    amount: i64,
    id: &str,
) -> Result<()> {
    let id = id.to_owned();
    client
        .run(|txn| -> BoxFuture<'_, Result<()>> {
            let id = id.clone();
            Box::pin(async move { transfer_in(txn, from, to, amount, &id).await })
        })
        .await
}

/// The sum of all balances and the number of accounts, read in one snapshot scan.
pub async fn total<S: RowStore>(client: &Client<S>) -> Result<(i64, usize)> {
    let txn = client.begin().await?;
    let cells = txn
        .scan::<&[u8]>(ACCOUNTS, .., Columns::one(BALANCE))
        .await?;
    let mut sum = 0i64;
    for cell in &cells {
        sum += decode_balance(&cell.value)?;
    }
    Ok((sum, cells.len()))
}

/// Whether a receipt for transfer `id` is committed.
pub async fn receipt_exists<S: RowStore>(client: &Client<S>, id: &str) -> Result<bool> {
    let txn = client.begin().await?;
    Ok(txn.get(TRANSFERS, id, "receipt").await?.is_some())
}
