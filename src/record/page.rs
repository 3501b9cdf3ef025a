//! A fetched page as the input carries it: a leaf, so that the record decoders take it from
//! here rather than from their parent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A fetched page (input).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Page {
    /// Document id; absent or empty: a hash of the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Page URL (required, non-empty).
    pub url: String,
    /// The fetched HTML (required; may be empty).
    pub html: String,
    /// Fetch time, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
    /// HTTP response headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
}
