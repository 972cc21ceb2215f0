//! Percolator transactions on a TiKV cluster, with PD's TSO as the oracle.
//!
//! ```text
//! tiup playground --mode tikv-slim
//! PERCOLATOR_TIKV_PD=127.0.0.1:2379 cargo run -p percolator-backend-tikv --example tikv_quickstart
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use percolator_backend_tikv::{PdOracle, TikvConfig, TikvStore};
use percolator_core::{Client, Error};

#[tokio::main]
async fn main() -> ExitCode {
    let Ok(pd) = std::env::var("PERCOLATOR_TIKV_PD") else {
        eprintln!("set PERCOLATOR_TIKV_PD=host:port (PD of a TiKV cluster) to run this example");
        return ExitCode::from(2);
    };
    match run(pd.split(',').map(str::to_owned).collect()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(pd: Vec<String>) -> Result<(), Error> {
    let store = Arc::new(TikvStore::connect(&TikvConfig::new(pd), b"quickstart").await?);
    let client = Client::builder(Arc::clone(&store))
        .oracle(Arc::new(PdOracle::new(Arc::clone(store.api()))))
        .build()
        .await?;
    let mut txn = client.begin().await?;
    txn.set("docs", "https://example.com/", "contents", "<html>…</html>")?;
    txn.set("dups", "hash:1234", "canonical-url", "https://example.com/")?;
    let info = txn.commit().await?;
    println!("committed at {:?}", info.commit_ts);
    let read = client
        .begin()
        .await?
        .get("dups", "hash:1234", "canonical-url")
        .await?;
    println!(
        "dups/hash:1234 = {:?}",
        read.map(|v| String::from_utf8_lossy(&v).into_owned())
    );
    client.shutdown().await
}
