//! Offline maintenance that only some engines need: [`compact`] gives a sled database's free
//! space back to the file system. The other backends say what manages their space instead.

use crate::open::OpenError;
use crate::spec::StoreSpec;

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactReport {
    /// Keys copied.
    pub keys: u64,
    /// Their key and value bytes: the live data.
    pub live_bytes: u64,
    /// Bytes of the database directory before.
    pub disk_bytes_before: u64,
    /// Bytes of the database directory after.
    pub disk_bytes_after: u64,
}

/// Why a compaction did not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// The store cannot be opened (or is not in this build).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The backend manages its space itself; the message says how.
    #[error("{0}")]
    NotApplicable(String),
    /// The compaction failed; nothing was lost (the copy is swapped in only when complete).
    #[error("cannot compact {spec}: {message}")]
    Failed {
        /// The spec.
        spec: String,
        /// The error and its causes.
        message: String,
    },
}

/// Compacts the store offline (stop its workers first), calling `progress` with the keys copied
/// so far. Only sled needs it: garbage collection deletes old versions, but sled keeps their
/// space inside its log segments until the live keys are copied into a fresh database.
#[allow(unused_variables)]
pub fn compact(spec: &StoreSpec, progress: impl FnMut(u64)) -> Result<CompactReport, CompactError> {
    match spec {
        StoreSpec::Sled(path) => {
            #[cfg(feature = "sled")]
            {
                let report =
                    percolator_backend_sled::compact::compact(path, progress).map_err(|e| {
                        CompactError::Failed {
                            spec: spec.to_string(),
                            message: crate::open::with_causes(&e),
                        }
                    })?;
                Ok(CompactReport {
                    keys: report.keys,
                    live_bytes: report.live_bytes,
                    disk_bytes_before: report.disk_bytes_before,
                    disk_bytes_after: report.disk_bytes_after,
                })
            }
            #[cfg(not(feature = "sled"))]
            Err(OpenError::NotCompiled {
                spec: spec.to_string(),
                feature: "sled",
            }
            .into())
        }
        StoreSpec::Fjall(path) if !path.exists() => Err(CompactError::NotApplicable(format!(
            "{} does not exist: there is no database to compact",
            path.display()
        ))),
        StoreSpec::Fjall(path) => Err(CompactError::NotApplicable(format!(
            "{} holds a fjall database, which compacts its files itself, online: `compact` is for \
             sled",
            path.display()
        ))),
        StoreSpec::Mem => Err(CompactError::NotApplicable(
            "compact: the mem backend keeps nothing on disk".to_owned(),
        )),
        StoreSpec::Etcd(_) => Err(CompactError::NotApplicable(
            "compact: etcd compacts its own history (the store's GC compacts revisions); run \
             `etcdctl defrag` on each member to give the file space back"
                .to_owned(),
        )),
        StoreSpec::Tikv(_) => Err(CompactError::NotApplicable(
            "compact: TiKV manages its own storage (RocksDB compacts it)".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_that_manage_their_space_say_how() {
        let dir = tempfile::tempdir().unwrap();
        for (spec, says) in [
            ("mem", "keeps nothing on disk"),
            ("etcd:http://127.0.0.1:1", "etcdctl defrag"),
            ("tikv:127.0.0.1:1", "RocksDB"),
        ] {
            let err = compact(&spec.parse().unwrap(), |_| {})
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{spec}: {err}");
        }
        let missing = StoreSpec::Fjall(dir.path().join("none"));
        let err = compact(&missing, |_| {}).unwrap_err().to_string();
        assert!(err.contains("no database to compact"), "{err}");
        let err = compact(&StoreSpec::Fjall(dir.path().to_path_buf()), |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("compacts its files itself"), "{err}");
    }
}
