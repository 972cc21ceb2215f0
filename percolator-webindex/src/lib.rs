//! # percolator-webindex
//!
//! The paper's web-indexing pipeline (§2.4, §3.1) as an application of `percolator-observers`:
//! the project's main job, and a library that runs on any [`percolator_core::RowStore`] (the
//! `percolator` command in `percolator-cli` picks the backend).
//!
//! Inputs ([`sources`], [`synthetic`], [`warc`]) become crawled pages; [`load`] writes them into
//! `documents:raw` one transaction each, under their URL as
//! [`url::normalize`] normalizes it (absolute `http` and `https` URLs
//! only: the others are refused, counted as skipped); the observers of [`pipeline`] then process
//! documents, cluster duplicates, invert links and export a term index, each step triggered by
//! the one before through notifications. [`check`](mod@check) verifies the invariants whenever nothing
//! is pending, and [`search`](mod@search) answers ranked queries. [`schema`] is the table layout
//! and [`terms`] the term statistics the index ranks with. Experiments on the pipeline
//! (freshness, the soak, the scale run, the relevance test set) are `percolator-bench`'s.

pub mod check;
pub mod html;
pub mod load;
pub mod pipeline;
pub mod postings;
pub mod raw;
pub mod schema;
pub mod search;
pub mod sizes;
pub mod sources;
pub mod synthetic;
pub mod terms;
pub mod url;
pub mod warc;

pub use check::{CheckReport, IndexSummary, check};
pub use load::{
    LoadConfig, LoadError, LoadReport, PageOutcome, delete_missing, delete_page, load_page,
    load_page_checked, load_pages, load_pages_checked,
};
pub use pipeline::{Clustered, PipelineConfig, observed_columns, observers, observers_with};
pub use search::{Hit, Mode, SearchOptions, SearchResults, search};
pub use sizes::IndexSizes;
pub use sources::CrawledPage;

// `self::`: a bare `url` here would also name the `url` crate.
pub use self::url::BadUrl;
