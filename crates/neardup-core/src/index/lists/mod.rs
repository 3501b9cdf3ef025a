//! Candidate generation for exact Jaccard similarity over signature sets: in-memory inverted
//! lists over index-side prefixes chosen by list length, probed with every signature of the
//! query, with a length filter and an exact overlap-count filter.
//!
//! # Why not a global order
//!
//! Prefix filtering (All-Pairs, PPJoin) keeps lists short only when the global order puts
//! the *rarest* signatures first, and a stream knows frequencies only as they drift. A
//! global order by hash value puts common signatures into every prefix, so their lists grow
//! with the index (measured: 3 ms a decision at 300k documents with format 2). This module
//! needs no global order at all:
//!
//! - **Index side.** A unique document `y` is entered in the lists of exactly
//!   `p(|y|) = |y| − ⌈τ·|y|⌉ + 1` of its signatures (clamped to `[1, |y|]`): the ones whose
//!   lists are *shortest right now* (ties by hash). A signature nobody has indexed yet has
//!   an empty list, so a page's prefix is mostly its own rare phrases; a common phrase joins
//!   a prefix only when a page has too few rarer ones, and then the shortest of the common
//!   lists takes it, so no list runs away (a load-balancing choice, not a frequency
//!   estimate).
//! - **Query side.** The query `x` reads the list of *every* one of its signatures. Most
//!   are absent (a hash lookup each).
//!
//! # Why it is exact, whatever prefixes were chosen
//!
//! If `J(x, y) ≥ τ` then the overlap `o = |x ∩ y|` satisfies `o ≥ τ·(|x| + |y|)/(1 + τ)`
//! and `o ≥ τ·|y|`. `y` left `|y| − p(|y|) = ⌈τ·|y|⌉ − 1 < o` signatures out of its lists,
//! so at least `o − (|y| − p(|y|)) ≥ 1` shared signatures are in them, and the query, which
//! reads all its own lists, meets `y` exactly `|x ∩ P_y|` times. Hence:
//!
//! - every `y` with `J ≥ τ` is met at least once (nothing is missed), and
//! - **count filter**: `y` is a candidate only if it was met at least
//!   `⌈τ·(|x|+|y|)/(1+τ)⌉ − (|y| − p(|y|))` times (about `|y|/6` at τ = 0.5 for pages of
//!   similar length): a page that shares one common phrase is not even read.
//! - **length filter**: `⌈τ·|x|⌉ ≤ |y| ≤ ⌊|x|/τ⌋`.
//!
//! Neither bound depends on which signatures `y` put in its prefix, so the lists can be
//! rebuilt in another order (after a restart, after retention) and decisions stay the same:
//! the verification decides, and the candidates always contain every match. A candidate
//! below τ with the set it was listed under may be met or not, by the prefix it got; the
//! rules take none of them ([`crate::dedup::found_at_any_prefix`]). (With document
//! frequencies a page is compared on fewer signatures than it is listed under, and a pair
//! at τ on those may be below τ on the listed set: decisions can then depend on the
//! prefixes; a sharded decider refuses frequencies.)
//!
//! For the weighted measure the set bounds do not hold (a weighted match can share few
//! distinct signatures), so only the length window on set sizes and one shared prefix
//! signature are required, as format 2 did.
//!
//! # Memory and durability
//!
//! The lists live in memory only: 65,536 shards by the signature's top 16 bits, each a
//! sorted base of (low 16 bits, document) pairs packed in about four bytes an entry
//! ([`base`]: a document as its distance from the base's smallest in the bytes their spread
//! needs, three below 16.7M numbers apart, a key as
//! its low 8 bits under a directory of its top 8), a smaller sorted middle run at six bytes
//! an entry and a buffer of at most 96 new entries ([`shard`]: a full buffer is merged into
//! the middle run, a grown middle run into the base). Most signatures are on one page
//! only, so there is no per-signature allocation or hash slot. In front of the shards, a
//! bitmap over the signatures' top bits says which can have an entry at all
//! ([`Presence`], 128 KiB growing to at most 512 MiB), so that the probes of signatures
//! nobody listed, most of a query's, cost one line instead of a shard lookup, and a second,
//! eight times coarser, says which can have an entry outside their shard's base
//! ([`Recent`], 16 KiB growing to at most 64 MiB), so that most lookups read the base
//! alone. The durable copy is the
//! documents' signature sets in the `docs` family; [`Lists::insert`] is called again for
//! every stored unique document, in document order, when an index is opened without a
//! usable snapshot ([`snapshot`]: the lists written at a clean shutdown, read back in
//! seconds, and only the documents after it entered again).
//!
//! Floating point: `τ·n` may come out as `7.000000000000001` where the exact value is 7, so
//! ceilings are taken of `x − ε` and floors of `x + ε` ([`EPSILON`]); this only lowers the
//! required counts and widens the window, never the other way.

use rustc_hash::FxHashMap;

mod base;
mod layout;
mod presence;
mod recent;
mod shard;
pub mod snapshot;

use crate::index::store::IndexParamError;
#[cfg(test)]
use base::lower_bound;
use layout::{prefetch, SHARD_BITS};
use presence::Presence;
use recent::Recent;
use shard::Shard;

/// Tolerance used when rounding `τ·n` and `n / τ`.
pub const EPSILON: f64 = 1e-9;
/// The most document numbers the lists span at once, from the oldest page listed to the
/// newest: the lists keep a number's low 32 bits, read back from the span's start.
pub const MAX_SPAN: u64 = u32::MAX as u64 - 1;
/// Signatures looked up together (see [`Lists::visit`]).
const GROUP: usize = 32;

/// `ceil(x)`, treating values within [`EPSILON`] above an integer as that integer.
fn ceil_eps(x: f64) -> f64 {
    (x - EPSILON).ceil()
}

/// `floor(x)`, treating values within [`EPSILON`] below an integer as that integer.
fn floor_eps(x: f64) -> f64 {
    (x + EPSILON).floor()
}

/// Saturating conversion of a non-negative float to a set length.
fn to_len(x: f64) -> u32 {
    // `as` saturates and maps NaN to 0.
    x.max(0.0) as u32
}

/// Saturating conversion of a set size.
fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[inline]
fn shard(sig: u32) -> usize {
    (sig >> (32 - SHARD_BITS)) as usize
}

/// Sizes of the lists, for `neardup index stats` and the benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ListStats {
    /// Documents in the lists.
    pub documents: u64,
    /// (signature, document) entries.
    pub postings: u64,
    /// Signatures with a non-empty list.
    pub signatures: u64,
    /// Signatures whose list holds two documents or more.
    pub shared_signatures: u64,
    /// The longest list.
    pub longest: u64,
    /// Bytes of memory held (tables at their capacity, lists, per-document lengths).
    pub memory_bytes: u64,
}

/// Scratch space of [`Lists::query_counted`], kept between queries so that a query does not
/// allocate once the vectors have grown.
#[derive(Debug, Default)]
pub struct QueryScratch {
    /// Hits by document.
    hits: FxHashMap<u32, u32>,
    /// (document, its set length) of every entry met.
    met: Vec<(u32, u32)>,
}

/// A document number that the lists cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "document number {0} is too far from the oldest page the lists hold: they span at most \
     {MAX_SPAN} numbers (every page decided takes one; a retention window or a page cap keeps \
     the span to the pages kept)"
)]
pub struct DocTooLarge(pub u64);

/// In-memory inverted lists over index-side prefixes, for Jaccard threshold τ.
#[derive(Debug, Clone)]
pub struct Lists {
    tau: f64,
    count_filter: bool,
    shards: Vec<Shard>,
    /// Which signatures can have an entry (most a query probes have none).
    presence: Presence,
    /// Which signatures can have an entry outside their shard's base (few lists do).
    recent: Recent,
    /// Set length of each document by its number less `base` (0: not in the lists): they
    /// span the numbers of the pages listed, not every number given out, so a window or a
    /// cap that removes the oldest pages keeps them bounded.
    lens: Vec<u32>,
    /// The document number of `lens[0]`.
    base: u64,
    /// Leading slots of `lens` known to be 0 (removed pages, dropped once they are many).
    lead: usize,
    postings: u64,
    documents: u64,
    order: Vec<(u32, u32)>,
}

impl Lists {
    /// Lists for Jaccard threshold `tau` (`0 < tau <= 1`). `count_filter` is false for the
    /// weighted measure, where the set bounds do not hold.
    pub fn new(tau: f64, count_filter: bool) -> Result<Lists, IndexParamError> {
        if !(tau > 0.0 && tau <= 1.0) {
            return Err(IndexParamError(format!(
                "jaccard threshold must be in (0, 1], got {tau}"
            )));
        }
        Ok(Lists {
            tau,
            count_filter,
            shards: vec![Shard::default(); 1 << SHARD_BITS],
            presence: Presence::default(),
            recent: Recent::for_presence(presence::MIN_BITS),
            lens: Vec::new(),
            base: 0,
            lead: 0,
            postings: 0,
            documents: 0,
            order: Vec::new(),
        })
    }

    /// The Jaccard threshold τ.
    pub fn tau(&self) -> f64 {
        self.tau
    }

    /// Whether the count filter is on (the Jaccard measure).
    pub fn count_filter(&self) -> bool {
        self.count_filter
    }

    /// Prefix length `n − ceil(τ·n) + 1` of a set of `n` signatures, clamped to
    /// `[1, n]`; 0 for an empty set.
    pub fn prefix_len(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let overlap = to_len(ceil_eps(self.tau * n as f64)) as usize;
        (n + 1).saturating_sub(overlap).clamp(1, n)
    }

    /// Inclusive range `[ceil(τ·n), floor(n / τ)]` of set lengths that can
    /// reach Jaccard τ with a set of `n` signatures.
    pub fn length_window(&self, n: usize) -> (u32, u32) {
        let n = n as f64;
        (
            to_len(ceil_eps(self.tau * n)),
            to_len(floor_eps(n / self.tau)),
        )
    }

    /// How many times a query of `nx` signatures must meet an indexed set of `ny` signatures
    /// in the lists for the pair to possibly reach τ (at least 1).
    pub fn required_hits(&self, nx: usize, ny: usize) -> u32 {
        if !self.count_filter {
            return 1;
        }
        let overlap = to_len(ceil_eps(self.tau * (nx + ny) as f64 / (1.0 + self.tau)));
        let left_out = len_u32(ny - self.prefix_len(ny));
        overlap.saturating_sub(left_out).max(1)
    }

    /// Calls `f` with the low 32 bits of every document number in the list of `sig` (in no
    /// particular order).
    #[inline]
    pub fn for_each(&self, sig: u32, mut f: impl FnMut(u32)) {
        if self.presence.may_contain(sig) {
            let recent = self.recent.get(sig);
            self.shards[shard(sig)].for_each(sig as u16, recent, &mut f);
        }
    }

    /// Calls `f(i, doc)` for every document in the list of `sigs[i]`, for every `i`.
    ///
    /// A page has a hundred signatures or more, nearly all in other shards, and the lists
    /// outgrow the caches, so a lookup one at a time waits on three or four cache misses in
    /// a row. In groups of [`GROUP`] signatures (group prefetching: the misses of a group
    /// overlap instead of queueing):
    /// 1. the presence lines of the group (and of the next one) are prefetched, then read:
    ///    most signatures have no list and stop there;
    /// 2. the shard headers of the rest are prefetched, with their lines of the map of
    ///    entries outside the bases ([`Recent`]);
    /// 3. the line of each base's directory slot is prefetched (or, in a short base of whole
    ///    keys, the lines its search starts from), and, only where that map says the middle
    ///    run or the buffer may hold an entry, their lines too;
    /// 4. the lines of the keys each directory slot names are prefetched;
    /// 5. the bases are searched, and the lines of the documents found prefetched;
    /// 6. the documents are read (and the small runs searched where the map said so).
    ///
    /// The deciding thread is bound by how many lines it keeps in flight, so each line not
    /// asked for is time saved: about five lines a signature with a list instead of ten.
    #[inline]
    fn visit(&self, sigs: &[u32], mut f: impl FnMut(usize, u32)) {
        let mut live = [0u8; GROUP];
        for &s in sigs.iter().take(GROUP) {
            self.presence.prefetch(s);
        }
        for (g, group) in sigs.chunks(GROUP).enumerate() {
            for &s in sigs.iter().skip((g + 1) * GROUP).take(GROUP) {
                self.presence.prefetch(s);
            }
            let mut n = 0;
            for (j, &s) in group.iter().enumerate() {
                live[n] = j as u8;
                n += usize::from(self.presence.may_contain(s));
            }
            let live = &live[..n];
            for &j in live {
                let s = group[usize::from(j)];
                prefetch(&self.shards[shard(s)]);
                self.recent.prefetch(s);
            }
            let mut recent = [false; GROUP];
            for &j in live {
                let s = group[usize::from(j)];
                let r = self.recent.get(s);
                recent[usize::from(j)] = r;
                self.shards[shard(s)].prefetch_lookup(s as u16, r);
            }
            // the lines of the bases' keys, placed by their directories' lines
            for &j in live {
                let s = group[usize::from(j)];
                self.shards[shard(s)].prefetch_base_keys(s as u16);
            }
            // the base's searches (their lines are on the way), then the lines of the
            // documents they found, then the documents
            let mut base = [(0u32, 0u32); GROUP];
            for &j in live {
                let s = group[usize::from(j)];
                let sh = &self.shards[shard(s)];
                let (start, end) = sh.base_range(s as u16);
                if start < end {
                    sh.prefetch_base_docs(start);
                }
                base[usize::from(j)] = (start as u32, end as u32);
            }
            for &j in live {
                let i = g * GROUP + usize::from(j);
                let s = sigs[i];
                let sh = &self.shards[shard(s)];
                let (start, end) = base[usize::from(j)];
                sh.for_each_base(start as usize, end as usize, &mut |d| f(i, d));
                if recent[usize::from(j)] {
                    sh.for_each_recent(s as u16, &mut |d| f(i, d));
                }
            }
        }
    }

    /// How many documents the list of `sig` holds.
    pub fn count(&self, sig: u32) -> usize {
        let mut n = 0;
        self.for_each(sig, |_| n += 1);
        n
    }

    fn push(&mut self, sig: u32, doc: u32) {
        let h = shard(sig);
        if self.shards[h].push(sig as u16, doc) {
            // the shard merged its middle run into its base: every entry is in the base
            self.recent.clear_shard(h);
        } else {
            self.recent.set(sig);
        }
        self.presence.set(sig);
        self.postings += 1;
    }

    /// Removes `doc` from the list of `sig`; whether it was there. The presence bit of the
    /// signature's group is cleared when the group has no entry left.
    fn pull(&mut self, sig: u32, doc: u32) -> bool {
        let sh = &mut self.shards[shard(sig)];
        let found = sh.pull(sig as u16, doc);
        if found {
            // the group lies within the shard: the map has at least SHARD_BITS bits
            let (first, last) = self.presence.group(sig);
            if !sh.any_in(first as u16, last as u16) {
                self.presence.clear(sig);
            }
        }
        self.postings -= u64::from(found);
        found
    }

    /// Doubles the presence map while a quarter of its bits are set.
    fn grow_presence(&mut self) {
        if !self.presence.full() {
            return;
        }
        while self.presence.full() {
            let shards = &self.shards;
            self.presence = self.presence.doubled(|map| {
                for (h, sh) in shards.iter().enumerate() {
                    sh.for_each_signature(h, |s| {
                        map.set(s);
                    });
                }
            });
        }
        self.rebuild_recent();
    }

    /// Sets the map of entries outside the bases again, for the presence map's size, from
    /// the shards' middle runs and buffers.
    fn rebuild_recent(&mut self) {
        let mut recent = Recent::for_presence(self.presence.bits());
        for (h, sh) in self.shards.iter().enumerate() {
            for s in sh.recent_signatures(h) {
                recent.set(s);
            }
        }
        self.recent = recent;
    }

    /// Enters document `doc` with signature set `sigs` (sorted, distinct) in the lists of
    /// the `p(|sigs|)` signatures whose lists are shortest (ties: the smaller hash).
    pub fn insert(&mut self, sigs: &[u32], doc: u64) -> Result<(), DocTooLarge> {
        self.insert_counted(sigs, None, doc)
    }

    /// [`Lists::insert`] with the list lengths of `sigs` already known (from the
    /// [`Lists::query`] of the same set just before, with no insert between).
    pub fn insert_counted(
        &mut self,
        sigs: &[u32],
        counts: Option<&[u32]>,
        doc: u64,
    ) -> Result<(), DocTooLarge> {
        debug_assert!(sigs.windows(2).all(|w| w[0] < w[1]), "unsorted signatures");
        if !self.can_hold(doc) {
            return Err(DocTooLarge(doc));
        }
        if sigs.is_empty() {
            return Ok(());
        }
        let doc32 = doc as u32;
        let p = self.prefix_len(sigs.len());
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        match counts {
            Some(c) if c.len() == sigs.len() => {
                order.extend(c.iter().copied().zip(sigs.iter().copied()));
            }
            _ => {
                let mut c = vec![0u32; sigs.len()];
                self.visit(sigs, |i, _| c[i] += 1);
                order.extend(c.into_iter().zip(sigs.iter().copied()));
            }
        }
        if p < order.len() {
            order.select_nth_unstable(p - 1);
        }
        // the buffers written are in shards nobody probed just now (most of a prefix has
        // empty lists, which the query stopped at the presence map): their misses overlap
        for &(_, s) in &order[..p] {
            prefetch(&self.shards[shard(s)]);
            // and the lines of the two maps each entry sets: the presence lines were read
            // by the query, maybe long enough ago to be gone; the lines of the map of
            // entries outside the bases, nobody read (a prefix is mostly signatures
            // without a list, whose lookups stopped at the presence map)
            self.presence.prefetch(s);
            self.recent.prefetch(s);
        }
        for &(_, s) in &order[..p] {
            self.shards[shard(s)].prefetch_push();
        }
        for &(_, s) in &order[..p] {
            self.push(s, doc32);
        }
        self.order = order;
        self.grow_presence();
        let at = self.place(doc);
        self.lens[at] = len_u32(sigs.len());
        self.documents += 1;
        Ok(())
    }

    /// Whether document `doc` can be entered: the numbers from the oldest listed to the
    /// newest, `doc` among them, span at most [`MAX_SPAN`].
    pub fn can_hold(&self, doc: u64) -> bool {
        if self.documents == 0 {
            return true;
        }
        let first = self.base.min(doc);
        let last = (self.base + self.lens.len() as u64)
            .saturating_sub(1)
            .max(doc);
        last - first <= MAX_SPAN
    }

    /// The slot of `doc` in `lens` (which [`Lists::can_hold`]), made if it is past either end.
    fn place(&mut self, doc: u64) -> usize {
        if self.documents == 0 {
            // nothing listed: the span starts again here
            self.lens.clear();
            self.base = doc;
            self.lead = 0;
        }
        if doc < self.base {
            // a page older than the oldest listed (entered out of order)
            let more = (self.base - doc) as usize;
            self.lens.splice(0..0, std::iter::repeat_n(0, more));
            self.base = doc;
            self.lead = 0;
        }
        let at = (doc - self.base) as usize;
        if self.lens.len() <= at {
            self.lens.resize(at + 1, 0);
        }
        self.lead = self.lead.min(at);
        at
    }

    /// The slot in `lens` of the document whose low 32 bits the lists keep as `d`.
    #[inline]
    fn slot(&self, d: u32) -> usize {
        d.wrapping_sub(self.base as u32) as usize
    }

    /// Drops the leading slots of removed pages once they are a quarter of `lens` (a
    /// window or a cap removes the oldest pages first): each slot is passed once, and the
    /// copy of the rest is paid for by the quarter dropped.
    fn drop_front(&mut self) {
        if self.documents == 0 {
            self.lens = Vec::new();
            self.lead = 0;
            return;
        }
        while self.lead < self.lens.len() && self.lens[self.lead] == 0 {
            self.lead += 1;
        }
        if self.lead >= 1024 && self.lead * 4 >= self.lens.len() {
            self.lens.drain(..self.lead);
            self.base += self.lead as u64;
            self.lead = 0;
            if self.lens.capacity() > 2 * self.lens.len() {
                self.lens.shrink_to(self.lens.len() + self.lens.len() / 2);
            }
        }
    }

    /// The slot in `lens` of document `doc` when it is listed (its length is not 0).
    fn listed_slot(&self, doc: u64) -> Option<usize> {
        doc.checked_sub(self.base)
            .and_then(|at| usize::try_from(at).ok())
            .filter(|&at| self.lens.get(at).is_some_and(|&n| n > 0))
    }

    /// Removes document `doc` (signature set `sigs`) from every list that holds it.
    pub fn remove(&mut self, sigs: &[u32], doc: u64) {
        let Some(at) = self.listed_slot(doc) else {
            return;
        };
        for &s in sigs {
            // the low 32 bits, as entered
            self.pull(s, doc as u32);
        }
        self.lens[at] = 0;
        self.documents -= 1;
        self.drop_front();
    }

    /// Whether documents with `entries` list entries in all leave faster in one pass over
    /// the shards ([`Lists::remove_all`]) than one at a time ([`Lists::remove`]): one at a
    /// time rebuilds a shard's run for every entry (at 2M pages a cap's sweep, a twentieth
    /// of the pages, took most of the decider's time so), one pass rebuilds every shard.
    pub fn one_pass(entries: usize) -> bool {
        entries >= 1 << SHARD_BITS
    }

    /// Removes documents `docs` from every list that holds them in one pass over the
    /// shards, each rebuilt without them; needs only their numbers.
    pub fn remove_all(&mut self, docs: &[u64]) {
        // the slots of the pages removed now, a bit each: every entry of every shard asks,
        // and the bits of 2M pages (256 KiB) stay in the cache where their lengths (8 MiB)
        // did not (reading them was 14 % of a decider's time under a window that removes)
        let mut removed = 0;
        let mut bits = vec![0u64; self.lens.len().div_ceil(64)];
        for &doc in docs {
            if let Some(at) = self.listed_slot(doc) {
                self.lens[at] = 0;
                bits[at >> 6] |= 1 << (at & 63);
                removed += 1;
            }
        }
        if removed == 0 {
            return;
        }
        let span = self.lens.len();
        let Lists {
            shards,
            recent,
            base,
            presence,
            ..
        } = self;
        let base32 = *base as u32;
        let mut gone = 0;
        // set again from the entries that stay, in place (a second map would be as large)
        presence.clear_all();
        for (h, sh) in shards.iter_mut().enumerate() {
            // every entry is of a page listed until now: those removed now go (and, as
            // before, any outside the span)
            let n = sh.retain(|d| {
                let at = d.wrapping_sub(base32) as usize;
                at < span && bits[at >> 6] >> (at & 63) & 1 == 0
            });
            if n > 0 {
                // every entry left is in the base
                recent.clear_shard(h);
                gone += n as u64;
            }
            sh.for_each_signature(h, |s| presence.set(s));
        }
        self.postings -= gone;
        self.documents -= removed;
        self.drop_front();
    }

    /// Collects the candidate documents for signature set `sigs` (sorted, distinct): every
    /// indexed document with Jaccard ≥ τ, and others that pass the length and count filters.
    /// `out` is cleared, then receives the candidates sorted, each once.
    pub fn query(&self, sigs: &[u32], out: &mut Vec<u64>, scratch: &mut QueryScratch) {
        let mut counts = Vec::new();
        self.query_counted(sigs, out, scratch, &mut counts);
    }

    /// [`Lists::query`], also giving the length of the list of every signature of `sigs`
    /// in `counts` (for [`Lists::insert_counted`]).
    pub fn query_counted(
        &self,
        sigs: &[u32],
        out: &mut Vec<u64>,
        scratch: &mut QueryScratch,
        counts: &mut Vec<u32>,
    ) {
        out.clear();
        let QueryScratch { hits, met } = scratch;
        hits.clear();
        met.clear();
        counts.clear();
        debug_assert!(sigs.windows(2).all(|w| w[0] < w[1]), "unsorted signatures");
        if sigs.is_empty() {
            return;
        }
        let (lo, hi) = self.length_window(sigs.len());
        counts.resize(sigs.len(), 0);
        // (document, its set length) for every entry met; the length's line is asked for
        // at once and read in a pass of its own
        let lens = &self.lens;
        let base = self.base as u32;
        self.visit(sigs, |i, d| {
            counts[i] += 1;
            met.push((d, 0));
            prefetch(lens.as_ptr().wrapping_add(d.wrapping_sub(base) as usize));
        });
        // the lengths read in one pass of their own, so that their misses overlap
        for m in met.iter_mut() {
            m.1 = self.lens.get(self.slot(m.0)).copied().unwrap_or(0);
        }
        for &(d, n) in met.iter() {
            if n >= lo && n <= hi {
                *hits.entry(d).or_insert(0) += 1;
            }
        }
        for (&d, &h) in hits.iter() {
            let at = self.slot(d);
            let ny = self.lens.get(at).copied().unwrap_or(0) as usize;
            if h >= self.required_hits(sigs.len(), ny) {
                out.push(self.base + at as u64);
            }
        }
        out.sort_unstable();
    }

    /// Sizes and memory.
    pub fn stats(&self) -> ListStats {
        let mut s = ListStats {
            documents: self.documents,
            postings: self.postings,
            ..Default::default()
        };
        let mut bytes = 0u64;
        for sh in &self.shards {
            if sh.len() > 0 {
                let (distinct, shared, longest) = sh.shape();
                s.signatures += distinct;
                s.shared_signatures += shared;
                s.longest = s.longest.max(longest);
            }
            bytes += sh.bytes();
        }
        bytes += self.lens.capacity() as u64 * 4;
        bytes += self.presence.bytes() + self.recent.bytes();
        s.memory_bytes = bytes;
        s
    }
}

#[cfg(test)]
mod tests;
