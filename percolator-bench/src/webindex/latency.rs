//! Query latency over a query set drawn from the index itself: for sampled documents, their
//! rarest word (the longest), their most frequent word (a word on most pages: the longest
//! postings), an AND of their two most frequent words and an OR of a frequent and a rare one.
//! Each query is timed end to end as a user sees it (ranked, 10 hits with snippets).

use std::time::{Duration, Instant};

use percolator_core::{Client, Result, RowStore};
use serde::{Deserialize, Serialize};

use percolator_webindex::schema::{DOCUMENTS, TERMS};
use percolator_webindex::search::{Mode, SearchOptions, search};
use percolator_webindex::terms::PageTerms;

/// How long queries took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryLatency {
    /// Queries timed.
    pub queries: usize,
    /// Median, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, milliseconds.
    pub p99_ms: f64,
    /// Slowest, milliseconds.
    pub max_ms: f64,
    /// Mean number of matching documents.
    pub mean_total: f64,
}

/// Four queries from each of `urls`' stored terms (see the module docs).
pub async fn query_set<S: RowStore>(
    client: &Client<S>,
    urls: impl IntoIterator<Item = String>,
) -> Result<Vec<(String, Mode)>> {
    let txn = client.begin().await?;
    let mut queries = Vec::new();
    for url in urls {
        let Some(cell) = txn.get(DOCUMENTS, &url, TERMS).await? else {
            continue;
        };
        let page = PageTerms::decode(&cell);
        let mut by_count: Vec<(&String, u32)> = page
            .counts
            .iter()
            .map(|(t, c)| (t, c.body + c.title))
            .collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let Some(rare) = page.counts.keys().max_by_key(|t| (t.len(), *t)) else {
            continue;
        };
        let frequent = by_count[0].0;
        let second = by_count.get(1).map_or(frequent, |t| t.0);
        queries.push((rare.clone(), Mode::All));
        queries.push((frequent.clone(), Mode::All));
        queries.push((format!("{frequent} {second}"), Mode::All));
        queries.push((format!("{frequent} {rare}"), Mode::Any));
    }
    Ok(queries)
}

/// Times each query of `queries` (10 hits with snippets), re-ranking the best `pool` matches
/// by text with anchors and inlinks ([`SearchOptions::rerank_pool`]).
pub async fn measure<S: RowStore>(
    client: &Client<S>,
    queries: &[(String, Mode)],
    pool: usize,
) -> Result<QueryLatency> {
    let mut times: Vec<Duration> = Vec::with_capacity(queries.len());
    let mut totals = 0usize;
    for (query, mode) in queries {
        let began = Instant::now();
        let options = SearchOptions::default().mode(*mode).rerank_pool(pool);
        let results = search(client, query, &options).await?;
        times.push(began.elapsed());
        totals += results.total;
    }
    times.sort_unstable();
    let ms = |q: f64| {
        if times.is_empty() {
            return 0.0;
        }
        let i = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1;
        times[i].as_secs_f64() * 1000.0
    };
    Ok(QueryLatency {
        queries: times.len(),
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        max_ms: ms(1.0),
        mean_total: totals as f64 / times.len().max(1) as f64,
    })
}
