//! `percolator bank`: concurrent bank transfers as Percolator transactions — the runnable demo
//! of cross-row snapshot-isolation transactions, and the child process of the `kill -9` crash
//! test (`tests/crash_kill9.rs`).
//!
//! ```text
//! percolator --db target/bank-demo bank                  # run transfers, print a summary table
//! percolator --db DIR bank --durable --print-acks        # print "ACK <id>" after each durable commit
//! percolator --db DIR bank --verify                      # resolve leftover locks, check the invariant
//! ```

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use percolator_core::workload::{self, ACCOUNTS, TRANSFERS};
use percolator_core::{Client, Error, RowStore, TimestampOracle, TxnConfig};
use rand::Rng as _;

use crate::CliError;
use crate::output::outln;

/// Arguments of `percolator bank`.
#[derive(clap::Args, Debug)]
pub struct BankArgs {
    /// Accounts to create on first run.
    #[arg(long, default_value_t = 100)]
    accounts: usize,
    /// Initial balance of every account.
    #[arg(long, default_value_t = 1_000)]
    initial: i64,
    /// Transfers to run.
    #[arg(long, default_value_t = 5_000)]
    transfers: usize,
    /// Concurrent client tasks.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Make every commit durable (flushed to disk) before acknowledging it.
    #[arg(long)]
    durable: bool,
    /// Print `ACK <transfer-id>` on stdout after each acknowledged commit.
    #[arg(long)]
    print_acks: bool,
    /// Do not run transfers: resolve leftover locks and check the invariant, then exit
    /// (exit code 1 if it does not hold).
    #[arg(long)]
    verify: bool,
}

fn config(durable: bool) -> TxnConfig {
    TxnConfig::default()
        .with_lock_ttl(Duration::from_millis(1_000))
        .with_durable_commits(durable)
}

async fn resolve_leftovers<S: RowStore>(client: &Client<S>) -> Result<usize, Error> {
    let mut resolved = 0;
    for _ in 0..600 {
        let (r1, live1) = client.resolve_locks(ACCOUNTS).await?;
        let (r2, live2) = client.resolve_locks(TRANSFERS).await?;
        resolved += r1 + r2;
        if live1 + live2 == 0 {
            return Ok(resolved);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(Error::InvalidInput(
        "locks of a crashed run did not expire within 30 s".into(),
    ))
}

/// Runs the demo (or, with `--verify`, only the check) on `store`. Exit code 1 if the total
/// balance is not conserved.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &BankArgs,
) -> Result<ExitCode, CliError> {
    let client = crate::client_builder(&store, &oracle)
        .config(config(args.durable))
        .build()
        .await?;
    let leftovers = resolve_leftovers(&client).await?;
    let (sum, count) = workload::total(&client).await?;
    if count == 0 {
        workload::create_accounts(&client, args.accounts, args.initial).await?;
        store_expected(&client, args.accounts as i64 * args.initial).await?;
    }
    let expected = load_expected(&client).await?;
    if args.verify {
        let (sum, count) = workload::total(&client).await?;
        outln!(
            "resolved {leftovers} leftover locks; {count} accounts, total {sum}, expected {expected}"
        );
        return Ok(exit(sum == expected));
    }
    let _ = sum;

    let started = Instant::now();
    let committed = Arc::new(AtomicU64::new(0));
    let tickets = Arc::new(AtomicU64::new(0));
    let accounts = workload::total(&client).await?.1.max(2);
    let run_id: u32 = rand::rng().random();
    let mut tasks = Vec::new();
    for w in 0..args.workers.max(1) {
        let client = client.clone();
        let committed = Arc::clone(&committed);
        let tickets = Arc::clone(&tickets);
        let print_acks = args.print_acks;
        let total_transfers = args.transfers;
        tasks.push(tokio::spawn(async move {
            loop {
                let i = tickets.fetch_add(1, Ordering::Relaxed);
                if i >= total_transfers as u64 {
                    break;
                }
                let (from, to, amount) = {
                    let mut rng = rand::rng();
                    let from = rng.random_range(0..accounts);
                    (
                        from,
                        (from + rng.random_range(1..accounts)) % accounts,
                        rng.random_range(1..100),
                    )
                };
                let id = format!("{run_id:08x}-{i}-w{w}");
                workload::transfer(&client, from, to, amount, &id).await?;
                let n = committed.fetch_add(1, Ordering::Relaxed) + 1;
                if print_acks {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "ACK {id}");
                    let _ = out.flush();
                } else if n.is_multiple_of((total_transfers as u64 / 10).max(1)) {
                    eprintln!("  {n:>8} / {total_transfers} transfers committed");
                }
            }
            Ok::<(), Error>(())
        }));
    }
    for t in tasks {
        t.await
            .map_err(|e| Error::InvalidInput(format!("worker panicked: {e}")))??;
    }
    let elapsed = started.elapsed();
    let (sum, count) = workload::total(&client).await?;
    let metrics = client.metrics();
    let n = committed.load(Ordering::Relaxed);
    let ok = sum == expected;
    outln!();
    outln!("| metric                      | value |");
    outln!("|-----------------------------|-------|");
    outln!("| backend                     | {} |", store.name());
    outln!("| transfers committed         | {n} |");
    outln!("| workers                     | {} |", args.workers);
    outln!(
        "| elapsed                     | {:.2} s |",
        elapsed.as_secs_f64()
    );
    outln!(
        "| transfers / s               | {:.0} |",
        n as f64 / elapsed.as_secs_f64()
    );
    outln!("| retries (conflicts)         | {} |", metrics.retries);
    outln!(
        "| locks rolled forward / back | {} / {} |",
        metrics.locks_rolled_forward,
        metrics.locks_rolled_back
    );
    outln!("| leftover locks resolved     | {leftovers} |");
    outln!("| durable commits             | {} |", args.durable);
    outln!("| accounts                    | {count} |");
    outln!(
        "| total balance               | {sum} (expected {expected}: {}) |",
        if ok { "conserved" } else { "VIOLATED" }
    );
    client.shutdown().await?;
    store.sync().await?;
    Ok(exit(ok))
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

const EXPECTED_ROW: &str = "expected-total";

async fn store_expected<S: RowStore>(client: &Client<S>, total: i64) -> Result<(), Error> {
    let mut t = client.begin().await?;
    t.set("bank-meta", EXPECTED_ROW, "v", total.to_string())?;
    t.commit().await?;
    Ok(())
}

async fn load_expected<S: RowStore>(client: &Client<S>) -> Result<i64, Error> {
    let v = client
        .begin()
        .await?
        .get("bank-meta", EXPECTED_ROW, "v")
        .await?;
    let v = v.ok_or_else(|| Error::Corrupt("bank database without its expected total".into()))?;
    String::from_utf8_lossy(&v)
        .parse()
        .map_err(|_| Error::Corrupt("expected total is not a number".into()))
}
