//! Worker processes on a 3-member etcd cluster (see the module above).

use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_core::{Client, TimestampOracle};
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};
use percolator_observers::RuntimeStats;
use percolator_oracle::{RemoteOracle, RemoteOracleConfig};
use percolator_registry::{OpenOptions, StoreSpec};
use serde_json::Value;

use super::{Distribution, WorkerLine, WorkersConfig, WorkersReport, WorkersRun, distribution};
use crate::figure10::process::Process;
use crate::figure10::{Figure10Error, blocking};

/// Runs every count (and distribution); `say` gets a line at every step.
pub async fn run(
    config: &WorkersConfig,
    say: impl Fn(&str),
) -> Result<WorkersReport, Figure10Error> {
    if let Some(reason) = percolator_etcd_cluster::skip_reason() {
        return Err(Figure10Error::EtcdUnavailable(reason.to_owned()));
    }
    std::fs::create_dir_all(&config.scratch).map_err(|e| Figure10Error::Process {
        name: "workers".into(),
        reason: format!("{}: {e}", config.scratch.display()),
    })?;
    let mut runs = Vec::new();
    for (workers, shape) in config.runs() {
        {
            let run = one_run(config, workers, shape, &say).await?;
            say(&format!(
                "{} workers ({}): {:.1} s, {:.1} pages/s, {:.3} conflicts per processed, {} \
                 already acknowledged, {} live locks rolled forward",
                workers,
                distribution(&run),
                run.secs,
                run.pages_per_sec,
                run.conflicts_per_processed,
                run.already_acknowledged,
                run.live_roll_forwards
            ));
            runs.push(run);
        }
    }
    Ok(WorkersReport::new("etcd", config, runs))
}

async fn one_run(
    config: &WorkersConfig,
    workers: usize,
    shape: Distribution,
    say: &impl Fn(&str),
) -> Result<WorkersRun, Figure10Error> {
    say(&format!(
        "{workers} workers, {}: starting a 3-member etcd cluster and an oracle",
        shape.name()
    ));
    let cluster = blocking(|| LocalCluster::start(ClusterConfig::default().with_members(3)))
        .await?
        .map_err(|e| Figure10Error::Cluster(e.to_string()))?;
    let endpoints = cluster.endpoints();
    let namespace = format!("workers-{}-{workers}-{}", std::process::id(), shape.name());
    let store_args: Vec<String> = [
        "--backend",
        "etcd",
        "--endpoints",
        &endpoints.join(","),
        "--namespace",
        &namespace,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut oracle = Process::spawn(
        "oracle",
        Process::percolator(
            &config.percolator,
            &store_args,
            &["oracle", "serve", "--listen", "127.0.0.1:0"],
        ),
    )?;
    let line = oracle
        .wait_for_line("oracle listening on", Duration::from_secs(30))
        .await?;
    let address = line.rsplit(' ').next().unwrap_or_default().to_owned();
    oracle
        .wait_for_line("oracle leading", Duration::from_secs(30))
        .await?;
    let mut worker_args = store_args.clone();
    worker_args.extend(["--oracle".to_owned(), address.clone()]);
    let mut lock_service = None;
    let mut lock_address = String::new();
    if shape == Distribution::LockService {
        let mut process = Process::spawn(
            "lock service",
            Process::percolator(
                &config.percolator,
                &[],
                &["locks", "serve", "--listen", "127.0.0.1:0"],
            ),
        )?;
        let line = process
            .wait_for_line("lock service listening on", Duration::from_secs(30))
            .await?;
        line.rsplit(' ')
            .next()
            .unwrap_or_default()
            .clone_into(&mut lock_address);
        lock_service = Some(process);
    }

    say(&format!("loading {} synthetic pages", config.docs));
    let (docs, seed) = (config.docs.to_string(), config.seed.to_string());
    let mut load = Process::spawn(
        "load",
        Process::percolator(
            &config.percolator,
            &worker_args,
            &["webindex", "load", "--synthetic", &docs, "--seed", &seed],
        ),
    )?;
    load.finish(Duration::from_secs(600)).await?;

    say(&format!(
        "running {workers} workers until nothing is pending"
    ));
    let (scanners, concurrency) = (config.scanners.to_string(), config.concurrency.to_string());
    let began = Instant::now();
    let mut processes = Vec::new();
    let mut files = Vec::new();
    for i in 0..workers {
        let file = config
            .scratch
            .join(format!("worker-{workers}-{}-{i}.json", shape.name()));
        let _ = std::fs::remove_file(&file);
        let file_arg = file.display().to_string();
        let mut args = vec![
            "webindex",
            "run",
            "--scanners",
            &scanners,
            "--concurrency",
            &concurrency,
            "--stats-json",
            &file_arg,
        ];
        if !shape.partitioned() {
            args.push("--unpartitioned");
        }
        if shape == Distribution::LockService {
            args.extend(["--lock-service", &lock_address]);
        }
        if config.prefetch {
            args.push("--prefetch");
        }
        processes.push(Process::spawn(
            &format!("worker {}", i + 1),
            Process::percolator(&config.percolator, &worker_args, &args),
        )?);
        files.push(file);
    }
    let mut killed_at_secs = None;
    if let Some(after) = config.kill_one_after {
        tokio::time::sleep(after).await;
        if let Some(first) = processes.first_mut() {
            say("kill -9 worker 1; the others must take its rows over");
            first.kill9();
            killed_at_secs = Some(began.elapsed().as_secs_f64());
        }
    }
    let survivors = usize::from(killed_at_secs.is_some());
    for process in &mut processes[survivors..] {
        process.finish(Duration::from_secs(1800)).await?;
    }
    let secs = began.elapsed().as_secs_f64();
    let per_worker = files[survivors..]
        .iter()
        .map(|f| worker_line(f))
        .collect::<Result<Vec<_>, _>>()?;

    say("checking the index");
    let spec = StoreSpec::Etcd(endpoints);
    let opened =
        percolator_registry::open(&spec, &OpenOptions::default().with_namespace(&namespace))
            .await
            .map_err(|e| Figure10Error::Cluster(e.to_string()))?;
    let oracle_client: Arc<dyn TimestampOracle> =
        Arc::new(RemoteOracle::new(RemoteOracleConfig::new([address]))?);
    let client = Client::builder(Arc::new(opened.store))
        .oracle(oracle_client)
        .build()
        .await?;
    let checks = crate::webindex::checks::index_checks(&client).await?;
    client.shutdown().await?;
    let _ = oracle.terminate();
    let _ = oracle.finish(Duration::from_secs(10)).await;
    if let Some(mut process) = lock_service {
        let _ = process.terminate();
        let _ = process.finish(Duration::from_secs(10)).await;
    }
    let _ = blocking(move || cluster.stop()).await;

    let mut run = WorkersRun::from_lines(config.docs, workers, shape, secs, per_worker, checks);
    run.killed_at_secs = killed_at_secs;
    Ok(run)
}

/// A worker's `--stats-json` file.
fn worker_line(path: &std::path::Path) -> Result<WorkerLine, Figure10Error> {
    let failed = |reason: String| Figure10Error::Process {
        name: "worker".into(),
        reason,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| failed(format!("its stats {}: {e}", path.display())))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| failed(format!("its stats {}: {e}", path.display())))?;
    let stats: RuntimeStats = serde_json::from_value(json["observers"].clone())
        .map_err(|e| failed(format!("its stats {}: {e}", path.display())))?;
    Ok(WorkerLine::from_stats(&stats))
}
