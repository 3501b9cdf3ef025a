//! One shard of the lists: the entries of the signatures that share their top 16 bits, as
//! `(low 16 bits, document)` pairs in three runs.
//!
//! - **base**: most entries, two parallel arrays sorted by (low bits, document);
//! - **middle**: a smaller sorted run of the entries since the base was last rebuilt;
//! - **buffer**: at most [`PENDING`] new entries, unsorted.
//!
//! A full buffer is sorted and merged into the middle run; a middle run that has grown to
//! about `√(2·PENDING·|base|)` entries is merged into the base. Merging the buffer straight
//! into the base, as the previous layout did, copied the whole base every [`PENDING`]
//! entries: at 10M indexed pages (about 11,600 entries a shard) that was 120 entries moved
//! for every entry stored, and a quarter of a decision's time. With the middle run each
//! entry is moved about `2·√(|base|/(2·PENDING))` times (16 at 10M, 5 at 1M), for one more
//! short search a lookup. Runs are rebuilt into allocations of exactly their size, copying
//! the stretches between new entries whole, so memory stays at six bytes an entry.

use super::{prefetch, SHARD_BITS};

/// New entries of a shard wait in a small unsorted buffer until there are this many, then
/// are merged into its middle run.
pub(super) const PENDING: usize = 96;
/// Entries either side of a search's start whose lines are prefetched with it (a cache line
/// of `u16` either way).
const PREFETCH_SPAN: usize = 32;

/// How many of `keys` equal `key` (a loop the compiler turns into vector compares: the
/// buffer of a shard is scanned whole, and most scans find nothing).
#[inline]
fn count_equal(keys: &[u16], key: u16) -> u32 {
    keys.iter().fold(0u32, |n, &x| n + u32::from(x == key))
}

/// The first position of `key` (or where it would be) in the ascending `lo`: the low bits
/// of signature hashes are uniform, so the search starts where `key` would sit in a uniform
/// array and gallops from there (one or two cache lines instead of a binary search's
/// dozen).
#[inline]
pub(super) fn lower_bound(lo: &[u16], key: u16) -> usize {
    lower_bound_from(lo, key, (usize::from(key) * lo.len()) >> 16)
}

/// [`lower_bound`] starting from position `guess`.
#[inline]
fn lower_bound_from(lo: &[u16], key: u16, guess: usize) -> usize {
    let n = lo.len();
    if n == 0 {
        return 0;
    }
    let guess = guess.min(n - 1);
    if lo[guess] < key {
        // lo[a] < key: gallop forward to the first b with lo[b] >= key
        let (mut a, mut step) = (guess, 1);
        loop {
            let b = a + step;
            if b >= n || lo[b] >= key {
                let end = b.min(n);
                return a + 1 + lo[a + 1..end].partition_point(|&x| x < key);
            }
            a = b;
            step *= 2;
        }
    } else {
        // lo[b] >= key: gallop backward to the last a with lo[a] < key
        let (mut b, mut step) = (guess, 1);
        loop {
            if b < step {
                return lo[..b].partition_point(|&x| x < key);
            }
            let a = b - step;
            if lo[a] < key {
                return a + 1 + lo[a + 1..b].partition_point(|&x| x < key);
            }
            b = a;
            step *= 2;
        }
    }
}

/// How many leading entries of the run (`lo`, `doc`), sorted by (low bits, document), are
/// below `(key, d)`: a gallop from the start, for merges that walk a run front to back.
#[inline]
fn entries_below(lo: &[u16], doc: &[u32], key: u16, d: u32) -> usize {
    let n = lo.len();
    let mut bound = 1;
    while bound <= n && lo[bound - 1] < key {
        bound *= 2;
    }
    let from = bound / 2;
    let mut j = from + lo[from..bound.min(n)].partition_point(|&x| x < key);
    while j < n && lo[j] == key && doc[j] < d {
        j += 1;
    }
    j
}

/// Merges two runs sorted by (low bits, document) into a new run of exactly their size:
/// the stretches of `a` between `b`'s entries are copied whole (`b` is the run of new
/// entries, usually the shorter).
fn merge_runs(
    a_lo: &[u16],
    a_doc: &[u32],
    b_lo: &[u16],
    b_doc: &[u32],
) -> (Box<[u16]>, Box<[u32]>) {
    let n = a_lo.len() + b_lo.len();
    let (mut lo, mut doc) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut i = 0;
    for (&k, &d) in b_lo.iter().zip(b_doc) {
        let j = i + entries_below(&a_lo[i..], &a_doc[i..], k, d);
        lo.extend_from_slice(&a_lo[i..j]);
        doc.extend_from_slice(&a_doc[i..j]);
        lo.push(k);
        doc.push(d);
        i = j;
    }
    lo.extend_from_slice(&a_lo[i..]);
    doc.extend_from_slice(&a_doc[i..]);
    (lo.into_boxed_slice(), doc.into_boxed_slice())
}

/// Calls `f` with the document of every entry of `key` in a sorted run, searching from
/// `guess`.
#[inline]
fn run_for_each(lo: &[u16], doc: &[u32], key: u16, guess: usize, f: &mut impl FnMut(u32)) {
    let mut i = lower_bound_from(lo, key, guess);
    while i < lo.len() && lo[i] == key {
        f(doc[i]);
        i += 1;
    }
}

/// Bits of the keys within a base segment: the base's positions of the keys `s·2^13` are
/// kept in the shard's header ([`Shard::fences`]).
const SEGMENT_BITS: u32 = 13;
/// Base segments (8).
const SEGMENTS: usize = 1 << (16 - SEGMENT_BITS);

/// Removes `(key, d)` from a sorted run; whether it was there.
fn run_pull(lo: &mut Box<[u16]>, doc: &mut Box<[u32]>, key: u16, d: u32) -> bool {
    let start = lower_bound(lo, key);
    let end = start + lo[start..].partition_point(|&x| x == key);
    match doc[start..end].binary_search(&d) {
        Ok(k) => {
            let (mut l, mut v) = (
                std::mem::take(lo).into_vec(),
                std::mem::take(doc).into_vec(),
            );
            l.remove(start + k);
            v.remove(start + k);
            *lo = l.into_boxed_slice();
            *doc = v.into_boxed_slice();
            true
        }
        Err(_) => false,
    }
}

/// The size the middle run may reach before it is merged into a base of `base` entries:
/// `√(2·PENDING·base)` balances the two merges' copying (at least two buffers' worth).
#[inline]
fn middle_limit(base: usize) -> usize {
    (2 * PENDING * base).isqrt().max(2 * PENDING)
}

/// The entries of the signatures that share their top 16 bits (see the module's text). Six
/// bytes an entry, no per-signature allocation (most lists hold one document); the header
/// is two cache lines, aligned.
#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
pub(super) struct Shard {
    lo: Box<[u16]>,
    doc: Box<[u32]>,
    mid_lo: Box<[u16]>,
    mid_doc: Box<[u32]>,
    new_lo: Vec<u16>,
    new_doc: Vec<u32>,
    /// Where the base's segments start: `fences[s − 1]` is the position of the first key at
    /// or above `s·2^13`, for `s` in 1..8 (the last slot is unused). A search starts where
    /// its key would sit in a uniform segment instead of a uniform run: at 10M indexed
    /// pages a base holds about 11,600 entries and the uniform guess is off by ±54 of them
    /// (one standard deviation, two or three cache lines of keys), a segment's by ±19, which
    /// the lines prefetched either side cover. Unused (zero) while the base is longer than
    /// `u16::MAX` entries (an index of more than about 55 million pages).
    fences: [u16; SEGMENTS],
}

impl Shard {
    /// A shard of one sorted run (a snapshot's).
    pub(super) fn from_sorted(lo: Vec<u16>, doc: Vec<u32>) -> Shard {
        let mut s = Shard {
            lo: lo.into_boxed_slice(),
            doc: doc.into_boxed_slice(),
            ..Shard::default()
        };
        s.set_fences();
        s
    }

    /// The base run: keys and documents (all the entries after [`Shard::merge_all`]).
    pub(super) fn base(&self) -> (&[u16], &[u32]) {
        (&self.lo, &self.doc)
    }

    /// Sets [`Shard::fences`] for the base as it is now.
    fn set_fences(&mut self) {
        self.fences = [0; SEGMENTS];
        if self.lo.len() <= usize::from(u16::MAX) {
            for s in 1..SEGMENTS {
                let key = (s << SEGMENT_BITS) as u16;
                self.fences[s - 1] = self.lo.partition_point(|&x| x < key) as u16;
            }
        }
    }

    /// Where a search of the middle run for `key` starts: where it would sit in a uniform
    /// run (the middle run is short enough for that guess to be close).
    #[inline]
    fn middle_guess(&self, key: u16) -> usize {
        (usize::from(key) * self.mid_lo.len()) >> 16
    }

    /// Where a search of the base for `key` starts: where the key would sit in a uniform
    /// segment (see [`Shard::fences`]), or in a uniform base when the fences are not kept.
    #[inline]
    fn base_guess(&self, key: u16) -> usize {
        let n = self.lo.len();
        if n > usize::from(u16::MAX) {
            return (usize::from(key) * n) >> 16;
        }
        let s = usize::from(key >> SEGMENT_BITS);
        let start = if s == 0 {
            0
        } else {
            usize::from(self.fences[s - 1])
        };
        let end = if s + 1 == SEGMENTS {
            n
        } else {
            usize::from(self.fences[s])
        };
        let within = usize::from(key) & ((1 << SEGMENT_BITS) - 1);
        start + ((within * (end - start)) >> SEGMENT_BITS)
    }

    /// Whether a signature with low bits in `[first, last]` has an entry.
    pub(super) fn any_in(&self, first: u16, last: u16) -> bool {
        let in_run = |lo: &[u16]| {
            let i = lower_bound(lo, first);
            i < lo.len() && lo[i] <= last
        };
        in_run(&self.lo)
            || in_run(&self.mid_lo)
            || self.new_lo.iter().any(|&x| (first..=last).contains(&x))
    }

    /// Every signature with an entry, given this shard's number.
    pub(super) fn signatures(&self, shard: usize) -> impl Iterator<Item = u32> + '_ {
        let top = (shard as u32) << (32 - SHARD_BITS);
        self.lo
            .iter()
            .chain(self.mid_lo.iter())
            .chain(&self.new_lo)
            .map(move |&x| top | u32::from(x))
    }

    /// Every signature with an entry in the middle run or the buffer, given this shard's
    /// number.
    pub(super) fn recent_signatures(&self, shard: usize) -> impl Iterator<Item = u32> + '_ {
        let top = (shard as u32) << (32 - SHARD_BITS);
        self.mid_lo
            .iter()
            .chain(&self.new_lo)
            .map(move |&x| top | u32::from(x))
    }

    /// Calls `f` with every document in the list of the signature with low bits `lo`; the
    /// middle run and the buffer are searched only when `recent` (the signature's group may
    /// have entries there: [`super::recent`]).
    #[inline]
    pub(super) fn for_each(&self, lo: u16, recent: bool, f: &mut impl FnMut(u32)) {
        let (start, end) = self.base_range(lo);
        self.for_each_base(start, end, f);
        if recent {
            self.for_each_recent(lo, f);
        }
    }

    /// Where the entries of the signature with low bits `lo` lie in the base: `start..end`,
    /// empty when it has none there.
    #[inline]
    pub(super) fn base_range(&self, lo: u16) -> (usize, usize) {
        let start = lower_bound_from(&self.lo, lo, self.base_guess(lo));
        let mut end = start;
        while end < self.lo.len() && self.lo[end] == lo {
            end += 1;
        }
        (start, end)
    }

    /// Prefetches the line of the base's documents from position `at` on.
    #[inline]
    pub(super) fn prefetch_base_docs(&self, at: usize) {
        prefetch(self.doc.as_ptr().wrapping_add(at));
    }

    /// Calls `f` with the base's documents at positions `start..end` (a [`Shard::base_range`]).
    #[inline]
    pub(super) fn for_each_base(&self, start: usize, end: usize, f: &mut impl FnMut(u32)) {
        for &d in &self.doc[start..end] {
            f(d);
        }
    }

    /// Calls `f` with every document of the signature with low bits `lo` in the middle run
    /// and the buffer.
    #[inline]
    pub(super) fn for_each_recent(&self, lo: u16, f: &mut impl FnMut(u32)) {
        run_for_each(&self.mid_lo, &self.mid_doc, lo, self.middle_guess(lo), f);
        if count_equal(&self.new_lo, lo) > 0 {
            for (j, &x) in self.new_lo.iter().enumerate() {
                if x == lo {
                    f(self.new_doc[j]);
                }
            }
        }
    }

    /// Prefetches what a lookup of `lo` reads: the line the base's search starts from and
    /// the lines either side, and when `recent` the middle run's line of keys and of
    /// documents and the buffer. The base's documents are prefetched once the search has
    /// found where they are ([`Shard::prefetch_base_docs`]).
    #[inline]
    pub(super) fn prefetch_lookup(&self, lo: u16, recent: bool) {
        let n = self.lo.len();
        if n > 0 {
            let guess = self.base_guess(lo).min(n - 1);
            let at = self.lo.as_ptr();
            prefetch(at.wrapping_add(guess));
            prefetch(at.wrapping_add(guess.saturating_sub(PREFETCH_SPAN)));
            prefetch(at.wrapping_add((guess + PREFETCH_SPAN).min(n - 1)));
        }
        if !recent {
            return;
        }
        let m = self.mid_lo.len();
        if m > 0 {
            let guess = self.middle_guess(lo).min(m - 1);
            prefetch(self.mid_lo.as_ptr().wrapping_add(guess));
            prefetch(self.mid_doc.as_ptr().wrapping_add(guess));
        }
        // the buffer's lines (its start need not be aligned: the last line too)
        let k = self.new_lo.len();
        for i in (0..k).step_by(32) {
            prefetch(self.new_lo.as_ptr().wrapping_add(i));
        }
        if k > 0 {
            prefetch(self.new_lo.as_ptr().wrapping_add(k - 1));
        }
    }

    /// Prefetches the buffer's free slots, where [`Shard::push`] writes.
    #[inline]
    pub(super) fn prefetch_push(&self) {
        let k = self.new_lo.len();
        prefetch(self.new_lo.as_ptr().wrapping_add(k));
        prefetch(self.new_doc.as_ptr().wrapping_add(k));
    }

    /// Enters `(lo, doc)`; true when the middle run was merged into the base (the middle
    /// run and the buffer are then empty).
    pub(super) fn push(&mut self, lo: u16, doc: u32) -> bool {
        if self.new_lo.capacity() == 0 {
            self.new_lo.reserve_exact(PENDING);
            self.new_doc.reserve_exact(PENDING);
        }
        self.new_lo.push(lo);
        self.new_doc.push(doc);
        self.new_lo.len() >= PENDING && self.flush()
    }

    /// Sorts the buffer into the middle run, and the middle run into the base when it has
    /// reached [`middle_limit`]; whether it did the latter.
    fn flush(&mut self) -> bool {
        let k = self.new_lo.len();
        if k > 0 {
            // the buffer never holds more: push flushes at PENDING, pull only removes
            debug_assert!(k <= PENDING);
            let mut stack = [(0u16, 0u32); PENDING];
            let pairs = &mut stack[..k];
            for (p, (&l, &d)) in pairs.iter_mut().zip(self.new_lo.iter().zip(&self.new_doc)) {
                *p = (l, d);
            }
            pairs.sort_unstable();
            for (j, &(l, d)) in pairs.iter().enumerate() {
                self.new_lo[j] = l;
                self.new_doc[j] = d;
            }
            (self.mid_lo, self.mid_doc) =
                merge_runs(&self.mid_lo, &self.mid_doc, &self.new_lo, &self.new_doc);
            self.new_lo.clear();
            self.new_doc.clear();
        }
        if self.mid_lo.len() >= middle_limit(self.lo.len()) {
            self.fold();
            return true;
        }
        false
    }

    /// Merges the middle run into the base.
    fn fold(&mut self) {
        if self.mid_lo.is_empty() {
            return;
        }
        (self.lo, self.doc) = merge_runs(&self.lo, &self.doc, &self.mid_lo, &self.mid_doc);
        self.set_fences();
        self.mid_lo = Box::default();
        self.mid_doc = Box::default();
    }

    /// Merges every entry into the base (for a snapshot, which writes the base alone).
    pub(super) fn merge_all(&mut self) {
        self.flush();
        self.fold();
    }

    /// Removes the entry (lo, doc); whether it was there.
    pub(super) fn pull(&mut self, lo: u16, doc: u32) -> bool {
        if let Some(j) =
            (0..self.new_lo.len()).find(|&j| self.new_lo[j] == lo && self.new_doc[j] == doc)
        {
            self.new_lo.swap_remove(j);
            self.new_doc.swap_remove(j);
            return true;
        }
        if run_pull(&mut self.mid_lo, &mut self.mid_doc, lo, doc) {
            return true;
        }
        let found = run_pull(&mut self.lo, &mut self.doc, lo, doc);
        if found {
            self.set_fences();
        }
        found
    }

    pub(super) fn len(&self) -> usize {
        self.lo.len() + self.mid_lo.len() + self.new_lo.len()
    }

    /// (distinct signatures, of which shared by two documents or more, longest list).
    pub(super) fn shape(&self) -> (u64, u64, u64) {
        let mut all: Vec<u16> = self
            .lo
            .iter()
            .chain(self.mid_lo.iter())
            .chain(&self.new_lo)
            .copied()
            .collect();
        all.sort_unstable();
        let (mut distinct, mut shared, mut longest) = (0u64, 0u64, 0u64);
        for run in all.chunk_by(|a, b| a == b) {
            distinct += 1;
            shared += u64::from(run.len() > 1);
            longest = longest.max(run.len() as u64);
        }
        (distinct, shared, longest)
    }

    /// Bytes held, the header included.
    pub(super) fn bytes(&self) -> u64 {
        ((self.lo.len() + self.mid_lo.len() + self.new_lo.capacity()) * 2
            + (self.doc.len() + self.mid_doc.len() + self.new_doc.capacity()) * 4
            + std::mem::size_of::<Shard>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shard's entries, sorted, by brute force.
    fn entries(s: &Shard) -> Vec<(u16, u32)> {
        let mut v: Vec<(u16, u32)> =
            s.lo.iter()
                .copied()
                .zip(s.doc.iter().copied())
                .chain(s.mid_lo.iter().copied().zip(s.mid_doc.iter().copied()))
                .chain(s.new_lo.iter().copied().zip(s.new_doc.iter().copied()))
                .collect();
        v.sort_unstable();
        v
    }

    /// The fences are where a search of every key would find it.
    fn fences_hold(s: &Shard) -> bool {
        (0..=u16::MAX).step_by(7).all(|k| {
            let g = s.base_guess(k);
            g <= s.lo.len() && lower_bound_from(&s.lo, k, g) == s.lo.partition_point(|&x| x < k)
        }) && (1..SEGMENTS).all(|seg| {
            usize::from(s.fences[seg - 1])
                == s.lo
                    .partition_point(|&x| usize::from(x) < seg << SEGMENT_BITS)
        })
    }

    fn sorted(lo: &[u16], doc: &[u32]) -> bool {
        lo.windows(2)
            .zip(doc.windows(2))
            .all(|(l, d)| (l[0], d[0]) < (l[1], d[1]))
    }

    #[test]
    fn header_is_two_lines() {
        assert_eq!(std::mem::size_of::<Shard>(), 128);
        assert_eq!(std::mem::align_of::<Shard>(), 64);
    }

    #[test]
    fn runs_stay_sorted_and_lookups_find_every_entry() {
        let mut s = Shard::default();
        let mut want: Vec<(u16, u32)> = Vec::new();
        let mut x = 0x2545_f491_u32;
        for doc in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // few distinct keys, so that lists of many documents cross the runs
            let lo = (x % 676) as u16 * 97;
            s.push(lo, doc);
            want.push((lo, doc));
            if doc % 997 == 0 {
                assert!(sorted(&s.lo, &s.doc) && sorted(&s.mid_lo, &s.mid_doc));
                assert!(fences_hold(&s));
                assert!(s.mid_lo.len() <= middle_limit(s.lo.len()) + PENDING);
            }
        }
        want.sort_unstable();
        assert_eq!(entries(&s), want);
        assert!(!s.lo.is_empty() && !s.mid_lo.is_empty() && !s.new_lo.is_empty());
        for key in [0u16, 97, 97 * 508, 5, u16::MAX] {
            let mut got = Vec::new();
            s.for_each(key, true, &mut |d| got.push(d));
            got.sort_unstable();
            let exp: Vec<u32> = want.iter().filter(|e| e.0 == key).map(|e| e.1).collect();
            assert_eq!(got, exp, "key {key}");
        }
        // removals from each run
        let (b, m, n) = (
            (s.lo[7], s.doc[7]),
            (s.mid_lo[3], s.mid_doc[3]),
            (s.new_lo[0], s.new_doc[0]),
        );
        for (lo, d) in [b, m, n] {
            assert!(s.pull(lo, d));
            assert!(!s.pull(lo, d));
            want.retain(|&e| e != (lo, d));
        }
        assert_eq!(entries(&s), want);
        assert!(fences_hold(&s));
        s.merge_all();
        assert!(fences_hold(&s));
        assert!(s.mid_lo.is_empty() && s.new_lo.is_empty());
        assert!(sorted(&s.lo, &s.doc));
        assert_eq!(entries(&s), want);
    }

    #[test]
    fn a_base_too_long_for_fences_is_searched_from_the_uniform_guess() {
        let n = 70_000u32;
        let lo: Vec<u16> = (0..n)
            .map(|i| (u64::from(i) * 65_536 / u64::from(n)) as u16)
            .collect();
        let doc: Vec<u32> = (0..n).collect();
        let s = Shard::from_sorted(lo.clone(), doc);
        assert_eq!(s.fences, [0; SEGMENTS]);
        for key in [0u16, 1, 8_192, 40_000, u16::MAX] {
            let mut got = Vec::new();
            s.for_each(key, true, &mut |d| got.push(d));
            let want: Vec<u32> = (0..n).filter(|&i| lo[i as usize] == key).collect();
            assert_eq!(got, want, "key {key}");
        }
    }

    #[test]
    fn merge_runs_interleaves_equal_keys_by_document() {
        let (lo, doc) = merge_runs(
            &[1, 1, 1, 4],
            &[2, 5, 9, 0],
            &[0, 1, 1, 4, 9],
            &[7, 1, 6, 3, 0],
        );
        assert_eq!(&*lo, &[0, 1, 1, 1, 1, 1, 4, 4, 9]);
        assert_eq!(&*doc, &[7, 1, 2, 5, 6, 9, 0, 3, 0]);
        let (lo, doc) = merge_runs(&[], &[], &[3], &[1]);
        assert_eq!((&*lo, &*doc), (&[3u16][..], &[1u32][..]));
    }
}
