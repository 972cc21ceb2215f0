//! `cargo xtask ci`: formatting, lints, every test.

use std::process::Command;

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

pub fn ci() -> Result<Counts, String> {
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
        "percolator-observers",
        "percolator-bench",
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
