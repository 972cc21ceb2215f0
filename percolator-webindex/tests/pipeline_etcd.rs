//! The web-index cases (`common/pipeline_cases.rs`) on a 3-member etcd cluster: the one in
//! `PERCOLATOR_ETCD_ENDPOINTS`, else one started per test. Reported as skipped, with the
//! reason, where etcd is not installed (`percolator-testkit`'s harness).

#[path = "common/pipeline_cases.rs"]
mod cases;

use std::process::ExitCode;

use percolator_backend_etcd::conformance::EtcdFactory;
use percolator_testkit::{Harness, Needs};

fn main() -> ExitCode {
    Harness::new(&[Needs::Etcd])
        .tokio("webindex_synthetic_with_recrawls", 4, || async {
            cases::webindex_synthetic_with_recrawls(&EtcdFactory::from_env()).await;
        })
        .tokio("webindex_declared_canonical", 4, || async {
            cases::webindex_declared_canonical(&EtcdFactory::from_env()).await;
        })
        .tokio("webindex_warc", 4, || async {
            cases::webindex_warc(&EtcdFactory::from_env()).await;
        })
        .run()
}
