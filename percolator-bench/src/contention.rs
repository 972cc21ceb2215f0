//! Contention: read-modify-write transactions on keys drawn uniformly versus from a Zipf
//! distribution (θ = 0.99, YCSB's skew), measuring goodput (commits/s) and the abort rate.
//!
//! Each transaction reads `keys_per_txn` distinct counters and writes each back plus one. Under
//! snapshot isolation two such transactions that share a key cannot both commit, so skew turns
//! directly into aborts; the run shows how much goodput survives. At the end the counters must
//! add up to `keys_per_txn` × commits, or the run fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_core::{Client, Columns, Error, Result, RowStore};
use rand::Rng as _;
use rand::SeedableRng as _;
use serde::Serialize;

const TABLE: &str = "bench_contention";
const COLUMN: &str = "n";

/// Parameters of a run.
#[derive(Debug, Clone)]
pub struct ContentionConfig {
    /// Time per distribution.
    pub duration: Duration,
    /// Concurrent client tasks.
    pub clients: usize,
    /// Distinct counters.
    pub keys: usize,
    /// Counters each transaction increments.
    pub keys_per_txn: usize,
    /// Zipf exponent.
    pub theta: f64,
}

impl ContentionConfig {
    /// 2 s per distribution, 8 clients, 10 000 keys.
    pub fn full() -> Self {
        Self {
            duration: Duration::from_secs(2),
            clients: 8,
            keys: 10_000,
            keys_per_txn: 2,
            theta: 0.99,
        }
    }

    /// 300 ms per distribution, 4 clients, 1 000 keys.
    pub fn quick() -> Self {
        Self {
            duration: Duration::from_millis(300),
            clients: 4,
            keys: 1_000,
            ..Self::full()
        }
    }
}

/// Draws key indexes `0..n`.
#[derive(Debug, Clone)]
pub enum KeyDistribution {
    /// Every key equally likely.
    Uniform {
        /// Keys.
        n: usize,
    },
    /// Rank `r` (1-based) with probability ∝ 1/r^θ (`rand_distr`'s rejection sampler); ranks
    /// are scattered over the key space by a fixed permutation so the hot keys are not
    /// neighbours.
    Zipf {
        /// Rank sampler over `1..=n`.
        ranks: rand_distr::Zipf<f64>,
        /// Rank → key.
        permutation: Vec<usize>,
    },
}

impl KeyDistribution {
    /// Zipf over `n` keys with exponent `theta` (a non-finite or negative `theta` is taken as
    /// 0: uniform).
    pub fn zipf(n: usize, theta: f64) -> Self {
        let n = n.max(1);
        let theta = if theta.is_finite() {
            theta.max(0.0)
        } else {
            0.0
        };
        let ranks = match rand_distr::Zipf::new(n as f64, theta) {
            Ok(ranks) => ranks,
            Err(_) => return Self::Uniform { n },
        };
        let mut permutation: Vec<usize> = (0..n).collect();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
        for i in (1..n).rev() {
            permutation.swap(i, rng.random_range(0..=i));
        }
        Self::Zipf { ranks, permutation }
    }

    /// A key index.
    pub fn sample(&self, rng: &mut impl rand::Rng) -> usize {
        match self {
            KeyDistribution::Uniform { n } => rng.random_range(0..(*n).max(1)),
            KeyDistribution::Zipf { ranks, permutation } => {
                let rank = rand_distr::Distribution::sample(ranks, rng) as usize;
                permutation[rank.clamp(1, permutation.len()) - 1]
            }
        }
    }

    /// `count` distinct key indexes (fewer if there are fewer keys).
    pub fn distinct(&self, rng: &mut impl rand::Rng, count: usize, keys: usize) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::with_capacity(count);
        let wanted = count.min(keys.max(1));
        while out.len() < wanted {
            let k = self.sample(rng);
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }
}

/// One distribution's result.
#[derive(Debug, Clone, Serialize)]
pub struct ContentionPoint {
    /// "uniform" or "zipf θ=0.99".
    pub distribution: String,
    /// Transactions attempted per second.
    pub attempts_per_sec: f64,
    /// Commits per second (goodput).
    pub commits_per_sec: f64,
    /// Aborts (conflicts) per second.
    pub aborts_per_sec: f64,
    /// Aborts ÷ attempts.
    pub abort_rate: f64,
}

/// The run's result.
#[derive(Debug, Clone, Serialize)]
pub struct ContentionReport {
    /// Backend name.
    pub backend: String,
    /// Client tasks.
    pub clients: usize,
    /// Keys.
    pub keys: usize,
    /// Uniform first, then Zipf.
    pub points: Vec<ContentionPoint>,
    /// Whether the counters added up to the commits.
    pub invariant_ok: bool,
}

impl ContentionReport {
    /// A markdown table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "| {} ({} clients, {} keys) | attempts/s | commits/s | aborts/s | abort rate |\n|---|---:|---:|---:|---:|\n",
            self.backend, self.clients, self.keys
        );
        for p in &self.points {
            out.push_str(&format!(
                "| {} | {:.0} | {:.0} | {:.0} | {:.3} |\n",
                p.distribution,
                p.attempts_per_sec,
                p.commits_per_sec,
                p.aborts_per_sec,
                p.abort_rate
            ));
        }
        out
    }
}

fn key(i: usize) -> Bytes {
    Bytes::from(format!("k{i:08}"))
}

fn decode(value: Option<Bytes>) -> Result<i64> {
    match value {
        None => Ok(0),
        Some(v) => <[u8; 8]>::try_from(v.as_ref())
            .map(i64::from_be_bytes)
            .map_err(|_| Error::Corrupt(format!("counter is {} bytes", v.len()))),
    }
}

/// One read-modify-write transaction over `keys`.
async fn increment<S: RowStore>(client: &Client<S>, keys: &[usize]) -> Result<()> {
    let mut txn = client.begin().await?;
    for k in keys {
        let n = decode(txn.get(TABLE, key(*k), COLUMN).await?)?;
        txn.set(
            TABLE,
            key(*k),
            COLUMN,
            Bytes::copy_from_slice(&(n + 1).to_be_bytes()),
        )?;
    }
    txn.commit().await.map(|_| ())
}

async fn measure<S: RowStore>(
    client: &Client<S>,
    distribution: Arc<KeyDistribution>,
    config: &ContentionConfig,
) -> Result<(f64, u64, u64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let aborts = Arc::new(AtomicU64::new(0));
    let began = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..config.clients.max(1) {
        let (client, distribution) = (client.clone(), Arc::clone(&distribution));
        let (stop, commits, aborts) =
            (Arc::clone(&stop), Arc::clone(&commits), Arc::clone(&aborts));
        let (per_txn, keys) = (config.keys_per_txn, config.keys);
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::SmallRng::from_rng(&mut rand::rng());
            while !stop.load(Ordering::Relaxed) {
                let chosen = distribution.distinct(&mut rng, per_txn, keys);
                match increment(&client, &chosen).await {
                    Ok(()) => commits.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.is_retryable() => aborts.fetch_add(1, Ordering::Relaxed),
                    Err(e) => return Err(e),
                };
            }
            Ok(())
        }));
    }
    tokio::time::sleep(config.duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await
            .map_err(|e| Error::Application(format!("contention task: {e}")))??;
    }
    Ok((
        began.elapsed().as_secs_f64(),
        commits.load(Ordering::Relaxed),
        aborts.load(Ordering::Relaxed),
    ))
}

/// Runs uniform, then Zipf, on `store`, and checks the counters. Timestamps come from `oracle`
/// if given (PD's TSO for TiKV), else from the store's shared local oracle.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn percolator_core::TimestampOracle>>,
    config: &ContentionConfig,
) -> Result<ContentionReport> {
    // The benchmark is the only process on its store: without a shared oracle, the local one.
    let builder = match oracle {
        Some(oracle) => Client::builder(Arc::clone(&store)).oracle(oracle),
        None => Client::builder(Arc::clone(&store)).local_oracle(),
    };
    let client = builder.build().await?;
    let mut points = Vec::new();
    let mut total_commits = 0;
    for (name, distribution) in [
        (
            "uniform".to_owned(),
            KeyDistribution::Uniform { n: config.keys },
        ),
        (
            format!("zipf θ={}", config.theta),
            KeyDistribution::zipf(config.keys, config.theta),
        ),
    ] {
        let (secs, commits, aborts) = measure(&client, Arc::new(distribution), config).await?;
        total_commits += commits;
        let attempts = commits + aborts;
        points.push(ContentionPoint {
            distribution: name,
            attempts_per_sec: attempts as f64 / secs,
            commits_per_sec: commits as f64 / secs,
            aborts_per_sec: aborts as f64 / secs,
            abort_rate: aborts as f64 / attempts.max(1) as f64,
        });
    }
    let txn = client.begin().await?;
    let mut sum = 0;
    for item in txn.scan(TABLE, .."\u{7f}", Columns::one(COLUMN)).await? {
        sum += decode(Some(item.value))?;
    }
    client.shutdown().await?;
    let expected = total_commits as i64 * config.keys_per_txn.min(config.keys.max(1)) as i64;
    if sum != expected {
        return Err(Error::Application(format!(
            "contention counters add up to {sum}, expected {expected}: a lost update"
        )));
    }
    Ok(ContentionReport {
        backend: store.name().to_owned(),
        clients: config.clients,
        keys: config.keys,
        points,
        invariant_ok: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_uniform_is_not() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let n = 1_000;
        let count = |d: &KeyDistribution, rng: &mut rand::rngs::SmallRng| {
            let mut hits = vec![0u32; n];
            for _ in 0..100_000 {
                hits[d.sample(rng)] += 1;
            }
            hits.into_iter().max().unwrap_or(0)
        };
        let zipf_top = count(&KeyDistribution::zipf(n, 0.99), &mut rng);
        let uniform_top = count(&KeyDistribution::Uniform { n }, &mut rng);
        // Zipf(0.99) over 1 000 keys gives the top key about 13% of draws; uniform about 0.1%.
        assert!(zipf_top > 10_000, "zipf top key drew {zipf_top}");
        assert!(uniform_top < 300, "uniform top key drew {uniform_top}");
        let distinct = KeyDistribution::zipf(n, 0.99).distinct(&mut rng, 2, n);
        assert_eq!(distinct.len(), 2);
        assert_ne!(distinct[0], distinct[1]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_distributions_are_measured_and_counters_add_up() {
        let store = Arc::new(percolator_backend_mem::MemStore::new());
        let config = ContentionConfig {
            duration: Duration::from_millis(150),
            clients: 8,
            keys: 50,
            ..ContentionConfig::quick()
        };
        let report = run(store, None, &config).await.unwrap();
        assert_eq!(report.points.len(), 2);
        assert!(report.invariant_ok);
        assert!(
            report.points.iter().all(|p| p.commits_per_sec > 0.0),
            "{}",
            report.table()
        );
        assert!(report.table().contains("zipf"));
    }
}
