//! Range walks over a crossbeam [`SkipMap`] that release every entry they step past.
//!
//! The in-memory indexes of the embedded backends are crossbeam skip maps whose entries come and
//! go and whose key ranges are walked all the time: fjall's notify cells (each observer scan
//! walks the dirty cells) and lock mirror (each condition check walks a column's or a row's
//! locks), and the mem backend's row indexes.
//!
//! crossbeam-skiplist 0.1.3's `SkipMap::range` leaks: its iterator moves on by overwriting the
//! entry it holds without releasing it, so every entry a range passes (but the last) keeps a
//! reference count for good. A removed entry is freed only when its count reaches zero, so each
//! removed entry that any walk ever passed stays allocated, key and value included. Under the
//! serve load test (`cargo xtask bench --serve-load`) the notify cells alone held about
//! 130 MB after six minutes. Upstream fixed it (crossbeam-rs/crossbeam#1217) after the last
//! release.
//!
//! [`range`] walks with [`SkipMap::lower_bound`] and [`Entry::next`] instead: every entry it
//! hands out or keeps to step from is an [`Entry`], which releases its count when dropped. Like
//! crossbeam's own range it is not a snapshot: it sees the entries that are in the map when it
//! reaches their keys.

use std::borrow::Borrow;
use std::ops::{Bound, RangeBounds};

use crossbeam_skiplist::SkipMap;
use crossbeam_skiplist::map::Entry;

/// The entries of `map` within `bounds`, in key order (see the module docs for why not
/// [`SkipMap::range`]).
pub fn range<'a, K, V, Q, R>(map: &'a SkipMap<K, V>, bounds: R) -> Range<'a, K, V, Q, R>
where
    K: Ord + Borrow<Q>,
    Q: Ord + ?Sized,
    R: RangeBounds<Q>,
{
    Range {
        map,
        bounds,
        at: At::Start,
        _key: std::marker::PhantomData,
    }
}

/// The bounds of a [`key_range`].
pub type KeyBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// [`range`] over a map keyed by byte strings, between two byte-string bounds: the walks of the
/// embedded backends' key-ordered indexes.
pub fn key_range<'a, V>(
    map: &'a SkipMap<Vec<u8>, V>,
    lower: Bound<&'a [u8]>,
    upper: Bound<&'a [u8]>,
) -> Range<'a, Vec<u8>, V, [u8], KeyBounds<'a>> {
    range(map, (lower, upper))
}

/// The iterator [`range`] returns.
pub struct Range<'a, K, V, Q: ?Sized, R> {
    map: &'a SkipMap<K, V>,
    bounds: R,
    at: At<'a, K, V>,
    _key: std::marker::PhantomData<fn(&Q)>,
}

/// Where a [`Range`] is.
enum At<'a, K, V> {
    /// Nothing handed out yet.
    Start,
    /// The entry handed out last, to step from.
    After(Entry<'a, K, V>),
    /// Past the end.
    Done,
}

impl<'a, K, V, Q, R> Iterator for Range<'a, K, V, Q, R>
where
    K: Ord + Borrow<Q>,
    Q: Ord + ?Sized,
    R: RangeBounds<Q>,
{
    type Item = Entry<'a, K, V>;

    fn next(&mut self) -> Option<Self::Item> {
        let candidate = match std::mem::replace(&mut self.at, At::Done) {
            At::Start => self.map.lower_bound(self.bounds.start_bound()),
            At::After(last) => last.next(),
            At::Done => None,
        }?;
        let within = match self.bounds.end_bound() {
            Bound::Included(end) => candidate.key().borrow() <= end,
            Bound::Excluded(end) => candidate.key().borrow() < end,
            Bound::Unbounded => true,
        };
        if !within {
            return None;
        }
        self.at = At::After(candidate.clone());
        Some(candidate)
    }
}

impl<K, V, Q: ?Sized, R> std::fmt::Debug for Range<'_, K, V, Q, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Range").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Values that count how many of them are alive.
    fn values(map: &SkipMap<u32, Arc<()>>, n: u32) -> Arc<()> {
        let alive = Arc::new(());
        for key in 0..n {
            map.insert(key, Arc::clone(&alive));
        }
        alive
    }

    /// Runs epoch collection until `alive` is the only value left, or gives up after 1 000
    /// rounds: a freed entry is dropped once every thread has moved two epochs on.
    fn collected(alive: &Arc<()>) -> bool {
        for _ in 0..1_000 {
            if Arc::strong_count(alive) == 1 {
                return true;
            }
            crossbeam_epoch::pin().flush();
        }
        Arc::strong_count(alive) == 1
    }

    #[test]
    fn walks_exactly_the_bounds() {
        let map = SkipMap::new();
        for key in [1u32, 3, 5, 7, 9] {
            map.insert(key, ());
        }
        fn keys(map: &SkipMap<u32, ()>, bounds: impl RangeBounds<u32>) -> Vec<u32> {
            range(map, bounds).map(|e| *e.key()).collect()
        }
        assert_eq!(keys(&map, 3..7), [3, 5]);
        assert_eq!(keys(&map, 3..=7), [3, 5, 7]);
        assert_eq!(keys(&map, 2..), [3, 5, 7, 9]);
        assert_eq!(keys(&map, ..4), [1, 3]);
        assert_eq!(
            keys(&map, (Bound::Excluded(3), Bound::Included(9))),
            [5, 7, 9]
        );
        assert_eq!(keys(&map, 10..), Vec::<u32>::new());
        assert_eq!(keys(&map, 6..6), Vec::<u32>::new());
    }

    #[test]
    fn key_range_walks_byte_keys_between_byte_bounds() {
        let map = SkipMap::new();
        for key in [&b"a"[..], b"ab", b"b", b"ba", b"c"] {
            map.insert(key.to_vec(), ());
        }
        let keys: Vec<Vec<u8>> = key_range(&map, Bound::Included(b"ab"), Bound::Excluded(b"c"))
            .map(|e| e.key().clone())
            .collect();
        assert_eq!(keys, [b"ab".to_vec(), b"b".to_vec(), b"ba".to_vec()]);
    }

    #[test]
    fn sees_entries_inserted_ahead_and_skips_removed_ones() {
        let map = SkipMap::new();
        for key in [1u32, 2, 3] {
            map.insert(key, ());
        }
        let mut walk = range(&map, ..);
        assert_eq!(walk.next().map(|e| *e.key()), Some(1));
        map.remove(&1);
        map.remove(&2);
        map.insert(4, ());
        let rest: Vec<u32> = walk.map(|e| *e.key()).collect();
        assert_eq!(rest, [3, 4]);
    }

    /// The leak this module exists for: entries a walk passed are freed once removed. With
    /// `SkipMap::range` in place of [`range`] this fails (all but one value stay alive).
    #[test]
    fn removed_entries_a_walk_passed_are_freed() {
        let map = SkipMap::new();
        let alive = values(&map, 1_000);
        assert_eq!(range(&map, 100..900).count(), 800);
        assert_eq!(range(&map, ..).take(10).count(), 10);
        for key in 0..1_000 {
            map.remove(&key);
        }
        assert!(map.is_empty());
        assert!(
            collected(&alive),
            "{} values still alive after removing every entry",
            Arc::strong_count(&alive) - 1
        );
    }

    /// The test above can fail: crossbeam's own range leaks what it passes.
    #[test]
    fn crossbeams_range_leaks_what_it_passes() {
        let map = SkipMap::new();
        let alive = values(&map, 100);
        assert_eq!(map.range(10..60).count(), 50);
        for key in 0..100 {
            map.remove(&key);
        }
        assert!(!collected(&alive));
        // The entries passed but the last are the ones that stay.
        assert_eq!(Arc::strong_count(&alive) - 1, 49);
    }
}
