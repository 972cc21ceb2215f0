//! The paper's Figure 9 in simulation: TPC-E-style throughput against the resources of a
//! cluster larger than this machine.
//!
//! The paper shows Percolator's tpsE growing linearly with resources from 11 to 15 000 cores.
//! One 2-core machine cannot show that, but it can show where the protocol itself would bend:
//! the TPC-E benchmark ([`crate::tpce`], unchanged) runs over [`SimulatedCluster`], a store
//! wrapper that makes every call pay a simulated cluster's network and servers before
//! [`MemStore`](percolator_backend_mem::MemStore) answers it. Sweeping servers and clients
//! ([`sweep`]) then shows tpsE against simulated server capacity, and the analysis
//! ([`analysis`]) says where it stops being linear and why — the servers, a hot server, the
//! oracle, conflicts, the market emulator, or this process's CPU, measured separately. This is
//! the planning model for clusters larger than this machine; it does not replace real backends.
//!
//! The model ([`model`], [`queue`]):
//! - rows are hashed to S data servers; every server is a single-server FIFO queue with a
//!   service time per row operation ([`SimConfig::service`]);
//! - every call pays a round trip ([`SimConfig::rtt`]); a batch that touches several servers
//!   pays one round trip and waits for the slowest of them, the servers working in parallel
//!   ([`sim_store`] gives each call's cost);
//! - the timestamp oracle is one more server with its own service time ([`SimulatedOracle`]),
//!   passed to the engine as its oracle;
//! - the simulation is on only while measured ([`engine`]): the load and the final check run at
//!   full speed;
//! - one Percolator worker (its observer runtime runs the market emulator) per 32 clients, on
//!   the same store ([`engine`]), so that Trade-Results keep up with many clients;
//! - each point is measured in a window after a warm-up ([`window`]): transactions by type, the
//!   servers' and the oracle's utilisation, work by table, this process's CPU and the
//!   machine's.
//!
//! **Real time, not virtual time.** Each request books its work on its servers' queues (a
//! per-server mutex held for a few instructions, no global lock) and then sleeps, with
//! `tokio::time::sleep_until`, until its answer would be back. The booking is exact, so a
//! server's capacity is exactly `1 / service time` even for sub-millisecond service times; what
//! tokio's 1 ms timer resolution costs is latency (a request wakes up to a millisecond late),
//! which more clients make up for and which each point reports (`timer late ms`). A virtual
//! clock (tokio's paused time) would make every CPU cycle of the protocol free, and the question
//! is precisely whether this process's CPU bends the curve before the cluster does; it would
//! also stop the TPC-E driver's own wall-clock timing. So the defaults keep service times small
//! enough that one server gives a measurable tpsE in a few seconds (0.25 ms per row operation:
//! 4 000 row operations/s per server) and the round trip at 2 ms, the same order as the timer.
//!
//! `percolator-bench figure9` runs the sweep and writes JSON; `cargo xtask bench --figure9`
//! runs that and plots `target/bench/figure9.svg`.

pub mod analysis;
pub mod engine;
pub mod model;
pub mod oracle;
pub mod queue;
pub mod sim_store;
pub mod sweep;
mod table;
pub mod window;

pub use self::engine::SimEngine;
pub use self::model::{ClusterModel, ModelSnapshot, OpKind, SimConfig};
pub use self::oracle::SimulatedOracle;
pub use self::queue::ServerTotals;
pub use self::sim_store::SimulatedCluster;
pub use self::sweep::{Figure9Config, Figure9Error, Figure9Report, PointReport, run, run_point};
pub use self::window::{KindRate, TableOps, TableShare, Window};
