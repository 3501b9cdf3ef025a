//! The ids of the stored documents, in memory: a set of 32-bit fingerprints that says in
//! one or two cache lines that a page's id was **never** stored, so that deciding a new
//! page does not ask RocksDB (whose answer for a missing key probes the filters of several
//! files, a tenth of a decision at 10M documents).
//!
//! The set only ever answers "not stored" or "maybe": a fingerprint present (the id's own,
//! or another id's with the same 32 bits, about one new page in 400 at 10M documents) sends
//! the lookup to RocksDB as before, so a decision never depends on it. It must therefore
//! hold the fingerprint of every id the index stores: it is filled from the `ids` family
//! when the index opens and on every [`super::Index::put`]. Removed documents keep their
//! fingerprints until the set is filled again (a lookup of such an id goes to RocksDB,
//! which says it is gone): at the next open, or once the fingerprints number more than
//! twice the ids stored, so that a window or a cap, which removes pages for as long as the
//! process runs, keeps the set the size of the pages it keeps.
//!
//! Open addressing with linear probing over `u32` slots (0 is empty), at most three
//! quarters full; the slot is taken from the fingerprint, so doubling re-places the
//! fingerprints without the ids. Four bytes a slot: 64 MiB at 10M documents.

use std::hash::Hasher;

/// Fingerprints of the stored ids.
#[derive(Debug, Default)]
pub struct IdSet {
    slots: Vec<u32>,
    len: usize,
    /// `64 - log2(slots.len())`.
    shift: u32,
}

/// The 32-bit fingerprint of an id (never 0, the empty slot).
fn fingerprint(id: &[u8]) -> u32 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(id);
    let h = h.finish();
    let fp = (h >> 32) as u32 ^ h as u32;
    if fp == 0 {
        1
    } else {
        fp
    }
}

impl IdSet {
    /// An empty set sized for `n` ids.
    pub(crate) fn with_capacity(n: usize) -> IdSet {
        let mut s = IdSet::default();
        // at most three quarters full once `n` are in
        s.rebuild((n.max(1) * 4 / 3 + 1).next_power_of_two());
        s
    }

    /// Re-places the fingerprints in a table of `cap` slots (a power of two).
    fn rebuild(&mut self, cap: usize) {
        let cap = cap.max(64);
        let old = std::mem::replace(&mut self.slots, vec![0; cap]);
        self.shift = 64 - cap.trailing_zeros();
        self.len = 0;
        for fp in old.into_iter().filter(|&f| f != 0) {
            self.place(fp);
        }
    }

    fn slot(&self, fp: u32) -> usize {
        ((fp as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Places a fingerprint not yet in the set.
    fn place(&mut self, fp: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.slot(fp);
        while self.slots[i] != 0 {
            if self.slots[i] == fp {
                return;
            }
            i = (i + 1) & mask;
        }
        self.slots[i] = fp;
        self.len += 1;
    }

    /// Adds an id.
    pub fn insert(&mut self, id: &[u8]) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild(self.slots.len() * 2);
        }
        self.place(fingerprint(id));
    }

    /// False when the id was never inserted; true when it was, or when another id with the
    /// same fingerprint was.
    pub fn may_contain(&self, id: &[u8]) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let fp = fingerprint(id);
        let mask = self.slots.len() - 1;
        let mut i = self.slot(fp);
        loop {
            match self.slots[i] {
                0 => return false,
                f if f == fp => return true,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Distinct fingerprints held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of its table.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.slots.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_inserted_is_found_across_doublings_and_most_others_are_not() {
        let mut s = IdSet::default();
        assert!(!s.may_contain(b"a"));
        let n = 200_000;
        for i in 0..n {
            s.insert(format!("doc-{i}").as_bytes());
            // the one just inserted and one far back are found after every insert
            assert!(s.may_contain(format!("doc-{i}").as_bytes()));
            assert!(s.may_contain(format!("doc-{}", i / 2).as_bytes()));
        }
        for i in 0..n {
            assert!(s.may_contain(format!("doc-{i}").as_bytes()), "doc-{i}");
        }
        assert!(s.len() <= n && s.len() > n - 50, "{}", s.len());
        assert!(
            s.len() * 4 <= s.bytes() / 4 * 3,
            "at most three quarters full"
        );
        // it doubles when full, so it is never less than three eighths full
        assert!(
            s.len() * 8 >= s.bytes() / 4 * 3,
            "{} in {} B",
            s.len(),
            s.bytes()
        );
        // ids never inserted: only a stored id with the same fingerprint says maybe, about
        // n / 2^32 of them each (9.3 expected here; 40 is far in the tail)
        let maybe = (n..2 * n)
            .filter(|i| s.may_contain(format!("doc-{i}").as_bytes()))
            .count();
        assert!(maybe < 40, "{maybe} of {n} absent ids said maybe");
    }

    #[test]
    fn inserting_an_id_twice_holds_it_once() {
        let mut s = IdSet::with_capacity(10);
        s.insert(b"x");
        s.insert(b"x");
        assert_eq!(s.len(), 1);
        assert!(s.may_contain(b"x"));
        assert_ne!(fingerprint(b"y"), fingerprint(b"x"));
        assert!(!s.may_contain(b"y"));
    }

    #[test]
    fn a_table_sized_for_one_grows_as_ids_come() {
        let mut s = IdSet::with_capacity(1);
        let ids: Vec<String> = (0..40).map(|i| format!("{i}")).collect();
        for id in &ids {
            s.insert(id.as_bytes());
        }
        for id in &ids {
            assert!(s.may_contain(id.as_bytes()));
        }
        assert!(s.len() * 4 <= s.bytes() / 4 * 3);
    }
}
