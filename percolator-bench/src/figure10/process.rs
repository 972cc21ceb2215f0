//! Child processes of the harness: a `percolator` command whose output lines are collected, each
//! with the moment it arrived, so a harness can read addresses, wait for a state line and turn
//! periodic progress lines into throughput over time.

use std::io::{BufRead as _, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use parking_lot::Mutex;

use super::Figure10Error;

/// One output line and when the harness read it.
#[derive(Debug, Clone)]
pub struct Line {
    /// When it arrived.
    pub at: Instant,
    /// The text, without the newline.
    pub text: String,
}

/// A running child process (killed with SIGKILL if still running when dropped).
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<Line>>>,
}

impl Process {
    /// Starts `program args…` with stdout and stderr collected line by line.
    pub fn spawn(name: &str, mut command: Command) -> Result<Self, Figure10Error> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Figure10Error::Process {
                name: name.to_owned(),
                reason: format!("cannot start {:?}: {e}", command.get_program()),
            })?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let streams: [Option<Box<dyn Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ];
        for stream in streams.into_iter().flatten() {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for text in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().push(Line {
                        at: Instant::now(),
                        text,
                    });
                }
            });
        }
        Ok(Self {
            name: name.to_owned(),
            child,
            lines,
        })
    }

    /// A command running the `percolator` executable with `base` then `args`.
    pub fn percolator(exe: &Path, base: &[String], args: &[&str]) -> Command {
        let mut command = Command::new(exe);
        command.args(base).args(args);
        command
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The operating system's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<Line> {
        self.lines.lock().clone()
    }

    /// Every line so far, joined (for error messages).
    pub fn output(&self) -> String {
        let lines = self.lines.lock();
        lines
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The last line containing any of `needles`, if one arrived.
    pub fn last_line_with(&self, needles: &[&str]) -> Option<String> {
        self.lines
            .lock()
            .iter()
            .rev()
            .find(|l| needles.iter().any(|n| l.text.contains(n)))
            .map(|l| l.text.clone())
    }

    /// Waits (asynchronously) for a line containing `needle` and returns it; fails after `limit`
    /// or when the process exits without printing it.
    pub async fn wait_for_line(
        &mut self,
        needle: &str,
        limit: Duration,
    ) -> Result<String, Figure10Error> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(line) = self.lines.lock().iter().find(|l| l.text.contains(needle)) {
                return Ok(line.text.clone());
            }
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() >= deadline {
                // Let the readers drain what the process printed last.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(self.failure(&match exited {
                    Some(status) => format!("exited ({status}) before printing {needle:?}"),
                    None => format!("printed no {needle:?} within {limit:?}"),
                }));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL, then reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (a graceful stop for `percolator` commands).
    pub fn terminate(&self) -> Result<(), Figure10Error> {
        let pid = i32::try_from(self.child.id()).map_err(|_| self.failure("pid out of range"))?;
        kill(Pid::from_raw(pid), Signal::SIGTERM)
            .map_err(|e| self.failure(&format!("SIGTERM: {e}")))
    }

    /// Waits for it to exit within `limit` (then SIGKILLs it and fails); fails unless it exited
    /// successfully. Returns its whole output.
    pub async fn finish(&mut self, limit: Duration) -> Result<String, Figure10Error> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return self.exit_result(status);
            }
            if Instant::now() >= deadline {
                self.kill9();
                return Err(self.failure(&format!("did not exit within {limit:?}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn exit_result(&self, status: ExitStatus) -> Result<String, Figure10Error> {
        if status.success() {
            Ok(self.output())
        } else {
            Err(self.failure(&format!("failed ({status})")))
        }
    }

    fn failure(&self, what: &str) -> Figure10Error {
        Figure10Error::Process {
            name: self.name.clone(),
            reason: format!("{what}; its output:\n{}", self.output()),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}
