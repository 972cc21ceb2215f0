//! The shared conformance suite against `TikvStore` over the in-process TiKV double, through
//! [`percolator_backend_tikv::conformance::FakeTikvFactory`], so that the key mapping, the
//! guard-key argument and the retry logic run in CI without a cluster.

percolator_core::conformance_tests!(percolator_backend_tikv::conformance::FakeTikvFactory);
percolator_observers::observer_conformance_tests!(
    percolator_backend_tikv::conformance::FakeTikvFactory
);
