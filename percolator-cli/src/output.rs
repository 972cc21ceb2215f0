//! Everything the CLI renders: progress bars, summary tables, search results and verdicts.
//!
//! Two rules for what reaches the terminal. Text that comes from pages or the store (titles,
//! snippets, URLs, rows, error messages quoting them) goes through [`term_safe`], so that it
//! cannot move the cursor, recolour the terminal or retitle its window. And stdout is written
//! with [`out!`] and [`outln!`] instead of `print!` and `println!`: a reader that went away
//! (`percolator … | head`) ends the process quietly instead of a panic.

use std::borrow::Cow;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use percolator_observers::RuntimeStats;
use percolator_webindex::search::Snippet;
use percolator_webindex::{self as webindex, LoadReport, Mode};

use crate::CliError;

/// `print!` to stdout, ending the process quietly when stdout is gone (see [`write_stdout`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(::std::format_args!($($arg)*), false)
    };
}

/// `println!` to stdout, ending the process quietly when stdout is gone (see [`write_stdout`]).
macro_rules! outln {
    () => {
        $crate::output::write_stdout(::std::format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(::std::format_args!($($arg)*), true)
    };
}

pub(crate) use out;
pub(crate) use outln;

/// Writes `args` (and a newline if `newline`) to stdout, as `print!` and `println!` do, but
/// without their panic when the write fails: a reader that closed the pipe
/// ([`std::io::ErrorKind::BrokenPipe`], e.g. `percolator … | head`) ends the process at once
/// with status 0, any other error with status 1 and a line on stderr. What [`out!`] and
/// [`outln!`] call.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut stdout = std::io::stdout().lock();
    let mut written = stdout.write_fmt(args);
    if newline && written.is_ok() {
        written = stdout.write_all(b"\n");
    }
    drop(stdout);
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// Whether `c` must not reach a terminal as it is: C0 controls (tab and newline included: page
/// text has no business moving the cursor inside one field), DEL, C1 controls, and the
/// bidirectional-text controls (which reorder what is shown around them).
fn is_terminal_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` with every control character (C0 U+0000–U+001F, tab and newline too; DEL U+007F;
/// C1 U+0080–U+009F) and every bidirectional-text control (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069) replaced by a visible escape: `\x1b` for U+001B, `\u{202e}`
/// for U+202E. Borrowed when there is nothing to replace. For every page-derived or stored
/// string printed on the terminal (titles, snippets, URLs, rows, error messages quoting them).
pub(crate) fn term_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_terminal_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_terminal_unsafe(c) {
            out.push(c);
        } else if c < '\u{80}' {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    Cow::Owned(out)
}

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
    outln!("\nwrote {}", term_safe(&path.display().to_string()));
    Ok(())
}

/// Prints search results as a list, or as JSON.
pub(crate) fn print_results(
    results: &webindex::SearchResults,
    offset: usize,
    json: bool,
) -> Result<ExitCode, CliError> {
    if json {
        // JSON escapes every control character itself.
        outln!("{}", serde_json::to_string_pretty(results)?);
    } else {
        out!("{}", format_results(results, offset));
    }
    Ok(ExitCode::SUCCESS)
}

/// Search results for a terminal: the count, then per hit its rank, score, URL, title and
/// snippet (matches in brackets). Page-derived text is escaped ([`term_safe`]).
pub(crate) fn format_results(results: &webindex::SearchResults, offset: usize) -> String {
    let how = match results.mode {
        Mode::Any => "any",
        _ => "all",
    };
    let mut out = format!(
        "{} of {} documents contain {how} of: {}\n",
        results.total,
        results.documents,
        term_safe(&results.terms.join(" "))
    );
    if results.scored < results.total {
        out.push_str(&format!(
            "ranked with anchors and inlinks: the best {} by text; the rest by text alone\n",
            results.scored
        ));
    }
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
            term_safe(&hit.title),
            hit.score,
            hit.inlinks,
            term_safe(&hit.url)
        ));
        if !hit.snippet.text.is_empty() {
            out.push_str(&format!("     {}\n", marked(&hit.snippet)));
        }
    }
    out
}

/// [`Snippet::marked`] with the text escaped ([`term_safe`]): the matches in `[` `]`.
fn marked(snippet: &Snippet) -> String {
    let text = snippet.text.as_str();
    let mut out = String::with_capacity(text.len() + 2 * snippet.highlights.len());
    let mut at = 0;
    for &(start, end) in &snippet.highlights {
        if let (Some(before), Some(word)) = (text.get(at..start), text.get(start..end)) {
            out.push_str(&term_safe(before));
            out.push('[');
            out.push_str(&term_safe(word));
            out.push(']');
            at = end;
        }
    }
    out.push_str(&term_safe(text.get(at..).unwrap_or_default()));
    out
}

/// The verdict of a full check: its observer audit, then every violation, each with the
/// rows it names (exit code 1 on a violation).
pub(crate) fn check_verdict(report: &webindex::CheckReport) -> ExitCode {
    outln!(
        "strong observer runs: {} for {} changes",
        report.observer_runs,
        report.observed_changes
    );
    if report.violations.is_empty() {
        outln!(
            "invariants: all hold (hash ↔ cluster membership, one canonical per cluster, anchor terms at canonicals, index = canonical terms, kept sizes, one strong run per change)"
        );
        ExitCode::SUCCESS
    } else {
        outln!("invariants: {} violation(s):", report.violations.len());
        for v in &report.violations {
            outln!(
                "  invariant {}: {} ({})",
                v.invariant,
                term_safe(&v.what),
                v.count
            );
            // The rows are escaped already; `term_safe` is the rule for stored text.
            for row in &v.rows {
                outln!("    {}", term_safe(row));
            }
            if v.count > v.rows.len() as u64 {
                outln!("    …");
            }
        }
        ExitCode::FAILURE
    }
}

/// The kept sizes (`webindex stats`) and the notifications pending.
pub(crate) fn sizes_table(s: &webindex::IndexSizes, pending: u64) -> String {
    table(
        "web index",
        &[
            ("documents", s.documents.to_string()),
            (
                "pages stored cut (over the page limit)",
                s.cut_pages.to_string(),
            ),
            ("clusters in the index", s.clusters.to_string()),
            ("duplicates (and not yet indexed)", s.duplicates.to_string()),
            ("link targets", s.link_targets.to_string()),
            ("anchors", s.inlinks.to_string()),
            ("postings", s.postings.to_string()),
            (
                "average length (tokens)",
                format!("{:.1}", s.average_length()),
            ),
            ("notifications pending", pending.to_string()),
            ("size changes not folded yet", s.unfolded.to_string()),
        ],
    )
}

pub(crate) fn load_table(r: &LoadReport) -> String {
    table(
        "load",
        &[
            ("pages loaded", r.loaded.to_string()),
            ("unchanged", r.unchanged.to_string()),
            ("skipped (bad URL)", r.skipped.to_string()),
            (
                // Loaded all the same, with the first part of their HTML.
                "cut (over the page limit)",
                r.cut.to_string(),
            ),
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
            ("worker", format!("{:016x}", s.worker)),
            (
                "scan group (membership changes)",
                format!("{} workers ({})", s.group_members, s.group_changes),
            ),
            ("rows left to the group", s.left_to_others.to_string()),
            (
                "rows held by other workers (lock service)",
                format!(
                    "{} ({} teleports away from another process's scanner; {} rows run \
                     unlocked, the service not answering)",
                    s.held_elsewhere, s.cross_process_teleports, s.lock_service_unavailable
                ),
            ),
            (
                "already acknowledged",
                format!(
                    "{} ({:.1}% of runs)",
                    s.already_acknowledged,
                    100.0 * s.already_acknowledged_share()
                ),
            ),
            ("collapsed", s.collapsed.to_string()),
            ("collapse ratio", format!("{:.2}", s.collapse_ratio())),
            ("conflicts (re-run)", s.conflicts.to_string()),
            (
                "conflicts per processed notification",
                format!("{:.3}", s.conflicts_per_processed()),
            ),
            (
                "live workers' locks rolled forward",
                s.live_lock_roll_forwards.to_string(),
            ),
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
            (
                "pages stored cut (over the page limit)",
                s.cut_pages.to_string(),
            ),
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
            term_safe(&String::from_utf8_lossy(&t.table)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_safe_escapes_controls_and_bidi_and_borrows_clean_text() {
        assert!(matches!(
            term_safe("plain text, café ✓ 日本"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            term_safe("x \u{1b}[31mRED\u{1b}[0m \u{1b}]0;pwned\u{7}"),
            "x \\x1b[31mRED\\x1b[0m \\x1b]0;pwned\\x07"
        );
        assert_eq!(
            term_safe("a\tb\nc\r\0\u{7f}"),
            "a\\x09b\\x0ac\\x0d\\x00\\x7f"
        );
        assert_eq!(term_safe("\u{85}\u{9b}31m"), "\\u{85}\\u{9b}31m");
        assert_eq!(
            term_safe("\u{202e}fdp.exe \u{2066}\u{200f}\u{61c}"),
            "\\u{202e}fdp.exe \\u{2066}\\u{200f}\\u{61c}"
        );
    }

    #[test]
    fn results_escape_page_text_and_keep_the_marks() {
        let text = "a \u{1b}[31mquokka\u{202e} b";
        let results = webindex::SearchResults {
            terms: vec!["quokka".into()],
            mode: Mode::All,
            total: 1,
            scored: 1,
            documents: 1,
            hits: vec![webindex::Hit {
                url: "http://x.example/\u{1b}[2J".into(),
                title: "t\u{1b}]0;pwned\u{7}".into(),
                score: 1.0,
                inlinks: 0,
                snippet: Snippet {
                    text: text.into(),
                    highlights: vec![(7, 13)],
                },
            }],
        };
        let out = format_results(&results, 0);
        assert!(
            !out.chars().any(|c| c != '\n' && is_terminal_unsafe(c)),
            "{out:?}"
        );
        assert!(
            out.contains("  1. t\\x1b]0;pwned\\x07  (score 1.00, 0 inlinks)\n"),
            "{out}"
        );
        assert!(out.contains("     http://x.example/\\x1b[2J\n"), "{out}");
        assert!(
            out.contains("     a \\x1b[31m[quokka]\\u{202e} b\n"),
            "{out}"
        );
    }
}
