//! The brokerage schema: tables, row keys, record encoding and the scale rules.
//!
//! Every table keeps one record per row in a single column; a record is a fixed list of `i64`
//! fields, big-endian. Row keys are big-endian ids, so rows sort numerically and a composite key
//! (`account | security`) is a prefix scan away from its parent. Secondary indexes are tables of
//! their own whose rows are `index key | primary key`; the transactions that write a base row
//! write its index rows too, in the same transaction (Percolator gives no other way, and none is
//! needed: the index is exactly as consistent as the data).

use bytes::{BufMut, Bytes, BytesMut};
use percolator_core::{Error, Result};

/// Column holding each row's record.
pub const COLUMN: &str = "v";

/// The tables (TPC-E names where there is one).
pub mod table {
    /// `c_id` → [tier, accounts].
    pub const CUSTOMER: &str = "tpce_customer";
    /// `ca_id` → [c_id, b_id, balance (cents)].
    pub const ACCOUNT: &str = "tpce_account";
    /// `b_id` → [trades, commission (cents)]: the aggregated part of the broker hot spot.
    pub const BROKER: &str = "tpce_broker";
    /// `b_id | t_id` → `[commission]`: one increment per trade result, folded into `BROKER` by
    /// the aggregator (paper §3.3: increments in a side table, aggregated periodically).
    pub const BROKER_DELTA: &str = "tpce_broker_delta";
    /// `co_id` → [industry, founded].
    pub const COMPANY: &str = "tpce_company";
    /// `s_id` → [co_id, exchange, shares outstanding].
    pub const SECURITY: &str = "tpce_security";
    /// `s_id` → [price (cents), volume, updated (µs)].
    pub const LAST_TRADE: &str = "tpce_last_trade";
    /// `t_id` → the trade (see [`super::Trade`]).
    pub const TRADE: &str = "tpce_trade";
    /// `t_id | status` → [when (µs)].
    pub const TRADE_HISTORY: &str = "tpce_trade_history";
    /// `t_id` → [ca_id, s_id, submitted (µs)]: a submitted order waiting for the market. The
    /// market emulator observes this table.
    pub const TRADE_REQUEST: &str = "tpce_trade_request";
    /// `ca_id | s_id | t_id` → [quantity, price]: one lot per executed trade (negative for sells).
    pub const HOLDING: &str = "tpce_holding";
    /// `ca_id | s_id` → `[quantity]`: the sum of the account's lots of the security.
    pub const HOLDING_SUMMARY: &str = "tpce_holding_summary";
    /// `t_id` → [amount (cents), due (µs)].
    pub const SETTLEMENT: &str = "tpce_settlement";
    /// `t_id` → [amount (cents)]: the cash movement of the trade on its account.
    pub const CASH_TRANSACTION: &str = "tpce_cash_transaction";
    /// `c_id | s_id` → []: the customer's watch list.
    pub const WATCH_ITEM: &str = "tpce_watch_item";
    /// Index: `ca_id | !t_id` → `[s_id]` (newest trade first).
    pub const TRADE_BY_ACCOUNT: &str = "tpce_idx_trade_account";
    /// Index: `s_id | !t_id` → `[ca_id]` (newest trade first).
    pub const TRADE_BY_SECURITY: &str = "tpce_idx_trade_security";
    /// Index: `c_id | ca_id` → [].
    pub const ACCOUNT_BY_CUSTOMER: &str = "tpce_idx_account_customer";
}

/// Trade status: submitted, waiting for the market emulator.
pub const STATUS_SUBMITTED: i64 = 0;
/// Trade status: executed by Trade-Result.
pub const STATUS_COMPLETED: i64 = 1;

/// Cash every account starts with, in cents.
pub const INITIAL_BALANCE: i64 = 100_000_000;
/// Shares of each initial holding.
pub const INITIAL_QUANTITY: i64 = 1_000;
/// Initial holdings per account.
pub const HOLDINGS_PER_ACCOUNT: u64 = 4;
/// Accounts per customer (TPC-E: 1 to 10, 5 on average).
pub const ACCOUNTS_PER_CUSTOMER: u64 = 5;
/// Securities on each customer's watch list.
pub const WATCH_ITEMS: u64 = 10;
/// Historical trades loaded per account, so that lookups find something from the start.
pub const HISTORY_PER_ACCOUNT: u64 = 2;

/// Table sizes, derived from the customer count by TPC-E's ratios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Scale {
    /// Customers (TPC-E: 500 per tpsE of the rated throughput... we load this many).
    pub customers: u64,
    /// Accounts (5 per customer).
    pub accounts: u64,
    /// Brokers (1 per 100 customers).
    pub brokers: u64,
    /// Securities (685 per 1 000 customers).
    pub securities: u64,
    /// Companies (500 per 1 000 customers).
    pub companies: u64,
}

impl Scale {
    /// The scale of `customers` customers.
    pub fn of(customers: u64) -> Self {
        let customers = customers.max(10);
        Self {
            customers,
            accounts: customers * ACCOUNTS_PER_CUSTOMER,
            brokers: (customers / 100).max(1),
            securities: (customers * 685 / 1_000).max(20),
            companies: (customers * 500 / 1_000).max(10),
        }
    }

    /// The broker of account `ca_id`.
    pub fn broker_of(&self, ca_id: u64) -> u64 {
        ca_id % self.brokers
    }

    /// The customer owning account `ca_id`.
    pub fn customer_of(&self, ca_id: u64) -> u64 {
        ca_id / ACCOUNTS_PER_CUSTOMER
    }

    /// The company issuing security `s_id`.
    pub fn company_of(&self, s_id: u64) -> u64 {
        s_id % self.companies
    }

    /// The `i`th initial holding of account `ca_id` (distinct for `i < HOLDINGS_PER_ACCOUNT`).
    pub fn initial_holding(&self, ca_id: u64, i: u64) -> u64 {
        (ca_id.wrapping_mul(7_919) + i * (self.securities / HOLDINGS_PER_ACCOUNT).max(1))
            % self.securities
    }

    /// The `i`th watch-list entry of customer `c_id`.
    pub fn watch_item(&self, c_id: u64, i: u64) -> u64 {
        (c_id.wrapping_mul(104_729) + i * (self.securities / WATCH_ITEMS).max(1)) % self.securities
    }

    /// Historical trades, numbered `0..history_trades()`; live trades get higher ids.
    pub fn history_trades(&self) -> u64 {
        self.accounts * HISTORY_PER_ACCOUNT
    }
}

/// A row key made of big-endian ids.
pub fn key(ids: &[u64]) -> Bytes {
    let mut out = BytesMut::with_capacity(ids.len() * 8);
    for id in ids {
        out.put_u64(*id);
    }
    out.freeze()
}

/// The id at position `index` of a composite key.
pub fn key_part(key: &[u8], index: usize) -> Result<u64> {
    key.get(index * 8..index * 8 + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| Error::Corrupt(format!("key {key:?} has no part {index}")))
}

/// Encodes a record.
pub fn record(fields: &[i64]) -> Bytes {
    let mut out = BytesMut::with_capacity(fields.len() * 8);
    for f in fields {
        out.put_i64(*f);
    }
    out.freeze()
}

/// Decodes a record of exactly `N` fields.
pub fn fields<const N: usize>(table: &str, bytes: &[u8]) -> Result<[i64; N]> {
    if bytes.len() != N * 8 {
        return Err(Error::Corrupt(format!(
            "{table} record has {} bytes, expected {}",
            bytes.len(),
            N * 8
        )));
    }
    let mut out = [0; N];
    for (i, chunk) in bytes.chunks_exact(8).enumerate() {
        let mut raw = [0; 8];
        raw.copy_from_slice(chunk);
        out[i] = i64::from_be_bytes(raw);
    }
    Ok(out)
}

/// Converts a stored id field back to an id.
pub fn id(value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::Corrupt(format!("negative id {value}")))
}

/// A trade row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trade {
    /// Account.
    pub ca_id: u64,
    /// Security.
    pub s_id: u64,
    /// Shares.
    pub quantity: i64,
    /// Buy (true) or sell.
    pub is_buy: bool,
    /// [`STATUS_SUBMITTED`] or [`STATUS_COMPLETED`].
    pub status: i64,
    /// Execution price in cents (the bid price until executed).
    pub price: i64,
    /// Commission in cents (0 until executed).
    pub commission: i64,
    /// Wall time of submission, µs.
    pub submitted_us: i64,
    /// Times Trade-Update changed the executor's name.
    pub updates: i64,
}

impl Trade {
    /// Encodes the trade.
    pub fn encode(&self) -> Bytes {
        record(&[
            self.ca_id as i64,
            self.s_id as i64,
            self.quantity,
            i64::from(self.is_buy),
            self.status,
            self.price,
            self.commission,
            self.submitted_us,
            self.updates,
        ])
    }

    /// Decodes a trade.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let [
            ca,
            s,
            quantity,
            buy,
            status,
            price,
            commission,
            submitted_us,
            updates,
        ] = fields::<9>(table::TRADE, bytes)?;
        Ok(Self {
            ca_id: id(ca)?,
            s_id: id(s)?,
            quantity,
            is_buy: buy != 0,
            status,
            price,
            commission,
            submitted_us,
            updates,
        })
    }

    /// The trade's gross amount in cents.
    pub fn amount(&self) -> i64 {
        self.quantity * self.price
    }

    /// The change to the account's cash once executed: buyers pay amount plus commission,
    /// sellers receive amount minus commission.
    pub fn cash_delta(&self) -> i64 {
        if self.is_buy {
            -(self.amount() + self.commission)
        } else {
            self.amount() - self.commission
        }
    }

    /// The change to the account's holding of the security once executed.
    pub fn quantity_delta(&self) -> i64 {
        if self.is_buy {
            self.quantity
        } else {
            -self.quantity
        }
    }
}

/// Commission on `amount` cents: 0.1%, at least one cent.
pub fn commission_of(amount: i64) -> i64 {
    (amount / 1_000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_keys_round_trip() {
        let t = Trade {
            ca_id: 7,
            s_id: 3,
            quantity: 200,
            is_buy: false,
            status: STATUS_COMPLETED,
            price: 1234,
            commission: 246,
            submitted_us: 99,
            updates: 1,
        };
        assert_eq!(Trade::decode(&t.encode()).unwrap(), t);
        assert_eq!(t.cash_delta(), 200 * 1234 - 246);
        assert_eq!(t.quantity_delta(), -200);
        let k = key(&[5, 9]);
        assert_eq!(key_part(&k, 1).unwrap(), 9);
        assert!(key_part(&k, 2).is_err());
        assert!(fields::<2>("x", &record(&[1])).is_err());
        assert!(Trade::decode(b"short").is_err());
    }

    #[test]
    fn scale_follows_tpce_ratios() {
        let s = Scale::of(1_000);
        assert_eq!(
            (s.accounts, s.brokers, s.securities, s.companies),
            (5_000, 10, 685, 500)
        );
        let holdings: std::collections::BTreeSet<u64> = (0..HOLDINGS_PER_ACCOUNT)
            .map(|i| s.initial_holding(42, i))
            .collect();
        assert_eq!(holdings.len() as u64, HOLDINGS_PER_ACCOUNT);
    }
}
