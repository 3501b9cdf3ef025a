//! A synthetic stream of signed pages with the statistics of real ones, for the index
//! benchmark at sizes no labelled corpus reaches (10M documents).
//!
//! The model, and where each number comes from (`neardup-lab index --calibrate FILE`
//! measures them again on any page corpus):
//!
//! - **Signatures per page**: drawn from the empirical distribution of distinct SpotSigs
//!   signatures per judged page (≥ `min-signatures`) of the dev corpus, as a quantile table
//!   ([`SIZE_QUANTILES`]).
//! - **Signature frequencies**: each signature is a rank `r ≥ 0` drawn with probability
//!   ∝ `(r0 + r)^−s`, an unbounded heavy tail: a few phrases appear on many pages ("the
//!   united states"), most on one, and the vocabulary keeps growing with the stream (Heaps'
//!   law with exponent about `1/s`). `s` and `r0` are fitted so that, on a stream as long as
//!   the dev corpus, the share of signatures seen once and the page share of the most
//!   common signature match the dev corpus ([`ZIPF_S`], [`ZIPF_R0`]). A rank becomes a
//!   32-bit hash through a fixed mixer, so hash collisions happen as they do with CRC32.
//! - **Near-copies**: a share of pages ([`Synth::copy_rate`], 20 %) are edited copies of a
//!   page from the last [`Synth::copy_window`] originals (news is republished within days):
//!   each signature of the original is kept with probability `2J/(1+J)` and the rest is
//!   replaced by new draws, for a target Jaccard `J` drawn from the 5-shingle Jaccard of the
//!   dev corpus's gold pairs ([`COPY_JACCARD_QUANTILES`]). The exact Jaccard to the
//!   original is recorded with the copy, so the benchmark knows which copies must be found.
//! - Ids are 16 hex digits, URLs news-like paths of about 80 bytes, as the stage stores them.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::signature::fingerprint::mix64;
use crate::signature::{fingerprint, FingerprintKind, Signatures, Signed};

/// Distinct signatures per judged page of `goldstyle-dev.jsonl.gz` (3,424 pages with at
/// least 10, mean 138.7), as `(quantile, signatures)`; measured with
/// `neardup-lab index --calibrate`.
pub const SIZE_QUANTILES: &[(f64, f64)] = &[
    (0.0, 10.0),
    (0.05, 15.0),
    (0.1, 20.0),
    (0.2, 33.0),
    (0.3, 47.0),
    (0.4, 64.0),
    (0.5, 82.0),
    (0.6, 105.0),
    (0.7, 136.0),
    (0.8, 184.0),
    (0.9, 308.0),
    (0.95, 456.0),
    (0.99, 962.0),
    (1.0, 3216.0),
];

/// 5-shingle Jaccard of the main texts of the dev corpus's 511 gold pairs, as
/// `(quantile, jaccard)`: the similarity of a synthetic copy to its original.
pub const COPY_JACCARD_QUANTILES: &[(f64, f64)] = &[
    (0.0, 0.26),
    (0.1, 0.53),
    (0.25, 0.66),
    (0.5, 0.84),
    (0.75, 0.97),
    (0.9, 1.0),
    (1.0, 1.0),
];

/// Exponent of the signature rank distribution. Fitted on the dev corpus (3,424 judged
/// pages, mean 138.7 distinct signatures): there 74.8 % of occurrences are of signatures seen
/// once, the commonest signature is on 11.1 % of pages, and the vocabulary is 0.83 of the
/// occurrences; this model gives 0.78, 0.12 and 0.81 on as many pages.
pub const ZIPF_S: f64 = 1.04;
/// Offset of the signature rank distribution.
pub const ZIPF_R0: f64 = 40.0;

const SEED_HASH: u64 = 0x7379_6e74_6865_7469;

/// A small, fast, seeded generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Linear interpolation in a quantile table at `u ∈ [0, 1]`.
pub fn quantile(table: &[(f64, f64)], u: f64) -> f64 {
    for w in table.windows(2) {
        let ((q0, v0), (q1, v1)) = (w[0], w[1]);
        if u <= q1 {
            if q1 <= q0 {
                return v1;
            }
            return v0 + (v1 - v0) * (u - q0) / (q1 - q0);
        }
    }
    table.last().map_or(0.0, |x| x.1)
}

/// Settings of the synthetic stream.
#[derive(Clone, Debug)]
pub struct Synth {
    /// Seed of the stream (the same seed gives the same pages).
    pub seed: u64,
    /// Share of pages that are edited copies of an earlier original.
    pub copy_rate: f64,
    /// Copies are made of one of this many most recent originals.
    pub copy_window: usize,
    /// Signatures per page, `(quantile, count)`.
    pub sizes: Vec<(f64, f64)>,
    /// Rank distribution exponent.
    pub zipf_s: f64,
    /// Rank distribution offset.
    pub zipf_r0: f64,
    /// Fingerprint function and width.
    pub fingerprint: FingerprintKind,
    /// Fingerprint bits.
    pub fingerprint_bits: u32,
}

impl Default for Synth {
    fn default() -> Self {
        Synth {
            seed: 1,
            copy_rate: 0.2,
            copy_window: 100_000,
            sizes: SIZE_QUANTILES.to_vec(),
            zipf_s: ZIPF_S,
            zipf_r0: ZIPF_R0,
            fingerprint: FingerprintKind::Minhash1,
            fingerprint_bits: 64,
        }
    }
}

/// One synthetic page.
#[derive(Clone, Debug)]
pub struct SynthPage {
    /// Position in the stream.
    pub n: u64,
    /// Document id.
    pub id: String,
    /// URL.
    pub url: String,
    /// Signatures and fingerprint.
    pub signed: Signed,
    /// The original this page copies (its position in the stream) and their exact Jaccard.
    pub copy_of: Option<(u64, f64)>,
    /// The fingerprint of that original.
    pub source_fingerprint: Option<Vec<u64>>,
    /// Whether this copy is on its original's host (one in 997 copies: the index then asks
    /// more similarity of it, [`crate::dedup::HOST_THRESHOLD`]).
    pub same_host: bool,
}

/// A recent original: position, signatures, fingerprint.
type Original = (u64, Vec<(u32, u32)>, Vec<u64>);

/// The stream.
pub struct Generator {
    cfg: Synth,
    rng: Rng,
    n: u64,
    originals: VecDeque<Original>,
    counts: FxHashMap<u32, u32>,
}

impl Generator {
    /// A stream with settings `cfg`.
    pub fn new(cfg: Synth) -> Generator {
        Generator {
            rng: Rng::new(cfg.seed),
            cfg,
            n: 0,
            originals: VecDeque::new(),
            counts: FxHashMap::default(),
        }
    }

    /// A signature: a rank from the heavy-tailed distribution, mixed into 32 bits.
    fn draw(&mut self) -> u32 {
        let u = self.rng.unit();
        let (s, r0) = (self.cfg.zipf_s, self.cfg.zipf_r0);
        // inverse of P(rank ≥ x) = (1 + x/r0)^−(s−1)
        let x = r0 * ((1.0 - u).powf(-1.0 / (s - 1.0)) - 1.0);
        // ranks past 2^62 are never drawn twice: a fresh random one (the top bit keeps them
        // apart from the small ones)
        let rank = if x.is_finite() && x < 4.6e18 {
            x as u64
        } else {
            self.rng.next_u64() | (1 << 63)
        };
        (mix64(rank ^ SEED_HASH) >> 32) as u32
    }

    /// Adds draws to `counts` until it holds `want` distinct signatures.
    fn fill(&mut self, want: usize) {
        let mut budget = want.saturating_mul(64).max(1024);
        while self.counts.len() < want && budget > 0 {
            let h = self.draw();
            *self.counts.entry(h).or_insert(0) += 1;
            budget -= 1;
        }
    }

    fn entries(&mut self) -> Vec<(u32, u32)> {
        let mut e: Vec<(u32, u32)> = self.counts.drain().collect();
        e.sort_unstable();
        e
    }

    /// The next page.
    pub fn next_page(&mut self) -> SynthPage {
        let n = self.n;
        self.n += 1;
        self.counts.clear();
        let copy = !self.originals.is_empty() && self.rng.unit() < self.cfg.copy_rate;
        let mut copy_of = None;
        let mut source_fingerprint = None;
        let entries = if copy {
            let at = self.rng.below(self.originals.len() as u64) as usize;
            let (src_n, src, src_fp) = self.originals[at].clone();
            source_fingerprint = Some(src_fp);
            let j = quantile(COPY_JACCARD_QUANTILES, self.rng.unit());
            let keep = 2.0 * j / (1.0 + j);
            for &(h, f) in &src {
                if self.rng.unit() < keep {
                    self.counts.insert(h, f);
                }
            }
            // new draws replace the dropped signatures: the copy is as long as its original
            self.fill(src.len());
            let e = self.entries();
            let exact = crate::signature::similarity(&e, &src, crate::signature::Measure::Jaccard);
            copy_of = Some((src_n, exact));
            e
        } else {
            let want = quantile(&self.cfg.sizes, self.rng.unit()).round().max(1.0) as usize;
            self.fill(want);
            self.entries()
        };
        let original = copy_of.is_none().then(|| entries.clone());
        let sigs = Signatures::from_entries(entries).expect("sorted, positive");
        let fp = fingerprint(&sigs, self.cfg.fingerprint, self.cfg.fingerprint_bits);
        if let Some(e) = original {
            self.originals.push_back((n, e, fp.clone()));
            if self.originals.len() > self.cfg.copy_window {
                self.originals.pop_front();
            }
        }
        // a page's id hash, whose residue mod 997 names its host
        let hash = |n: u64| mix64(n ^ self.cfg.seed.rotate_left(17));
        let h = hash(n);
        let same_host = copy_of.is_some_and(|(src, _)| hash(src) % 997 == h % 997);
        SynthPage {
            n,
            id: format!("{h:016x}"),
            url: format!(
                "https://www.news-site-{}.example/2026/11/{:02}/story-{:012x}-{}.html",
                h % 997,
                1 + h % 28,
                h >> 16,
                n
            ),
            signed: Signed {
                sigs,
                fingerprint: fp,
                ..Default::default()
            },
            copy_of,
            source_fingerprint,
            same_host,
        }
    }
}

/// Statistics of a stream of signature sets: what the model is fitted to.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SetStats {
    /// Pages.
    pub pages: u64,
    /// Mean distinct signatures per page.
    pub mean_signatures: f64,
    /// `(quantile, distinct signatures)`.
    pub size_quantiles: Vec<(f64, f64)>,
    /// Distinct signatures over all pages.
    pub vocabulary: u64,
    /// (page, signature) occurrences.
    pub occurrences: u64,
    /// Share of occurrences whose signature is on one page only.
    pub singleton_share: f64,
    /// Page share of the most common signature.
    pub top_page_share: f64,
}

/// Measures [`SetStats`] over signature sets.
pub fn set_stats<'a>(sets: impl Iterator<Item = &'a [u32]>) -> SetStats {
    let mut df: FxHashMap<u32, u32> = FxHashMap::default();
    let mut sizes = Vec::new();
    for s in sets {
        sizes.push(s.len());
        for &h in s {
            *df.entry(h).or_insert(0) += 1;
        }
    }
    sizes.sort_unstable();
    let pages = sizes.len() as u64;
    let occurrences: u64 = sizes.iter().map(|&n| n as u64).sum();
    let once = df.values().filter(|&&c| c == 1).count() as u64;
    let top = df.values().copied().max().unwrap_or(0);
    let qs = [
        0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0,
    ];
    SetStats {
        pages,
        mean_signatures: occurrences as f64 / pages.max(1) as f64,
        size_quantiles: qs
            .iter()
            .filter(|_| pages > 0)
            .map(|&q| {
                let i = ((pages - 1) as f64 * q).round() as usize;
                (q, sizes[i] as f64)
            })
            .collect(),
        vocabulary: df.len() as u64,
        occurrences,
        singleton_share: once as f64 / occurrences.max(1) as f64,
        top_page_share: top as f64 / pages.max(1) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Generator::new(Synth::default());
        let mut b = Generator::new(Synth::default());
        for _ in 0..200 {
            let (x, y) = (a.next_page(), b.next_page());
            assert_eq!(x.id, y.id);
            assert_eq!(x.signed.sigs, y.signed.sigs);
            assert_eq!(x.copy_of, y.copy_of);
        }
    }

    /// The stream has the statistics it was fitted to, within the noise of one sample.
    #[test]
    fn stream_matches_its_calibration() {
        let mut g = Generator::new(Synth::default());
        let pages: Vec<SynthPage> = (0..3424).map(|_| g.next_page()).collect();
        let originals: Vec<Vec<u32>> = pages
            .iter()
            .filter(|p| p.copy_of.is_none())
            .map(|p| p.signed.sigs.hashes().collect())
            .collect();
        let s = set_stats(originals.iter().map(|v| v.as_slice()));
        // sizes follow the table (median 82)
        let median = s.size_quantiles.iter().find(|q| q.0 == 0.5).unwrap().1;
        assert!((70.0..=95.0).contains(&median), "median {median}");
        // heavy tail: most occurrences are of signatures seen once; a few are common
        assert!(
            (0.7..0.85).contains(&s.singleton_share),
            "{}",
            s.singleton_share
        );
        assert!(
            (0.06..0.2).contains(&s.top_page_share),
            "{}",
            s.top_page_share
        );
        // copies: about a fifth, with their recorded Jaccard
        let copies: Vec<f64> = pages
            .iter()
            .filter_map(|p| p.copy_of.map(|c| c.1))
            .collect();
        let share = copies.len() as f64 / pages.len() as f64;
        assert!((0.17..0.23).contains(&share), "{share}");
        let above = copies.iter().filter(|&&j| j >= 0.5).count() as f64 / copies.len() as f64;
        assert!((0.8..0.98).contains(&above), "{above}");
        for p in &pages {
            if let Some((src, j)) = p.copy_of {
                let s = &pages[src as usize].signed.sigs;
                let exact = crate::signature::similarity(
                    p.signed.sigs.entries(),
                    s.entries(),
                    crate::signature::Measure::Jaccard,
                );
                assert!((exact - j).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn quantile_interpolates() {
        let t = [(0.0, 10.0), (0.5, 20.0), (1.0, 40.0)];
        assert_eq!(quantile(&t, 0.0), 10.0);
        assert_eq!(quantile(&t, 0.25), 15.0);
        assert_eq!(quantile(&t, 0.75), 30.0);
        assert_eq!(quantile(&t, 1.0), 40.0);
    }
}
