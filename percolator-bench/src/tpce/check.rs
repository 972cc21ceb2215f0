//! End-of-run invariants: every submitted trade was executed exactly once, and cash, holdings
//! and broker totals agree with the executed trades. Read in one transaction (for Percolator one
//! snapshot) after the market emulator drained.

use std::collections::BTreeMap;

use percolator_core::Result;
use serde::Serialize;

use super::kv::Kv;
use super::schema::{
    HOLDINGS_PER_ACCOUNT, INITIAL_BALANCE, INITIAL_QUANTITY, STATUS_COMPLETED, Scale, Trade,
    fields, key_part, table,
};

/// What the check found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InvariantReport {
    /// Live (non-historical) trades examined.
    pub trades: u64,
    /// Accounts whose balance was checked.
    pub accounts: u64,
    /// Holding summaries checked against trades and lots.
    pub holdings: u64,
    /// Brokers checked.
    pub brokers: u64,
    /// Up to 10 violations, described.
    pub violations: Vec<String>,
    /// Total violations.
    pub violation_count: u64,
}

impl InvariantReport {
    /// Whether every invariant held.
    pub fn ok(&self) -> bool {
        self.violation_count == 0
    }

    fn violation(&mut self, what: String) {
        self.violation_count += 1;
        if self.violations.len() < 10 {
            self.violations.push(what);
        }
    }
}

async fn all<K: Kv>(kv: &mut K, table: &'static str) -> Result<Vec<(bytes::Bytes, bytes::Bytes)>> {
    kv.scan_prefix(table, b"", usize::MAX).await
}

/// Checks every invariant.
pub async fn verify<K: Kv>(kv: &mut K, scale: &Scale) -> Result<InvariantReport> {
    let mut report = InvariantReport::default();
    let mut cash: BTreeMap<u64, i64> = BTreeMap::new();
    let mut shares: BTreeMap<(u64, u64), i64> = BTreeMap::new();
    let mut brokers: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
    let mut cash_by_trade: BTreeMap<u64, i64> = BTreeMap::new();
    for (row, value) in all(kv, table::TRADE).await? {
        let t_id = key_part(&row, 0)?;
        if t_id < scale.history_trades() {
            continue;
        }
        report.trades += 1;
        let trade = Trade::decode(&value)?;
        if trade.status != STATUS_COMPLETED {
            report.violation(format!("trade {t_id} was never executed"));
            continue;
        }
        *cash.entry(trade.ca_id).or_default() += trade.cash_delta();
        *shares.entry((trade.ca_id, trade.s_id)).or_default() += trade.quantity_delta();
        let b = brokers.entry(scale.broker_of(trade.ca_id)).or_default();
        b.0 += 1;
        b.1 += trade.commission;
        cash_by_trade.insert(t_id, trade.cash_delta());
    }
    for (row, _) in all(kv, table::TRADE_REQUEST).await? {
        let t_id = key_part(&row, 0)?;
        if !cash_by_trade.contains_key(&t_id) {
            report.violation(format!("request {t_id} has no executed trade"));
        }
    }
    for (row, value) in all(kv, table::CASH_TRANSACTION).await? {
        let t_id = key_part(&row, 0)?;
        let [amount] = fields::<1>(table::CASH_TRANSACTION, &value)?;
        if cash_by_trade.get(&t_id) != Some(&amount) {
            report.violation(format!("cash transaction of trade {t_id} is {amount}"));
        }
    }
    for (row, value) in all(kv, table::ACCOUNT).await? {
        let ca_id = key_part(&row, 0)?;
        report.accounts += 1;
        let [_, _, balance] = fields::<3>(table::ACCOUNT, &value)?;
        let expected = INITIAL_BALANCE + cash.get(&ca_id).copied().unwrap_or(0);
        if balance != expected {
            report.violation(format!(
                "account {ca_id} holds {balance}, trades say {expected}"
            ));
        }
    }
    for ca_id in 0..scale.accounts {
        for i in 0..HOLDINGS_PER_ACCOUNT {
            *shares
                .entry((ca_id, scale.initial_holding(ca_id, i)))
                .or_default() += INITIAL_QUANTITY;
        }
    }
    let mut lots: BTreeMap<(u64, u64), i64> = BTreeMap::new();
    for (row, value) in all(kv, table::HOLDING).await? {
        let [quantity, _] = fields::<2>(table::HOLDING, &value)?;
        *lots
            .entry((key_part(&row, 0)?, key_part(&row, 1)?))
            .or_default() += quantity;
    }
    let mut summaries: BTreeMap<(u64, u64), i64> = BTreeMap::new();
    for (row, value) in all(kv, table::HOLDING_SUMMARY).await? {
        let [quantity] = fields::<1>(table::HOLDING_SUMMARY, &value)?;
        summaries.insert((key_part(&row, 0)?, key_part(&row, 1)?), quantity);
    }
    for (position, expected) in &shares {
        report.holdings += 1;
        let summary = summaries.get(position).copied().unwrap_or(0);
        let lot_sum = lots.get(position).copied().unwrap_or(0);
        if summary != *expected || lot_sum != *expected {
            report.violation(format!(
                "holding {position:?}: summary {summary}, lots {lot_sum}, trades say {expected}"
            ));
        }
    }
    if summaries.keys().any(|p| !shares.contains_key(p)) {
        report.violation("a holding summary exists without trades or opening position".into());
    }
    let mut recorded: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
    for (row, value) in all(kv, table::BROKER).await? {
        let [trades, commission] = fields::<2>(table::BROKER, &value)?;
        recorded.insert(key_part(&row, 0)?, (trades, commission));
    }
    for (row, value) in all(kv, table::BROKER_DELTA).await? {
        let [commission] = fields::<1>(table::BROKER_DELTA, &value)?;
        let b = recorded.entry(key_part(&row, 0)?).or_default();
        b.0 += 1;
        b.1 += commission;
    }
    for b_id in 0..scale.brokers {
        report.brokers += 1;
        let got = recorded.get(&b_id).copied().unwrap_or_default();
        let expected = brokers.get(&b_id).copied().unwrap_or_default();
        if got != expected {
            report.violation(format!(
                "broker {b_id}: (trades, commission) {got:?}, trades say {expected:?}"
            ));
        }
    }
    Ok(report)
}
