//! The README's API example: transactions across rows and tables on the sled backend.
//!
//! `cargo run -p percolator-backend-sled --example quickstart`

use std::sync::Arc;

use percolator_backend_sled::SledStore;
use percolator_core::{Client, Columns, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let path = std::env::temp_dir().join(format!("percolator-quickstart-{}", std::process::id()));
    let store = Arc::new(SledStore::open(&path)?);
    let client = Client::open(store).await?; // oracle + worker lease on this store

    // One transaction, committed by hand.
    let mut txn = client.begin().await?;
    txn.set("docs", "https://example.com/", "contents", "<html>…</html>")?;
    txn.set("dups", "hash:1234", "canonical-url", "https://example.com/")?; // another table
    txn.commit().await?;

    // The paper's Figure 2 pattern with automatic retry: the whole closure — reads included — is
    // re-run on a conflict, never just its writes.
    let kept = client
        .run(|txn| {
            Box::pin(async move {
                match txn.get("dups", "hash:1234", "canonical-url").await? {
                    Some(url) => Ok(url),
                    None => {
                        txn.set("dups", "hash:1234", "canonical-url", "https://example.org/")?;
                        Ok("https://example.org/".into())
                    }
                }
            })
        })
        .await?;
    println!(
        "canonical url for hash:1234 is {}",
        String::from_utf8_lossy(&kept)
    );

    // Snapshot scans see one consistent point in time.
    let txn = client.begin().await?;
    for cell in txn.scan::<&str>("docs", .., Columns::All).await? {
        println!(
            "docs/{}/{} = {} bytes",
            String::from_utf8_lossy(&cell.row),
            String::from_utf8_lossy(&cell.column),
            cell.value.len()
        );
    }

    // Many cells, across rows and tables, in one store call (on etcd, one round trip).
    let cells = txn
        .get_many([
            ("docs", "https://example.com/", "contents"),
            ("dups", "hash:1234", "canonical-url"),
        ])
        .await?;
    println!(
        "{} of 2 cells found in one read",
        cells.iter().flatten().count()
    );
    client.shutdown().await?;
    drop(txn);
    drop(client);
    let _ = std::fs::remove_dir_all(&path);
    Ok(())
}
