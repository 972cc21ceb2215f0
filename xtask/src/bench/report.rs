//! `cargo xtask bench --report`: `docs/benchmarks.md` and README's results table, generated from
//! the JSON reports under `target/bench/`.
//!
//! Every report a benchmark writes carries how it was run ([`RunInfo`]: commit, date, machine,
//! profile, quick or full), added by [`super::run_for_json`]. The report takes only full runs of
//! the `dist` profile (a `--quick` or `--dev-build` smoke run measures nothing worth keeping) and
//! renders one section per benchmark with the same table the run printed, under the runs'
//! commit, date and machine.
//!
//! A benchmark without a usable report in `target/bench/` keeps its section from the existing
//! `docs/benchmarks.md`, so a partial run updates only what it measured. Each section ends with
//! its headline rows as comments; README's results table (between `<!-- results:begin -->` and
//! `<!-- results:end -->`) is made of those rows.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::{
    OUT, contention, figure9, figure10, freshness, micro, oracle_service, read_json, rust_docs,
    scale, serve_load, soak, tpce, workers,
};

/// The key under which a report records how it was run.
pub const RUN_KEY: &str = "run";

/// Where the report goes.
const BENCHMARKS_MD: &str = "docs/benchmarks.md";
const README: &str = "README.md";
const RESULTS_BEGIN: &str = "<!-- results:begin -->";
const RESULTS_END: &str = "<!-- results:end -->";
const HEADLINE: &str = "<!-- headline: ";

/// How a benchmark run was made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunInfo {
    /// `git rev-parse --short HEAD`, with `+changes` when the tree was not clean.
    pub commit: String,
    /// The UTC date.
    pub date: String,
    /// Cores, CPU model and memory.
    pub machine: String,
    /// The cargo profile the executable was built in (`dist`, `debug`).
    pub profile: String,
    /// Whether it was a `--quick` smoke run.
    pub quick: bool,
}

impl RunInfo {
    /// This machine, commit and date, for the executable `program` (its directory names the
    /// profile) in a run that is `quick` or not.
    pub fn now(program: &OsStr, quick: bool) -> Self {
        let output = |cmd: &mut Command| {
            cmd.output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default()
        };
        let mut commit = output(Command::new("git").args(["rev-parse", "--short", "HEAD"]));
        if !output(Command::new("git").args(["status", "--porcelain", "--untracked-files=no"]))
            .is_empty()
        {
            commit.push_str("+changes");
        }
        let profile = Path::new(program)
            .parent()
            .and_then(Path::file_name)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self {
            commit,
            date: output(Command::new("date").args(["-u", "+%Y-%m-%d"])),
            machine: machine(),
            profile,
            quick,
        }
    }

    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "commit": self.commit,
            "date": self.date,
            "machine": self.machine,
            "profile": self.profile,
            "quick": self.quick,
        })
    }

    /// From a report's JSON, if it has one.
    pub fn from_report(report: &Value) -> Option<Self> {
        let run = &report[RUN_KEY];
        let text = |key: &str| run[key].as_str().map(str::to_owned);
        Some(Self {
            commit: text("commit")?,
            date: text("date")?,
            machine: text("machine")?,
            profile: text("profile")?,
            quick: run["quick"].as_bool()?,
        })
    }

    /// Whether the report is worth keeping: a full run of an optimized build.
    pub fn counts(&self) -> bool {
        !self.quick && self.profile == "dist"
    }
}

/// `2 cores (AMD EPYC …), 24 GiB` from `/proc`.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count()
        .max(1);
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_owned();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    format!("{cores} cores ({model}), {gib:.0} GiB")
}

/// Named reports: `(name, json)`.
type Reports = [(String, Value)];
/// Headline rows: `(label, value)`.
type Headlines = Vec<(String, String)>;

/// One benchmark's section of the report.
struct Section {
    /// Its marker name (`micro`, `tpce`, …).
    name: &'static str,
    /// The reports it renders: `(name, json)`, name without the prefix.
    reports: Vec<(String, Value)>,
    /// The rendered table and its headline rows.
    render: fn(&Reports) -> (String, Headlines),
}

/// The sections in report order, each with the reports of `dir` it covers (usable ones only;
/// the skipped ones are printed).
fn sections(dir: &Path) -> Result<Vec<Section>, String> {
    let mut files: Vec<(String, Value)> = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    for name in names {
        let value = read_json(&dir.join(&name))?;
        match RunInfo::from_report(&value) {
            Some(run) if run.counts() => files.push((name.trim_end_matches(".json").into(), value)),
            Some(run) => println!(
                "report: skipping {name}: a {} run{} (only full runs of the dist profile count)",
                run.profile,
                if run.quick { ", quick" } else { "" }
            ),
            None => println!("report: skipping {name}: no record of how it was run"),
        }
    }
    let take = |prefix: &str| -> Vec<(String, Value)> {
        files
            .iter()
            .filter_map(|(n, v)| Some((n.strip_prefix(prefix)?.to_owned(), v.clone())))
            .collect()
    };
    let one = |name: &str| -> Vec<(String, Value)> {
        files
            .iter()
            .filter(|(n, _)| format!("{n}.json") == name)
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect()
    };
    Ok(vec![
        Section {
            name: "scale",
            reports: take(scale::PREFIX),
            render: |r| (scale::table(r), scale::headline(r)),
        },
        Section {
            name: "serve-load",
            reports: one(serve_load::FILE),
            render: |r| {
                let report = r.first().map(|(_, v)| v).unwrap_or(&Value::Null);
                (serve_load::table(report), serve_load::headline(report))
            },
        },
        Section {
            name: "freshness",
            reports: take(freshness::PREFIX),
            render: |r| (freshness::table(r), freshness::headline(r)),
        },
        Section {
            name: "tpce",
            reports: take(tpce::PREFIX),
            render: |r| (tpce::table(r), tpce::headline(r)),
        },
        Section {
            name: "micro",
            reports: take(micro::PREFIX),
            render: |r| (micro::table(r), micro::headline(r)),
        },
        Section {
            name: "oracle-service",
            reports: one(oracle_service::FILE),
            render: |r| {
                let report = r.first().map(|(_, v)| v).unwrap_or(&Value::Null);
                (
                    oracle_service::table(report),
                    oracle_service::headline(report),
                )
            },
        },
        Section {
            name: "figure9",
            reports: one(figure9::FILE),
            render: |r| {
                let report = r.first().map(|(_, v)| v).unwrap_or(&Value::Null);
                (figure9::table(report), figure9::headline(report))
            },
        },
        Section {
            name: "figure10",
            reports: one(figure10::FILE),
            render: |r| {
                let report = r.first().map(|(_, v)| v).unwrap_or(&Value::Null);
                (figure10::table(report), Vec::new())
            },
        },
        Section {
            name: "rust-docs",
            reports: one(rust_docs::FILE),
            render: |r| {
                let report = r.first().map(|(_, v)| v).unwrap_or(&Value::Null);
                (rust_docs::table(report), rust_docs::headline(report))
            },
        },
        Section {
            name: "workers",
            reports: take(workers::PREFIX),
            render: |r| (workers::table(r), workers::headline(r)),
        },
        Section {
            name: "contention",
            reports: take(contention::PREFIX),
            render: |r| (contention::table(r), Vec::new()),
        },
        Section {
            name: "soak",
            reports: take(soak::PREFIX)
                .into_iter()
                .map(|(name, v)| {
                    let label = name.replace("-on", ", GC on").replace("-off", ", GC off");
                    (label, v)
                })
                .collect(),
            render: |r| (soak::table(r), soak::headline(r)),
        },
    ])
}

/// The text of one section: its table, the runs it came from, and its headline rows.
fn render(section: &Section) -> String {
    let (table, headlines) = (section.render)(&section.reports);
    let runs: BTreeSet<RunInfo> = section
        .reports
        .iter()
        .filter_map(|(_, v)| RunInfo::from_report(v))
        .collect();
    let mut out = String::new();
    // The table's own heading comes first.
    let (heading, body) = table.split_once('\n').unwrap_or((&table, ""));
    out.push_str(heading);
    out.push('\n');
    for run in &runs {
        out.push_str(&format!(
            "\nMeasured {} at commit `{}` on {}, `{}` profile.\n",
            run.date, run.commit, run.machine, run.profile
        ));
    }
    out.push_str(body);
    for (label, value) in headlines {
        out.push_str(&format!("{HEADLINE}{label} | {value} -->\n"));
    }
    out
}

/// The text between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` in `text`.
fn existing_section<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let begin = format!("<!-- bench:{name} -->\n");
    let end = format!("<!-- /bench:{name} -->");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    Some(&text[start..stop])
}

/// The headline rows recorded in a report's text.
fn headlines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(HEADLINE)?.strip_suffix(" -->"))
        .filter_map(|l| l.split_once(" | "))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

/// The whole `docs/benchmarks.md` from the sections and the file as it was.
fn benchmarks_md(sections: &[Section], old: &str) -> String {
    let mut out = String::from(
        "# Benchmarks\n\n<!-- Generated by `cargo xtask bench --report` from target/bench/*.json; \
         do not edit. -->\n\nEvery figure here is measured by `cargo xtask bench` (README, \
         \"Results\") and written by `cargo xtask bench --report`. Each section names the commit, \
         the date and the machine of its runs. Throughput is compared only within one run: the \
         ratios (Figure 8, ours ÷ the peer) are what carries over between machines.\n\n",
    );
    for section in sections {
        let body = if section.reports.is_empty() {
            match existing_section(old, section.name) {
                Some(kept) => kept.to_owned(),
                None => continue,
            }
        } else {
            render(section)
        };
        out.push_str(&format!(
            "<!-- bench:{} -->\n{body}<!-- /bench:{} -->\n\n",
            section.name, section.name
        ));
    }
    out
}

/// README with its results block made of `rows`.
fn readme_with(readme: &str, rows: &[(String, String)]) -> Result<String, String> {
    let start = readme
        .find(RESULTS_BEGIN)
        .ok_or_else(|| format!("{README} has no {RESULTS_BEGIN} line"))?;
    let stop = readme
        .find(RESULTS_END)
        .filter(|&s| s > start)
        .ok_or_else(|| format!("{README} has no {RESULTS_END} line after {RESULTS_BEGIN}"))?;
    let mut block = format!("{RESULTS_BEGIN}\n| measurement | result |\n|---|---|\n");
    for (label, value) in rows {
        block.push_str(&format!("| {label} | {value} |\n"));
    }
    Ok(format!("{}{block}{}", &readme[..start], &readme[stop..]))
}

/// Writes `docs/benchmarks.md` and README's results block.
pub fn report() -> Result<(), String> {
    let sections = sections(Path::new(OUT))?;
    let old = std::fs::read_to_string(BENCHMARKS_MD).unwrap_or_default();
    let text = benchmarks_md(&sections, &old);
    if headlines(&text).is_empty() {
        return Err(format!(
            "nothing to report: no full run of the dist profile in {OUT}/ and no section in \
             {BENCHMARKS_MD} (run `cargo xtask bench`, without --quick or --dev-build, first)"
        ));
    }
    std::fs::write(BENCHMARKS_MD, &text).map_err(|e| format!("{BENCHMARKS_MD}: {e}"))?;
    let readme = std::fs::read_to_string(README).map_err(|e| format!("{README}: {e}"))?;
    let rows = headlines(&text);
    std::fs::write(README, readme_with(&readme, &rows)?).map_err(|e| format!("{README}: {e}"))?;
    let updated: Vec<&str> = sections
        .iter()
        .filter(|s| !s.reports.is_empty())
        .map(|s| s.name)
        .collect();
    println!(
        "wrote {BENCHMARKS_MD} (updated: {}) and {README}'s results table ({} rows)",
        if updated.is_empty() {
            "nothing; every section kept".to_owned()
        } else {
            updated.join(", ")
        },
        rows.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(quick: bool, profile: &str) -> Value {
        RunInfo {
            commit: "abc1234".into(),
            date: "2026-11-28".into(),
            machine: "2 cores (x), 24 GiB".into(),
            profile: profile.into(),
            quick,
        }
        .to_json()
    }

    fn tpce_report(tps: f64, run_info: Value) -> Value {
        json!({
            "tps_e": tps, "tps_e_per_core": tps / 2.0, "txns_per_sec": tps * 10.0,
            "scale": {"customers": 2000},
            "kinds": [], "invariants": {"violation_count": 0},
            "run": run_info,
        })
    }

    /// Figure 9's report makes its section, with its table and README row.
    #[test]
    fn figure9_makes_its_section() {
        let dir = tempfile::tempdir().unwrap();
        let report = json!({
            "rtt_ms": 2.0, "service_ms": 0.25, "clients_at_scale": 512,
            "points": [{"servers": 1, "clients": 512, "tps_e": 10.0, "window": {}}],
            "analysis": {
                "points": [{"servers": 1, "tps_e": 10.0, "linear_tps_e": 10.0, "ratio": 1.0}],
                "conclusion": ["Linear over the whole sweep."],
            },
            "run": run(false, "dist"),
        });
        std::fs::write(
            dir.path().join(figure9::FILE),
            serde_json::to_vec(&report).unwrap(),
        )
        .unwrap();
        let text = benchmarks_md(&sections(dir.path()).unwrap(), "");
        assert!(
            text.contains("<!-- bench:figure9 -->\n## Figure 9"),
            "{text}"
        );
        assert!(text.contains("- Linear over the whole sweep."), "{text}");
        let rows = headlines(&text);
        assert!(
            rows.iter()
                .any(|(label, value)| label.starts_with("Figure 9 in simulation")
                    && value.starts_with("10.0 → 10.0 tpsE")),
            "{rows:?}"
        );
    }

    /// Full dist runs make their sections; smoke runs are skipped and keep the old section.
    #[test]
    fn sections_come_from_full_runs_and_old_ones_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, v: &Value| {
            std::fs::write(dir.path().join(name), serde_json::to_vec(v).unwrap()).unwrap();
        };
        write("tpce-mem.json", &tpce_report(700.0, run(false, "dist")));
        write("tpce-fjall.json", &tpce_report(400.0, run(true, "dist")));
        write("micro-mem.json", &json!({"run": run(false, "debug")}));
        let sections = sections(dir.path()).unwrap();
        let tpce = sections.iter().find(|s| s.name == "tpce").unwrap();
        assert_eq!(tpce.reports.len(), 1, "the quick run is skipped");
        assert!(
            sections
                .iter()
                .find(|s| s.name == "micro")
                .unwrap()
                .reports
                .is_empty()
        );

        let old = "<!-- bench:micro -->\nold figure 8\n<!-- headline: fig 8 | 0.5 -->\n\
                   <!-- /bench:micro -->\n";
        let text = benchmarks_md(&sections, old);
        assert!(text.contains("| mem | 2000 | 700 |"), "{text}");
        assert!(!text.contains("| fjall |"), "{text}");
        assert!(
            text.contains("Measured 2026-11-28 at commit `abc1234`"),
            "{text}"
        );
        assert!(
            text.contains("old figure 8"),
            "the unmeasured section is kept: {text}"
        );
        let rows = headlines(&text);
        assert!(rows.contains(&("fig 8".into(), "0.5".into())), "{rows:?}");
        assert!(
            rows.iter()
                .any(|(l, v)| l.contains("TPC-E") && v == "mem 700"),
            "{rows:?}"
        );

        let readme = format!("intro\n{RESULTS_BEGIN}\nstale\n{RESULTS_END}\nrest\n");
        let new = readme_with(&readme, &rows).unwrap();
        assert!(new.starts_with("intro\n") && new.ends_with(&format!("{RESULTS_END}\nrest\n")));
        assert!(
            !new.contains("stale") && new.contains("| fig 8 | 0.5 |"),
            "{new}"
        );
        assert!(readme_with("no markers", &rows).is_err());
    }
}
