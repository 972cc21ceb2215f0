//! Running test binaries (nextest, or `cargo test` without it) and reading their counts.

use std::process::{Command, Stdio};

/// Test counts of one run.
#[derive(Default, Clone, Copy)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl Counts {
    pub fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
    }
}

/// A `cargo` command with the environment of the shell that ran `cargo xtask`.
///
/// `cargo run` sets `CARGO_PKG_*`, `CARGO_MANIFEST_*` and the like for the xtask binary; a cargo
/// started from here would inherit them, and build scripts that watch them (ring's does, through
/// `rerun-if-env-changed`) would see a changed environment and rebuild, again on the next build
/// started from the shell, and so on. They are removed.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    drop_cargo_run_env(&mut cmd);
    cmd
}

/// Removes from `cmd`'s environment what `cargo run` set for xtask (see [`cargo`]).
pub fn drop_cargo_run_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(set_by_cargo_run) {
            cmd.env_remove(key);
        }
    }
}

/// Whether `cargo run` sets this variable for the binary it runs (and only for it).
fn set_by_cargo_run(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_MANIFEST_")
        || matches!(
            key,
            "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE" | "OUT_DIR"
        )
}

/// Whether this runs under CI (`CI` set, as CI services set it), where every server a test
/// needs is installed, so a missing one is a failure rather than a skip.
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

pub fn have_nextest() -> bool {
    cargo()
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Pulls `N <word>` out of a summary line such as
/// `Summary [ 6.2s] 36 tests run: 35 passed, 1 failed, 0 skipped` or
/// `test result: ok. 3 passed; 0 failed; 0 ignored`.
pub fn count_before(line: &str, word: &str) -> u64 {
    let tokens: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|t| !t.is_empty())
        .collect();
    tokens
        .windows(2)
        .filter(|w| w[1] == word)
        .filter_map(|w| w[0].parse::<u64>().ok())
        .sum()
}

/// Runs tests with nextest (or `cargo test` if nextest is missing), streaming output, and returns
/// the counts from the runner's summary.
///
/// With nextest, `packages` become part of the filter expression and the build is always the
/// whole workspace's: selecting packages with `-p` changes cargo's feature unification, so every
/// step of `cargo xtask ci` would rebuild dozens of shared dependencies (about 40 crates for the
/// mem backend alone). Without nextest, `filter` names a test target and `-p` selects.
pub fn run_tests(
    packages: &[&str],
    filter: Option<&str>,
    extra_test_args: &[&str],
    env: &[(&str, &str)],
) -> Result<Counts, String> {
    let nextest = have_nextest();
    let mut cmd = cargo();
    if nextest {
        cmd.args(["nextest", "run", "--no-fail-fast", "--cargo-quiet"]);
        if std::env::var_os("CI").is_some() {
            cmd.args(["--profile", "ci"]);
        }
    } else {
        cmd.args(["test", "--no-fail-fast"]);
    }
    if nextest {
        cmd.arg("--workspace");
        if let Some(expr) = nextest_filter(packages, filter) {
            cmd.args(["-E", &expr]);
        }
    } else {
        for p in packages {
            cmd.args(["-p", p]);
        }
        if let Some(f) = filter {
            cmd.args(["--test", f]);
        }
    }
    cmd.args(extra_test_args);
    cmd.envs(env.iter().copied());
    let output = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    let mut counts = Counts::default();
    for line in stdout.lines().chain(stderr.lines()) {
        let line = line.trim();
        let summary = if nextest {
            line.starts_with("Summary") && line.contains("run:")
        } else {
            line.starts_with("test result:")
        };
        if summary {
            counts.add(Counts {
                passed: count_before(line, "passed"),
                failed: count_before(line, "failed") + count_before(line, "timed"),
                skipped: count_before(line, "skipped") + count_before(line, "ignored"),
            });
        }
    }
    if !output.status.success() && counts.failed == 0 {
        // A build failure or a crashed runner: count it as a failure, never as a pass.
        counts.failed = 1;
    }
    Ok(counts)
}

/// The nextest filter expression selecting `filter` within `packages` (all packages if empty).
fn nextest_filter(packages: &[&str], filter: Option<&str>) -> Option<String> {
    let packages = (!packages.is_empty()).then(|| {
        packages
            .iter()
            .map(|p| format!("package(={p})"))
            .collect::<Vec<_>>()
            .join(" | ")
    });
    match (packages, filter) {
        (None, None) => None,
        (Some(p), None) => Some(p),
        (None, Some(f)) => Some(f.to_owned()),
        (Some(p), Some(f)) => Some(format!("({p}) & ({f})")),
    }
}

#[cfg(test)]
mod tests {
    use super::{count_before, nextest_filter, set_by_cargo_run};

    #[test]
    fn child_cargo_drops_what_cargo_run_set_for_xtask() {
        for key in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "OUT_DIR",
        ] {
            assert!(set_by_cargo_run(key), "{key}");
        }
        for key in [
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_TERM_COLOR",
            "CARGO_INCREMENTAL",
            "CC",
        ] {
            assert!(!set_by_cargo_run(key), "{key}");
        }
    }

    #[test]
    fn packages_become_part_of_the_nextest_filter() {
        assert_eq!(nextest_filter(&[], None), None);
        assert_eq!(
            nextest_filter(&["a"], Some("binary(conformance)")).as_deref(),
            Some("(package(=a)) & (binary(conformance))")
        );
        assert_eq!(
            nextest_filter(&["a", "b"], None).as_deref(),
            Some("package(=a) | package(=b)")
        );
        assert_eq!(
            nextest_filter(&[], Some("not binary(~x)")).as_deref(),
            Some("not binary(~x)")
        );
    }

    #[test]
    fn parses_nextest_and_libtest_summaries() {
        let nextest = "Summary [   6.209s] 36 tests run: 35 passed, 1 failed, 2 skipped";
        assert_eq!(count_before(nextest, "passed"), 35);
        assert_eq!(count_before(nextest, "failed"), 1);
        assert_eq!(count_before(nextest, "skipped"), 2);
        let libtest = "test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out";
        assert_eq!(count_before(libtest, "passed"), 12);
        assert_eq!(count_before(libtest, "ignored"), 3);
    }
}
