//! The algorithm core of neardup: page in, decision out, with nothing of the outside world
//! but the index directory it is handed.
//!
//! # Layout
//!
//! - [`text`]: markup stripping into text blocks, tokens, stemming, stopword data
//! - [`signature`]: SpotSigs, word and sentence shingles, fingerprints, similarity,
//!   template samples, a page's identity, result-set grouping
//! - [`index`]: the storage interface (in-memory and RocksDB), alg.G's and alg.H's tables,
//!   the exact-Jaccard lists, the document store, document frequencies and the index
//!   format version
//! - [`dedup`]: the [`dedup::Deduplicator`], the one entry point: a signed page in, a
//!   decision out
//!
//! # Architecture invariants
//!
//! - Nothing here touches the outside world beyond the index directory it is handed: no
//!   network, no async runtime, no metrics, no environment variables, no signals. Typed
//!   errors, never a panic on bad input. This crate's manifest is the contract: it takes
//!   none of tokio, rdkafka, axum, hyper, metrics or tracing-subscriber.
//! - Decisions for one index are made one at a time (`&mut Deduplicator`), so two
//!   near-duplicates in flight can never both be judged unique.
//! - Every persisted format carries a version ([`index::FORMAT_VERSION`]).

/// `FromStr` of a setting's enum by its serde name (`"jaccard"`, `"bytes"`, …), for the
/// command line (the product's own setting enums use it too; the caller needs `serde_json`).
#[macro_export]
macro_rules! impl_from_str_serde {
    ($($t:ty),*) => {$(
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                serde_json::from_value(serde_json::Value::String(s.to_string()))
                    .map_err(|_| format!("invalid value {s:?}"))
            }
        }
    )*};
}
impl_from_str_serde!(
    signature::Measure,
    text::StripMode,
    signature::FingerprintKind,
    signature::Content
);

pub mod dedup;
pub mod index;
pub mod signature;
pub mod text;
