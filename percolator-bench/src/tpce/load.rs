//! The initial population, written through [`Kv`] so both engines load identical data.
//!
//! Customers are loaded in batches (one transaction each); the market (brokers, companies,
//! securities, prices) goes with the first batch. Every account starts with
//! [`INITIAL_BALANCE`] and [`HOLDINGS_PER_ACCOUNT`] opening positions of [`INITIAL_QUANTITY`]
//! shares (lot `t_id = 0`), plus [`HISTORY_PER_ACCOUNT`] executed historical trades that lookups
//! can find but that move no cash (the invariants count live trades only).

use std::ops::Range;

use percolator_core::Result;

use super::frames::write_trade;
use super::kv::Kv;
use super::schema::{
    ACCOUNTS_PER_CUSTOMER, HISTORY_PER_ACCOUNT, HOLDINGS_PER_ACCOUNT, INITIAL_BALANCE,
    INITIAL_QUANTITY, STATUS_COMPLETED, Scale, Trade, WATCH_ITEMS, key, record, table,
};

/// Starting price of security `s_id`, in cents ($10 to $100).
pub fn initial_price(s_id: u64) -> i64 {
    1_000 + (s_id.wrapping_mul(2_654_435_761) % 9_000) as i64
}

/// Writes customers `customers` (and the market, if `market`).
pub fn load<K: Kv>(kv: &mut K, scale: &Scale, customers: Range<u64>, market: bool) -> Result<()> {
    if market {
        for b_id in 0..scale.brokers {
            kv.put(table::BROKER, &key(&[b_id]), record(&[0, 0]))?;
        }
        for co_id in 0..scale.companies {
            kv.put(
                table::COMPANY,
                &key(&[co_id]),
                record(&[(co_id % 102) as i64, 1_990]),
            )?;
        }
        for s_id in 0..scale.securities {
            let co_id = scale.company_of(s_id) as i64;
            kv.put(
                table::SECURITY,
                &key(&[s_id]),
                record(&[co_id, (s_id % 4) as i64, 1_000_000]),
            )?;
            kv.put(
                table::LAST_TRADE,
                &key(&[s_id]),
                record(&[initial_price(s_id), 0, 0]),
            )?;
        }
    }
    for c_id in customers {
        kv.put(
            table::CUSTOMER,
            &key(&[c_id]),
            record(&[(c_id % 3) as i64 + 1, ACCOUNTS_PER_CUSTOMER as i64]),
        )?;
        for i in 0..WATCH_ITEMS {
            kv.put(
                table::WATCH_ITEM,
                &key(&[c_id, scale.watch_item(c_id, i)]),
                record(&[]),
            )?;
        }
        for ca_id in c_id * ACCOUNTS_PER_CUSTOMER..(c_id + 1) * ACCOUNTS_PER_CUSTOMER {
            let b_id = scale.broker_of(ca_id) as i64;
            kv.put(
                table::ACCOUNT,
                &key(&[ca_id]),
                record(&[c_id as i64, b_id, INITIAL_BALANCE]),
            )?;
            kv.put(
                table::ACCOUNT_BY_CUSTOMER,
                &key(&[c_id, ca_id]),
                record(&[]),
            )?;
            for i in 0..HOLDINGS_PER_ACCOUNT {
                let s_id = scale.initial_holding(ca_id, i);
                kv.put(
                    table::HOLDING_SUMMARY,
                    &key(&[ca_id, s_id]),
                    record(&[INITIAL_QUANTITY]),
                )?;
                kv.put(
                    table::HOLDING,
                    &key(&[ca_id, s_id, 0]),
                    record(&[INITIAL_QUANTITY, initial_price(s_id)]),
                )?;
            }
            for j in 0..HISTORY_PER_ACCOUNT {
                let t_id = ca_id * HISTORY_PER_ACCOUNT + j;
                let s_id = scale.initial_holding(ca_id, j);
                let trade = Trade {
                    ca_id,
                    s_id,
                    quantity: 100,
                    is_buy: true,
                    status: STATUS_COMPLETED,
                    price: initial_price(s_id),
                    commission: 10,
                    submitted_us: 0,
                    updates: 0,
                };
                write_trade(kv, t_id, &trade, 0)?;
            }
        }
    }
    Ok(())
}
