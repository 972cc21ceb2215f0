//! Many processes on one etcd cluster with one oracle service: two `percolator oracle serve`
//! instances and several `percolator webindex run` workers, some with clocks ten minutes off
//! (run under `faketime`), one killed with SIGKILL mid-run, and the leading oracle killed too.
//!
//! - **Skewed clocks, no spurious rollbacks**: a worker ten minutes behind and a normal one run
//!   the pipeline together; neither rolls back a lock of the other. (With locks and leases
//!   judged by wall clocks, the behind worker's leases look ten minutes expired to the other.)
//! - **Skewed clock, no delayed recovery**: a worker ten minutes *ahead* is killed mid-run, and
//!   the leading oracle with it; the others resolve its locks, fail over to the standby oracle
//!   and finish within a bound far below ten minutes.
//! - At the end the web index's invariants hold, the store's write records show no strong
//!   observer change handled twice, and nothing is pending or locked.
//!
//! The cluster is `PERCOLATOR_ETCD_ENDPOINTS` or one this test starts. Skipped, saying why,
//! without etcd or faketime (`.ci/run` installs both).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use percolator_etcd_cluster::TestCluster;
use percolator_testkit::{Harness, Needs};

/// A `percolator` process whose output lines are collected as they come.
struct Process {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Process {
    fn spawn(name: &str, skew: Option<&str>, base: &[String], args: &[&str]) -> Self {
        let exe = env!("CARGO_BIN_EXE_percolator");
        let mut command = match skew {
            Some(offset) => {
                let mut c = Command::new("faketime");
                // Only the wall clock: monotonic time (timers, leases) stays true.
                c.env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                    .args(["-f", offset, exe]);
                c
            }
            None => Command::new(exe),
        };
        let mut child = command
            .args(base)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start percolator");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        Self {
            name: name.to_owned(),
            child,
            lines,
        }
    }

    fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits for a line containing `needle`; returns it.
    fn wait_for_line(&self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(line) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{}: no line with {needle:?} within {limit:?}:\n{}",
                self.name,
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill9(&mut self) {
        self.child.kill().unwrap(); // SIGKILL
        let _ = self.child.wait();
    }

    /// Waits for it to exit successfully within `limit` (killing it otherwise).
    fn finish(&mut self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(50)); // the readers drain
                let output = self.output();
                assert!(
                    status.success(),
                    "{} failed ({status}):\n{output}",
                    self.name
                );
                return output;
            }
            if Instant::now() >= deadline {
                self.kill9();
                panic!(
                    "{} did not finish within {limit:?}:\n{}",
                    self.name,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The count in a worker's "worker locks: N rolled back" line.
fn rolled_back(output: &str) -> u64 {
    let line = output
        .lines()
        .find(|l| l.starts_with("worker locks:"))
        .unwrap_or_else(|| panic!("no worker locks line:\n{output}"));
    line.split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable: {line}"))
}

fn run(base: &[String], args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_percolator"))
        .args(base)
        .args(args)
        .output()
        .expect("run percolator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "percolator {args:?} failed:\n{text}");
    text
}

fn workers_and_oracles_as_processes_with_skewed_clocks_and_kills() {
    let cluster = TestCluster::from_env_or_start()
        .unwrap()
        .expect("the harness runs this only where etcd is installed");
    let endpoints = cluster.endpoints().join(",");
    let namespace = format!("multi-{}", std::process::id());
    let store: Vec<String> = [
        "--backend",
        "etcd",
        "--endpoints",
        &endpoints,
        "--namespace",
        &namespace,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();

    // Two oracle instances; the first leads.
    let serve = [
        "oracle",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--lease-ms",
        "1000",
    ];
    let mut oracle_a = Process::spawn("oracle A", None, &store, &serve);
    let address = |p: &Process| {
        p.wait_for_line("oracle listening on", Duration::from_secs(30))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    let addr_a = address(&oracle_a);
    oracle_a.wait_for_line("oracle leading", Duration::from_secs(30));
    let oracle_b = Process::spawn("oracle B", None, &store, &serve);
    let addr_b = address(&oracle_b);
    let mut base = store.clone();
    base.extend(["--oracle".to_owned(), format!("{addr_a},{addr_b}")]);
    let workers = ["webindex", "run", "--scanners", "2", "--concurrency", "8"];

    // Phase 1: a normal worker and one ten minutes behind share the pipeline.
    run(&base, &["webindex", "load", "--synthetic", "200"]);
    let mut normal = Process::spawn("normal worker", None, &base, &workers);
    let mut behind = Process::spawn("worker 10 min behind", Some("-10m"), &base, &workers);
    let (normal_out, behind_out) = (
        normal.finish(Duration::from_secs(300)),
        behind.finish(Duration::from_secs(300)),
    );
    assert_eq!(
        (rolled_back(&normal_out), rolled_back(&behind_out)),
        (0, 0),
        "a live worker's locks were rolled back:\n{normal_out}\n{behind_out}"
    );

    // Phase 2: a recrawl; a worker ten minutes ahead is killed mid-run, and the leading
    // oracle with it; a replacement worker starts; everything finishes well inside ten minutes.
    run(
        &base,
        &[
            "webindex",
            "load",
            "--synthetic",
            "200",
            "--generation",
            "1",
            "--fraction",
            "0.6",
        ],
    );
    let began = Instant::now();
    let mut ahead = Process::spawn("worker 10 min ahead", Some("+10m"), &base, &workers);
    let mut normal = Process::spawn("normal worker", None, &base, &workers);
    std::thread::sleep(Duration::from_millis(1_500));
    ahead.kill9();
    oracle_a.kill9();
    let mut replacement = Process::spawn("replacement worker", None, &base, &workers);
    let limit = Duration::from_secs(240);
    normal.finish(limit);
    replacement.finish(limit);
    let took = began.elapsed();
    oracle_b.wait_for_line("oracle leading", Duration::from_secs(5));

    let checked = run(&base, &["webindex", "check"]);
    assert!(checked.contains("invariants: all hold"), "{checked}");
    assert!(checked.contains("strong observer runs: "), "{checked}");
    let status = run(&base, &["status"]);
    assert!(status.contains("0 pending, 0 locks"), "{status}");
    eprintln!("phase 2 with a kill -9 of a worker and of the leading oracle: {took:?}");
    drop(cluster);
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd, Needs::Faketime])
        .test(
            "workers_and_oracles_as_processes_with_skewed_clocks_and_kills",
            workers_and_oracles_as_processes_with_skewed_clocks_and_kills,
        )
        .run()
}
