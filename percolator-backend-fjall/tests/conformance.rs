//! The shared conformance suite, run against `FjallStore` in temporary directories through
//! [`percolator_backend_fjall::conformance::FjallFactory`].

percolator_core::conformance_tests!(percolator_backend_fjall::conformance::FjallFactory::default());
percolator_observers::observer_conformance_tests!(
    percolator_backend_fjall::conformance::FjallFactory::default()
);
