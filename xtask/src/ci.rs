//! `cargo xtask ci`: formatting, lints and docs on every feature, the MSRV, every test.

use std::process::{Command, Stdio};

use crate::Backend;
use crate::conformance::conformance;
use crate::runner::{Counts, cargo, have_nextest, run_tests};

pub fn step(name: &str, mut cmd: Command) -> Result<(), String> {
    println!("== {name}");
    let status = cmd.status().map_err(|e| format!("{name}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

/// Every package of the workspace, from `cargo metadata`: `ci` runs all of their tests (the
/// conformance binaries separately), so a new crate is never left out.
fn workspace_packages() -> Result<Vec<String>, String> {
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    Ok(metadata
        .workspace_packages()
        .iter()
        .map(|p| p.name.to_string())
        .collect())
}

pub fn ci() -> Result<Counts, String> {
    let mut total = Counts::default();
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    step("cargo fmt --check", fmt)?;
    // Every feature at once: the tikv paths of the CLI and the bench binary and the
    // `cluster-tests` suite are compiled and linted too (no feature of the workspace conflicts).
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ]);
    step("cargo clippy --all-features -D warnings", clippy)?;
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps", "--all-features"])
        .env("RUSTDOCFLAGS", "-D warnings");
    step("cargo doc (broken intra-doc links denied)", doc)?;
    total.add(msrv()?);

    total.add(conformance(Backend::All, None)?);
    println!("== other tests");
    // Tests on etcd (the web index, the CLI) share one cluster for the run; where etcd is not
    // installed they print why they skip.
    let cluster = crate::cluster::for_tests()?;
    let endpoints = cluster.as_ref().ok().map(|c| c.endpoints().join(","));
    let env: Vec<(&str, &str)> = endpoints
        .as_deref()
        .map(|e| vec![(crate::cluster::ENDPOINTS_VAR, e)])
        .unwrap_or_default();
    if let Err(reason) = &cluster {
        println!("(tests on etcd skip: {reason})");
    }
    if std::process::Command::new("chromium")
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        println!("(the search page's browser test skips: chromium is not installed)");
    }
    let packages = workspace_packages()?;
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
    doc.args(["test", "--doc", "--workspace", "--quiet"]);
    step("cargo test --doc", doc)?;
    Ok(total)
}

/// The declared `rust-version` of the workspace, from `cargo metadata`.
fn declared_msrv() -> Result<String, String> {
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .map_err(|e| format!("cargo metadata: {e}"))?;
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

/// Checks the libraries and binaries with the declared minimum Rust version, installing that
/// toolchain with rustup when it is missing. Counted as one test (skipped, with the reason,
/// only where there is no rustup to install it with).
fn msrv() -> Result<Counts, String> {
    let version = declared_msrv()?;
    let toolchain = version
        .strip_suffix(".0")
        .filter(|v| v.matches('.').count() == 1)
        .unwrap_or(&version)
        .to_owned();
    println!("== MSRV: cargo +{toolchain} check --workspace --lib --bins --all-features");
    let rustup = Command::new("rustup")
        .args(["--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !rustup.is_ok_and(|s| s.success()) {
        println!("MSRV: SKIPPED, rustup is not installed (cannot fetch Rust {toolchain})");
        return Ok(Counts {
            skipped: 1,
            ..Counts::default()
        });
    }
    let mut install = Command::new("rustup");
    install.args(["toolchain", "install", &toolchain, "--profile", "minimal"]);
    step(&format!("rustup toolchain install {toolchain}"), install)?;
    let mut check = Command::new("cargo");
    check.args([
        &format!("+{toolchain}"),
        "check",
        "--workspace",
        "--lib",
        "--bins",
        "--all-features",
        "--quiet",
    ]);
    // rustup's proxy picks the toolchain from `+…`; cargo's own variables would override it.
    check
        .env_remove("RUSTC")
        .env_remove("CARGO")
        .env_remove("RUSTUP_TOOLCHAIN");
    crate::runner::drop_cargo_run_env(&mut check);
    let passed = check.status().is_ok_and(|s| s.success());
    println!(
        "MSRV {toolchain}: {}",
        if passed { "builds" } else { "FAILED" }
    );
    Ok(Counts {
        passed: u64::from(passed),
        failed: u64::from(!passed),
        skipped: 0,
    })
}
