//! `webindex run`: the pipeline's observers until nothing is pending (or until Ctrl-C), with a
//! progress bar and a summary table; optionally garbage collection in the background.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_core::{Prefetch, RowStore, TimestampOracle, TxnConfig};
use percolator_observers::Runtime;
use percolator_webindex as webindex;

use super::{RunArgs, gc_schedule, runtime_config};
use crate::output::{bar, out, outln, stats_table};
use crate::{CliError, client_builder};

/// Runs the observers and prints what they did.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &RunArgs,
) -> Result<ExitCode, CliError> {
    let gc = gc_schedule(args.gc_every_secs, args.gc_grace_secs)?;
    let mut config = TxnConfig::default();
    if args.two_phase {
        config = config.with_one_phase_commit(false);
    }
    if args.prefetch {
        config = config.with_prefetch(Prefetch::Always);
    }
    let client = client_builder(&store, &oracle).config(config);
    let runtime = Runtime::start(
        client,
        webindex::observers(None),
        runtime_config(&args.workers)?.with_gc(gc),
    )
    .await?;
    let began = Instant::now();
    let interrupted = run_until_idle(
        &runtime,
        args.forever,
        args.progress_every_ms.map(Duration::from_millis),
    )
    .await?;
    let client = runtime.client().clone();
    let pending = runtime.pending().await?;
    let mut stats = runtime.shutdown().await?;
    stats.pending = Some(pending);
    out!("{}", stats_table(&stats, began.elapsed()));
    let txn = client.metrics();
    // Machine-readable for scripts and tests: other workers' transactions this one
    // rolled back (their owner's lease or TTL ran out) or forward, and locks it cleaned
    // up after transactions already rolled back (aborted on a conflict).
    outln!(
        "worker locks: {} rolled back, {} rolled forward, {} cleaned up after aborts",
        txn.locks_rolled_back,
        txn.locks_rolled_forward,
        txn.locks_cleaned_up
    );
    if let Some(path) = &args.stats_json {
        let json = serde_json::json!({
            "elapsed_secs": began.elapsed().as_secs_f64(),
            "observers": stats,
            "conflicts_per_processed": stats.conflicts_per_processed(),
            "already_acknowledged_share": stats.already_acknowledged_share(),
            "transactions": {
                "commits": txn.commits,
                "conflicts": txn.conflicts,
                "locks_rolled_forward": txn.locks_rolled_forward,
                "locks_rolled_forward_of_live": txn.locks_rolled_forward_of_live,
                "locks_rolled_back": txn.locks_rolled_back,
                "locks_cleaned_up": txn.locks_cleaned_up,
            },
        });
        let text = serde_json::to_string_pretty(&json)?;
        std::fs::write(path, text)
            .map_err(|e| format!("could not write the stats to {}: {e}", path.display()))?;
    }
    if interrupted {
        outln!("interrupted: stopped gracefully; `webindex run` again picks up what is pending");
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs until idle (or Ctrl-C); returns whether it was interrupted. With `lines`, also prints
/// a progress line that often.
pub(super) async fn run_until_idle<S: RowStore>(
    runtime: &Runtime<S>,
    forever: bool,
    lines: Option<Duration>,
) -> Result<bool, CliError> {
    let progress = bar(None, "observers");
    let began = Instant::now();
    let print_lines = async {
        let Some(every) = lines else {
            return std::future::pending::<()>().await;
        };
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
        loop {
            tick.tick().await;
            let stats = runtime.stats();
            outln!(
                "progress: processed={} failures={}",
                stats.notifications_processed,
                stats.failures
            );
        }
    };
    let watch = async {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let stats = runtime.stats();
            progress.set_position(stats.notifications_processed);
            progress.set_message(format!(
                "{:.0} observer txns/s, {} in flight",
                stats.notifications_processed as f64 / began.elapsed().as_secs_f64().max(1e-3),
                runtime.in_flight()
            ));
        }
    };
    let work = async {
        if forever {
            std::future::pending::<()>().await;
        }
        runtime.wait_idle(Duration::from_secs(24 * 3600)).await
    };
    let interrupted = tokio::select! {
        r = work => { r?; false }
        () = watch => false,
        () = print_lines => false,
        () = crate::shutdown_signal() => true,
    };
    progress.finish_and_clear();
    Ok(interrupted)
}
