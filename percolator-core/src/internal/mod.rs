//! For the workspace's own crates (the observer runtime, the server, the benchmarks): the
//! reserved tables and columns, worker leases, the observer registry, the retry backoff and the
//! latency histogram. Not part of the API applications use, and not covered by semver.

pub mod backoff;
pub mod histogram;
pub mod liveness;
pub mod observer_registry;
pub mod tables;
