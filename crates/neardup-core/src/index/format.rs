//! What an index is on disk before its documents: the format version and the versions this
//! build reads, the keys of the `meta` family, the settings an index is built with and
//! stored under (compared on open), and the lists' epoch.

use serde::{Deserialize, Serialize};

use super::error::IndexError;
use super::store::{Column, Store};
use crate::signature::{Features, Measure, SignatureConfig};

/// Version of the key layout and record encodings. Bump on any change of either, or of what
/// a stored document's signatures and fingerprint are computed from (the fingerprint
/// functions, the text extraction), and an index of another version is refused.
/// Version 2: main-region extraction with boilerplate and layout containers.
/// Version 3: the exact-Jaccard lists are in memory, rebuilt from `docs` (no `lists` family).
/// Version 4: doc record version 3 (a duplicate's signatures as a delta from its canonical
/// document's). A version-3 index is read as it is (its records are version 2, which this
/// build reads) and marked version 4 when opened for writing.
/// Version 5: doc record version 4 (a short page's template sample), the document
/// frequencies' snapshot beside the lists' (`freq.snapshot`, [`super::freq`]). Versions 3 and 4
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
/// the signatures left out as software text ([`super::software`], text rules 6 and later), and
/// the software-text snapshot beside the lists' (`software.snapshot`). Versions 3 to 7 are
/// read as they are; their records carry neither.
pub const FORMAT_VERSION: u32 = 8;

/// Format versions this build reads without a rebuild.
pub const READABLE_FORMATS: [u32; 6] = [3, 4, 5, 6, 7, 8];

pub(super) const META_FORMAT: &[u8] = b"format_version";
pub(super) const META_PARAMS: &[u8] = b"params";
pub(super) const META_NEXT_DOC: &[u8] = b"next_doc";
/// A number that changes whenever documents leave the index, so that a lists snapshot taken
/// before a removal is never used after it.
pub(super) const META_LISTS_EPOCH: &[u8] = b"lists_epoch";
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
    /// Count document frequencies of signatures ([`super::freq`]) and match on the informative
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

/// A fresh epoch: different from any earlier one of this index with overwhelming
/// probability (clock and process mixed).
pub(super) fn new_epoch() -> u64 {
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

/// The settings stored in an index, if it has them.
pub(crate) fn stored_params(store: &dyn Store) -> Result<Option<IndexParams>, IndexError> {
    match store.get(Column::Meta, META_PARAMS)? {
        None => Ok(None),
        Some(v) => serde_json::from_slice(&v)
            .map(Some)
            .map_err(|e| IndexError::Corrupt(format!("stored parameters: {e}"))),
    }
}
