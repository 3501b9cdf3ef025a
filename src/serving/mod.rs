//! Serving-time work on an index: folding the near-duplicates of a result set
//! ([`Service::group`]) and explaining a decision ([`Service::explain`]).
//!
//! Pure of the outside world except the index it reads: no HTTP, no runtime, no metrics.
//! The HTTP server (`crate::http`), `neardup group` and `neardup explain` drive it. Requests
//! and answers are the JSON documents of `schemas/group-request.v1.schema.json`,
//! `schemas/group-response.v1.schema.json` and `schemas/explain.v1.schema.json`.

mod cache;
mod error;
mod explain;
mod group;
mod sigcache;

use std::sync::Arc;
use std::time::Duration;

pub use cache::Cache;
pub use error::ServeError;
pub use explain::{Explanation, MethodVerdict, PairExplanation, SignatureComparison, Texts};
pub use group::{
    Group, GroupMember, GroupRequest, GroupResponse, GroupTiming, Item, PageItem, ThresholdKey,
    Unjudged,
};
pub use sigcache::SignatureCache;

use crate::index::{IndexError, IndexReader};
use crate::signature::Signer;

/// Bounds of the serving requests.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Limits {
    /// Items of one group request at most (more → [`ServeError::TooLarge`]).
    pub max_items: usize,
    /// Answers kept in the cache of repeated result sets (0: no cache).
    pub cache_entries: usize,
    /// How long a cached answer is used (documents can leave the index meanwhile).
    pub cache_ttl: Duration,
    /// Pages whose signatures are kept in memory once read, compactly (about 0.6 kB a page;
    /// a page's stored signatures never change). 0: read every page every time.
    pub signature_cache_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_items: 1000,
            cache_entries: 10_000,
            cache_ttl: Duration::from_secs(60),
            signature_cache_entries: 100_000,
        }
    }
}

/// Grouping and explaining over one index.
pub struct Service {
    reader: IndexReader,
    signer: Arc<Signer>,
    limits: Limits,
    cache: Cache<Arc<GroupResponse>>,
    signatures: SignatureCache,
}

impl Service {
    /// A service reading `reader`, signing inline pages with the index's own settings.
    pub fn new(reader: IndexReader, limits: Limits) -> Result<Service, IndexError> {
        let signer = Signer::new(&reader.params().signature)
            .map_err(|e| crate::index::IndexParamError(e.to_string()))?;
        Ok(Service {
            cache: Cache::new(limits.cache_entries, limits.cache_ttl),
            signatures: SignatureCache::new(limits.signature_cache_entries),
            reader,
            signer: Arc::new(signer),
            limits,
        })
    }

    /// The index reader.
    pub fn reader(&self) -> &IndexReader {
        &self.reader
    }

    /// The signer of inline pages.
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Groups a result set (cached by request).
    pub fn group(&self, req: &GroupRequest) -> Result<Arc<GroupResponse>, ServeError> {
        group::Grouping {
            reader: &self.reader,
            signer: &self.signer,
            max_items: self.limits.max_items,
            cache: &self.cache,
            signatures: &self.signatures,
        }
        .group(req)
    }

    /// Explains the decision of `id`, and compares it with `other` (or, for a duplicate,
    /// with its canonical page). `texts` turns signature hashes into strings.
    pub fn explain(
        &self,
        id: &str,
        other: Option<&str>,
        texts: &Texts,
    ) -> Result<Explanation, ServeError> {
        explain::Explaining {
            reader: &self.reader,
        }
        .explain(id, other, texts)
    }

    /// Fills the signature cache with the most recent pages of the index (the last as many
    /// documents as it holds, in document order), until `stop` says so.
    /// Returns how many pages were read into it.
    pub fn preload(&self, stop: &dyn Fn() -> bool) -> Result<u64, IndexError> {
        if self.limits.signature_cache_entries == 0 {
            return Ok(0);
        }
        let mut n = 0u64;
        let mut failed = None;
        let first = self
            .reader
            .next_doc()?
            .saturating_sub(self.limits.signature_cache_entries as u64);
        self.reader.for_each_doc_from(first, &mut |rec| {
            if n % 4096 == 0 && stop() {
                return false;
            }
            let sigs = match rec.decision.kind {
                crate::index::DecisionKind::Unique => Some(rec.sigs),
                crate::index::DecisionKind::Duplicate => match self.reader.signatures(&rec) {
                    Ok(s) => s.get().cloned(),
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                },
                crate::index::DecisionKind::Skipped => None,
            };
            if let Some(s) = sigs {
                self.signatures
                    .put(self.signatures.key(rec.id.as_str()), &s);
                n += 1;
            }
            true
        })?;
        failed.map_or(Ok(n), Err)
    }
}

#[cfg(test)]
mod tests;
