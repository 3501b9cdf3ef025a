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
//! The tables are held in memory ([`super::fptables`]); this module is their layout.

use crate::index::store::IndexParamError;

/// Largest supported Hamming radius.
pub const MAX_RH: u32 = 8;
/// Largest supported number of blocks.
pub const MAX_M: u32 = 16;
/// Bits of a table's bucket address in the fingerprint tables ([`super::fptables`]): 65,536
/// buckets a table. The default number of blocks gives every table a prefix at least this
/// long ([`AlgG::default_m`]).
pub const DIR_BITS: u32 = 16;

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

    /// The number of blocks when the index's settings leave it at 0: the fewest whose every
    /// table's exact prefix is at least [`DIR_BITS`] (16) bits, so that a
    /// probe addresses a whole bucket directory ([`super::fptables`]): 1 for `rh = 0` (one
    /// table of the whole fingerprint), 2 for 1, 4 for 3 (four tables of a 16-bit block, where
    /// Manku et al.'s 20 tables of 31–33 bits suit 2^34 pages), 8 for 6, 11 for 8.
    pub fn default_m(rh: u32) -> u32 {
        (rh + 1..=MAX_M)
            .find(|&m| {
                AlgG::new(m, rh)
                    .is_ok_and(|g| (0..g.tables()).all(|t| g.prefix_bits(t) >= DIR_BITS))
            })
            .unwrap_or(MAX_M)
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
    pub(crate) fn permute(&self, table: usize, fp: u64) -> u64 {
        let m = self.m as usize;
        self.segments[table * m..(table + 1) * m]
            .iter()
            .fold(0, |acc, s| {
                acc | (((fp << s.src_shift) >> s.width_shift) << s.width_shift) >> s.dst_shift
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let g = AlgG::new(AlgG::default_m(rh), rh).unwrap();
            assert!((0..g.tables()).all(|t| g.prefix_bits(t) >= 16), "rh={rh}");
        }
        assert_eq!(AlgG::default_m(0), 1);
        assert_eq!(AlgG::default_m(1), 2);
        assert_eq!(AlgG::default_m(3), 4);
        assert_eq!(AlgG::default_m(6), 8);
        assert_eq!(AlgG::default_m(8), 11);
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
        // the default for rh = 3: four tables, each a 16-bit block first
        let four = AlgG::new(4, 3).unwrap();
        assert_eq!(four.tables(), 4);
        assert_eq!(
            four.permute(1, fp),
            (fp & 0x0000_ffff_0000_0000) << 16 | (fp >> 48) << 32 | (fp & 0xffff_ffff)
        );
    }
}
