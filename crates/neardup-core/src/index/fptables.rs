//! The fingerprint tables of alg.G and alg.H, held in memory in compact form.
//!
//! # Layout
//!
//! Both methods reduce to the same probe: a *view* of the fingerprint (64 bits: for alg.G a
//! table's permutation, [`AlgG`]; for alg.H the bits from the start of one group on,
//! cyclically, [`AlgH`]) whose leading `p` bits a match must share exactly. A table holds,
//! for every indexed fingerprint, one 8-byte entry: the slot of the fingerprint in a shared
//! array and 32 *check* bits, the view's bits after its bucket's. A table has
//! 2^[`DIR_BITS`] buckets (or 2^p when p is shorter), addressed by the view's leading bits.
//!
//! A probe reads one bucket per table. Its entries are filtered on their check bits (the
//! prefix bits past the bucket's must be equal, and at most `rh` of the rest may differ:
//! both are necessary for a distance of at most `rh`), and only the survivors read their
//! fingerprint from the shared array for the exact distance. The filter lets through one
//! entry in about 10⁶ that is not within the radius of the check bits, so a probe costs one
//! contiguous scan of its bucket per table and a cache miss per real candidate.
//!
//! # Size
//!
//! A page costs 8 bytes per table, plus 16 in the shared arrays (fingerprint and document
//! number; 8 more per extra fingerprint word). The buckets grow by an eighth of their size
//! at a time, so at most one eighth of an entry array is spare and a growth copies one
//! bucket (a few KiB at 10M pages), never a whole table: no pause longer than a decision.
//! The shared arrays grow by chunks of [`CHUNK`] slots, never copied. Freed slots are reused.
//!
//! # Number of tables
//!
//! Manku et al. pick the tables so that a probe's exact prefix is about log₂ N bits and it
//! matches a handful of entries; every table costs its entries' memory and a cache miss a
//! probe. Here an entry that shares only the bucket's bits is rejected in a nanosecond on
//! its check bits in a contiguous scan, far less than the cache misses of extra tables, so
//! the default is the fewest tables whose shortest prefix fills the directory
//! ([`AlgG::default_m`], [`AlgH::default_m`]): 4 tables of a 16-bit prefix for a radius of 3. A probe then scans
//! N / 2^16 entries per table: 153 at 10M pages, 1,526 at 100M (measured in
//! `docs/benchmarks/`).
//!
//! The tables are the in-memory form; the durable copy is the `fingerprints` family
//! (document number → fingerprint), read back when the index is opened ([`super`]).

use super::alg_g::AlgG;
use super::alg_h::AlgH;
use super::store::{IndexParamError, StoreError};

/// A fingerprint as the `fingerprints` family stores it: its words, u64 BE each.
pub fn encode(fp: &[u64]) -> Vec<u8> {
    fp.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// Bits of a table's bucket address (defined with the tables' prefixes, [`super::alg_g`]).
pub use super::alg_g::DIR_BITS;
/// Slots of one chunk of the shared arrays.
pub const CHUNK: usize = 1 << 16;
/// Largest number of fingerprints the tables hold (slots are 32-bit).
pub const MAX_SLOTS: usize = u32::MAX as usize;

/// One table entry: the fingerprint's slot and 32 bits of its view after the bucket's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    slot: u32,
    check: u32,
}

/// How a table's view of a fingerprint is made.
#[derive(Debug, Clone)]
enum Views {
    /// alg.G: table `t` is permutation `t`.
    G(AlgG),
    /// alg.H over `k`-bit fingerprints: table `i` starts at bit `starts[i]`.
    H { starts: Vec<u32> },
}

/// 64 bits of `fp` (words, bit 0 the top of word 0) from bit `start` on, cyclically.
fn window(fp: &[u64], start: u32) -> u64 {
    let n = fp.len();
    let (w, o) = ((start / 64) as usize, start % 64);
    if o == 0 {
        fp[w % n]
    } else {
        (fp[w % n] << o) | (fp[(w + 1) % n] >> (64 - o))
    }
}

/// Sizes, for `neardup index stats` and the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TableStats {
    /// Tables.
    pub tables: usize,
    /// Fingerprints held.
    pub fingerprints: usize,
    /// Bytes of the tables and the shared arrays.
    pub memory_bytes: usize,
}

/// The in-memory fingerprint tables of one index.
#[derive(Debug, Clone)]
pub struct FpTables {
    views: Views,
    rh: u32,
    words: usize,
    /// Per table: the exact prefix, the bucket bits, the check bits that must be equal.
    prefix: Vec<u32>,
    dir: Vec<u32>,
    check_mask: Vec<u32>,
    first_bucket: Vec<usize>,
    buckets: Vec<Vec<Entry>>,
    /// Fingerprint words and document number of each slot, in chunks of [`CHUNK`] slots.
    fps: Vec<Box<[u64]>>,
    docs: Vec<Box<[u64]>>,
    slots: usize,
    free: Vec<u32>,
    len: usize,
}

/// A document number that marks a free slot.
const FREE: u64 = u64::MAX;

impl FpTables {
    /// Tables for alg.G's layout `g`.
    pub fn alg_g(g: AlgG) -> FpTables {
        let prefix = (0..g.tables()).map(|t| g.prefix_bits(t)).collect();
        let rh = g.rh();
        Self::with(Views::G(g), rh, 1, prefix)
    }

    /// Tables for alg.H's layout `h`: one per group.
    pub fn alg_h(h: &AlgH) -> FpTables {
        let (k, w) = (h.k(), h.group_bits());
        let starts: Vec<u32> = (0..h.m()).map(|i| i * w).collect();
        let prefix = starts.iter().map(|&s| w.min(k - s)).collect();
        Self::with(Views::H { starts }, h.rh(), h.words(), prefix)
    }

    fn with(views: Views, rh: u32, words: usize, prefix: Vec<u32>) -> FpTables {
        let dir: Vec<u32> = prefix.iter().map(|&p| p.min(DIR_BITS)).collect();
        let check_mask = prefix
            .iter()
            .zip(&dir)
            .map(|(&p, &d)| match p - d {
                0 => 0,
                e if e >= 32 => u32::MAX,
                e => !(u32::MAX >> e),
            })
            .collect();
        let mut first_bucket = Vec::with_capacity(dir.len());
        let mut total = 0usize;
        for &d in &dir {
            first_bucket.push(total);
            total += 1usize << d;
        }
        FpTables {
            views,
            rh,
            words,
            prefix,
            dir,
            check_mask,
            first_bucket,
            buckets: vec![Vec::new(); total],
            fps: Vec::new(),
            docs: Vec::new(),
            slots: 0,
            free: Vec::new(),
            len: 0,
        }
    }

    /// Number of tables.
    pub fn tables(&self) -> usize {
        self.prefix.len()
    }

    /// The exact prefix of table `t`, in bits.
    pub fn prefix_bits(&self, t: usize) -> u32 {
        self.prefix[t]
    }

    /// Fingerprints held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no fingerprint is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Words of a fingerprint.
    pub fn words(&self) -> usize {
        self.words
    }

    fn view(&self, t: usize, fp: &[u64]) -> u64 {
        match &self.views {
            Views::G(g) => g.permute(t, fp[0]),
            Views::H { starts } => window(fp, starts[t]),
        }
    }

    /// The bucket and check bits of `fp` in table `t`.
    fn address(&self, t: usize, fp: &[u64]) -> (usize, u32) {
        let v = self.view(t, fp);
        let d = self.dir[t];
        let bucket = self.first_bucket[t] + (v >> (64 - d)) as usize;
        // d ≤ 16, so the 32 bits after the bucket's are inside the word
        (bucket, ((v << d) >> 32) as u32)
    }

    fn fp(&self, slot: u32) -> &[u64] {
        let s = slot as usize;
        let i = (s % CHUNK) * self.words;
        &self.fps[s / CHUNK][i..i + self.words]
    }

    fn doc(&self, slot: u32) -> u64 {
        let s = slot as usize;
        self.docs[s / CHUNK][s % CHUNK]
    }

    /// An error unless `fp` has the tables' width.
    pub fn check_width(&self, fp: &[u64]) -> Result<(), StoreError> {
        if fp.len() == self.words {
            Ok(())
        } else {
            Err(StoreError::FingerprintWidth {
                expected: self.words,
                got: fp.len(),
            })
        }
    }

    /// Finds every held document whose fingerprint is within the radius of `fp`.
    ///
    /// `out` is cleared, then receives `(doc, distance)` pairs sorted by doc, each doc once.
    pub fn query(&self, fp: &[u64], out: &mut Vec<(u64, u32)>) {
        out.clear();
        if fp.len() != self.words || self.len == 0 {
            return;
        }
        for t in 0..self.tables() {
            let (b, check) = self.address(t, fp);
            let mask = self.check_mask[t];
            for e in &self.buckets[b] {
                let x = e.check ^ check;
                if x & mask != 0 || x.count_ones() > self.rh {
                    continue;
                }
                let d = super::alg_h::hamming_words(self.fp(e.slot), fp);
                if d <= self.rh {
                    out.push((self.doc(e.slot), d));
                }
            }
        }
        out.sort_unstable();
        out.dedup_by_key(|&mut (doc, _)| doc);
    }

    /// A slot for document `doc` with fingerprint `fp`, in the shared arrays.
    fn alloc(&mut self, fp: &[u64], doc: u64) -> Result<u32, IndexParamError> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                if self.slots >= MAX_SLOTS {
                    return Err(IndexParamError(format!(
                        "the fingerprint tables hold at most {MAX_SLOTS} documents"
                    )));
                }
                if self.slots % CHUNK == 0 {
                    self.fps
                        .push(vec![0u64; CHUNK * self.words].into_boxed_slice());
                    self.docs.push(vec![FREE; CHUNK].into_boxed_slice());
                }
                self.slots += 1;
                (self.slots - 1) as u32
            }
        };
        let s = slot as usize;
        let i = (s % CHUNK) * self.words;
        self.fps[s / CHUNK][i..i + self.words].copy_from_slice(fp);
        self.docs[s / CHUNK][s % CHUNK] = doc;
        self.len += 1;
        Ok(slot)
    }

    /// Enters `slot` (fingerprint `fp`) in table `t`.
    fn enter(&mut self, t: usize, fp: &[u64], slot: u32) {
        let (b, check) = self.address(t, fp);
        let bucket = &mut self.buckets[b];
        if bucket.len() == bucket.capacity() {
            // an eighth at a time: little spare room, and a growth copies one bucket
            bucket.reserve_exact((bucket.len() / 8).max(4));
        }
        bucket.push(Entry { slot, check });
    }

    /// Holds document `doc` with fingerprint `fp`.
    pub fn insert(&mut self, fp: &[u64], doc: u64) -> Result<(), IndexParamError> {
        self.check_width(fp)
            .map_err(|e| IndexParamError(e.to_string()))?;
        let slot = self.alloc(fp, doc)?;
        for t in 0..self.tables() {
            self.enter(t, fp, slot);
        }
        Ok(())
    }

    /// Lets go of document `doc` with fingerprint `fp`. Returns false when it is not held.
    pub fn remove(&mut self, fp: &[u64], doc: u64) -> bool {
        if fp.len() != self.words || self.tables() == 0 {
            return false;
        }
        let (b0, c0) = self.address(0, fp);
        let Some(slot) = self.buckets[b0]
            .iter()
            .find(|e| e.check == c0 && self.doc(e.slot) == doc && self.fp(e.slot) == fp)
            .map(|e| e.slot)
        else {
            return false;
        };
        for t in 0..self.tables() {
            let (b, _) = self.address(t, fp);
            let bucket = &mut self.buckets[b];
            if let Some(pos) = bucket.iter().position(|e| e.slot == slot) {
                bucket.swap_remove(pos);
            }
            if bucket.capacity() > 2 * bucket.len() + 8 {
                bucket.shrink_to(bucket.len() + bucket.len() / 8);
            }
        }
        let s = slot as usize;
        self.docs[s / CHUNK][s % CHUNK] = FREE;
        self.free.push(slot);
        self.len -= 1;
        true
    }

    /// Holds many documents at once (opening an index): `docs[i]` with the fingerprint
    /// `fps[i·words..(i+1)·words]`. Each bucket is sized once.
    pub fn extend(&mut self, docs: &[u64], fps: &[u64]) -> Result<(), IndexParamError> {
        if fps.len() != docs.len() * self.words {
            return Err(IndexParamError(format!(
                "{} fingerprint words for {} documents of {} words",
                fps.len(),
                docs.len(),
                self.words
            )));
        }
        let mut slots = Vec::with_capacity(docs.len());
        for (doc, fp) in docs.iter().zip(fps.chunks_exact(self.words)) {
            slots.push(self.alloc(fp, *doc)?);
        }
        // table after table: one table's bucket headers and the ends of its buckets stay in
        // the cache while it is filled
        for t in 0..self.tables() {
            let mut counts = vec![0u32; 1 << self.dir[t]];
            let first = self.first_bucket[t];
            for fp in fps.chunks_exact(self.words) {
                counts[self.address(t, fp).0 - first] += 1;
            }
            for (bucket, n) in self.buckets[first..].iter_mut().zip(counts) {
                bucket.reserve_exact(n as usize);
            }
            for (fp, &slot) in fps.chunks_exact(self.words).zip(&slots) {
                self.enter(t, fp, slot);
            }
        }
        Ok(())
    }

    /// Every held document and its fingerprint, as [`FpTables::extend`] takes them.
    pub fn held(&self) -> (Vec<u64>, Vec<u64>) {
        let (mut docs, mut fps) = (Vec::with_capacity(self.len), Vec::new());
        fps.reserve_exact(self.len * self.words);
        for s in 0..self.slots as u32 {
            let doc = self.doc(s);
            if doc != FREE {
                docs.push(doc);
                fps.extend_from_slice(self.fp(s));
            }
        }
        (docs, fps)
    }

    /// Sizes.
    pub fn stats(&self) -> TableStats {
        let entries: usize = self.buckets.iter().map(Vec::capacity).sum();
        let memory_bytes = entries * std::mem::size_of::<Entry>()
            + self.buckets.capacity() * std::mem::size_of::<Vec<Entry>>()
            + self.fps.len() * CHUNK * self.words * 8
            + self.docs.len() * CHUNK * 8
            + self.free.capacity() * 4;
        TableStats {
            tables: self.tables(),
            fingerprints: self.len,
            memory_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute_force(fps: &[(u64, Vec<u64>)], q: &[u64], rh: u32) -> Vec<(u64, u32)> {
        let mut out: Vec<(u64, u32)> = fps
            .iter()
            .map(|(doc, fp)| (*doc, super::super::alg_h::hamming_words(fp, q)))
            .filter(|&(_, d)| d <= rh)
            .collect();
        out.sort_unstable();
        out
    }

    fn flip(base: &[u64], bits: &[u32]) -> Vec<u64> {
        let mut fp = base.to_vec();
        let k = 64 * fp.len() as u32;
        for &b in bits {
            let b = b % k;
            fp[(b / 64) as usize] ^= 1 << (63 - b % 64);
        }
        fp
    }

    /// Every layout the property test runs: alg.G (m, rh) and alg.H (k, m, rh), the
    /// defaults among them.
    fn layouts() -> Vec<FpTables> {
        let mut out = Vec::new();
        for (m, rh) in [(1, 0), (2, 1), (4, 3), (5, 3), (6, 3), (8, 6), (10, 8)] {
            out.push(FpTables::alg_g(AlgG::new(m, rh).unwrap()));
        }
        for (k, m, rh) in [
            (64, 4, 3),
            (64, 6, 3),
            (64, 2, 0),
            (128, 7, 6),
            (256, 13, 12),
        ] {
            out.push(FpTables::alg_h(&AlgH::new(k, m, rh).unwrap()));
        }
        out
    }

    fn fingerprint() -> impl Strategy<Value = (usize, Vec<u32>)> {
        (0usize..4, prop::collection::vec(0u32..256, 0..=14))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Every held fingerprint within the radius is found, and only those, through
        /// inserts and removals, for every layout.
        #[test]
        fn query_matches_brute_force(
            layout in 0..12usize,
            bases in prop::array::uniform4(prop::array::uniform4(any::<u64>())),
            docs in prop::collection::vec(fingerprint(), 1..80),
            removed in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
            queries in prop::collection::vec(fingerprint(), 1..12),
        ) {
            let mut tables = layouts().swap_remove(layout);
            let w = tables.words();
            let mut held: Vec<(u64, Vec<u64>)> = docs
                .iter()
                .enumerate()
                .map(|(i, (c, bits))| (i as u64 * 3 + 1, flip(&bases[*c][..w], bits)))
                .collect();
            let (bulk, one_by_one) = held.split_at(held.len() / 2);
            let docs: Vec<u64> = bulk.iter().map(|(d, _)| *d).collect();
            let fps: Vec<u64> = bulk.iter().flat_map(|(_, f)| f.iter().copied()).collect();
            tables.extend(&docs, &fps).unwrap();
            for (doc, fp) in one_by_one {
                tables.insert(fp, *doc).unwrap();
            }
            for r in removed {
                if held.is_empty() {
                    break;
                }
                let (doc, fp) = held.swap_remove(r.index(held.len()));
                prop_assert!(tables.remove(&fp, doc));
                prop_assert!(!tables.remove(&fp, doc));
            }
            prop_assert_eq!(tables.len(), held.len());
            let mut out = Vec::new();
            let rh = tables.rh;
            for (c, bits) in &queries {
                let q = flip(&bases[*c][..w], bits);
                tables.query(&q, &mut out);
                prop_assert_eq!(&out, &brute_force(&held, &q, rh));
            }
            // a freed slot is reused, and found under its new document
            if let Some((doc, fp)) = held.first().cloned() {
                prop_assert!(tables.remove(&fp, doc));
                tables.insert(&fp, 999_999).unwrap();
                tables.query(&fp, &mut out);
                prop_assert!(out.contains(&(999_999, 0)));
                prop_assert!(!out.iter().any(|&(d, _)| d == doc));
            }
        }
    }

    /// Many pages in one bucket (equal leading bits) stay exact: the check bits decide.
    #[test]
    fn a_crowded_bucket_is_exact() {
        let mut tables = FpTables::alg_g(AlgG::new(4, 3).unwrap());
        let mut held = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for doc in 0..5_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // all share the top 16 bits, so table 0 puts them in one bucket
            let fp = (0xabcd_u64 << 48) | (x >> 16);
            tables.insert(&[fp], doc).unwrap();
            held.push((doc, vec![fp]));
        }
        let mut out = Vec::new();
        let mut found = 0;
        for (i, (_, fp)) in held.iter().enumerate().step_by(97) {
            let q = fp[0] ^ (1 << (i % 48)) ^ (1 << 50);
            tables.query(&[q], &mut out);
            assert_eq!(out, brute_force(&held, &[q], 3));
            found += out.len();
        }
        assert!(found >= 52);
    }

    #[test]
    fn defaults_fill_the_directory() {
        for rh in 0..=8 {
            let g = FpTables::alg_g(AlgG::new(AlgG::default_m(rh), rh).unwrap());
            assert!(
                (0..g.tables()).all(|t| g.prefix_bits(t) >= DIR_BITS),
                "rh={rh}"
            );
        }
        for (k, rh) in [(64, 3), (128, 6), (256, 12)] {
            let h = FpTables::alg_h(&AlgH::new(k, AlgH::default_m(k, rh), rh).unwrap());
            assert!(
                (0..h.tables()).all(|t| h.prefix_bits(t) >= DIR_BITS),
                "k={k}"
            );
        }
        assert_eq!(FpTables::alg_g(AlgG::new(4, 3).unwrap()).tables(), 4);
    }

    #[test]
    fn a_group_view_starts_at_its_group_and_wraps() {
        let fp = [0x0123_4567_89ab_cdef_u64, 0xfedc_ba98_7654_3210];
        assert_eq!(window(&fp, 0), fp[0]);
        assert_eq!(window(&fp, 64), fp[1]);
        assert_eq!(window(&fp, 16), 0x4567_89ab_cdef_fedc);
        assert_eq!(window(&fp, 120), 0x1001_2345_6789_abcd);
        assert_eq!(window(&[fp[0]], 8), fp[0].rotate_left(8));
    }

    #[test]
    fn a_fingerprint_of_another_width_is_refused() {
        let mut t = FpTables::alg_h(&AlgH::new(128, 7, 6).unwrap());
        assert!(t.insert(&[1], 1).is_err());
        let mut out = vec![(1, 1)];
        t.query(&[1], &mut out);
        assert!(out.is_empty());
        assert!(!t.remove(&[1], 1));
    }

    #[test]
    fn memory_is_eight_bytes_a_table_and_sixteen_shared() {
        let mut t = FpTables::alg_g(AlgG::new(4, 3).unwrap());
        let n = 200_000u64;
        let docs: Vec<u64> = (0..n).collect();
        let fps: Vec<u64> = (0..n)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        t.extend(&docs, &fps).unwrap();
        let s = t.stats();
        assert_eq!(s.fingerprints, n as usize);
        // 4 · 8 + 16 = 48 bytes a page, the directories' 4 · 65,536 headers, and at most
        // one chunk of the shared arrays spare
        let floor = 48 * n as usize;
        let ceiling = floor + 4 * 65_536 * 24 + CHUNK * 16;
        assert!(
            s.memory_bytes >= floor && s.memory_bytes <= ceiling,
            "{s:?}"
        );
    }
}
