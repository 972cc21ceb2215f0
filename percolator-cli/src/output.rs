//! Everything the CLI renders: progress bars, summary tables, search results and verdicts.

use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use percolator_observers::RuntimeStats;
use percolator_webindex::{self as webindex, LoadReport, Mode};

use crate::CliError;

/// A progress bar over `len` items (a spinner when `len` is unknown). Hidden when stderr is not
/// a terminal, so logs and CI output stay clean.
pub fn bar(len: Option<u64>, what: &str) -> ProgressBar {
    let bar = match len {
        Some(len) => ProgressBar::new(len).with_style(
            ProgressStyle::with_template(
                "{msg:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template(
                "{spinner} {msg:>10} [{elapsed_precise}] {pos} ({per_sec}) {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A two-column markdown table.
pub fn table(title: &str, rows: &[(&str, String)]) -> String {
    let key = rows
        .iter()
        .map(|(k, _)| k.len())
        .max()
        .unwrap_or(0)
        .max(title.len());
    let val = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0).max(5);
    let mut out = format!(
        "| {title:<key$} | {:>val$} |\n|{}|{}:|\n",
        "value",
        "-".repeat(key + 2),
        "-".repeat(val + 1)
    );
    for (k, v) in rows {
        out.push_str(&format!("| {k:<key$} | {v:>val$} |\n"));
    }
    out
}

/// Milliseconds with one decimal.
pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Escapes bytes for display (non-ASCII as `\xNN`, `|` as `\|` for tables), cut to `max`
/// characters.
pub fn show(bytes: &[u8], max: usize) -> String {
    // `|` would end a table cell.
    let s: String = bytes.escape_ascii().to_string().replace('|', "\\|");
    if s.chars().count() > max {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// Writes `report` as pretty JSON to `path` (creating its directory), if a path was given.
pub fn write_json(
    path: Option<&std::path::Path>,
    report: &serde_json::Value,
) -> Result<(), crate::CliError> {
    let Some(path) = path else {
        return Ok(());
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(report)?)?;
    println!("\nwrote {}", path.display());
    Ok(())
}

/// Prints search results as a list, or as JSON.
pub(crate) fn print_results(
    results: &webindex::SearchResults,
    offset: usize,
    json: bool,
) -> Result<ExitCode, CliError> {
    if json {
        println!("{}", serde_json::to_string_pretty(results)?);
    } else {
        print!("{}", format_results(results, offset));
    }
    Ok(ExitCode::SUCCESS)
}

/// Search results for a terminal: the count, then per hit its rank, score, URL, title and
/// snippet (matches in brackets).
pub(crate) fn format_results(results: &webindex::SearchResults, offset: usize) -> String {
    let how = match results.mode {
        Mode::Any => "any",
        _ => "all",
    };
    let mut out = format!(
        "{} of {} documents contain {how} of: {}\n",
        results.total,
        results.documents,
        results.terms.join(" ")
    );
    if !results.hits.is_empty() {
        out.push_str(&format!(
            "showing {}-{}\n",
            offset + 1,
            offset + results.hits.len()
        ));
    }
    for (i, hit) in results.hits.iter().enumerate() {
        out.push_str(&format!(
            "\n{:>3}. {}  (score {:.2}, {} inlinks)\n     {}\n",
            offset + i + 1,
            hit.title,
            hit.score,
            hit.inlinks,
            hit.url
        ));
        if !hit.snippet.text.is_empty() {
            out.push_str(&format!("     {}\n", hit.snippet.marked()));
        }
    }
    out
}

pub(crate) fn invariants_verdict(report: &webindex::CheckReport) -> ExitCode {
    if report.violations.is_empty() {
        println!(
            "invariants: all hold (hash ↔ cluster membership, one canonical per cluster, anchor terms at canonicals, index = canonical terms)"
        );
        ExitCode::SUCCESS
    } else {
        println!("invariants: {} violation(s):", report.violations.len());
        for v in report.violations.iter().take(20) {
            println!("  {v}");
        }
        ExitCode::FAILURE
    }
}

pub(crate) fn load_table(r: &LoadReport) -> String {
    table(
        "load",
        &[
            ("pages loaded", r.loaded.to_string()),
            ("unchanged", r.unchanged.to_string()),
            ("skipped (bad URL)", r.skipped.to_string()),
            ("time", format!("{:.2} s", r.elapsed.as_secs_f64())),
            (
                // Every page read counts, so an unchanged reload shows its real speed.
                "pages/s (read)",
                format!(
                    "{:.0}",
                    (r.loaded + r.unchanged + r.skipped) as f64 / r.elapsed.as_secs_f64().max(1e-9)
                ),
            ),
        ],
    )
}

pub(crate) fn stats_table(s: &RuntimeStats, elapsed: Duration) -> String {
    table(
        "observers",
        &[
            (
                "notifications processed",
                s.notifications_processed.to_string(),
            ),
            (
                "processed per second",
                format!(
                    "{:.0}",
                    s.notifications_processed as f64 / elapsed.as_secs_f64().max(1e-9)
                ),
            ),
            ("already acknowledged", s.already_acknowledged.to_string()),
            ("collapsed", s.collapsed.to_string()),
            ("collapse ratio", format!("{:.2}", s.collapse_ratio())),
            ("conflicts (re-run)", s.conflicts.to_string()),
            ("failed runs", s.failures.to_string()),
            ("lock resolutions", s.lock_resolutions.to_string()),
            (
                "dead workers swept (their locks resolved)",
                format!("{} ({})", s.dead_leases_ended, s.abandoned_locks_resolved),
            ),
            ("scanner teleports", s.teleports.to_string()),
            (
                "background GC runs (cells deleted)",
                format!("{} ({})", s.gc_runs, s.gc_cells_deleted),
            ),
            (
                "observer latency p50",
                format!("{:.2} ms", s.latency_p50_us as f64 / 1e3),
            ),
            (
                "observer latency p99",
                format!("{:.2} ms", s.latency_p99_us as f64 / 1e3),
            ),
            (
                "pending notifications",
                s.pending.map_or("-".into(), |p| p.to_string()),
            ),
            ("elapsed", format!("{:.2} s", elapsed.as_secs_f64())),
        ],
    )
}

pub(crate) fn summary_table(s: &webindex::IndexSummary) -> String {
    table(
        "web index",
        &[
            ("documents", s.documents.to_string()),
            ("processed", s.processed.to_string()),
            ("duplicate clusters (canonicals)", s.clusters.to_string()),
            ("duplicates", s.duplicates.to_string()),
            ("link targets", s.link_targets.to_string()),
            ("anchors counted at canonicals", s.inlinks.to_string()),
            ("terms", s.terms.to_string()),
            ("postings", s.postings.to_string()),
        ],
    )
}

/// A garbage collection's report: one line per table and a total.
pub(crate) fn gc_table(report: &percolator_core::GcReport) -> String {
    let mut out = format!(
        "safe point {} (was {}){}; {} live workers, {} dead workers' leases deleted\n\n\
         | table | rows | locks resolved | locks left | writes deleted | rollbacks deleted | data \
         deleted | unobserved notifications deleted | orphaned acks deleted |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        report.safe_point,
        report.previous_safe_point,
        if report.dry_run { ", dry run" } else { "" },
        report.live_workers,
        report.leases_deleted
    );
    for t in report.tables.iter().chain(std::iter::once(&report.total())) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            String::from_utf8_lossy(&t.table),
            t.rows,
            t.locks_resolved,
            t.locks_left,
            t.writes_deleted,
            t.rollbacks_deleted,
            t.data_deleted,
            t.notifications_deleted,
            t.acks_deleted
        ));
    }
    out
}
