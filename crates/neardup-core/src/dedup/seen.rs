//! The ids a shard has read: every page of the stream, the pages it owns and the others, so
//! that every shard judges a repeated id alike ([`super::sharded::Judged::Repeated`]).
//!
//! Every shard reads every id, so what an id costs a shard bounds how far a sharded decider
//! grows: a set of the ids' 128-bit hashes in memory took 19–39 bytes an id (17 bytes a
//! slot, slots seven sixteenths to seven eighths full; 39 measured across a doubling), up
//! to 39 GB a shard at a billion pages, more than the pages a shard owns. So the hashes are kept on disk, in the
//! `stage` family of the shard's index (the hash as 16 big-endian bytes, an empty value;
//! [index layout](../../../docs/index-layout.md)), and in memory only a set of 32-bit
//! fingerprints ([`IdSet`], 4 bytes a slot, at most three quarters full) that says in one or
//! two cache lines that an id was never read. Only an id whose fingerprint is there (a
//! repeat, or one new id in 2^32 / ids read) reads the store. The set is an exact answer
//! either way: the store decides every "maybe".
//!
//! The ids read wait in memory and are written [`WRITE_EVERY`] at a time, in key order, and
//! all of them before the index is copied (a checkpoint) or saved (a clean stop): the index
//! then holds every id read, and the shard's state file written with it their count. A
//! shard refuses an index whose count differs; an index left without a state file (a kill)
//! is never taken up, so the ids not yet written are never missed.

use rustc_hash::FxHashSet;

use crate::index::ids::IdSet;
use crate::index::store::{Batch, Column};
use crate::index::{Index, IndexError};

/// The ids read, by their 128-bit hashes.
#[derive(Debug, Default)]
pub(crate) struct SeenIds {
    fingerprints: IdSet,
    len: u64,
    /// The ids read since the last write: written together, in key order, every
    /// [`WRITE_EVERY`] ids and before the index is copied ([`SeenIds::write`]).
    unwritten: FxHashSet<u128>,
}

/// Past every 16-byte key of the family.
const END: [u8; 17] = [0xff; 17];

/// Ids read are written to the store this many at a time, in key order: one write of many
/// keys, inserted in order, costs a fraction of a write each (2M ids on one core, the
/// store's compactions included: 4.9 µs an id written one at a time, 2.2 µs 4,096 at a
/// time, 1.5–1.6 µs 65,536 at a time). They wait in a set of 16-byte hashes (about 2 MiB).
pub(super) const WRITE_EVERY: usize = 65536;

impl SeenIds {
    /// The ids read that `index` holds (none in a new index), in a set sized for `expected`
    /// of them (a resumed shard's count: the set is not doubled again and again as they are
    /// read back).
    pub(crate) fn open(index: &Index, expected: u64) -> Result<SeenIds, IndexError> {
        let mut seen = SeenIds {
            fingerprints: IdSet::with_capacity(usize::try_from(expected).unwrap_or(0)),
            ..SeenIds::default()
        };
        index.store().scan(Column::Stage, &[], &END, &mut |k, _| {
            seen.fingerprints.insert(k);
            seen.len += 1;
            true
        })?;
        Ok(seen)
    }

    /// How many ids were read.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Whether the id of hash `h` was read.
    pub(crate) fn contains(&self, index: &Index, h: u128) -> Result<bool, IndexError> {
        let key = h.to_be_bytes();
        if !self.fingerprints.may_contain(&key) {
            return Ok(false);
        }
        Ok(self.unwritten.contains(&h) || index.store().get(Column::Stage, &key)?.is_some())
    }

    /// Records the id of hash `h` as read; false when it was read before (nothing recorded).
    pub(crate) fn insert(&mut self, index: &Index, h: u128) -> Result<bool, IndexError> {
        if self.contains(index, h)? {
            return Ok(false);
        }
        let key = h.to_be_bytes();
        self.fingerprints.insert(&key);
        self.len += 1;
        self.unwritten.insert(h);
        if self.unwritten.len() >= WRITE_EVERY {
            self.write(index)?;
        }
        Ok(true)
    }

    /// Writes the ids read since the last write to the store (before the index is copied or
    /// saved: the store then holds every id read).
    pub(crate) fn write(&mut self, index: &Index) -> Result<(), IndexError> {
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let mut keys: Vec<u128> = self.unwritten.iter().copied().collect();
        keys.sort_unstable();
        let mut b = Batch::with_capacity(16 * keys.len(), keys.len());
        for h in keys {
            b.put(Column::Stage, &h.to_be_bytes(), &[]);
        }
        index.store().write_buffered(b)?;
        self.unwritten.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexParams;

    /// Every id inserted is read back as read, in the index reopened too, and no other id is
    /// (those whose fingerprints are taken are answered by the store).
    #[test]
    fn ids_read_are_kept_on_disk_and_no_other_is_taken_for_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = IndexParams::default();
        let hash = |i: u64| u128::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
        let n = 50_000;
        {
            let index = Index::open_dir(dir.path(), p.clone()).unwrap();
            let mut seen = SeenIds::open(&index, 0).unwrap();
            assert_eq!(seen.len(), 0);
            for i in 0..n {
                assert!(seen.insert(&index, hash(i)).unwrap());
                assert!(!seen.insert(&index, hash(i / 2)).unwrap());
            }
            assert_eq!(seen.len(), n);
            seen.write(&index).unwrap();
            index.flush().unwrap();
        }
        let index = Index::open_dir(dir.path(), p).unwrap();
        let seen = SeenIds::open(&index, 0).unwrap();
        assert_eq!(seen.len(), n);
        for i in 0..n {
            assert!(seen.contains(&index, hash(i)).unwrap(), "{i}");
            assert!(!seen.contains(&index, hash(n + i)).unwrap(), "{}", n + i);
        }
    }
}
