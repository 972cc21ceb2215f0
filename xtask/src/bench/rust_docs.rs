//! Relevance on the Rust docs (`percolator-bench rust-docs --full`): the toolchain's whole HTML
//! docs indexed on fjall, every hand-judged query's first page ranked as before and now (and
//! with larger rerank pools), each query paged through; the table, and README's row.

use serde_json::Value;

use super::{Ctx, bench_cmd, num, out, run_for_json};

/// The report file.
pub const FILE: &str = "rust-docs.json";

/// Rerank pools measured besides before (100) and now.
const POOLS: &str = "500,1000";

/// Runs it (the subset with `--quick`).
pub fn run(ctx: &Ctx<'_>) -> Result<(), String> {
    let json = out(FILE);
    let mut cmd = bench_cmd(
        ctx,
        &[
            "rust-docs",
            "--store",
            &ctx.store("fjall", "rust-docs"),
            "--pools",
            POOLS,
        ],
    );
    if !ctx.quick {
        cmd.arg("--full");
    }
    cmd.arg("--json").arg(&json);
    println!("== relevance on the Rust docs");
    let report = run_for_json(ctx, cmd, &json, "relevance on the Rust docs")?;
    println!("\n{}", table(&report));
    println!("JSON: target/bench/{FILE}");
    Ok(())
}

/// The scores per ranking (the per-query table is in the JSON and the run's output).
pub fn table(report: &Value) -> String {
    let n = report["cases"].as_array().map_or(0, Vec::len);
    let mut out = format!(
        "## Relevance on the Rust docs: {} pages, {n} hand-judged queries\n\nFirst page of 10; \
         \"before\" re-ranks the best 100 by BM25 with anchors and inlinks (what a first page \
         showed before the pool was fixed), plain BM25; \"now\" is the default.\n\n| ranking \
         | rerank pool | length floor | pointers below | top 1 | top 3 | MRR | first page p50 / \
         max |\n|---|---:|---:|---|---:|---:|---:|---:|\n",
        report["documents"].as_i64().unwrap_or(0),
    );
    for s in report["scores"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} / {n} | {} / {n} | {:.3} | {:.1} / {:.1} ms |\n",
            s["ranking"]["name"].as_str().unwrap_or("?"),
            s["ranking"]["pool"].as_u64().unwrap_or(0),
            num(&s["ranking"]["length_floor"]),
            if s["ranking"]["pointers_below"].as_bool().unwrap_or(false) {
                "yes"
            } else {
                "no"
            },
            s["top1"].as_u64().unwrap_or(0),
            s["top3"].as_u64().unwrap_or(0),
            num(&s["mrr"]),
            num(&s["p50_ms"]),
            num(&s["max_ms"]),
        ));
    }
    let misses: Vec<String> = report["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            // The "now" ranking's rank: the second of the rankings.
            c["ranks"][1].as_u64().is_none_or(|r| r > 3)
        })
        .map(|c| {
            format!(
                "\"{}\" (first hit {})",
                c["case"]["query"].as_str().unwrap_or("?"),
                c["top"].as_str().unwrap_or("none")
            )
        })
        .collect();
    if !misses.is_empty() {
        out.push_str(&format!("\nNot in the top 3 now: {}.\n", misses.join("; ")));
    }
    let ingest = &report["ingest"];
    if ingest.is_object() {
        let pages = ingest["pages"].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "\nPages: {pages} ({:.0} MB of HTML) loaded and indexed in {:.0} s ({:.0} pages/s). \
             {} are over 512 KiB (what was cut before pages were kept whole); cut now: {} on \
             this store, and {} would be on a store with 1 MiB values (etcd), LZ4-compressed.\n",
            num(&ingest["html_bytes"]) / 1e6,
            num(&ingest["seconds"]),
            pages as f64 / num(&ingest["seconds"]).max(1e-9),
            ingest["over_512_kib"].as_u64().unwrap_or(0),
            ingest["cut"].as_u64().unwrap_or(0),
            ingest["cut_at_1_mib_values"].as_u64().unwrap_or(0),
        ));
    }
    out
}

/// README's row: the scores before and now.
pub fn headline(report: &Value) -> Vec<(String, String)> {
    let scores = report["scores"].as_array().cloned().unwrap_or_default();
    let of = |name: &str| scores.iter().find(|s| s["ranking"]["name"] == name);
    let (Some(before), Some(now)) = (of("before"), of("now")) else {
        return Vec::new();
    };
    let n = report["cases"].as_array().map_or(0, Vec::len);
    vec![(
        format!(
            "relevance on the Rust docs ({} real pages), {n} hand-judged queries",
            report["documents"].as_i64().unwrap_or(0)
        ),
        format!(
            "top 3 {} → {} of {n}, MRR {:.3} → {:.3} (before → now); first page p50 {:.0} ms",
            before["top3"].as_u64().unwrap_or(0),
            now["top3"].as_u64().unwrap_or(0),
            num(&before["mrr"]),
            num(&now["mrr"]),
            num(&now["p50_ms"]),
        ),
    )]
}
