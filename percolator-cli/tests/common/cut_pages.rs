//! The pages the cut-page tests load (`cli.rs` offline, `serve.rs` through the server): a
//! directory with a short page and one of about 150 KB ("early" at its start, "zebrafinch" at
//! its end), and a WARC file holding the long one under another URL. Loaded with
//! `--max-page-bytes 100000`, the long page is cut on every path.

use std::path::{Path, PathBuf};

/// The row of the load table that counts cut pages.
pub const CUT_ROW: &str = "cut (over the page limit)";
/// The row of `webindex stats` and `check` that counts the pages stored cut.
pub const STORED_CUT_ROW: &str = "pages stored cut (over the page limit)";
/// The limit that cuts the long page.
pub const LIMIT: [&str; 2] = ["--max-page-bytes", "100000"];

/// Writes the fixture under `dir`: the directory `pages` (`a.html`, `big.html`) and
/// `big.warc`; returns their paths.
pub fn write(dir: &Path) -> (PathBuf, PathBuf) {
    let pages = dir.join("pages");
    std::fs::create_dir(&pages).unwrap();
    std::fs::write(pages.join("a.html"), "<p>fine</p>").unwrap();
    let head = "<html><body><p>early</p><p>";
    let tail = "</p><p>zebrafinch</p></body></html>";
    let big = format!("{head}{}{tail}", "filler ".repeat(21_000));
    std::fs::write(pages.join("big.html"), &big).unwrap();
    let warc = dir.join("big.warc");
    let mut bytes = Vec::new();
    percolator_webindex::warc::write_warc(
        &mut bytes,
        &[percolator_webindex::CrawledPage {
            url: "http://warc.example/big.html".into(),
            html: big.into(),
        }],
        false,
    )
    .unwrap();
    std::fs::write(&warc, bytes).unwrap();
    (pages, warc)
}

/// The value in the `| key | value |` row of a summary table.
pub fn cell(out: &str, key: &str) -> String {
    out.lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .find(|cols| cols.get(1) == Some(&key))
        .and_then(|cols| cols.get(2).map(|v| (*v).to_owned()))
        .unwrap_or_else(|| panic!("no row {key:?} in:\n{out}"))
}
