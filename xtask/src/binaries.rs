//! The benchmark executables (`percolator-bench`, `percolator`): built by one `cargo build` per
//! `cargo xtask bench` run, then executed directly.
//!
//! Why not `cargo run -p …` per step: cargo resolves features per invocation, so
//! `-p percolator-bench` and `-p percolator-cli` each build their own copy of every crate
//! whose features differ, and in a dev build neither matches the test build CI has just made
//! (`cargo test --workspace` unifies dev-dependency features, tokio's `test-util` for one), so
//! each step would recompile tokio, sled and everything above them. Building once, with the same
//! selection as the test build in dev mode, and running the executables cargo reports, reuses
//! what is already built.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use cargo_metadata::{Message, TargetKind};

use crate::runner::cargo;

/// How the executables are built.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Profile {
    /// `--profile dist` (fat LTO, one codegen unit): the figures worth reporting.
    Dist,
    /// The dev profile with `cargo test --workspace`'s target selection (lib, bins, tests,
    /// examples), so every dependency is shared with the test build: a smoke run.
    DevLikeTests,
}

/// Paths of the built executables.
pub struct Binaries {
    /// `percolator-bench`: every benchmark.
    bench: PathBuf,
    /// `percolator`: the worker and oracle processes of Figure 10.
    percolator: PathBuf,
}

impl Binaries {
    /// A command running `percolator-bench`.
    pub fn bench(&self) -> Command {
        Command::new(&self.bench)
    }

    /// Where `percolator-bench` is (its directory names the profile it was built in).
    pub fn bench_path(&self) -> &std::path::Path {
        &self.bench
    }

    /// Where the `percolator` CLI is (for benchmarks that start it as worker processes).
    pub fn percolator_path(&self) -> &std::path::Path {
        &self.percolator
    }
}

/// The `cargo build` arguments for a profile (and the TiKV feature when a cluster is measured).
pub fn build_args(profile: Profile, tikv: bool) -> Vec<&'static str> {
    let mut args = vec!["build", "--message-format=json-render-diagnostics"];
    match profile {
        Profile::Dist => {
            args.extend([
                "--profile",
                "dist",
                "-p",
                "percolator-bench",
                "-p",
                "percolator-cli",
                "--bins",
            ]);
        }
        Profile::DevLikeTests => {
            args.extend(["--workspace", "--lib", "--bins", "--tests", "--examples"]);
        }
    }
    // Every backend the benchmarks measure: sled is not a default feature of the binaries (the
    // dev build gets it through their dev-dependencies, as the test build does).
    match (profile, tikv) {
        (Profile::Dist, false) => {
            args.extend(["--features", "percolator-bench/sled,percolator-cli/sled"])
        }
        (Profile::Dist, true) => args.extend([
            "--features",
            "percolator-bench/sled,percolator-cli/sled,percolator-bench/tikv,percolator-cli/tikv",
        ]),
        (Profile::DevLikeTests, true) => {
            args.extend(["--features", "percolator-bench/tikv,percolator-cli/tikv"]);
        }
        (Profile::DevLikeTests, false) => {}
    }
    args
}

/// Builds both executables and returns their paths. Compiler progress goes to stderr.
pub fn build(profile: Profile, tikv: bool) -> Result<Binaries, String> {
    let args = build_args(profile, tikv);
    println!("== cargo {}", args.join(" "));
    let output = cargo()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running cargo build: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the benchmarks failed ({})",
            output.status
        ));
    }
    let find = |name: &str| {
        executable(&output.stdout, name)
            .ok_or_else(|| format!("cargo build reported no `{name}` executable"))
    };
    Ok(Binaries {
        bench: find("percolator-bench")?,
        percolator: find("percolator")?,
    })
}

/// The executable of binary target `name` (not its unit-test harness) in cargo's JSON messages.
fn executable(messages: &[u8], name: &str) -> Option<PathBuf> {
    Message::parse_stream(messages)
        .filter_map(Result::ok)
        .filter_map(|m| match m {
            Message::CompilerArtifact(artifact) => Some(artifact),
            _ => None,
        })
        .filter(|a| a.target.name == name && a.target.kind.contains(&TargetKind::Bin))
        .filter(|a| !a.profile.test)
        .find_map(|a| a.executable.map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `compiler-artifact` message as cargo prints it.
    fn artifact(kind: &str, test: bool, executable: Option<&str>) -> String {
        serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": "path+file:///w/percolator-cli#0.1.0",
            "manifest_path": "/w/percolator-cli/Cargo.toml",
            "target": {
                "name": "percolator",
                "kind": [kind],
                "crate_types": [kind],
                "required-features": [],
                "src_path": "/w/percolator-cli/src/main.rs",
                "edition": "2024",
                "doctest": false,
                "test": true,
                "doc": true
            },
            "profile": {
                "opt_level": "0",
                "debuginfo": 2,
                "debug_assertions": true,
                "overflow_checks": true,
                "test": test
            },
            "features": [],
            "filenames": ["/t/debug/percolator"],
            "executable": executable,
            "fresh": true
        })
        .to_string()
    }

    #[test]
    fn finds_the_binary_not_its_test_harness() {
        let messages = [
            artifact("bin", true, Some("/t/debug/deps/percolator-abc")),
            artifact("lib", false, None),
            r#"{"reason":"build-finished","success":true}"#.to_owned(),
            "not json".to_owned(),
            artifact("bin", false, Some("/t/debug/percolator")),
        ]
        .join("\n");
        assert_eq!(
            executable(messages.as_bytes(), "percolator"),
            Some(PathBuf::from("/t/debug/percolator"))
        );
        assert_eq!(executable(messages.as_bytes(), "percolator-bench"), None);
    }

    #[test]
    fn dev_builds_select_what_the_test_build_selects() {
        let args = build_args(Profile::DevLikeTests, false);
        for a in ["--workspace", "--lib", "--bins", "--tests", "--examples"] {
            assert!(args.contains(&a), "{a} missing from {args:?}");
        }
        assert!(!args.contains(&"--profile"));
        let dist = build_args(Profile::Dist, true);
        assert!(dist.windows(2).any(|w| w == ["--profile", "dist"]));
        assert!(dist.iter().any(|a| a.contains("percolator-bench/tikv")));
        assert!(dist.iter().any(|a| a.contains("percolator-bench/sled")));
    }
}
