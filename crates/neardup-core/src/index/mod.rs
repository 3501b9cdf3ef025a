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
mod changes;
pub mod docs;
mod earliest;
mod error;
mod format;
pub mod fptables;
pub mod freq;
pub(crate) mod ids;
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

use serde::Serialize;

pub use changes::{Mutation, Undone};
pub use docs::{
    decode_signatures, encode_signatures, Decision, DecisionKind, DocRecord, Found, SigDelta,
};
pub use error::IndexError;
use format::{new_epoch, META_FORMAT, META_LISTS_EPOCH, META_NEXT_DOC, META_PARAMS};
pub use format::{IndexParams, Method, FORMAT_VERSION, LISTS_SNAPSHOT, READABLE_FORMATS};
pub use reader::{IndexReader, StoredSigs};
pub use store::{
    Batch, Column, FamilyStats, IndexParamError, MemoryStore, RocksStore, Store, StoreError,
};

use crate::signature::{Measure, Signatures};

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
    /// The positions whose marks are in the `meta` family ([`pending`]), read at open and
    /// kept with every mark and clearing: whether a position holds a mark is asked here.
    marked: rustc_hash::FxHashSet<Box<[u8]>>,
    /// Where the oldest stored documents are, for the sweeps of a window or a cap.
    earliest: earliest::Earliest,
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
                let stored =
                    format::stored_params(store.as_ref())?.ok_or(IndexError::NotAnIndex)?;
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
        let params = format::stored_params(store.as_ref())?.ok_or(IndexError::NotAnIndex)?;
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
                link_or_copy(&snap, &dst.join(name), true)?;
            }
        }
        Ok(())
    }

    /// Makes the new directory `dst` a working copy of the copy in `src` written by
    /// [`Index::checkpoint_to`], leaving `src` as it is, so that it can be copied again: the
    /// database's table and blob files, which it never changes once written, are hard links
    /// (copies where the file system refuses), and so are the snapshots (written whole and
    /// renamed into place, never changed after); every other file is a copy. Files named in
    /// `except` are left out.
    pub fn copy_checkpoint(src: &Path, dst: &Path, except: &[&str]) -> Result<(), IndexError> {
        let failed = |what: &str, e: std::io::Error| IndexError::Corrupt(format!("{what}: {e}"));
        if !src.join("CURRENT").exists() {
            return Err(IndexError::Corrupt(format!(
                "{} is not a copy of an index",
                src.display()
            )));
        }
        std::fs::create_dir(dst).map_err(|e| failed(&format!("creating {}", dst.display()), e))?;
        let entries =
            std::fs::read_dir(src).map_err(|e| failed(&format!("reading {}", src.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| failed(&format!("reading {}", src.display()), e))?;
            let name = entry.file_name();
            let Some(n) = name.to_str() else { continue };
            if except.contains(&n) || !entry.path().is_file() {
                continue;
            }
            let immutable = n.ends_with(".sst")
                || n.ends_with(".blob")
                || [LISTS_SNAPSHOT, freq::SNAPSHOT, software::SNAPSHOT].contains(&n);
            link_or_copy(&entry.path(), &dst.join(&name), immutable)?;
        }
        std::fs::File::open(dst)
            .and_then(|d| d.sync_all())
            .map_err(|e| failed(&format!("syncing {}", dst.display()), e))
    }

    /// A fresh in-memory index.
    pub fn memory(params: IndexParams) -> Result<Index, IndexError> {
        Self::open(Box::new(MemoryStore::new()), params)
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
            marked: Default::default(),
            earliest: Default::default(),
        };
        index.marked = index
            .pending()?
            .into_iter()
            .map(|(p, _, _)| p.into())
            .collect();
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

    /// Fills the set of ids' fingerprints from the `ids` family (opening the index, or
    /// again once removed ids fill most of it).
    /// The set is made aside and taken only once every id is in it: a scan that fails
    /// leaves the set as it was (it must hold every stored id).
    fn fill_ids(&mut self, stop: &AtomicBool) -> Result<(), IndexError> {
        let mut fresh = ids::IdSet::with_capacity(self.pages as usize);
        let (ids, mut seen, mut interrupted) = (&mut fresh, 0u64, false);
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
        self.ids = fresh;
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

    /// Enters a unique document in the in-memory lists and fingerprint tables, after its
    /// batch is written.
    pub(super) fn memory_entries(&mut self, rec: &DocRecord, num: u64) -> Result<(), IndexError> {
        if let Some(t) = self.tables.as_mut() {
            t.insert(&rec.fingerprint, num)?;
        }
        if let Some(l) = self.lists.as_mut() {
            self.scratch_set.clear();
            let min_signatures = self.params.min_signatures as usize;
            self.scratch_set
                .extend(rec.listed_sigs(min_signatures).hashes());
            // the lengths counted by the query of this very set, if it was the last one
            let counts = (self.last_query == self.scratch_set).then_some(&self.last_counts[..]);
            l.insert_counted(&self.scratch_set, counts, num)
                .map_err(|e| IndexParamError(e.to_string()))?;
            self.last_query.clear();
        }
        Ok(())
    }

    /// Takes removed unique documents (number, record) out of the fingerprint tables and
    /// the lists, after their removal is written: one at a time, or out of the lists in one
    /// pass when they are many ([`lists::Lists::one_pass`]).
    pub(super) fn forget(&mut self, docs: &[&(u64, DocRecord)]) {
        if let Some(t) = self.tables.as_mut() {
            for (num, rec) in docs {
                t.remove(&rec.fingerprint, *num);
            }
        }
        let Some(l) = self.lists.as_mut() else {
            return;
        };
        let min_signatures = self.params.min_signatures as usize;
        let entries: usize = docs
            .iter()
            .map(|(_, rec)| rec.listed_sigs(min_signatures).set_len())
            .sum();
        if lists::Lists::one_pass(entries) {
            let nums: Vec<u64> = docs.iter().map(|(num, _)| *num).collect();
            l.remove_all(&nums);
        } else {
            for (num, rec) in docs {
                self.scratch_set.clear();
                self.scratch_set
                    .extend(rec.listed_sigs(min_signatures).hashes());
                l.remove(&self.scratch_set, *num);
            }
        }
        self.last_query.clear();
    }

    /// Stores a decided document in one atomic batch: its record, its id and, for a unique
    /// document, its index entries. Returns its internal number.
    pub fn put(&mut self, rec: &DocRecord) -> Result<u64, IndexError> {
        self.put_marked(rec, None)
    }

    /// [`Index::put`], with the mark of the driver's position `mark` ([`Index::mark_pending`])
    /// in the same write, unless the position holds a mark already: one write where a mark
    /// and the decision took two, and the mark is in the log when the decision is.
    pub fn put_marked(&mut self, rec: &DocRecord, mark: Option<&[u8]>) -> Result<u64, IndexError> {
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
        if unique && self.lists.as_ref().is_some_and(|l| !l.can_hold(num)) {
            return Err(IndexParamError(lists::DocTooLarge(num).to_string()).into());
        }
        let marked = mark.filter(|position| self.stage_mark(&mut b, position, num, &rec.id));
        // an id stored before is stored again under the new number (a page decided again):
        // the index holds no more pages than before
        let new_id = !self.ids.may_contain(rec.id.as_bytes())
            || self.store.get(Column::Ids, rec.id.as_bytes())?.is_none();
        // the deciding loop writes the log out before it publishes the decision
        self.store.write_buffered(b)?;
        if let Some(position) = marked {
            self.marked.insert(position.into());
        }
        self.next_doc = num + 1;
        self.earliest.stored(num, rec.first_seen);
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
            self.memory_entries(rec, num)?;
            if let Some(f) = self.freq.as_mut() {
                f.add(freq::host_hash(&rec.url), rec.matched_sigs().hashes());
            }
        }
        self.observe_software(&rec.url, rec.fp64(), &rec.blocks);
        Ok(num)
    }

    /// Counts the software text of a page this index does not store: a shard of a sharded
    /// decider ([`crate::dedup::sharded`]) counts every page of the stream, as one index
    /// counts every page it stores, and stores only the pages it owns. (The counts' snapshot
    /// names the pages stored, which these counts are not of: the next [`Index::save_lists`]
    /// writes it again, and only a shard's own state file says what the counts are of.)
    pub fn count_page_software(
        &mut self,
        url: &str,
        fp64: u64,
        blocks: &[u32],
    ) -> Result<(), IndexError> {
        self.settle_software()?;
        self.observe_software(url, fp64, blocks);
        self.software_saved = None;
        Ok(())
    }

    /// The index's lists epoch and next document number: what its snapshots are stamped
    /// with.
    pub fn stamp(&self) -> (u64, u64) {
        (self.epoch, self.next_doc)
    }

    /// Whether the software-text counts in memory are those of the snapshot file as read
    /// at open or written since, with nothing counted after it (true without the counts).
    pub fn software_as_saved(&self) -> bool {
        self.software.is_none()
            || self.software_saved
                == Some(freq::Stamp {
                    epoch: self.epoch,
                    next_doc: self.next_doc,
                })
    }

    fn observe_software(&mut self, url: &str, fp64: u64, blocks: &[u32]) {
        let tagged = self.params.signature.host_text();
        if let Some(s) = self.software.as_mut() {
            let blocks = crate::signature::software::counted(blocks, tagged);
            s.observe(freq::host_hash(url), fp64, blocks);
        }
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

    /// (family, keys, bytes) of every family, as the store estimates them: cheap, where
    /// [`Index::stats`] also reads the shape of every list (a sort of all their entries,
    /// about half a second at 1M pages).
    pub fn family_stats(&self) -> Result<Vec<(String, u64, u64)>, IndexError> {
        let mut families = Vec::new();
        for f in Column::ALL {
            let s = self.store.family_stats(f)?;
            families.push((f.name().to_string(), s.keys, s.bytes));
        }
        Ok(families)
    }

    /// The document frequencies, if the index counts them.
    pub fn frequencies(&self) -> Option<&freq::Freq> {
        self.freq.as_ref()
    }

    /// Sizes of every family.
    pub fn stats(&self) -> Result<IndexStats, IndexError> {
        let families = self.family_stats()?;
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

/// Puts the file `from` at `to`: a hard link when `immutable` (a file never changed once
/// written) and the file system allows one, else a copy.
fn link_or_copy(from: &Path, to: &Path, immutable: bool) -> Result<(), IndexError> {
    if immutable && std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| IndexError::Corrupt(format!("copying {}: {e}", from.display())))
}

#[cfg(test)]
mod tests;
