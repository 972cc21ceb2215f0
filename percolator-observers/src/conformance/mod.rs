//! The observer layer of the conformance suite: notifications and the runtime, run on every
//! backend (the web index, an application, has its own tests in `percolator-webindex`). Backends instantiate it next to the core suite:
//!
//! ```text
//! // percolator-backend-foo/tests/conformance.rs
//! percolator_core::conformance_tests!(FooFactory::default());
//! percolator_observers::observer_conformance_tests!(FooFactory::default());
//! ```
//!
//! - [`notify_cases`]: strong notifications under crashing observers, two workers and duplicate
//!   notifications; workers sharing the rows (partitioned scanning); message collapsing; weak-notification storms; notifications of crashed and
//!   late writers; graceful shutdown;
//! - [`isolation_cases`]: panicking, failing and self-triggering observers (backoff, parking,
//!   retry); workers with different observer sets on one column; writers that declared nothing;
//! - [`tree_cases`]: a counting tree (counts propagated up by observers).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

pub mod isolation_cases;
pub mod notify_cases;
pub mod tree_cases;

use std::sync::Arc;
use std::time::Duration;

pub use percolator_core::conformance::block_on_case;
use percolator_core::conformance::fast_config;
use percolator_core::{Client, ClientBuilder, ObservedColumn, RowStore};

use crate::{Observers, Runtime, RuntimeConfig};

/// Runtime settings for the suite: few scanners, short idle pauses.
pub fn test_runtime_config() -> RuntimeConfig {
    RuntimeConfig::default()
        .with_scanners(2)
        .with_max_concurrent_runs(8)
        .with_scan_batch_rows(16)
        .with_idle_sleep_max(Duration::from_millis(20))
}

/// The runtime's client for the suite: short lock TTLs ([`fast_config`]).
pub fn test_client<S: RowStore>(store: &Arc<S>) -> ClientBuilder<S> {
    Client::builder(Arc::clone(store))
        .local_oracle()
        .config(fast_config())
}

/// Starts a runtime with the suite's settings.
pub async fn start<S: RowStore>(store: &Arc<S>, observers: Observers<S>) -> Runtime<S> {
    Runtime::start(test_client(store), observers, test_runtime_config())
        .await
        .unwrap()
}

/// A writer client declaring `columns` as observed.
pub async fn writer<S: RowStore>(store: &Arc<S>, columns: &[ObservedColumn]) -> Client<S> {
    percolator_core::conformance::observing_client(store, columns).await
}

/// Waits (generously) for a runtime to go idle.
pub async fn idle<S: RowStore>(runtime: &Runtime<S>) {
    runtime
        .wait_idle(Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("runtime never went idle: {e}"));
}

/// Instantiates every observer conformance case for the factory expression (a
/// `percolator_core::conformance::StoreFactory`), as `#[tokio::test]`s or, with `trials:`,
/// as `(name, test)` pairs (see `percolator_core::conformance_tests!`).
#[macro_export]
macro_rules! observer_conformance_tests {
    ($factory:expr) => {
        $crate::observer_conformance_tests! { @list tests $factory }
    };
    (trials: $factory:expr) => {
        $crate::observer_conformance_tests! { @list trials $factory }
    };
    (@list $mode:ident $factory:expr) => {
        $crate::observer_conformance_tests! { @cases $mode $factory;
            observer_strong_changes_once_with_crashes_two_workers => notify_cases::strong_changes_once_with_crashes_two_workers,
            observer_workers_share_the_rows => notify_cases::workers_share_the_rows,
            observer_message_collapsing => notify_cases::message_collapsing,
            observer_weak_storm_stays_bounded => notify_cases::weak_storm_stays_bounded,
            observer_weak_notify_on_written_column => notify_cases::weak_notify_on_written_column,
            observer_batch_delay_collapses_notifications => notify_cases::batch_delay_collapses_notifications,
            observer_batch_backlog_runs_back_to_back => notify_cases::batch_backlog_runs_back_to_back,
            observer_stages_drain_upstream_first => notify_cases::stages_drain_upstream_first,
            observer_notification_survives_crash_after_commit_point => notify_cases::notification_survives_crash_after_commit_point,
            observer_rolled_back_writer_runs_nothing => notify_cases::rolled_back_writer_runs_nothing,
            observer_late_writer_not_swallowed => notify_cases::late_writer_not_swallowed,
            observer_graceful_shutdown_leaves_no_locks => notify_cases::graceful_shutdown_leaves_no_locks,
            observer_dead_workers_locks_are_swept => notify_cases::dead_workers_locks_are_swept,
            observer_counting_tree => tree_cases::counting_tree,
            observer_background_gc_keeps_observers_correct => notify_cases::background_gc_keeps_observers_correct,
            observer_panicking_observer_is_parked_and_retried => isolation_cases::panicking_observer_is_parked_and_retried,
            observer_failing_row_backs_off => isolation_cases::failing_row_backs_off,
            observer_self_triggering_observer_is_stopped => isolation_cases::self_triggering_observer_is_stopped,
            observer_workers_with_different_observer_sets => isolation_cases::workers_with_different_observer_sets,
            observer_undeclared_writer_still_notifies => isolation_cases::undeclared_writer_still_notifies,
        }
    };
    (@cases tests $factory:expr; $($name:ident => $module:ident :: $case:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let factory = $factory;
                $crate::conformance::$module::$case(&factory).await;
            }
        )+
    };
    (@cases trials $factory:expr; $($name:ident => $module:ident :: $case:ident),+ $(,)?) => {{
        let trials: ::std::vec::Vec<(&'static str, ::std::boxed::Box<dyn FnOnce() + Send>)> =
            ::std::vec![$(
                (
                    stringify!($name),
                    ::std::boxed::Box::new(|| {
                        $crate::conformance::block_on_case(async {
                            let factory = $factory;
                            $crate::conformance::$module::$case(&factory).await;
                        })
                    }),
                ),
            )+];
        trials
    }};
}
