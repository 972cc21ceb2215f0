//! The shared conformance suite, run against `SledStore` in temporary directories through
//! [`percolator_backend_sled::conformance::SledFactory`].

percolator_core::conformance_tests!(percolator_backend_sled::conformance::SledFactory::default());
percolator_observers::observer_conformance_tests!(
    percolator_backend_sled::conformance::SledFactory::default()
);
