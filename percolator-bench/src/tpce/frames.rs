//! The TPC-E transactions, written once against [`Kv`]: their inputs (drawn before the
//! transaction starts, so a retry repeats the same work) and their reads and writes.
//!
//! Simplified from the specification the way the paper's implementation is: no limit orders, one
//! lot per executed trade, short positions allowed (TPC-E allows them too), and no frame-level
//! business rules beyond what the end-of-run invariants check — cash, holdings and broker
//! totals consistent with the executed trades.

use std::collections::HashMap;

use bytes::Bytes;
use percolator_core::{Error, Result};
use rand::Rng;

use super::kv::Kv;
use super::schema::{
    self, STATUS_COMPLETED, STATUS_SUBMITTED, Scale, Trade, commission_of, fields, key, key_part,
    record, table,
};

/// The transaction types of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum TxnKind {
    /// Status of an account's 50 most recent trades.
    TradeStatus,
    /// Prices of a customer's watch list.
    MarketWatch,
    /// A security, its company, price and recent trades.
    SecurityDetail,
    /// A customer's accounts, holdings and their value.
    CustomerPosition,
    /// Submits a trade.
    TradeOrder,
    /// Executes a submitted trade (the market emulator).
    TradeResult,
    /// Reads a batch of past trades.
    TradeLookup,
    /// Trade totals of a few brokers.
    BrokerVolume,
    /// Rewrites a few past trades.
    TradeUpdate,
    /// New prices for recently traded securities (the market emulator).
    MarketFeed,
    /// Folds the broker side table into the broker rows (maintenance, not in the mix).
    BrokerAggregate,
}

impl TxnKind {
    /// Every kind, in report order.
    pub const ALL: [TxnKind; 11] = [
        TxnKind::TradeStatus,
        TxnKind::MarketWatch,
        TxnKind::SecurityDetail,
        TxnKind::CustomerPosition,
        TxnKind::TradeOrder,
        TxnKind::TradeResult,
        TxnKind::TradeLookup,
        TxnKind::BrokerVolume,
        TxnKind::TradeUpdate,
        TxnKind::MarketFeed,
        TxnKind::BrokerAggregate,
    ];

    /// Dense index into [`Self::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// TPC-E's name.
    pub fn name(self) -> &'static str {
        match self {
            TxnKind::TradeStatus => "Trade-Status",
            TxnKind::MarketWatch => "Market-Watch",
            TxnKind::SecurityDetail => "Security-Detail",
            TxnKind::CustomerPosition => "Customer-Position",
            TxnKind::TradeOrder => "Trade-Order",
            TxnKind::TradeResult => "Trade-Result",
            TxnKind::TradeLookup => "Trade-Lookup",
            TxnKind::BrokerVolume => "Broker-Volume",
            TxnKind::TradeUpdate => "Trade-Update",
            TxnKind::MarketFeed => "Market-Feed",
            TxnKind::BrokerAggregate => "broker aggregation",
        }
    }

    /// TPC-E's target share of the mix, in percent (0 for maintenance).
    pub fn target_percent(self) -> f64 {
        match self {
            TxnKind::TradeStatus => 19.0,
            TxnKind::MarketWatch => 18.0,
            TxnKind::SecurityDetail => 14.0,
            TxnKind::CustomerPosition => 13.0,
            TxnKind::TradeOrder => 10.1,
            TxnKind::TradeResult => 10.0,
            TxnKind::TradeLookup => 8.0,
            TxnKind::BrokerVolume => 4.9,
            TxnKind::TradeUpdate => 2.0,
            TxnKind::MarketFeed => 1.0,
            TxnKind::BrokerAggregate => 0.0,
        }
    }

    /// Whether the type only reads.
    pub fn is_read_only(self) -> bool {
        matches!(
            self,
            TxnKind::TradeStatus
                | TxnKind::MarketWatch
                | TxnKind::SecurityDetail
                | TxnKind::CustomerPosition
                | TxnKind::TradeLookup
                | TxnKind::BrokerVolume
        )
    }

    /// The kinds the customer emulator (the driver) issues; Trade-Result and Market-Feed come
    /// from the market emulator.
    pub const DRIVEN: [TxnKind; 8] = [
        TxnKind::TradeStatus,
        TxnKind::MarketWatch,
        TxnKind::SecurityDetail,
        TxnKind::CustomerPosition,
        TxnKind::TradeOrder,
        TxnKind::TradeLookup,
        TxnKind::BrokerVolume,
        TxnKind::TradeUpdate,
    ];
}

/// One transaction's inputs (field names are TPC-E's: `ca_id` account, `c_id` customer, `s_id`
/// security, `t_id` trade, `b_id` broker).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnInput {
    /// Account.
    TradeStatus { ca_id: u64 },
    /// Customer.
    MarketWatch { c_id: u64 },
    /// Security.
    SecurityDetail { s_id: u64 },
    /// Customer.
    CustomerPosition { c_id: u64 },
    /// A new trade `t_id` (`now_us`: submission time).
    TradeOrder {
        t_id: u64,
        ca_id: u64,
        s_id: u64,
        quantity: i64,
        is_buy: bool,
        now_us: i64,
    },
    /// The submitted trade to execute.
    TradeResult { t_id: u64, now_us: i64 },
    /// Past trades.
    TradeLookup { t_ids: Vec<u64> },
    /// Brokers.
    BrokerVolume { b_ids: Vec<u64> },
    /// Past trades to rewrite.
    TradeUpdate { t_ids: Vec<u64> },
    /// Securities and the price move of each, in cents.
    MarketFeed { ticks: Vec<(u64, i64)>, now_us: i64 },
    /// Broker whose side-table increments to fold in.
    BrokerAggregate { b_id: u64 },
    /// Initial population: customers `lo..hi` with their accounts, holdings and history (and,
    /// with `market`, the brokers, companies, securities and prices).
    Load { lo: u64, hi: u64, market: bool },
}

impl TxnInput {
    /// The input's kind.
    pub fn kind(&self) -> TxnKind {
        match self {
            TxnInput::TradeStatus { .. } => TxnKind::TradeStatus,
            TxnInput::MarketWatch { .. } => TxnKind::MarketWatch,
            TxnInput::SecurityDetail { .. } => TxnKind::SecurityDetail,
            TxnInput::CustomerPosition { .. } => TxnKind::CustomerPosition,
            TxnInput::TradeOrder { .. } => TxnKind::TradeOrder,
            TxnInput::TradeResult { .. } => TxnKind::TradeResult,
            TxnInput::TradeLookup { .. } => TxnKind::TradeLookup,
            TxnInput::BrokerVolume { .. } => TxnKind::BrokerVolume,
            TxnInput::TradeUpdate { .. } => TxnKind::TradeUpdate,
            TxnInput::MarketFeed { .. } => TxnKind::MarketFeed,
            TxnInput::BrokerAggregate { .. } | TxnInput::Load { .. } => TxnKind::BrokerAggregate,
        }
    }
}

/// What a frame reports back to the emulators.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameOutput {
    /// Trade-Order: the submitted trade. Trade-Result: the executed trade (`None`: it was
    /// executed already).
    pub trade: Option<(u64, u64)>,
    /// Rows read (a measure of the work done).
    pub rows_read: usize,
}

/// How inputs are drawn: uniformly, or skewed towards hot customers and securities.
pub trait KeyChooser: Send + Sync {
    /// A number in `0..n`.
    fn pick(&self, rng: &mut dyn rand::RngCore, n: u64) -> u64;
}

/// Uniform choice.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uniform;

impl KeyChooser for Uniform {
    fn pick(&self, rng: &mut dyn rand::RngCore, n: u64) -> u64 {
        rng.random_range(0..n.max(1))
    }
}

/// Draws the inputs of one driver transaction of `kind`. `next_trade` hands out new trade ids;
/// `live_trades` is the range of trade ids that may exist.
pub fn draw(
    kind: TxnKind,
    scale: &Scale,
    chooser: &dyn KeyChooser,
    rng: &mut dyn rand::RngCore,
    next_trade: &dyn Fn() -> u64,
    trades_below: u64,
    now_us: i64,
) -> TxnInput {
    let account = |rng: &mut dyn rand::RngCore| chooser.pick(rng, scale.accounts);
    let some_trades = |rng: &mut dyn rand::RngCore, n: usize| {
        (0..n)
            .map(|_| rng.random_range(0..trades_below.max(1)))
            .collect::<Vec<_>>()
    };
    match kind {
        TxnKind::TradeStatus => TxnInput::TradeStatus {
            ca_id: account(rng),
        },
        TxnKind::MarketWatch => TxnInput::MarketWatch {
            c_id: chooser.pick(rng, scale.customers),
        },
        TxnKind::SecurityDetail => TxnInput::SecurityDetail {
            s_id: chooser.pick(rng, scale.securities),
        },
        TxnKind::CustomerPosition => TxnInput::CustomerPosition {
            c_id: chooser.pick(rng, scale.customers),
        },
        TxnKind::TradeOrder => TxnInput::TradeOrder {
            t_id: next_trade(),
            ca_id: account(rng),
            s_id: chooser.pick(rng, scale.securities),
            quantity: 100 * rng.random_range(1..=8),
            is_buy: rng.random_bool(0.5),
            now_us,
        },
        TxnKind::TradeLookup => TxnInput::TradeLookup {
            t_ids: some_trades(rng, 10),
        },
        TxnKind::BrokerVolume => TxnInput::BrokerVolume {
            b_ids: (0..5).map(|_| rng.random_range(0..scale.brokers)).collect(),
        },
        TxnKind::TradeUpdate => TxnInput::TradeUpdate {
            t_ids: some_trades(rng, 3),
        },
        TxnKind::TradeResult | TxnKind::MarketFeed | TxnKind::BrokerAggregate => {
            // Not driven; a harmless read-only stand-in keeps this function total.
            TxnInput::SecurityDetail {
                s_id: chooser.pick(rng, scale.securities),
            }
        }
    }
}

/// Runs the frames of `input` on `kv`. Does not commit.
pub async fn run<K: Kv>(kv: &mut K, input: &TxnInput, scale: &Scale) -> Result<FrameOutput> {
    let mut out = FrameOutput::default();
    match input {
        TxnInput::TradeStatus { ca_id } => {
            let _account = need(kv, table::ACCOUNT, &key(&[*ca_id]), &mut out).await?;
            let recent = kv
                .scan_prefix(table::TRADE_BY_ACCOUNT, &key(&[*ca_id]), 50)
                .await?;
            let trades = recent
                .iter()
                .map(|(row, _)| Ok((table::TRADE, key(&[!key_part(row, 1)?]))))
                .collect::<Result<Vec<_>>>()?;
            need_many(kv, &trades, &mut out).await?;
        }
        TxnInput::MarketWatch { c_id } => {
            let items = kv
                .scan_prefix(table::WATCH_ITEM, &key(&[*c_id]), 100)
                .await?;
            let prices = items
                .iter()
                .map(|(row, _)| Ok((table::LAST_TRADE, key(&[key_part(row, 1)?]))))
                .collect::<Result<Vec<_>>>()?;
            need_many(kv, &prices, &mut out).await?;
        }
        TxnInput::SecurityDetail { s_id } => {
            let security = need(kv, table::SECURITY, &key(&[*s_id]), &mut out).await?;
            let [co_id, _, _] = fields::<3>(table::SECURITY, &security)?;
            let rows = [
                (table::COMPANY, key(&[schema::id(co_id)?])),
                (table::LAST_TRADE, key(&[*s_id])),
            ];
            need_many(kv, &rows, &mut out).await?;
            let recent = kv
                .scan_prefix(table::TRADE_BY_SECURITY, &key(&[*s_id]), 5)
                .await?;
            out.rows_read += recent.len();
        }
        TxnInput::CustomerPosition { c_id } => {
            need(kv, table::CUSTOMER, &key(&[*c_id]), &mut out).await?;
            let accounts = kv
                .scan_prefix(table::ACCOUNT_BY_CUSTOMER, &key(&[*c_id]), 10)
                .await?;
            let ca_ids = accounts
                .iter()
                .map(|(row, _)| key_part(row, 1))
                .collect::<Result<Vec<_>>>()?;
            let rows: Vec<_> = ca_ids
                .iter()
                .map(|ca_id| (table::ACCOUNT, key(&[*ca_id])))
                .collect();
            need_many(kv, &rows, &mut out).await?;
            let mut prices = Vec::new();
            for ca_id in ca_ids {
                let holdings = kv
                    .scan_prefix(table::HOLDING_SUMMARY, &key(&[ca_id]), 100)
                    .await?;
                for (row, _) in holdings {
                    prices.push((table::LAST_TRADE, key(&[key_part(&row, 1)?])));
                }
            }
            need_many(kv, &prices, &mut out).await?;
        }
        TxnInput::TradeOrder {
            t_id,
            ca_id,
            s_id,
            quantity,
            is_buy,
            now_us,
        } => {
            let account = need(kv, table::ACCOUNT, &key(&[*ca_id]), &mut out).await?;
            let [c_id, _, _] = fields::<3>(table::ACCOUNT, &account)?;
            let rows = [
                (table::CUSTOMER, key(&[schema::id(c_id)?])),
                (table::SECURITY, key(&[*s_id])),
                (table::LAST_TRADE, key(&[*s_id])),
            ];
            let read = need_many(kv, &rows, &mut out).await?;
            let [price, _, _] = fields::<3>(table::LAST_TRADE, &read[2])?;
            let trade = Trade {
                ca_id: *ca_id,
                s_id: *s_id,
                quantity: *quantity,
                is_buy: *is_buy,
                status: STATUS_SUBMITTED,
                price,
                commission: 0,
                submitted_us: *now_us,
                updates: 0,
            };
            write_trade(kv, *t_id, &trade, *now_us)?;
            kv.put(
                table::TRADE_REQUEST,
                &key(&[*t_id]),
                record(&[*ca_id as i64, *s_id as i64, *now_us]),
            )?;
            out.trade = Some((*t_id, *s_id));
        }
        TxnInput::TradeResult { t_id, now_us } => {
            trade_result(kv, *t_id, *now_us, &mut out).await?;
        }
        TxnInput::TradeLookup { t_ids } => {
            let rows: Vec<_> = t_ids.iter().map(|t| (table::TRADE, key(&[*t]))).collect();
            let trades = kv.get_many(&rows).await?;
            let mut settlements = Vec::new();
            for (t_id, trade) in t_ids.iter().zip(trades) {
                if trade.is_some() {
                    out.rows_read += 1;
                    let history = kv
                        .scan_prefix(table::TRADE_HISTORY, &key(&[*t_id]), 3)
                        .await?;
                    out.rows_read += history.len();
                    settlements.push((table::SETTLEMENT, key(&[*t_id])));
                }
            }
            let settled = kv.get_many(&settlements).await?;
            out.rows_read += settled.iter().filter(|s| s.is_some()).count();
        }
        TxnInput::BrokerVolume { b_ids } => {
            let rows: Vec<_> = b_ids.iter().map(|b| (table::BROKER, key(&[*b]))).collect();
            need_many(kv, &rows, &mut out).await?;
            for b_id in b_ids {
                let pending = kv
                    .scan_prefix(table::BROKER_DELTA, &key(&[*b_id]), usize::MAX)
                    .await?;
                out.rows_read += pending.len();
            }
        }
        TxnInput::TradeUpdate { t_ids } => {
            let rows: Vec<_> = t_ids.iter().map(|t| (table::TRADE, key(&[*t]))).collect();
            let read = kv.get_many(&rows).await?;
            // A trade listed twice is updated twice: the second update reads the first's.
            let mut updated: HashMap<u64, Trade> = HashMap::new();
            for (t_id, bytes) in t_ids.iter().zip(read) {
                let mut trade = match (updated.remove(t_id), bytes) {
                    (Some(trade), _) => trade,
                    (None, Some(bytes)) => Trade::decode(&bytes)?,
                    (None, None) => continue,
                };
                out.rows_read += 1;
                trade.updates += 1;
                kv.put(table::TRADE, &key(&[*t_id]), trade.encode())?;
                updated.insert(*t_id, trade);
            }
        }
        TxnInput::MarketFeed { ticks, now_us } => {
            let rows: Vec<_> = ticks
                .iter()
                .map(|(s_id, _)| (table::LAST_TRADE, key(&[*s_id])))
                .collect();
            let lasts = need_many(kv, &rows, &mut out).await?;
            // A security ticked twice moves from its first tick's price.
            let mut ticked: HashMap<u64, (i64, i64)> = HashMap::new();
            for ((s_id, delta), last) in ticks.iter().zip(lasts) {
                let (price, volume) = match ticked.get(s_id) {
                    Some(&now) => now,
                    None => {
                        let [price, volume, _] = fields::<3>(table::LAST_TRADE, &last)?;
                        (price, volume)
                    }
                };
                let price = (price + delta).max(100);
                kv.put(
                    table::LAST_TRADE,
                    &key(&[*s_id]),
                    record(&[price, volume + 1, *now_us]),
                )?;
                ticked.insert(*s_id, (price, volume + 1));
            }
        }
        TxnInput::BrokerAggregate { b_id } => {
            let broker = need(kv, table::BROKER, &key(&[*b_id]), &mut out).await?;
            let [mut trades, mut commission] = fields::<2>(table::BROKER, &broker)?;
            let pending = kv
                .scan_prefix(table::BROKER_DELTA, &key(&[*b_id]), 10_000)
                .await?;
            if pending.is_empty() {
                return Ok(out);
            }
            for (row, value) in &pending {
                let [c] = fields::<1>(table::BROKER_DELTA, value)?;
                trades += 1;
                commission += c;
                kv.delete(table::BROKER_DELTA, row)?;
            }
            out.rows_read += pending.len();
            kv.put(table::BROKER, &key(&[*b_id]), record(&[trades, commission]))?;
        }
        TxnInput::Load { lo, hi, market } => {
            super::load::load(kv, scale, *lo..*hi, *market)?;
        }
    }
    Ok(out)
}

/// Reads a row that must exist.
async fn need<K: Kv>(
    kv: &mut K,
    table: &'static str,
    row: &[u8],
    out: &mut FrameOutput,
) -> Result<Bytes> {
    out.rows_read += 1;
    kv.get(table, row).await?.ok_or_else(|| missing(table, row))
}

/// The error for a row the frames need that is not there.
fn missing(table: &str, row: &[u8]) -> Error {
    Error::Corrupt(format!(
        "{table} row {row:?} is missing (was the database loaded?)"
    ))
}

/// Reads rows that must exist, in one [`Kv::get_many`].
async fn need_many<K: Kv>(
    kv: &mut K,
    rows: &[(&'static str, Bytes)],
    out: &mut FrameOutput,
) -> Result<Vec<Bytes>> {
    out.rows_read += rows.len();
    let read = kv.get_many(rows).await?;
    rows.iter()
        .zip(read)
        .map(|((table, row), value)| value.ok_or_else(|| missing(table, row)))
        .collect()
}

/// Writes a trade with its history entry and index rows.
pub fn write_trade<K: Kv>(kv: &mut K, t_id: u64, trade: &Trade, now_us: i64) -> Result<()> {
    kv.put(table::TRADE, &key(&[t_id]), trade.encode())?;
    kv.put(
        table::TRADE_HISTORY,
        &key(&[t_id, trade.status as u64]),
        record(&[now_us]),
    )?;
    kv.put(
        table::TRADE_BY_ACCOUNT,
        &key(&[trade.ca_id, !t_id]),
        record(&[trade.s_id as i64]),
    )?;
    kv.put(
        table::TRADE_BY_SECURITY,
        &key(&[trade.s_id, !t_id]),
        record(&[trade.ca_id as i64]),
    )
}

/// Trade-Result: executes submitted trade `t_id` at the security's last price, moves cash and
/// shares, records settlement and cash transaction, and adds the broker's increment to the side
/// table. A trade already executed is left alone.
async fn trade_result<K: Kv>(
    kv: &mut K,
    t_id: u64,
    now_us: i64,
    out: &mut FrameOutput,
) -> Result<()> {
    let t_key = key(&[t_id]);
    let mut trade = Trade::decode(&need(kv, table::TRADE, &t_key, out).await?)?;
    if trade.status != STATUS_SUBMITTED {
        return Ok(());
    }
    let a_key = key(&[trade.ca_id]);
    let [c_id, b_id, balance] = fields::<3>(
        table::ACCOUNT,
        &need(kv, table::ACCOUNT, &a_key, out).await?,
    )?;
    let last = need(kv, table::LAST_TRADE, &key(&[trade.s_id]), out).await?;
    let [price, _, _] = fields::<3>(table::LAST_TRADE, &last)?;
    let hs_key = key(&[trade.ca_id, trade.s_id]);
    let held = match kv.get(table::HOLDING_SUMMARY, &hs_key).await? {
        Some(bytes) => fields::<1>(table::HOLDING_SUMMARY, &bytes)?[0],
        None => 0,
    };
    out.rows_read += 1;
    trade.price = price;
    trade.commission = commission_of(trade.amount());
    trade.status = STATUS_COMPLETED;
    let cash = trade.cash_delta();
    kv.put(
        table::ACCOUNT,
        &a_key,
        record(&[c_id, b_id, balance + cash]),
    )?;
    kv.put(
        table::HOLDING_SUMMARY,
        &hs_key,
        record(&[held + trade.quantity_delta()]),
    )?;
    kv.put(
        table::HOLDING,
        &key(&[trade.ca_id, trade.s_id, t_id]),
        record(&[trade.quantity_delta(), trade.price]),
    )?;
    kv.put(table::TRADE, &t_key, trade.encode())?;
    kv.put(
        table::TRADE_HISTORY,
        &key(&[t_id, STATUS_COMPLETED as u64]),
        record(&[now_us]),
    )?;
    kv.put(
        table::SETTLEMENT,
        &t_key,
        record(&[cash, now_us + 2 * 86_400_000_000]),
    )?;
    kv.put(table::CASH_TRANSACTION, &t_key, record(&[cash]))?;
    kv.put(
        table::BROKER_DELTA,
        &key(&[schema::id(b_id)?, t_id]),
        record(&[trade.commission]),
    )?;
    out.trade = Some((t_id, trade.s_id));
    Ok(())
}

/// The value a Trade-Order leaves in [`table::TRADE_REQUEST`]: `(account, security, submitted)`.
pub fn decode_request(bytes: &Bytes) -> Result<(u64, u64, i64)> {
    let [ca, s, when] = fields::<3>(table::TRADE_REQUEST, bytes)?;
    Ok((schema::id(ca)?, schema::id(s)?, when))
}
