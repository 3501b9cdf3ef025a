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

/// The least intersection mass `i ≤ min(ma, mb)` with `reaches(i, ma, mb, τ)`, if any.
/// Found from the real-valued bound `τ(ma+mb)/(1+τ)` and settled with `reaches` itself, so
/// it agrees with it exactly.
pub fn least_reaching(ma: u64, mb: u64, tau: f64) -> Option<u64> {
    let top = ma.min(mb);
    let guess = ((tau * (ma + mb) as f64) / (1.0 + tau)).floor();
    let mut i = if guess.is_finite() && guess > 0.0 {
        (guess as u64).min(top)
    } else {
        0
    };
    // step down while the one below still reaches, then up until it does
    while i > 0 && reaches(i - 1, ma, mb, tau) {
        i -= 1;
    }
    while !reaches(i, ma, mb, tau) {
        if i >= top {
            return None;
        }
        i += 1;
    }
    Some(i)
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
    // the least intersection that reaches τ (`reaches` is monotone in the intersection):
    // the merge then compares integers only
    let Some(need) = least_reaching(ma, mb, tau) else {
        return false;
    };
    let (mut ra, mut rb) = (ma, mb);
    let (mut i, mut j, mut inter) = (0, 0, 0u64);
    loop {
        if inter >= need {
            return true;
        }
        if inter + ra.min(rb) < need {
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

/// Union-find over set indices, smaller index as the root.
struct Components(Vec<usize>);

impl Components {
    fn new(n: usize) -> Components {
        Components((0..n).collect())
    }
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        self.0[ra.max(rb)] = ra.min(rb);
    }
    /// The components of two or more members, ascending, ordered by first member.
    fn groups(mut self) -> Vec<Vec<usize>> {
        let mut groups: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for i in 0..self.0.len() {
            let r = self.find(i);
            groups.entry(r).or_default().push(i);
        }
        let mut out: Vec<Vec<usize>> = groups.into_values().filter(|g| g.len() > 1).collect();
        out.sort_by_key(|g| g[0]);
        out
    }
}

/// Result-set deduplication: the groups (two or more members, ascending indices, ordered by
/// first member) of `sets` connected by pairs with similarity ≥ τ (single linkage).
///
/// For the Jaccard measure only pairs that share a signature in their prefixes are
/// verified (prefix filtering, All-Pairs): in one global order of the signatures, rarest
/// in the request first, two sets with `J ≥ τ` share at least `⌈τ·max(|a|,|b|)⌉`
/// signatures, so their prefixes of `|x| − ⌈τ·|x|⌉ + 1` signatures meet, and where that
/// bound is two or more, their prefixes one longer meet twice: only such pairs are verified.
/// A set whose prefix holds only its own signatures is no candidate; pairs are verified
/// once, and not at all once in one group. Equal to [`group_pairwise`], which the weighted measure (and
/// τ ≤ 0) uses.
pub fn group<T: Item>(sets: &[&[T]], m: Measure, tau: f64) -> Vec<Vec<usize>> {
    if m != Measure::Jaccard || tau <= 0.0 || sets.len() < 2 || sets.len() > u32::MAX as usize {
        return group_pairwise(sets, m, tau);
    }
    // the table is reused by the thread's next call (no allocation, no page faults)
    thread_local! {
        static TABLE: std::cell::RefCell<KeyTable> = std::cell::RefCell::new(KeyTable::new(0));
    }
    TABLE.with(|t| match t.try_borrow_mut() {
        Ok(mut table) => group_with(&mut table, sets, m, tau),
        Err(_) => group_with(&mut KeyTable::new(0), sets, m, tau),
    })
}

fn group_with<T: Item>(
    table: &mut KeyTable,
    sets: &[&[T]],
    m: Measure,
    tau: f64,
) -> Vec<Vec<usize>> {
    let n = sets.len();
    // how many sets hold each signature, estimated from above by a sketch of counters
    // (colliding signatures add up): the global order is (estimate, hash), rarest first.
    // Any order that is the same for every set keeps prefix filtering exact; this one puts
    // the signatures common in the result set last, so they rarely make candidates.
    table.sketch.fill(0);
    for s in sets {
        for x in s.iter() {
            let c = &mut table.sketch[KeyTable::cell(x.key())];
            *c = c.saturating_add(1);
        }
    }
    let total: usize = sets.iter().map(|s| s.len()).sum();
    table.reset(total);
    let mut shared: Vec<(u8, u32)> = Vec::new();
    let mut small = vec![false; n];
    for (i, s) in sets.iter().enumerate() {
        // a slightly longer prefix is always safe: round the overlap bound down
        let overlap = ((tau * s.len() as f64) - 1e-9).ceil().max(0.0) as usize;
        // two sets that must share at least two signatures share two within prefixes one
        // longer (the first two common signatures in the order): a pair is verified only
        // once its prefixes meet twice, which drops the pairs one rare signature joins
        small[i] = overlap < 2;
        let extra = if small[i] { 1 } else { 2 };
        let prefix = (s.len() + extra).saturating_sub(overlap).min(s.len());
        shared.clear();
        for x in s.iter() {
            let est = table.sketch[KeyTable::cell(x.key())];
            if est > 1 {
                shared.push((est, x.key()));
            }
        }
        // an estimate of 1 is exact: only this set holds the signature
        let own = s.len() - shared.len();
        if own >= prefix {
            continue; // its whole prefix is its own: it reaches τ with no other set
        }
        let take = prefix - own;
        if take < shared.len() {
            shared.select_nth_unstable(take);
            shared.truncate(take);
        }
        for &(_, key) in &shared {
            table.post(key, i as u32);
        }
    }
    let mut comps = Components::new(n);
    // prefix meetings per pair: 0, 1, 2 (verified), 3 (verified, done)
    let mut met = vec![0u8; n * n];
    let mut members: Vec<u32> = Vec::new();
    let posted = table.posted();
    for head in posted {
        table.members(head, &mut members);
        members.sort_unstable();
        for (a, &i) in members.iter().enumerate() {
            for &j in &members[a + 1..] {
                let (i, j) = (i as usize, j as usize);
                let c = &mut met[i * n + j];
                if *c >= 2 {
                    continue;
                }
                *c += 1;
                let need = if small[i] || small[j] { 1 } else { 2 };
                if *c < need {
                    continue;
                }
                *c = 2;
                if comps.find(i) != comps.find(j) && similarity_at_least(sets[i], sets[j], m, tau) {
                    comps.union(i, j);
                }
            }
        }
    }
    comps.groups()
}

/// An open-addressing table of the prefix signatures of one request: which prefixes hold
/// each (a linked list in one arena, no allocation per key).
struct KeyTable {
    /// `(key, head of the posting list + 1)`; head 0 marks an empty slot.
    slots: Vec<(u32, u32)>,
    mask: usize,
    /// `(set, next + 1)`.
    arena: Vec<(u32, u32)>,
    /// Slots with a posting list.
    heads: Vec<u32>,
    /// Saturating counters of the signatures' sets, by [`KeyTable::cell`].
    sketch: Vec<u8>,
}

impl KeyTable {
    fn new(keys: usize) -> KeyTable {
        let cap = (keys * 2).next_power_of_two().max(16);
        KeyTable {
            slots: vec![(0, 0); cap],
            mask: cap - 1,
            arena: Vec::new(),
            heads: Vec::new(),
            sketch: vec![0; 1 << 16],
        }
    }
    /// The sketch counter of a signature.
    #[inline]
    fn cell(key: u32) -> usize {
        (key.wrapping_mul(0x9E37_79B1) >> 16) as usize
    }
    /// Empties the table for `keys` keys (at most half full).
    fn reset(&mut self, keys: usize) {
        if keys * 2 > self.slots.len() {
            let sketch = std::mem::take(&mut self.sketch);
            *self = KeyTable::new(keys);
            self.sketch = sketch;
            return;
        }
        for &at in &self.heads {
            self.slots[at as usize] = (0, 0);
        }
        self.arena.clear();
        self.heads.clear();
    }
    #[inline]
    fn slot(&self, key: u32) -> usize {
        let mut at = (key.wrapping_mul(0x9E37_79B1) as usize) & self.mask;
        loop {
            let (k, head) = self.slots[at];
            if head == 0 || k == key {
                return at;
            }
            at = (at + 1) & self.mask;
        }
    }
    fn post(&mut self, key: u32, set: u32) {
        let at = self.slot(key);
        let head = self.slots[at].1;
        if head == 0 {
            self.heads.push(at as u32);
            self.slots[at].0 = key;
        }
        self.arena.push((set, head));
        self.slots[at].1 = self.arena.len() as u32;
    }
    /// The slots with two or more sets in their posting list.
    fn posted(&self) -> Vec<u32> {
        self.heads
            .iter()
            .copied()
            .filter(|&at| {
                let head = self.slots[at as usize].1;
                self.arena[head as usize - 1].1 != 0
            })
            .collect()
    }
    fn members(&self, at: u32, out: &mut Vec<u32>) {
        out.clear();
        let mut next = self.slots[at as usize].1;
        while next != 0 {
            let (set, n) = self.arena[next as usize - 1];
            out.push(set);
            next = n;
        }
    }
}

/// [`group`] by verifying every pair within the length bound (visited in ascending mass):
/// the reference the prefix-filtered version is tested against.
pub fn group_pairwise<T: Item>(sets: &[&[T]], m: Measure, tau: f64) -> Vec<Vec<usize>> {
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
    for i in 0..sets.len() {
        find(&mut parent, i);
    }
    Components(parent).groups()
}
