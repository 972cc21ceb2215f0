//! `cargo xtask`: project automation (the rust-analyzer pattern; alias in `.cargo/config.toml`).
//!
//! - `cargo xtask conformance --backend <mem|sled|tikv-fake|tikv|all> [--pd HOST:PORT]`: runs the
//!   shared conformance suite from each backend's own test target and prints pass/fail/skip
//!   counts per backend. `tikv` needs a PD address (`--pd` or `PERCOLATOR_TIKV_PD`); without one
//!   it is reported as skipped, with the reason.
//! - `cargo xtask ci`: `cargo fmt --check`, `cargo clippy --workspace --all-targets -D warnings`,
//!   the conformance suite on every backend, every other test, doc tests; ends with one
//!   `ci: N passed, N failed, N skipped` line.

use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(about = "percolator-rs project automation")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the conformance suite against one backend or all of them.
    Conformance {
        /// Which backend.
        #[arg(long, value_enum, default_value_t = Backend::All)]
        backend: Backend,
        /// PD endpoint(s) of a TiKV cluster for `tikv` (comma-separated); defaults to
        /// `PERCOLATOR_TIKV_PD`.
        #[arg(long)]
        pd: Option<String>,
    },
    /// Everything CI checks: formatting, lints, all tests.
    Ci,
}

#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
enum Backend {
    Mem,
    Sled,
    /// TiKV mapping over the in-process TiKV double.
    TikvFake,
    /// A real TiKV cluster (needs a PD address).
    Tikv,
    All,
}

/// One conformance target.
struct Target {
    backend: Backend,
    name: &'static str,
    package: &'static str,
    binary: &'static str,
    /// Needs a PD address; compiled with the `cluster-tests` feature.
    cluster: bool,
}

/// Every conformance target, in report order.
const TARGETS: &[Target] = &[
    Target {
        backend: Backend::Mem,
        name: "mem",
        package: "percolator-backend-mem",
        binary: "conformance",
        cluster: false,
    },
    Target {
        backend: Backend::Sled,
        name: "sled",
        package: "percolator-backend-sled",
        binary: "conformance",
        cluster: false,
    },
    Target {
        backend: Backend::TikvFake,
        name: "tikv-fake",
        package: "percolator-backend-tikv",
        binary: "conformance_fake",
        cluster: false,
    },
    Target {
        backend: Backend::Tikv,
        name: "tikv",
        package: "percolator-backend-tikv",
        binary: "conformance_cluster",
        cluster: true,
    },
];

/// Test counts of one run.
#[derive(Default, Clone, Copy)]
struct Counts {
    passed: u64,
    failed: u64,
    skipped: u64,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
    }
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn have_nextest() -> bool {
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
fn count_before(line: &str, word: &str) -> u64 {
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
fn run_tests(
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
    for p in packages {
        cmd.args(["-p", p]);
    }
    cmd.args(extra_test_args);
    cmd.envs(env.iter().copied());
    if let Some(f) = filter {
        if nextest {
            cmd.args(["-E", f]);
        } else {
            cmd.args(["--test", f]);
        }
    }
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

fn conformance(backend: Backend, pd: Option<String>) -> Result<Counts, String> {
    let pd = pd
        .or_else(|| std::env::var("PERCOLATOR_TIKV_PD").ok())
        .filter(|p| !p.trim().is_empty());
    let mut rows = Vec::new();
    let mut total = Counts::default();
    for target in TARGETS {
        if backend != Backend::All && backend != target.backend {
            continue;
        }
        if target.cluster && pd.is_none() {
            let reason = "no PD address (pass --pd HOST:PORT or set PERCOLATOR_TIKV_PD)";
            println!("== conformance: {}: SKIPPED, {reason}", target.name);
            total.skipped += 1;
            rows.push((
                target.name,
                Counts {
                    skipped: 1,
                    ..Counts::default()
                },
                None,
                Some(reason),
            ));
            continue;
        }
        println!("== conformance: {} ({})", target.name, target.package);
        let started = Instant::now();
        let filter = format!("binary({})", target.binary);
        let mut extra = Vec::new();
        let mut env = Vec::new();
        if target.cluster {
            extra.extend(["--features", "cluster-tests"]);
            if let Some(pd) = &pd {
                env.push(("PERCOLATOR_TIKV_PD", pd.as_str()));
            }
        }
        let counts = run_tests(&[target.package], Some(&filter), &extra, &env)?;
        rows.push((target.name, counts, Some(started.elapsed()), None));
        total.add(counts);
    }
    println!();
    println!("| backend | passed | failed | skipped | time |");
    println!("|---------|-------:|-------:|--------:|-----:|");
    for (name, c, t, reason) in &rows {
        let time = match (t, reason) {
            (Some(t), _) => format!("{:.1} s", t.as_secs_f64()),
            (None, Some(r)) => format!("suite skipped: {r}"),
            (None, None) => String::new(),
        };
        println!(
            "| {name} | {} | {} | {} | {time} |",
            c.passed, c.failed, c.skipped
        );
    }
    println!();
    println!(
        "conformance: {} passed, {} failed, {} skipped",
        total.passed, total.failed, total.skipped
    );
    Ok(total)
}

fn step(name: &str, mut cmd: Command) -> Result<(), String> {
    println!("== {name}");
    let status = cmd.status().map_err(|e| format!("{name}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

fn ci() -> Result<Counts, String> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    step("cargo fmt --check", fmt)?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    step("cargo clippy -D warnings", clippy)?;

    let mut total = conformance(Backend::All, None)?;
    println!("== other tests");
    let packages = [
        "percolator-core",
        "percolator-backend-mem",
        "percolator-backend-sled",
        "percolator-backend-tikv",
        "xtask",
    ];
    let rest = if have_nextest() {
        run_tests(&packages, Some("not binary(~conformance)"), &[], &[])?
    } else {
        run_tests(&packages, None, &[], &[])?
    };
    total.add(rest);
    println!("== doc tests");
    let mut doc = cargo();
    doc.args(["test", "--doc", "--workspace", "--quiet"]);
    step("cargo test --doc", doc)?;
    Ok(total)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Conformance { backend, pd } => conformance(backend, pd),
        Cmd::Ci => ci().inspect(|c| {
            println!();
            println!(
                "ci: {} passed, {} failed, {} skipped",
                c.passed, c.failed, c.skipped
            );
        }),
    };
    match result {
        Ok(c) if c.failed == 0 && c.passed > 0 => ExitCode::SUCCESS,
        Ok(c) if c.passed == 0 => {
            eprintln!("xtask: no test ran");
            ExitCode::FAILURE
        }
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::count_before;

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
