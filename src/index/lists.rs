//! Candidate generation for exact Jaccard similarity over signature sets with
//! inverted lists, prefix filtering and length filtering (the approach of
//! SpotSigs, Theobald, Siddharth and Paepcke, SIGIR 2008).
//!
//! # Algorithm
//!
//! A signature set is a sorted slice of distinct `u32` hashes. The fixed
//! global order of signatures is ascending hash value, so the *prefix* of a
//! set `x` is its first `p(|x|) = |x| − ceil(τ·|x|) + 1` elements (clamped to
//! `[1, |x|]`). If `J(x, y) >= τ` then `|x ∩ y| >= τ·max(|x|, |y|)`, and the
//! prefix-filtering theorem guarantees that the prefixes of `x` and `y` share
//! at least one signature. Moreover `τ·|x| <= |y| <= |x| / τ` (length filter).
//!
//! So a document is indexed under each signature of its prefix only, together
//! with its set length, and a query scans, for each signature of its own
//! prefix, the documents whose length lies in `[ceil(τ·|q|), floor(|q| / τ)]`.
//! The result is a candidate set that contains every indexed document with
//! `J >= τ`; the caller verifies the exact Jaccard.
//!
//! Floating point: `τ·n` may come out as `7.000000000000001` where the exact
//! value is the integer 7 (τ = 0.28, n = 25), and `n / τ` as
//! `24.999999999999996` where it is 25 (τ = 0.28, n = 7). Rounding is
//! therefore done with a small tolerance ([`EPSILON`]): ceilings are taken of
//! `x − ε` and floors of `x + ε`. This only ever lengthens prefixes and widens
//! the length window (by at most one, and only within ε of an integer), so
//! the guarantee above is kept. Empty sets are neither indexed nor matched.
//!
//! # Key layout (family [`Family::Lists`])
//!
//! ```text
//! key   = signature (u32 BE) ++ set length (u32 BE) ++ doc (u64 BE)      16 bytes
//! value = empty
//! ```

use crate::index::store::{
    check_len, read_u64, Batch, Family, IndexParamError, Store, StoreError, SCAN_PAST,
};

/// Length of a key in [`Family::Lists`].
pub const KEY_LEN: usize = 16;
/// Tolerance used when rounding `τ·n` and `n / τ`.
pub const EPSILON: f64 = 1e-9;

/// `ceil(x)`, treating values within [`EPSILON`] above an integer as that integer.
fn ceil_eps(x: f64) -> f64 {
    (x - EPSILON).ceil()
}

/// `floor(x)`, treating values within [`EPSILON`] below an integer as that integer.
fn floor_eps(x: f64) -> f64 {
    (x + EPSILON).floor()
}

/// Saturating conversion of a non-negative float to a set length.
fn to_len(x: f64) -> u32 {
    // `as` saturates and maps NaN to 0.
    x.max(0.0) as u32
}

/// Saturating conversion of a set size to the key's length field.
fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Inverted lists over the prefixes of signature sets, for Jaccard threshold τ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lists {
    tau: f64,
}

impl Lists {
    /// Lists for Jaccard threshold `tau`, with `0 < tau <= 1`.
    pub fn new(tau: f64) -> Result<Lists, IndexParamError> {
        if tau > 0.0 && tau <= 1.0 {
            Ok(Lists { tau })
        } else {
            Err(IndexParamError(format!(
                "jaccard threshold must be in (0, 1], got {tau}"
            )))
        }
    }

    /// The Jaccard threshold τ.
    pub fn tau(&self) -> f64 {
        self.tau
    }

    /// Prefix length `n − ceil(τ·n) + 1` of a set of `n` signatures, clamped to
    /// `[1, n]`; 0 for an empty set.
    pub fn prefix_len(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let overlap = to_len(ceil_eps(self.tau * n as f64)) as usize;
        (n + 1).saturating_sub(overlap).clamp(1, n)
    }

    /// Inclusive range `[ceil(τ·n), floor(n / τ)]` of set lengths that can
    /// reach Jaccard τ with a set of `n` signatures.
    pub fn length_window(&self, n: usize) -> (u32, u32) {
        let n = n as f64;
        (
            to_len(ceil_eps(self.tau * n)),
            to_len(floor_eps(n / self.tau)),
        )
    }

    /// Encodes the key of (`sig`, `len`, `doc`).
    fn key(sig: u32, len: u32, doc: u64) -> [u8; KEY_LEN] {
        let mut key = [0u8; KEY_LEN];
        key[..4].copy_from_slice(&sig.to_be_bytes());
        key[4..8].copy_from_slice(&len.to_be_bytes());
        key[8..].copy_from_slice(&doc.to_be_bytes());
        key
    }

    /// Queues the keys of document `doc` with signature set `sigs` (sorted,
    /// distinct): one per prefix signature.
    pub fn insert(&self, batch: &mut Batch, sigs: &[u32], doc: u64) {
        debug_assert!(sigs.windows(2).all(|w| w[0] < w[1]), "unsorted signatures");
        let len = len_u32(sigs.len());
        for &sig in &sigs[..self.prefix_len(sigs.len())] {
            batch.put(Family::Lists, &Lists::key(sig, len, doc), &[]);
        }
    }

    /// Queues the deletion of exactly the keys [`Lists::insert`] writes for
    /// (`sigs`, `doc`).
    pub fn remove(&self, batch: &mut Batch, sigs: &[u32], doc: u64) {
        let len = len_u32(sigs.len());
        for &sig in &sigs[..self.prefix_len(sigs.len())] {
            batch.delete(Family::Lists, &Lists::key(sig, len, doc));
        }
    }

    /// Collects the candidate documents for signature set `sigs` (sorted,
    /// distinct): every indexed document with Jaccard >= τ, plus others that
    /// share a prefix signature and pass the length filter.
    ///
    /// `out` is cleared, then receives the candidates sorted, each once.
    pub fn query(
        &self,
        store: &dyn Store,
        sigs: &[u32],
        out: &mut Vec<u64>,
    ) -> Result<(), StoreError> {
        out.clear();
        debug_assert!(sigs.windows(2).all(|w| w[0] < w[1]), "unsorted signatures");
        let (min_len, max_len) = self.length_window(sigs.len());
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8 + SCAN_PAST.len()];
        lo[4..].copy_from_slice(&min_len.to_be_bytes());
        hi[4..8].copy_from_slice(&max_len.to_be_bytes());
        hi[8..].copy_from_slice(&SCAN_PAST);
        let mut err = None;
        for &sig in &sigs[..self.prefix_len(sigs.len())] {
            lo[..4].copy_from_slice(&sig.to_be_bytes());
            hi[..4].copy_from_slice(&sig.to_be_bytes());
            store.scan(Family::Lists, &lo, &hi, &mut |key, _| match check_len(
                key,
                KEY_LEN,
                "lists key",
            )
            .and_then(|()| read_u64(key, 8, "lists key"))
            {
                Ok(doc) => {
                    out.push(doc);
                    true
                }
                Err(e) => {
                    err = Some(e);
                    false
                }
            })?;
            if let Some(e) = err.take() {
                return Err(e);
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::store::{MemoryStore, RocksStore};
    use proptest::prelude::*;

    const TAUS: [f64; 6] = [0.28, 0.3, 0.5, 0.8, 0.9, 1.0];

    fn jaccard(a: &[u32], b: &[u32]) -> f64 {
        let inter = a.iter().filter(|x| b.binary_search(x).is_ok()).count();
        inter as f64 / (a.len() + b.len() - inter) as f64
    }

    fn build(lists: &Lists, store: &dyn Store, sets: &[Vec<u32>]) {
        let mut batch = Batch::default();
        for (doc, set) in sets.iter().enumerate() {
            lists.insert(&mut batch, set, doc as u64);
        }
        store.write(batch).unwrap();
    }

    fn set() -> impl Strategy<Value = Vec<u32>> {
        prop::collection::btree_set(0u32..24, 1..14).prop_map(|s| s.into_iter().collect())
    }

    /// Every doc with Jaccard >= τ is a candidate, and no candidate lies
    /// outside the length window.
    fn check(
        lists: &Lists,
        store: &dyn Store,
        sets: &[Vec<u32>],
        live: &[bool],
        q: &[u32],
        out: &mut Vec<u64>,
    ) -> Result<(), TestCaseError> {
        lists.query(store, q, out).unwrap();
        prop_assert!(out.windows(2).all(|w| w[0] < w[1]));
        let (lo, hi) = lists.length_window(q.len());
        for &doc in out.iter() {
            prop_assert!(live[doc as usize], "removed doc {} returned", doc);
            let len = sets[doc as usize].len() as u32;
            prop_assert!(
                lo <= len && len <= hi,
                "doc {} of length {} outside [{}, {}]",
                doc,
                len,
                lo,
                hi
            );
        }
        for (doc, set) in sets.iter().enumerate() {
            if live[doc] && jaccard(set, q) >= lists.tau() {
                prop_assert!(
                    out.binary_search(&(doc as u64)).is_ok(),
                    "missed doc {} (J = {})",
                    doc,
                    jaccard(set, q)
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn candidates_contain_every_similar_doc(
            tau in 0..TAUS.len(),
            sets in prop::collection::vec(set(), 1..80),
            queries in prop::collection::vec(set(), 1..16),
            removed in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
        ) {
            let lists = Lists::new(TAUS[tau]).unwrap();
            let store = MemoryStore::new();
            build(&lists, &store, &sets);
            let mut live = vec![true; sets.len()];
            let mut out = Vec::new();
            for q in queries.iter().chain(sets.iter().take(8)) {
                check(&lists, &store, &sets, &live, q, &mut out)?;
            }
            // Remove some docs: they disappear, the others are still found.
            let mut batch = Batch::default();
            for ix in &removed {
                let doc = ix.index(sets.len());
                if live[doc] {
                    live[doc] = false;
                    lists.remove(&mut batch, &sets[doc], doc as u64);
                }
            }
            store.write(batch).unwrap();
            for q in queries.iter().chain(sets.iter()) {
                check(&lists, &store, &sets, &live, q, &mut out)?;
            }
        }
    }

    #[test]
    fn rocks_store_finds_similar_docs() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open(dir.path()).unwrap();
        let lists = Lists::new(0.5).unwrap();
        let sets: Vec<Vec<u32>> = (0u32..200)
            .map(|i| {
                (0..20)
                    .map(|j| (i * 7 + j * 13) % 60)
                    .collect::<std::collections::BTreeSet<u32>>()
            })
            .map(|s| s.into_iter().collect())
            .collect();
        build(&lists, &store, &sets);
        let mut out = Vec::new();
        let mut similar = 0;
        for q in &sets {
            lists.query(&store, q, &mut out).unwrap();
            for (doc, set) in sets.iter().enumerate() {
                if jaccard(set, q) >= 0.5 {
                    similar += 1;
                    assert!(out.binary_search(&(doc as u64)).is_ok());
                }
            }
        }
        assert!(similar > sets.len());
    }

    #[test]
    fn remove_after_insert_leaves_family_empty() {
        for tau in TAUS {
            let lists = Lists::new(tau).unwrap();
            let store = MemoryStore::new();
            let sets = vec![vec![1, 2, 3], vec![5], vec![0, 4, 8, 9, 10, 11, 20], vec![]];
            build(&lists, &store, &sets);
            assert!(store.family_stats(Family::Lists).unwrap().keys > 0);
            let mut batch = Batch::default();
            for (doc, set) in sets.iter().enumerate() {
                lists.remove(&mut batch, set, doc as u64);
            }
            store.write(batch).unwrap();
            assert_eq!(
                store.family_stats(Family::Lists).unwrap().keys,
                0,
                "tau={tau}"
            );
        }
    }

    #[test]
    fn prefix_and_window_use_exact_integers() {
        let lists = Lists::new(0.28).unwrap();
        // 0.28 * 25 = 7.000000000000001 in floating point: the prefix is 25 - 7 + 1.
        assert_eq!(lists.prefix_len(25), 19);
        assert_eq!(lists.length_window(25), (7, 89));
        // 7 / 0.28 = 24.999999999999996 in floating point: the window ends at 25.
        assert_eq!(lists.length_window(7), (2, 25));
        let lists = Lists::new(0.3).unwrap();
        assert_eq!(lists.prefix_len(10), 8);
        assert_eq!(lists.length_window(10), (3, 33));
        let lists = Lists::new(0.8).unwrap();
        assert_eq!(lists.prefix_len(5), 2);
        assert_eq!(lists.length_window(4), (4, 5));
        let exact = Lists::new(1.0).unwrap();
        assert_eq!(exact.prefix_len(7), 1);
        assert_eq!(exact.length_window(7), (7, 7));
        assert_eq!(exact.prefix_len(0), 0);
        let tiny = Lists::new(1e-6).unwrap();
        assert_eq!(tiny.prefix_len(3), 3);
    }

    /// Jaccard exactly τ = 0.28 = 7/25, where `τ·25` and `7 / τ` are not exact
    /// in floating point: both the small and the large set must be found.
    #[test]
    fn float_boundaries_keep_exact_matches() {
        let lists = Lists::new(0.28).unwrap();
        let large: Vec<u32> = (0..25).collect();
        let small: Vec<u32> = (18..25).collect();
        assert!((jaccard(&large, &small) - 0.28).abs() < 1e-12);
        let store = MemoryStore::new();
        build(&lists, &store, &[large.clone(), small.clone()]);
        let mut out = Vec::new();
        lists.query(&store, &large, &mut out).unwrap();
        assert_eq!(out, vec![0, 1]);
        lists.query(&store, &small, &mut out).unwrap();
        assert_eq!(out, vec![0, 1]);
    }

    #[test]
    fn empty_sets_match_nothing() {
        let lists = Lists::new(0.5).unwrap();
        let store = MemoryStore::new();
        build(&lists, &store, &[vec![1, 2], vec![]]);
        let mut out = vec![99];
        lists.query(&store, &[], &mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn parameters() {
        assert!(Lists::new(1.0).is_ok());
        assert!(Lists::new(0.01).is_ok());
        assert!(Lists::new(0.0).is_err());
        assert!(Lists::new(-0.5).is_err());
        assert!(Lists::new(1.01).is_err());
        assert!(Lists::new(f64::NAN).is_err());
    }

    #[test]
    fn corrupt_key_is_an_error() {
        let lists = Lists::new(1.0).unwrap();
        let store = MemoryStore::new();
        let mut batch = Batch::default();
        let mut key = Lists::key(5, 1, 0).to_vec();
        key.pop();
        batch.put(Family::Lists, &key, &[]);
        store.write(batch).unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            lists.query(&store, &[5], &mut out),
            Err(StoreError::Corrupt(_))
        ));
    }
}
