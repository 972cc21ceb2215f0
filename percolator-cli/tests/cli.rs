//! The `percolator` binary end to end on the default embedded backend (fjall; sled where a case
//! says so): load a WARC file and a directory of HTML files, run the pipeline, query, check, and
//! look at raw cells and status.

// The binary these tests run is built with sled too: the crate's dev-dependency on
// `percolator-registry` enables it in every test build (sled is not a default feature).
#![cfg(feature = "fjall")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use percolator_webindex::{CrawledPage, warc};

#[path = "common/cut_pages.rs"]
mod cut_pages;

use cut_pages::cell;

fn percolator(db: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("run percolator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `percolator webindex run --forever` on `db` in a child, its output going to `output()`.
fn run_forever(db: &Path, output: fn() -> std::process::Stdio) -> std::process::Child {
    run_forever_with(db, output, &[])
}

/// [`run_forever`] with more arguments to `webindex run`.
fn run_forever_with(
    db: &Path,
    output: fn() -> std::process::Stdio,
    args: &[&str],
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(db)
        .args(["webindex", "run", "--forever"])
        .args(args)
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap()
}

/// The web index's tables, as `status` lists them.
const TABLES: [&str; 10] = [
    "documents",
    "links",
    "clusters",
    "members",
    "anchor_terms",
    "index_queue",
    "index",
    "index_docs",
    "corpus",
    "sizes",
];

fn page(url: &str, text: &str) -> CrawledPage {
    CrawledPage {
        url: url.into(),
        html: Bytes::from(format!(
            "<html><head><title>{text}</title></head><body><p>{text}</p>\
             <a href=\"http://b.example/\">bee link</a></body></html>"
        )),
    }
}

#[test]
fn load_run_query_stats_scan_status() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let warc_path = dir.path().join("crawl.warc.gz");
    warc::write_warc(
        std::fs::File::create(&warc_path).unwrap(),
        &[
            page("http://a.example/", "alpha words"),
            page("http://b.example/", "beta words"),
            page("http://copy.example/x/a", "alpha words"),
        ],
        true,
    )
    .unwrap();
    let html = dir.path().join("site");
    std::fs::create_dir_all(html.join("sub")).unwrap();
    std::fs::write(
        html.join("index.html"),
        "<title>gamma</title><p>gamma delta</p>",
    )
    .unwrap();
    std::fs::write(
        html.join("sub/page.html"),
        "<p>epsilon</p><a href='../index.html'>home</a>",
    )
    .unwrap();

    let (ok, out) = percolator(
        &db,
        &["webindex", "load", "--warc", warc_path.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    assert_eq!(cell(&out, "pages loaded"), "3", "{out}");
    // The warcinfo record is counted as skipped, not silently dropped.
    assert!(
        out.contains("4 records, 3 HTML pages, 1 other records skipped"),
        "{out}"
    );
    let (ok, out) = percolator(
        &db,
        &[
            "webindex",
            "load",
            "--dir",
            html.to_str().unwrap(),
            "--base-url",
            "http://site.example/",
        ],
    );
    assert!(ok, "{out}");

    let (ok, out) = percolator(&db, &["status"]);
    assert!(ok, "{out}");
    assert!(
        cell(&out, "documents").starts_with("5 pending"),
        "before the run: {out}"
    );

    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    assert!(
        cell(&out, "notifications processed")
            .parse::<u64>()
            .unwrap()
            >= 5,
        "{out}"
    );

    let (ok, out) = percolator(&db, &["webindex", "query", "alpha"]);
    assert!(ok, "{out}");
    assert!(
        out.starts_with("1 of 4 documents contain all of: alpha\nshowing 1-1\n"),
        "the mirror is not canonical: {out}"
    );
    assert!(
        out.contains("  1. alpha words  (score ") && out.contains("     http://a.example/\n"),
        "{out}"
    );
    let (ok, out) = percolator(&db, &["webindex", "query", "gamma", "delta"]);
    let first = out.lines().nth(4).unwrap_or_default().trim();
    assert!(ok && first == "http://site.example/index.html", "{out}");
    // OR, and JSON.
    let (ok, out) = percolator(
        &db,
        &["webindex", "query", "--any", "--json", "alpha", "gamma"],
    );
    assert!(ok, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["mode"], "any");
    assert!(json["total"].as_u64().unwrap() >= 2, "{out}");

    let (ok, out) = percolator(&db, &["webindex", "check"]);
    assert!(ok, "{out}");
    assert!(out.contains("invariants: all hold"), "{out}");
    assert_eq!(cell(&out, "documents"), "5", "{out}");
    assert_eq!(cell(&out, "duplicate clusters (canonicals)"), "4", "{out}");
    assert!(out.contains("| documents "), "per-table timings: {out}");
    // The kept sizes say the same, from a few cells.
    let (ok, out) = percolator(&db, &["webindex", "stats"]);
    assert!(ok, "{out}");
    assert_eq!(cell(&out, "documents"), "5", "{out}");
    assert_eq!(cell(&out, "clusters in the index"), "4", "{out}");
    assert_eq!(cell(&out, "notifications pending"), "0", "{out}");

    let (ok, out) = percolator(&db, &["status"]);
    assert!(ok, "{out}");
    for table in TABLES {
        assert_eq!(
            cell(&out, table),
            "0 pending, 0 locks",
            "after the run: {out}"
        );
    }

    assert!(
        cell(&out, "parked changes") == "0",
        "no observer failed: {out}"
    );
    // The workers registered the pipeline's observers in the store.
    let (ok, out) = percolator(&db, &["observers", "list"]);
    assert!(ok, "{out}");
    for observer in
        percolator_webindex::observers::<percolator_backend_sled::SledStore>(None).names()
    {
        assert!(
            out.contains(&format!("{observer} (")),
            "{observer} missing: {out}"
        );
    }
    let (ok, out) = percolator(&db, &["observers", "retry"]);
    assert!(ok && cell(&out, "handed back") == "0", "{out}");
    let (ok, out) = percolator(&db, &["observers", "forget", "no-such-observer"]);
    assert!(
        !ok && out.contains("no observer named \"no-such-observer\""),
        "{out}"
    );

    let (ok, out) = percolator(
        &db,
        &["scan", "documents", "--family", "write", "--limit", "2"],
    );
    assert!(
        ok && out.contains("| write | http://a.example/ |") && out.contains("Put start_ts="),
        "{out}"
    );

    let (ok, out) = percolator(&db, &["webindex", "load", "--warc", "/nonexistent.warc"]);
    assert!(!ok && out.contains("--warc /nonexistent.warc"), "{out}");
}

/// Ctrl-C (SIGINT) during `webindex run --forever` stops the worker gracefully: in-flight runs
/// finish, and no lock is left in any table.
#[test]
fn ctrl_c_stops_gracefully_without_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out) = percolator(&db, &["webindex", "load", "--synthetic", "300"]);
    assert!(ok, "{out}");
    let child = run_forever(&db, std::process::Stdio::piped);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("interrupted: stopped gracefully"), "{text}");
    let (ok, out) = percolator(&db, &["status"]);
    assert!(ok, "{out}");
    for table in TABLES {
        assert!(cell(&out, table).ends_with(", 0 locks"), "{table}: {out}");
    }
}

/// The command turns transparent huge pages off for itself (the kernel zeroes a whole huge page
/// at its first touch, which costs the index run CPU and memory): `THP_enabled` in the running
/// process's status is 0.
#[cfg(target_os = "linux")]
#[test]
fn the_command_runs_without_transparent_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = run_forever(&dir.path().join("db"), std::process::Stdio::null);
    let status_file = format!("/proc/{}/status", child.id());
    // The flag is set first thing in `main`; give the process a moment to get there.
    let mut thp = None;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let status = std::fs::read_to_string(&status_file).unwrap();
        thp = status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:"))
            .map(|v| v.trim().to_owned());
        if thp.as_deref() == Some("0") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(thp.as_deref(), Some("0"), "THP_enabled in {status_file}");
}

/// Locks in every web index table, as `status` counts them ("N pending, M locks").
fn locks_in_status(out: &str) -> u64 {
    TABLES
        .iter()
        .map(|table| {
            let cell = cell(out, table);
            let locks = cell
                .rsplit(", ")
                .next()
                .and_then(|l| l.strip_suffix(" locks"))
                .unwrap_or_else(|| panic!("no lock count for {table} in {out}"));
            locks.parse::<u64>().unwrap()
        })
        .sum()
}

/// A run killed with SIGKILL leaves locks behind; the next run leaves none when it is done,
/// because its dead-worker sweep resolves the killed worker's locks (at once: on sled, a worker
/// of another process is dead), also on cells no observer reads again. `status` then shows no
/// locks and no lapsed worker. The killed runs commit in two phases (`--two-phase`): most
/// transactions commit in one step without locks, which a kill rarely catches. On sled: on fjall
/// the timed kills do not reliably catch a lock, and fjall's survival of SIGKILL is
/// `crash_kill9.rs`'s case.
#[test]
fn rerun_after_sigkill_leaves_no_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out) = percolator(
        &db,
        &[
            "--backend",
            "sled",
            "webindex",
            "load",
            "--synthetic",
            "1500",
        ],
    );
    assert!(ok, "{out}");
    let mut left = 0;
    // Early kills: each run gets further through the backlog, and an idle one holds no lock.
    for attempt in 0..8u64 {
        let mut child = run_forever_with(&db, std::process::Stdio::null, &["--two-phase"]);
        std::thread::sleep(std::time::Duration::from_millis(500 + 200 * attempt));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let (ok, out) = percolator(&db, &["status"]);
        assert!(ok, "{out}");
        left = locks_in_status(&out);
        if left > 0 {
            break;
        }
    }
    assert!(left > 0, "no SIGKILL left a lock behind in 8 tries");
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    assert!(
        !cell(&out, "dead workers swept (their locks resolved)").starts_with("0 "),
        "{out}"
    );
    let (ok, out) = percolator(&db, &["status"]);
    assert!(ok, "{out}");
    assert_eq!(locks_in_status(&out), 0, "{out}");
    assert_eq!(
        cell(
            &out,
            "registered workers: live (incl. this one) / lease lapsed"
        ),
        "1 / 0",
        "{out}"
    );
}

/// On the default backend (fjall), a busy cell's one-phase notifications coalesce: the store
/// keeps them in memory on the notify key that carries them, so a SIGKILL loses them. The key
/// stays, and every run after the restart covers their commits. Runs killed at three points
/// (one-phase commits, coalescing on), then a run to the end: nothing pending, every invariant
/// holds, and no strong observer ran twice for a change.
#[test]
fn sigkill_loses_no_coalesced_notification() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out) = percolator(&db, &["webindex", "load", "--synthetic", "1000"]);
    assert!(ok, "{out}");
    for attempt in 0..3u64 {
        let mut child = run_forever(&db, std::process::Stdio::null);
        std::thread::sleep(std::time::Duration::from_millis(700 + 400 * attempt));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    let (ok, out) = percolator(&db, &["webindex", "check"]);
    assert!(ok, "{out}");
    assert!(out.contains("invariants: all hold"), "{out}");
    assert!(out.contains("strong observer runs: "), "{out}");
}

/// The `(all)` line of a `gc` summary: rows, locks resolved, locks left, writes, rollbacks, data,
/// unobserved notifications and orphaned acks deleted.
fn gc_total(out: &str) -> Vec<u64> {
    out.lines()
        .find(|l| l.starts_with("| (all) |"))
        .unwrap_or_else(|| panic!("no total in:\n{out}"))
        .split('|')
        .map(str::trim)
        .filter_map(|v| v.parse().ok())
        .collect()
}

#[test]
fn gc_dry_run_then_collect_keeps_the_bank_balanced() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // sled: `compact` below is sled's; every later command finds sled's files in `db` itself.
    let (ok, out) = percolator(
        &db,
        &[
            "--backend",
            "sled",
            "bank",
            "--transfers",
            "300",
            "--workers",
            "4",
        ],
    );
    assert!(ok, "{out}");
    let (ok, dry) = percolator(&db, &["gc", "--dry-run", "--grace-secs", "0"]);
    assert!(ok, "{dry}");
    assert!(dry.contains("dry run"), "{dry}");
    let planned = gc_total(&dry);
    assert!(
        planned[3] >= 600,
        "300 transfers supersede 600 balances: {dry}"
    );
    let (ok, done) = percolator(&db, &["gc", "--grace-secs", "0"]);
    assert!(ok, "{done}");
    assert!(gc_total(&done)[3] >= planned[3], "{done}");
    let (ok, again) = percolator(&db, &["gc", "--grace-secs", "0"]);
    assert!(ok, "{again}");
    assert_eq!(gc_total(&again)[3..], [0, 0, 0, 0, 0], "{again}");
    // The space GC freed goes back to the file system with `compact`; nothing live is lost.
    let json = dir.path().join("compact.json");
    let (ok, compacted) = percolator(&db, &["compact", "--json", json.to_str().unwrap()]);
    assert!(ok, "{compacted}");
    assert!(compacted.contains("disk ÷ live after"), "{compacted}");
    let sizes: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (before, after) = (
        sizes["disk_bytes_before"].as_u64().unwrap(),
        sizes["disk_bytes_after"].as_u64().unwrap(),
    );
    assert!(after < before, "{compacted}");
    assert!(sizes["live_bytes"].as_u64().unwrap() > 0, "{compacted}");
    let (ok, verify) = percolator(&db, &["bank", "--verify"]);
    assert!(
        ok && verify.contains("total 100000, expected 100000"),
        "{verify}"
    );
    let (ok, bad) = percolator(&db, &["gc", "--grace-secs", "-1"]);
    assert!(!ok && bad.contains("--grace-secs"), "{bad}");
    let missing = dir.path().join("no-such-db");
    let (ok, bad) = percolator(&missing, &["compact"]);
    assert!(!ok && bad.contains("no-such-db"), "{bad}");
    assert!(!missing.exists(), "compact created nothing");
    // The other engine's name on a sled directory is refused before anything is written there.
    let (ok, bad) = percolator(&db, &["--backend", "fjall", "status"]);
    assert!(
        !ok && bad.contains("holds a sled database, not a fjall one"),
        "{bad}"
    );
    assert!(
        !db.join("version").exists(),
        "fjall wrote nothing into the sled directory"
    );
    // A new database is fjall's, which compacts online.
    let fresh = dir.path().join("fjall-db");
    let (ok, out) = percolator(&fresh, &["bank", "--transfers", "20"]);
    assert!(ok, "{out}");
    let (ok, bad) = percolator(&fresh, &["compact"]);
    assert!(!ok && bad.contains("holds a fjall database"), "{bad}");
}

/// The rough edges a new user hits first: a mistyped path for a read-only command, a load with
/// no source, a path that is a file, and stats while work is pending — each a clear answer, and
/// nothing created by accident.
#[test]
fn mistakes_get_clear_answers_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("mistyped");
    for args in [
        &["webindex", "stats"][..],
        &["webindex", "check"],
        &["webindex", "query", "x"],
        &["status"],
    ] {
        let (ok, out) = percolator(&missing, args);
        assert!(
            !ok && out.contains("no database at") && out.contains("mistyped"),
            "{args:?}: {out}"
        );
    }
    assert!(
        !missing.exists(),
        "a read-only command created the database"
    );
    let db = dir.path().join("db");
    let (ok, out) = percolator(&db, &["webindex", "load"]);
    assert!(!ok && out.contains("nothing to load"), "{out}");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (ok, out) = percolator(&file, &["webindex", "load", "--synthetic", "3"]);
    assert!(!ok && out.contains("Not a directory"), "{out}");
    let (ok, out) = percolator(&db, &["webindex", "load", "--synthetic", "20"]);
    assert!(ok, "{out}");
    let stats = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(&db)
        .args(["webindex", "check"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&stats.stdout);
    assert_eq!(stats.status.code(), Some(2), "{out}");
    assert!(out.contains("20 notification(s) pending"), "{out}");
    // The loader deregistered: only `status`'s own client is live, none lapsed.
    let (ok, out) = percolator(&db, &["status"]);
    assert!(ok && out.contains(" 1 / 0 |"), "{out}");
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("| pending notifications") && l.trim_end().ends_with("0 |")),
        "{out}"
    );
}

/// `scan`: an unknown table is an error naming the tables there are; `--family data` also shows
/// values stored inline in write records; `--full` shows values whole.
#[test]
fn scan_names_tables_shows_inline_values_and_whole_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out) = percolator(&db, &["bank", "--transfers", "20", "--workers", "2"]);
    assert!(ok, "{out}");
    let (ok, out) = percolator(&db, &["scan", "no-such-table"]);
    assert!(
        !ok && out.contains("no table \"no-such-table\"") && out.contains("bank"),
        "{out}"
    );
    // A one-row load of a short page commits in one phase, its value inline.
    let pages = dir.path().join("pages");
    std::fs::create_dir(&pages).unwrap();
    std::fs::write(pages.join("tiny.html"), "<p>a|b</p>").unwrap();
    let (ok, out) = percolator(&db, &["webindex", "load", "--dir", pages.to_str().unwrap()]);
    assert!(ok, "{out}");
    let (ok, out) = percolator(&db, &["scan", "documents", "--family", "data"]);
    assert!(ok && out.contains("(inline in the write record)"), "{out}");
    assert!(out.contains("a\\|b"), "a | in a value is escaped: {out}");
    let (ok, out) = percolator(&db, &["webindex", "load", "--synthetic", "3"]);
    assert!(ok, "{out}");
    let args = [
        "scan",
        "documents",
        "--family",
        "data",
        "--start",
        "http://site0",
        "--limit",
        "1",
    ];
    let (ok, cut) = percolator(&db, &args);
    assert!(ok && cut.contains('…') && !cut.contains("</html>"), "{cut}");
    let (ok, whole) = percolator(&db, &[&args[..], &["--full"]].concat());
    assert!(ok && whole.contains("</html>"), "{whole}");
}

/// `load --dir` and `--warc`: a file that cannot be read is skipped and named, the others load;
/// a page over `--max-page-bytes` is loaded cut, and every path counts it the same way, in the
/// load's table and in `webindex stats` (kept sizes the check recounts). Loaded again whole
/// with the default limit (16 MiB), its last word is found.
#[cfg(target_os = "linux")]
#[test]
fn loads_count_cut_pages_the_same_way_on_every_path() {
    use cut_pages::{CUT_ROW, LIMIT, STORED_CUT_ROW};

    let dir = tempfile::tempdir().unwrap();
    let (pages, warc_path) = cut_pages::write(dir.path());
    // Listed as a regular file, but reading it fails (EIO at offset 0).
    std::os::unix::fs::symlink("/proc/self/mem", pages.join("broken.html")).unwrap();
    let db = dir.path().join("db");
    let (pages, warc_path) = (pages.to_str().unwrap(), warc_path.to_str().unwrap());
    let load_dir = ["webindex", "load", "--dir", pages];

    let (ok, out) = percolator(&db, &[&load_dir[..], &LIMIT].concat());
    assert!(ok, "{out}");
    assert!(
        out.contains("skipped unreadable file") && out.contains("broken.html"),
        "{out}"
    );
    assert!(out.contains("1 unreadable (skipped)"), "{out}");
    assert_eq!(
        (cell(&out, "pages loaded"), cell(&out, CUT_ROW)),
        ("2".into(), "1".into()),
        "{out}"
    );
    // The same pages again: unchanged, the cut one too.
    let (ok, out) = percolator(&db, &[&load_dir[..], &LIMIT].concat());
    assert!(ok, "{out}");
    assert_eq!(
        (cell(&out, "unchanged"), cell(&out, CUT_ROW)),
        ("2".into(), "0".into()),
        "{out}"
    );
    let (ok, out) = percolator(
        &db,
        &[&["webindex", "load", "--warc", warc_path][..], &LIMIT].concat(),
    );
    assert!(ok, "{out}");
    assert_eq!(cell(&out, CUT_ROW), "1", "{out}");
    let (ok, out) = percolator(&db, &["webindex", "stats"]);
    assert!(ok, "{out}");
    assert_eq!(cell(&out, STORED_CUT_ROW), "2", "{out}");

    // The directory again with the default limit: the page is whole now, and found by its last
    // word; the WARC's copy stays cut.
    let (ok, out) = percolator(&db, &load_dir);
    assert!(ok, "{out}");
    assert_eq!(
        (cell(&out, "pages loaded"), cell(&out, CUT_ROW)),
        ("1".into(), "0".into()),
        "{out}"
    );
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    for command in ["stats", "check"] {
        let (ok, out) = percolator(&db, &["webindex", command]);
        assert!(ok, "{out}");
        assert_eq!(cell(&out, STORED_CUT_ROW), "1", "{command}: {out}");
    }
    let (ok, out) = percolator(&db, &["webindex", "query", "zebrafinch"]);
    assert!(ok && out.contains("http://localhost/big.html"), "{out}");
    assert!(!out.contains("warc.example"), "{out}");
}

/// Deleted pages leave the index: `load --dir --delete-missing` deletes what the directory no
/// longer has, `webindex delete URL` deletes one page, and after a run neither is found while
/// every invariant holds.
#[test]
fn deleted_pages_leave_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages");
    std::fs::create_dir(&pages).unwrap();
    for (name, word) in [("a", "aardvark"), ("b", "bumblebee"), ("c", "caracal")] {
        std::fs::write(
            pages.join(format!("{name}.html")),
            format!("<title>{word}</title><p>{word} lives here</p>"),
        )
        .unwrap();
    }
    let db = dir.path().join("db");
    let dir_arg = pages.to_str().unwrap();
    let base = ["--base-url", "http://zoo.example/"];
    let (ok, out) = percolator(
        &db,
        &[&["webindex", "load", "--dir", dir_arg][..], &base].concat(),
    );
    assert!(ok, "{out}");
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    let found = |word: &str| {
        let (ok, out) = percolator(&db, &["webindex", "query", word]);
        assert!(ok, "{out}");
        !out.starts_with("0 of")
    };
    assert!(found("bumblebee") && found("caracal"));
    std::fs::remove_file(pages.join("b.html")).unwrap();
    let (ok, out) = percolator(
        &db,
        &[
            &["webindex", "load", "--dir", dir_arg, "--delete-missing"][..],
            &base,
        ]
        .concat(),
    );
    assert!(
        ok && out.contains("deleted 1 page(s) under http://zoo.example/"),
        "{out}"
    );
    let (ok, out) = percolator(&db, &["webindex", "delete", "http://zoo.example/c.html"]);
    assert!(ok && out.contains("deleted 1 page(s)"), "{out}");
    let (ok, out) = percolator(&db, &["webindex", "delete", "http://zoo.example/nope.html"]);
    assert!(
        !ok && out.contains("nothing to delete: http://zoo.example/nope.html"),
        "{out}"
    );
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    assert!(!found("bumblebee") && !found("caracal") && found("aardvark"));
    let (ok, out) = percolator(&db, &["webindex", "check"]);
    assert!(ok && out.contains("invariants: all hold"), "{out}");
    assert_eq!(cell(&out, "documents"), "1", "{out}");
}

/// `stdout` holds no byte a terminal acts on: no C0 control but `\n`, no DEL, no C1 control
/// and no bidirectional-text control.
fn assert_terminal_safe(stdout: &[u8]) {
    let text = String::from_utf8_lossy(stdout);
    assert!(
        !stdout
            .iter()
            .any(|&b| (b < 0x20 && b != b'\n') || b == 0x7f),
        "a raw control byte: {text:?}"
    );
    let bidi = |c: char| {
        matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    assert!(
        !text
            .chars()
            .any(|c| (c.is_control() && c != '\n') || bidi(c)),
        "a raw control character: {text:?}"
    );
}

/// Page text never reaches the terminal raw: the escape sequences of a title (recolouring,
/// retitling the window) and of a body (clearing the screen), and a right-to-left override,
/// come out as visible escapes (`\x1b`, `\u{202e}`); so does a URL `delete` quotes back.
#[test]
fn page_text_reaches_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let pages = dir.path().join("pages");
    std::fs::create_dir(&pages).unwrap();
    std::fs::write(
        pages.join("evil.html"),
        "<html><head><title>x \u{1b}[31mRED\u{1b}[0m \u{1b}]0;pwned\u{7}</title></head>\
         <body><p>quokka zanzibar \u{1b}[2J cleared \u{202e}desrever tail</p></body></html>",
    )
    .unwrap();
    let (ok, out) = percolator(&db, &["webindex", "load", "--dir", pages.to_str().unwrap()]);
    assert!(ok && cell(&out, "pages loaded") == "1", "{out}");
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");

    let query = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(&db)
        .args(["webindex", "query", "quokka"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&query.stdout);
    assert!(
        query.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&query.stderr)
    );
    assert_terminal_safe(&query.stdout);
    assert!(text.starts_with("1 of 1 documents"), "{text}");
    assert!(text.contains("http://localhost/evil.html"), "{text}");
    assert!(
        text.contains("x \\x1b[31mRED\\x1b[0m \\x1b]0;pwned\\x07"),
        "{text}"
    );
    assert!(
        text.contains("\\x1b[2J cleared \\u{202e}desrever"),
        "{text}"
    );
    assert!(text.contains("[quokka]"), "{text}");

    let delete = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(&db)
        .args(["webindex", "delete", "http://x.example/\u{1b}[31m\u{202e}"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&delete.stdout);
    assert!(!delete.status.success(), "{text}");
    assert_terminal_safe(&delete.stdout);
    assert!(
        text.contains("nothing to delete: http://x.example/\\x1b[31m\\u{202e}"),
        "{text}"
    );
}

/// The word on the most pages of the synthetic crawl `load --synthetic docs --seed seed` makes.
fn most_common_word(docs: usize, seed: u64) -> String {
    let crawl = percolator_webindex::synthetic::SyntheticCrawl::new(docs, seed);
    let mut pages_with = std::collections::HashMap::<String, usize>::new();
    for page in crawl.initial() {
        let parsed = percolator_webindex::html::parse_page(&page.url, &page.html);
        for term in parsed.terms.counts.into_keys() {
            *pages_with.entry(term).or_default() += 1;
        }
    }
    pages_with
        .into_iter()
        .max_by_key(|(_, pages)| *pages)
        .unwrap()
        .0
}

/// `percolator … webindex query … | head -c 10`: the reader closes the pipe while the command
/// writes hundreds of hits (as JSON and as text); the command ends at once with status 0, with
/// no panic and no "Broken pipe" message.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    use std::io::Read as _;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out) = percolator(
        &db,
        &["webindex", "load", "--synthetic", "800", "--seed", "7"],
    );
    assert!(ok, "{out}");
    let (ok, out) = percolator(&db, &["webindex", "run"]);
    assert!(ok, "{out}");
    let word = most_common_word(800, 7);
    for json in [true, false] {
        let mut args = vec!["webindex", "query", "--limit", "1000"];
        if json {
            args.push("--json");
        }
        args.push(&word);
        let mut child = Command::new(env!("CARGO_BIN_EXE_percolator"))
            .arg("--db")
            .arg(&db)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 10];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "--json {json}: {:?}, stderr: {stderr}",
            out.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "--json {json}: {stderr}"
        );
    }
}

/// A `javascript:` URL (and other URLs that name no web page) offered through the loaders of the
/// CLI — a WARC file, a directory with such a `--base-url` — is refused and counted, and never
/// stored.
#[test]
fn script_urls_are_refused_by_every_loader() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = dir.path().join("hostile.warc");
    let mut bytes = Vec::new();
    warc::write_warc(
        &mut bytes,
        &[
            CrawledPage {
                url: "javascript:fetch('/api/delete-missing',{method:'POST'})//x".into(),
                html: Bytes::from_static(b"<title>bait</title><p>click</p>"),
            },
            CrawledPage {
                url: "data:text/html,<script>alert(1)</script>".into(),
                html: Bytes::from_static(b"<title>bait</title><p>click</p>"),
            },
            CrawledPage {
                url: "http://fine.example/".into(),
                html: Bytes::from_static(b"<title>fine</title><p>ok</p>"),
            },
        ],
        false,
    )
    .unwrap();
    std::fs::write(&file, bytes).unwrap();
    let (ok, out) = percolator(&db, &["webindex", "load", "--warc", file.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("2 HTML pages skipped (bad URL)"), "{out}");
    let loaded = out
        .lines()
        .find(|l| l.contains("pages loaded"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(loaded.trim_end_matches('|').trim().ends_with('1'), "{out}");

    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    std::fs::write(site.join("a.html"), "<title>a</title>").unwrap();
    let (ok, out) = percolator(
        &db,
        &[
            "webindex",
            "load",
            "--dir",
            site.to_str().unwrap(),
            "--base-url",
            "javascript:alert(1)//",
        ],
    );
    assert!(!ok && out.contains("javascript"), "{out}");
    let (ok, out) = percolator(&db, &["scan", "documents"]);
    assert!(ok, "{out}");
    assert!(
        !out.contains("javascript") && !out.contains("data:text"),
        "{out}"
    );
}
