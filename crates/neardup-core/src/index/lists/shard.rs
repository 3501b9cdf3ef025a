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
//!
//! The header is one cache line: a run is one allocation (its documents, then its keys), so
//! it takes one pointer and a length instead of two of each, and the buffer is one
//! allocation of fixed size behind a thin pointer. A lookup that outgrew the caches pays
//! for every line it asks for (the core keeps only so many misses in flight), and every
//! lookup and every insert reads a header.

use std::mem::MaybeUninit;

use super::layout::{prefetch, SHARD_BITS};

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

/// A sorted run of `n` entries in one allocation of `n + ⌈n/2⌉` words: the documents, then
/// the keys two to a word. `n` is not stored: `⌊2·len/3⌋` gives it back for every `n`.
#[derive(Debug, Clone, Default)]
struct Run {
    words: Box<[u32]>,
}

impl Run {
    /// A run of `n` entries written by `fill(keys, docs)`.
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

/// Bits of the keys within a base segment: the base's positions of the keys `s·2^13` are
/// kept in the shard's header ([`Shard::fences`]).
const SEGMENT_BITS: u32 = 13;
/// Base segments (8).
const SEGMENTS: usize = 1 << (16 - SEGMENT_BITS);

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

/// The entries of the signatures that share their top 16 bits (see the module's text). Six
/// bytes an entry, no per-signature allocation (most lists hold one document); the header
/// is one cache line, aligned.
#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
pub(super) struct Shard {
    base: Run,
    mid: Run,
    buf: Option<Box<Buffer>>,
    /// Entries in the buffer.
    buf_len: u8,
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
    /// A shard of one sorted run of `n` entries written by `fill(keys, docs)` (a snapshot's,
    /// read straight into the run's allocation).
    pub(super) fn with_base(n: usize, fill: impl FnOnce(&mut [u16], &mut [u32])) -> Shard {
        let mut s = Shard {
            base: Run::build(n, fill),
            ..Shard::default()
        };
        s.set_fences();
        s
    }

    /// The base run: keys and documents.
    pub(super) fn base(&self) -> (&[u16], &[u32]) {
        (self.base.lo(), self.base.doc())
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

    /// Sets [`Shard::fences`] for the base as it is now.
    fn set_fences(&mut self) {
        self.fences = [0; SEGMENTS];
        let lo = self.base.lo();
        if lo.len() <= usize::from(u16::MAX) {
            for s in 1..SEGMENTS {
                let key = (s << SEGMENT_BITS) as u16;
                self.fences[s - 1] = lo.partition_point(|&x| x < key) as u16;
            }
        }
    }

    /// Where a search of the middle run for `key` starts: where it would sit in a uniform
    /// run (the middle run is short enough for that guess to be close).
    #[inline]
    fn middle_guess(&self, key: u16) -> usize {
        (usize::from(key) * self.mid.len()) >> 16
    }

    /// Where a search of the base for `key` starts: where the key would sit in a uniform
    /// segment (see [`Shard::fences`]), or in a uniform base when the fences are not kept.
    #[inline]
    fn base_guess(&self, key: u16) -> usize {
        let n = self.base.len();
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
        in_run(self.base.lo())
            || in_run(self.mid.lo())
            || self
                .pending()
                .0
                .iter()
                .any(|&x| (first..=last).contains(&x))
    }

    /// Every signature with an entry, given this shard's number.
    pub(super) fn signatures(&self, shard: usize) -> impl Iterator<Item = u32> + '_ {
        let top = (shard as u32) << (32 - SHARD_BITS);
        self.base
            .lo()
            .iter()
            .chain(self.mid.lo())
            .chain(self.pending().0)
            .map(move |&x| top | u32::from(x))
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
        let keys = self.base.lo();
        let start = lower_bound_from(keys, lo, self.base_guess(lo));
        let mut end = start;
        while end < keys.len() && keys[end] == lo {
            end += 1;
        }
        (start, end)
    }

    /// Prefetches the line of the base's documents from position `at` on.
    #[inline]
    pub(super) fn prefetch_base_docs(&self, at: usize) {
        prefetch(self.base.doc().as_ptr().wrapping_add(at));
    }

    /// Calls `f` with the base's documents at positions `start..end` (a [`Shard::base_range`]).
    #[inline]
    pub(super) fn for_each_base(&self, start: usize, end: usize, f: &mut impl FnMut(u32)) {
        for &d in &self.base.doc()[start..end] {
            f(d);
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
        let n = self.base.len();
        if n > 0 {
            let guess = self.base_guess(lo).min(n - 1);
            let at = self.base.lo().as_ptr();
            prefetch(at.wrapping_add(guess));
            prefetch(at.wrapping_add(guess.saturating_sub(PREFETCH_SPAN)));
            prefetch(at.wrapping_add((guess + PREFETCH_SPAN).min(n - 1)));
        }
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
        self.base = merge_runs(
            self.base.lo(),
            self.base.doc(),
            self.mid.lo(),
            self.mid.doc(),
        );
        self.set_fences();
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
    /// the base itself when nothing is outside it, else the runs merged into new ones as
    /// [`Shard::flush`] and [`Shard::fold`] merge them. A snapshot writes a shard at a time
    /// this way, so that writing it changes nothing in the lists and holds one shard's copy
    /// at most beside them.
    pub(super) fn with_entries<R>(&self, f: impl FnOnce(&[u16], &[u32]) -> R) -> R {
        let recent = self.mid_with_buffer();
        if recent.is_empty() {
            return f(self.base.lo(), self.base.doc());
        }
        let all = merge_runs(self.base.lo(), self.base.doc(), recent.lo(), recent.doc());
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
        let found = run_pull(&mut self.base, lo, doc);
        if found {
            self.set_fences();
        }
        found
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
            (l.len() < lo.len()).then(|| Run::from_parts(&l, &d))
        });
        let Some(base) = kept else {
            return 0;
        };
        let gone = self.len() - base.len();
        self.base = base;
        self.mid = Run::default();
        self.buf_len = 0;
        self.set_fences();
        gone
    }

    pub(super) fn len(&self) -> usize {
        self.base.len() + self.mid.len() + usize::from(self.buf_len)
    }

    /// (distinct signatures, of which shared by two documents or more, longest list).
    pub(super) fn shape(&self) -> (u64, u64, u64) {
        let mut all: Vec<u16> = self
            .base
            .lo()
            .iter()
            .chain(self.mid.lo())
            .chain(self.pending().0)
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
        ((self.base.words.len() + self.mid.words.len()) * 4
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
        let runs = [s.base(), (s.mid.lo(), s.mid.doc()), s.pending()];
        let mut v: Vec<(u16, u32)> = runs
            .iter()
            .flat_map(|(lo, doc)| lo.iter().copied().zip(doc.iter().copied()))
            .collect();
        v.sort_unstable();
        v
    }

    /// The fences are where a search of every key would find it.
    fn fences_hold(s: &Shard) -> bool {
        let lo = s.base.lo();
        (0..=u16::MAX).step_by(7).all(|k| {
            let g = s.base_guess(k);
            g <= lo.len() && lower_bound_from(lo, k, g) == lo.partition_point(|&x| x < k)
        }) && (1..SEGMENTS).all(|seg| {
            usize::from(s.fences[seg - 1])
                == lo.partition_point(|&x| usize::from(x) < seg << SEGMENT_BITS)
        })
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
                assert!(sorted(s.base.lo(), s.base.doc()) && sorted(s.mid.lo(), s.mid.doc()));
                assert!(fences_hold(&s));
                assert!(s.mid.len() <= middle_limit(s.base.len()) + PENDING);
            }
        }
        want.sort_unstable();
        assert_eq!(entries(&s), want);
        assert!(!s.base.is_empty() && !s.mid.is_empty() && s.buf_len > 0);
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
            (s.base.lo()[7], s.base.doc()[7]),
            (s.mid.lo()[3], s.mid.doc()[3]),
            (s.pending().0[0], s.pending().1[0]),
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
        assert!(s.mid.is_empty() && s.buf_len == 0);
        assert!(sorted(s.base.lo(), s.base.doc()));
        assert_eq!(entries(&s), want);
    }

    #[test]
    fn a_base_too_long_for_fences_is_searched_from_the_uniform_guess() {
        let n = 70_000u32;
        let lo: Vec<u16> = (0..n)
            .map(|i| (u64::from(i) * 65_536 / u64::from(n)) as u16)
            .collect();
        let doc: Vec<u32> = (0..n).collect();
        let s = Shard::with_base(lo.len(), |l, d| {
            l.copy_from_slice(&lo);
            d.copy_from_slice(&doc);
        });
        assert_eq!(s.fences, [0; SEGMENTS]);
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
        assert!(fences_hold(&s));
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
