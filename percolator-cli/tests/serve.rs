//! `percolator serve` as a user runs it: one process owns the database and runs the observers;
//! `webindex load`, `query`, `stats` and `status` on the same `--db` go through it (or through
//! `--server URL`), commands that would open the database are refused with the reason, and
//! after SIGTERM the database opens directly again with every invariant holding.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/cut_pages.rs"]
mod cut_pages;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn percolator(db: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("PERCOLATOR_SERVER")
        .output()
        .expect("run percolator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A started `percolator serve` on loopback with `extra` arguments: the child, its stdout lines
/// after the first, and its URL.
fn serve(
    db: &Path,
    extra: &[&str],
    stderr: Stdio,
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
    String,
) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("serving ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    (server, lines, url)
}

/// SIGTERM; the server's remaining stdout lines once it exited cleanly.
fn stop(
    mut server: std::process::Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
) -> Vec<String> {
    let pid = server.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let rest = lines.map_while(Result::ok).collect();
    assert!(server.wait().unwrap().success());
    rest
}

#[test]
fn serve_owns_the_database_and_the_cli_goes_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (server, lines, url) = serve(&db, &[], Stdio::inherit());

    // Load through the server (the database is its own: a second opener would be refused).
    let (code, out) = percolator(&db, &["webindex", "load", "--synthetic", "60"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("loaded through the server at {url}")),
        "{out}"
    );
    let (code, out) = percolator(&db, &["webindex", "run"]);
    assert_ne!(code, 0);
    assert!(out.contains("is owned by the server at"), "{out}");

    // The check: 2 while work is pending, 0 once the server's observers are done.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (code, out) = percolator(&db, &["webindex", "check"]);
        if code == 0 {
            assert!(out.contains("invariants: all hold"), "{out}");
            break;
        }
        assert_eq!(code, 2, "{out}");
        assert!(
            out.contains("pending; the server is working them off"),
            "{out}"
        );
        assert!(Instant::now() < deadline, "never idle: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, out) = percolator(&db, &["status"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("pending notifications") && out.contains(&url),
        "{out}"
    );

    // Query through the recorded server and through --server (any --db).
    let (code, out) = percolator(&db, &["webindex", "query", "--any", "rev0", "page"]);
    assert_eq!(code, 0, "{out}");
    let total: usize = out
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{out}"));
    assert!(total > 0, "{out}");
    let elsewhere = dir.path().join("no-such-db");
    let (code, out2) = percolator(
        &elsewhere,
        &[
            "--server", &url, "webindex", "query", "--any", "rev0", "page",
        ],
    );
    assert_eq!(code, 0, "{out2}");
    assert_eq!(out2.lines().next(), out.lines().next());
    assert!(!elsewhere.exists(), "nothing created at the unused --db");

    // SIGTERM: the server stops cleanly and forgets itself; the database opens directly.
    let rest = stop(server, lines);
    assert!(rest.iter().any(|l| l.starts_with("stopped:")), "{rest:?}");
    assert!(!db.join("percolator-serve.json").exists());
    let (code, out) = percolator(&db, &["webindex", "check"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("invariants: all hold"), "{out}");
}

/// The token: made on the first start in the database directory, readable only by its owner,
/// sent by the CLI on that `--db` without being told; `--server URL` needs it given
/// (`PERCOLATOR_TOKEN`). Another address than loopback needs a read policy. Refused requests
/// are logged, one line each.
#[test]
fn serve_keeps_a_private_token_and_logs_refusals() {
    use std::io::{Read as _, Write as _};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (code, out) = percolator(&db, &["serve", "--listen", "0.0.0.0:0"]);
    assert_ne!(code, 0);
    assert!(
        out.contains("--public-read") && out.contains("--auth-read"),
        "{out}"
    );

    let (mut server, lines, url) = serve(&db, &[], Stdio::piped());
    let mut stderr = server.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let token_file = db.join("percolator-serve.token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the token is its owner's only");
    }
    let token = std::fs::read_to_string(&token_file).unwrap();

    // Through another --db with --server: reads are open on loopback, writes need the token.
    let elsewhere = dir.path().join("elsewhere");
    let (code, out) = percolator(&elsewhere, &["--server", &url, "webindex", "query", "xy"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = percolator(
        &elsewhere,
        &["--server", &url, "webindex", "load", "--synthetic", "5"],
    );
    assert_ne!(code, 0);
    assert!(out.contains("401") && out.contains("token"), "{out}");
    let with_token = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(&elsewhere)
        .args(["--server", &url, "webindex", "load", "--synthetic", "5"])
        .env("PERCOLATOR_TOKEN", token.trim())
        .output()
        .unwrap();
    assert!(
        with_token.status.success(),
        "{}",
        String::from_utf8_lossy(&with_token.stderr)
    );
    // On the server's own --db the CLI finds the token itself.
    let (code, out) = percolator(
        &db,
        &["webindex", "load", "--synthetic", "5", "--seed", "9"],
    );
    assert_eq!(code, 0, "{out}");

    // A request for another host: refused, and logged.
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .write_all(
            b"GET /api/status HTTP/1.1\r\nHost: rebound.example\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");

    stop(server, lines);
    let logs = logs.join().unwrap();
    let refused: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("request failed"))
        .collect();
    assert!(
        refused.iter().any(|l| l.contains("421")
            && l.contains("misdirected_host")
            && l.contains("/api/status")),
        "{logs}"
    );
    assert!(
        refused
            .iter()
            .any(|l| l.contains("401") && l.contains("unauthorized")),
        "{logs}"
    );
    assert!(!logs.contains('\u{1b}'), "{logs}");
}

/// One plain HTTP GET on loopback; the answer's body.
fn http_get(url: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer
}

/// The value of an unlabelled metric in a `/metrics` answer.
fn metric(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {metrics}"))
}

/// A server collects garbage by itself: recrawls leave old versions, which its background
/// collector deletes (counted in `/metrics`) while the pipeline works, and every invariant holds
/// afterwards.
#[test]
fn serve_collects_the_garbage_recrawls_leave() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (server, lines, url) = serve(
        &db,
        &["--gc-every-secs", "0.5", "--gc-grace-secs", "0"],
        Stdio::inherit(),
    );

    for generation in ["0", "1", "2"] {
        let (code, out) = percolator(
            &db,
            &[
                "webindex",
                "load",
                "--synthetic",
                "60",
                "--generation",
                generation,
                "--fraction",
                "1",
            ],
        );
        assert_eq!(code, 0, "{out}");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let deleted = loop {
        let metrics = http_get(&url, "/metrics");
        let (runs, deleted) = (
            metric(&metrics, "percolator_gc_runs_total"),
            metric(&metrics, "percolator_gc_cells_deleted_total"),
        );
        let pending = metric(&metrics, "percolator_pending_notifications");
        if runs > 0.0 && deleted > 0.0 && pending == 0.0 {
            break deleted;
        }
        assert!(
            Instant::now() < deadline,
            "no garbage collected: {runs} runs, {deleted} cells, {pending} pending"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(deleted > 60.0, "recrawls of 60 pages left {deleted} cells");
    // One more run once the pipeline is idle, then stop.
    let runs = metric(&http_get(&url, "/metrics"), "percolator_gc_runs_total");
    while metric(&http_get(&url, "/metrics"), "percolator_gc_runs_total") < runs + 2.0 {
        assert!(Instant::now() < deadline, "GC stopped running");
        std::thread::sleep(Duration::from_millis(200));
    }
    stop(server, lines);
    let (code, out) = percolator(&db, &["webindex", "check"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("invariants: all hold"), "{out}");
}

/// Through the server, cut pages are counted as they are offline (`cli.rs`): `load --dir` and
/// `load --warc` report them in the load table, with the server's `--max-page-bytes`, and
/// `webindex stats` counts the pages stored cut.
#[test]
fn loads_through_the_server_count_cut_pages() {
    use cut_pages::{CUT_ROW, LIMIT, STORED_CUT_ROW, cell};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (pages, warc_path) = cut_pages::write(dir.path());
    let (server, lines, url) = serve(&db, &LIMIT, Stdio::inherit());

    let (code, out) = percolator(&db, &["webindex", "load", "--dir", pages.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("loaded through the server at {url}")),
        "{out}"
    );
    assert_eq!(
        (cell(&out, "pages loaded"), cell(&out, CUT_ROW)),
        ("2".into(), "1".into()),
        "{out}"
    );
    let (code, out) = percolator(
        &db,
        &["webindex", "load", "--warc", warc_path.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        (cell(&out, "pages loaded"), cell(&out, CUT_ROW)),
        ("1".into(), "1".into()),
        "{out}"
    );
    let (code, out) = percolator(&db, &["webindex", "stats"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(cell(&out, STORED_CUT_ROW), "2", "{out}");
    stop(server, lines);
}
