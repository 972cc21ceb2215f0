//! Long synchronous engine calls without stalling the tokio runtime.
//!
//! The embedded engines are synchronous: a read or a mutation runs on the calling task's runtime
//! worker. A short one costs microseconds and is cheaper there than a hop to the blocking pool.
//! A batch of tens of thousands of rows (an index shard's prewrite, a GC pass's deletes) holds
//! the worker for hundreds of milliseconds, and every task queued on that worker (a search, a
//! lease renewal, an HTTP accept) waits for it. [`long_synchronous`] runs such a call under
//! [`tokio::task::block_in_place`]: the worker hands its queue to another thread first, so the
//! runtime keeps its full width while the batch runs.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Batches of more rows than this run under [`long_synchronous`]: a fjall or sled batch of 512
/// rows takes about a millisecond, the point where handing the worker's queue over (tens of
/// microseconds) starts to pay.
pub const LONG_BATCH_ROWS: usize = 512;

/// Runs `work` in place on this thread. When `rows` passes [`LONG_BATCH_ROWS`] and the caller is
/// on a multi-threaded tokio runtime, the runtime is told first that this thread will block, so
/// its queued tasks move to other workers. (`block_in_place` panics on a current-thread runtime;
/// there the call just runs, as it would without a runtime.)
pub fn long_synchronous<R>(rows: usize, work: impl FnOnce() -> R) -> R {
    if rows > LONG_BATCH_ROWS
        && let Ok(handle) = Handle::try_current()
        && handle.runtime_flavor() == RuntimeFlavor::MultiThread
    {
        return tokio::task::block_in_place(work);
    }
    work()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn runs_without_a_runtime() {
        assert_eq!(long_synchronous(10_000, || 7), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn runs_on_a_current_thread_runtime() {
        assert_eq!(long_synchronous(10_000, || 8), 8);
    }

    /// On a one-worker runtime: a task spawns a second one onto its worker, then makes a call of
    /// `rows` rows that waits up to `wait` for the second to run. Whether it ran meanwhile.
    async fn queued_task_runs_during_a_call_of(rows: usize, wait: Duration) -> bool {
        let outer = tokio::spawn(async move {
            let (tx, rx) = std::sync::mpsc::channel();
            let inner = tokio::spawn(async move {
                let _ = tx.send(());
            });
            let seen = long_synchronous(rows, || rx.recv_timeout(wait).is_ok());
            (seen, inner)
        });
        let (seen, inner) = outer.await.expect("outer task");
        inner.await.expect("inner task");
        seen
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_long_call_leaves_the_runtime_its_width() {
        assert!(
            queued_task_runs_during_a_call_of(10_000, Duration::from_secs(5)).await,
            "the queued task never ran while the long call blocked its worker"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_short_call_stays_on_its_worker() {
        // The control for the test above: the same wait without the hand-over.
        assert!(
            !queued_task_runs_during_a_call_of(1, Duration::from_millis(200)).await,
            "a short call handed its worker over"
        );
    }
}
