//! The experiment as steps: start the cluster, the oracles, the crawler and the workers; kill a
//! worker, the etcd leader and the leading oracle one phase apart; stop, drain and check. Each
//! step is a method of [`Experiment`], which holds the processes and what they recorded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_core::{Client, DynStore, TimestampOracle};
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};
use percolator_oracle::{RemoteOracle, RemoteOracleConfig};
use percolator_registry::{OpenOptions, StoreSpec};
use percolator_webindex as webindex;
use percolator_webindex::synthetic::SyntheticCrawl;

use super::loader::{self, Loader};
use super::process::Process;
use super::{
    DRAIN_LIMIT, FaultReport, Figure10Config, Figure10Error, Figure10Report, blocking, sleep_until,
    spawn_oracle, timeline_of, wait_for_leading_oracle, worker_command, worker_locks,
};

/// A worker slot: the running incarnation and the ones killed before it.
pub(super) struct WorkerSlot {
    pub(super) name: String,
    pub(super) running: Option<Process>,
    pub(super) killed: Vec<Process>,
}

/// An oracle instance and its fixed address.
pub(super) struct OracleSlot {
    pub(super) name: String,
    pub(super) address: String,
    pub(super) running: Option<Process>,
    pub(super) killed: Vec<Process>,
}

/// A fault: its kind, what was done, when (seconds into the run) and for how long.
pub(super) type Fault = (String, String, f64, f64);

/// A running experiment.
struct Experiment<'a> {
    config: &'a Figure10Config,
    cluster: Option<LocalCluster>,
    /// `--backend etcd --endpoints … --namespace …`: how every process reaches the store.
    store_args: Vec<String>,
    /// `store_args` and `--oracle …`: what workers run with.
    worker_args: Vec<String>,
    oracles: Vec<OracleSlot>,
    workers: Vec<WorkerSlot>,
    faults: Vec<Fault>,
    origin: Instant,
}

/// Runs the whole experiment; `say` gets a line at every step (the binary prints them).
pub async fn run(
    config: &Figure10Config,
    say: impl Fn(&str),
) -> Result<Figure10Report, Figure10Error> {
    if let Some(reason) = percolator_etcd_cluster::skip_reason() {
        return Err(Figure10Error::EtcdUnavailable(reason.to_owned()));
    }
    say("starting a 3-member etcd cluster");
    let mut experiment = Experiment::start_cluster(config).await?;
    say("starting 2 oracle instances");
    experiment.start_oracles().await?;
    let client = experiment.harness_client().await?;

    let crawl = SyntheticCrawl::new(config.docs, config.seed);
    say(&format!(
        "starting {} workers and the crawler ({} pages, {:.0} pages/s)",
        config.workers, config.docs, config.loader.pages_per_sec
    ));
    experiment.origin = Instant::now();
    let loader = Loader::start(client.clone(), crawl, config.loader.clone());
    experiment.start_workers()?;

    experiment.kill_a_worker(&say).await?;
    experiment.kill_the_etcd_leader(&say).await?;
    experiment.kill_the_leading_oracle(&say).await?;

    sleep_until(experiment.origin + config.phase * 4).await;
    let measured = experiment.origin.elapsed();
    say("stopping the crawler and the workers");
    let record = loader.stop().await;
    let (rolled_back, rolled_forward) = experiment.stop_workers().await?;
    say("draining what is pending with one more worker");
    let drain_secs = experiment.drain().await?;

    say("checking");
    let acks = loader::check_acks(&client, &crawl, &record).await?;
    let checks = crate::webindex::checks::index_checks(&client).await?;
    client.shutdown().await?;
    experiment.stop().await;
    let oracle_events = super::oracle_events(&experiment.oracles, experiment.origin);

    let (timeline, observer_runs, dips) = timeline_of(
        config,
        experiment.origin,
        measured,
        &experiment.workers,
        &record,
        &experiment.faults,
    );
    Ok(Figure10Report {
        docs: config.docs,
        workers: config.workers,
        bucket_secs: config.bucket.as_secs_f64(),
        measured_secs: measured.as_secs_f64(),
        timeline,
        faults: experiment
            .faults
            .into_iter()
            .zip(dips)
            .map(
                |((kind, action, at_secs, down_secs), (observers, crawler))| FaultReport {
                    kind,
                    action,
                    at_secs,
                    down_secs,
                    observers,
                    crawler,
                },
            )
            .collect(),
        observer_runs,
        pages_written: record.written_at.len(),
        generations: record.generations,
        load_retries: record.retried,
        loads_given_up: record.gave_up,
        locks_rolled_back: rolled_back,
        locks_rolled_forward: rolled_forward,
        drain_secs,
        acks,
        violations: checks.violations,
        strong_runs: checks.strong_runs,
        strong_changes: checks.strong_changes,
        doubled: checks.doubled,
        pending: checks.pending,
        locks: checks.locks,
        oracle_events,
    })
}

impl<'a> Experiment<'a> {
    /// Starts the 3-member etcd cluster every process shares.
    async fn start_cluster(config: &'a Figure10Config) -> Result<Self, Figure10Error> {
        let cluster = blocking(|| LocalCluster::start(ClusterConfig::default().with_members(3)))
            .await?
            .map_err(|e| Figure10Error::Cluster(e.to_string()))?;
        let store_args: Vec<String> = [
            "--backend",
            "etcd",
            "--endpoints",
            &cluster.endpoints().join(","),
            "--namespace",
            &format!("figure10-{}", std::process::id()),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        Ok(Self {
            config,
            cluster: Some(cluster),
            worker_args: store_args.clone(),
            store_args,
            oracles: Vec::new(),
            workers: Vec::new(),
            faults: Vec::new(),
            origin: Instant::now(),
        })
    }

    fn endpoints(&self) -> Vec<String> {
        self.cluster
            .as_ref()
            .map(LocalCluster::endpoints)
            .unwrap_or_default()
    }

    fn namespace(&self) -> &str {
        self.store_args.last().map_or("", String::as_str)
    }

    /// Starts two oracle instances and waits for the first to lead; workers get both addresses.
    async fn start_oracles(&mut self) -> Result<(), Figure10Error> {
        for name in ["oracle A", "oracle B"] {
            let mut slot = OracleSlot {
                name: name.to_owned(),
                address: "127.0.0.1:0".to_owned(),
                running: None,
                killed: Vec::new(),
            };
            let mut process = spawn_oracle(self.config, &self.store_args, &slot)?;
            let line = process
                .wait_for_line("oracle listening on", Duration::from_secs(30))
                .await?;
            slot.address = line.rsplit(' ').next().unwrap_or_default().to_owned();
            if self.oracles.is_empty() {
                process
                    .wait_for_line("oracle leading", Duration::from_secs(30))
                    .await?;
            }
            slot.running = Some(process);
            self.oracles.push(slot);
        }
        let addresses: Vec<String> = self.oracles.iter().map(|o| o.address.clone()).collect();
        self.worker_args
            .extend(["--oracle".to_owned(), addresses.join(",")]);
        Ok(())
    }

    /// The harness's own client, for the crawler and the final checks: on the same store and
    /// oracles as the workers.
    async fn harness_client(&self) -> Result<Client<DynStore>, Figure10Error> {
        let spec = StoreSpec::Etcd(self.endpoints());
        let options = OpenOptions::default().with_namespace(self.namespace());
        let opened = percolator_registry::open(&spec, &options)
            .await
            .map_err(|e| Figure10Error::Cluster(e.to_string()))?;
        let store = Arc::new(opened.store);
        let addresses = self.oracles.iter().map(|o| o.address.clone());
        let oracle: Arc<dyn TimestampOracle> =
            Arc::new(RemoteOracle::new(RemoteOracleConfig::new(addresses))?);
        let client = Client::builder(store)
            .oracle(oracle)
            .observe_all(&webindex::observed_columns())
            .build()
            .await?;
        Ok(client)
    }

    /// Starts the worker processes.
    fn start_workers(&mut self) -> Result<(), Figure10Error> {
        for i in 0..self.config.workers {
            let name = format!("worker {}", i + 1);
            let process = Process::spawn(&name, worker_command(self.config, &self.worker_args))?;
            self.workers.push(WorkerSlot {
                name,
                running: Some(process),
                killed: Vec::new(),
            });
        }
        Ok(())
    }

    /// Fault 1, one phase in: SIGKILL a worker, start it again after a while.
    async fn kill_a_worker(&mut self, say: &impl Fn(&str)) -> Result<(), Figure10Error> {
        let config = self.config;
        sleep_until(self.origin + config.phase).await;
        let at = self.origin.elapsed().as_secs_f64();
        let slot = &mut self.workers[0];
        say(&format!("fault 1 at {at:.1} s: kill -9 {}", slot.name));
        if let Some(mut process) = slot.running.take() {
            process.kill9();
            slot.killed.push(process);
        }
        tokio::time::sleep(config.worker_down_for).await;
        slot.running = Some(Process::spawn(
            &slot.name,
            worker_command(config, &self.worker_args),
        )?);
        let action = format!("kill -9 {}", slot.name);
        self.faults.push((
            "worker".into(),
            action,
            at,
            config.worker_down_for.as_secs_f64(),
        ));
        Ok(())
    }

    /// Fault 2, two phases in: SIGKILL the etcd leader, restart it after a while.
    async fn kill_the_etcd_leader(&mut self, say: &impl Fn(&str)) -> Result<(), Figure10Error> {
        let config = self.config;
        sleep_until(self.origin + config.phase * 2).await;
        let mut cluster = self
            .cluster
            .take()
            .ok_or_else(|| Figure10Error::Cluster("the cluster is gone".into()))?;
        let (leader, cluster_back) = blocking(move || {
            let leader = cluster.leader();
            if let Some(i) = leader {
                let _ = cluster.kill(i);
            }
            (leader, cluster)
        })
        .await?;
        cluster = cluster_back;
        let at = self.origin.elapsed().as_secs_f64();
        let Some(leader) = leader else {
            self.cluster = Some(cluster);
            return Err(Figure10Error::Cluster("no etcd leader to kill".into()));
        };
        say(&format!(
            "fault 2 at {at:.1} s: kill -9 the etcd leader (member {leader})"
        ));
        tokio::time::sleep(config.etcd_down_for).await;
        let cluster = blocking(move || cluster.restart(leader).map(|()| cluster))
            .await?
            .map_err(|e| Figure10Error::Cluster(format!("restart member {leader}: {e}")))?;
        self.cluster = Some(cluster);
        self.faults.push((
            "etcd-leader".into(),
            format!("kill -9 etcd leader (member {leader})"),
            at,
            config.etcd_down_for.as_secs_f64(),
        ));
        Ok(())
    }

    /// Fault 3, three phases in: SIGKILL the leading oracle, start it again (as a standby).
    async fn kill_the_leading_oracle(&mut self, say: &impl Fn(&str)) -> Result<(), Figure10Error> {
        let config = self.config;
        sleep_until(self.origin + config.phase * 3).await;
        let leading = wait_for_leading_oracle(&self.oracles, Duration::from_secs(10)).await?;
        let at = self.origin.elapsed().as_secs_f64();
        let slot = &mut self.oracles[leading];
        say(&format!(
            "fault 3 at {at:.1} s: kill -9 the leading oracle ({})",
            slot.name
        ));
        if let Some(mut process) = slot.running.take() {
            process.kill9();
            slot.killed.push(process);
        }
        tokio::time::sleep(config.oracle_down_for).await;
        let mut restarted = spawn_oracle(config, &self.store_args, slot)?;
        restarted
            .wait_for_line("oracle listening on", Duration::from_secs(30))
            .await?;
        slot.running = Some(restarted);
        let action = format!("kill -9 leading oracle ({})", slot.name);
        self.faults.push((
            "oracle-leader".into(),
            action,
            at,
            config.oracle_down_for.as_secs_f64(),
        ));
        Ok(())
    }

    /// Stops the workers gracefully; returns the locks they rolled back and forward.
    async fn stop_workers(&mut self) -> Result<(u64, u64), Figure10Error> {
        let (mut rolled_back, mut rolled_forward) = (0, 0);
        for slot in &mut self.workers {
            if let Some(process) = slot.running.as_mut() {
                process.terminate()?;
                let output = process.finish(Duration::from_secs(120)).await?;
                let (back, forward) = worker_locks(&output);
                rolled_back += back;
                rolled_forward += forward;
            }
        }
        Ok((rolled_back, rolled_forward))
    }

    /// Runs one more worker until nothing is pending; returns how long it took.
    async fn drain(&self) -> Result<f64, Figure10Error> {
        let began = Instant::now();
        let mut args = self.worker_args.clone();
        args.extend(["webindex", "run"].map(String::from));
        let mut drain = Process::spawn(
            "drain worker",
            Process::percolator(&self.config.percolator, &args, &[]),
        )?;
        drain.finish(DRAIN_LIMIT).await?;
        Ok(began.elapsed().as_secs_f64())
    }

    /// Stops the oracles and the cluster.
    async fn stop(&mut self) {
        for slot in &mut self.oracles {
            if let Some(process) = slot.running.as_mut() {
                let _ = process.terminate();
                let _ = process.finish(Duration::from_secs(10)).await;
            }
        }
        if let Some(cluster) = self.cluster.take() {
            let _ = blocking(move || cluster.stop()).await;
        }
    }
}
