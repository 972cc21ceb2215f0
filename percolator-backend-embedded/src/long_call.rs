//! Long synchronous engine calls without stalling the tokio runtime.
//!
//! The embedded engines are synchronous: a read or a mutation runs on the calling task's runtime
//! worker. A short one costs microseconds and is cheaper there than a hop to another thread. A
//! batch of tens of thousands of rows (an index shard's prewrite, a GC page's deletes) holds the
//! worker for hundreds of milliseconds, and every task queued on that worker (a search, a lease
//! renewal, an HTTP accept) waits for it. [`long_synchronous`] runs such a call under
//! [`tokio::task::block_in_place`]: the worker hands its queue to another thread first, so the
//! runtime keeps its full width while the batch runs.
//!
//! Each hand-over may start a thread, so only as many calls as the machine has cores run that
//! way at once; more would not run faster, and under a burst of long calls (every scanner
//! committing a large batch, each waiting for the others' row latches) the threads piled up by
//! the hundred, each with its allocator's heap: a server's resident memory tripled. A call past
//! the limit runs in place, as a short one does.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::{Handle, RuntimeFlavor};

/// Batches of more rows than this run under [`long_synchronous`]: a fjall or sled batch of 512
/// rows takes about a millisecond, the point where handing the worker's queue over (tens of
/// microseconds) starts to pay.
pub const LONG_BATCH_ROWS: usize = 512;

/// Calls handed over right now, in this process.
static HANDED_OVER: AtomicUsize = AtomicUsize::new(0);

/// At most this many calls are handed over at once: the machine's cores.
fn hand_over_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// A hand-over slot, released when the call ends (or unwinds).
struct Slot<'a>(&'a AtomicUsize);

impl<'a> Slot<'a> {
    /// A slot of `taken`'s, unless `limit` are taken.
    fn take(taken: &'a AtomicUsize, limit: usize) -> Option<Self> {
        taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(taken))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs `work` on this thread. When `rows` passes [`LONG_BATCH_ROWS`], the caller is on a
/// multi-threaded tokio runtime and fewer calls than the machine has cores are handed over, the
/// runtime is told first that this thread will block, so its queued tasks move to other
/// workers. (`block_in_place` panics on a current-thread runtime; there the call just runs, as
/// it would without a runtime.)
pub fn long_synchronous<R>(rows: usize, work: impl FnOnce() -> R) -> R {
    if rows > LONG_BATCH_ROWS
        && let Ok(handle) = Handle::try_current()
        && handle.runtime_flavor() == RuntimeFlavor::MultiThread
        && let Some(_slot) = Slot::take(&HANDED_OVER, hand_over_limit())
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

    #[test]
    fn hand_overs_are_bounded() {
        let taken = AtomicUsize::new(0);
        let slots: Vec<Slot<'_>> = std::iter::from_fn(|| Slot::take(&taken, 3))
            .take(10)
            .collect();
        assert_eq!(slots.len(), 3);
        drop(slots);
        assert_eq!(taken.load(Ordering::Acquire), 0, "every slot came back");
        assert!(Slot::take(&taken, 3).is_some());
    }
}
