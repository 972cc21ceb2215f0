//! Experiments on the web-indexing pipeline (`percolator-webindex`), kept out of the library
//! users embed:
//!
//! - [`checks`]: the checks at the end of a run (invariants, the strong-observer audit,
//!   nothing pending or locked);
//! - [`freshness`]: the paper's Figure 7 in miniature, load → clustered latency of the
//!   incremental pipeline against recomputing the clustering in batch;
//! - [`soak`]: many recrawl generations with garbage collection off and on, cells and bytes
//!   stored per generation (bounded storage);
//! - [`scale`]: a realistic crawl loaded, indexed and checked in one process (pages/s,
//!   notifications/s per quarter, peak RSS per phase, bytes written, disk ÷ HTML);
//! - [`latency`]: query latency over a query set drawn from the index itself;
//! - [`relevance`]: the relevance test set, a small documentation site with known answers.

pub mod checks;
pub mod freshness;
pub mod latency;
pub mod relevance;
pub mod rust_docs;
pub mod scale;
pub mod soak;
