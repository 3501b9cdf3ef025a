//! The decisions an aggregator made, by id, so that a repeated id gets its earlier decision
//! again ([`super::sharded::Aggregator::repeated`]).
//!
//! The aggregator decides every page of the stream, so what a decision costs it bounds how
//! far a sharded decider grows: kept by the 128-bit hash of the id in a map in memory, a
//! decision took about 40 bytes (a duplicate's canonical id and URL more), 40 GB at a billion
//! pages, in memory and written whole into every checkpoint. Only a repeat reads a decision
//! back, and the shards say which page is one, so the decisions are kept on disk only
//! (in memory none but those waiting to be written): in a store of their own in the
//! aggregator's directory, the `stage` family holding each decision under its id's hash
//! (16 big-endian bytes) and the `meta` family the store's stamp and the count of decisions
//! written ([index layout](../../../docs/index-layout.md), "The aggregator's decisions").
//!
//! Decisions wait in memory and are written [`WRITE_EVERY`] at a time, in key order, the
//! count of decisions written in the same write; [`Decided::sync`] writes them all and
//! makes the store durable, before the aggregator's state file is written. The state file
//! names the store's stamp and count, and the aggregator takes a state up only with the
//! store it names holding at least as many decisions.
//!
//! **Why a store ahead of its state file is taken up.** The aggregator goes on writing
//! decisions after a state file, and a kill leaves the store with decisions of pages past
//! the file's position. The next start decides those pages again, in the same order from
//! the same votes, and so decides each as before: an id's decision is the one of its first
//! page (a repeat is answered, never stored again), and a decision already there is
//! written again unchanged. No decision is ever removed. The one page whose decision could
//! differ is a repeat with no decision kept (its first page's decision lost, which a store
//! ahead of its state never is): decided unique, its position is marked unique, where
//! after a restart the store would answer it; no vote ever names it, since a shard stores
//! no repeat, so no later decision reads that mark.

use std::hash::BuildHasher;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::index::store::{Batch, Column, MemoryStore, RocksStore, Store, StoreError};
use crate::index::{Decision, DecisionKind, Found};

/// A decision kept, by kind (a duplicate's canonical page boxed: most are unique).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kept {
    Unique,
    Skipped,
    Duplicate(Box<Decision>),
}

impl Kept {
    /// How a decision is kept.
    pub(crate) fn of(d: Decision) -> Kept {
        match d.kind {
            DecisionKind::Unique => Kept::Unique,
            DecisionKind::Skipped => Kept::Skipped,
            DecisionKind::Duplicate => Kept::Duplicate(Box::new(d)),
        }
    }

    /// The decision kept.
    pub(crate) fn decision(&self) -> Decision {
        match self {
            Kept::Duplicate(d) => (**d).clone(),
            _ => self.plain(),
        }
    }

    /// The decision kept, taken out (a decision read back from the store: no copy of a
    /// duplicate's ids and URL).
    pub(crate) fn into_decision(self) -> Decision {
        match self {
            Kept::Duplicate(d) => *d,
            _ => self.plain(),
        }
    }

    fn plain(&self) -> Decision {
        match self {
            Kept::Skipped => Decision::plain(DecisionKind::Skipped),
            _ => Decision::plain(DecisionKind::Unique),
        }
    }

    /// The stored value, little-endian: the kind u8 (0 unique, 1 duplicate, 2 skipped) and
    /// for a duplicate the index that found it u8 (0 none, 1 alg.G, 2 alg.H, 3 SpotSigs,
    /// 4 sentences), flags u8 (bit 0 a similarity, bit 1 a Hamming distance), the canonical
    /// id and URL (each u32 length and bytes), the similarity f64 and the Hamming distance
    /// u32 when flagged.
    fn encode(&self, out: &mut Vec<u8>) {
        let d = match self {
            Kept::Unique => return out.push(0),
            Kept::Skipped => return out.push(2),
            Kept::Duplicate(d) => d,
        };
        let flags = u8::from(d.similarity.is_some()) | u8::from(d.hamming.is_some()) << 1;
        out.extend_from_slice(&[1, Found::code(d.found_by), flags]);
        for s in [&d.canonical_id, &d.canonical_url] {
            let s = s.as_deref().unwrap_or("");
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        if let Some(sim) = d.similarity {
            out.extend_from_slice(&sim.to_le_bytes());
        }
        if let Some(h) = d.hamming {
            out.extend_from_slice(&h.to_le_bytes());
        }
    }

    /// The decision a stored value holds ([`Kept::encode`]), or what is wrong with it.
    fn decode(mut v: &[u8]) -> Result<Kept, String> {
        fn take<'a>(v: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
            if v.len() < n {
                return Err("a decision cut short".into());
            }
            let (head, tail) = v.split_at(n);
            *v = tail;
            Ok(head)
        }
        fn string(v: &mut &[u8]) -> Result<Option<String>, String> {
            let len = u32::from_le_bytes(take(v, 4)?.try_into().expect("4 bytes")) as usize;
            let s = std::str::from_utf8(take(v, len)?).map_err(|_| "a name not in UTF-8")?;
            Ok(Some(s.to_owned()).filter(|s| !s.is_empty()))
        }
        let kept = match take(&mut v, 1)?[0] {
            0 => Kept::Unique,
            2 => Kept::Skipped,
            1 => {
                let head = take(&mut v, 2)?;
                let found_by = Found::of_code(head[0])
                    .map_err(|f| format!("a decision found by index {f}"))?;
                let flags = head[1];
                let canonical_id = string(&mut v)?;
                let canonical_url = string(&mut v)?;
                let similarity = (flags & 1 != 0)
                    .then(|| take(&mut v, 8).map(|b| f64::from_le_bytes(b.try_into().unwrap())))
                    .transpose()?;
                let hamming = (flags & 2 != 0)
                    .then(|| take(&mut v, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap())))
                    .transpose()?;
                Kept::Duplicate(Box::new(Decision {
                    kind: DecisionKind::Duplicate,
                    canonical_id,
                    canonical_url,
                    similarity,
                    hamming,
                    found_by,
                }))
            }
            k => return Err(format!("a decision of kind {k}")),
        };
        if !v.is_empty() {
            return Err("a decision with bytes after it".into());
        }
        Ok(kept)
    }
}

/// Decisions are written to the store this many at a time, in key order, as a shard's ids
/// read are (the cost measured there: a fraction of one write each). They wait in a map of
/// at most this many, a few MiB.
use super::seen::WRITE_EVERY;

/// `meta` key of the store's stamp (u128, little-endian): drawn when the store is made.
const STAMP_KEY: &[u8] = b"decided.stamp";
/// `meta` key of the count of decisions written (u64, little-endian), in every write.
const WRITTEN_KEY: &[u8] = b"decided.written";

/// The aggregator's decisions by the 128-bit hash of their ids: on disk, but for those not
/// written yet.
pub(crate) struct Decided {
    store: Box<dyn Store>,
    stamp: u128,
    /// Decisions written to the store (a decision written again after a restart counts again).
    written: u64,
    /// The decisions made since the last write.
    unwritten: FxHashMap<u128, Kept>,
}

impl std::fmt::Debug for Decided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decided")
            .field("stamp", &self.stamp)
            .field("written", &self.written)
            .field("unwritten", &self.unwritten.len())
            .finish_non_exhaustive()
    }
}

/// A random u64: a value hashed under the standard library's random hash keys, which each
/// thread draws from the operating system once and steps for every later draw (so two
/// draws differ, and no other process draws the same).
pub(super) fn random_u64() -> u64 {
    std::hash::RandomState::new().hash_one(0x6b65_7973u64)
}

/// A stamp no other store has: two random halves.
fn new_stamp() -> u128 {
    u128::from(random_u64()) << 64 | u128::from(random_u64())
}

impl Decided {
    /// Decisions kept in memory only (for a simulation or a test).
    pub(crate) fn memory() -> Decided {
        Decided {
            store: Box::new(MemoryStore::new()),
            stamp: new_stamp(),
            written: 0,
            unwritten: FxHashMap::default(),
        }
    }

    /// A new, empty store at `dir`, in place of whatever the directory held: refused while
    /// another process has the store there open.
    pub(crate) fn create(dir: &Path) -> Result<Decided, StoreError> {
        if dir.exists() {
            RocksStore::destroy(dir)?;
        }
        let store = RocksStore::open(dir)?;
        let stamp = new_stamp();
        let mut b = Batch::new();
        b.put(Column::Meta, STAMP_KEY, &stamp.to_le_bytes());
        b.put(Column::Meta, WRITTEN_KEY, &0u64.to_le_bytes());
        store.write(b)?;
        Ok(Decided {
            store: Box::new(store),
            stamp,
            written: 0,
            unwritten: FxHashMap::default(),
        })
    }

    /// The store at `dir`, as [`Decided::create`] made it and later writes left it.
    pub(crate) fn open(dir: &Path) -> Result<Decided, StoreError> {
        if !dir.join("CURRENT").exists() {
            return Err(StoreError::Corrupt(format!(
                "no store of decisions at {}",
                dir.display()
            )));
        }
        let store = RocksStore::open(dir)?;
        let read = |key: &[u8]| -> Result<Vec<u8>, StoreError> {
            store.get(Column::Meta, key)?.ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "the store of decisions at {} has no {}",
                    dir.display(),
                    String::from_utf8_lossy(key)
                ))
            })
        };
        let bad =
            |what: &str| StoreError::Corrupt(format!("a damaged {what} in {}", dir.display()));
        let stamp = u128::from_le_bytes(read(STAMP_KEY)?.try_into().map_err(|_| bad("stamp"))?);
        let written = u64::from_le_bytes(read(WRITTEN_KEY)?.try_into().map_err(|_| bad("count"))?);
        Ok(Decided {
            store: Box::new(store),
            stamp,
            written,
            unwritten: FxHashMap::default(),
        })
    }

    /// The store's stamp (a state file names it).
    pub(crate) fn stamp(&self) -> u128 {
        self.stamp
    }

    /// Decisions made so far: written, and waiting to be (a decision made again after a
    /// restart counts again).
    pub(crate) fn len(&self) -> u64 {
        self.written + self.unwritten.len() as u64
    }

    /// The decision kept for the id of hash `h`.
    pub(crate) fn get(&self, h: u128) -> Result<Option<Decision>, StoreError> {
        if let Some(k) = self.unwritten.get(&h) {
            return Ok(Some(k.decision()));
        }
        match self.store.get(Column::Stage, &h.to_be_bytes())? {
            None => Ok(None),
            Some(v) => Kept::decode(&v)
                .map(|k| Some(k.into_decision()))
                .map_err(|e| StoreError::Corrupt(format!("the decision of id hash {h:032x}: {e}"))),
        }
    }

    /// Keeps `kept` as the decision of the id of hash `h`.
    pub(crate) fn insert(&mut self, h: u128, kept: Kept) -> Result<(), StoreError> {
        self.unwritten.insert(h, kept);
        if self.unwritten.len() >= WRITE_EVERY {
            self.write()?;
        }
        Ok(())
    }

    /// Writes the decisions made since the last write, in key order, with their count;
    /// they stay in memory until the store took them, so a write that fails loses none.
    fn write(&mut self) -> Result<(), StoreError> {
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let mut keys: Vec<(&u128, &Kept)> = self.unwritten.iter().collect();
        keys.sort_unstable_by_key(|(h, _)| **h);
        let written = self.written + keys.len() as u64;
        let mut b = Batch::with_capacity(20 * keys.len() + 32, keys.len() + 1);
        let mut value = Vec::with_capacity(64);
        for (h, kept) in keys {
            value.clear();
            kept.encode(&mut value);
            b.put(Column::Stage, &h.to_be_bytes(), &value);
        }
        b.put(Column::Meta, WRITTEN_KEY, &written.to_le_bytes());
        self.store.write_buffered(b)?;
        self.unwritten.clear();
        self.written = written;
        Ok(())
    }

    /// Writes every decision made and makes the store durable (before a state file that
    /// names its count is written).
    pub(crate) fn sync(&mut self) -> Result<(), StoreError> {
        self.write()?;
        self.store.flush()
    }

    /// Whether this store can be taken up with a state file that names `stamp` and `written`
    /// decisions: the same store, holding at least every decision the state counts.
    pub(crate) fn refuses(&self, stamp: u128, written: u64) -> Option<String> {
        if stamp != self.stamp {
            return Some("is of another store of decisions (its stamp differs)".into());
        }
        if self.written < written {
            return Some(format!(
                "counts {written} decisions and the store holds {}",
                self.written
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dup(i: u64) -> Kept {
        Kept::Duplicate(Box::new(Decision {
            kind: DecisionKind::Duplicate,
            canonical_id: Some(format!("page-{i}")),
            canonical_url: (i % 3 != 0).then(|| format!("https://h.test/{i}")),
            similarity: (i % 2 == 0).then_some(0.5 + i as f64 / 1e6),
            hamming: (i % 5 == 0).then_some(i as u32 % 64),
            found_by: Found::of_code((i % 5) as u8).unwrap(),
        }))
    }

    fn kept(i: u64) -> Kept {
        match i % 4 {
            0 => Kept::Unique,
            1 => Kept::Skipped,
            _ => dup(i),
        }
    }

    fn hash(i: u64) -> u128 {
        u128::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
    }

    /// Every decision kept is read back as it was, before and after it is written and in the
    /// store reopened; no other id has one; a damaged value is refused with the reason.
    #[test]
    fn decisions_are_kept_on_disk_and_read_back_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("decisions");
        let n = 3 * WRITE_EVERY as u64 / 2;
        let stamp = {
            let mut d = Decided::create(&at).unwrap();
            for i in 0..n {
                d.insert(hash(i), kept(i)).unwrap();
                if i % 1000 == 0 {
                    assert_eq!(d.get(hash(i)).unwrap(), Some(kept(i).decision()));
                }
            }
            assert_eq!(d.len(), n);
            assert_eq!(d.get(hash(n + 1)).unwrap(), None);
            d.sync().unwrap();
            d.stamp()
        };
        let d = Decided::open(&at).unwrap();
        assert_eq!((d.stamp(), d.len()), (stamp, n));
        for i in 0..n {
            assert_eq!(d.get(hash(i)).unwrap(), Some(kept(i).decision()), "{i}");
            assert_eq!(d.get(hash(n + i)).unwrap(), None, "{}", n + i);
        }
        assert_eq!(d.refuses(stamp, n), None);
        assert!(d.refuses(stamp, n + 1).is_some(), "a state counting more");
        assert!(d.refuses(stamp ^ 1, n).is_some(), "another store");
        // not made again while it is open (here, or in another process)
        assert!(Decided::create(&at).is_err());
        assert_eq!(d.get(hash(5)).unwrap(), Some(kept(5).decision()));
        drop(d);
        // made again: empty, another stamp
        let d = Decided::create(&at).unwrap();
        assert_ne!(d.stamp(), stamp);
        assert_eq!((d.len(), d.get(hash(2)).unwrap()), (0, None));
        let mut v = Vec::new();
        dup(6).encode(&mut v);
        assert_eq!(Kept::decode(&v), Ok(dup(6)));
        for cut in [1, 3, v.len() - 1] {
            assert!(Kept::decode(&v[..cut]).is_err(), "cut at {cut}");
        }
        assert!(Kept::decode(&[7]).is_err());
        assert!(Kept::decode(&[0, 0]).is_err());
        assert!(Decided::open(&dir.path().join("none")).is_err());
        // a directory that cannot be made is an error, not a store in memory
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        assert!(Decided::create(&file.join("decisions")).is_err());
    }
}
