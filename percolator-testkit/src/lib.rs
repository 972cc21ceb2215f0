//! # percolator-testkit
//!
//! A harness for test binaries whose tests need a server: an etcd cluster, a browser, a tool.
//! Where one is not installed, the tests are reported as **ignored** (skipped), and the binary
//! prints why. libtest's own harness can only pass or fail a test that finds itself unable to
//! run, so a test that returned early would count as passed; this one does not. Under `CI`,
//! where every server is installed, a missing one fails the tests instead, so CI never skips.
//!
//! A test binary declares `harness = false` in its crate's `Cargo.toml` and lists its tests:
//!
//! ```no_run
//! use percolator_testkit::{Harness, Needs};
//!
//! async fn survives_a_leader_kill() {
//!     // … start a cluster, kill its leader, assert …
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     Harness::new(&[Needs::Etcd])
//!         .tokio("survives_a_leader_kill", 2, survives_a_leader_kill)
//!         .run()
//! }
//! ```
//!
//! It speaks the libtest command line (through `libtest-mimic`), so `cargo test`, nextest
//! (which lists ignored tests and counts them as skipped) and filters work as usual.

// A harness reports a failed test by its panic, as libtest does.
#![allow(clippy::panic)]

use std::future::Future;
use std::path::Path;
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};

/// Something a test binary needs installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Needs {
    /// An `etcd` binary (tests start their own clusters on loopback).
    Etcd,
    /// `faketime`, to run processes with skewed wall clocks.
    Faketime,
    /// A `chromium` browser, run headless.
    Chromium,
    /// The Rust toolchain's HTML docs (`$(rustc --print sysroot)/share/doc/rust/html`): real
    /// HTML nobody on the project wrote.
    RustDocs,
}

impl Needs {
    /// Why it is missing, or `None` if it is there.
    pub fn missing(self) -> Option<String> {
        match self {
            Needs::Etcd => percolator_etcd_cluster::skip_reason().map(str::to_owned),
            Needs::Faketime => (!on_path("faketime"))
                .then(|| "faketime is not installed (apt-get install faketime)".to_owned()),
            Needs::Chromium => (!on_path("chromium")).then(|| {
                "chromium is not installed to run the search page in (apt-get install chromium)"
                    .to_owned()
            }),
            Needs::RustDocs => (!rust_docs_installed()).then(|| {
                "the Rust toolchain's HTML docs are not installed (rustup component add \
                 rust-docs)"
                    .to_owned()
            }),
        }
    }
}

/// Whether `program` is an executable file in a directory of `PATH`.
/// Whether `$(rustc --print sysroot)/share/doc/rust/html` holds the book (`$RUSTC` if set).
fn rust_docs_installed() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .is_some_and(|sysroot| {
            Path::new(sysroot.trim())
                .join("share/doc/rust/html/book/index.html")
                .is_file()
        })
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program)))
    })
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// Why the tests of a binary needing `needs` cannot run here, or `None`.
pub fn missing(needs: &[Needs]) -> Option<String> {
    let reasons: Vec<String> = needs.iter().filter_map(|n| n.missing()).collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// A test: its name and what it runs (panicking on failure).
pub type TestFn = Box<dyn FnOnce() + Send>;

/// The tests of one binary and what they need.
#[must_use = "a harness does nothing until `run`"]
pub struct Harness {
    needs: Vec<Needs>,
    tests: Vec<(String, TestFn)>,
}

impl Harness {
    /// A harness for tests that need `needs`.
    pub fn new(needs: &[Needs]) -> Self {
        Self {
            needs: needs.to_vec(),
            tests: Vec::new(),
        }
    }

    /// Adds a test that panics on failure.
    pub fn test(mut self, name: &str, test: impl FnOnce() + Send + 'static) -> Self {
        self.tests.push((name.to_owned(), Box::new(test)));
        self
    }

    /// Adds an async test, run on a multi-threaded tokio runtime of `worker_threads` threads
    /// (what `#[tokio::test(flavor = "multi_thread")]` gives).
    pub fn tokio<F, Fut>(self, name: &str, worker_threads: usize, test: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.test(name, move || block_on(worker_threads, test()))
    }

    /// Adds tests made elsewhere (the conformance suites' `trials:` form).
    pub fn tests(mut self, tests: impl IntoIterator<Item = (&'static str, TestFn)>) -> Self {
        self.tests.extend(
            tests
                .into_iter()
                .map(|(name, test)| (name.to_owned(), test)),
        );
        self
    }

    /// Runs the tests the command line selects and exits with libtest's exit code.
    pub fn run(self) -> ExitCode {
        let reason = missing(&self.needs);
        let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
        let count = self.tests.len();
        match (&reason, under_ci) {
            (Some(reason), false) => eprintln!("SKIPPED ({count} tests): {reason}"),
            (Some(reason), true) => {
                eprintln!("FAILING ({count} tests): CI must not skip them, but {reason}");
            }
            (None, _) => {}
        }
        let trials = trials(self.tests, reason, under_ci);
        libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
    }
}

/// The tests as libtest trials. With `missing` set (why they cannot run), they are ignored
/// (runners list them as skipped) or, `under_ci`, failed with the reason.
fn trials(tests: Vec<(String, TestFn)>, missing: Option<String>, under_ci: bool) -> Vec<Trial> {
    let skip = missing.is_some() && !under_ci;
    tests
        .into_iter()
        .map(|(name, test)| {
            let failure = missing.clone().filter(|_| !skip);
            Trial::test(name, move || match failure {
                Some(reason) => Err(Failed::from(format!("cannot run: {reason}"))),
                None => {
                    test();
                    Ok(())
                }
            })
            .with_ignored_flag(skip)
        })
        .collect()
}

/// Runs `future` to completion on a new multi-threaded runtime.
pub fn block_on<Fut: Future<Output = ()>>(worker_threads: usize, future: Fut) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads.max(1))
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(future),
        Err(e) => panic!("cannot start a tokio runtime for the test: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<(String, TestFn)> {
        vec![
            ("a".to_owned(), Box::new(|| {}) as TestFn),
            ("b".to_owned(), Box::new(|| {}) as TestFn),
        ]
    }

    /// Tests that cannot run are listed as ignored (skipped by every runner); under CI they are
    /// not skipped but fail, naming what is missing.
    #[test]
    fn missing_servers_skip_the_tests_except_under_ci() {
        let runnable = trials(two(), None, false);
        assert!(runnable.iter().all(|t| !t.has_ignored_flag()));
        let skipped = trials(two(), Some("no etcd".into()), false);
        assert!(skipped.iter().all(Trial::has_ignored_flag));
        assert_eq!(skipped[1].name(), "b");
        let args = Arguments::from_iter(["test-binary", "--test-threads", "1"]);
        assert_eq!(libtest_mimic::run(&args, skipped).num_ignored, 2);
        let under_ci = trials(two(), Some("no etcd".into()), true);
        assert!(under_ci.iter().all(|t| !t.has_ignored_flag()));
        let conclusion = libtest_mimic::run(&args, under_ci);
        assert_eq!((conclusion.num_failed, conclusion.num_passed), (2, 0));
    }

    #[test]
    fn a_missing_program_is_named() {
        assert!(!on_path("percolator-testkit-no-such-program"));
        assert!(on_path("sh"), "sh is on every PATH this runs on");
        assert!(missing(&[]).is_none());
    }
}
