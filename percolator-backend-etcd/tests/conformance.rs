//! The shared conformance suite (core and observer layers) against `EtcdStore` on a 3-member
//! etcd cluster: the one in `PERCOLATOR_ETCD_ENDPOINTS` (`cargo xtask conformance --backend
//! etcd` starts it), else one started per test. Reported as skipped, with the reason printed,
//! where etcd is not installed (`percolator-testkit`'s harness).

use std::process::ExitCode;

use percolator_backend_etcd::conformance::EtcdFactory;
use percolator_testkit::{Harness, Needs};

fn main() -> ExitCode {
    Harness::new(&[Needs::Etcd])
        .tests(percolator_core::conformance_tests!(trials: EtcdFactory::from_env()))
        .tests(percolator_observers::observer_conformance_tests!(
            trials: EtcdFactory::from_env()
        ))
        .run()
}
