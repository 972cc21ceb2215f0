//! `cargo xtask ci`: formatting, lints and docs on every feature, the MSRV, every test.

use std::process::{Command, Stdio};

use crate::conformance::conformance;
use crate::runner::{Counts, cargo, have_nextest, run_tests};

pub fn step(name: &str, mut cmd: Command) -> Result<(), String> {
    println!("== {name}");
    let started = std::time::Instant::now();
    let status = cmd.status().map_err(|e| format!("{name}: {e}"))?;
    println!("({name}: {:.0} s)", started.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

/// The workspace's own packages, from `cargo metadata` (read once per `ci` run).
fn workspace_metadata() -> Result<cargo_metadata::Metadata, String> {
    cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .map_err(|e| format!("cargo metadata: {e}"))
}

/// Every package of the workspace: `ci` runs all of their tests (the conformance binaries
/// separately), so a new crate is never left out.
fn workspace_packages(metadata: &cargo_metadata::Metadata) -> Vec<String> {
    metadata
        .workspace_packages()
        .iter()
        .map(|p| p.name.to_string())
        .collect()
}

pub fn ci() -> Result<Counts, String> {
    let mut total = Counts::default();
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    step("cargo fmt --check", fmt)?;
    // Lints and docs run on the declared minimum Rust version, so the one check of every crate
    // that they need is also the MSRV check (a separate `cargo +<msrv> check` would check every
    // dependency a second time: a large part of CI's budget on a 2-core machine).
    let metadata = workspace_metadata()?;
    let msrv = msrv_toolchain(&metadata)?;
    let (mut clippy, mut doc) = match &msrv {
        Some(toolchain) => (cargo_on(toolchain), cargo_on(toolchain)),
        None => (cargo(), cargo()),
    };
    let on = msrv.as_deref().map_or_else(
        || "the default toolchain".to_owned(),
        |t| format!("Rust {t}, the MSRV"),
    );
    // Every feature at once: the tikv paths of the CLI and the bench binary and the
    // `cluster-tests` suite are compiled and linted too (no feature of the workspace conflicts).
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ]);
    step(
        &format!("cargo clippy --all-features -D warnings, on {on}"),
        clippy,
    )?;
    doc.args(["doc", "--workspace", "--no-deps", "--all-features"])
        .env("RUSTDOCFLAGS", "-D warnings");
    step(
        &format!("cargo doc (broken intra-doc links denied), on {on}"),
        doc,
    )?;
    // Every crate, test and example compiled on the MSRV above: that is the MSRV check, counted
    // as one test (skipped, with the reason printed, only without rustup).
    total.add(Counts {
        passed: u64::from(msrv.is_some()),
        skipped: u64::from(msrv.is_none()),
        failed: 0,
    });

    total.add(conformance("all", None)?);
    println!("== other tests");
    // Tests on etcd (the web index, the CLI) share one cluster for the run; where etcd is not
    // installed they print why they skip.
    let cluster = crate::cluster::for_tests()?;
    let endpoints = cluster.as_ref().ok().map(|c| c.endpoints().join(","));
    let env: Vec<(&str, &str)> = endpoints
        .as_deref()
        .map(|e| vec![(crate::cluster::ENDPOINTS_VAR, e)])
        .unwrap_or_default();
    match &cluster {
        Err(reason) if crate::runner::under_ci() => {
            return Err(format!("the tests on etcd cannot run: {reason}"));
        }
        Err(reason) => println!("(tests on etcd are reported as skipped: {reason})"),
        Ok(_) => {}
    }
    let packages = workspace_packages(&metadata);
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    let rest = if have_nextest() {
        run_tests(&packages, Some("not binary(~conformance)"), &[], &env)?
    } else {
        run_tests(&packages, None, &[], &env)?
    };
    drop(cluster);
    total.add(rest);
    println!("== doc tests");
    let mut doc = cargo();
    doc.args(["test", "--doc", "--workspace", "--no-fail-fast", "--quiet"]);
    step("cargo test --doc", doc)?;
    Ok(total)
}

/// The declared `rust-version` of the workspace.
fn declared_msrv(metadata: &cargo_metadata::Metadata) -> Result<String, String> {
    let versions: std::collections::BTreeSet<String> = metadata
        .workspace_packages()
        .iter()
        .filter_map(|p| p.rust_version.as_ref().map(ToString::to_string))
        .collect();
    let mut versions = versions.into_iter();
    match (versions.next(), versions.next()) {
        (Some(v), None) => Ok(v),
        (None, _) => Err("no package declares a rust-version".into()),
        (Some(a), Some(b)) => Err(format!(
            "packages declare different rust-versions: {a}, {b}"
        )),
    }
}

/// The declared minimum Rust version as a rustup toolchain name (`1.90`), installed with clippy
/// when missing; `None`, with the reason printed, where there is no rustup to install it with.
fn msrv_toolchain(metadata: &cargo_metadata::Metadata) -> Result<Option<String>, String> {
    let version = declared_msrv(metadata)?;
    let toolchain = version
        .strip_suffix(".0")
        .filter(|v| v.matches('.').count() == 1)
        .unwrap_or(&version)
        .to_owned();
    let rustup = Command::new("rustup")
        .args(["--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !rustup.is_ok_and(|s| s.success()) {
        println!(
            "MSRV: SKIPPED, rustup is not installed (cannot fetch Rust {toolchain}); \
             clippy and docs run on the default toolchain"
        );
        return Ok(None);
    }
    let mut install = Command::new("rustup");
    install.args([
        "toolchain",
        "install",
        &toolchain,
        "--profile",
        "minimal",
        "--component",
        "clippy",
    ]);
    step(
        &format!("rustup toolchain install {toolchain} (the MSRV)"),
        install,
    )?;
    Ok(Some(toolchain))
}

/// A `cargo` on rustup's `toolchain` (`cargo +<toolchain>`).
fn cargo_on(toolchain: &str) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg(format!("+{toolchain}"));
    // rustup's proxy picks the toolchain from `+…`; cargo's own variables would override it.
    cmd.env_remove("RUSTC")
        .env_remove("CARGO")
        .env_remove("RUSTUP_TOOLCHAIN");
    crate::runner::drop_cargo_run_env(&mut cmd);
    cmd
}
