//! `percolator serve` as a user runs it: one process owns the database and runs the observers;
//! `webindex load`, `query`, `stats` and `status` on the same `--db` go through it (or through
//! `--server URL`), commands that would open the database are refused with the reason, and
//! after SIGTERM the database opens directly again with every invariant holding.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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

#[test]
fn serve_owns_the_database_and_the_cli_goes_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut server = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("serving ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

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

    // Stats: 2 while work is pending, 0 once the server's observers are done.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (code, out) = percolator(&db, &["webindex", "stats"]);
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
    let pid = server.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(server.wait().unwrap().success());
    assert!(rest.iter().any(|l| l.starts_with("stopped:")), "{rest:?}");
    assert!(!db.join("percolator-serve.json").exists());
    let (code, out) = percolator(&db, &["webindex", "stats"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("invariants: all hold"), "{out}");
}
