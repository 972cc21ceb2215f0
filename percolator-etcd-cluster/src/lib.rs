//! # percolator-etcd-cluster
//!
//! Local etcd clusters on loopback, for the etcd backend's tests, the benchmarks and users who
//! want to try the distributed setup on one machine (`cargo xtask cluster up`).
//!
//! [`LocalCluster::start`] launches N `etcd` members (default 3) on free loopback ports, each
//! with its own data directory, and waits until they have elected a leader. Tests can find the
//! leader, SIGKILL any member and restart it on its data directory, and drop the cluster (which
//! kills every member and removes the data). Data goes under `/dev/shm` when it exists: etcd 3.4
//! fsyncs every write on every member and has no flag to turn that off, so a tmpfs keeps the test
//! suite from being disk-bound.
//!
//! A test process that dies without unwinding (SIGKILL, a nextest timeout) cannot drop its
//! cluster. Every cluster directory therefore records its owner's pid and its members' pids, and
//! the next [`LocalCluster::start`] on the machine sweeps clusters whose owner is gone
//! ([`sweep_orphans`]).
//!
//! `etcd` is found through `$ETCD_BIN`, then `PATH`, then `/usr/bin/etcd` (Debian's
//! `etcd-server` package). [`etcd_binary`] returns `None` when it is not installed, so that tests
//! can skip with a printed reason instead of failing on a machine without it.

mod member;
mod status;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use member::Member;
pub use status::MemberStatus;

/// What can go wrong while managing a local cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// No `etcd` binary was found.
    #[error(
        "etcd is not installed (set ETCD_BIN, put etcd on PATH, or apt-get install etcd-server)"
    )]
    NotInstalled,
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The cluster did not reach the wanted state in time.
    #[error("{0}")]
    Timeout(String),
    /// A member index out of range, or a state file that does not describe a cluster.
    #[error("{0}")]
    Invalid(String),
}

impl ClusterError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        ClusterError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Settings of a [`LocalCluster`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClusterConfig {
    /// Members (at least 1).
    pub members: usize,
    /// Directory under which the cluster's directory is created; `None`: `/dev/shm` if it
    /// exists, else the system temporary directory.
    pub base_dir: Option<PathBuf>,
    /// The cluster's own directory name; `None`: a unique name with this process's id.
    pub name: Option<String>,
    /// How long to wait for a leader.
    pub start_timeout: Duration,
    /// Raft heartbeat interval (etcd's `--heartbeat-interval`).
    pub heartbeat: Duration,
    /// Raft election timeout (etcd's `--election-timeout`).
    pub election_timeout: Duration,
    /// Extra `etcd` flags for every member (for example `--max-txn-ops=256`).
    pub extra_args: Vec<String>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            members: 3,
            base_dir: None,
            name: None,
            start_timeout: Duration::from_secs(30),
            heartbeat: Duration::from_millis(100),
            election_timeout: Duration::from_millis(1000),
            extra_args: Vec::new(),
        }
    }
}

impl ClusterConfig {
    /// Sets [`Self::members`].
    #[must_use]
    pub fn with_members(mut self, members: usize) -> Self {
        self.members = members;
        self
    }

    /// Sets [`Self::base_dir`].
    #[must_use]
    pub fn with_base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = Some(dir.into());
        self
    }

    /// Sets [`Self::name`].
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds an `etcd` flag for every member.
    #[must_use]
    pub fn with_arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }
}

/// The `etcd` binary: `$ETCD_BIN`, else `etcd` on `PATH`, else `/usr/bin/etcd`; `None` if none
/// exists.
pub fn etcd_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ETCD_BIN").map(PathBuf::from) {
        return path.is_file().then_some(path);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("etcd"))
            .find(|candidate| candidate.is_file())
    });
    on_path.or_else(|| {
        let debian = PathBuf::from("/usr/bin/etcd");
        debian.is_file().then_some(debian)
    })
}

/// The reason a test that needs etcd cannot run here, or `None` if it can.
pub fn skip_reason() -> Option<&'static str> {
    etcd_binary()
        .is_none()
        .then_some("etcd is not installed (apt-get install etcd-server, or set ETCD_BIN)")
}

/// Where clusters live unless told otherwise.
pub fn default_base_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

const DIR_PREFIX: &str = "percolator-etcd-";
const STATE_FILE: &str = "cluster.json";

/// A running local cluster. Dropping it kills every member and removes its directory, unless
/// it was [`LocalCluster::detach`]ed.
#[derive(Debug)]
pub struct LocalCluster {
    dir: PathBuf,
    members: Vec<Member>,
    config: ClusterConfig,
    binary: PathBuf,
    detached: bool,
}

impl LocalCluster {
    /// Starts a new cluster and waits until it has a leader.
    pub fn start(config: ClusterConfig) -> Result<Self, ClusterError> {
        let binary = etcd_binary().ok_or(ClusterError::NotInstalled)?;
        let base = config.base_dir.clone().unwrap_or_else(default_base_dir);
        sweep_orphans(&base);
        let name = config.name.clone().unwrap_or_else(unique_name);
        let dir = base.join(&name);
        if dir.exists() {
            return Err(ClusterError::Invalid(format!(
                "{} already exists (a cluster is there: stop it first)",
                dir.display()
            )));
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| ClusterError::io(format!("create {}", dir.display()), e))?;
        let count = config.members.max(1);
        let ports = member::free_ports(count * 2)?;
        let members: Vec<Member> = (0..count)
            .map(|i| Member::new(&dir, i, ports[2 * i], ports[2 * i + 1]))
            .collect();
        let mut cluster = Self {
            dir,
            members,
            config,
            binary,
            detached: false,
        };
        for i in 0..count {
            cluster.spawn(i, true)?;
        }
        cluster.write_state()?;
        let timeout = cluster.config.start_timeout;
        cluster.wait_for_leader(timeout)?;
        Ok(cluster)
    }

    /// Attaches to a cluster started elsewhere (by `cargo xtask cluster up`) from its directory.
    /// The members keep running when the handle is dropped; [`Self::stop`] ends them.
    pub fn attach(dir: impl Into<PathBuf>) -> Result<Self, ClusterError> {
        let dir = dir.into();
        let state = member::read_state(&dir.join(STATE_FILE))?;
        Ok(Self {
            binary: etcd_binary().unwrap_or_else(|| PathBuf::from("etcd")),
            members: state,
            dir,
            config: ClusterConfig::default(),
            detached: true,
        })
    }

    /// The cluster's directory (data and logs of every member).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The members.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Client URLs of every member (`http://127.0.0.1:PORT`), running or not.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::client_url).collect()
    }

    /// The status of every running member that answers.
    pub fn statuses(&self) -> Vec<(usize, MemberStatus)> {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_running())
            .filter_map(|(i, m)| status::fetch(&m.client_url()).ok().map(|s| (i, s)))
            .collect()
    }

    /// The index of the member that leads, if the running members agree on one that runs.
    pub fn leader(&self) -> Option<usize> {
        let statuses = self.statuses();
        let leader_id = statuses.first()?.1.leader;
        if leader_id == 0 || statuses.iter().any(|(_, s)| s.leader != leader_id) {
            return None;
        }
        statuses
            .iter()
            .find(|(_, s)| s.member_id == leader_id)
            .map(|(i, _)| *i)
    }

    /// Waits until a running member leads and every running member agrees; returns its index.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize, ClusterError> {
        let began = Instant::now();
        loop {
            if let Some(leader) = self.leader() {
                return Ok(leader);
            }
            if began.elapsed() > timeout {
                let logs: Vec<String> = self
                    .members
                    .iter()
                    .map(|m| format!("{}: {}", m.name(), m.log_tail(5)))
                    .collect();
                return Err(ClusterError::Timeout(format!(
                    "no etcd leader after {timeout:?} in {}; member logs:\n{}",
                    self.dir.display(),
                    logs.join("\n")
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILLs member `index` (no-op if it is not running).
    pub fn kill(&mut self, index: usize) -> Result<(), ClusterError> {
        self.member_mut(index)?.kill()?;
        self.write_state()
    }

    /// Restarts member `index` on its data directory (it rejoins the cluster).
    pub fn restart(&mut self, index: usize) -> Result<(), ClusterError> {
        self.member_mut(index)?.kill()?;
        self.spawn(index, false)?;
        self.write_state()
    }

    /// Kills every member and removes the cluster's directory.
    pub fn stop(mut self) -> Result<(), ClusterError> {
        self.shutdown()
    }

    /// Leaves the members running when this handle is dropped (`cargo xtask cluster up`).
    pub fn detach(mut self) -> PathBuf {
        self.detached = true;
        self.dir.clone()
    }

    fn member_mut(&mut self, index: usize) -> Result<&mut Member, ClusterError> {
        let count = self.members.len();
        self.members.get_mut(index).ok_or_else(|| {
            ClusterError::Invalid(format!("no member {index}: the cluster has {count}"))
        })
    }

    fn spawn(&mut self, index: usize, new: bool) -> Result<(), ClusterError> {
        let peers = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name(), m.peer_url()))
            .collect::<Vec<_>>()
            .join(",");
        let token = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (binary, config) = (self.binary.clone(), self.config.clone());
        self.member_mut(index)?
            .spawn(&binary, &config, &peers, &token, new)
    }

    fn write_state(&self) -> Result<(), ClusterError> {
        member::write_state(&self.dir.join(STATE_FILE), &self.members)
    }

    fn shutdown(&mut self) -> Result<(), ClusterError> {
        for member in &mut self.members {
            member.kill()?;
        }
        self.detached = true;
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ClusterError::io(
                format!("remove {}", self.dir.display()),
                e,
            )),
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.shutdown();
        }
    }
}

fn unique_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    format!(
        "{DIR_PREFIX}{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Kills the members of clusters under `base` whose owning process is gone (a test killed
/// without unwinding) and removes their directories. Clusters of live processes, and
/// directories that are not clusters, are left alone.
pub fn sweep_orphans(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(DIR_PREFIX) else {
            continue;
        };
        let owner = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        let Some(owner) = owner else { continue };
        if member::process_alive(owner) {
            continue;
        }
        let dir = entry.path();
        if let Ok(members) = member::read_state(&dir.join(STATE_FILE)) {
            for mut m in members {
                let _ = m.kill();
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The variable naming an existing cluster's client URLs, comma separated (`cargo xtask` sets
/// it for test runs, so that tests share one cluster).
pub const ENDPOINTS_VAR: &str = "PERCOLATOR_ETCD_ENDPOINTS";

/// Endpoints from [`ENDPOINTS_VAR`], if set.
pub fn endpoints_from_env() -> Option<Vec<String>> {
    let raw = std::env::var(ENDPOINTS_VAR).ok()?;
    let endpoints: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect();
    (!endpoints.is_empty()).then_some(endpoints)
}

/// The cluster a test runs on: the one in [`ENDPOINTS_VAR`], or a 3-member one it started
/// (stopped when this is dropped).
#[derive(Debug)]
pub struct TestCluster {
    endpoints: Vec<String>,
    _own: Option<LocalCluster>,
}

impl TestCluster {
    /// The cluster of [`ENDPOINTS_VAR`], else a new local one; `Ok(None)` when neither is there
    /// ([`skip_reason`] says why). etcd installed but failing to start is an error, not a skip.
    pub fn from_env_or_start() -> Result<Option<Self>, ClusterError> {
        if let Some(endpoints) = endpoints_from_env() {
            return Ok(Some(Self {
                endpoints,
                _own: None,
            }));
        }
        if skip_reason().is_some() {
            return Ok(None);
        }
        let cluster = LocalCluster::start(ClusterConfig::default())?;
        Ok(Some(Self {
            endpoints: cluster.endpoints(),
            _own: Some(cluster),
        }))
    }

    /// Client URLs.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }
}
