//! `mutate_rows` on etcd: every row mutation becomes one **nested etcd transaction** whose
//! compares are its conditions and whose success branch is its mutations; the failure branch
//! reads back what the conditions looked at, so that the first failing condition can be named.
//! Several row mutations ride in one top-level transaction (no compares, success = the nested
//! ones), which etcd applies atomically at one revision.
//!
//! Conditions as compares (etcd ≥ 3.3 compares over a key range):
//! - `Absent { ts }`: `CREATE == 0` over the versions' key range — true exactly when no key
//!   exists in the range (an empty range compares as one absent key, whose create revision is 0);
//! - `Exists { ts }`: `CREATE > 0` on the version's key (an absent key has create revision 0);
//! - `Equals { ts, value }`: `VALUE == value` on the version's key (false for an absent key);
//! - `NoSnapshotReadSince`: not tracked by this store, so it fails (the transaction layer never
//!   asks, because `tracks_snapshot_reads` is false).
//!
//! Splitting a batch never splits a row mutation, and never puts two row mutations of the same
//! row into one etcd transaction: etcd evaluates every compare of a transaction before applying
//! any operation, so a second mutation of a row would be judged against the state before the
//! first. Such items go to later transactions, in batch order ("rounds"). Within a round,
//! transactions are cut to respect `--max-txn-ops` (top-level operations) and
//! `--max-request-bytes`. A single row mutation over those limits is rejected before anything
//! is sent.

use bytes::Bytes;
use percolator_core::{Condition, Mutation, MutationOutcome, RowMutation, StoreError};
use prost::Message as _;

use crate::keys::{Layout, after};
use crate::proto::{
    self, Compare, CompareResult, CompareTarget, RequestOp, compare::TargetUnion, request_op,
    response_op,
};

/// Bytes kept free in every request for the envelope (headers, the top-level transaction).
const REQUEST_MARGIN: usize = 4096;

/// One row mutation translated to etcd.
pub(crate) struct Prepared {
    /// The nested transaction (empty success branch when it can only fail).
    txn: proto::TxnRequest,
    /// What each condition became: `None` if it trivially holds (no compare sent), else the
    /// index of its read in the failure branch and how to judge the read.
    checks: Vec<Check>,
    /// A condition this store cannot satisfy (`NoSnapshotReadSince`): the item fails there at the
    /// latest.
    fails_at: Option<usize>,
    /// (table, row), for rounds.
    row: (Bytes, Bytes),
    /// Encoded size of the nested transaction.
    size: usize,
    /// Its largest operation count (compares, success or failure branch).
    ops: usize,
}

/// How a condition's read-back decides whether it held.
#[derive(Clone)]
enum Check {
    Trivial,
    /// No key in the read.
    Empty,
    /// Some key in the read.
    Present,
    /// The key holds exactly these bytes.
    Value(Bytes),
}

fn range_read(key: Bytes, range_end: Bytes, keys_only: bool) -> RequestOp {
    RequestOp {
        request: Some(request_op::Request::RequestRange(proto::RangeRequest {
            key,
            range_end,
            limit: 1,
            keys_only,
            ..proto::RangeRequest::default()
        })),
    }
}

fn compare(
    result: CompareResult,
    target: CompareTarget,
    key: Bytes,
    union: TargetUnion,
) -> Compare {
    Compare {
        result: result as i32,
        target: target as i32,
        key,
        target_union: Some(union),
        range_end: Bytes::new(),
    }
}

/// Point operations of one row mutation after applying them in order (etcd rejects a
/// transaction that touches one key twice): the last put or delete of a key wins, a range
/// delete drops earlier point operations inside it, and a later point operation is carved out
/// of earlier range deletes.
#[derive(Default)]
struct Ops {
    points: Vec<(Bytes, Option<Bytes>)>,
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Ops {
    fn point(&mut self, key: Bytes, value: Option<Bytes>) {
        let mut carved = Vec::with_capacity(self.ranges.len() + 1);
        for (start, end) in self.ranges.drain(..) {
            if start.as_slice() <= key.as_ref() && key.as_ref() < end.as_slice() {
                carved.push((start, key.to_vec()));
                carved.push((after(&key), end));
            } else {
                carved.push((start, end));
            }
        }
        self.ranges = carved.into_iter().filter(|(s, e)| s < e).collect();
        // The last operation on a key wins (a delete inside a carved-out range is explicit).
        self.points.retain(|(k, _)| *k != key);
        self.points.push((key, value));
    }

    fn range(&mut self, start: Bytes, end: Bytes) {
        self.points
            .retain(|(k, _)| !(k.as_ref() >= start.as_ref() && k.as_ref() < end.as_ref()));
        self.ranges.push((start.to_vec(), end.to_vec()));
    }

    fn into_requests(self) -> Vec<RequestOp> {
        let mut out = Vec::with_capacity(self.points.len() + self.ranges.len());
        for (start, end) in self.ranges {
            out.push(RequestOp {
                request: Some(request_op::Request::RequestDeleteRange(
                    proto::DeleteRangeRequest {
                        key: Bytes::from(start),
                        range_end: Bytes::from(end),
                    },
                )),
            });
        }
        for (key, value) in self.points {
            out.push(RequestOp {
                request: Some(match value {
                    Some(value) => request_op::Request::RequestPut(proto::PutRequest {
                        key,
                        value,
                        lease: 0,
                    }),
                    None => request_op::Request::RequestDeleteRange(proto::DeleteRangeRequest {
                        key,
                        range_end: Bytes::new(),
                    }),
                }),
            });
        }
        out
    }
}

/// Translates one row mutation; errors (before anything is sent) if it is over the cluster's
/// limits.
pub(crate) fn prepare(
    layout: &Layout,
    item: &RowMutation,
    max_ops: usize,
    max_request: usize,
) -> Result<Prepared, StoreError> {
    let (table, row) = (&item.table, &item.row);
    let mut compares = Vec::with_capacity(item.conditions.len());
    let mut reads = Vec::with_capacity(item.conditions.len());
    let mut checks = Vec::with_capacity(item.conditions.len());
    let mut fails_at = None;
    for (index, condition) in item.conditions.iter().enumerate() {
        match condition {
            Condition::NoSnapshotReadSince { .. } => {
                fails_at = Some(index);
                break;
            }
            Condition::Absent { ts, .. } if ts.is_empty() => checks.push(Check::Trivial),
            Condition::Absent { family, column, ts } => {
                let (start, end) = layout.versions(*family, table, row, column, *ts);
                let mut c = compare(
                    CompareResult::Equal,
                    CompareTarget::Create,
                    start.clone(),
                    TargetUnion::CreateRevision(0),
                );
                c.range_end = end.clone();
                compares.push(c);
                reads.push(range_read(start, end, true));
                checks.push(Check::Empty);
            }
            Condition::Exists { family, column, ts } => {
                let key = layout.cell(*family, table, row, column, *ts);
                compares.push(compare(
                    CompareResult::Greater,
                    CompareTarget::Create,
                    key.clone(),
                    TargetUnion::CreateRevision(0),
                ));
                reads.push(range_read(key, Bytes::new(), true));
                checks.push(Check::Present);
            }
            Condition::Equals {
                family,
                column,
                ts,
                value,
            } => {
                let key = layout.cell(*family, table, row, column, *ts);
                compares.push(compare(
                    CompareResult::Equal,
                    CompareTarget::Value,
                    key.clone(),
                    TargetUnion::Value(value.clone()),
                ));
                reads.push(range_read(key, Bytes::new(), false));
                checks.push(Check::Value(value.clone()));
            }
        }
    }
    let success = if fails_at.is_some() {
        Vec::new()
    } else {
        let mut ops = Ops::default();
        for m in &item.mutations {
            match m {
                Mutation::Put {
                    family,
                    column,
                    ts,
                    value,
                } => ops.point(
                    layout.cell(*family, table, row, column, *ts),
                    Some(value.clone()),
                ),
                Mutation::Delete { family, column, ts } => {
                    ops.point(layout.cell(*family, table, row, column, *ts), None);
                }
                Mutation::DeleteRange { ts, .. } if ts.is_empty() => {}
                Mutation::DeleteRange { family, column, ts } => {
                    let (start, end) = layout.versions(*family, table, row, column, *ts);
                    ops.range(start, end);
                }
            }
        }
        ops.into_requests()
    };
    let txn = proto::TxnRequest {
        compare: compares,
        success,
        failure: reads,
    };
    let largest = txn
        .compare
        .len()
        .max(txn.success.len())
        .max(txn.failure.len());
    // etcd counts a nested transaction's operations against what its parent leaves: with this
    // item alone in a top-level transaction, one operation is the parent's.
    if largest + 1 > max_ops {
        return Err(StoreError::TooLarge {
            what: "etcd operations in one row mutation (conditions, or mutations; the cluster's --max-txn-ops less 1)",
            size: largest,
            limit: max_ops.saturating_sub(1),
        });
    }
    let size = txn.encoded_len();
    if size + REQUEST_MARGIN > max_request {
        return Err(StoreError::TooLarge {
            what: "bytes of one row mutation (the cluster's --max-request-bytes, less 4 KiB)",
            size,
            limit: max_request.saturating_sub(REQUEST_MARGIN),
        });
    }
    Ok(Prepared {
        txn,
        checks,
        fails_at,
        row: (table.clone(), row.clone()),
        size,
        ops: largest,
    })
}

/// Groups item indexes into etcd transactions: rounds keep two mutations of one row apart (in
/// batch order), and each transaction stays within the cluster's limits. etcd checks a
/// transaction's operation count against `--max-txn-ops` and then each nested transaction's
/// against what is left (`max_ops` less the parent's count), so `n` nested transactions fit
/// when `n` plus the largest of their own counts is at most `max_ops`. Bytes stay within
/// `max_request`.
pub(crate) fn plan(items: &[Prepared], max_ops: usize, max_request: usize) -> Vec<Vec<usize>> {
    let mut seen: std::collections::HashMap<&(Bytes, Bytes), usize> =
        std::collections::HashMap::new();
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let round = seen.entry(&item.row).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(i);
        *round += 1;
    }
    let budget = max_request.saturating_sub(REQUEST_MARGIN).max(1);
    let mut txns = Vec::new();
    for round in rounds {
        let mut current: Vec<usize> = Vec::new();
        let mut bytes = 0usize;
        let mut largest = 0usize;
        for i in round {
            // Each nested transaction costs its size plus a few bytes of framing.
            let cost = items[i].size + 16;
            let fits =
                current.len() + 1 + largest.max(items[i].ops) <= max_ops && bytes + cost <= budget;
            if !current.is_empty() && !fits {
                txns.push(std::mem::take(&mut current));
                bytes = 0;
                largest = 0;
            }
            current.push(i);
            bytes += cost;
            largest = largest.max(items[i].ops);
        }
        if !current.is_empty() {
            txns.push(current);
        }
    }
    txns
}

/// The top-level transaction carrying `items`.
pub(crate) fn envelope(items: &[Prepared], indexes: &[usize]) -> proto::TxnRequest {
    proto::TxnRequest {
        compare: Vec::new(),
        success: indexes
            .iter()
            .map(|&i| RequestOp {
                request: Some(request_op::Request::RequestTxn(items[i].txn.clone())),
            })
            .collect(),
        failure: Vec::new(),
    }
}

/// The outcome of `item` from its nested transaction's answer.
pub(crate) fn outcome(
    item: &Prepared,
    answer: Option<&proto::ResponseOp>,
) -> Result<MutationOutcome, StoreError> {
    let malformed =
        || StoreError::Corrupt("etcd answered a transaction with a different shape".into());
    let nested = match answer.and_then(|a| a.response.as_ref()) {
        Some(response_op::Response::ResponseTxn(t)) => t,
        _ => return Err(malformed()),
    };
    if nested.succeeded {
        return Ok(match item.fails_at {
            None => MutationOutcome::Applied,
            Some(condition) => MutationOutcome::ConditionFailed { condition },
        });
    }
    // The failure branch read what every (non-trivial) condition looked at, at the same revision
    // the compares saw.
    let mut reads = nested.responses.iter();
    for (index, check) in item.checks.iter().enumerate() {
        let held = match check {
            Check::Trivial => true,
            check => {
                let kvs = match reads.next().and_then(|r| r.response.as_ref()) {
                    Some(response_op::Response::ResponseRange(r)) => &r.kvs,
                    _ => return Err(malformed()),
                };
                match check {
                    Check::Empty => kvs.is_empty(),
                    Check::Present => !kvs.is_empty(),
                    Check::Value(v) => kvs.first().is_some_and(|kv| kv.value == *v),
                    Check::Trivial => true,
                }
            }
        };
        if !held {
            return Ok(MutationOutcome::ConditionFailed { condition: index });
        }
    }
    Err(StoreError::Backend {
        message: "etcd: a row mutation's compares failed but every condition holds at the same \
                  revision (the cluster does not evaluate range compares as expected)"
            .into(),
        source: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use percolator_core::Family;

    fn put(column: &str, ts: u64) -> Mutation {
        Mutation::Put {
            family: Family::Data,
            column: Bytes::from(column.to_owned()),
            ts,
            value: Bytes::from_static(b"v"),
        }
    }

    fn item(row: &str, mutations: Vec<Mutation>) -> RowMutation {
        RowMutation {
            table: Bytes::from_static(b"t"),
            row: Bytes::from(row.to_owned()),
            conditions: vec![],
            mutations,
        }
    }

    #[test]
    fn a_row_never_meets_itself_in_one_transaction() {
        let layout = Layout::new(b"ns").unwrap();
        let batch = [
            item("a", vec![put("c", 1)]),
            item("b", vec![put("c", 1)]),
            item("a", vec![put("c", 2)]),
            item("a", vec![put("c", 3)]),
        ];
        let prepared: Vec<Prepared> = batch
            .iter()
            .map(|i| prepare(&layout, i, 128, 1 << 20).unwrap())
            .collect();
        assert_eq!(
            plan(&prepared, 128, 1 << 20),
            vec![vec![0, 1], vec![2], vec![3]]
        );
        // The op limit cuts rounds into several transactions, never an item: with 2 ops, one
        // nested transaction of 1 op fits per top-level transaction.
        assert_eq!(
            plan(&prepared, 2, 1 << 20),
            vec![vec![0], vec![1], vec![2], vec![3]]
        );
        // n nested transactions of k ops fit when n + k <= max_ops.
        let many: Vec<Prepared> = (0..10)
            .map(|r| {
                prepare(
                    &layout,
                    &item(&format!("r{r}"), vec![put("c", 1), put("d", 1)]),
                    128,
                    1 << 20,
                )
                .unwrap()
            })
            .collect();
        let txns = plan(&many, 8, 1 << 20);
        assert!(txns.iter().all(|t| t.len() + 2 <= 8), "{txns:?}");
        assert_eq!(txns.iter().map(Vec::len).sum::<usize>(), 10);
    }

    #[test]
    fn oversize_row_mutations_are_rejected_before_sending() {
        let layout = Layout::new(b"ns").unwrap();
        let many = item("a", (0..10).map(|i| put(&format!("c{i}"), 1)).collect());
        assert!(matches!(
            prepare(&layout, &many, 8, 1 << 20),
            Err(StoreError::TooLarge {
                size: 10,
                limit: 7,
                ..
            })
        ));
        assert!(prepare(&layout, &many, 11, 1 << 20).is_ok());
        let big = item(
            "a",
            vec![Mutation::Put {
                family: Family::Data,
                column: Bytes::from_static(b"c"),
                ts: 1,
                value: Bytes::from(vec![0u8; 10_000]),
            }],
        );
        assert!(matches!(
            prepare(&layout, &big, 128, 8_192),
            Err(StoreError::TooLarge { .. })
        ));
    }

    #[test]
    fn point_operations_on_one_key_collapse_in_order() {
        let layout = Layout::new(b"ns").unwrap();
        let k = |ts| layout.cell(Family::Data, b"t", b"a", b"c", ts);
        let mut ops = Ops::default();
        ops.point(k(1), Some(Bytes::from_static(b"x")));
        ops.point(k(1), None);
        ops.range(k(9), Bytes::from(after(&k(0))));
        ops.point(k(5), Some(Bytes::from_static(b"y")));
        let requests = ops.into_requests();
        // k(1)'s put and delete were swallowed by the range delete; k(5) was carved out of it.
        let puts: Vec<_> = requests
            .iter()
            .filter_map(|r| match &r.request {
                Some(request_op::Request::RequestPut(p)) => Some(p.key.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(puts, vec![k(5)]);
        let ranges = requests
            .iter()
            .filter(|r| matches!(&r.request, Some(request_op::Request::RequestDeleteRange(d)) if !d.range_end.is_empty()))
            .count();
        assert_eq!(ranges, 2, "the range delete is split around the later put");
    }
}
