//! `cargo xtask cluster up|down|status`: a local etcd cluster on loopback for trying the
//! distributed backend by hand (data under `target/etcd-cluster/`), and the shared cluster the
//! test runs of `conformance` and `ci` hand to their tests through `PERCOLATOR_ETCD_ENDPOINTS`.

use std::path::PathBuf;

use clap::Subcommand;
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};

/// The variable through which tests find a running cluster.
pub use percolator_etcd_cluster::ENDPOINTS_VAR;

#[derive(Subcommand)]
pub enum ClusterCmd {
    /// Start N members on free loopback ports and wait for a leader; they keep running.
    Up {
        /// Members.
        #[arg(long, default_value_t = 3)]
        members: usize,
    },
    /// Members, their state and the leader.
    Status,
    /// Stop every member and remove the data.
    Down,
}

fn dir() -> PathBuf {
    PathBuf::from("target").join(NAME)
}

const NAME: &str = "etcd-cluster";

pub fn cluster(cmd: ClusterCmd) -> Result<(), String> {
    match cmd {
        ClusterCmd::Up { members } => {
            if dir().exists() {
                return Err(format!(
                    "{} exists: a cluster is up (`cargo xtask cluster status`, `cargo xtask cluster down`)",
                    dir().display()
                ));
            }
            let config = ClusterConfig::default()
                .with_members(members)
                .with_base_dir("target")
                .with_name(NAME);
            let cluster = LocalCluster::start(config).map_err(|e| e.to_string())?;
            let endpoints = cluster.endpoints().join(",");
            print_status(&cluster);
            let dir = cluster.detach();
            println!("\ndata and logs: {}", dir.display());
            println!("export {ENDPOINTS_VAR}={endpoints}");
            Ok(())
        }
        ClusterCmd::Status => {
            let cluster = LocalCluster::attach(dir()).map_err(|e| e.to_string())?;
            print_status(&cluster);
            Ok(())
        }
        ClusterCmd::Down => {
            let cluster = LocalCluster::attach(dir()).map_err(|e| e.to_string())?;
            cluster.stop().map_err(|e| e.to_string())?;
            println!("stopped; removed {}", dir().display());
            Ok(())
        }
    }
}

fn print_status(cluster: &LocalCluster) {
    let leader = cluster.leader();
    let statuses = cluster.statuses();
    println!("| member | client URL | pid | state | raft term | db size |");
    println!("|---|---|---:|---|---:|---:|");
    for (i, member) in cluster.members().iter().enumerate() {
        let status = statuses.iter().find(|(j, _)| *j == i).map(|(_, s)| *s);
        let state = match (member.pid(), status, leader == Some(i)) {
            (None, _, _) => "down",
            (Some(_), None, _) => "not answering",
            (Some(_), Some(_), true) => "leader",
            (Some(_), Some(_), false) => "follower",
        };
        println!(
            "| {} | {} | {} | {state} | {} | {} |",
            member.name(),
            member.client_url(),
            member.pid().map_or("-".into(), |p| p.to_string()),
            status.map_or("-".into(), |s| s.raft_term.to_string()),
            status.map_or("-".into(), |s| format!("{} KiB", s.db_size / 1024)),
        );
    }
}

/// A cluster for one test run, stopped when dropped; `None` (with the reason) where etcd is not
/// installed.
pub fn for_tests() -> Result<Result<LocalCluster, &'static str>, String> {
    if let Some(reason) = percolator_etcd_cluster::skip_reason() {
        return Ok(Err(reason));
    }
    LocalCluster::start(ClusterConfig::default())
        .map(Ok)
        .map_err(|e| format!("starting the test cluster: {e}"))
}
