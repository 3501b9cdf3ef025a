//! The document store: one record per document id, with the stored decision.
//!
//! Value layout of a `docs` entry (record version 6; `varint` is LEB128, unsigned):
//!
//! | field | encoding |
//! |---|---|
//! | record version | u8 = 6 (version 5 is the same without the short blocks and software signatures, version 4 also without the identity, version 3 also without the template sample, version 2 also without the delta) |
//! | decision | u8: 0 unique, 1 duplicate, 2 skipped |
//! | flags | u8: bit 0 similarity present, bit 1 Hamming distance present, bit 2 signature delta present, bit 3 template sample present, bit 4 identity present, bit 5 title present, bit 6 short blocks present, bit 7 software signatures present |
//! | method | u8: 0 none, 1 alg-g, 2 alg-h, 3 spotsigs, 4 sentences |
//! | first seen | varint of the zigzag-encoded i64, Unix seconds |
//! | fingerprint | u8 word count n, then n × u64 LE |
//! | signatures | varint count n; if n > 0: u8 Rice parameter k, then a bit stream (below) |
//! | id, url | varint length + UTF-8 bytes each |
//! | canonical id, canonical url | varint length + bytes each (length 0: none) |
//! | similarity | f64 LE, if flagged |
//! | hamming | varint, if flagged |
//! | signature delta, if flagged | added: signatures as above; removed: signatures as above (every frequency 1) |
//! | template sample, if flagged (bit 3 of flags; record version 4) | u8 count m, then m × u32 LE, ascending: the smallest hashes of a short page's blocks ([`crate::signature::template`]) |
//! | identity, if flagged (bit 4 of flags; record version 5) | u64 LE: the hash of the page's whole visible text, numbers aside ([`crate::signature::identity`]) |
//! | title, if flagged (bit 5 of flags; record version 5) | u64 LE: the hash of the page's `<title>`, numbers aside ([`crate::signature::identity::title`]) |
//! | short blocks, if flagged (bit 6 of flags; record version 6) | signatures as above (every frequency 1): the hashes of the page's short blocks ([`crate::signature::software`]), which the software-text counts are rebuilt from ([`super::software`]); with text rules 7, of its long blocks too (bit 0 of a hash set, clear for a short block) |
//! | software signatures, if flagged (bit 7 of flags; record version 6; unique documents) | signatures as above (every frequency 1): the page's signatures left out of matching as software text when it was decided |
//!
//! The signatures are the ascending hashes `h_1 < … < h_n` with their frequencies. The bit
//! stream (least significant bit first, padded to a byte) holds for each signature the gap
//! `g_i = h_i − h_{i−1}` (`h_0 = 0`, so `g_1 = h_1`) as a Rice code, `g >> k` in unary (ones
//! ended by a zero) then the low `k` bits, then one bit that is set when the frequency is
//! above 1; after the stream, one varint `freq − 2` for each flagged signature, in order.
//! With `k ≈ log2(mean gap)` a signature costs about `log2(2^32 / n) + 2.5` bits: 3.4
//! bytes at n = 100 instead of 8 (record version 1).
//!
//! Only unique documents carry their signatures (they are the durable copy of the
//! in-memory lists); skipped pages are stored without them. A duplicate carries its
//! signatures as a delta from its canonical document's ([`SigDelta`]): the entries whose
//! hash is not in the canonical set or whose frequency differs (with the duplicate's
//! frequency), and the canonical hashes the duplicate lacks. At the similarities that make
//! a duplicate this is a fraction of the full set, and it is what `explain` and the
//! grouping of result sets read a duplicate's signatures from.

use super::error::IndexError;
use crate::signature::Signatures;

/// What was decided for a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    /// No indexed document reaches τ; the page was indexed.
    Unique,
    /// The best match reaches τ.
    Duplicate,
    /// Too few signatures to judge; not indexed.
    Skipped,
}

impl DecisionKind {
    /// Lowercase name, as in records and headers.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Unique => "unique",
            DecisionKind::Duplicate => "duplicate",
            DecisionKind::Skipped => "skipped",
        }
    }
}

/// Which index found the match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Found {
    /// alg.G permuted tables (fingerprint within the Hamming radius).
    AlgG,
    /// alg.H merged group index.
    AlgH,
    /// Exact-Jaccard SpotSigs lists.
    Spotsigs,
    /// Exact-Jaccard lists over sentence shingles.
    Sentences,
}

impl Found {
    /// The byte that stands for `found` in stored records (0: none).
    pub fn code(found: Option<Found>) -> u8 {
        match found {
            None => 0,
            Some(Found::AlgG) => 1,
            Some(Found::AlgH) => 2,
            Some(Found::Spotsigs) => 3,
            Some(Found::Sentences) => 4,
        }
    }

    /// What a stored byte stands for ([`Found::code`]); `Err` with the byte for another.
    pub fn of_code(code: u8) -> Result<Option<Found>, u8> {
        Ok(match code {
            0 => None,
            1 => Some(Found::AlgG),
            2 => Some(Found::AlgH),
            3 => Some(Found::Spotsigs),
            4 => Some(Found::Sentences),
            m => return Err(m),
        })
    }

    /// Name as in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Found::AlgG => "alg-g",
            Found::AlgH => "alg-h",
            Found::Spotsigs => "spotsigs",
            Found::Sentences => "sentences",
        }
    }
}

/// A decision with what it rests on.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// unique, duplicate or skipped.
    pub kind: DecisionKind,
    /// The canonical document's id (duplicates).
    pub canonical_id: Option<String>,
    /// The canonical document's URL (duplicates).
    pub canonical_url: Option<String>,
    /// Similarity to the canonical document (duplicates).
    pub similarity: Option<f64>,
    /// Hamming distance of the fingerprints, where a fingerprint index found the match.
    pub hamming: Option<u32>,
    /// The index that found the match.
    pub found_by: Option<Found>,
}

impl Decision {
    /// A decision of `kind` with nothing attached.
    pub fn plain(kind: DecisionKind) -> Decision {
        Decision {
            kind,
            canonical_id: None,
            canonical_url: None,
            similarity: None,
            hamming: None,
            found_by: None,
        }
    }
}

/// One stored document.
#[derive(Clone, Debug, PartialEq)]
pub struct DocRecord {
    /// Document id.
    pub id: String,
    /// Page URL.
    pub url: String,
    /// First seen, Unix seconds.
    pub first_seen: i64,
    /// Fingerprint words.
    pub fingerprint: Vec<u64>,
    /// Signature multiset (empty for documents that are not indexed).
    pub sigs: Signatures,
    /// The decision made when the page was first seen.
    pub decision: Decision,
    /// A duplicate's signatures as a delta from its canonical document's.
    pub delta: Option<SigDelta>,
    /// A short page's template sample ([`crate::signature::template`]): the smallest
    /// hashes of its blocks, ascending; empty for other pages.
    pub template: Vec<u32>,
    /// The identity of the page's whole visible text ([`crate::signature::identity`]; text
    /// rules 5 and later).
    pub identity: Option<u64>,
    /// The hash of the page's title ([`crate::signature::identity::title`]; text rules 5
    /// and later).
    pub title: Option<u64>,
    /// The hashes of the page's short blocks, ascending ([`crate::signature::software`];
    /// text rules 6 and later; its long blocks too, tagged by bit 0, with 7 and later).
    pub blocks: Vec<u32>,
    /// The page's signatures left out of matching as software text when it was decided,
    /// ascending ([`super::software`]; kept for unique documents only).
    pub software: Vec<u32>,
}

/// A signature multiset as the difference from another (a duplicate's from its canonical's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SigDelta {
    /// Entries whose hash is not in the base or whose frequency differs, with their own
    /// frequency; ascending.
    pub added: Vec<(u32, u32)>,
    /// Hashes of the base that are not in the set; ascending.
    pub removed: Vec<u32>,
}

impl SigDelta {
    /// The delta that turns `base` into `set`.
    pub fn between(set: &Signatures, base: &Signatures) -> SigDelta {
        let (a, b) = (set.entries(), base.entries());
        let mut d = SigDelta::default();
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if j == b.len() || (i < a.len() && a[i].0 < b[j].0) {
                d.added.push(a[i]);
                i += 1;
            } else if i == a.len() || b[j].0 < a[i].0 {
                d.removed.push(b[j].0);
                j += 1;
            } else {
                if a[i].1 != b[j].1 {
                    d.added.push(a[i]);
                }
                i += 1;
                j += 1;
            }
        }
        d
    }

    /// `base` changed by the delta; `None` if the delta does not fit `base` (it removes a
    /// hash `base` lacks).
    pub fn apply(&self, base: &Signatures) -> Option<Signatures> {
        let b = base.entries();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(b.len() + self.added.len());
        let (mut i, mut r) = (0, 0);
        for &(h, f) in b {
            if r < self.removed.len() && self.removed[r] < h {
                return None; // removes a hash the base does not have
            }
            if r < self.removed.len() && self.removed[r] == h {
                r += 1;
                continue;
            }
            while i < self.added.len() && self.added[i].0 < h {
                out.push(self.added[i]);
                i += 1;
            }
            if i < self.added.len() && self.added[i].0 == h {
                out.push(self.added[i]);
                i += 1;
            } else {
                out.push((h, f));
            }
        }
        if r < self.removed.len() {
            return None;
        }
        out.extend_from_slice(&self.added[i..]);
        Signatures::from_entries(out)
    }
}

const RECORD_VERSION: u8 = 6;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: Option<&str>) {
    let s = s.unwrap_or("");
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Appends bits to a byte vector, least significant bit first.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    bits: u32,
}

impl BitWriter<'_> {
    fn put(&mut self, value: u64, n: u32) {
        debug_assert!(n <= 32);
        self.acc |= (value & ((1u64 << n) - 1)) << self.bits;
        self.bits += n;
        while self.bits >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.bits -= 8;
        }
    }
    fn ones(&mut self, mut n: u64) {
        while n >= 32 {
            self.put(u64::from(u32::MAX), 32);
            n -= 32;
        }
        self.put((1u64 << n) - 1, n as u32);
    }
    fn finish(mut self) {
        if self.bits > 0 {
            self.out.push(self.acc as u8);
            self.acc = 0;
            self.bits = 0;
        }
    }
}

/// The Rice parameter for `n` ascending hashes ending at `last`: ⌊log2(mean gap)⌋.
fn rice_k(n: usize, last: u32) -> u32 {
    let mean = (u64::from(last) + 1) / n.max(1) as u64;
    if mean <= 1 {
        0
    } else {
        63 - mean.leading_zeros()
    }
}

/// Encodes a signature multiset (ascending hashes) as documented above.
fn put_sigs(out: &mut Vec<u8>, sigs: &[(u32, u32)]) {
    put_varint(out, sigs.len() as u64);
    let Some(&(last, _)) = sigs.last() else {
        return;
    };
    let k = rice_k(sigs.len(), last);
    out.push(k as u8);
    let mut w = BitWriter {
        out,
        acc: 0,
        bits: 0,
    };
    let mut prev = 0u32;
    for &(h, f) in sigs {
        let gap = u64::from(h - prev);
        prev = h;
        w.ones(gap >> k);
        w.put(0, 1);
        w.put(gap, k);
        w.put(u64::from(f > 1), 1);
    }
    w.finish();
    for &(_, f) in sigs {
        if f > 1 {
            put_varint(out, u64::from(f - 2));
        }
    }
}

/// A signature multiset in the record's compact form (the Rice-coded stream of the layout
/// above, about 3.4 bytes a signature): for holding many sets in memory.
pub fn encode_signatures(sigs: &Signatures) -> Vec<u8> {
    let mut out = Vec::with_capacity(sigs.set_len() * 7 / 2 + 8);
    put_sigs(&mut out, sigs.entries());
    out
}

/// The multiset of [`encode_signatures`]; an error for anything else.
pub fn decode_signatures(bytes: &[u8]) -> Result<Signatures, IndexError> {
    let mut r = Reader { b: bytes, at: 0 };
    let mut entries = Vec::with_capacity(r.sig_count_hint());
    r.sigs(&mut |h, f| entries.push((h, f)))?;
    if r.at != bytes.len() {
        return Err(IndexError::Corrupt(
            "trailing bytes after signatures".into(),
        ));
    }
    Signatures::from_entries(entries)
        .ok_or_else(|| IndexError::Corrupt("signatures not sorted".into()))
}

impl DocRecord {
    /// Encodes the record (layout in the module docs).
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(true)
    }

    /// Encodes the record, with its signatures or with none.
    pub fn encode_with(&self, signatures: bool) -> Vec<u8> {
        let sigs = if signatures { self.sigs.entries() } else { &[] };
        let d = &self.decision;
        let mut out = Vec::with_capacity(48 + sigs.len() * 4 + self.url.len() + self.id.len());
        out.push(RECORD_VERSION);
        out.push(match d.kind {
            DecisionKind::Unique => 0,
            DecisionKind::Duplicate => 1,
            DecisionKind::Skipped => 2,
        });
        out.push(
            u8::from(d.similarity.is_some())
                | (u8::from(d.hamming.is_some()) << 1)
                | (u8::from(self.delta.is_some()) << 2)
                | (u8::from(signatures && !self.template.is_empty()) << 3)
                | (u8::from(self.identity.is_some()) << 4)
                | (u8::from(self.title.is_some()) << 5)
                | (u8::from(!self.blocks.is_empty()) << 6)
                | (u8::from(signatures && !self.software.is_empty()) << 7),
        );
        out.push(Found::code(d.found_by));
        put_varint(
            &mut out,
            ((self.first_seen << 1) ^ (self.first_seen >> 63)) as u64,
        );
        out.push(self.fingerprint.len() as u8);
        for w in &self.fingerprint {
            out.extend_from_slice(&w.to_le_bytes());
        }
        put_sigs(&mut out, sigs);
        put_str(&mut out, Some(&self.id));
        put_str(&mut out, Some(&self.url));
        put_str(&mut out, d.canonical_id.as_deref());
        put_str(&mut out, d.canonical_url.as_deref());
        if let Some(sim) = d.similarity {
            out.extend_from_slice(&sim.to_le_bytes());
        }
        if let Some(h) = d.hamming {
            put_varint(&mut out, u64::from(h));
        }
        if let Some(delta) = &self.delta {
            put_sigs(&mut out, &delta.added);
            let removed: Vec<(u32, u32)> = delta.removed.iter().map(|&h| (h, 1)).collect();
            put_sigs(&mut out, &removed);
        }
        // only a candidate (a unique page) is ever compared by its template
        if signatures && !self.template.is_empty() {
            let n = self.template.len().min(255);
            out.push(n as u8);
            for h in &self.template[..n] {
                out.extend_from_slice(&h.to_le_bytes());
            }
        }
        if let Some(identity) = self.identity {
            out.extend_from_slice(&identity.to_le_bytes());
        }
        if let Some(title) = self.title {
            out.extend_from_slice(&title.to_le_bytes());
        }
        if !self.blocks.is_empty() {
            let blocks: Vec<(u32, u32)> = self.blocks.iter().map(|&h| (h, 1)).collect();
            put_sigs(&mut out, &blocks);
        }
        // only a candidate (a unique page) is ever compared without its software text
        if signatures && !self.software.is_empty() {
            let software: Vec<(u32, u32)> = self.software.iter().map(|&h| (h, 1)).collect();
            put_sigs(&mut out, &software);
        }
        out
    }

    /// The first 64 bits of the fingerprint (0 without one).
    pub fn fp64(&self) -> u64 {
        self.fingerprint.first().copied().unwrap_or(0)
    }

    /// The signatures this document is matched on, before the document frequencies: its
    /// signatures without those left out as software text when it was decided.
    pub fn matched_sigs(&self) -> std::borrow::Cow<'_, Signatures> {
        match self.sigs.without(&self.software) {
            Some(kept) => std::borrow::Cow::Owned(kept),
            None => std::borrow::Cow::Borrowed(&self.sigs),
        }
    }

    /// Decodes only the time a stored record was first seen (what a window's sweep asks of
    /// every record it reads).
    pub fn decode_first_seen(bytes: &[u8]) -> Result<i64, IndexError> {
        let mut r = Reader { b: bytes, at: 0 };
        r.head()?;
        r.first_seen()
    }

    /// Decodes only what the software-text counts take of a record ([`super::software`]):
    /// its URL and the first 64 bits of its fingerprint, and its short blocks into `blocks`
    /// (cleared first). The signatures are passed over, not collected: a recount after a
    /// sweep reads every stored record, and their decoding was most of its time.
    pub fn decode_counted<'a>(
        bytes: &'a [u8],
        blocks: &mut Vec<u32>,
    ) -> Result<(&'a str, u64), IndexError> {
        blocks.clear();
        let mut r = Reader { b: bytes, at: 0 };
        let head = r.head()?;
        r.first_seen()?;
        let words = r.u8()? as usize;
        let fp = r.take(8 * words)?;
        let fp64 = fp
            .get(..8)
            .map_or(0, |w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
        r.skip_sigs()?;
        r.str_ref()?;
        let url = r.str_ref()?;
        r.str_ref()?;
        r.str_ref()?;
        if head.flags & 1 != 0 {
            r.take(8)?;
        }
        if head.flags & 2 != 0 {
            r.varint()?;
        }
        if head.flags & 4 != 0 {
            r.skip_sigs()?;
            r.skip_sigs()?;
        }
        if head.flags & 8 != 0 {
            let n = r.u8()? as usize;
            r.take(n * 4)?;
        }
        r.take(8 * usize::from(head.flags & 16 != 0) + 8 * usize::from(head.flags & 32 != 0))?;
        if head.flags & 64 != 0 {
            r.sigs(&mut |h, _| blocks.push(h))?;
        }
        Ok((url, fp64))
    }

    /// Decodes a record; any inconsistency is an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<DocRecord, IndexError> {
        let mut r = Reader { b: bytes, at: 0 };
        let head = r.head()?;
        let first_seen = r.first_seen()?;
        let fingerprint = r.fingerprint()?;
        let mut entries = Vec::with_capacity(r.sig_count_hint());
        r.sigs(&mut |h, f| entries.push((h, f)))?;
        let sigs = Signatures::from_entries(entries)
            .ok_or_else(|| IndexError::Corrupt("signatures not sorted".into()))?;
        let id = r.str()?;
        let url = r.str()?;
        let canonical_id = Some(r.str()?).filter(|s| !s.is_empty());
        let canonical_url = Some(r.str()?).filter(|s| !s.is_empty());
        let similarity = if head.flags & 1 != 0 {
            Some(f64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes")))
        } else {
            None
        };
        let hamming = if head.flags & 2 != 0 {
            Some(
                u32::try_from(r.varint()?)
                    .map_err(|_| IndexError::Corrupt("hamming distance".into()))?,
            )
        } else {
            None
        };
        let delta = if head.flags & 4 != 0 {
            let mut added = Vec::new();
            r.sigs(&mut |h, f| added.push((h, f)))?;
            let mut removed = Vec::new();
            r.sigs(&mut |h, _| removed.push(h))?;
            Some(SigDelta { added, removed })
        } else {
            None
        };
        let mut template = Vec::new();
        if head.flags & 8 != 0 {
            let n = r.u8()? as usize;
            if n == 0 {
                return Err(IndexError::Corrupt("empty template sample".into()));
            }
            for c in r.take(n * 4)?.chunks_exact(4) {
                template.push(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            }
            if template.windows(2).any(|w| w[0] >= w[1]) {
                return Err(IndexError::Corrupt("template sample not sorted".into()));
            }
        }
        let identity = if head.flags & 16 != 0 {
            Some(u64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes")))
        } else {
            None
        };
        let title = if head.flags & 32 != 0 {
            Some(u64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes")))
        } else {
            None
        };
        let mut blocks = Vec::new();
        if head.flags & 64 != 0 {
            r.sigs(&mut |h, _| blocks.push(h))?;
            if blocks.is_empty() {
                return Err(IndexError::Corrupt("empty short-block list".into()));
            }
        }
        let mut software = Vec::new();
        if head.flags & 128 != 0 {
            r.sigs(&mut |h, _| software.push(h))?;
            if software.is_empty() {
                return Err(IndexError::Corrupt("empty software-signature list".into()));
            }
        }
        if r.at != bytes.len() {
            return Err(IndexError::Corrupt("trailing bytes in doc record".into()));
        }
        Ok(DocRecord {
            id,
            url,
            first_seen,
            fingerprint,
            sigs,
            decision: Decision {
                kind: head.kind,
                canonical_id,
                canonical_url,
                similarity,
                hamming,
                found_by: head.found_by,
            },
            delta,
            template,
            identity,
            title,
            blocks,
            software,
        })
    }

    /// The signatures the exact-Jaccard lists hold for this document: those it is matched
    /// on ([`DocRecord::matched_sigs`]), unless fewer than `min_signatures` are left, when
    /// it can only be found as an identical copy, by its whole set ([`crate::dedup`]).
    pub fn listed_sigs(&self, min_signatures: usize) -> std::borrow::Cow<'_, Signatures> {
        match self.matched_sigs() {
            m @ std::borrow::Cow::Owned(_) if m.set_len() < min_signatures => {
                std::borrow::Cow::Borrowed(&self.sigs)
            }
            m => m,
        }
    }

    /// Decodes only the decision and, for a unique document, the hashes the lists hold for
    /// it ([`DocRecord::listed_sigs`]) into `set` (cleared first). Returns whether the
    /// document is unique.
    pub fn decode_unique_sigs(
        bytes: &[u8],
        min_signatures: usize,
        set: &mut Vec<u32>,
    ) -> Result<bool, IndexError> {
        set.clear();
        let mut r = Reader { b: bytes, at: 0 };
        let head = r.head()?;
        if head.kind != DecisionKind::Unique {
            return Ok(false);
        }
        if head.flags & 128 != 0 {
            let rec = DocRecord::decode(bytes)?;
            set.extend(rec.listed_sigs(min_signatures).hashes());
            return Ok(true);
        }
        r.first_seen()?;
        let words = r.u8()? as usize;
        r.take(words * 8)?;
        r.sigs(&mut |h, _| set.push(h))?;
        Ok(true)
    }
}

struct Head {
    kind: DecisionKind,
    flags: u8,
    found_by: Option<Found>,
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], IndexError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| IndexError::Corrupt("doc record cut short".into()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, IndexError> {
        Ok(self.take(1)?[0])
    }
    fn varint(&mut self) -> Result<u64, IndexError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(IndexError::Corrupt("varint too long".into()))
    }
    fn head(&mut self) -> Result<Head, IndexError> {
        let version = self.u8()?;
        if !(2..=RECORD_VERSION).contains(&version) {
            return Err(IndexError::Corrupt(format!("doc record version {version}")));
        }
        let kind = match self.u8()? {
            0 => DecisionKind::Unique,
            1 => DecisionKind::Duplicate,
            2 => DecisionKind::Skipped,
            k => return Err(IndexError::Corrupt(format!("decision code {k}"))),
        };
        let flags = self.u8()?;
        // the flags each version has: the delta came with version 3, the template with 4,
        // the identity with 5, the short blocks and software signatures with 6
        let allowed: u8 = [0b011, 0b111, 0b1111, 0b11_1111, 0b1111_1111][usize::from(version - 2)];
        if flags & !allowed != 0 {
            return Err(IndexError::Corrupt(format!(
                "doc record version {version} with flags {flags:#010b}"
            )));
        }
        let found_by = Found::of_code(self.u8()?)
            .map_err(|m| IndexError::Corrupt(format!("method code {m}")))?;
        Ok(Head {
            kind,
            flags,
            found_by,
        })
    }
    fn first_seen(&mut self) -> Result<i64, IndexError> {
        let z = self.varint()?;
        Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
    }
    fn fingerprint(&mut self) -> Result<Vec<u64>, IndexError> {
        let words = self.u8()? as usize;
        (0..words)
            .map(|_| {
                Ok(u64::from_le_bytes(
                    self.take(8)?.try_into().expect("8 bytes"),
                ))
            })
            .collect()
    }
    /// The count of the signature list that starts here, bounded by the record's size
    /// (a capacity hint; nothing is consumed).
    fn sig_count_hint(&self) -> usize {
        let mut peek = Reader {
            b: self.b,
            at: self.at,
        };
        peek.varint()
            .map_or(0, |n| n.min(self.b.len() as u64 * 4) as usize)
    }

    /// Decodes the signatures, calling `each(hash, freq)` in ascending order.
    fn sigs(&mut self, each: &mut dyn FnMut(u32, u32)) -> Result<(), IndexError> {
        self.walk_sigs(Some(each))
    }

    /// Passes over the signatures, checked as [`Reader::sigs`] checks them, collecting
    /// nothing. (What follows them in a record is read by [`DocRecord::decode_counted`] only
    /// as far as it needs: it checks less of a record than [`DocRecord::decode`].)
    fn skip_sigs(&mut self) -> Result<(), IndexError> {
        self.walk_sigs(None)
    }

    fn walk_sigs(&mut self, mut each: Option<&mut dyn FnMut(u32, u32)>) -> Result<(), IndexError> {
        let n = self.varint()?;
        if n == 0 {
            return Ok(());
        }
        // every signature takes at least two bits
        if n > (self.b.len() as u64) * 4 {
            return Err(IndexError::Corrupt("signature count exceeds record".into()));
        }
        let k = u32::from(self.u8()?);
        if k > 32 {
            return Err(IndexError::Corrupt(format!("rice parameter {k}")));
        }
        let corrupt = || IndexError::Corrupt("signature stream".into());
        let stream = &self.b[self.at..];
        let total = stream.len() * 8;
        // at least 57 bits from `bit` on, zeros past the end of the stream
        let peek = |bit: usize| -> u64 {
            let at = bit >> 3;
            // one load where eight bytes remain (all but the stream's end)
            if let Some(b) = stream.get(at..at + 8) {
                return u64::from_le_bytes(b.try_into().expect("8 bytes")) >> (bit & 7);
            }
            let mut buf = [0u8; 8];
            let avail = stream.len().saturating_sub(at).min(8);
            buf[..avail].copy_from_slice(&stream[at..at + avail]);
            u64::from_le_bytes(buf) >> (bit & 7)
        };
        let mut bit = 0usize;
        let mut prev = 0u64;
        // passed over, only the count of those with a frequency is kept
        let collect = each.is_some();
        let mut flagged: Vec<(u32, bool)> =
            Vec::with_capacity(if collect { n as usize } else { 0 });
        let mut many_count = 0usize;
        for i in 0..n {
            // the unary quotient: ones up to a zero
            let mut q = 0u64;
            loop {
                let ones = (!peek(bit)).trailing_zeros().min(57);
                q += u64::from(ones);
                bit += ones as usize;
                if bit >= total || q > u64::from(u32::MAX) {
                    return Err(corrupt());
                }
                if ones < 57 {
                    bit += 1; // the zero
                    break;
                }
            }
            let w = peek(bit);
            let rem = if k == 0 { 0 } else { w & ((1u64 << k) - 1) };
            let many = (w >> k) & 1 == 1;
            bit += k as usize + 1;
            if bit > total {
                return Err(corrupt());
            }
            let h = prev + ((q << k) | rem);
            if h > u64::from(u32::MAX) || (i > 0 && h == prev) {
                return Err(IndexError::Corrupt("signatures not sorted".into()));
            }
            prev = h;
            if collect {
                flagged.push((h as u32, many));
            } else {
                many_count += usize::from(many);
            }
        }
        self.at += bit.div_ceil(8);
        // a frequency above 1 is its excess over 2, a varint each, after the stream
        let freq = |r: &mut Self| -> Result<u32, IndexError> {
            let extra = r.varint()?;
            (extra.checked_add(2))
                .and_then(|f| u32::try_from(f).ok())
                .ok_or_else(corrupt)
        };
        let Some(each) = each.as_mut() else {
            for _ in 0..many_count {
                freq(self)?;
            }
            return Ok(());
        };
        for (h, many) in flagged {
            let f = if many { freq(self)? } else { 1 };
            each(h, f);
        }
        Ok(())
    }
    fn str(&mut self) -> Result<String, IndexError> {
        self.str_ref().map(str::to_string)
    }
    fn str_ref(&mut self) -> Result<&'a str, IndexError> {
        let n = usize::try_from(self.varint()?)
            .map_err(|_| IndexError::Corrupt("string length".into()))?;
        let b = self.take(n)?;
        std::str::from_utf8(b).map_err(|_| IndexError::Corrupt("string not UTF-8".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A duplicate's record with every field set.
    fn every_field() -> DocRecord {
        DocRecord {
            id: "d1".into(),
            url: "https://a.test/x".into(),
            first_seen: 1_700_000_000,
            fingerprint: vec![0xdead_beef, 7],
            sigs: Signatures::from_hashes(vec![9, 3, 3]),
            decision: Decision {
                kind: DecisionKind::Duplicate,
                canonical_id: Some("d0".into()),
                canonical_url: Some("https://b.test/".into()),
                similarity: Some(0.75),
                hamming: Some(3),
                found_by: Some(Found::AlgG),
            },
            delta: Some(SigDelta {
                added: vec![(4, 1), (9, 3)],
                removed: vec![5],
            }),
            template: vec![2, 40, 7_000_000],
            identity: Some(0xfeed_0000_0000_beef),
            title: Some(77),
            blocks: vec![11, 12, 4_000_000_000],
            software: vec![9],
        }
    }

    /// `rec` skipped, with none of the optional fields.
    fn bare(rec: &DocRecord) -> DocRecord {
        DocRecord {
            decision: Decision::plain(DecisionKind::Skipped),
            sigs: Signatures::default(),
            delta: None,
            template: Vec::new(),
            identity: None,
            title: None,
            blocks: Vec::new(),
            software: Vec::new(),
            ..rec.clone()
        }
    }

    #[test]
    fn roundtrip_and_corruption() {
        let rec = every_field();
        let bytes = rec.encode();
        assert_eq!(bytes[0], 6);
        assert_eq!(bytes[2] & 0b1101_1000, 0b1101_1000);
        assert_eq!(DocRecord::decode(&bytes).unwrap(), rec);
        assert_eq!(rec.matched_sigs().entries(), &[(3, 2)]);
        let lean = DocRecord::decode(&rec.encode_with(false)).unwrap();
        assert_eq!(lean.sigs.set_len(), 0);
        assert_eq!(lean.decision, rec.decision);
        // the short blocks are kept for every document, the software signatures with the
        // signatures only
        assert_eq!(lean.blocks, rec.blocks);
        assert!(lean.software.is_empty());
        let mut set = Vec::new();
        let unique = DocRecord {
            decision: Decision::plain(DecisionKind::Unique),
            delta: None,
            ..rec.clone()
        };
        assert!(DocRecord::decode_unique_sigs(&unique.encode(), 1, &mut set).unwrap());
        assert_eq!(
            set,
            vec![3],
            "the lists hold what the document is matched on"
        );
        assert!(DocRecord::decode_unique_sigs(&unique.encode(), 2, &mut set).unwrap());
        assert_eq!(
            set,
            vec![3, 9],
            "... unless too little is left: then its whole set"
        );
        // a version-5 record has neither
        let mut v5 = rec.encode();
        v5[0] = 5;
        assert!(
            DocRecord::decode(&v5).is_err(),
            "version 5 has no short blocks"
        );
        for cut in 0..bytes.len() {
            assert!(DocRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let plain = bare(&rec);
        assert_eq!(DocRecord::decode(&plain.encode()).unwrap(), plain);
        // a version-4 record (no identity) still reads, but not with the flag of one
        let mut v4 = plain.encode();
        v4[0] = 4;
        assert_eq!(DocRecord::decode(&v4).unwrap(), plain);
        let with_identity = DocRecord {
            identity: rec.identity,
            ..plain.clone()
        };
        assert_eq!(
            DocRecord::decode(&with_identity.encode()).unwrap(),
            with_identity
        );
        let mut v4i = with_identity.encode();
        v4i[0] = 4;
        assert!(
            DocRecord::decode(&v4i).is_err(),
            "version 4 has no identity"
        );
        let with_title = DocRecord {
            title: Some(5),
            ..plain.clone()
        };
        assert_eq!(DocRecord::decode(&with_title.encode()).unwrap(), with_title);
        let mut v4t = with_title.encode();
        v4t[0] = 4;
        assert!(DocRecord::decode(&v4t).is_err(), "version 4 has no title");
        // a version-3 record (no template sample) still reads, but not with the flag of one
        let mut v3 = plain.encode();
        v3[0] = 3;
        assert_eq!(DocRecord::decode(&v3).unwrap(), plain);
        let mut v3t = bytes.clone();
        v3t[0] = 3;
        assert!(DocRecord::decode(&v3t).is_err());
        let mut v2d = rec.encode_with(false);
        v2d[0] = 2;
        assert!(DocRecord::decode(&v2d).is_err(), "version 2 has no delta");
        let mut unknown = plain.encode();
        unknown[2] |= 0x80;
        assert!(DocRecord::decode(&unknown).is_err());
        // a record without its signatures keeps no template either
        assert!(DocRecord::decode(&rec.encode_with(false))
            .unwrap()
            .template
            .is_empty());
        // an unsorted sample is refused
        let mut bad = rec.clone();
        bad.template = vec![9, 3];
        assert!(DocRecord::decode(&bad.encode()).is_err());
    }

    /// What the software-text counts take of a record, read without the rest, is what the
    /// whole record holds, for records with every field, with none, without signatures,
    /// without a fingerprint, with frequencies above 1, of every earlier version read.
    #[test]
    fn the_counted_fields_read_alone_are_those_of_the_whole_record() {
        let full = DocRecord {
            first_seen: -3,
            sigs: Signatures::from_entries(vec![(3, 2), (9, 1), (70_000, 9)]).unwrap(),
            ..every_field()
        };
        let none = DocRecord {
            fingerprint: Vec::new(),
            ..bare(&full)
        };
        let mut blocks = vec![1];
        for (rec, with_sigs) in [(&full, true), (&full, false), (&none, true)] {
            let bytes = rec.encode_with(with_sigs);
            let whole = DocRecord::decode(&bytes).unwrap();
            let (url, fp64) = DocRecord::decode_counted(&bytes, &mut blocks).unwrap();
            assert_eq!(
                (url, fp64, &blocks),
                (&whole.url[..], whole.fp64(), &whole.blocks)
            );
        }
        let mut v4 = none.encode();
        v4[0] = 4;
        assert_eq!(
            DocRecord::decode_counted(&v4, &mut blocks).unwrap(),
            ("https://a.test/x", 0)
        );
        assert!(blocks.is_empty());
        let bytes = full.encode();
        for cut in 0..bytes.len() / 2 {
            assert!(
                DocRecord::decode_counted(&bytes[..cut], &mut blocks).is_err(),
                "cut at {cut}"
            );
        }
    }

    fn sigs_roundtrip(entries: Vec<(u32, u32)>) {
        let rec = DocRecord {
            id: "x".into(),
            url: "u".into(),
            first_seen: -5,
            fingerprint: vec![1],
            sigs: Signatures::from_entries(entries.clone()).unwrap(),
            decision: Decision::plain(DecisionKind::Unique),
            ..bare(&every_field())
        };
        let bytes = rec.encode();
        assert_eq!(DocRecord::decode(&bytes).unwrap(), rec);
        let mut set = Vec::new();
        assert!(DocRecord::decode_unique_sigs(&bytes, 10, &mut set).unwrap());
        assert_eq!(set, entries.iter().map(|e| e.0).collect::<Vec<_>>());
        for cut in 0..bytes.len() {
            assert!(DocRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    fn multiset() -> impl proptest::strategy::Strategy<Value = Signatures> {
        use proptest::strategy::Strategy;
        proptest::collection::btree_map(0u32..400, 1u32..4, 0..120)
            .prop_map(|m| Signatures::from_entries(m.into_iter().collect()).unwrap())
    }

    proptest::proptest! {
        #[test]
        fn compact_signatures_roundtrip(set in multiset()) {
            let bytes = encode_signatures(&set);
            proptest::prop_assert_eq!(decode_signatures(&bytes).unwrap(), set);
            for cut in 0..bytes.len() {
                proptest::prop_assert!(decode_signatures(&bytes[..cut]).is_err());
            }
        }

        #[test]
        fn delta_applies_back(set in multiset(), base in multiset()) {
            let d = SigDelta::between(&set, &base);
            proptest::prop_assert_eq!(d.apply(&base), Some(set.clone()));
            // the delta survives the record encoding
            let rec = DocRecord {
                id: "x".into(),
                url: "u".into(),
                first_seen: 0,
                fingerprint: vec![1],
                sigs: Signatures::default(),
                decision: Decision::plain(DecisionKind::Duplicate),
                delta: Some(d.clone()),
                template: Vec::new(),
                identity: None,
                title: None,
                blocks: Vec::new(),
                software: Vec::new(),
            };
            proptest::prop_assert_eq!(DocRecord::decode(&rec.encode()).unwrap().delta, Some(d));
        }

        #[test]
        fn signatures_roundtrip(
            set in proptest::collection::btree_map(proptest::num::u32::ANY, 1u32..5, 0..300)
        ) {
            sigs_roundtrip(set.into_iter().collect());
        }
    }

    #[test]
    fn signature_edge_cases() {
        sigs_roundtrip(vec![(0, 1)]);
        sigs_roundtrip(vec![(u32::MAX, u32::MAX)]);
        sigs_roundtrip(vec![(0, 7), (1, 1), (u32::MAX, 2)]);
        sigs_roundtrip((0..1000).map(|i| (i, 1)).collect());
        // about 3.4 bytes a signature at 100 random signatures
        let entries: Vec<(u32, u32)> = (0..100u32)
            .map(|i| (i.wrapping_mul(0x9e37_79b9) >> 1 | 1, 1))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let mut out = Vec::new();
        put_sigs(&mut out, &entries);
        assert!(out.len() < 100 * 7 / 2, "{} bytes", out.len());
    }

    #[test]
    fn hostile_bytes_are_errors() {
        // a huge unary run, a count beyond the record, a bad version
        assert!(DocRecord::decode(&[2, 0, 0, 0, 0, 0, 5, 0]).is_err());
        assert!(DocRecord::decode(&[2, 0, 0, 0, 0, 0, 0xff, 0xff, 0x7f, 3, 0xff]).is_err());
        assert!(DocRecord::decode(&[1, 0]).is_err());
        // a delta that removes what the base lacks does not apply
        let d = SigDelta {
            added: vec![],
            removed: vec![7],
        };
        assert_eq!(d.apply(&Signatures::from_hashes(vec![1, 2])), None);
        assert!(DocRecord::decode(&[]).is_err());
    }
}
