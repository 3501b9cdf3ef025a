//! Jaccard and weighted Jaccard of sorted vectors, by one merge, with an early-exit
//! threshold variant; the length bound; result-set grouping.

/// An element of a sorted signature vector: a key and a frequency.
pub trait Item: Copy {
    /// The sort key (a signature hash).
    fn key(&self) -> u32;
    /// Its frequency (1 for sets).
    fn freq(&self) -> u32;
}

impl Item for u32 {
    fn key(&self) -> u32 {
        *self
    }
    fn freq(&self) -> u32 {
        1
    }
}

impl Item for (u32, u32) {
    fn key(&self) -> u32 {
        self.0
    }
    fn freq(&self) -> u32 {
        self.1
    }
}

/// Set Jaccard (frequencies ignored) or weighted Jaccard (Σ min freq / Σ max freq).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// |A ∩ B| / |A ∪ B| over the distinct signatures.
    #[default]
    Jaccard,
    /// Σ min(fa, fb) / Σ max(fa, fb) over the multisets.
    Weighted,
}

impl std::fmt::Display for Measure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Measure::Jaccard => "jaccard",
            Measure::Weighted => "weighted",
        })
    }
}

#[inline]
fn w<T: Item>(x: &T, m: Measure) -> u64 {
    match m {
        Measure::Jaccard => 1,
        Measure::Weighted => x.freq() as u64,
    }
}

/// The mass of a vector under a measure: |A| or Σ freq.
pub fn mass<T: Item>(a: &[T], m: Measure) -> u64 {
    match m {
        Measure::Jaccard => a.len() as u64,
        Measure::Weighted => a.iter().map(|x| x.freq() as u64).sum(),
    }
}

/// Whether two vectors of these masses can reach τ at all: `min/max ≥ τ`
/// (since `sim(A,B) ≤ min(|A|,|B|)/max(|A|,|B|)`).
pub fn length_bound(ma: u64, mb: u64, tau: f64) -> bool {
    let (lo, hi) = if ma <= mb { (ma, mb) } else { (mb, ma) };
    hi > 0 && lo as f64 >= tau * hi as f64
}

/// The intersection mass of two sorted vectors.
pub fn intersection<T: Item>(a: &[T], b: &[T], m: Measure) -> u64 {
    let (mut i, mut j, mut inter) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (ka, kb) = (a[i].key(), b[j].key());
        if ka < kb {
            i += 1;
        } else if ka > kb {
            j += 1;
        } else {
            inter += w(&a[i], m).min(w(&b[j], m));
            i += 1;
            j += 1;
        }
    }
    inter
}

/// Similarity in [0, 1]; two empty vectors have similarity 0.
pub fn similarity<T: Item>(a: &[T], b: &[T], m: Measure) -> f64 {
    let inter = intersection(a, b, m);
    let union = mass(a, m) + mass(b, m) - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

/// The decision rule shared by the full and the early-exit computation:
/// `inter / union ≥ τ`, evaluated as `inter ≥ τ · union` and false for an empty union.
#[inline]
pub fn reaches(inter: u64, ma: u64, mb: u64, tau: f64) -> bool {
    let union = ma + mb - inter;
    union > 0 && inter as f64 >= tau * union as f64
}

/// Whether `similarity(a, b) ≥ τ`, merging only as far as needed: it stops as soon as τ is
/// certain (the intersection so far already reaches it) or out of reach (even if every
/// remaining element matched it could not). Always equal to
/// `reaches(intersection(a, b), mass(a), mass(b), τ)`.
pub fn similarity_at_least<T: Item>(a: &[T], b: &[T], m: Measure, tau: f64) -> bool {
    let (ma, mb) = (mass(a, m), mass(b, m));
    if !length_bound(ma, mb, tau) && tau > 0.0 {
        return false;
    }
    let (mut ra, mut rb) = (ma, mb);
    let (mut i, mut j, mut inter) = (0, 0, 0u64);
    loop {
        if reaches(inter, ma, mb, tau) {
            return true;
        }
        if !reaches(inter + ra.min(rb), ma, mb, tau) {
            return false;
        }
        if i == a.len() || j == b.len() {
            return false;
        }
        let (ka, kb) = (a[i].key(), b[j].key());
        if ka < kb {
            ra -= w(&a[i], m);
            i += 1;
        } else if ka > kb {
            rb -= w(&b[j], m);
            j += 1;
        } else {
            let (wa, wb) = (w(&a[i], m), w(&b[j], m));
            inter += wa.min(wb);
            ra -= wa;
            rb -= wb;
            i += 1;
            j += 1;
        }
    }
}

/// Result-set deduplication: the groups (two or more members, ascending indices, ordered by
/// first member) of `sets` connected by pairs with similarity ≥ τ (single linkage).
/// Pairs are visited in ascending mass and skipped by the length bound.
pub fn group<T: Item>(sets: &[&[T]], m: Measure, tau: f64) -> Vec<Vec<usize>> {
    let masses: Vec<u64> = sets.iter().map(|s| mass(s, m)).collect();
    let mut order: Vec<usize> = (0..sets.len()).collect();
    order.sort_by_key(|&i| masses[i]);
    let mut parent: Vec<usize> = (0..sets.len()).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for (oi, &i) in order.iter().enumerate() {
        if masses[i] == 0 {
            continue;
        }
        for &j in &order[oi + 1..] {
            if masses[i] as f64 >= tau * masses[j] as f64 || tau <= 0.0 {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                if ri != rj && similarity_at_least(sets[i], sets[j], m, tau) {
                    parent[ri.max(rj)] = ri.min(rj);
                }
            } else {
                break; // masses ascend: every later set is out of the length bound
            }
        }
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for i in 0..sets.len() {
        let r = find(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    let mut out: Vec<Vec<usize>> = groups.into_values().filter(|g| g.len() > 1).collect();
    out.sort_by_key(|g| g[0]);
    out
}
