//! One shard of the lists: the entries of the signatures that share their top 16 bits, as
//! `(low 16 bits, document)` pairs in three runs.
//!
//! - **base**: most entries, sorted by (low bits, document) and packed in about four bytes
//!   an entry ([`super::base`]);
//! - **middle**: a smaller sorted run of the entries since the base was last rebuilt;
//! - **buffer**: at most [`PENDING`] new entries, unsorted.
//!
//! A full buffer is sorted and merged into the middle run; a middle run that has grown to
//! about `√(2·PENDING·|base|)` entries is merged into the base. Merging the buffer straight
//! into the base, as the previous layout did, copied the whole base every [`PENDING`]
//! entries: at 10M indexed pages (about 11,600 entries a shard) that was 120 entries moved
//! for every entry stored, and a quarter of a decision's time. With the middle run each
//! entry is moved about `2·√(|base|/(2·PENDING))` times (16 at 10M, 5 at 1M), for one more
//! short search a lookup. Runs are rebuilt into allocations of exactly their size: the
//! middle run at six bytes an entry, copying the stretches between new entries whole, the
//! base likewise while its packing stays, and packed anew when it changes.
//!
//! The header is one cache line: a run is one allocation (its documents, then its keys), so
//! it takes one pointer and a length instead of two of each, and the buffer is one
//! allocation of fixed size behind a thin pointer. A lookup that outgrew the caches pays
//! for every line it asks for (the core keeps only so many misses in flight), and every
//! lookup and every insert reads a header.

use std::mem::MaybeUninit;

use super::base::{lower_bound, lower_bound_from, Base};
use super::layout::{prefetch, SHARD_BITS};

/// New entries of a shard wait in a small unsorted buffer until there are this many, then
/// are merged into its middle run.
pub(super) const PENDING: usize = 96;

/// How many of `keys` equal `key` (a loop the compiler turns into vector compares: the
/// buffer of a shard is scanned whole, and most scans find nothing).
#[inline]
fn count_equal(keys: &[u16], key: u16) -> u32 {
    keys.iter().fold(0u32, |n, &x| n + u32::from(x == key))
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

/// A sorted run of `n` entries in one allocation of `n + ⌈n/2⌉` words: the documents, then
/// the keys two to a word. `n` is not stored: `⌊2·len/3⌋` gives it back for every `n`.
#[derive(Debug, Clone, Default)]
struct Run {
    words: Box<[u32]>,
}

impl Run {
    /// A run of `n` entries written by `fill(keys, docs)`.
    #[cfg(test)]
    fn build(n: usize, fill: impl FnOnce(&mut [u16], &mut [u32])) -> Run {
        let mut words = vec![0u32; n + n.div_ceil(2)].into_boxed_slice();
        let (doc, keys) = words.split_at_mut(n);
        // SAFETY: `keys` holds ⌈n/2⌉ words, room for `n` u16 values; u16's alignment (2)
        // divides u32's, every bit pattern is a valid u16, and the slice borrows `keys`
        // mutably for its whole life, so nothing else reads or writes those bytes meanwhile.
        let lo = unsafe { std::slice::from_raw_parts_mut(keys.as_mut_ptr().cast::<u16>(), n) };
        fill(lo, doc);
        Run { words }
    }

    /// A run of `n` entries written by `fill(keys, docs)`, which must write every one of
    /// them: the allocation is not zeroed first (a merge writes each entry once; zeroing
    /// a base of ~70 KB first was a pass over cold memory of its own).
    fn build_whole(
        n: usize,
        fill: impl FnOnce(&mut [MaybeUninit<u16>], &mut [MaybeUninit<u32>]),
    ) -> Run {
        let len = n + n.div_ceil(2);
        let mut words = Box::<[u32]>::new_uninit_slice(len);
        if let Some(last) = words.last_mut() {
            // the upper half of the last word is padding when `n` is odd
            last.write(0);
        }
        let (doc, keys) = words.split_at_mut(n);
        // SAFETY: `keys` holds ⌈n/2⌉ words, room for `n` u16 values; u16's alignment (2)
        // divides u32's, and the slice borrows `keys` mutably for its whole life.
        let lo = unsafe {
            std::slice::from_raw_parts_mut(keys.as_mut_ptr().cast::<MaybeUninit<u16>>(), n)
        };
        fill(lo, doc);
        // SAFETY: `fill` wrote all `n` documents and `n` keys (its contract: each caller's
        // stretches cover `0..n`, and `put` checks each stretch's length), and the padding
        // was written above.
        Run {
            words: unsafe { words.assume_init() },
        }
    }

    /// A run of the entries `(lo[i], doc[i])` (the same length).
    #[cfg(test)]
    fn from_parts(lo: &[u16], doc: &[u32]) -> Run {
        debug_assert_eq!(lo.len(), doc.len());
        Run::build(lo.len(), |l, d| {
            l.copy_from_slice(lo);
            d.copy_from_slice(doc);
        })
    }

    #[inline]
    fn len(&self) -> usize {
        self.words.len() * 2 / 3
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The keys, ascending.
    #[inline]
    fn lo(&self) -> &[u16] {
        let n = self.len();
        let keys = &self.words[n..];
        // SAFETY: as in `Run::build`: ⌈n/2⌉ words hold `n` u16 values, alignment divides,
        // any bits are a valid u16, and the shared borrow of `keys` outlives the slice.
        unsafe { std::slice::from_raw_parts(keys.as_ptr().cast::<u16>(), n) }
    }

    /// The documents, in the keys' order.
    #[inline]
    fn doc(&self) -> &[u32] {
        &self.words[..self.len()]
    }
}

/// The buffer of a shard's new entries, unsorted: one allocation, made at the first push.
#[derive(Debug, Clone)]
struct Buffer {
    lo: [u16; PENDING],
    doc: [u32; PENDING],
}

/// Merges two runs sorted by (low bits, document) into a new run of exactly their size:
/// the stretches of `a` between `b`'s entries are copied whole (`b` is the run of new
/// entries, usually the shorter).
fn merge_runs(a_lo: &[u16], a_doc: &[u32], b_lo: &[u16], b_doc: &[u32]) -> Run {
    let n = a_lo.len() + b_lo.len();
    Run::build_whole(n, |lo, doc| {
        let (mut i, mut o) = (0, 0);
        for (&k, &d) in b_lo.iter().zip(b_doc) {
            let j = i + entries_below(&a_lo[i..], &a_doc[i..], k, d);
            let m = o + (j - i);
            put(&mut lo[o..m], &a_lo[i..j]);
            put(&mut doc[o..m], &a_doc[i..j]);
            lo[m].write(k);
            doc[m].write(d);
            o = m + 1;
            i = j;
        }
        put(&mut lo[o..], &a_lo[i..]);
        put(&mut doc[o..], &a_doc[i..]);
    })
}

/// Writes `src` into `dst` (the same length: checked).
#[inline]
fn put<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T]) {
    assert_eq!(dst.len(), src.len());
    // SAFETY: the lengths are equal, `MaybeUninit<T>` has `T`'s layout, and a shared and
    // a mutable borrow cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<T>(), src.len()) }
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

/// Removes `(key, d)` from a sorted run; whether it was there.
fn run_pull(run: &mut Run, key: u16, d: u32) -> bool {
    let (lo, doc) = (run.lo(), run.doc());
    let start = lower_bound(lo, key);
    let end = start + lo[start..].partition_point(|&x| x == key);
    match doc[start..end].binary_search(&d) {
        Ok(k) => {
            let at = start + k;
            *run = Run::build_whole(lo.len() - 1, |l, v| {
                put(&mut l[..at], &lo[..at]);
                put(&mut l[at..], &lo[at + 1..]);
                put(&mut v[..at], &doc[..at]);
                put(&mut v[at..], &doc[at + 1..]);
            });
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

/// The entries of the signatures that share their top 16 bits (see the module's text). About
/// four bytes an entry in the base and six in the middle run, no per-signature allocation
/// (most lists hold one document); the header is one cache line, aligned.
#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
pub(super) struct Shard {
    base: Base,
    mid: Run,
    buf: Option<Box<Buffer>>,
    /// Entries in the buffer.
    buf_len: u8,
}

impl Shard {
    /// A shard of the entries `(lo[i], doc[i])`, sorted by (low bits, document), all in
    /// its base (a snapshot's).
    pub(super) fn from_sorted(lo: &[u16], doc: &[u32]) -> Shard {
        Shard {
            base: Base::from_parts(lo, doc),
            ..Shard::default()
        }
    }

    /// Entries in the base.
    #[cfg(test)]
    pub(super) fn base_len(&self) -> usize {
        self.base.len()
    }

    /// The buffer's keys and documents.
    #[inline]
    fn pending(&self) -> (&[u16], &[u32]) {
        match &self.buf {
            Some(b) => {
                let k = usize::from(self.buf_len);
                (&b.lo[..k], &b.doc[..k])
            }
            None => (&[], &[]),
        }
    }

    /// Where a search of the middle run for `key` starts: where it would sit in a uniform
    /// run (the middle run is short enough for that guess to be close).
    #[inline]
    fn middle_guess(&self, key: u16) -> usize {
        (usize::from(key) * self.mid.len()) >> 16
    }

    /// Whether a signature with low bits in `[first, last]` has an entry.
    pub(super) fn any_in(&self, first: u16, last: u16) -> bool {
        let in_run = |lo: &[u16]| {
            let i = lower_bound(lo, first);
            i < lo.len() && lo[i] <= last
        };
        self.base.any_in(first, last)
            || in_run(self.mid.lo())
            || self
                .pending()
                .0
                .iter()
                .any(|&x| (first..=last).contains(&x))
    }

    /// Calls `f` with every signature with an entry (once an entry), given this shard's
    /// number, base first: loops, for the passes over every entry.
    #[inline]
    pub(super) fn for_each_signature(&self, shard: usize, mut f: impl FnMut(u32)) {
        let top = (shard as u32) << (32 - SHARD_BITS);
        self.base.for_each_key(|x| f(top | u32::from(x)));
        for &x in self.mid.lo().iter().chain(self.pending().0) {
            f(top | u32::from(x));
        }
    }

    /// Every signature with an entry, given this shard's number: the iterator form, kept as
    /// the tests' oracle for [`Shard::for_each_signature`].
    #[cfg(test)]
    pub(super) fn signatures(&self, shard: usize) -> impl Iterator<Item = u32> + '_ {
        let top = (shard as u32) << (32 - SHARD_BITS);
        self.base
            .keys()
            .chain(self.mid.lo().iter().copied())
            .chain(self.pending().0.iter().copied())
            .map(move |x| top | u32::from(x))
    }

    /// Every signature with an entry in the middle run or the buffer, given this shard's
    /// number.
    pub(super) fn recent_signatures(&self, shard: usize) -> impl Iterator<Item = u32> + '_ {
        let top = (shard as u32) << (32 - SHARD_BITS);
        self.mid
            .lo()
            .iter()
            .chain(self.pending().0)
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
        self.base.range(lo)
    }

    /// Prefetches the lines of the base's keys that a lookup of `lo` searches, once the
    /// lines [`Shard::prefetch_lookup`] asked for are on their way ([`Base::prefetch_bucket`]).
    #[inline]
    pub(super) fn prefetch_base_keys(&self, lo: u16) {
        self.base.prefetch_bucket(lo);
    }

    /// Prefetches the line of the base's documents from position `at` on.
    #[inline]
    pub(super) fn prefetch_base_docs(&self, at: usize) {
        self.base.prefetch_doc(at);
    }

    /// Calls `f` with the base's documents at positions `start..end` (a [`Shard::base_range`]).
    #[inline]
    pub(super) fn for_each_base(&self, start: usize, end: usize, f: &mut impl FnMut(u32)) {
        for i in start..end {
            f(self.base.doc(i));
        }
    }

    /// Calls `f` with every document of the signature with low bits `lo` in the middle run
    /// and the buffer.
    #[inline]
    pub(super) fn for_each_recent(&self, lo: u16, f: &mut impl FnMut(u32)) {
        run_for_each(self.mid.lo(), self.mid.doc(), lo, self.middle_guess(lo), f);
        let (keys, docs) = self.pending();
        if count_equal(keys, lo) > 0 {
            for (j, &x) in keys.iter().enumerate() {
                if x == lo {
                    f(docs[j]);
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
        self.base.prefetch_lookup(lo);
        if !recent {
            return;
        }
        let m = self.mid.len();
        if m > 0 {
            let guess = self.middle_guess(lo).min(m - 1);
            prefetch(self.mid.lo().as_ptr().wrapping_add(guess));
            prefetch(self.mid.doc().as_ptr().wrapping_add(guess));
        }
        // the buffer's lines of keys (its start need not be aligned: the last line too)
        let keys = self.pending().0;
        for i in (0..keys.len()).step_by(32) {
            prefetch(keys.as_ptr().wrapping_add(i));
        }
        if let Some(last) = keys.last() {
            prefetch(last);
        }
    }

    /// Prefetches the buffer's free slots, where [`Shard::push`] writes.
    #[inline]
    pub(super) fn prefetch_push(&self) {
        if let Some(b) = &self.buf {
            let k = usize::from(self.buf_len).min(PENDING - 1);
            prefetch(&b.lo[k]);
            prefetch(&b.doc[k]);
        }
    }

    /// Enters `(lo, doc)`; true when the middle run was merged into the base (the middle
    /// run and the buffer are then empty).
    pub(super) fn push(&mut self, lo: u16, doc: u32) -> bool {
        let b = self.buf.get_or_insert_with(|| {
            Box::new(Buffer {
                lo: [0; PENDING],
                doc: [0; PENDING],
            })
        });
        let k = usize::from(self.buf_len);
        b.lo[k] = lo;
        b.doc[k] = doc;
        self.buf_len += 1;
        usize::from(self.buf_len) >= PENDING && self.flush()
    }

    /// Sorts the buffer into the middle run, and the middle run into the base when it has
    /// reached [`middle_limit`]; whether it did the latter.
    fn flush(&mut self) -> bool {
        if self.buf_len > 0 {
            self.mid = self.mid_with_buffer();
            self.buf_len = 0;
        }
        if self.mid.len() >= middle_limit(self.base.len()) {
            self.fold();
            return true;
        }
        false
    }

    /// Merges the middle run into the base.
    fn fold(&mut self) {
        if self.mid.is_empty() {
            return;
        }
        self.base = self.base.merge(self.mid.lo(), self.mid.doc());
        self.mid = Run::default();
    }

    /// The middle run with the buffer's entries merged in (a new run; the shard is left as
    /// it is).
    fn mid_with_buffer(&self) -> Run {
        let k = usize::from(self.buf_len);
        // the buffer never holds more: push flushes at PENDING, pull only removes
        debug_assert!(k <= PENDING);
        let mut stack = [(0u16, 0u32); PENDING];
        let pairs = &mut stack[..k];
        let (keys, docs) = self.pending();
        for (p, (&l, &d)) in pairs.iter_mut().zip(keys.iter().zip(docs)) {
            *p = (l, d);
        }
        pairs.sort_unstable();
        let mut lo = [0u16; PENDING];
        let mut doc = [0u32; PENDING];
        for (j, &(l, d)) in pairs.iter().enumerate() {
            lo[j] = l;
            doc[j] = d;
        }
        merge_runs(self.mid.lo(), self.mid.doc(), &lo[..k], &doc[..k])
    }

    /// Merges every entry into the base.
    #[cfg(test)]
    pub(super) fn merge_all(&mut self) {
        self.flush();
        self.fold();
    }

    /// Calls `f` with every entry, sorted by (low bits, document), the shard left as it is:
    /// the base decoded when nothing is outside it, else merged with the other runs as
    /// [`Shard::flush`] and [`Shard::fold`] merge them. A snapshot writes a shard at a time
    /// this way, so that writing it changes nothing in the lists and holds one shard's copy
    /// at most beside them.
    pub(super) fn with_entries<R>(&self, f: impl FnOnce(&[u16], &[u32]) -> R) -> R {
        let recent = self.mid_with_buffer();
        let (mut lo, mut doc) = (Vec::new(), Vec::new());
        self.base.decode_into(&mut lo, &mut doc);
        if recent.is_empty() {
            return f(&lo, &doc);
        }
        let all = merge_runs(&lo, &doc, recent.lo(), recent.doc());
        f(all.lo(), all.doc())
    }

    /// Removes the entry (lo, doc); whether it was there.
    pub(super) fn pull(&mut self, lo: u16, doc: u32) -> bool {
        let k = usize::from(self.buf_len);
        if let Some(b) = &mut self.buf {
            if let Some(j) = (0..k).find(|&j| b.lo[j] == lo && b.doc[j] == doc) {
                b.lo[j] = b.lo[k - 1];
                b.doc[j] = b.doc[k - 1];
                self.buf_len -= 1;
                return true;
            }
        }
        if run_pull(&mut self.mid, lo, doc) {
            return true;
        }
        let (start, end) = self.base.range(lo);
        let Some(at) = (start..end).find(|&i| self.base.doc(i) == doc) else {
            return false;
        };
        self.base = self.base.without(at);
        true
    }

    /// Keeps the entries whose document `keep` says to keep, every one in a new base (the
    /// shard left as it was when all are kept); how many went. Many removals rebuild the
    /// runs once here, where [`Shard::pull`] rebuilds a run for every entry.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) -> usize {
        if self.len() == 0 {
            return 0;
        }
        let kept = self.with_entries(|lo, doc| {
            let (mut l, mut d) = (Vec::with_capacity(lo.len()), Vec::with_capacity(lo.len()));
            for (&k, &x) in lo.iter().zip(doc) {
                if keep(x) {
                    l.push(k);
                    d.push(x);
                }
            }
            (l.len() < lo.len()).then(|| Base::from_parts(&l, &d))
        });
        let Some(base) = kept else {
            return 0;
        };
        let gone = self.len() - base.len();
        self.base = base;
        self.mid = Run::default();
        self.buf_len = 0;
        gone
    }

    pub(super) fn len(&self) -> usize {
        self.base.len() + self.mid.len() + usize::from(self.buf_len)
    }

    /// (distinct signatures, of which shared by two documents or more, longest list).
    pub(super) fn shape(&self) -> (u64, u64, u64) {
        let mut all: Vec<u16> = self
            .base
            .keys()
            .chain(self.mid.lo().iter().copied())
            .chain(self.pending().0.iter().copied())
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
        (self.base.bytes()
            + self.mid.words.len() * 4
            + self
                .buf
                .as_ref()
                .map_or(0, |_| std::mem::size_of::<Buffer>())
            + std::mem::size_of::<Shard>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shard's entries, sorted, by brute force.
    fn entries(s: &Shard) -> Vec<(u16, u32)> {
        let runs = [(s.mid.lo(), s.mid.doc()), s.pending()];
        let mut v: Vec<(u16, u32)> = runs
            .iter()
            .flat_map(|(lo, doc)| lo.iter().copied().zip(doc.iter().copied()))
            .chain(s.base.iter())
            .collect();
        v.sort_unstable();
        v
    }

    /// Every key of the base is found where it lies, by the lookup a query makes.
    fn base_found(s: &Shard) -> bool {
        let all: Vec<(u16, u32)> = s.base.iter().collect();
        all.chunk_by(|a, b| a.0 == b.0).all(|run| {
            let mut got = Vec::new();
            let (start, end) = s.base_range(run[0].0);
            s.for_each_base(start, end, &mut |d| got.push(d));
            got == run.iter().map(|e| e.1).collect::<Vec<_>>()
        })
    }

    fn base_sorted(s: &Shard) -> bool {
        let (lo, doc): (Vec<u16>, Vec<u32>) = s.base.iter().unzip();
        sorted(&lo, &doc)
    }

    fn sorted(lo: &[u16], doc: &[u32]) -> bool {
        lo.windows(2)
            .zip(doc.windows(2))
            .all(|(l, d)| (l[0], d[0]) < (l[1], d[1]))
    }

    #[test]
    fn header_is_one_line() {
        assert_eq!(std::mem::size_of::<Shard>(), 64);
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
                assert!(base_sorted(&s) && sorted(s.mid.lo(), s.mid.doc()));
                assert!(base_found(&s));
                assert!(s.mid.len() <= middle_limit(s.base.len()) + PENDING);
            }
        }
        want.sort_unstable();
        assert_eq!(entries(&s), want);
        assert!(s.base.len() > 0 && !s.mid.is_empty() && s.buf_len > 0);
        // what a snapshot writes: every entry of the three runs, in order, the runs kept
        let (base, mid) = (s.base.len(), s.mid.len());
        let merged: Vec<(u16, u32)> =
            s.with_entries(|lo, doc| lo.iter().copied().zip(doc.iter().copied()).collect());
        assert_eq!(merged, want);
        assert_eq!((s.base.len(), s.mid.len()), (base, mid));
        for key in [0u16, 97, 97 * 508, 5, u16::MAX] {
            let mut got = Vec::new();
            s.for_each(key, true, &mut |d| got.push(d));
            got.sort_unstable();
            let exp: Vec<u32> = want.iter().filter(|e| e.0 == key).map(|e| e.1).collect();
            assert_eq!(got, exp, "key {key}");
        }
        // removals from each run
        let (b, m, n) = (
            s.base.iter().nth(7).expect("a base of more than 7 entries"),
            (s.mid.lo()[3], s.mid.doc()[3]),
            (s.pending().0[0], s.pending().1[0]),
        );
        for (lo, d) in [b, m, n] {
            assert!(s.pull(lo, d));
            assert!(!s.pull(lo, d));
            want.retain(|&e| e != (lo, d));
        }
        assert_eq!(entries(&s), want);
        assert!(base_found(&s));
        s.merge_all();
        assert!(base_found(&s));
        assert!(s.mid.is_empty() && s.buf_len == 0);
        assert!(base_sorted(&s));
        assert_eq!(entries(&s), want);
    }

    #[test]
    fn a_base_of_more_than_u16_entries_finds_every_key() {
        let n = 70_000u32;
        let lo: Vec<u16> = (0..n)
            .map(|i| (u64::from(i) * 65_536 / u64::from(n)) as u16)
            .collect();
        let doc: Vec<u32> = (0..n).collect();
        let s = Shard::from_sorted(&lo, &doc);
        assert_eq!(s.base_len(), lo.len());
        for key in [0u16, 1, 8_192, 40_000, u16::MAX] {
            let mut got = Vec::new();
            s.for_each(key, true, &mut |d| got.push(d));
            let want: Vec<u32> = (0..n).filter(|&i| lo[i as usize] == key).collect();
            assert_eq!(got, want, "key {key}");
        }
    }

    #[test]
    fn retain_keeps_the_entries_asked_for_in_one_base() {
        let mut s = Shard::default();
        for i in 0..1_000u32 {
            s.push((i * 7919 % 65_536) as u16, i);
        }
        let before = entries(&s);
        assert!(
            s.mid.len() + usize::from(s.buf_len) > 0,
            "entries outside the base"
        );
        assert_eq!(s.retain(|_| true), 0);
        assert_eq!(entries(&s), before);
        assert_eq!(s.retain(|d| d % 3 != 0), 334);
        let expect: Vec<(u16, u32)> = before.into_iter().filter(|&(_, d)| d % 3 != 0).collect();
        assert_eq!(entries(&s), expect);
        assert_eq!((s.mid.len(), s.buf_len, s.base.len()), (0, 0, 666));
        assert!(base_found(&s));
        for &(k, d) in &expect {
            let mut got = Vec::new();
            s.for_each(k, false, &mut |x| got.push(x));
            assert!(got.contains(&d));
        }
        assert_eq!(s.retain(|_| false), 666);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn merge_runs_interleaves_equal_keys_by_document() {
        let r = merge_runs(
            &[1, 1, 1, 4],
            &[2, 5, 9, 0],
            &[0, 1, 1, 4, 9],
            &[7, 1, 6, 3, 0],
        );
        assert_eq!(r.lo(), &[0, 1, 1, 1, 1, 1, 4, 4, 9]);
        assert_eq!(r.doc(), &[7, 1, 2, 5, 6, 9, 0, 3, 0]);
        let r = merge_runs(&[], &[], &[3], &[1]);
        assert_eq!((r.lo(), r.doc()), (&[3u16][..], &[1u32][..]));
    }

    /// A run gives back its length, keys and documents for every length (the keys share
    /// the allocation with the documents, two to a word).
    #[test]
    fn runs_of_every_length_keep_their_entries() {
        for n in 0..200usize {
            let lo: Vec<u16> = (0..n).map(|i| (i * 331 % 65_536) as u16).collect();
            let doc: Vec<u32> = (0..n)
                .map(|i| (i as u32).wrapping_mul(0x9e37_79b9))
                .collect();
            let r = Run::from_parts(&lo, &doc);
            assert_eq!(r.len(), n);
            assert_eq!(r.words.len(), n + n.div_ceil(2));
            assert_eq!((r.lo(), r.doc()), (&lo[..], &doc[..]));
        }
    }
}
