//! The conformance suite: the behaviour every backend must show, written once as plain
//! `pub async fn case(factory)` functions over a [`StoreFactory`] (the OpenDAL / `object_store`
//! pattern) and instantiated as tests in each backend's own test target by one macro call.
//! Each backend crate exports its factory from a `conformance` module behind its own
//! `conformance` feature (so other crates, such as the observers' suite, can reuse it), and its
//! test target enables that feature through a dev-dependency on itself:
//!
//! ```text
//! // percolator-backend-foo/tests/conformance.rs
//! percolator_core::conformance_tests!(percolator_backend_foo::conformance::FooFactory::default());
//! ```
//!
//! Layers:
//! - [`store_cases`]: the [`RowStore`] contract itself (ordering, filters, families, conditional
//!   batches, limits, arbitrary bytes, atomicity under concurrency);
//! - [`txn_cases`]: snapshot isolation, the paper's Figure 4 walk-through, conflicts, retries, bad
//!   input, corrupt stored bytes;
//! - [`batch_cases`]: batched reads answer what single reads answer, locks included;
//! - [`one_phase_cases`]: single-row commits in one mutation, where the store supports it;
//! - [`fault_cases`]: a crash, lost answer, failed sync or race at every step of the commit
//!   protocol;
//! - [`oracle_cases`]: strictly increasing timestamps under concurrency and across restarts, one
//!   shared oracle per [`RowStore::store_id`];
//! - [`invariant_cases`]: the bank workload with concurrent clients crashing mid-commit, and over
//!   a store that fails reads, drops batches and fails syncs at random.
//!
//! The tools the cases use are public for other suites (the observers' suite): [`hooks`]
//! (commit hooks that crash or pause at a step), [`faulty`] (a store wrapper injecting network
//! and disk faults).
//!
//! Random faults are seeded. Every case that injects them prints its seed to stderr
//! ([`fault_seed`]); set `PERCOLATOR_FAULT_SEED` to that value to replay the same faults.
//!
//! Cases panic on failure (they are test code); the test harness reports them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

pub mod batch_cases;
pub mod fault_cases;
pub mod faulty;
pub mod gc_cases;
pub mod hooks;
pub mod invariant_cases;
pub mod one_phase_cases;
pub mod oracle_cases;
pub mod store_cases;
pub mod txn_cases;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;

use crate::store::RowStore;
use crate::txn::{Client, TxnConfig};

/// Opens stores for the suite.
#[async_trait]
pub trait StoreFactory: Send + Sync + 'static {
    /// The backend.
    type Store: RowStore;

    /// A fresh, empty store.
    async fn open(&self) -> Arc<Self::Store>;

    /// Simulates a process restart: drops `store` (the caller holds no other reference) and
    /// opens the same data again. A non-persistent backend returns the same store.
    async fn restart(&self, store: Arc<Self::Store>) -> Arc<Self::Store>;
}

/// Runs one case to completion on a new multi-threaded runtime (4 worker threads, what the
/// `#[tokio::test]` form gives each case): the `trials:` form of [`crate::conformance_tests!`] runs
/// its cases through it.
pub fn block_on_case<F: std::future::Future<Output = ()>>(case: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a tokio runtime for the case")
        .block_on(case);
}

/// The environment variable that fixes the seed of every random fault ([`fault_seed`]).
pub const FAULT_SEED_VAR: &str = "PERCOLATOR_FAULT_SEED";

/// The seed of this test process: `PERCOLATOR_FAULT_SEED` if set, else random.
static PROCESS_SEED: LazyLock<u64> = LazyLock::new(|| match std::env::var(FAULT_SEED_VAR) {
    Ok(value) => {
        let value = value.trim();
        let parsed = match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => value.parse(),
        };
        parsed.unwrap_or_else(|e| panic!("{FAULT_SEED_VAR}={value:?} is not a u64: {e}"))
    }
    Err(_) => rand::random(),
});

/// The seed for the random faults of `what` (a case or a hook), printed to stderr so that a
/// failing run can be replayed with `PERCOLATOR_FAULT_SEED=<seed>`.
///
/// One seed serves the whole test process (set by the variable, else drawn once), so a replay
/// reproduces every seeded fault of every case; a case that needs several independent streams
/// derives them from it (`seed`, `seed + 1`, ...).
pub fn fault_seed(what: &str) -> u64 {
    let seed = *PROCESS_SEED;
    eprintln!("{what}: fault seed {seed} (replay with {FAULT_SEED_VAR}={seed})");
    seed
}

/// A configuration with short timeouts so that fault tests finish quickly.
pub fn fast_config() -> TxnConfig {
    TxnConfig::default()
        .with_lock_ttl(Duration::from_millis(300))
        .with_lock_wait_timeout(Duration::from_secs(20))
        .with_worker_lease(Duration::from_secs(30))
        .with_max_attempts(1000)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(20))
        .with_durable_commits(false)
        .with_one_phase_commit(true)
}

/// A client with [`fast_config`]: for tests that wait for crashed locks to expire.
pub async fn client<S: RowStore>(store: &Arc<S>) -> Client<S> {
    client_with(store, fast_config()).await
}

/// A client whose locks stay valid for a minute: for tests that pause live commits and must not
/// see them cleaned up even if a heartbeat is delayed on a loaded machine.
pub async fn patient_client<S: RowStore>(store: &Arc<S>) -> Client<S> {
    client_with(store, fast_config().with_lock_ttl(Duration::from_secs(60))).await
}

/// A client with `config`.
pub async fn client_with<S: RowStore>(store: &Arc<S>, config: TxnConfig) -> Client<S> {
    Client::builder(Arc::clone(store))
        .local_oracle()
        .config(config)
        .build()
        .await
        .expect("client")
}

/// A client (like [`client`]) that declares `columns` observed, so its commits notify them as
/// their observers need: what a writer declares.
pub async fn observing_client<S: RowStore>(
    store: &Arc<S>,
    columns: &[crate::txn::ObservedColumn],
) -> Client<S> {
    Client::builder(Arc::clone(store))
        .local_oracle()
        .config(fast_config())
        .observe_all(columns)
        .build()
        .await
        .expect("client")
}

/// Instantiates every conformance case for the factory expression.
///
/// `conformance_tests!(factory)` makes each case a `#[tokio::test]` (the calling crate needs
/// `tokio` with macros and rt-multi-thread as a dev-dependency). `conformance_tests!(trials:
/// factory)` is an expression instead: the cases as `(name, test)` pairs, for a custom harness
/// such as `percolator-testkit`'s, which reports them as skipped where the backend's server is
/// not installed.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests! { @list tests $factory }
    };
    (trials: $factory:expr) => {
        $crate::conformance_tests! { @list trials $factory }
    };
    (@list $mode:ident $factory:expr) => {
        $crate::conformance_tests! { @cases $mode $factory;
            store_read_row_versions_and_filters => store_cases::read_row_versions_and_filters,
            store_families_are_separate => store_cases::families_are_separate,
            store_scan_ranges_and_limits => store_cases::scan_ranges_and_limits,
            store_conditions => store_cases::conditions,
            store_batch_outcomes_are_independent => store_cases::batch_outcomes_are_independent,
            store_atomic_batches_apply_all_or_nothing => store_cases::atomic_batches_apply_all_or_nothing,
            store_large_batches_apply_every_item => store_cases::large_batches_apply_every_item,
            store_deletes => store_cases::deletes,
            store_mutations_apply_in_order => store_cases::mutations_apply_in_order,
            store_invalid_input_rejects_whole_batch => store_cases::invalid_input_rejects_whole_batch,
            store_arbitrary_bytes_round_trip => store_cases::arbitrary_bytes_round_trip,
            store_concurrent_conditional_increments => store_cases::concurrent_conditional_increments,
            store_lock_to_write_transition_never_hides_a_row => store_cases::lock_to_write_transition_never_hides_a_row,
            store_tables_lists_every_table => store_cases::tables_lists_every_table,
            store_scan_max_versions_over_deep_history => store_cases::scan_max_versions_over_deep_history,
            txn_figure4_transfer => txn_cases::figure4_transfer,
            txn_figure4_transfer_short_values => txn_cases::figure4_transfer_short_values,
            txn_snapshot_isolation => txn_cases::snapshot_isolation,
            txn_write_write_conflict => txn_cases::write_write_conflict,
            txn_snapshot_scan => txn_cases::snapshot_scan,
            txn_scan_pages_cover_the_scan => txn_cases::scan_pages_cover_the_scan,
            txn_scan_sees_past_rollback_records => txn_cases::scan_sees_past_rollback_records,
            txn_reads_agree_with_and_without_point_reads => txn_cases::reads_agree_with_and_without_point_reads,
            txn_run_reruns_whole_closure => txn_cases::run_reruns_whole_closure,
            txn_bad_input_writes_nothing => txn_cases::bad_input_writes_nothing,
            txn_corrupt_stored_bytes_are_errors => txn_cases::corrupt_stored_bytes_are_errors,
            txn_reader_never_skips_lower_lock => txn_cases::reader_never_skips_lower_lock,
            txn_committed_but_not_durable_is_not_retried => txn_cases::committed_but_not_durable_is_not_retried,
            batch_read_rows_answers_each_row_as_read_row => batch_cases::read_rows_answers_each_row_as_read_row,
            batch_get_many_agrees_with_get => batch_cases::get_many_agrees_with_get,
            batch_get_many_resolves_locks_per_cell => batch_cases::get_many_resolves_locks_per_cell,
            batch_prefetch_serves_only_the_snapshot => batch_cases::prefetch_serves_only_the_snapshot,
            one_phase_store_snapshot_read_condition => one_phase_cases::snapshot_read_condition,
            one_phase_condition_is_atomic_against_concurrent_readers => one_phase_cases::condition_is_atomic_against_concurrent_readers,
            one_phase_used_where_supported => one_phase_cases::used_where_supported,
            one_phase_reader_admitted_before_the_write_keeps_its_snapshot => one_phase_cases::reader_admitted_before_the_write_keeps_its_snapshot,
            one_phase_crash_at_each_step => one_phase_cases::crash_at_each_step,
            one_phase_lost_answers => one_phase_cases::lost_answers,
            one_phase_conflicts => one_phase_cases::conflicts,
            one_phase_several_rows_in_one_step => one_phase_cases::several_rows_in_one_step,
            one_phase_several_rows_reader_admitted_first_keeps_its_snapshot => one_phase_cases::several_rows_reader_admitted_first_keeps_its_snapshot,
            one_phase_snapshots_stable_under_concurrent_single_row_commits => one_phase_cases::snapshots_stable_under_concurrent_single_row_commits,
            fault_crash_after_primary_prewrite => fault_cases::crash_after_primary_prewrite,
            fault_crash_after_all_prewrites => fault_cases::crash_after_all_prewrites,
            fault_crash_before_commit_point => fault_cases::crash_before_commit_point,
            fault_crash_after_commit_point => fault_cases::crash_after_commit_point,
            fault_crash_after_half_secondaries => fault_cases::crash_after_half_secondaries,
            fault_crash_after_half_secondaries_inline => fault_cases::crash_after_half_secondaries_inline,
            fault_crash_after_return => fault_cases::crash_after_return,
            fault_read_your_writes_before_secondaries => fault_cases::read_your_writes_before_secondaries,
            fault_write_over_pending_secondaries => fault_cases::write_over_pending_secondaries,
            fault_shutdown_waits_for_secondaries => fault_cases::shutdown_waits_for_secondaries,
            fault_parallel_prewrite_conflict_unlocks_secondaries => fault_cases::parallel_prewrite_conflict_unlocks_secondaries,
            fault_reader_waits_for_a_primary_in_flight => fault_cases::reader_waits_for_a_primary_in_flight,
            fault_lost_response_to_primary_commit => fault_cases::lost_response_to_primary_commit,
            fault_lost_response_to_prewrite => fault_cases::lost_response_to_prewrite,
            fault_two_cleaners_racing => fault_cases::two_cleaners_racing,
            fault_cleanup_racing_owner_commit => fault_cases::cleanup_racing_owner_commit,
            fault_late_prewrite_after_rollback => fault_cases::late_prewrite_after_rollback,
            fault_dead_owner_cleaned_before_ttl => fault_cases::dead_owner_cleaned_before_ttl,
            fault_live_lock_times_out_reader => fault_cases::live_lock_times_out_reader,
            fault_heartbeat_keeps_long_commit_alive => fault_cases::heartbeat_keeps_long_commit_alive,
            fault_sync_failure_after_commit_point => fault_cases::sync_failure_after_commit_point,
            fault_run_retries_a_failed_begin => fault_cases::run_retries_a_failed_begin,
            fault_failed_reads_and_dropped_batches => fault_cases::failed_reads_and_dropped_batches,
            fault_settle_undetermined_commits => fault_cases::settle_undetermined_commits,
            fault_clearing_own_notifications_needs_no_status_read => fault_cases::clearing_own_notifications_needs_no_status_read,
            fault_one_step_notifications_name_their_commit => fault_cases::one_step_notifications_name_their_commit,
            fault_notifications_committed_during_a_run_stay_pending => fault_cases::notifications_committed_during_a_run_stay_pending,
            fault_clearing_a_backlog_larger_than_a_row_mutation => fault_cases::clearing_a_backlog_larger_than_a_row_mutation,
            oracle_strictly_increasing_concurrently => oracle_cases::strictly_increasing_concurrently,
            oracle_monotonic_across_restarts => oracle_cases::monotonic_across_restarts,
            oracle_second_oracle_never_interleaves => oracle_cases::second_oracle_never_interleaves,
            oracle_shared_store_needs_an_explicit_oracle => oracle_cases::shared_store_needs_an_explicit_oracle,
            oracle_survives_lost_answers_and_failed_syncs => oracle_cases::survives_lost_answers_and_failed_syncs,
            oracle_shared_by_store_id => oracle_cases::shared_by_store_id,
            oracle_timestamps_carry_oracle_time => oracle_cases::timestamps_carry_oracle_time,
            invariant_bank_transfers_with_crashes => invariant_cases::bank_transfers_with_crashes,
            invariant_durable_concurrent_commits => invariant_cases::durable_concurrent_commits,
            invariant_bank_transfers_over_faulty_store => invariant_cases::bank_transfers_over_faulty_store,
            gc_collects_history_below_the_safe_point => gc_cases::collects_history_below_the_safe_point,
            gc_readers_and_writers_interleaved_with_gc => gc_cases::readers_and_writers_interleaved_with_gc,
            gc_lapsed_client_gets_snapshot_too_old => gc_cases::lapsed_client_gets_snapshot_too_old,
            gc_lapsed_lease_is_renewed_by_the_next_begin => gc_cases::lapsed_lease_is_renewed_by_the_next_begin,
            gc_late_prewrites_after_gc_still_fail => gc_cases::late_prewrites_after_gc_still_fail,
            gc_resolves_old_locks_and_dead_leases => gc_cases::resolves_old_locks_and_dead_leases,
            gc_sweeps_dead_workers => gc_cases::sweeps_dead_workers,
            gc_collects_notifications_nobody_observes => gc_cases::collects_notifications_nobody_observes,
            gc_collects_orphaned_acks => gc_cases::collects_orphaned_acks,
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
