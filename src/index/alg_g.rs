//! Hamming-distance search over 64-bit fingerprints with permuted tables
//! (Manku, Jain and Das Sarma, "Detecting near-duplicates for web crawling",
//! WWW 2007), called alg.G here.
//!
//! # Algorithm
//!
//! The 64 fingerprint bits (bit 0 is the most significant) are split into `m`
//! contiguous blocks whose widths are as equal as possible, wider blocks first
//! (64 = 11+11+11+11+10+10 for m = 6). If two fingerprints differ in at most
//! `rh` bits, at most `rh` blocks differ, so at least `m − rh` blocks are
//! identical. For every choice of `m − rh` blocks out of `m` (there are
//! C(m, m − rh) choices, taken in lexicographic order; the position in that
//! order is the table id) we keep a table of permuted fingerprints: the
//! chosen blocks' bits first, in block order, then the remaining blocks' bits,
//! in block order. A query permutes its fingerprint the same way for every
//! table and scans the keys sharing the leading `P` bits (the chosen blocks);
//! one of the tables is guaranteed to contain every fingerprint within
//! distance `rh`. Each hit is checked with the exact Hamming distance.
//!
//! # Key layout (family [`Family::AlgG`])
//!
//! ```text
//! key   = table id (u16 BE) ++ permuted fingerprint (u64 BE) ++ doc (u64 BE)   18 bytes
//! value = original fingerprint (u64 BE)                                          8 bytes
//! ```

use crate::index::store::{
    check_len, read_u64, Batch, Family, IndexParamError, Store, StoreError, SCAN_PAST,
};

/// Largest supported Hamming radius.
pub const MAX_RH: u32 = 8;
/// Largest supported number of blocks.
pub const MAX_M: u32 = 16;
/// Length of a key in [`Family::AlgG`].
pub const KEY_LEN: usize = 18;

/// One block moved by a table permutation.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Left shift that brings the block to the top of the word.
    src_shift: u32,
    /// Right shift that drops the bits after the block (64 − width).
    width_shift: u32,
    /// Right shift that moves the block from the top to its permuted place.
    dst_shift: u32,
}

/// The permuted-tables index for 64-bit fingerprints.
#[derive(Debug, Clone)]
pub struct AlgG {
    m: u32,
    rh: u32,
    widths: Vec<u32>,
    /// `m` segments per table, table after table.
    segments: Vec<Segment>,
    /// Mask of the leading bits that a query must match exactly, per table.
    masks: Vec<u64>,
}

/// The `m` block widths: as equal as possible, wider blocks first.
fn block_widths(m: u32) -> Vec<u32> {
    let base = 64 / m;
    let extra = 64 % m;
    (0..m).map(|i| base + u32::from(i < extra)).collect()
}

/// Calls `f` with every `k`-subset of `0..n`, in lexicographic order.
fn combinations(n: usize, k: usize, mut f: impl FnMut(&[usize])) {
    let mut c: Vec<usize> = (0..k).collect();
    loop {
        f(&c);
        // Find the rightmost position that can still move right.
        let Some(i) = (0..k).rev().find(|&i| c[i] < n - k + i) else {
            return;
        };
        c[i] += 1;
        for j in i + 1..k {
            c[j] = c[j - 1] + 1;
        }
    }
}

impl AlgG {
    /// Builds the table layout for `m` blocks and Hamming radius `rh`.
    ///
    /// Valid for `rh <= 8` and `rh < m <= 16`.
    pub fn new(m: u32, rh: u32) -> Result<AlgG, IndexParamError> {
        if rh > MAX_RH {
            return Err(IndexParamError(format!(
                "alg.G supports a hamming radius of at most {MAX_RH}, got {rh}"
            )));
        }
        if m <= rh || m > MAX_M {
            return Err(IndexParamError(format!(
                "alg.G needs rh < m <= {MAX_M} blocks, got m={m} with rh={rh}"
            )));
        }
        let widths = block_widths(m);
        let starts: Vec<u32> = widths
            .iter()
            .scan(0, |acc, &w| {
                let s = *acc;
                *acc += w;
                Some(s)
            })
            .collect();
        let chosen = (m - rh) as usize;
        let mut segments = Vec::new();
        let mut masks = Vec::new();
        let mut rest = Vec::with_capacity(m as usize);
        combinations(m as usize, chosen, |comb| {
            rest.clear();
            rest.extend((0..m as usize).filter(|b| !comb.contains(b)));
            let mut pos = 0;
            for &b in comb.iter().chain(rest.iter()) {
                segments.push(Segment {
                    src_shift: starts[b],
                    width_shift: 64 - widths[b],
                    dst_shift: pos,
                });
                pos += widths[b];
            }
            let prefix: u32 = comb.iter().map(|&b| widths[b]).sum();
            masks.push(if prefix >= 64 {
                u64::MAX
            } else {
                !(u64::MAX >> prefix)
            });
        });
        Ok(AlgG {
            m,
            rh,
            widths,
            segments,
            masks,
        })
    }

    /// A sensible number of blocks for radius `rh`: 1 for `rh = 0` (a single
    /// table keyed by the whole fingerprint), otherwise `rh + 3` capped at 16.
    ///
    /// With three blocks that may differ beyond the `rh` that must match, the
    /// exact-match prefix stays long (33 bits for rh = 3, m = 6, the setting of
    /// Manku et al., giving 20 tables) while the number of tables C(m, rh)
    /// stays moderate (4 for rh = 1, 10 for rh = 2, 165 for rh = 8).
    pub fn default_m(rh: u32) -> u32 {
        if rh == 0 {
            1
        } else {
            rh.saturating_add(3).min(MAX_M)
        }
    }

    /// Number of blocks.
    pub fn m(&self) -> u32 {
        self.m
    }

    /// Hamming radius.
    pub fn rh(&self) -> u32 {
        self.rh
    }

    /// Block widths in bits, in block order.
    pub fn block_widths(&self) -> &[u32] {
        &self.widths
    }

    /// Number of tables, C(m, m − rh).
    pub fn tables(&self) -> usize {
        self.masks.len()
    }

    /// Number of leading bits of table `table`'s permuted fingerprint that a
    /// match must share with the query.
    pub fn prefix_bits(&self, table: usize) -> u32 {
        self.masks.get(table).map_or(0, |m| m.count_ones())
    }

    /// The fingerprint `fp` permuted for table `table`.
    fn permute(&self, table: usize, fp: u64) -> u64 {
        let m = self.m as usize;
        self.segments[table * m..(table + 1) * m]
            .iter()
            .fold(0, |acc, s| {
                acc | (((fp << s.src_shift) >> s.width_shift) << s.width_shift) >> s.dst_shift
            })
    }

    /// Encodes the key of (`table`, `fp`, `doc`) into `key`.
    fn key(&self, table: usize, fp: u64, doc: u64, key: &mut [u8; KEY_LEN]) {
        // Table ids are < C(16, 8) = 12870, so they fit a u16.
        key[..2].copy_from_slice(&(table as u16).to_be_bytes());
        key[2..10].copy_from_slice(&self.permute(table, fp).to_be_bytes());
        key[10..].copy_from_slice(&doc.to_be_bytes());
    }

    /// Queues the keys of document `doc` with fingerprint `fp`, one per table.
    pub fn insert(&self, batch: &mut Batch, fp: u64, doc: u64) {
        let mut key = [0u8; KEY_LEN];
        let value = fp.to_be_bytes();
        for table in 0..self.tables() {
            self.key(table, fp, doc, &mut key);
            batch.put(Family::AlgG, &key, &value);
        }
    }

    /// Queues the deletion of exactly the keys [`AlgG::insert`] writes for
    /// (`fp`, `doc`).
    pub fn remove(&self, batch: &mut Batch, fp: u64, doc: u64) {
        let mut key = [0u8; KEY_LEN];
        for table in 0..self.tables() {
            self.key(table, fp, doc, &mut key);
            batch.delete(Family::AlgG, &key);
        }
    }

    /// Finds every indexed document whose fingerprint is within Hamming
    /// distance `rh` of `fp`.
    ///
    /// `out` is cleared, then receives `(doc, distance)` pairs sorted by doc,
    /// each doc once.
    pub fn query(
        &self,
        store: &dyn Store,
        fp: u64,
        out: &mut Vec<(u64, u32)>,
    ) -> Result<(), StoreError> {
        out.clear();
        let mut lo = [0u8; 10];
        let mut hi = [0u8; 10 + SCAN_PAST.len()];
        hi[10..].copy_from_slice(&SCAN_PAST);
        let mut err = None;
        for (table, &mask) in self.masks.iter().enumerate() {
            let permuted = self.permute(table, fp);
            let tid = (table as u16).to_be_bytes();
            lo[..2].copy_from_slice(&tid);
            lo[2..].copy_from_slice(&(permuted & mask).to_be_bytes());
            hi[..2].copy_from_slice(&tid);
            hi[2..10].copy_from_slice(&(permuted | !mask).to_be_bytes());
            store.scan(Family::AlgG, &lo, &hi, &mut |key, value| {
                let hit = check_len(key, KEY_LEN, "alg.G key")
                    .and_then(|()| check_len(value, 8, "alg.G value"))
                    .and_then(|()| {
                        Ok((
                            read_u64(key, 10, "alg.G key")?,
                            read_u64(value, 0, "alg.G value")?,
                        ))
                    });
                match hit {
                    Ok((doc, stored)) => {
                        let d = (stored ^ fp).count_ones();
                        if d <= self.rh {
                            out.push((doc, d));
                        }
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
        out.sort_unstable();
        out.dedup_by_key(|&mut (doc, _)| doc);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::store::{MemoryStore, RocksStore};
    use proptest::prelude::*;

    /// Valid (m, rh) pairs exercised by the property tests.
    const PARAMS: [(u32, u32); 9] = [
        (1, 0),
        (3, 0),
        (2, 1),
        (4, 1),
        (5, 2),
        (6, 3),
        (8, 4),
        (10, 8),
        (12, 8),
    ];

    fn brute_force(fps: &[u64], q: u64, rh: u32) -> Vec<(u64, u32)> {
        fps.iter()
            .enumerate()
            .map(|(doc, &fp)| (doc as u64, (fp ^ q).count_ones()))
            .filter(|&(_, d)| d <= rh)
            .collect()
    }

    fn flip(base: u64, bits: &[u32]) -> u64 {
        bits.iter().fold(base, |fp, &b| fp ^ (1 << b))
    }

    fn build(g: &AlgG, store: &dyn Store, fps: &[u64]) {
        let mut batch = Batch::default();
        for (doc, &fp) in fps.iter().enumerate() {
            g.insert(&mut batch, fp, doc as u64);
        }
        store.write(batch).unwrap();
    }

    fn fingerprint() -> impl Strategy<Value = (usize, Vec<u32>)> {
        (0usize..4, prop::collection::vec(0u32..64, 0..=10))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn query_matches_brute_force(
            param in 0..PARAMS.len(),
            bases in prop::array::uniform4(any::<u64>()),
            docs in prop::collection::vec(fingerprint(), 1..60),
            queries in prop::collection::vec(fingerprint(), 1..12),
        ) {
            let (m, rh) = PARAMS[param];
            let g = AlgG::new(m, rh).unwrap();
            let fps: Vec<u64> = docs.iter().map(|(c, bits)| flip(bases[*c], bits)).collect();
            let store = MemoryStore::new();
            build(&g, &store, &fps);
            let mut out = Vec::new();
            for (c, bits) in &queries {
                let q = flip(bases[*c], bits);
                g.query(&store, q, &mut out).unwrap();
                prop_assert_eq!(&out, &brute_force(&fps, q, rh));
            }
        }
    }

    #[test]
    fn rocks_store_matches_brute_force() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open(dir.path()).unwrap();
        let g = AlgG::new(6, 3).unwrap();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let bases: Vec<u64> = (0..5).map(|_| next()).collect();
        let mut noisy = |base: u64| {
            let flips = next() % 7;
            (0..flips).fold(base, |fp, _| fp ^ (1 << (next() % 64)))
        };
        let fps: Vec<u64> = (0..300).map(|i| noisy(bases[i % 5])).collect();
        build(&g, &store, &fps);
        let mut out = Vec::new();
        let mut found = 0;
        for i in 0..40 {
            let q = noisy(bases[i % 5]);
            g.query(&store, q, &mut out).unwrap();
            assert_eq!(out, brute_force(&fps, q, 3));
            found += out.len();
        }
        assert!(found > 0);
    }

    #[test]
    fn remove_after_insert_leaves_family_empty() {
        for (m, rh) in PARAMS {
            let g = AlgG::new(m, rh).unwrap();
            let store = MemoryStore::new();
            let fps = [0u64, u64::MAX, 0x0123_4567_89ab_cdef, 0x0123_4567_89ab_cdee];
            build(&g, &store, &fps);
            assert_eq!(
                store.family_stats(Family::AlgG).unwrap().keys,
                (g.tables() * fps.len()) as u64
            );
            let mut batch = Batch::default();
            for (doc, &fp) in fps.iter().enumerate() {
                g.remove(&mut batch, fp, doc as u64);
            }
            store.write(batch).unwrap();
            assert_eq!(
                store.family_stats(Family::AlgG).unwrap().keys,
                0,
                "m={m} rh={rh}"
            );
        }
    }

    #[test]
    fn parameters() {
        assert!(AlgG::new(1, 0).is_ok());
        assert!(AlgG::new(16, 8).is_ok());
        assert!(AlgG::new(9, 8).is_ok());
        assert!(AlgG::new(0, 0).is_err());
        assert!(AlgG::new(3, 3).is_err());
        assert!(AlgG::new(17, 3).is_err());
        assert!(AlgG::new(16, 9).is_err());
        for rh in 0..=MAX_RH {
            assert!(AlgG::new(AlgG::default_m(rh), rh).is_ok(), "rh={rh}");
        }
        assert_eq!(AlgG::default_m(0), 1);
        assert_eq!(AlgG::default_m(3), 6);
    }

    #[test]
    fn layout_follows_manku() {
        let g = AlgG::new(6, 3).unwrap();
        assert_eq!(g.block_widths(), &[11, 11, 11, 11, 10, 10]);
        assert_eq!(g.tables(), 20);
        // First table: blocks 0, 1, 2 first, i.e. the identity permutation.
        assert_eq!(g.prefix_bits(0), 33);
        assert_eq!(g.permute(0, 0x0123_4567_89ab_cdef), 0x0123_4567_89ab_cdef);
        // Last table: blocks 3, 4, 5 first, then 0, 1, 2.
        assert_eq!(g.prefix_bits(19), 31);
        let fp = 0x0123_4567_89ab_cdef_u64;
        assert_eq!(g.permute(19, fp), fp.rotate_left(33));
        assert_eq!(AlgG::new(16, 8).unwrap().tables(), 12870);
        let one = AlgG::new(1, 0).unwrap();
        assert_eq!(one.tables(), 1);
        assert_eq!(one.prefix_bits(0), 64);
        assert_eq!(one.permute(0, fp), fp);
    }

    #[test]
    fn corrupt_value_is_an_error() {
        let g = AlgG::new(1, 0).unwrap();
        let store = MemoryStore::new();
        let mut key = [0u8; KEY_LEN];
        g.key(0, 42, 7, &mut key);
        let mut batch = Batch::default();
        batch.put(Family::AlgG, &key, b"short");
        store.write(batch).unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            g.query(&store, 42, &mut out),
            Err(StoreError::Corrupt(_))
        ));
    }
}
