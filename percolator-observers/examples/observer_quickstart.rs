//! An observer in a dozen lines: whenever `docs:contents` changes, store its word count in
//! `stats:words` — in a transaction, at most once per change, on the in-memory backend.
//!
//! `cargo run -p percolator-observers --example observer_quickstart`

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use percolator_backend_mem::MemStore;
use percolator_core::{Client, ObservedColumn, RowStore, Transaction};
use percolator_observers::{Change, Observer, Observers, Runtime, RuntimeConfig};

/// Counts the words of a document.
struct WordCount;

#[async_trait]
impl<S: RowStore> Observer<S> for WordCount {
    fn name(&self) -> &str {
        "word-count"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong("docs", "contents")
    }

    async fn observe(
        &self,
        txn: &mut Transaction<S>,
        change: &Change,
    ) -> percolator_core::Result<()> {
        let words = change.value.as_ref().map_or(0, |text| {
            String::from_utf8_lossy(text).split_whitespace().count()
        });
        txn.set("stats", &change.row, "words", words.to_string())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(MemStore::new());
    let mut observers = Observers::new();
    observers.register(WordCount)?;
    let runtime = Runtime::start(
        Client::builder(Arc::clone(&store)),
        observers,
        RuntimeConfig::default(),
    )
    .await?;

    // Writers must declare the observed columns; the runtime's own client does.
    let client = runtime.client().clone();
    for (url, text) in [("a", "one two three"), ("b", "four five"), ("a", "six")] {
        let mut txn = client.begin().await?;
        txn.set("docs", url, "contents", text)?;
        txn.commit().await?;
    }
    runtime.wait_idle(Duration::from_secs(30)).await?;

    let txn = client.begin().await?;
    for url in ["a", "b"] {
        let words = txn.get("stats", url, "words").await?.unwrap_or_default();
        println!("{url}: {} words", String::from_utf8_lossy(&words));
    }
    let stats = runtime.shutdown().await?;
    println!(
        "{} observer runs, {} notifications collapsed",
        stats.notifications_processed, stats.collapsed
    );
    Ok(())
}
