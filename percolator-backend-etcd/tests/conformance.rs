//! The shared conformance suite (core and observer layers) against `EtcdStore` on a 3-member
//! etcd cluster: the one in `PERCOLATOR_ETCD_ENDPOINTS` (`cargo xtask conformance --backend
//! etcd` starts it), else one started per test. Skipped, with the reason printed, where etcd
//! is not installed.

percolator_core::conformance_tests!(percolator_backend_etcd::conformance::EtcdFactory::from_env());
percolator_observers::observer_conformance_tests!(
    percolator_backend_etcd::conformance::EtcdFactory::from_env()
);
