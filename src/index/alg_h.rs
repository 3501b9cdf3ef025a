//! Hamming-distance search over 64-, 128- or 256-bit fingerprints with a
//! merged group index (after Yuan et al., multi-index Hamming search with the
//! per-group tables merged into one key space), called alg.H here.
//!
//! # Algorithm
//!
//! A `k`-bit fingerprint (bit 0 is the most significant bit of word 0; bit `i`
//! is bit `i % 64`, counted from the top, of word `i / 64`) is cut into `m`
//! contiguous groups of `w = ceil(k / m)` bits; group `i` covers bits
//! `[i·w, min((i+1)·w, k))`, so only the last group may be narrower. Two
//! fingerprints within Hamming distance `rh` differ in at most `rh` groups, so
//! they agree exactly on at least `m − rh` groups (pigeonhole).
//!
//! Instead of one table per group, all groups share one key space: group `i`
//! with value `A_i` gets the integer `y_i = i · 2^w + A_i`, which is unique
//! across groups because `A_i < 2^w`. A query reads the `m` exact keys `y_i`
//! of its own fingerprint, counts for every document how many groups matched,
//! keeps the documents that matched at least `m − rh` groups and finally checks
//! the full Hamming distance against the stored fingerprint (the count is only
//! a cheap filter; the distance check decides).
//!
//! # Key layout (family [`Family::AlgH`])
//!
//! ```text
//! key   = y_i (u64 BE) ++ doc (u64 BE)                                   16 bytes
//! value = fingerprint words, each u64 BE, word 0 first                   k/8 bytes
//! ```
//!
//! `y_i < 64 · 2^32`, so it always fits the 8-byte field.

use crate::index::store::{
    check_len, read_u64, Batch, Family, IndexParamError, Store, StoreError, SCAN_PAST,
};

/// Length of a key in [`Family::AlgH`].
pub const KEY_LEN: usize = 16;
/// Widest supported group, in bits.
pub const MAX_GROUP_BITS: u32 = 32;
/// Largest supported number of groups.
pub const MAX_M: u32 = 64;

/// Hamming distance between two fingerprints of the same width.
pub fn hamming_words(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// The `width` (1..=64) bits of `fp` starting at bit `start` (bits numbered
/// from the top of word 0), as an integer. Bits past the end read as zero.
fn extract_bits(fp: &[u64], start: u32, width: u32) -> u64 {
    let word = (start / 64) as usize;
    let off = start % 64;
    let hi = u128::from(fp.get(word).copied().unwrap_or(0));
    let lo = u128::from(fp.get(word + 1).copied().unwrap_or(0));
    let two = (hi << 64) | lo;
    ((two << off) >> (128 - width)) as u64
}

/// True when `m` groups of `ceil(k / m)` bits cover `k` bits with no empty
/// group and no group wider than [`MAX_GROUP_BITS`].
fn valid_m(k: u32, m: u32) -> bool {
    if m == 0 || m > MAX_M || m > k {
        return false;
    }
    let w = k.div_ceil(m);
    w <= MAX_GROUP_BITS && (m - 1) * w < k
}

/// The merged group index for `k`-bit fingerprints.
#[derive(Debug, Clone)]
pub struct AlgH {
    k: u32,
    m: u32,
    rh: u32,
    w: u32,
}

impl AlgH {
    /// Builds the group layout for `k`-bit fingerprints, `m` groups and
    /// Hamming radius `rh`.
    ///
    /// Valid for `k` in {64, 128, 256}, `1 <= m <= 64`, `rh < m`, a group
    /// width `ceil(k / m)` of at most 32 bits, and no empty group.
    pub fn new(k: u32, m: u32, rh: u32) -> Result<AlgH, IndexParamError> {
        if !matches!(k, 64 | 128 | 256) {
            return Err(IndexParamError(format!(
                "alg.H supports 64, 128 or 256-bit fingerprints, got {k}"
            )));
        }
        if m == 0 || m > MAX_M {
            return Err(IndexParamError(format!(
                "alg.H needs 1 <= m <= {MAX_M} groups, got {m}"
            )));
        }
        if rh >= m {
            return Err(IndexParamError(format!(
                "alg.H needs a hamming radius below the number of groups, got rh={rh} with m={m}"
            )));
        }
        let w = k.div_ceil(m);
        if w > MAX_GROUP_BITS {
            return Err(IndexParamError(format!(
                "alg.H groups are at most {MAX_GROUP_BITS} bits wide, so {k}-bit fingerprints need m >= {}, got {m}",
                k.div_ceil(MAX_GROUP_BITS)
            )));
        }
        if !valid_m(k, m) {
            return Err(IndexParamError(format!(
                "alg.H with m={m} groups of {w} bits would leave an empty group for {k}-bit fingerprints"
            )));
        }
        Ok(AlgH { k, m, rh, w })
    }

    /// A sensible number of groups for `k`-bit fingerprints and radius `rh`.
    ///
    /// For `rh = 0` the fewest groups allowed, `ceil(k / 32)` (every group
    /// must match anyway). Otherwise `rh + 3` like alg.G, so that at least
    /// three groups must match exactly, but at least `ceil(k / 32)`. The value
    /// is then raised to the next `m` that leaves no empty group (for k = 64,
    /// 9 becomes 10) and capped at 64. The result is valid for [`AlgH::new`]
    /// whenever `k` is supported and `rh < 64`.
    pub fn default_m(k: u32, rh: u32) -> u32 {
        let min = k.div_ceil(MAX_GROUP_BITS).max(1);
        let mut m = if rh == 0 {
            min
        } else {
            rh.saturating_add(3).max(min)
        };
        while m < MAX_M && !valid_m(k, m) {
            m += 1;
        }
        m.min(MAX_M)
    }

    /// Fingerprint width in bits.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Number of groups.
    pub fn m(&self) -> u32 {
        self.m
    }

    /// Hamming radius.
    pub fn rh(&self) -> u32 {
        self.rh
    }

    /// Group width in bits (the last group may be narrower).
    pub fn group_bits(&self) -> u32 {
        self.w
    }

    /// Number of 64-bit words of a fingerprint.
    pub fn words(&self) -> usize {
        (self.k / 64) as usize
    }

    fn check_fp(&self, fp: &[u64]) -> Result<(), StoreError> {
        if fp.len() == self.words() {
            Ok(())
        } else {
            Err(StoreError::FingerprintWidth {
                expected: self.words(),
                got: fp.len(),
            })
        }
    }

    /// The merged key `y_i = i · 2^w + A_i` of group `i` of `fp`.
    fn group_key(&self, i: u32, fp: &[u64]) -> u64 {
        let start = i * self.w;
        let width = self.w.min(self.k - start);
        (u64::from(i) << self.w) + extract_bits(fp, start, width)
    }

    /// Queues the `m` keys of document `doc` with fingerprint `fp`
    /// (`k / 64` words).
    pub fn insert(&self, batch: &mut Batch, fp: &[u64], doc: u64) -> Result<(), StoreError> {
        self.check_fp(fp)?;
        let mut value = [0u8; 32];
        for (chunk, word) in value.chunks_exact_mut(8).zip(fp) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        let value = &value[..fp.len() * 8];
        let mut key = [0u8; KEY_LEN];
        key[8..].copy_from_slice(&doc.to_be_bytes());
        for i in 0..self.m {
            key[..8].copy_from_slice(&self.group_key(i, fp).to_be_bytes());
            batch.put(Family::AlgH, &key, value);
        }
        Ok(())
    }

    /// Queues the deletion of exactly the keys [`AlgH::insert`] writes for
    /// (`fp`, `doc`).
    pub fn remove(&self, batch: &mut Batch, fp: &[u64], doc: u64) -> Result<(), StoreError> {
        self.check_fp(fp)?;
        let mut key = [0u8; KEY_LEN];
        key[8..].copy_from_slice(&doc.to_be_bytes());
        for i in 0..self.m {
            key[..8].copy_from_slice(&self.group_key(i, fp).to_be_bytes());
            batch.delete(Family::AlgH, &key);
        }
        Ok(())
    }

    /// Finds every indexed document whose fingerprint is within Hamming
    /// distance `rh` of `fp` (`k / 64` words).
    ///
    /// `out` is cleared, then receives `(doc, distance)` pairs sorted by doc,
    /// each doc once.
    pub fn query(
        &self,
        store: &dyn Store,
        fp: &[u64],
        out: &mut Vec<(u64, u32)>,
    ) -> Result<(), StoreError> {
        out.clear();
        self.check_fp(fp)?;
        let value_len = self.words() * 8;
        // (doc, distance) of every group hit; a doc appears once per matching group.
        let mut hits: Vec<(u64, u32)> = Vec::new();
        let mut err = None;
        let mut hi = [0u8; 8 + SCAN_PAST.len()];
        hi[8..].copy_from_slice(&SCAN_PAST);
        for i in 0..self.m {
            let y = self.group_key(i, fp).to_be_bytes();
            hi[..8].copy_from_slice(&y);
            store.scan(Family::AlgH, &y, &hi, &mut |key, value| {
                let hit = check_len(key, KEY_LEN, "alg.H key")
                    .and_then(|()| check_len(value, value_len, "alg.H value"))
                    .and_then(|()| {
                        let doc = read_u64(key, 8, "alg.H key")?;
                        let mut d = 0;
                        for (j, word) in fp.iter().enumerate() {
                            d += (read_u64(value, j * 8, "alg.H value")? ^ word).count_ones();
                        }
                        Ok((doc, d))
                    });
                match hit {
                    Ok(h) => {
                        hits.push(h);
                        true
                    }
                    Err(e) => {
                        err = Some(e);
                        false
                    }
                }
            })?;
            if let Some(e) = err.take() {
                return Err(e);
            }
        }
        hits.sort_unstable();
        let need = (self.m - self.rh) as usize;
        for run in hits.chunk_by(|a, b| a.0 == b.0) {
            let (doc, d) = run[0];
            if run.len() >= need && d <= self.rh {
                out.push((doc, d));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::store::{MemoryStore, RocksStore};
    use proptest::prelude::*;

    /// Valid (k, m, rh) triples exercised by the property tests.
    const PARAMS: [(u32, u32, u32); 13] = [
        (64, 2, 0),
        (64, 2, 1),
        (64, 3, 2),
        (64, 4, 3),
        (64, 6, 3),
        (64, 7, 5),
        (64, 10, 6),
        (128, 4, 0),
        (128, 4, 3),
        (128, 8, 5),
        (128, 16, 10),
        (256, 8, 3),
        (256, 12, 8),
    ];

    fn brute_force(fps: &[Vec<u64>], q: &[u64], rh: u32) -> Vec<(u64, u32)> {
        fps.iter()
            .enumerate()
            .map(|(doc, fp)| (doc as u64, hamming_words(fp, q)))
            .filter(|&(_, d)| d <= rh)
            .collect()
    }

    fn flip(base: &[u64], bits: &[u32]) -> Vec<u64> {
        let mut fp = base.to_vec();
        for &b in bits {
            let b = b as usize % (fp.len() * 64);
            fp[b / 64] ^= 1 << (63 - b % 64);
        }
        fp
    }

    fn build(h: &AlgH, store: &dyn Store, fps: &[Vec<u64>]) {
        let mut batch = Batch::default();
        for (doc, fp) in fps.iter().enumerate() {
            h.insert(&mut batch, fp, doc as u64).unwrap();
        }
        store.write(batch).unwrap();
    }

    fn fingerprint() -> impl Strategy<Value = (usize, Vec<u32>)> {
        (0usize..4, prop::collection::vec(0u32..256, 0..=12))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn query_matches_brute_force(
            param in 0..PARAMS.len(),
            bases in prop::array::uniform4(prop::array::uniform4(any::<u64>())),
            docs in prop::collection::vec(fingerprint(), 1..60),
            queries in prop::collection::vec(fingerprint(), 1..12),
        ) {
            let (k, m, rh) = PARAMS[param];
            let h = AlgH::new(k, m, rh).unwrap();
            let words = h.words();
            let fps: Vec<Vec<u64>> = docs
                .iter()
                .map(|(c, bits)| flip(&bases[*c][..words], bits))
                .collect();
            let store = MemoryStore::new();
            build(&h, &store, &fps);
            let mut out = Vec::new();
            for (c, bits) in &queries {
                let q = flip(&bases[*c][..words], bits);
                h.query(&store, &q, &mut out).unwrap();
                prop_assert_eq!(&out, &brute_force(&fps, &q, rh));
            }
        }
    }

    #[test]
    fn rocks_store_matches_brute_force() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open(dir.path()).unwrap();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for (k, rh) in [(64, 3), (128, 6), (256, 10)] {
            let h = AlgH::new(k, AlgH::default_m(k, rh), rh).unwrap();
            let words = h.words();
            let bases: Vec<Vec<u64>> = (0..5)
                .map(|_| (0..words).map(|_| next()).collect())
                .collect();
            let mut noisy = |base: &[u64]| {
                let bits: Vec<u32> = (0..next() % (u64::from(rh) + 4))
                    .map(|_| next() as u32)
                    .collect();
                flip(base, &bits)
            };
            let fps: Vec<Vec<u64>> = (0..200).map(|i| noisy(&bases[i % 5])).collect();
            // Separate doc numbers per k: offset them so the families do not clash.
            let offset = u64::from(k) << 32;
            let mut batch = Batch::default();
            for (doc, fp) in fps.iter().enumerate() {
                h.insert(&mut batch, fp, offset + doc as u64).unwrap();
            }
            store.write(batch).unwrap();
            let mut out = Vec::new();
            let mut found = 0;
            for i in 0..30 {
                let q = noisy(&bases[i % 5]);
                h.query(&store, &q, &mut out).unwrap();
                let expected: Vec<(u64, u32)> = brute_force(&fps, &q, rh)
                    .into_iter()
                    .map(|(doc, d)| (offset + doc, d))
                    .collect();
                assert_eq!(out, expected, "k={k}");
                found += out.len();
            }
            assert!(found > 0);
            // Clear the family for the next width (group keys may collide across widths).
            let mut batch = Batch::default();
            for (doc, fp) in fps.iter().enumerate() {
                h.remove(&mut batch, fp, offset + doc as u64).unwrap();
            }
            store.write(batch).unwrap();
        }
    }

    #[test]
    fn remove_after_insert_leaves_family_empty() {
        for (k, m, rh) in PARAMS {
            let h = AlgH::new(k, m, rh).unwrap();
            let words = h.words();
            let fps: Vec<Vec<u64>> = vec![
                vec![0; words],
                vec![u64::MAX; words],
                (0..words as u64)
                    .map(|i| 0x0123_4567_89ab_cdef ^ i)
                    .collect(),
            ];
            let store = MemoryStore::new();
            build(&h, &store, &fps);
            assert_eq!(
                store.family_stats(Family::AlgH).unwrap().keys,
                u64::from(m) * fps.len() as u64
            );
            let mut batch = Batch::default();
            for (doc, fp) in fps.iter().enumerate() {
                h.remove(&mut batch, fp, doc as u64).unwrap();
            }
            store.write(batch).unwrap();
            assert_eq!(store.family_stats(Family::AlgH).unwrap().keys, 0);
        }
    }

    #[test]
    fn parameters() {
        assert!(AlgH::new(64, 2, 0).is_ok());
        assert!(AlgH::new(64, 64, 63).is_ok());
        assert!(AlgH::new(256, 8, 7).is_ok());
        assert!(AlgH::new(32, 2, 0).is_err());
        assert!(AlgH::new(64, 0, 0).is_err());
        assert!(AlgH::new(64, 1, 0).is_err()); // 64-bit group
        assert!(AlgH::new(256, 7, 3).is_err()); // 37-bit groups
        assert!(AlgH::new(64, 4, 4).is_err());
        assert!(AlgH::new(64, 9, 3).is_err()); // 8 groups of 8 bits cover 64 bits
        assert!(AlgH::new(64, 65, 3).is_err());
        for k in [64, 128, 256] {
            for rh in 0..64 {
                let m = AlgH::default_m(k, rh);
                assert!(AlgH::new(k, m, rh).is_ok(), "k={k} rh={rh} m={m}");
            }
        }
        assert_eq!(AlgH::default_m(64, 0), 2);
        assert_eq!(AlgH::default_m(64, 3), 6);
        assert_eq!(AlgH::default_m(64, 6), 10);
        assert_eq!(AlgH::default_m(256, 3), 8);
    }

    #[test]
    fn groups_follow_the_bit_order() {
        let h = AlgH::new(128, 5, 0).unwrap(); // 26-bit groups, last one 24 bits
        assert_eq!(h.group_bits(), 26);
        let fp = [0x8000_0000_0000_0001u64, 0xc000_0000_0000_0000];
        assert_eq!(h.group_key(0, &fp), 1 << 25);
        // Group 2 covers bits 52..78: bit 63 (word 0, last) and bits 64, 65.
        assert_eq!(h.group_key(2, &fp), (2 << 26) + (0b111 << 12));
        assert_eq!(h.group_key(4, &fp), 4 << 26);
        assert_eq!(extract_bits(&[u64::MAX], 0, 64), u64::MAX);
        assert_eq!(extract_bits(&[0x0123_4567_89ab_cdef], 4, 8), 0x12);
    }

    #[test]
    fn wrong_width_is_an_error() {
        let h = AlgH::new(128, 4, 1).unwrap();
        let store = MemoryStore::new();
        let mut batch = Batch::default();
        let mut out = Vec::new();
        assert!(matches!(
            h.insert(&mut batch, &[1], 0),
            Err(StoreError::FingerprintWidth {
                expected: 2,
                got: 1
            })
        ));
        assert!(h.remove(&mut batch, &[1, 2, 3], 0).is_err());
        assert!(h.query(&store, &[1], &mut out).is_err());
        assert!(batch.is_empty());
    }

    #[test]
    fn corrupt_value_is_an_error() {
        let h = AlgH::new(64, 2, 0).unwrap();
        let store = MemoryStore::new();
        let mut key = [0u8; KEY_LEN];
        key[..8].copy_from_slice(&h.group_key(0, &[7]).to_be_bytes());
        let mut batch = Batch::default();
        batch.put(Family::AlgH, &key, b"short");
        store.write(batch).unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            h.query(&store, &[7], &mut out),
            Err(StoreError::Corrupt(_))
        ));
    }
}
