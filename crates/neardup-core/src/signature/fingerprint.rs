//! 64-bit fingerprints of a signature multiset, and Hamming distance.
//!
//! - `simhash`: every signature hash is expanded to 64 bits by [`mix64`]; bit b of the
//!   fingerprint is the sign of the frequency-weighted sum of ±1 over the signatures.
//! - `minhash1` (1-bit minwise hashing, Yuan et al.): 64·N hash functions
//!   `h_j(s) = mix64(s ^ seed_j)`; bit j is the lowest bit of the minimum of `h_j` over the
//!   set. For resemblance R, E[Hamming] = k·(1 − R)/2.
//!
//! The seeds and the mixing function are fixed constants, so a fingerprint is the same on
//! every run and platform; golden tests pin them.

use super::set::Signatures;

/// The finalizer of MurmurHash3 (a bijective 64-bit mixer).
pub const fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

const SIMHASH_SEED: u64 = 0x6e65_6172_6475_7031;
const MINHASH_SEED: u64 = 0x6e65_6172_6475_7032;
/// Most hash functions a fingerprint can use (256 bits).
pub const MAX_BITS: usize = 256;

const fn seeds() -> [u64; MAX_BITS] {
    let mut s = [0u64; MAX_BITS];
    let mut i = 0;
    while i < MAX_BITS {
        s[i] = mix64(MINHASH_SEED.wrapping_add((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        i += 1;
    }
    s
}

static SEEDS: [u64; MAX_BITS] = seeds();

/// Which fingerprint to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FingerprintKind {
    /// Frequency-weighted simhash (64 bits only).
    Simhash,
    /// 1-bit minwise hashing (64, 128 or 256 bits).
    #[default]
    Minhash1,
}

impl std::fmt::Display for FingerprintKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FingerprintKind::Simhash => "simhash",
            FingerprintKind::Minhash1 => "minhash1",
        })
    }
}

/// Frequency-weighted 64-bit simhash.
pub fn simhash64(sigs: &Signatures) -> u64 {
    let mut acc = [0i64; 64];
    for &(h, f) in sigs.entries() {
        let x = mix64(h as u64 ^ SIMHASH_SEED);
        let f = f as i64;
        for (b, a) in acc.iter_mut().enumerate() {
            // bit 0 of the fingerprint is the most significant bit
            if x >> (63 - b) & 1 == 1 {
                *a += f;
            } else {
                *a -= f;
            }
        }
    }
    acc.iter().enumerate().fold(
        0u64,
        |fp, (b, &a)| if a > 0 { fp | 1 << (63 - b) } else { fp },
    )
}

/// 1-bit minhash of `words` 64-bit words (1, 2 or 4): the set of signature hashes, ignoring
/// frequencies. Bit j (from the top of word 0) comes from hash function j.
pub fn minhash1(sigs: &Signatures, words: usize) -> Vec<u64> {
    assert!(
        (1..=MAX_BITS / 64).contains(&words),
        "minhash1 supports 64 to 256 bits"
    );
    let mut out = vec![0u64; words];
    if sigs.set_len() == 0 {
        return out;
    }
    let mut mins = [u64::MAX; MAX_BITS];
    let mins = &mut mins[..words * 64];
    for h in sigs.hashes() {
        let h = h as u64;
        for (m, seed) in mins.iter_mut().zip(SEEDS.iter()) {
            let v = mix64(h ^ seed);
            if v < *m {
                *m = v;
            }
        }
    }
    for (j, m) in mins.iter().enumerate() {
        if m & 1 == 1 {
            out[j / 64] |= 1 << (63 - j % 64);
        }
    }
    out
}

/// Computes the fingerprint of `kind` with `bits` (64, 128, 256; simhash only 64).
pub fn fingerprint(sigs: &Signatures, kind: FingerprintKind, bits: u32) -> Vec<u64> {
    match kind {
        FingerprintKind::Simhash => vec![simhash64(sigs)],
        FingerprintKind::Minhash1 => minhash1(sigs, (bits / 64) as usize),
    }
}

/// Hamming distance of two fingerprints of the same width.
pub fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// The Hamming radius for resemblance `r` with `k`-bit 1-bit minhash: ⌈k·(1 − r)/2⌉.
pub fn radius_for_resemblance(k: u32, r: f64) -> u32 {
    (k as f64 * (1.0 - r) / 2.0 - 1e-9).ceil().max(0.0) as u32
}

/// Formats a fingerprint as lowercase hex, word 0 first.
pub fn to_hex(fp: &[u64]) -> String {
    fp.iter().map(|w| format!("{w:016x}")).collect()
}
