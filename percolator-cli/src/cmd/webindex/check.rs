//! `webindex check`: every invariant of the index in one snapshot and the audit of every
//! strong observer run, table by table with a progress bar (exit code 1 on a violation, 2
//! while work is pending).

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use percolator_core::{RowStore, TimestampOracle};
use percolator_webindex::{self as webindex, check::Progress};

use super::loader;
use crate::CliError;
use crate::output::{bar, check_verdict, out, outln, summary_table, table};

/// Checks the index and prints the verdict.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
) -> Result<ExitCode, CliError> {
    let client = loader(&store, &oracle).await?;
    let pipeline = webindex::observers(None);
    let pending = percolator_observers::pending_on(&client, &pipeline).await?;
    let started = Instant::now();
    let shown = Shown::default();
    let report = webindex::check::check_with(&client, &|p| shown.update(p)).await?;
    let timings = shown.finish();
    client.shutdown().await?;
    out!("{}", summary_table(&report.summary));
    let mut rows: Vec<(&str, String)> = timings
        .iter()
        .map(|(what, rows, took)| {
            (
                what.as_str(),
                format!("{rows} rows in {:.2} s", took.as_secs_f64()),
            )
        })
        .collect();
    let total = format!("{:.2} s", started.elapsed().as_secs_f64());
    rows.push(("total", total));
    out!("{}", table("check", &rows));
    if pending > 0 {
        // The invariants describe a finished pipeline: with work pending, differences
        // are the work still to do, not violations.
        outln!(
            "invariants: not judged — {pending} notification(s) pending; run `percolator webindex run` first ({} difference(s) now)",
            report.violations.len()
        );
        return Ok(ExitCode::from(2));
    }
    Ok(check_verdict(&report))
}

/// The progress bar of the table being read, and how long each table took.
#[derive(Default)]
struct Shown(Mutex<ShownState>);

#[derive(Default)]
struct ShownState {
    current: Option<(String, ProgressBar, Instant, u64)>,
    done: Vec<(String, u64, Duration)>,
}

impl Shown {
    fn update(&self, progress: Progress<'_>) {
        let Ok(mut state) = self.0.lock() else { return };
        match progress {
            Progress::Table { table, rows } => {
                state.close();
                state.current = Some((table.to_owned(), bar(rows, table), Instant::now(), 0));
            }
            Progress::Rows(n) => {
                if let Some((_, bar, _, rows)) = &mut state.current {
                    bar.set_position(n);
                    *rows = n;
                }
            }
            _ => {}
        }
    }

    fn finish(self) -> Vec<(String, u64, Duration)> {
        let mut state = self.0.into_inner().unwrap_or_default();
        state.close();
        state.done
    }
}

impl ShownState {
    fn close(&mut self) {
        if let Some((table, bar, started, rows)) = self.current.take() {
            bar.finish_and_clear();
            self.done.push((table, rows, started.elapsed()));
        }
    }
}
