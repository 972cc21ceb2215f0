//! Queries against the exported index: documents (canonical URLs) containing every term.

use std::collections::BTreeSet;

use bytes::Bytes;
use percolator_core::{Client, Columns, Result, RowStore};
use serde::Serialize;

use super::html::{MAX_TERMS, all_terms_of};
use super::schema::{DOCUMENTS, INDEX, TITLE, split_index_column};

/// One query result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// Canonical URL.
    pub url: String,
    /// Its title.
    pub title: String,
}

/// Canonical documents containing every term of `query` (terms are normalized like page text),
/// sorted by URL, at most `limit`. A query of more than [`MAX_TERMS`] distinct terms is an
/// error (`Error::InvalidInput`), not silently cut.
pub async fn query<S: RowStore>(client: &Client<S>, query: &str, limit: usize) -> Result<Vec<Hit>> {
    let terms = all_terms_of(query);
    if terms.len() > MAX_TERMS {
        return Err(percolator_core::Error::InvalidInput(format!(
            "the query has {} distinct words; at most {MAX_TERMS} are allowed",
            terms.len()
        )));
    }
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let txn = client.begin().await?;
    let mut result: Option<BTreeSet<Bytes>> = None;
    for term in &terms {
        let row = Bytes::from(term.clone());
        let urls: BTreeSet<Bytes> = txn
            .scan(INDEX, row.clone()..=row, Columns::All)
            .await?
            .iter()
            .filter_map(|item| {
                split_index_column(&item.column).map(|(url, _)| Bytes::copy_from_slice(url))
            })
            .collect();
        result = Some(match result {
            None => urls,
            Some(acc) => acc.intersection(&urls).cloned().collect(),
        });
    }
    let mut hits = Vec::new();
    for url in result.unwrap_or_default().into_iter().take(limit) {
        let title = txn.get(DOCUMENTS, &url, TITLE).await?.unwrap_or_default();
        hits.push(Hit {
            url: String::from_utf8_lossy(&url).into_owned(),
            title: String::from_utf8_lossy(&title).into_owned(),
        });
    }
    Ok(hits)
}
