//! A shard's base run, packed: its `(low 16 bits, document)` entries, sorted, in about four
//! bytes an entry instead of six.
//!
//! Two things of an entry take less room than their type:
//!
//! - **The document.** A base holds pages of one stretch of document numbers (those listed
//!   since the oldest page kept), so each is stored as its distance from the base's smallest,
//!   in as many bytes as the base's spread needs: three while fewer than 16.7M numbers lie
//!   between its oldest and newest page, four past that (and whenever the low 32 bits of the
//!   numbers wrap within a base).
//! - **The key.** Sorted keys repeat their top 8 bits in long runs, so a base of
//!   [`BUCKETED_MIN`] entries or more keeps only each key's low 8 bits and a directory of 257
//!   positions: where the keys of each top byte start (at 10M indexed pages a base holds
//!   about 11,600 entries, so the directory's 514 bytes are 0.04 bytes an entry). A shorter
//!   base keeps whole 16-bit keys, with no directory.
//!
//! A lookup reads the directory's line, the line of the bucket's keys (about 45 at 10M, a
//! vector compare) and the line of the documents, as the unpacked run read its keys' and
//! documents' lines. The price is paid when a base is rebuilt: a merge of the middle run
//! or a removal copies the stretches between the entries it adds or takes whole while the
//! packing stays, and decodes and encodes every entry when it changes (a few nanoseconds
//! an entry).
//!
//! Layout, one allocation of 32-bit words read as bytes: the documents (`n × width` bytes,
//! little-endian), three zero bytes so that any document is read with one 4-byte load, then
//! from the next 4-byte boundary the keys (`n` bytes or `n` 16-bit values), then from the
//! next 4-byte boundary the directory (257 values of 2 bytes, or of 4 when `n` exceeds
//! `u16::MAX`).

use super::layout::prefetch;

/// Bases of this many entries or more keep 8 bits a key and a directory.
pub(super) const BUCKETED_MIN: usize = 512;

/// How the keys of a base are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// Whole 16-bit keys, no directory.
    Whole,
    /// Low 8 bits a key, a directory of 16-bit positions.
    Narrow,
    /// Low 8 bits a key, a directory of 32-bit positions (more than `u16::MAX` entries).
    NarrowWide,
}

/// A sorted run of `(low bits, document)` entries, packed (see the module's text).
#[derive(Debug, Clone, Default)]
pub(super) struct Base {
    words: Box<[u32]>,
    n: u32,
    /// No document of the base is smaller.
    floor: u32,
    /// No document of the base is larger.
    top: u32,
    /// Bytes a document (1 to 4).
    width: u8,
}

/// Where the parts of a base of `n` entries start, in bytes: (keys, directory, end).
fn offsets(n: usize, width: usize, keys: Keys) -> (usize, usize, usize) {
    let keys_at = (n * width + 3).next_multiple_of(4);
    let (key_bytes, dir_bytes) = match keys {
        Keys::Whole => (2 * n, 0),
        Keys::Narrow => (n, 257 * 2),
        Keys::NarrowWide => (n, 257 * 4),
    };
    let dir_at = (keys_at + key_bytes).next_multiple_of(4);
    (keys_at, dir_at, dir_at + dir_bytes)
}

/// How a base of `n` entries keeps its keys.
fn keys_for(n: usize) -> Keys {
    if n < BUCKETED_MIN {
        Keys::Whole
    } else if n <= usize::from(u16::MAX) {
        Keys::Narrow
    } else {
        Keys::NarrowWide
    }
}

/// The entries of the sorted `a` and of the sorted run (`b_lo`, `b_doc`), merged in order.
fn merged<'a>(
    a: impl Iterator<Item = (u16, u32)> + 'a,
    b_lo: &'a [u16],
    b_doc: &'a [u32],
) -> impl Iterator<Item = (u16, u32)> + 'a {
    let mut a = a.peekable();
    let mut b = b_lo.iter().copied().zip(b_doc.iter().copied()).peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) => {
            if x <= y {
                a.next()
            } else {
                b.next()
            }
        }
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

/// Writes entry `i` of a base being packed: its document's distance `dist` from the base's
/// smallest in `w` bytes, its key `k` whole or as its low byte, counted in `counts` by its
/// top byte (one slot on, for the directory's running sums).
fn put_entry(
    out: &mut [u8],
    keys: Keys,
    keys_at: usize,
    w: usize,
    i: usize,
    (k, dist): (u16, u32),
    counts: &mut [u32; 257],
) {
    out[i * w..i * w + w].copy_from_slice(&dist.to_le_bytes()[..w]);
    match keys {
        Keys::Whole => out[keys_at + 2 * i..keys_at + 2 * i + 2].copy_from_slice(&k.to_le_bytes()),
        Keys::Narrow | Keys::NarrowWide => {
            out[keys_at + i] = k as u8;
            counts[usize::from(k >> 8) + 1] += 1;
        }
    }
}

/// Writes slot `b` of a bucketed base's directory: `at`, the position where its keys start.
fn put_slot(out: &mut [u8], keys: Keys, dir_at: usize, b: usize, at: u32) {
    match keys {
        Keys::Narrow => {
            out[dir_at + 2 * b..dir_at + 2 * b + 2].copy_from_slice(&(at as u16).to_le_bytes())
        }
        _ => out[dir_at + 4 * b..dir_at + 4 * b + 4].copy_from_slice(&at.to_le_bytes()),
    }
}

/// Bytes a document needs to hold every value of `0..=spread`.
fn width_for(spread: u32) -> u8 {
    match spread {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        0x1_0000..=0xff_ffff => 3,
        _ => 4,
    }
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
pub(super) fn lower_bound_from(lo: &[u16], key: u16, guess: usize) -> usize {
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

impl Base {
    /// The base held in `words`, as [`Base::build`], [`Base::merge`] or [`Base::without`]
    /// wrote it.
    fn packed(words: Box<[u32]>, n: usize, floor: u32, top: u32, width: u8) -> Base {
        let n = u32::try_from(n).expect("a base holds fewer than 2^32 entries");
        Base {
            words,
            n,
            floor,
            top,
            width,
        }
    }

    /// How the keys are kept (decided by the number of entries).
    #[inline]
    fn layout(&self) -> Keys {
        keys_for(self.len())
    }

    /// A base of the `n` entries `entries` yields, sorted by (low bits, document), every
    /// document within `floor..=top`. Panics if `entries` yields another number of entries
    /// (a caller's defect: the bases would lose or invent entries).
    pub(super) fn build(
        n: usize,
        floor: u32,
        top: u32,
        entries: impl IntoIterator<Item = (u16, u32)>,
    ) -> Base {
        if n == 0 {
            let mut it = entries.into_iter();
            assert!(it.next().is_none(), "more entries than announced");
            return Base::default();
        }
        assert!(floor <= top, "document bounds {floor}..={top}");
        let width = width_for(top - floor);
        let keys = keys_for(n);
        let w = usize::from(width);
        let (keys_at, dir_at, end) = offsets(n, w, keys);
        let mut words = vec![0u32; end.div_ceil(4)].into_boxed_slice();
        let bytes = as_bytes_mut(&mut words);
        let mut counts = [0u32; 257];
        let mut written = 0usize;
        let mut last = None;
        for (i, (k, d)) in entries.into_iter().enumerate() {
            assert!(i < n, "more entries than announced");
            debug_assert!(last < Some((k, d)), "entries out of order");
            debug_assert!((floor..=top).contains(&d), "document out of bounds");
            last = Some((k, d));
            put_entry(bytes, keys, keys_at, w, i, (k, d - floor), &mut counts);
            written = i + 1;
        }
        assert_eq!(written, n, "fewer entries than announced");
        if keys != Keys::Whole {
            let mut at = 0u32;
            for (b, c) in counts.iter().enumerate() {
                at += c;
                put_slot(bytes, keys, dir_at, b, at);
            }
        }
        Base::packed(words, n, floor, top, width)
    }

    /// This base with the entries of the sorted run (`lo`, `doc`), none of them in it,
    /// merged in. Where the packing stays the same (the same smallest document, document
    /// width and key layout: nearly every time, new pages being the newest), the stretches of
    /// this base between the new entries are copied whole and the directory shifted by the
    /// new entries before each slot; otherwise every entry is decoded and packed again.
    pub(super) fn merge(&self, lo: &[u16], doc: &[u32]) -> Base {
        assert_eq!(lo.len(), doc.len());
        if lo.is_empty() {
            return self.clone();
        }
        if self.n == 0 {
            return Base::from_parts(lo, doc);
        }
        let n = self.len() + lo.len();
        let (mut floor, mut top) = (self.floor, self.top);
        for &d in doc {
            floor = floor.min(d);
            top = top.max(d);
        }
        let width = width_for(top - floor);
        let keys = keys_for(n);
        if floor != self.floor || width != self.width || keys != self.layout() {
            return Base::build(n, floor, top, merged(self.iter(), lo, doc));
        }
        let w = usize::from(width);
        let ksz = if keys == Keys::Whole { 2 } else { 1 };
        let (keys_at, dir_at, end) = offsets(n, w, keys);
        let old_keys_at = self.keys_at();
        let mut words = vec![0u32; end.div_ceil(4)].into_boxed_slice();
        let out = as_bytes_mut(&mut words);
        let src = self.raw();
        let copy = |out: &mut [u8], i: usize, j: usize, o: usize| {
            out[o * w..(o + j - i) * w].copy_from_slice(&src[i * w..j * w]);
            out[keys_at + o * ksz..keys_at + (o + j - i) * ksz]
                .copy_from_slice(&src[old_keys_at + i * ksz..old_keys_at + j * ksz]);
        };
        let mut added = [0u32; 257];
        let (mut i, mut o) = (0usize, 0usize);
        for (&k, &d) in lo.iter().zip(doc) {
            // the old entries below (k, d) come first
            let (start, end) = self.range(k);
            let mut j = start;
            while j < end && self.doc(j) < d {
                j += 1;
            }
            debug_assert!(j >= i, "new entries out of order");
            copy(out, i, j, o);
            o += j - i;
            i = j;
            put_entry(out, keys, keys_at, w, o, (k, d - floor), &mut added);
            o += 1;
        }
        copy(out, i, self.len(), o);
        if keys != Keys::Whole {
            let mut before = 0u32;
            for (b, a) in added.iter().enumerate() {
                before += a;
                put_slot(out, keys, dir_at, b, self.dir(b) as u32 + before);
            }
        }
        Base::packed(words, n, floor, top, width)
    }

    /// This base without its entry at position `at` (`at < len`). A base that loses an
    /// entry of its smallest document, its last entry, or its key layout with one entry
    /// fewer is packed again from the entries left, so that the bytes a document takes follow the pages
    /// it still holds (a window removes the oldest pages, and a smallest document kept
    /// after its page left would widen every document once the newest are 2^24 numbers
    /// on). Otherwise the entries either side are copied whole and the directory's slots
    /// past the entry's key lowered by one; the largest document stays as the bound it
    /// is (it sets only the bytes a document takes, which the newer pages to come need as
    /// well). A sharded decider's shard removes every page the aggregator found a copy
    /// of, often its bases' newest: packing a base again for each of their entries cost
    /// tens of microseconds an entry at 5M pages.
    pub(super) fn without(&self, at: usize) -> Base {
        let n = self.len();
        assert!(at < n, "position {at} of {n}");
        let keys = self.layout();
        if n == 1 || self.doc(at) == self.floor || keys_for(n - 1) != keys {
            let (mut l, mut d) = (Vec::new(), Vec::new());
            self.decode_into(&mut l, &mut d);
            l.remove(at);
            d.remove(at);
            return Base::from_parts(&l, &d);
        }
        let w = usize::from(self.width);
        let ksz = if keys == Keys::Whole { 2 } else { 1 };
        let (keys_at, dir_at, end) = offsets(n - 1, w, keys);
        let old_keys_at = self.keys_at();
        let mut words = vec![0u32; end.div_ceil(4)].into_boxed_slice();
        let out = as_bytes_mut(&mut words);
        let src = self.raw();
        out[..at * w].copy_from_slice(&src[..at * w]);
        out[at * w..(n - 1) * w].copy_from_slice(&src[(at + 1) * w..n * w]);
        let (k0, k1) = (old_keys_at, keys_at);
        out[k1..k1 + at * ksz].copy_from_slice(&src[k0..k0 + at * ksz]);
        out[k1 + at * ksz..k1 + (n - 1) * ksz]
            .copy_from_slice(&src[k0 + (at + 1) * ksz..k0 + n * ksz]);
        if keys != Keys::Whole {
            // a slot counts the entries of smaller top bytes: those past `at` counted it
            for b in 0..=256 {
                let start = self.dir(b);
                put_slot(
                    out,
                    keys,
                    dir_at,
                    b,
                    (start - usize::from(start > at)) as u32,
                );
            }
        }
        Base::packed(words, n - 1, self.floor, self.top, self.width)
    }

    /// A base of the entries `(lo[i], doc[i])`, sorted by (low bits, document).
    pub(super) fn from_parts(lo: &[u16], doc: &[u32]) -> Base {
        assert_eq!(lo.len(), doc.len());
        let floor = doc.iter().copied().min().unwrap_or(0);
        let top = doc.iter().copied().max().unwrap_or(0);
        Base::build(
            lo.len(),
            floor,
            top,
            lo.iter().copied().zip(doc.iter().copied()),
        )
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.n as usize
    }

    /// Bytes held (the allocation).
    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 4
    }

    #[inline]
    fn raw(&self) -> &[u8] {
        as_bytes(&self.words)
    }

    /// The document at position `i` (`i < len`).
    #[inline]
    pub(super) fn doc(&self, i: usize) -> u32 {
        let w = usize::from(self.width);
        let at = i * w;
        let b: [u8; 4] = self.raw()[at..at + 4].try_into().expect("four bytes");
        let mask = u32::MAX >> (32 - 8 * w as u32);
        self.floor + (u32::from_le_bytes(b) & mask)
    }

    /// The byte offset of the keys.
    #[inline]
    fn keys_at(&self) -> usize {
        (self.len() * usize::from(self.width) + 3).next_multiple_of(4)
    }

    /// The whole 16-bit keys (a base kept as [`Keys::Whole`]).
    #[inline]
    fn keys16(&self) -> &[u16] {
        debug_assert_eq!(self.layout(), Keys::Whole);
        let at = self.keys_at() / 4;
        let n = self.len();
        let words = &self.words[at..at + n.div_ceil(2)];
        // SAFETY: `words` holds ⌈n/2⌉ words, room for `n` u16 values; u16's alignment (2)
        // divides u32's, every bit pattern is a valid u16, and the shared borrow of `words`
        // outlives the slice.
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u16>(), n) }
    }

    /// The low 8 bits of the keys (a bucketed base).
    #[inline]
    fn keys8(&self) -> &[u8] {
        let at = self.keys_at();
        &self.raw()[at..at + self.len()]
    }

    /// Where the keys with top byte `b` start (`b` in `0..=256`; 256 gives the length).
    #[inline]
    fn dir(&self, b: usize) -> usize {
        let (_, dir_at, _) = offsets(self.len(), usize::from(self.width), self.layout());
        let raw = self.raw();
        match self.layout() {
            Keys::Narrow => usize::from(u16::from_le_bytes([
                raw[dir_at + 2 * b],
                raw[dir_at + 2 * b + 1],
            ])),
            Keys::NarrowWide => {
                let v: [u8; 4] = raw[dir_at + 4 * b..dir_at + 4 * b + 4]
                    .try_into()
                    .expect("four bytes");
                u32::from_le_bytes(v) as usize
            }
            Keys::Whole => unreachable!("a base of whole keys has no directory"),
        }
    }

    /// The address of the directory's slot for top byte `b`.
    #[inline]
    fn dir_ptr(&self, b: usize) -> *const u8 {
        let (_, dir_at, _) = offsets(self.len(), usize::from(self.width), self.layout());
        let slot = if self.layout() == Keys::Narrow { 2 } else { 4 };
        self.raw().as_ptr().wrapping_add(dir_at + slot * b)
    }

    /// Where the entries of key `lo` lie: `start..end`, empty (at the position the key would
    /// take) when it has none.
    #[inline]
    pub(super) fn range(&self, lo: u16) -> (usize, usize) {
        if self.n == 0 {
            return (0, 0);
        }
        match self.layout() {
            Keys::Whole => {
                let keys = self.keys16();
                let start = lower_bound(keys, lo);
                let mut end = start;
                while end < keys.len() && keys[end] == lo {
                    end += 1;
                }
                (start, end)
            }
            Keys::Narrow | Keys::NarrowWide => {
                let b = usize::from(lo >> 8);
                let (s, e) = (self.dir(b), self.dir(b + 1));
                let bucket = &self.keys8()[s..e];
                let r = lo as u8;
                // a bucket is short (about 45 keys at 10M pages): counting beats a search
                let start = if bucket.len() <= 128 {
                    bucket.iter().fold(0usize, |c, &x| c + usize::from(x < r))
                } else {
                    bucket.partition_point(|&x| x < r)
                };
                let mut end = start;
                while end < bucket.len() && bucket[end] == r {
                    end += 1;
                }
                (s + start, s + end)
            }
        }
    }

    /// Whether a key in `first..=last` has an entry.
    pub(super) fn any_in(&self, first: u16, last: u16) -> bool {
        if self.n == 0 || first > last {
            return false;
        }
        match self.layout() {
            Keys::Whole => {
                let keys = self.keys16();
                let i = lower_bound(keys, first);
                i < keys.len() && keys[i] <= last
            }
            Keys::Narrow | Keys::NarrowWide => {
                let keys = self.keys8();
                (usize::from(first >> 8)..=usize::from(last >> 8)).any(|b| {
                    let lo = if b == usize::from(first >> 8) {
                        first as u8
                    } else {
                        0
                    };
                    let hi = if b == usize::from(last >> 8) {
                        last as u8
                    } else {
                        u8::MAX
                    };
                    keys[self.dir(b)..self.dir(b + 1)]
                        .iter()
                        .any(|&x| (lo..=hi).contains(&x))
                })
            }
        }
    }

    /// Prefetches the lines a lookup of `lo` reads first: in a bucketed base the directory's
    /// slot (the keys' lines follow from it: [`Base::prefetch_bucket`]), in a base of whole
    /// keys the keys around where `lo` would sit in a uniform base.
    #[inline]
    pub(super) fn prefetch_lookup(&self, lo: u16) {
        let n = self.len();
        if n == 0 {
            return;
        }
        match self.layout() {
            Keys::Whole => {
                let guess = ((usize::from(lo) * n) >> 16).min(n - 1);
                let at = self.keys16().as_ptr();
                prefetch(at.wrapping_add(guess));
                prefetch(at.wrapping_add(guess.saturating_sub(32)));
                prefetch(at.wrapping_add((guess + 32).min(n - 1)));
            }
            Keys::Narrow | Keys::NarrowWide => prefetch(self.dir_ptr(usize::from(lo >> 8))),
        }
    }

    /// Prefetches the lines of the keys that share `lo`'s top byte, read from the directory
    /// (whose line [`Base::prefetch_lookup`] asked for): one line, or two where the bucket
    /// crosses one, instead of the three lines either side of a guessed position that a
    /// search of whole keys reads.
    #[inline]
    pub(super) fn prefetch_bucket(&self, lo: u16) {
        if self.layout() == Keys::Whole || self.n == 0 {
            return;
        }
        let b = usize::from(lo >> 8);
        let (s, e) = (self.dir(b), self.dir(b + 1));
        let at = self.keys8().as_ptr();
        prefetch(at.wrapping_add(s));
        if e > s + 1 {
            prefetch(at.wrapping_add(e - 1));
        }
    }

    /// Prefetches the line of the document at position `i`.
    #[inline]
    pub(super) fn prefetch_doc(&self, i: usize) {
        prefetch(
            self.raw()
                .as_ptr()
                .wrapping_add(i * usize::from(self.width)),
        );
    }

    /// The keys, ascending.
    pub(super) fn keys(&self) -> KeyIter<'_> {
        KeyIter {
            base: self,
            i: 0,
            bucket: 0,
            next_bucket_at: if self.layout() == Keys::Whole || self.n == 0 {
                usize::MAX
            } else {
                self.dir(1)
            },
        }
    }

    /// Calls `f` with every key, ascending: [`Base::keys`] as one loop a directory bucket,
    /// for the passes over every entry (the presence map's doubling reads them all, about
    /// 500 million at 10M pages, and the iterator's checks an entry took most of its time).
    #[inline]
    pub(super) fn for_each_key(&self, mut f: impl FnMut(u16)) {
        if self.n == 0 {
            return;
        }
        if self.layout() == Keys::Whole {
            self.keys16().iter().for_each(|&k| f(k));
            return;
        }
        let keys = self.keys8();
        let mut start = self.dir(0);
        for b in 0..256 {
            let end = self.dir(b + 1);
            let top = (b as u16) << 8;
            keys[start..end].iter().for_each(|&k| f(top | u16::from(k)));
            start = end;
        }
    }

    /// The entries, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u16, u32)> + '_ {
        self.keys().enumerate().map(move |(i, k)| (k, self.doc(i)))
    }

    /// Appends the entries to `lo` and `doc`.
    pub(super) fn decode_into(&self, lo: &mut Vec<u16>, doc: &mut Vec<u32>) {
        lo.reserve(self.len());
        doc.reserve(self.len());
        for (k, d) in self.iter() {
            lo.push(k);
            doc.push(d);
        }
    }
}

/// The keys of a [`Base`], ascending.
pub(super) struct KeyIter<'a> {
    base: &'a Base,
    i: usize,
    /// The top byte of the keys at `i` (a bucketed base).
    bucket: usize,
    /// Where the next bucket starts.
    next_bucket_at: usize,
}

impl Iterator for KeyIter<'_> {
    type Item = u16;

    #[inline]
    fn next(&mut self) -> Option<u16> {
        let b = self.base;
        if self.i >= b.len() {
            return None;
        }
        let i = self.i;
        self.i += 1;
        if b.layout() == Keys::Whole {
            return Some(b.keys16()[i]);
        }
        while i >= self.next_bucket_at {
            self.bucket += 1;
            self.next_bucket_at = b.dir(self.bucket + 1);
        }
        Some(((self.bucket as u16) << 8) | u16::from(b.keys8()[i]))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.base.len() - self.i;
        (left, Some(left))
    }
}

fn as_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: a u32 slice is readable as four times as many bytes (u8 has alignment 1 and
    // every bit pattern is valid), for the life of the shared borrow.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 4) }
}

fn as_bytes_mut(words: &mut [u32]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; every bit pattern written is a valid u32, and the mutable
    // borrow of `words` is held for the slice's life.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 4) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// Random sorted distinct entries: `n` of them, keys among `distinct` values, documents
    /// from `floor` within `spread`.
    fn entries(n: usize, distinct: u32, floor: u32, spread: u32, seed: u64) -> Vec<(u16, u32)> {
        let mut x = seed;
        let mut v: Vec<(u16, u32)> = (0..n)
            .map(|_| {
                let k = (rng(&mut x) % u64::from(distinct)) as u32 * (65_536 / distinct);
                let d = floor.wrapping_add((rng(&mut x) % (u64::from(spread) + 1)) as u32);
                (k as u16, d)
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The packed base against the plain sorted vector, the oracle: every entry back in
    /// order, every key's range, and `any_in` over windows of keys.
    fn agrees(want: &[(u16, u32)]) {
        let lo: Vec<u16> = want.iter().map(|e| e.0).collect();
        let doc: Vec<u32> = want.iter().map(|e| e.1).collect();
        let b = Base::from_parts(&lo, &doc);
        assert_eq!(b.len(), want.len());
        assert_eq!(b.iter().collect::<Vec<_>>(), want);
        assert_eq!(b.keys().size_hint(), (want.len(), Some(want.len())));
        let mut each = Vec::new();
        b.for_each_key(|k| each.push(k));
        assert_eq!(each, lo);
        let (mut l2, mut d2) = (Vec::new(), Vec::new());
        b.decode_into(&mut l2, &mut d2);
        assert_eq!((l2, d2), (lo.clone(), doc.clone()));
        // every key near an entry's (some thousands of them in a long base), and the ends
        let step = (lo.len() / 2_000).max(1);
        let mut keys: Vec<u16> = lo
            .iter()
            .step_by(step)
            .flat_map(|&k| [k, k.wrapping_add(1), k.wrapping_sub(1)])
            .collect();
        keys.extend([0, 1, 255, 256, 4_095, 32_768, u16::MAX]);
        for &k in &keys {
            let start = lo.partition_point(|&x| x < k);
            let end = lo.partition_point(|&x| x <= k);
            assert_eq!(b.range(k), (start, end), "key {k}");
            for (i, &d) in doc.iter().enumerate().take(end).skip(start) {
                assert_eq!(b.doc(i), d);
            }
            for span in [0u16, 3, 300, 9_000] {
                let last = k.saturating_add(span);
                let i = lo.partition_point(|&x| x < k);
                let exp = i < lo.len() && lo[i] <= last;
                assert_eq!(b.any_in(k, last), exp, "{k}..={last}");
            }
        }
    }

    #[test]
    fn packed_bases_agree_with_the_plain_entries() {
        // whole keys and bucketed, every document width, spreads up to u32::MAX
        for (i, &n) in [0usize, 1, 2, 7, 511, 512, 513, 3_000, 11_600]
            .iter()
            .enumerate()
        {
            for (j, &spread) in [0u32, 200, 60_000, 10_000_000, u32::MAX].iter().enumerate() {
                let floor = if spread == u32::MAX {
                    0
                } else {
                    4_000_000_000 - spread / 2
                };
                let distinct = [3u32, 676, 65_536][(i + j) % 3];
                agrees(&entries(
                    n,
                    distinct,
                    floor,
                    spread,
                    17 + (i * 5 + j) as u64,
                ));
            }
        }
    }

    #[test]
    fn a_base_past_u16_entries_keeps_a_wide_directory() {
        let want = entries(140_000, 65_536, 1_000, 90_000_000, 5);
        assert!(want.len() > usize::from(u16::MAX));
        agrees(&want);
        let lo: Vec<u16> = want.iter().map(|e| e.0).collect();
        let doc: Vec<u32> = want.iter().map(|e| e.1).collect();
        assert_eq!(Base::from_parts(&lo, &doc).layout(), Keys::NarrowWide);
    }

    #[test]
    fn a_packed_base_takes_about_four_bytes_an_entry() {
        // the shape of a base at 10M pages: ~11,600 entries, documents within 2^24
        let want = entries(11_600, 65_536, 123_456, 12_000_000, 9);
        let lo: Vec<u16> = want.iter().map(|e| e.0).collect();
        let doc: Vec<u32> = want.iter().map(|e| e.1).collect();
        let b = Base::from_parts(&lo, &doc);
        assert_eq!(b.width, 3);
        let per = b.bytes() as f64 / want.len() as f64;
        assert!((4.0..4.1).contains(&per), "{per} bytes an entry");
    }

    /// A merge gives the base of the union, by the fast path (new documents the newest, the
    /// layout kept) and by the slow one (an older document, a wider spread, a longer key
    /// layout).
    #[test]
    fn merges_give_the_base_of_the_union() {
        for (seed, n, m, spread_old, new_floor) in [
            (1u64, 3_000usize, 400usize, 60_000u32, 70_000u32),
            (2, 600, 50, 10_000, 10_001),
            (3, 100, 20, 100, 50),
            (4, 500, 30, 1_000, 2_000),
            (5, 2_000, 300, 200, 90_000_000),
            (6, 0, 10, 0, 5),
            (7, 40, 0, 30, 0),
        ] {
            let old = entries(n, 65_536, 1_000, spread_old, seed);
            let new: Vec<(u16, u32)> = entries(m, 4_096, new_floor, 5_000, seed + 99)
                .into_iter()
                .filter(|e| !old.contains(e))
                .collect();
            let (lo, doc): (Vec<u16>, Vec<u32>) = old.iter().copied().unzip();
            let a = Base::from_parts(&lo, &doc);
            let (nlo, ndoc): (Vec<u16>, Vec<u32>) = new.iter().copied().unzip();
            let merged = a.merge(&nlo, &ndoc);
            let mut want: Vec<(u16, u32)> = old.iter().chain(&new).copied().collect();
            want.sort_unstable();
            assert_eq!(merged.iter().collect::<Vec<_>>(), want, "seed {seed}");
            let (wlo, wdoc): (Vec<u16>, Vec<u32>) = want.iter().copied().unzip();
            let fresh = Base::from_parts(&wlo, &wdoc);
            assert_eq!(
                merged.words, fresh.words,
                "seed {seed}: packed as a fresh base"
            );
            agrees(&want);
        }
    }

    /// An entry taken out gives the base of the entries left, by the copy (the smallest
    /// document kept, the key layout too) and by packing again (the smallest document
    /// gone, a base shrinking past a layout's bound, the last entry).
    #[test]
    fn an_entry_taken_out_leaves_the_base_of_the_rest() {
        for (seed, n, spread) in [
            (1u64, 3_000usize, 60_000u32),
            (2, 512, 10_000),
            (3, 513, 300),
            (4, 100, 100),
            (5, 1, 0),
            (6, 2, 5),
            (7, 11_600, 12_000_000),
            (8, 70_000, 90_000_000),
        ] {
            let all = entries(n, 65_536, 1_000, spread, seed);
            let (lo, doc): (Vec<u16>, Vec<u32>) = all.iter().copied().unzip();
            let b = Base::from_parts(&lo, &doc);
            let floor_at = (0..all.len()).find(|&i| all[i].1 == b.floor).unwrap();
            let top_at = (0..all.len()).find(|&i| all[i].1 == b.top).unwrap();
            let mut x = seed;
            let picks = [0, all.len() - 1, all.len() / 2, floor_at, top_at]
                .into_iter()
                .chain((0..20).map(|_| (rng(&mut x) % all.len() as u64) as usize));
            for at in picks {
                let out = b.without(at);
                let mut want = all.clone();
                want.remove(at);
                assert_eq!(out.iter().collect::<Vec<_>>(), want, "seed {seed}, at {at}");
                assert_eq!(out.len(), want.len());
                let (wlo, wdoc): (Vec<u16>, Vec<u32>) = want.iter().copied().unzip();
                for &k in wlo.iter().step_by(7).chain(&[0, 255, 256, u16::MAX]) {
                    let exp = (
                        wlo.partition_point(|&y| y < k),
                        wlo.partition_point(|&y| y <= k),
                    );
                    assert_eq!(out.range(k), exp, "seed {seed}, at {at}, key {k}");
                }
                // the smallest document stays exact, so the width follows the pages held
                assert_eq!(out.floor, wdoc.iter().copied().min().unwrap_or(0));
                let copied = all[at].1 != b.floor && keys_for(want.len()) == b.layout() && n > 1;
                if copied {
                    // the largest document kept as a bound, where packing again takes the
                    // largest left: the copy's mark when the base's newest entry goes
                    assert_eq!((out.top, out.width), (b.top, b.width), "copied");
                } else {
                    assert_eq!(out.top, wdoc.iter().copied().max().unwrap_or(0), "packed");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "fewer entries than announced")]
    fn a_short_iterator_is_refused() {
        let _ = Base::build(3, 0, 9, [(1u16, 2u32), (2, 3)]);
    }
}
