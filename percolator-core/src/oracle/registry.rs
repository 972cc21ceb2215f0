//! The `LocalOracle`s of this process: at most one open per store (by
//! [`crate::RowStore::store_id`]), and the ids of those that are gone, whose rows a new oracle of
//! this process may take over without waiting out their lease (they cannot be serving).

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use parking_lot::Mutex;

use crate::error::{Error, Result};

static OPEN: LazyLock<Mutex<HashMap<String, u64>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
static GONE: LazyLock<Mutex<HashSet<u64>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// Records oracle `id` as the one open on `store_id`, or refuses a second.
pub(crate) fn open(store_id: &str, id: u64) -> Result<()> {
    let mut open = OPEN.lock();
    if let Some(other) = open.get(store_id) {
        return Err(Error::Oracle(format!(
            "a LocalOracle ({other:x}) is already open on store {store_id} in this process: \
             share it (shared_local_oracle) instead of opening a second one"
        )));
    }
    open.insert(store_id.to_owned(), id);
    Ok(())
}

/// Oracle `id` on `store_id` is gone.
pub(crate) fn closed(store_id: &str, id: u64) {
    let mut open = OPEN.lock();
    if open.get(store_id) == Some(&id) {
        open.remove(store_id);
    }
    GONE.lock().insert(id);
}

/// Whether oracle `id` was one of this process's and is gone.
pub(crate) fn is_gone(id: u64) -> bool {
    GONE.lock().contains(&id)
}
