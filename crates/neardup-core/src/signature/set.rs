//! The signature multiset every part of signing makes and reads: a leaf of its own, so that
//! the signature families, the fingerprint and the short blocks take it from here rather
//! than from the signer that uses them all.

/// A sorted signature multiset: `(hash, freq)` ascending by hash, every freq ≥ 1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signatures(Vec<(u32, u32)>);

impl Signatures {
    /// Builds the multiset from hashes in any order.
    pub fn from_hashes(mut hashes: Vec<u32>) -> Signatures {
        hashes.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(hashes.len());
        for h in hashes {
            match out.last_mut() {
                Some((last, f)) if *last == h => *f += 1,
                _ => out.push((h, 1)),
            }
        }
        Signatures(out)
    }

    /// Builds from `(hash, freq)` pairs; returns `None` unless strictly ascending with
    /// non-zero frequencies.
    pub fn from_entries(entries: Vec<(u32, u32)>) -> Option<Signatures> {
        let sorted = entries.windows(2).all(|w| w[0].0 < w[1].0);
        (sorted && entries.iter().all(|e| e.1 > 0)).then_some(Signatures(entries))
    }

    /// The `(hash, freq)` entries.
    pub fn entries(&self) -> &[(u32, u32)] {
        &self.0
    }

    /// Distinct signatures.
    pub fn set_len(&self) -> usize {
        self.0.len()
    }

    /// Signatures counted with frequency.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|e| e.1 as u64).sum()
    }

    /// The distinct hashes, ascending.
    pub fn hashes(&self) -> impl Iterator<Item = u32> + Clone + '_ {
        self.0.iter().map(|e| e.0)
    }

    /// Whether `hash` is in the set.
    pub fn contains(&self, hash: u32) -> bool {
        self.0.binary_search_by_key(&hash, |e| e.0).is_ok()
    }

    /// The set without the hashes `left_out` (ascending); `None` when none of them is in it.
    pub fn without(&self, left_out: &[u32]) -> Option<Signatures> {
        if left_out.is_empty() {
            return None;
        }
        let kept: Vec<(u32, u32)> = (self.0.iter().copied())
            .filter(|e| left_out.binary_search(&e.0).is_err())
            .collect();
        (kept.len() < self.0.len()).then_some(Signatures(kept))
    }
}
