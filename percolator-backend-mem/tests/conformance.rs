//! The shared conformance suite, run against `MemStore` through
//! [`percolator_backend_mem::conformance::MemFactory`].

percolator_core::conformance_tests!(percolator_backend_mem::conformance::MemFactory);
percolator_observers::observer_conformance_tests!(percolator_backend_mem::conformance::MemFactory);
