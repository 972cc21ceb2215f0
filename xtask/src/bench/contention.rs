//! Zipf-skewed (θ = 0.99) against uniform keys (`percolator-bench contention`): goodput and
//! abort rate of 2-key read-modify-write transactions, per backend.

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json};

/// Report files: `contention-<backend>.json`.
pub const PREFIX: &str = "contention-";

/// Runs it on every backend (each prints its own table) and prints the summary.
pub fn run(ctx: &Ctx<'_>, systems: &[&str]) -> Result<(), String> {
    let mut reports = Vec::new();
    for &backend in systems {
        let json = out(&format!("{PREFIX}{backend}.json"));
        let mut cmd = bench_cmd(
            ctx,
            &["contention", "--store", &ctx.store(backend, "contention")],
        );
        cmd.arg("--json").arg(&json);
        if ctx.quick {
            cmd.arg("--quick");
        }
        println!("== contention on {backend}");
        reports.push((
            backend.to_owned(),
            run_for_json(ctx, cmd, &json, &format!("contention on {backend}"))?,
        ));
    }
    println!("\n{}", table(&reports));
    Ok(())
}

/// The table: goodput and aborts per key distribution and backend.
pub fn table(reports: &[(String, Value)]) -> String {
    let mut out = String::from(
        "## Contention: Zipf (θ = 0.99) against uniform keys, 2-key read-modify-write \
         transactions\n\n| backend | clients | keys | distribution | commits/s | aborts/s | abort \
         rate | counters add up |\n|---|---:|---:|---|---:|---:|---:|---|\n",
    );
    for (backend, report) in reports {
        for p in report["points"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "| {backend} | {} | {} | {} | {:.0} | {:.0} | {:.3} | {} |\n",
                report["clients"].as_u64().unwrap_or(0),
                report["keys"].as_u64().unwrap_or(0),
                p["distribution"].as_str().unwrap_or("?"),
                num(&p["commits_per_sec"]),
                num(&p["aborts_per_sec"]),
                num(&p["abort_rate"]),
                if report["invariant_ok"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "NO"
                },
            ));
        }
    }
    out
}
