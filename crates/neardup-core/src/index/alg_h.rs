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
//! across groups because `A_i < 2^w`. A query reads the entries under the `m`
//! keys `y_i` of its own fingerprint; every document within `rh` is under at
//! least one of them (under `m − rh`), and the full Hamming distance against
//! the stored fingerprint decides.
//!
//! In memory ([`super::fptables`]) every group has a table of its own, addressed by the
//! group's value; the tables' bucket directories lie end to end, group after group, which
//! is the merged key space `y_i` itself. This module is the layout.

use crate::index::store::IndexParamError;

/// Widest supported group, in bits.
pub const MAX_GROUP_BITS: u32 = 32;
/// Largest supported number of groups.
pub const MAX_M: u32 = 64;

/// Hamming distance between two fingerprints of the same width.
pub fn hamming_words(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
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

    /// The number of groups when the index's settings leave it at 0: the fewest above `rh`
    /// (so that one group must match exactly) whose every group, the last one too, is at
    /// least 16 bits wide, so that a group addresses a whole bucket directory
    /// ([`super::fptables`]): 4 groups of 16 bits for 64 bits and rh = 3, 8 of 16 for 128
    /// bits and rh = 6, 13 of 20 (the last 16) for 256 bits and rh = 12. At least
    /// `ceil(k / 32)` (groups are at most 32 bits); where no such `m` exists (a radius near
    /// `k / 16`), the fewest valid.
    pub fn default_m(k: u32, rh: u32) -> u32 {
        let first = rh.saturating_add(1).max(k.div_ceil(MAX_GROUP_BITS)).max(1);
        let wide = |m: u32| valid_m(k, m) && k - (m - 1) * k.div_ceil(m) >= 16;
        (first..=MAX_M)
            .find(|&m| wide(m))
            .or_else(|| (first..=MAX_M).find(|&m| valid_m(k, m)))
            .unwrap_or(MAX_M)
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(AlgH::default_m(64, 3), 4);
        assert_eq!(AlgH::default_m(128, 6), 8);
        assert_eq!(AlgH::default_m(256, 12), 13);
        assert_eq!(AlgH::default_m(256, 3), 8);
    }
}
