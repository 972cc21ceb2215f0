//! How the CLI finds a server that owns a database: `percolator serve --db DIR` writes
//! [`FILE_NAME`] into `DIR` (its URL and process id) and removes it when it stops. A file whose
//! process is gone (the server was killed) is stale and ignored.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file in the database directory.
pub const FILE_NAME: &str = "percolator-serve.json";

/// What the file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRecord {
    /// The API's base URL.
    pub url: String,
    /// The server's process id.
    pub pid: u32,
}

/// The file's path for the database at `db`.
pub fn path(db: &Path) -> PathBuf {
    db.join(FILE_NAME)
}

/// Records this process as the server of `db` at `url`.
pub fn write(db: &Path, url: &str) -> std::io::Result<()> {
    let record = ServerRecord {
        url: url.to_owned(),
        pid: std::process::id(),
    };
    let json = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    // Written whole, then renamed: a reader never sees half a file.
    let tmp = db.join(format!("{FILE_NAME}.tmp"));
    std::fs::write(&tmp, json)?;
    std::fs::rename(tmp, path(db))
}

/// Removes the record (if it is this process's).
pub fn remove(db: &Path) {
    if find(db).is_some_and(|r| r.pid == std::process::id()) {
        let _ = std::fs::remove_file(path(db));
    }
}

/// The live server of `db`, if a record names one whose process is running.
pub fn find(db: &Path) -> Option<ServerRecord> {
    let bytes = std::fs::read(path(db)).ok()?;
    let record: ServerRecord = serde_json::from_slice(&bytes).ok()?;
    alive(record.pid).then_some(record)
}

/// Whether process `pid` is running (Linux: it has a `/proc` entry; elsewhere assumed).
fn alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.exists() || proc.join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_found_while_its_process_lives() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(find(dir.path()), None);
        write(dir.path(), "http://127.0.0.1:1").unwrap_or_else(|e| panic!("{e}"));
        let found = find(dir.path()).map(|r| r.url);
        assert_eq!(found.as_deref(), Some("http://127.0.0.1:1"));
        // A record of a process that is gone is stale.
        let stale = ServerRecord {
            url: "http://127.0.0.1:2".into(),
            pid: u32::MAX - 1,
        };
        let json = serde_json::to_vec(&stale).unwrap_or_default();
        std::fs::write(path(dir.path()), json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(find(dir.path()), None);
        // Corrupt: ignored, not a panic.
        std::fs::write(path(dir.path()), b"{not json").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(find(dir.path()), None);
        remove(dir.path());
    }
}
