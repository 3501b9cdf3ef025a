//! The near-duplicate index: storage, alg.G, alg.H, exact-Jaccard lists, the document
//! store, the stored parameters and the format version.
//!
//! Pure of the outside world except the index directory: no runtime, no metrics.
//!
//! # Key layout (format version 7)
//!
//! | family | key | value |
//! |---|---|---|
//! | `meta` | `format_version` | u32 BE |
//! | `meta` | `params` | JSON of [`IndexParams`] |
//! | `meta` | `next_doc` | u64 BE: the next internal document number |
//! | `meta` | `txn/` ‖ driver's position | a decision not yet committed ([`pending`]) |
//! | `meta` | `changelog_next` | u64 BE: the changelog offset after what the index holds unmarked ([`pending`]) |
//! | `docs` | doc number u64 BE | [`docs::DocRecord`] (layout in [`docs`]) |
//! | `ids` | document id (UTF-8) | doc number u64 BE |
//! | `fingerprints` | doc number u64 BE | fingerprint words, u64 BE each (alg-g, alg-h, chain) |
//! | `stage` | owned by the streaming stage (checkpoints) | |
//!
//! Only `unique` documents have an entry in `fingerprints` and a signature set in their
//! `docs` record (a duplicate's record holds its signatures as a delta from its canonical
//! document's); every decided document has a `docs` and an `ids` entry, so a repeated id
//! gets its stored decision. The exact-Jaccard lists ([`lists`]) are held in memory and
//! rebuilt from the unique documents' signature sets when the index is opened: the `docs`
//! family is their durable copy (format 2 kept them in a `lists` family on disk). So are
//! alg.G's and alg.H's tables ([`fptables`]), rebuilt from `fingerprints` (formats 3 to 5
//! kept the tables themselves on disk, in families `alg_g` and `alg_h`).

pub mod alg_g;
pub mod alg_h;
pub mod docs;
mod error;
pub mod fptables;
pub mod freq;
mod ids;
pub mod lists;
mod mutate;
mod pending;
pub mod reader;
mod restore;
pub mod software;
pub mod store;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use docs::{
    decode_signatures, encode_signatures, Decision, DecisionKind, DocRecord, Found, SigDelta,
};
pub use error::IndexError;
pub use mutate::Mutation;
pub use pending::Undone;
pub use reader::{IndexReader, StoredSigs};
pub use store::{
    Batch, Column, FamilyStats, IndexParamError, MemoryStore, RocksStore, Store, StoreError,
};

use crate::signature::{Features, Measure, SignatureConfig, Signatures};

/// Version of the key layout and record encodings. Bump on any change of either, or of what
/// a stored document's signatures and fingerprint are computed from (the fingerprint
/// functions, the text extraction), and an index of another version is refused.
/// Version 2: main-region extraction with boilerplate and layout containers.
/// Version 3: the exact-Jaccard lists are in memory, rebuilt from `docs` (no `lists` family).
/// Version 4: doc record version 3 (a duplicate's signatures as a delta from its canonical
/// document's). A version-3 index is read as it is (its records are version 2, which this
/// build reads) and marked version 4 when opened for writing.
/// Version 5: doc record version 4 (a short page's template sample), the document
/// frequencies' snapshot beside the lists' (`freq.snapshot`, [`freq`]). Versions 3 and 4
/// are read as they are and marked 5 when opened for writing (their settings lack the
/// short-page family and the frequencies, so they open only with those turned off:
/// `--short-shingle 0 --frequencies false`, or rebuilt).
/// Version 6: alg.G's and alg.H's tables in memory, their durable copy the `fingerprints`
/// family. Versions 3 to 5 are read as they are; opened for writing, an index of an alg.G or
/// alg.H method gets its `fingerprints` from its unique documents' records, and its `alg_g`
/// and `alg_h` families are emptied.
/// Version 7: document records of version 5, which may carry the page's identity
/// ([`crate::signature::identity`], text rules 5 and later). Versions 3 to 6 are read as
/// they are; their records carry no identity.
/// Version 8: document records of version 6, which may carry the page's short blocks and
/// the signatures left out as software text ([`software`], text rules 6 and later), and
/// the software-text snapshot beside the lists' (`software.snapshot`). Versions 3 to 7 are
/// read as they are; their records carry neither.
pub const FORMAT_VERSION: u32 = 8;

/// Format versions this build reads without a rebuild.
pub const READABLE_FORMATS: [u32; 6] = [3, 4, 5, 6, 7, 8];

const META_FORMAT: &[u8] = b"format_version";
const META_PARAMS: &[u8] = b"params";
const META_NEXT_DOC: &[u8] = b"next_doc";
/// A number that changes whenever documents leave the index, so that a lists snapshot taken
/// before a removal is never used after it.
const META_LISTS_EPOCH: &[u8] = b"lists_epoch";
/// The lists snapshot, beside the database's files.
pub const LISTS_SNAPSHOT: &str = "lists.snapshot";

/// Which index finds candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// alg.G permuted tables over the 64-bit fingerprint.
    AlgG,
    /// alg.H merged group index over a 64/128/256-bit fingerprint.
    AlgH,
    /// Exact-Jaccard inverted lists with prefix filtering: finds every pair ≥ τ.
    #[default]
    Spotsigs,
    /// alg.G first (near-exact copies), then the exact-Jaccard lists.
    Chain,
    /// The exact-Jaccard lists over sentence shingles (the signer's sentence family).
    Sentences,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 5] = [
        Method::AlgG,
        Method::AlgH,
        Method::Spotsigs,
        Method::Chain,
        Method::Sentences,
    ];

    /// The signature family the method's pages are signed with.
    pub fn features(self) -> Features {
        match self {
            Method::Sentences => Features::Sentences,
            _ => Features::Spotsigs,
        }
    }

    /// Whether the method keeps the exact-Jaccard lists.
    pub fn has_lists(self) -> bool {
        matches!(self, Method::Spotsigs | Method::Chain | Method::Sentences)
    }

    /// The default of `min-signatures`: 10 SpotSigs chains (two or three sentences of
    /// prose), 5 sentences (the few sentences of a shorter page are mostly its site's
    /// notices, and one or two shared ones reach τ; measured on the dev pages, 5 against 3
    /// raises F1 from 0.873 to 0.898 and still skips fewer pages than SpotSigs' 10).
    pub fn default_min_signatures(self) -> u32 {
        match self.features() {
            Features::Spotsigs => 10,
            Features::Sentences => 5,
        }
    }

    /// Name as in flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::AlgG => "alg-g",
            Method::AlgH => "alg-h",
            Method::Spotsigs => "spotsigs",
            Method::Chain => "chain",
            Method::Sentences => "sentences",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Method::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!("unknown method {s:?} (known: alg-g, alg-h, spotsigs, chain, sentences)")
            })
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything an index was built with; stored in `meta` and compared on open.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexParams {
    /// Candidate index.
    pub method: Method,
    /// Similarity measure of the verification.
    pub measure: Measure,
    /// Similarity threshold τ.
    pub threshold: f64,
    /// Hamming radius of alg.G / alg.H.
    pub rh: u32,
    /// Blocks (alg.G) or groups (alg.H); 0 picks the default for `rh`.
    pub m: u32,
    /// Pages with fewer distinct signatures are skipped (sentence hashes for
    /// [`Method::Sentences`]).
    pub min_signatures: u32,
    /// The signing settings.
    pub signature: SignatureConfig,
    /// Count document frequencies of signatures ([`freq`]) and match on the informative
    /// ones only: not outside the IDF band, not template text of the page's host. Absent
    /// from the stored settings of an index made before the counts existed (reads as off),
    /// and left out when off, so such an index's settings and `params_id` are as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frequencies: bool,
}

impl Default for IndexParams {
    fn default() -> Self {
        IndexParams {
            method: Method::Spotsigs,
            measure: Measure::Jaccard,
            threshold: 0.5,
            rh: 3,
            m: 0,
            min_signatures: 10,
            signature: SignatureConfig::default(),
            frequencies: false,
        }
    }
}

/// A candidate from an index lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Internal document number.
    pub doc: u64,
    /// Hamming distance, when a fingerprint index found it.
    pub hamming: Option<u32>,
    /// The index that found it.
    pub found: Found,
}

/// Sizes, for `neardup index stats`.
#[derive(Clone, Debug, Serialize)]
pub struct IndexStats {
    /// Format version.
    pub format_version: u32,
    /// Stored parameters.
    pub params: IndexParams,
    /// Documents numbered so far.
    pub next_doc: u64,
    /// `(family, keys, bytes)`.
    pub families: Vec<(String, u64, u64)>,
    /// The in-memory exact-Jaccard lists, if the method has them.
    pub lists: Option<lists::ListStats>,
    /// Bytes of the document-frequency sketches, if the index counts them.
    pub frequencies_bytes: Option<usize>,
    /// The software-text counts, if the index keeps them (text rules 6 and later).
    pub software_text: Option<software::SoftwareStats>,
    /// The in-memory fingerprint tables, if the method has them.
    pub fingerprint_tables: Option<fptables::TableStats>,
}

/// The index: a store plus the structures the parameters select.
pub struct Index {
    store: Arc<dyn Store>,
    params: IndexParams,
    /// alg.G's or alg.H's tables, if the method has them.
    tables: Option<fptables::FpTables>,
    lists: Option<lists::Lists>,
    /// Document frequencies (with the lists, when the parameters ask for them).
    freq: Option<freq::Freq>,
    /// Software text across hosts (text rules 6 and later, [`software`]).
    software: Option<software::SoftwareText>,
    /// Documents were removed since the software-text counts were made: they are counted
    /// again from the documents that stay before they are next used (a run of removals,
    /// a retention sweep's or a changelog's tombstones, costs one recount).
    software_stale: bool,
    next_doc: u64,
    scratch: Vec<(u64, u32)>,
    scratch_docs: Vec<u64>,
    scratch_hits: lists::QueryScratch,
    scratch_set: Vec<u32>,
    /// The set of the last list query and the lengths of its signatures' lists, reused by
    /// the insert that follows it.
    last_query: Vec<u32>,
    last_counts: Vec<u32>,
    /// The index's `meta/lists_epoch`.
    epoch: u64,
    /// How the lists were brought up when the index was opened.
    restore: Option<ListsRestore>,
    /// The mutations since the last [`Index::take_journal`], when journaling is on.
    journal: Option<Vec<Mutation>>,
    /// Fingerprints of every stored id: a new page's id lookup ends here ([`ids`]).
    ids: ids::IdSet,
    /// How many ids are stored (the pages the index holds; [`Index::pages`]).
    pages: u64,
    /// What the software-text snapshot on disk was taken of, as read or written by this
    /// process: a clean stop with nothing counted since does not write it again.
    software_saved: Option<freq::Stamp>,
    /// The same for the lists snapshot: (epoch, next_doc).
    lists_saved: Option<(u64, u64)>,
}

/// How the in-memory lists were brought up when an index was opened.
#[derive(Debug, Clone, PartialEq)]
pub struct ListsRestore {
    /// Read from the snapshot file (documents below `replayed_from` came from it).
    pub from_snapshot: bool,
    /// Unique documents entered from the `docs` family (all of them without a snapshot).
    pub replayed: u64,
    /// The documents from this number on were entered from `docs`.
    pub replayed_from: u64,
    /// Why a snapshot present in the directory was not used.
    pub snapshot_refused: Option<String>,
    /// The document frequencies were read from their snapshot.
    pub freq_from_snapshot: bool,
    /// Why a frequencies snapshot present in the directory was not used.
    pub freq_snapshot_refused: Option<String>,
    /// Seconds spent.
    pub seconds: f64,
}

/// A fresh epoch: different from any earlier one of this index with overwhelming
/// probability (clock and process mixed).
fn new_epoch() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = nanos ^ (u64::from(std::process::id()) << 40) ^ 0x9e37_79b9_7f4a_7c15;
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn diff_params(stored: &IndexParams, asked: &IndexParams) -> String {
    let a = serde_json::to_value(stored).unwrap_or_default();
    let b = serde_json::to_value(asked).unwrap_or_default();
    let mut out = Vec::new();
    // a key left out of the JSON is a setting at its default, or one the index predates (it
    // then reads as the value before the setting existed)
    let default = serde_json::Value::String("(not stored)".into());
    fn walk(
        prefix: &str,
        a: &serde_json::Value,
        b: &serde_json::Value,
        default: &serde_json::Value,
        out: &mut Vec<String>,
    ) {
        match (a, b) {
            (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
                let only_b = y.keys().filter(|k| !x.contains_key(*k));
                for k in x.keys().chain(only_b) {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(
                        &p,
                        x.get(k).unwrap_or(default),
                        y.get(k).unwrap_or(default),
                        default,
                        out,
                    );
                }
            }
            _ if a != b => out.push(format!("{prefix}: {a} → {b}")),
            _ => {}
        }
    }
    walk("", &a, &b, &default, &mut out);
    out.join(", ")
}

impl Index {
    /// Opens (or initialises) an index in `store` for `params`. An existing index must have
    /// this build's format version and the same parameters.
    pub fn open(store: Box<dyn Store>, params: IndexParams) -> Result<Index, IndexError> {
        Self::open_until(store, params, &AtomicBool::new(false))
    }

    /// [`Index::open`], ended with [`IndexError::Interrupted`] as soon as `stop` is set
    /// (rebuilding the in-memory lists of a large index takes minutes).
    pub fn open_until(
        store: Box<dyn Store>,
        params: IndexParams,
        stop: &AtomicBool,
    ) -> Result<Index, IndexError> {
        let mut older = false;
        if !(params.threshold > 0.0 && params.threshold <= 1.0) {
            return Err(IndexParamError(format!(
                "threshold must be within (0, 1] (got {})",
                params.threshold
            ))
            .into());
        }
        params
            .signature
            .validate()
            .map_err(|e| IndexParamError(e.to_string()))?;
        if params.frequencies && !params.method.has_lists() {
            return Err(IndexParamError(format!(
                "frequencies filter the signatures the exact lists match on; method {} has no \
                 lists (use spotsigs, chain or sentences, or frequencies false)",
                params.method
            ))
            .into());
        }
        if params.signature.features != params.method.features() {
            return Err(IndexParamError(format!(
                "method {} signs with {}, not {}",
                params.method,
                params.method.features().as_str(),
                params.signature.features.as_str()
            ))
            .into());
        }
        match store.get(Column::Meta, META_FORMAT)? {
            Some(v) => {
                let found = u32::from_be_bytes(
                    v.as_slice()
                        .try_into()
                        .map_err(|_| IndexError::Corrupt("format version".into()))?,
                );
                if !READABLE_FORMATS.contains(&found) {
                    return Err(IndexError::FormatMismatch {
                        found,
                        expected: FORMAT_VERSION,
                    });
                }
                let stored = Self::stored_params(store.as_ref())?.ok_or(IndexError::NotAnIndex)?;
                if stored != params {
                    return Err(IndexError::ParamsMismatch {
                        differences: diff_params(&stored, &params),
                    });
                }
                if found != FORMAT_VERSION {
                    older = found < 6;
                    // every record of the older version reads as it is
                    let mut b = Batch::default();
                    b.put(Column::Meta, META_FORMAT, &FORMAT_VERSION.to_be_bytes());
                    store.write(b)?;
                }
            }
            None => {
                let mut b = Batch::default();
                b.put(Column::Meta, META_FORMAT, &FORMAT_VERSION.to_be_bytes());
                let json = serde_json::to_vec(&params).expect("params serialize");
                b.put(Column::Meta, META_PARAMS, &json);
                b.put(Column::Meta, META_NEXT_DOC, &0u64.to_be_bytes());
                store.write(b)?;
            }
        }
        Self::build(store, params, older, stop)
    }

    /// Opens an existing index with the parameters stored in it.
    pub fn open_existing(store: Box<dyn Store>) -> Result<Index, IndexError> {
        let params = Self::stored_params(store.as_ref())?.ok_or(IndexError::NotAnIndex)?;
        Self::open(store, params)
    }

    /// Opens or creates a RocksDB index in `dir`.
    pub fn open_dir(dir: &Path, params: IndexParams) -> Result<Index, IndexError> {
        Self::open(Box::new(RocksStore::open(dir)?), params)
    }

    /// [`Index::open_dir`], ended with [`IndexError::Interrupted`] as soon as `stop` is set.
    pub fn open_dir_until(
        dir: &Path,
        params: IndexParams,
        stop: &AtomicBool,
    ) -> Result<Index, IndexError> {
        if stop.load(Ordering::Relaxed) {
            return Err(IndexError::Interrupted);
        }
        Self::open_until(Box::new(RocksStore::open(dir)?), params, stop)
    }

    /// Copies the RocksDB index in `src` to the new directory `dst` (a checkpoint), leaving
    /// `src` unchanged.
    pub fn checkpoint(src: &Path, dst: &Path) -> Result<(), IndexError> {
        RocksStore::checkpoint(src, dst)?;
        // a lists snapshot stays usable for the copy (it never holds more than the index)
        for name in [LISTS_SNAPSHOT, freq::SNAPSHOT, software::SNAPSHOT] {
            let snap = src.join(name);
            if snap.exists() {
                let to = dst.join(name);
                if std::fs::hard_link(&snap, &to).is_err() {
                    std::fs::copy(&snap, &to).map_err(|e| {
                        IndexError::Corrupt(format!("copying {}: {e}", snap.display()))
                    })?;
                }
            }
        }
        Ok(())
    }

    /// A fresh in-memory index.
    pub fn memory(params: IndexParams) -> Result<Index, IndexError> {
        Self::open(Box::new(MemoryStore::new()), params)
    }

    pub(crate) fn stored_params(store: &dyn Store) -> Result<Option<IndexParams>, IndexError> {
        match store.get(Column::Meta, META_PARAMS)? {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v)
                .map(Some)
                .map_err(|e| IndexError::Corrupt(format!("stored parameters: {e}"))),
        }
    }

    fn build(
        store: Box<dyn Store>,
        params: IndexParams,
        older: bool,
        stop: &AtomicBool,
    ) -> Result<Index, IndexError> {
        let m_g = if params.m == 0 {
            alg_g::AlgG::default_m(params.rh)
        } else {
            params.m
        };
        let k = params.signature.fingerprint_bits;
        let m_h = if params.m == 0 {
            alg_h::AlgH::default_m(k, params.rh)
        } else {
            params.m
        };
        let tables = match params.method {
            Method::AlgG | Method::Chain => {
                Some(fptables::FpTables::alg_g(alg_g::AlgG::new(m_g, params.rh)?))
            }
            Method::AlgH => Some(fptables::FpTables::alg_h(&alg_h::AlgH::new(
                k, m_h, params.rh,
            )?)),
            _ => None,
        };
        let lists = match params.method.has_lists() {
            true => Some(lists::Lists::new(
                params.threshold,
                params.measure == Measure::Jaccard,
            )?),
            false => None,
        };
        let freq = (lists.is_some() && params.frequencies).then(freq::Freq::default);
        let software = (params.signature.software_text())
            .then(|| software::SoftwareText::for_rules(params.signature.host_text()));
        let next_doc = match store.get(Column::Meta, META_NEXT_DOC)? {
            Some(v) => u64::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| IndexError::Corrupt("next_doc".into()))?,
            ),
            None => 0,
        };
        let epoch = match store.get(Column::Meta, META_LISTS_EPOCH)? {
            Some(v) => u64::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| IndexError::Corrupt("lists_epoch".into()))?,
            ),
            None => {
                let e = new_epoch();
                let mut b = Batch::default();
                b.put(Column::Meta, META_LISTS_EPOCH, &e.to_be_bytes());
                store.write(b)?;
                e
            }
        };
        let mut index = Index {
            store: Arc::from(store),
            params,
            tables,
            lists,
            freq,
            software,
            software_stale: false,
            next_doc,
            scratch: Vec::new(),
            scratch_docs: Vec::new(),
            scratch_hits: Default::default(),
            scratch_set: Vec::new(),
            last_query: Vec::new(),
            last_counts: Vec::new(),
            epoch,
            restore: None,
            journal: None,
            // grown as the ids are read: next_doc counts removed documents too, and a
            // long retention window removes most of them
            ids: ids::IdSet::default(),
            pages: 0,
            software_saved: None,
            lists_saved: None,
        };
        index.restore_lists(stop)?;
        index.restore_software(stop)?;
        index.fill_ids(stop)?;
        index.fill_tables(older, stop)?;
        Ok(index)
    }

    /// The parameters.
    pub fn params(&self) -> &IndexParams {
        &self.params
    }

    /// The stored record of document `id`, if it was decided before.
    pub fn find_id(&self, id: &str) -> Result<Option<DocRecord>, IndexError> {
        if !self.ids.may_contain(id.as_bytes()) {
            return Ok(None);
        }
        Ok(reader::find_id(self.store.as_ref(), id)?.map(|(_, rec)| rec))
    }

    /// Fills the set of ids' fingerprints from the `ids` family (opening the index).
    fn fill_ids(&mut self, stop: &AtomicBool) -> Result<(), IndexError> {
        let (ids, mut seen, mut interrupted) = (&mut self.ids, 0u64, false);
        // ids are UTF-8, which never holds the byte 0xff
        self.store.scan(Column::Ids, &[], &[0xff], &mut |k, _| {
            seen += 1;
            if seen % 4096 == 0 && stop.load(Ordering::Relaxed) {
                interrupted = true;
                return false;
            }
            ids.insert(k);
            true
        })?;
        if interrupted {
            return Err(IndexError::Interrupted);
        }
        self.pages = seen;
        Ok(())
    }

    /// The record of internal document `num`.
    pub fn doc(&self, num: u64) -> Result<Option<DocRecord>, IndexError> {
        reader::doc(self.store.as_ref(), num)
    }

    /// A reader of the stored documents that other threads can use while this index
    /// decides (it shares the store).
    pub fn reader(&self) -> IndexReader {
        IndexReader::new(Arc::clone(&self.store), self.params.clone())
    }

    /// Candidates from the fingerprint index (alg.G or alg.H), if the method has one.
    pub fn fingerprint_candidates(
        &mut self,
        fp: &[u64],
        out: &mut Vec<Candidate>,
    ) -> Result<(), IndexError> {
        out.clear();
        if let Some(t) = &self.tables {
            t.check_width(fp)?;
            let found = match self.params.method {
                Method::AlgH => Found::AlgH,
                _ => Found::AlgG,
            };
            t.query(fp, &mut self.scratch);
            out.extend(self.scratch.iter().map(|&(doc, h)| Candidate {
                doc,
                hamming: Some(h),
                found,
            }));
        }
        Ok(())
    }

    /// Candidates from the exact-Jaccard lists, if the method has them.
    pub fn list_candidates(
        &mut self,
        sigs: &Signatures,
        out: &mut Vec<Candidate>,
    ) -> Result<(), IndexError> {
        out.clear();
        let found = match self.params.method {
            Method::Sentences => Found::Sentences,
            _ => Found::Spotsigs,
        };
        if let Some(l) = &self.lists {
            self.last_query.clear();
            self.last_query.extend(sigs.hashes());
            l.query_counted(
                &self.last_query,
                &mut self.scratch_docs,
                &mut self.scratch_hits,
                &mut self.last_counts,
            );
            out.extend(self.scratch_docs.iter().map(|&doc| Candidate {
                doc,
                hamming: None,
                found,
            }));
        }
        Ok(())
    }

    pub(super) fn index_entries(
        &self,
        b: &mut Batch,
        rec: &DocRecord,
        num: u64,
        insert: bool,
    ) -> Result<(), IndexError> {
        if let Some(t) = &self.tables {
            t.check_width(&rec.fingerprint)?;
            if insert {
                let value = fptables::encode(&rec.fingerprint);
                b.put(Column::Fingerprints, &num.to_be_bytes(), &value);
            } else {
                b.delete(Column::Fingerprints, &num.to_be_bytes());
            }
        }
        Ok(())
    }

    /// Enters (or removes) a unique document in the in-memory lists and fingerprint tables,
    /// after its batch is written.
    pub(super) fn memory_entries(
        &mut self,
        rec: &DocRecord,
        num: u64,
        insert: bool,
    ) -> Result<(), IndexError> {
        if let Some(t) = self.tables.as_mut() {
            if insert {
                t.insert(&rec.fingerprint, num)?;
            } else {
                t.remove(&rec.fingerprint, num);
            }
        }
        if let Some(l) = self.lists.as_mut() {
            self.scratch_set.clear();
            let min_signatures = self.params.min_signatures as usize;
            self.scratch_set
                .extend(rec.listed_sigs(min_signatures).hashes());
            if insert {
                // the lengths counted by the query of this very set, if it was the last one
                let counts = (self.last_query == self.scratch_set).then_some(&self.last_counts[..]);
                l.insert_counted(&self.scratch_set, counts, num)
                    .map_err(|e| IndexParamError(e.to_string()))?;
                self.last_query.clear();
            } else {
                l.remove(&self.scratch_set, num);
                self.last_query.clear();
            }
        }
        Ok(())
    }

    /// Stores a decided document in one atomic batch: its record, its id and, for a unique
    /// document, its index entries. Returns its internal number.
    pub fn put(&mut self, rec: &DocRecord) -> Result<u64, IndexError> {
        // the counts of the documents before this one, before it is written
        self.settle_software()?;
        let num = self.next_doc;
        let unique = rec.decision.kind == DecisionKind::Unique;
        // only unique documents are ever candidates: the others are stored without signatures
        let bytes = rec.encode_with(unique);
        // the record, the id, the two document-number keys and values and the `next_doc`
        // key (under 64 bytes), and a unique document's fingerprint (alg.G, alg.H)
        let fp_bytes = 8 + 8 * rec.fingerprint.len();
        let mut b = Batch::with_capacity(bytes.len() + rec.id.len() + 64 + fp_bytes, 5);
        if unique {
            self.index_entries(&mut b, rec, num, true)?;
        }
        b.put(Column::Docs, &num.to_be_bytes(), &bytes);
        b.put(Column::Ids, rec.id.as_bytes(), &num.to_be_bytes());
        b.put(Column::Meta, META_NEXT_DOC, &(num + 1).to_be_bytes());
        if unique && self.lists.is_some() && num > lists::MAX_DOC {
            return Err(IndexParamError(lists::DocTooLarge(num).to_string()).into());
        }
        // an id stored before is stored again under the new number (a page decided again):
        // the index holds no more pages than before
        let new_id = !self.ids.may_contain(rec.id.as_bytes())
            || self.store.get(Column::Ids, rec.id.as_bytes())?.is_none();
        // the deciding loop writes the log out before it publishes the decision
        self.store.write_buffered(b)?;
        self.next_doc = num + 1;
        self.ids.insert(rec.id.as_bytes());
        self.pages += u64::from(new_id);
        if let Some(j) = self.journal.as_mut() {
            j.push(Mutation::Put {
                num,
                id: rec.id.clone(),
                record: bytes,
            });
        }
        if unique {
            self.memory_entries(rec, num, true)?;
            if let Some(f) = self.freq.as_mut() {
                f.add(freq::host_hash(&rec.url), rec.matched_sigs().hashes());
            }
        }
        let tagged = self.params.signature.host_text();
        if let Some(s) = self.software.as_mut() {
            let blocks = crate::signature::software::counted(&rec.blocks, tagged);
            s.observe(freq::host_hash(&rec.url), rec.fp64(), blocks);
        }
        Ok(num)
    }

    /// The signatures of a signed page that are software text ([`software`]), ascending;
    /// empty unless the index keeps the software-text counts.
    pub fn software_sigs(
        &mut self,
        short: &crate::signature::ShortBlocks,
        sigs: &Signatures,
    ) -> Result<Vec<u32>, IndexError> {
        if short.sigs.is_empty() {
            return Ok(Vec::new());
        }
        self.settle_software()?;
        let Some(s) = &self.software else {
            return Ok(Vec::new());
        };
        let mut found = short.software_sigs(|b| s.is_software(b));
        // only the page's own signatures (a signed record could name others)
        found.retain(|&h| sigs.contains(h));
        Ok(found)
    }

    /// The software-text counts, if the index keeps them (counted again first when
    /// documents were removed since).
    pub fn software_text(&mut self) -> Result<Option<&software::SoftwareText>, IndexError> {
        self.settle_software()?;
        Ok(self.software.as_ref())
    }

    /// Counts the software text again when documents were removed since it was counted.
    fn settle_software(&mut self) -> Result<(), IndexError> {
        if self.software_stale {
            self.recount_software()?;
            self.software_stale = false;
        }
        Ok(())
    }

    /// The signatures a stored document is matched on ([`DocRecord::matched_sigs`], then
    /// [`Index::informative`]).
    pub fn informative_doc(&self, doc: &DocRecord) -> Option<Signatures> {
        match doc.matched_sigs() {
            std::borrow::Cow::Borrowed(all) => self.informative(&doc.url, all),
            std::borrow::Cow::Owned(m) => Some(self.informative(&doc.url, &m).unwrap_or(m)),
        }
    }

    /// The signatures of a page at `url` that are used for matching: all of them, unless
    /// the index counts document frequencies; then those inside the IDF band that are not
    /// template text of the page's host ([`freq`]). `None` when nothing is left out.
    pub fn informative(&self, url: &str, sigs: &Signatures) -> Option<Signatures> {
        let f = self.freq.as_ref()?;
        let keep = f.filter(freq::host_hash(url));
        if sigs.hashes().all(&keep) {
            return None;
        }
        let kept: Vec<(u32, u32)> = sigs
            .entries()
            .iter()
            .copied()
            .filter(|e| keep(e.0))
            .collect();
        Signatures::from_entries(kept)
    }

    /// The document frequencies, if the index counts them.
    pub fn frequencies(&self) -> Option<&freq::Freq> {
        self.freq.as_ref()
    }

    /// Sizes of every family.
    pub fn stats(&self) -> Result<IndexStats, IndexError> {
        let mut families = Vec::new();
        for f in Column::ALL {
            let s = self.store.family_stats(f)?;
            families.push((f.name().to_string(), s.keys, s.bytes));
        }
        Ok(IndexStats {
            format_version: FORMAT_VERSION,
            params: self.params.clone(),
            next_doc: self.next_doc,
            families,
            lists: self.lists.as_ref().map(lists::Lists::stats),
            frequencies_bytes: self.freq.as_ref().map(freq::Freq::bytes),
            software_text: self.software.as_ref().map(|s| software::SoftwareStats {
                bytes: s.bytes(),
                software_blocks: s.found(),
            }),
            fingerprint_tables: self.tables.as_ref().map(fptables::FpTables::stats),
        })
    }

    /// Hands the log of the writes so far to the operating system ([`Store::flush_wal`]):
    /// call it before publishing a decision, so that a decision a reader saw outlives the
    /// process's death.
    pub fn flush_wal(&self) -> Result<(), IndexError> {
        Ok(self.store.flush_wal()?)
    }

    /// Flushes memtables to disk.
    pub fn flush(&self) -> Result<(), IndexError> {
        Ok(self.store.flush()?)
    }

    /// Full compaction.
    pub fn compact(&self) -> Result<(), IndexError> {
        Ok(self.store.compact()?)
    }

    /// The underlying store.
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }
}

#[cfg(test)]
mod tests;
