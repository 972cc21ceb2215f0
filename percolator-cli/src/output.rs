//! Progress bars and summary tables.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

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

/// Prints a milestone line above `bar`, or to stderr when the bar is hidden (stderr is not a
/// terminal: a log file keeps the milestones of a long run even without the bar).
pub fn milestone(bar: &ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
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
