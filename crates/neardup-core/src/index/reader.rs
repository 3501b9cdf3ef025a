//! Reading stored documents without deciding: by id, by number, many at once, and a
//! document's signatures whatever its decision (a duplicate's from its canonical document
//! and its delta). Used by `explain`, the grouping of result sets and `neardup serve`, in
//! the deciding process (sharing its store) or in another one (a read-only follower).

use std::path::Path;
use std::sync::Arc;

use super::docs::{DecisionKind, DocRecord};
use super::error::IndexError;
use super::format::{self, IndexParams, READABLE_FORMATS};
use super::store::{Column, RocksStore, Store};
use crate::signature::Signatures;

/// The stored record of document `id` and its number.
pub(crate) fn find_id(store: &dyn Store, id: &str) -> Result<Option<(u64, DocRecord)>, IndexError> {
    match store.get(Column::Ids, id.as_bytes())? {
        None => Ok(None),
        Some(num) => {
            let num = doc_number(&num)?;
            Ok(doc(store, num)?.map(|rec| (num, rec)))
        }
    }
}

/// The record of document number `num`.
pub(crate) fn doc(store: &dyn Store, num: u64) -> Result<Option<DocRecord>, IndexError> {
    match store.get(Column::Docs, &num.to_be_bytes())? {
        None => Ok(None),
        Some(v) => DocRecord::decode(&v).map(Some),
    }
}

fn doc_number(v: &[u8]) -> Result<u64, IndexError> {
    let num: [u8; 8] = v
        .try_into()
        .map_err(|_| IndexError::Corrupt("ids entry".into()))?;
    Ok(u64::from_be_bytes(num))
}

/// A document's signatures as far as the index holds them.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredSigs {
    /// A unique document's own signatures.
    Own(Signatures),
    /// A duplicate's signatures, rebuilt from its canonical document's and its delta.
    FromCanonical(Signatures),
    /// Not stored, and why.
    Unavailable(&'static str),
}

impl StoredSigs {
    /// The signatures, if stored.
    pub fn get(&self) -> Option<&Signatures> {
        match self {
            StoredSigs::Own(s) | StoredSigs::FromCanonical(s) => Some(s),
            StoredSigs::Unavailable(_) => None,
        }
    }
}

/// Reads an index's documents; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct IndexReader {
    store: Arc<dyn Store>,
    params: IndexParams,
}

impl IndexReader {
    pub(crate) fn new(store: Arc<dyn Store>, params: IndexParams) -> IndexReader {
        IndexReader { store, params }
    }

    /// A read-only follower of the index in `dir`, which another process may be writing
    /// (its own RocksDB files go to `own`). It sees the documents written before it opened
    /// and, after each [`IndexReader::catch_up`], those written since.
    /// `block_cache` bytes cache the blocks it reads.
    pub fn open_follower(
        dir: &Path,
        own: &Path,
        block_cache: usize,
    ) -> Result<IndexReader, IndexError> {
        let store = RocksStore::open_secondary(dir, own, block_cache)?;
        let found = match store.get(Column::Meta, format::META_FORMAT)? {
            Some(v) => u32::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| IndexError::Corrupt("format version".into()))?,
            ),
            None => return Err(IndexError::NotAnIndex),
        };
        if !READABLE_FORMATS.contains(&found) {
            return Err(IndexError::FormatMismatch {
                found,
                expected: format::FORMAT_VERSION,
            });
        }
        let params = format::stored_params(&store)?.ok_or(IndexError::NotAnIndex)?;
        Ok(IndexReader {
            store: Arc::new(store),
            params,
        })
    }

    /// Reads what the writer wrote since the last call (a no-op in the writing process).
    pub fn catch_up(&self) -> Result<(), IndexError> {
        Ok(self.store.catch_up()?)
    }

    /// The index's parameters.
    pub fn params(&self) -> &IndexParams {
        &self.params
    }

    /// The stored record of document `id` and its number.
    pub fn find_id(&self, id: &str) -> Result<Option<(u64, DocRecord)>, IndexError> {
        find_id(self.store.as_ref(), id)
    }

    /// The records of many ids, in their order (two batched lookups).
    pub fn find_ids(&self, ids: &[&str]) -> Result<Vec<Option<DocRecord>>, IndexError> {
        let keys: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
        let nums = self.store.get_many(Column::Ids, &keys)?;
        let mut wanted: Vec<[u8; 8]> = Vec::with_capacity(ids.len());
        for n in nums.iter().flatten() {
            wanted.push(doc_number(n)?.to_be_bytes());
        }
        let keys: Vec<&[u8]> = wanted.iter().map(|k| &k[..]).collect();
        let mut docs = self.store.get_many(Column::Docs, &keys)?.into_iter();
        let mut out = Vec::with_capacity(ids.len());
        for n in &nums {
            out.push(match n {
                None => None,
                Some(_) => match docs.next().flatten() {
                    Some(v) => Some(DocRecord::decode(&v)?),
                    None => None, // expired between the two reads
                },
            });
        }
        Ok(out)
    }

    /// The record of document number `num`.
    pub fn doc(&self, num: u64) -> Result<Option<DocRecord>, IndexError> {
        doc(self.store.as_ref(), num)
    }

    /// Visits the stored documents in number order until `visit` returns false.
    pub fn for_each_doc(&self, visit: &mut dyn FnMut(DocRecord) -> bool) -> Result<(), IndexError> {
        self.for_each_doc_from(0, visit)
    }

    /// The number the next document will get (documents are numbered in decision order).
    pub fn next_doc(&self) -> Result<u64, IndexError> {
        match self.store.get(Column::Meta, format::META_NEXT_DOC)? {
            Some(v) => doc_number(&v),
            None => Ok(0),
        }
    }

    /// [`IndexReader::for_each_doc`] from document number `first` on.
    pub fn for_each_doc_from(
        &self,
        first: u64,
        visit: &mut dyn FnMut(DocRecord) -> bool,
    ) -> Result<(), IndexError> {
        let mut err = None;
        self.store.scan(
            Column::Docs,
            &first.to_be_bytes(),
            &[0xff; 9],
            &mut |_, v| match DocRecord::decode(v) {
                Ok(rec) => visit(rec),
                Err(e) => {
                    err = Some(e);
                    false
                }
            },
        )?;
        err.map_or(Ok(()), Err)
    }

    /// [`IndexReader::signatures`] of many records (taken, so that unique documents'
    /// signatures move instead of being copied), the canonical documents of the
    /// duplicates read in one batch.
    pub fn signatures_many(
        &self,
        recs: Vec<Option<DocRecord>>,
    ) -> Result<Vec<StoredSigs>, IndexError> {
        let wanted: Vec<String> = recs
            .iter()
            .flatten()
            .filter(|r| r.decision.kind == DecisionKind::Duplicate && r.delta.is_some())
            .filter_map(|r| r.decision.canonical_id.clone())
            .collect();
        let names: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let found = self.find_ids(&names)?;
        let canonical: rustc_hash::FxHashMap<&str, &DocRecord> = names
            .iter()
            .zip(&found)
            .filter_map(|(id, r)| r.as_ref().map(|r| (*id, r)))
            .collect();
        recs.into_iter()
            .map(|r| match r {
                None => Ok(StoredSigs::Unavailable("not in the index")),
                Some(r) if r.decision.kind == DecisionKind::Unique => Ok(StoredSigs::Own(r.sigs)),
                Some(r) => {
                    let c = r
                        .decision
                        .canonical_id
                        .as_deref()
                        .and_then(|c| canonical.get(c).copied());
                    Self::resolve(&r, c)
                }
            })
            .collect()
    }

    /// A stored document's signatures: its own (unique), rebuilt from its canonical
    /// document (duplicate), or why there are none.
    pub fn signatures(&self, rec: &DocRecord) -> Result<StoredSigs, IndexError> {
        let canonical = match (&rec.decision.kind, rec.decision.canonical_id.as_deref()) {
            (DecisionKind::Duplicate, Some(c)) if rec.delta.is_some() => {
                self.find_id(c)?.map(|(_, r)| r)
            }
            _ => None,
        };
        Self::resolve(rec, canonical.as_ref())
    }

    fn resolve(rec: &DocRecord, canonical: Option<&DocRecord>) -> Result<StoredSigs, IndexError> {
        Ok(match rec.decision.kind {
            DecisionKind::Unique => StoredSigs::Own(rec.sigs.clone()),
            DecisionKind::Skipped => {
                StoredSigs::Unavailable("skipped: too few signatures to be indexed")
            }
            DecisionKind::Duplicate => {
                let Some(delta) = &rec.delta else {
                    // a shard's page decided a duplicate after it was stored keeps its own
                    // ([`super::Index::demote`])
                    if rec.sigs.set_len() > 0 {
                        return Ok(StoredSigs::Own(rec.sigs.clone()));
                    }
                    return Ok(StoredSigs::Unavailable(
                        "decided by an index of format 3, which kept no signatures of duplicates",
                    ));
                };
                match canonical {
                    Some(c) if c.decision.kind == DecisionKind::Unique => {
                        match delta.apply(&c.sigs) {
                            Some(s) => StoredSigs::FromCanonical(s),
                            None => {
                                return Err(IndexError::Corrupt(format!(
                                    "the signature delta of {} does not fit its canonical document",
                                    rec.id
                                )))
                            }
                        }
                    }
                    _ => StoredSigs::Unavailable(
                        "its canonical document has left the index (retention window)",
                    ),
                }
            }
        })
    }
}
