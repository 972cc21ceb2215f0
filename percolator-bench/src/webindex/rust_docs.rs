//! A relevance set on real HTML nobody on the project wrote: the Rust toolchain's own docs
//! (`$(rustc --print sysroot)/share/doc/rust/html`, on every machine with rustup), with natural
//! queries and hand-judged answers.
//!
//! - [`Corpus::Subset`] is small enough for CI: every page of the book (the current edition,
//!   the redirects between its chapter numberings, and the 2018, second and first editions,
//!   whose pages are now stubs saying the edition is no longer distributed) and [`STD_PAGES`],
//!   the standard library's most searched pages, several of them over 512 KiB of HTML.
//! - [`Corpus::Full`] is the whole tree (about 48 000 pages), for the bench.
//!
//! [`evaluate`] ranks every [`cases`] query's first page of 10 on one index with several
//! [`Ranking`]s: [`Ranking::NOW`] (the defaults) and [`Ranking::BEFORE`] (the best 100 by text
//! re-ranked with anchors and inlinks, plain BM25: a first page as it was ranked before), and
//! any others asked for. Per ranking it reports top-1, top-3, the mean reciprocal rank of the
//! first page (a judged page past the first page counts 0) and the query latency; and it checks
//! that paging through each query 10 at a time gives the single request's order
//! ([`super::relevance::check_paging`]).
//!
//! Some cases are there because a defect failed them: a stub page above the real chapter
//! ("what is ownership"), a word past the first 512 KiB of a page ("driftsort", in
//! `slice::sort_by`'s docs), and an order that changed with the page asked for ("iterator").

use std::path::{Path, PathBuf};

use bytes::Bytes;
use percolator_core::{Client, Result, RowStore};
use serde::Serialize;

use percolator_webindex::search::rank::LENGTH_FLOOR;
use percolator_webindex::search::{Mode, RERANK_POOL, SearchOptions, search};
use percolator_webindex::sources::{CrawledPage, html_files};

use super::relevance::{check_paging, mrr};

/// The URL the docs tree is served under (pages get `BASE` + their path in the tree).
pub const BASE: &str = "https://doc.rust-lang.org/";

/// The rerank pool a first page of 10 had before it was fixed: `max(100, 4 × 10)`.
pub const POOL_BEFORE: usize = 100;

/// One way to rank: a rerank pool and a length floor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ranking {
    /// Its name in tables.
    pub name: &'static str,
    /// Matches re-ranked with anchors and inlinks.
    pub pool: usize,
    /// BM25's length floor (0: plain BM25).
    pub length_floor: f64,
    /// Pointers rank below what they point to ([`SearchOptions::demote_pointers`]).
    pub pointers_below: bool,
}

impl Corpus {
    /// Whether the page at `path` (under the docs tree) is in this corpus.
    pub fn contains(self, path: &str) -> bool {
        match self {
            Corpus::Full => true,
            Corpus::Subset => {
                path.starts_with("book/")
                    || path
                        .strip_prefix("std/")
                        .is_some_and(|p| STD_PAGES.contains(&p))
            }
        }
    }
}

impl Ranking {
    /// As a first page was ranked before this set existed: the best 100 re-ranked, plain BM25.
    pub const BEFORE: Ranking = Ranking {
        name: "before",
        pool: POOL_BEFORE,
        length_floor: 0.0,
        pointers_below: false,
    };
    /// The defaults but for pointers, which rank where their score puts them.
    pub const POINTERS_AS_SCORED: Ranking = Ranking {
        name: "pointers as scored",
        pool: RERANK_POOL,
        length_floor: LENGTH_FLOOR,
        pointers_below: false,
    };
    /// The defaults.
    pub const NOW: Ranking = Ranking {
        name: "now",
        pool: RERANK_POOL,
        length_floor: LENGTH_FLOOR,
        pointers_below: true,
    };

    fn options(self) -> SearchOptions {
        SearchOptions::default()
            .mode(Mode::All)
            .snippets(false)
            .rerank_pool(self.pool)
            .length_floor(self.length_floor)
            .demote_pointers(self.pointers_below)
    }
}

/// The standard library pages of the CI subset (paths under `std/`).
#[rustfmt::skip]
pub const STD_PAGES: &[&str] = &[
    "index.html", "primitive.slice.html", "primitive.str.html", "primitive.char.html",
    "vec/struct.Vec.html", "vec/index.html", "string/struct.String.html", "string/index.html",
    "iter/trait.Iterator.html", "iter/index.html", "collections/index.html",
    "collections/struct.HashMap.html", "collections/hash_map/struct.HashMap.html",
    "collections/struct.HashSet.html", "collections/struct.BTreeMap.html",
    "collections/struct.VecDeque.html", "option/enum.Option.html", "result/enum.Result.html",
    "boxed/struct.Box.html", "rc/struct.Rc.html", "sync/struct.Arc.html",
    "sync/struct.Mutex.html", "sync/mpsc/index.html", "sync/mpsc/fn.channel.html",
    "sync/atomic/index.html", "thread/index.html", "thread/fn.spawn.html",
    "cell/struct.RefCell.html", "ops/trait.Deref.html", "ops/trait.Drop.html",
    "fs/fn.read_to_string.html", "fs/struct.File.html", "io/trait.Read.html",
    "io/fn.stdin.html", "env/fn.args.html", "process/struct.Command.html", "fmt/index.html",
    "fmt/trait.Display.html", "fmt/trait.Debug.html", "macro.println.html",
    "time/struct.Instant.html", "path/struct.PathBuf.html", "convert/trait.From.html",
    "clone/trait.Clone.html", "hash/trait.Hash.html", "cmp/trait.Ord.html",
    "marker/trait.Send.html", "marker/trait.Sync.html", "net/struct.TcpListener.html",
];

/// The Rust toolchain's HTML docs, if installed: `$(rustc --print sysroot)/share/doc/rust/html`
/// (`$RUSTC` if set), with its book.
pub fn docs_dir() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let dir = Path::new(sysroot.trim()).join("share/doc/rust/html");
    dir.join("book/index.html").is_file().then_some(dir)
}

/// Which pages of the docs to index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Corpus {
    /// The book and [`STD_PAGES`]: CI's size.
    Subset,
    /// Every page.
    Full,
}

/// The pages of `corpus` under `dir`, whole, read lazily, URLs under [`BASE`].
pub fn pages(
    dir: &Path,
    corpus: Corpus,
) -> std::io::Result<Box<dyn Iterator<Item = std::io::Result<CrawledPage>> + Send>> {
    Ok(match corpus {
        Corpus::Full => Box::new(html_files(dir, Some(BASE))?),
        Corpus::Subset => {
            let book = html_files(&dir.join("book"), Some(&format!("{BASE}book/")))?;
            let std_dir = dir.join("std");
            let std = STD_PAGES.iter().map(move |path| {
                let html = std::fs::read(std_dir.join(path))
                    .map_err(|e| std::io::Error::new(e.kind(), format!("std/{path}: {e}")))?;
                Ok(CrawledPage {
                    url: format!("{BASE}std/{path}"),
                    html: Bytes::from(html),
                })
            });
            Box::new(book.chain(std))
        }
    })
}

/// One query with its hand-judged answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Case {
    /// The query, as a user would type it.
    pub query: &'static str,
    /// Pages that answer it (paths under [`BASE`]); the first of them found counts.
    pub answers: Vec<&'static str>,
    /// Why it is in the set.
    pub why: &'static str,
}

/// The set: natural queries over the book and the standard library, each with the pages a
/// reader would want (judged by hand from the pages themselves). Where the whole tree has the
/// same page elsewhere — `core` or `alloc` for a `std` item, the Cargo book, the Reference or
/// Rust by Example on the same topic — it is an answer too.
#[rustfmt::skip]
pub fn cases() -> Vec<Case> {
    let case = |query, answers: &[&'static str], why| Case {
        query,
        answers: answers.to_vec(),
        why,
    };
    vec![
        case(
            "what is ownership",
            &["book/ch04-01-what-is-ownership.html"],
            "stubs of old editions share its title",
        ),
        case(
            "closures capture environment",
            &[
                "book/ch13-01-closures.html",
                "rust-by-example/fn/closures/capture.html",
            ],
            "stubs of old editions",
        ),
        case(
            "driftsort",
            &[
                "std/primitive.slice.html",
                "std/vec/struct.Vec.html",
                "core/primitive.slice.html",
                "alloc/vec/struct.Vec.html",
            ],
            "the word is past 512 KiB of HTML",
        ),
        case(
            "iterator",
            &[
                "std/iter/trait.Iterator.html",
                "book/ch13-02-iterators.html",
                "core/iter/trait.Iterator.html",
            ],
            "the order changed with the page asked for",
        ),
        case(
            "hashmap",
            &[
                "std/collections/struct.HashMap.html",
                "std/collections/hash_map/struct.HashMap.html",
                "book/ch08-03-hash-maps.html",
                "rust-by-example/std/hash.html",
            ],
            "a type by name",
        ),
        case(
            "vec push",
            &[
                "std/vec/struct.Vec.html",
                "book/ch08-01-vectors.html",
                "alloc/vec/struct.Vec.html",
            ],
            "a method of a big page",
        ),
        case(
            "to uppercase",
            &[
                "std/primitive.str.html",
                "std/primitive.char.html",
                "std/string/struct.String.html",
                "core/primitive.str.html",
                "core/primitive.char.html",
                "alloc/string/struct.String.html",
            ],
            "a method, two words",
        ),
        case(
            "interior mutability refcell",
            &[
                "book/ch15-05-interior-mutability.html",
                "std/cell/struct.RefCell.html",
                "core/cell/struct.RefCell.html",
            ],
            "a concept and its type",
        ),
        case(
            "smart pointers",
            &["book/ch15-00-smart-pointers.html"],
            "a chapter title",
        ),
        case(
            "box heap",
            &[
                "std/boxed/struct.Box.html",
                "book/ch15-01-box.html",
                "alloc/boxed/struct.Box.html",
                "rust-by-example/std/box.html",
            ],
            "a type and its chapter",
        ),
        case(
            "reference counting rc",
            &[
                "book/ch15-04-rc.html",
                "std/rc/struct.Rc.html",
                "alloc/rc/struct.Rc.html",
                "rust-by-example/std/rc.html",
            ],
            "a type and its chapter",
        ),
        case(
            "spawn thread",
            &[
                "std/thread/fn.spawn.html",
                "book/ch16-01-threads.html",
                "rust-by-example/std_misc/threads.html",
            ],
            "a function",
        ),
        case(
            "mutex",
            &[
                "std/sync/struct.Mutex.html",
                "book/ch16-03-shared-state.html",
            ],
            "a type by name",
        ),
        case(
            "message passing channels",
            &[
                "book/ch16-02-message-passing.html",
                "std/sync/mpsc/index.html",
                "std/sync/mpsc/fn.channel.html",
                "rust-by-example/std_misc/channels.html",
            ],
            "a concept",
        ),
        case(
            "match control flow",
            &[
                "book/ch06-02-match.html",
                "rust-by-example/flow_control/match.html",
                "reference/expressions/match-expr.html",
            ],
            "a chapter title",
        ),
        case(
            "if let",
            &[
                "book/ch06-03-if-let.html",
                "rust-by-example/flow_control/if_let.html",
            ],
            "two short keywords",
        ),
        case(
            "recoverable errors result",
            &["book/ch09-02-recoverable-errors-with-result.html"],
            "a chapter title",
        ),
        case(
            "unrecoverable errors panic",
            &[
                "book/ch09-01-unrecoverable-errors-with-panic.html",
                "rust-by-example/error/panic.html",
            ],
            "a chapter title",
        ),
        case(
            "generic data types",
            &["book/ch10-01-syntax.html"],
            "a chapter title, not its file name",
        ),
        case(
            "traits shared behavior",
            &["book/ch10-02-traits.html"],
            "a chapter title",
        ),
        case(
            "lifetime annotations",
            &[
                "book/ch10-03-lifetime-syntax.html",
                "rust-by-example/scope/lifetime.html",
            ],
            "a concept",
        ),
        case(
            "writing tests",
            &[
                "book/ch11-01-writing-tests.html",
                "book/ch11-00-testing.html",
            ],
            "a chapter title (the chapter's is \"Writing Automated Tests\")",
        ),
        case(
            "cargo workspaces",
            &[
                "book/ch14-03-cargo-workspaces.html",
                "cargo/reference/workspaces.html",
            ],
            "a chapter title",
        ),
        case(
            "publishing crates.io",
            &[
                "book/ch14-02-publishing-to-crates-io.html",
                "cargo/reference/publishing.html",
            ],
            "a chapter title",
        ),
        case(
            "unsafe rust",
            &["book/ch20-01-unsafe-rust.html"],
            "a chapter behind a redirect from its old number",
        ),
        case(
            "declarative macros macro_rules",
            &[
                "book/ch20-05-macros.html",
                "reference/macros-by-example.html",
                "rust-by-example/macros.html",
            ],
            "a chapter behind a redirect",
        ),
        case(
            "async await futures",
            &[
                "book/ch17-01-futures-and-syntax.html",
                "book/ch17-00-async-await.html",
            ],
            "a chapter",
        ),
        case(
            "defining structs",
            &["book/ch05-01-defining-structs.html"],
            "a chapter title",
        ),
        case(
            "method syntax",
            &[
                "book/ch05-03-method-syntax.html",
                "rust-by-example/fn/methods.html",
            ],
            "a chapter title",
        ),
        case(
            "defining an enum",
            &["book/ch06-01-defining-an-enum.html"],
            "a chapter title",
        ),
        case(
            "modules scope privacy",
            &["book/ch07-02-defining-modules-to-control-scope-and-privacy.html"],
            "a chapter title",
        ),
        case(
            "references and borrowing",
            &["book/ch04-02-references-and-borrowing.html"],
            "stubs of old editions share its title",
        ),
        case(
            "slice type",
            &[
                "book/ch04-03-slices.html",
                "std/primitive.slice.html",
                "core/primitive.slice.html",
                "reference/types/slice.html",
            ],
            "a concept and its type",
        ),
        case(
            "variables and mutability",
            &["book/ch03-01-variables-and-mutability.html"],
            "stubs of old editions share its title",
        ),
        case(
            "scalar compound data types",
            &["book/ch03-02-data-types.html"],
            "a chapter",
        ),
        case(
            "guessing game",
            &["book/ch02-00-guessing-game-tutorial.html"],
            "a chapter title",
        ),
        case(
            "hello world",
            &[
                "book/ch01-02-hello-world.html",
                "rust-by-example/hello.html",
            ],
            "a chapter title",
        ),
        case(
            "installation rustup",
            &["book/ch01-01-installation.html"],
            "a chapter",
        ),
        case(
            "option some none",
            &[
                "std/option/enum.Option.html",
                "book/ch06-01-defining-an-enum.html",
                "core/option/enum.Option.html",
            ],
            "a type by its variants",
        ),
        case(
            "read file to string",
            &[
                "std/fs/fn.read_to_string.html",
                "book/ch12-02-reading-a-file.html",
            ],
            "a task",
        ),
        case("println", &["std/macro.println.html"], "a macro by name"),
        case(
            "arc atomically reference counted",
            &[
                "std/sync/struct.Arc.html",
                "alloc/sync/struct.Arc.html",
                "rust-by-example/std/arc.html",
            ],
            "a type by its description",
        ),
        case(
            "deref trait",
            &[
                "book/ch15-02-deref.html",
                "std/ops/trait.Deref.html",
                "core/ops/trait.Deref.html",
            ],
            "a trait and its chapter",
        ),
        case(
            "drop trait cleanup",
            &[
                "book/ch15-03-drop.html",
                "std/ops/trait.Drop.html",
                "core/ops/trait.Drop.html",
            ],
            "a trait and its chapter",
        ),
        case(
            "trait objects",
            &["book/ch18-02-trait-objects.html"],
            "a chapter behind a redirect",
        ),
        case(
            "sort slice",
            &[
                "std/primitive.slice.html",
                "std/vec/struct.Vec.html",
                "core/primitive.slice.html",
                "alloc/vec/struct.Vec.html",
            ],
            "a method on a big page",
        ),
        case(
            "command line arguments",
            &[
                "book/ch12-01-accepting-command-line-arguments.html",
                "std/env/fn.args.html",
            ],
            "a task",
        ),
        case(
            "environment variables",
            &[
                "book/ch12-05-working-with-environment-variables.html",
                "cargo/reference/environment-variables.html",
                "std/env/fn.var.html",
            ],
            "a chapter, and Cargo's page",
        ),
        case(
            "hashset",
            &[
                "std/collections/struct.HashSet.html",
                "rust-by-example/std/hash/hashset.html",
            ],
            "a type by name",
        ),
        case(
            "btreemap",
            &[
                "std/collections/struct.BTreeMap.html",
                "alloc/collections/btree_map/struct.BTreeMap.html",
            ],
            "a type by name",
        ),
        case(
            "vecdeque",
            &[
                "std/collections/struct.VecDeque.html",
                "alloc/collections/vec_deque/struct.VecDeque.html",
            ],
            "a type by name",
        ),
        case(
            "tcp listener",
            &[
                "std/net/struct.TcpListener.html",
                "book/ch21-01-single-threaded.html",
            ],
            "a type, two words",
        ),
        case(
            "graceful shutdown",
            &["book/ch21-03-graceful-shutdown-and-cleanup.html"],
            "a chapter title",
        ),
        case(
            "pattern syntax",
            &["book/ch19-03-pattern-syntax.html"],
            "a chapter behind a redirect",
        ),
        case(
            "refutability",
            &["book/ch19-02-refutability.html"],
            "a rare word",
        ),
        case(
            "associated types advanced traits",
            &["book/ch20-02-advanced-traits.html"],
            "a chapter",
        ),
    ]
}

/// How one case ranked on the first page with each ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Matching documents.
    pub total: usize,
    /// Per ranking of [`Report::rankings`]: the rank of the first answer on the first page
    /// (1–10).
    pub ranks: Vec<Option<usize>>,
    /// The first hit ranked now ([`Ranking::NOW`]).
    pub top: Option<String>,
    /// Paging problems ranked now (empty: the pages concatenate to the single request's
    /// order).
    pub paging_problems: Vec<String>,
}

/// One ranking's scores and query latency over the set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scores {
    /// The ranking.
    pub ranking: Ranking,
    /// Cases whose first answer is first.
    pub top1: usize,
    /// Cases with an answer in the first 3.
    pub top3: usize,
    /// Mean reciprocal rank over the first page (0 for a case without an answer there).
    pub mrr: f64,
    /// First-page query latency over the set, median, milliseconds.
    pub p50_ms: f64,
    /// The same, slowest, milliseconds.
    pub max_ms: f64,
}

/// The whole set's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Which pages were indexed.
    pub corpus: Corpus,
    /// Documents in the index.
    pub documents: i64,
    /// The rankings each case was ranked with.
    pub rankings: Vec<Ranking>,
    /// Per ranking.
    pub scores: Vec<Scores>,
    /// Per case.
    pub cases: Vec<CaseResult>,
    /// How the pages went in, when the caller measured it ([`Ingest::count`]).
    pub ingest: Option<Ingest>,
}

/// The pages as loaded: how many were long, how many the loader cut, and how many a store
/// with etcd's 1 MiB values would cut once compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Ingest {
    /// Pages read.
    pub pages: u64,
    /// Bytes of HTML read.
    pub html_bytes: u64,
    /// Pages over 512 KiB: what sources cut before pages were kept whole.
    pub over_512_kib: u64,
    /// Pages the loader cut on this store (its report's `cut`).
    pub cut: u64,
    /// Pages a store with 1 MiB values (etcd) would cut: over it even LZ4-compressed.
    pub cut_at_1_mib_values: u64,
    /// Seconds to load and index every page.
    pub seconds: f64,
}

impl Ingest {
    /// Counts `page` (all but `cut` and `seconds`).
    pub fn count(&mut self, page: &CrawledPage) {
        self.pages += 1;
        self.html_bytes += page.html.len() as u64;
        self.over_512_kib += u64::from(page.html.len() > 512 * 1024);
        if page.html.len() > 1024 * 1024 {
            let fitted = percolator_webindex::raw::fit(
                &page.html,
                percolator_webindex::raw::DEFAULT_MAX_PAGE_BYTES,
                1024 * 1024,
            );
            self.cut_at_1_mib_values += u64::from(fitted.cut);
        }
    }
}

impl Report {
    /// The scores of the ranking called `name`.
    pub fn scores_of(&self, name: &str) -> Option<Scores> {
        self.scores.iter().find(|s| s.ranking.name == name).copied()
    }

    /// A case's rank with the ranking called `name`.
    pub fn rank_with(&self, case: &CaseResult, name: &str) -> Option<usize> {
        let i = self.rankings.iter().position(|r| r.name == name)?;
        case.ranks.get(i).copied().flatten()
    }

    /// The cases whose paging went wrong.
    pub fn paging_failures(&self) -> Vec<&CaseResult> {
        self.cases
            .iter()
            .filter(|c| !c.paging_problems.is_empty())
            .collect()
    }

    /// The table (markdown): every case's rank per ranking, then each ranking's scores.
    pub fn table(&self) -> String {
        let names: Vec<&str> = self.rankings.iter().map(|r| r.name).collect();
        let mut out = format!(
            "## Relevance on the Rust docs ({}, {} documents)\n\nRank of the first judged \
             answer on the first page of 10.\n\n| query | matches | {} | first hit now \
             |\n|---|---:|{}---|\n",
            match self.corpus {
                Corpus::Subset => "the book and 49 standard library pages",
                Corpus::Full => "every page",
            },
            self.documents,
            names.join(" | "),
            "---:|".repeat(self.rankings.len()),
        );
        let rank = |r: &Option<usize>| r.map_or_else(|| "-".to_owned(), |r| r.to_string());
        for c in &self.cases {
            let ranks: Vec<String> = c.ranks.iter().map(rank).collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                c.case.query,
                c.total,
                ranks.join(" | "),
                c.top.as_deref().unwrap_or("-").trim_start_matches(BASE)
            ));
        }
        out.push_str(
            "\n| ranking | rerank pool | length floor | pointers below | top 1 | top 3 | MRR | \
             first page p50 / max |\n|---|---:|---:|---|---:|---:|---:|---:|\n",
        );
        let n = self.cases.len();
        for s in &self.scores {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} / {n} | {} / {n} | {:.3} | {:.1} / {:.1} ms |\n",
                s.ranking.name,
                s.ranking.pool,
                s.ranking.length_floor,
                if s.ranking.pointers_below {
                    "yes"
                } else {
                    "no"
                },
                s.top1,
                s.top3,
                s.mrr,
                s.p50_ms,
                s.max_ms
            ));
        }
        out
    }
}

/// Rank of the first of `answers` among `urls` (1-based).
fn rank_of(urls: &[String], answers: &[&str]) -> Option<usize> {
    urls.iter()
        .position(|u| {
            u.strip_prefix(BASE)
                .is_some_and(|path| answers.contains(&path))
        })
        .map(|i| i + 1)
}

/// Runs every case against an index of `corpus`, ranking each first page with every ranking of
/// `rankings`, and pages through each ranked now (see the module docs).
pub async fn evaluate<S: RowStore>(
    client: &Client<S>,
    corpus: Corpus,
    rankings: &[Ranking],
) -> Result<Report> {
    let mut cases = Vec::new();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); rankings.len()];
    for case in self::cases() {
        let mut ranks = Vec::with_capacity(rankings.len());
        let mut total = 0;
        let mut top = None;
        for (i, ranking) in rankings.iter().enumerate() {
            let began = std::time::Instant::now();
            let results = search(client, case.query, &ranking.options()).await?;
            times[i].push(began.elapsed().as_secs_f64() * 1000.0);
            let urls: Vec<String> = results.hits.iter().map(|h| h.url.clone()).collect();
            ranks.push(rank_of(&urls, &case.answers));
            total = results.total;
            if *ranking == Ranking::NOW {
                top = urls.into_iter().next();
            }
        }
        let paging = check_paging(client, case.query, &Ranking::NOW.options(), 10).await?;
        cases.push(CaseResult {
            total,
            ranks,
            top,
            paging_problems: paging.problems,
            case,
        });
    }
    let scores = rankings
        .iter()
        .enumerate()
        .map(|(i, &ranking)| {
            let ranks: Vec<Option<usize>> = cases.iter().map(|c| c.ranks[i]).collect();
            let within = |k: usize| ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count();
            let mut ms = times[i].clone();
            ms.sort_by(f64::total_cmp);
            Scores {
                ranking,
                top1: within(1),
                top3: within(3),
                mrr: mrr(ranks.iter().copied()),
                p50_ms: ms.get(ms.len() / 2).copied().unwrap_or(0.0),
                max_ms: ms.last().copied().unwrap_or(0.0),
            }
        })
        .collect();
    Ok(Report {
        corpus,
        documents: percolator_webindex::search::documents(client).await?,
        rankings: rankings.to_vec(),
        scores,
        cases,
        ingest: None,
    })
}
