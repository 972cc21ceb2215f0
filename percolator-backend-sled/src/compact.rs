//! Offline compaction: reclaiming the disk space sled keeps after deletes and overwrites.
//!
//! sled 0.34 is log-structured. Deleting a key (what garbage collection does) or overwriting one
//! frees its space only inside sled's segments, and sled reuses or truncates those segments
//! slowly: after a few hundred thousand deletes a store can occupy many times its live data on
//! disk. The one way to get the space back is to copy the live keys into a fresh database.
//! [`compact`] does that, offline, and swaps the copy in:
//!
//! 1. open `<db>` — sled's file lock keeps every other process out until the swap is done;
//! 2. copy every tree, key by key in batches, into `<db>.compacting` (created new) and flush it;
//! 3. rename `<db>` to `<db>.pre-compact`, then `<db>.compacting` to `<db>`, and sync the
//!    parent directory — still holding the lock on the old database;
//! 4. close both and delete `<db>.pre-compact`.
//!
//! A crash at any point loses nothing. Before step 3 the original is untouched and a later run
//! deletes the stale copy. Between the two renames `<db>` is missing, but `<db>.pre-compact`
//! exists only once the copy is complete: [`finish_interrupted`] — which [`crate::SledStore::open`]
//! runs first — completes the swap (or, if it had completed, deletes the leftover).

use std::path::{Path, PathBuf};

use percolator_core::StoreError;

/// Keys per write batch into the new database.
const COPY_BATCH: usize = 4096;

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactReport {
    /// Keys copied (every tree).
    pub keys: u64,
    /// Their key and value bytes: the live data.
    pub live_bytes: u64,
    /// Bytes of the database directory before.
    pub disk_bytes_before: u64,
    /// Bytes of the database directory after.
    pub disk_bytes_after: u64,
}

fn io(context: String, e: std::io::Error) -> StoreError {
    StoreError::backend(context, e)
}

fn sled_err(context: &str, path: &Path, e: sled::Error) -> StoreError {
    StoreError::backend(format!("sled: {context} {}", path.display()), e)
}

/// `<db>` with `suffix` appended to its last component.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(ToOwned::to_owned).unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// Where the copy is built.
pub fn compacting_path(path: &Path) -> PathBuf {
    sibling(path, ".compacting")
}

/// Where the old database waits between the two renames.
pub fn pre_compact_path(path: &Path) -> PathBuf {
    sibling(path, ".pre-compact")
}

/// Total size of the regular files under `path`.
pub fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

fn sync_parent(path: &Path) -> Result<(), StoreError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| io(format!("syncing directory {}", parent.display()), e))
}

fn remove_dir_if_present(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(format!("removing {}", path.display()), e)),
    }
}

/// Completes or cleans up a compaction of `path` that a crash interrupted; returns whether there
/// was anything to do. Idempotent, and a no-op (two `stat`s) on a database never compacted.
pub fn finish_interrupted(path: &Path) -> Result<bool, StoreError> {
    let old = pre_compact_path(path);
    if !old.exists() {
        return Ok(false);
    }
    if !path.exists() {
        // The copy was complete before the old database was moved aside: finish the swap.
        let copy = compacting_path(path);
        std::fs::rename(&copy, path).map_err(|e| {
            io(
                format!(
                    "finishing an interrupted compaction: moving {} to {}",
                    copy.display(),
                    path.display()
                ),
                e,
            )
        })?;
        sync_parent(path)?;
    }
    remove_dir_if_present(&old)?;
    Ok(true)
}

/// Opens an existing database, waiting up to 5 s for the file lock of a process (or a
/// background flusher thread of a handle just dropped) that is letting go of it.
fn open_waiting(path: &Path) -> sled::Result<sled::Db> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match sled::Config::new().path(path).open() {
            Err(e)
                if std::time::Instant::now() < deadline
                    && e.to_string().contains("could not acquire lock") =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Compacts the sled database at `path` (see the module docs); `progress` gets the number of
/// keys copied so far. The database must exist and no other process may have it open.
pub fn compact(path: &Path, mut progress: impl FnMut(u64)) -> Result<CompactReport, StoreError> {
    finish_interrupted(path)?;
    if !path.is_dir() {
        return Err(StoreError::InvalidInput(format!(
            "no sled database at {} to compact",
            path.display()
        )));
    }
    let disk_bytes_before = dir_bytes(path);
    let source = open_waiting(path).map_err(|e| sled_err("open", path, e))?;
    let copy_path = compacting_path(path);
    remove_dir_if_present(&copy_path)?; // a copy a crash left unfinished
    let copy = sled::Config::new()
        .path(&copy_path)
        .create_new(true)
        .open()
        .map_err(|e| sled_err("create", &copy_path, e))?;
    let (mut keys, mut live_bytes) = (0u64, 0u64);
    for name in source.tree_names() {
        let from = source
            .open_tree(&name)
            .map_err(|e| sled_err("open tree of", path, e))?;
        let to = copy
            .open_tree(&name)
            .map_err(|e| sled_err("open tree of", &copy_path, e))?;
        let mut batch = sled::Batch::default();
        let mut in_batch = 0;
        for item in from.iter() {
            let (k, v) = item.map_err(|e| sled_err("read", path, e))?;
            live_bytes += (k.len() + v.len()) as u64;
            batch.insert(k, v);
            in_batch += 1;
            if in_batch == COPY_BATCH {
                to.apply_batch(std::mem::take(&mut batch))
                    .map_err(|e| sled_err("write", &copy_path, e))?;
                keys += in_batch as u64;
                in_batch = 0;
                progress(keys);
            }
        }
        to.apply_batch(batch)
            .map_err(|e| sled_err("write", &copy_path, e))?;
        keys += in_batch as u64;
        progress(keys);
    }
    copy.flush().map_err(|e| sled_err("flush", &copy_path, e))?;
    drop(copy);
    // The swap, under the old database's lock: nobody can open either name meanwhile.
    let old = pre_compact_path(path);
    std::fs::rename(path, &old).map_err(|e| {
        io(
            format!("moving {} aside to {}", path.display(), old.display()),
            e,
        )
    })?;
    std::fs::rename(&copy_path, path).map_err(|e| {
        io(
            format!("moving {} to {}", copy_path.display(), path.display()),
            e,
        )
    })?;
    sync_parent(path)?;
    drop(source);
    remove_dir_if_present(&old)?;
    Ok(CompactReport {
        keys,
        live_bytes,
        disk_bytes_before,
        disk_bytes_after: dir_bytes(path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(path: &Path, rounds: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
        let db = sled::open(path).unwrap();
        let tree = db.open_tree("data").unwrap();
        for round in 0..rounds {
            for k in 0..2000u32 {
                let key = k.to_be_bytes().to_vec();
                if round + 1 == rounds && k % 2 == 0 {
                    tree.remove(&key).unwrap();
                } else {
                    tree.insert(key, vec![round as u8; 512]).unwrap();
                }
            }
        }
        db.insert(b"default-tree-key", &b"v"[..]).unwrap();
        db.flush().unwrap();
        tree.iter()
            .map(|kv| {
                let (k, v) = kv.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }

    #[test]
    fn compaction_keeps_every_key_and_gives_space_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let live = fill(&path, 8);
        let mut seen = 0;
        let report = compact(&path, |n| seen = n).unwrap();
        assert_eq!(report.keys, seen);
        assert_eq!(report.keys, 1000 + 1, "odd keys and the default tree's key");
        assert!(
            report.disk_bytes_after < report.disk_bytes_before,
            "{report:?}"
        );
        assert!(!compacting_path(&path).exists() && !pre_compact_path(&path).exists());
        let db = open_waiting(&path).unwrap();
        let tree = db.open_tree("data").unwrap();
        let after: Vec<_> = tree
            .iter()
            .map(|kv| {
                let (k, v) = kv.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        assert_eq!(after, live);
        assert_eq!(
            db.get(b"default-tree-key").unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }

    #[test]
    fn a_missing_database_is_an_error_that_names_it_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope");
        let err = compact(&path, |_| {}).unwrap_err();
        assert!(matches!(err, StoreError::InvalidInput(_)), "{err:?}");
        assert!(err.to_string().contains("nope"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn a_crash_between_the_renames_is_finished_on_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let live = fill(&path, 2);
        // The state a crash after the first rename leaves: a complete copy and the old database
        // moved aside, nothing at `path`.
        let db = open_waiting(&path).unwrap();
        let copy = sled::Config::new()
            .path(compacting_path(&path))
            .open()
            .unwrap();
        for name in db.tree_names() {
            let to = copy.open_tree(&name).unwrap();
            for kv in db.open_tree(&name).unwrap().iter() {
                let (k, v) = kv.unwrap();
                to.insert(k, v).unwrap();
            }
        }
        copy.flush().unwrap();
        drop((db, copy));
        std::fs::rename(&path, pre_compact_path(&path)).unwrap();
        // (Retried briefly: the copy's handle may still hold its lock from a flusher thread.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let store = loop {
            match crate::SledStore::open(&path) {
                Ok(store) => break store,
                Err(e) if std::time::Instant::now() < deadline => {
                    assert!(format!("{e:?}").contains("could not acquire lock"), "{e:?}");
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("{e:?}"),
            }
        };
        drop(store);
        assert!(!pre_compact_path(&path).exists() && !compacting_path(&path).exists());
        let db = open_waiting(&path).unwrap();
        assert_eq!(db.open_tree("data").unwrap().len(), live.len());
    }

    #[test]
    fn a_crash_while_copying_leaves_the_original_and_the_next_run_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let live = fill(&path, 2);
        // An unfinished copy from a crashed run.
        let stale = sled::open(compacting_path(&path)).unwrap();
        stale.insert(b"half", &b"done"[..]).unwrap();
        stale.flush().unwrap();
        drop(stale);
        assert!(!finish_interrupted(&path).unwrap(), "nothing to finish");
        let report = compact(&path, |_| {}).unwrap();
        assert_eq!(report.keys, live.len() as u64 + 1);
        let db = open_waiting(&path).unwrap();
        assert_eq!(db.get(b"half").unwrap(), None, "the stale copy was dropped");
    }
}
