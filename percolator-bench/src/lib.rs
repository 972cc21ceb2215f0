//! # percolator-bench
//!
//! Benchmarks measured as ratios against a baseline in the same run, never as timed assertions:
//! - [`micro`]: the paper's Figure 8 — raw `RowStore` single-cell writes and reads against
//!   Percolator single-cell write transactions and snapshot reads (the paper: 0.23 and 0.94),
//!   8-cell transactions, 1/2/4/8 client tasks — and the timestamp oracle's throughput.
//! - [`contention`]: read-modify-write transactions on Zipf-skewed (θ = 0.99) versus uniform
//!   keys — goodput and abort rate.
//! - [`tpce`]: a TPC-E-style brokerage workload (paper §3.3) with the market emulator as an
//!   observer, on Percolator over any backend and on sled's own transactions (the peer
//!   baseline), reporting tpsE, per-type latency, conflicts, the measured mix and invariants.
//! - [`figure10`] (feature `etcd`): the paper's Figure 10 — the web-indexing pipeline as worker
//!   processes on a 3-member etcd cluster with 2 oracle instances, throughput over time while a
//!   worker, the etcd leader and the leading oracle are killed, and the end-to-end checks.
//! - [`figure9`]: the paper's Figure 9 in simulation — the TPC-E-style benchmark over a store
//!   wrapper that simulates a cluster of S servers (round trip, service time and queue per
//!   server, the oracle as one more server), swept over servers and clients: tpsE against
//!   simulated capacity, and where and why it stops being linear.
//! - [`workers`]: worker scaling — the same crawl indexed by 1, 2, 3 … worker processes on a
//!   3-member etcd (feature `etcd`) or runtimes sharing an embedded store in one process,
//!   dividing the rows or not: pages/s, the waste counters
//!   (conflicts, runs already acknowledged, live workers' locks rolled forward), latency, checks.
//! - [`oracle_service`]: the timestamp oracle service over loopback against an in-process
//!   oracle.
//! - [`serve_load`]: `percolator serve` under a steady crawl, many searchers and a CPU hog:
//!   searches/s, latency, 503s, freshness, memory and disk over time, and the checks after.
//! - [`webindex`]: experiments on the web-indexing pipeline: freshness (the paper's Figure 7),
//!   the soak, the scale run, query latency and the relevance test set.
//!
//! Everything is generic over `RowStore`; the `percolator-bench` binary opens the store a spec
//! names through `percolator-registry` (backends compiled in by cargo feature), and
//! `cargo xtask bench` drives it.

pub mod contention;
#[cfg(feature = "etcd")]
pub mod figure10;
pub mod figure9;
pub mod micro;
pub mod oracle_service;
pub mod serve_load;
pub mod tpce;
pub mod webindex;
pub mod workers;
