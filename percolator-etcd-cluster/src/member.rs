//! One etcd member: its ports, data directory and process, and the state file that lets a later
//! process find (and kill) members it did not start.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::{ClusterConfig, ClusterError};

/// One member of a [`crate::LocalCluster`].
#[derive(Debug)]
pub struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// The pid of a member this handle did not start (read from the state file).
    recorded_pid: Option<u32>,
}

impl Member {
    pub(crate) fn new(cluster_dir: &Path, index: usize, client_port: u16, peer_port: u16) -> Self {
        let name = format!("m{index}");
        Self {
            data_dir: cluster_dir.join(format!("{name}.etcd")),
            log: cluster_dir.join(format!("{name}.log")),
            name,
            client_port,
            peer_port,
            child: None,
            recorded_pid: None,
        }
    }

    /// The member's name (`m0`, `m1`, …).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `http://127.0.0.1:PORT` clients talk to.
    pub fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// `http://127.0.0.1:PORT` peers talk to.
    pub fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// The process id, if the member runs.
    pub fn pid(&self) -> Option<u32> {
        match &self.child {
            Some(child) => Some(child.id()),
            None => self.recorded_pid.filter(|&pid| process_alive(pid)),
        }
    }

    /// Whether the member's process is running.
    pub fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// The last `lines` lines of the member's log (for diagnostics).
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join(" | ")
    }

    pub(crate) fn spawn(
        &mut self,
        binary: &Path,
        config: &ClusterConfig,
        initial_cluster: &str,
        token: &str,
        new: bool,
    ) -> Result<(), ClusterError> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| ClusterError::io(format!("open {}", self.log.display()), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| ClusterError::io(format!("open {}", self.log.display()), e))?;
        let mut cmd = Command::new(binary);
        cmd.arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.data_dir.display()))
            .arg(format!("--listen-client-urls={}", self.client_url()))
            .arg(format!("--advertise-client-urls={}", self.client_url()))
            .arg(format!("--listen-peer-urls={}", self.peer_url()))
            .arg(format!("--initial-advertise-peer-urls={}", self.peer_url()))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg(format!("--initial-cluster-token={token}"))
            .arg(format!(
                "--initial-cluster-state={}",
                if new { "new" } else { "existing" }
            ))
            .arg(format!(
                "--heartbeat-interval={}",
                config.heartbeat.as_millis()
            ))
            .arg(format!(
                "--election-timeout={}",
                config.election_timeout.as_millis()
            ))
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .args(&config.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let child = cmd
            .spawn()
            .map_err(|e| ClusterError::io(format!("start {}", binary.display()), e))?;
        self.recorded_pid = None;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILLs the member and reaps it (no-op if it is not running).
    pub(crate) fn kill(&mut self) -> Result<(), ClusterError> {
        if let Some(mut child) = self.child.take() {
            // Child::kill sends SIGKILL on Unix; an exited child is fine.
            let _ = child.kill();
            child
                .wait()
                .map_err(|e| ClusterError::io(format!("reap {}", self.name), e))?;
            return Ok(());
        }
        if let Some(pid) = self.recorded_pid.take() {
            let dir = self.data_dir.clone();
            kill_if_ours(pid, &dir);
        }
        Ok(())
    }
}

/// Whether process `pid` exists.
pub(crate) fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// SIGKILLs `pid` if its command line names `data_dir` (so a reused pid is never hit), and
/// waits briefly for it to go.
fn kill_if_ours(pid: u32, data_dir: &Path) {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let needle = data_dir.to_string_lossy();
    if !String::from_utf8_lossy(&cmdline).contains(needle.as_ref()) {
        return;
    }
    let Ok(raw) = i32::try_from(pid) else { return };
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(raw),
        nix::sys::signal::Signal::SIGKILL,
    );
    for _ in 0..100 {
        if !process_alive(pid) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `count` distinct free loopback ports (bound and released: another process could take one in
/// between, which etcd then reports at startup).
pub(crate) fn free_ports(count: usize) -> Result<Vec<u16>, ClusterError> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ClusterError::io("bind a free loopback port", e))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ClusterError::io("read a bound port", e))
}

/// Writes the members' ports and pids to `path` (JSON).
pub(crate) fn write_state(path: &Path, members: &[Member]) -> Result<(), ClusterError> {
    let state = json!({
        "owner": std::process::id(),
        "members": members.iter().map(|m| json!({
            "name": m.name,
            "client_port": m.client_port,
            "peer_port": m.peer_port,
            "pid": m.pid(),
        })).collect::<Vec<_>>(),
    });
    std::fs::write(path, state.to_string())
        .map_err(|e| ClusterError::io(format!("write {}", path.display()), e))
}

/// Reads members written by [`write_state`].
pub(crate) fn read_state(path: &Path) -> Result<Vec<Member>, ClusterError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ClusterError::io(format!("read {}", path.display()), e))?;
    let invalid =
        || ClusterError::Invalid(format!("{} is not a cluster state file", path.display()));
    let json: Value = serde_json::from_str(&text).map_err(|_| invalid())?;
    let dir = path.parent().ok_or_else(invalid)?;
    let members = json
        .get("members")
        .and_then(Value::as_array)
        .ok_or_else(invalid)?;
    members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let port = |key: &str| {
                m.get(key)
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(invalid)
            };
            let mut member = Member::new(dir, i, port("client_port")?, port("peer_port")?);
            member.recorded_pid = m
                .get("pid")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok());
            Ok(member)
        })
        .collect()
}
