//! The changelog record (`schemas/changelog.v1.schema.json`): one index mutation of a
//! decider, produced to a compacted topic so that a lost index can be restored from it.
//!
//! - Key: the document id (UTF-8). Compaction keeps the latest record of each id.
//! - Value of a stored document: JSON with the document's number in the index (`num`, so a
//!   restored index numbers its documents as the lost one did and breaks ties between
//!   equally similar candidates the same way), the index parameters it was decided under
//!   (`params_id`, checked on restore), the index format, and the doc record itself
//!   (`record`: base64 of the versioned binary layout of `src/index/docs.rs`).
//! - A removed document (the retention window): the id with no value (a tombstone).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::index::{DocRecord, Mutation, FORMAT_VERSION};

/// Schema name of changelog records.
pub const CHANGELOG_SCHEMA: &str = "neardup.changelog.v1";

/// The value of a stored document's changelog record.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChangelogValue {
    /// `neardup.changelog.v1`.
    pub schema: String,
    /// The document's number in the index.
    pub num: u64,
    /// Identifies the index parameters ([`super::params_id`]).
    pub params_id: String,
    /// Index format version of the writer.
    pub index_format: u32,
    /// The doc record, base64 of its binary layout.
    pub record: String,
}

/// One changelog record: key and value (`None`: a tombstone).
pub type ChangelogRecord = (Vec<u8>, Option<Vec<u8>>);

/// The changelog record of an index mutation.
pub fn encode(m: &Mutation, params_id: &str) -> ChangelogRecord {
    match m {
        Mutation::Put { num, id, record } => {
            let v = ChangelogValue {
                schema: CHANGELOG_SCHEMA.to_string(),
                num: *num,
                params_id: params_id.to_string(),
                index_format: FORMAT_VERSION,
                record: base64::engine::general_purpose::STANDARD.encode(record),
            };
            (
                id.as_bytes().to_vec(),
                Some(serde_json::to_vec(&v).expect("serializable")),
            )
        }
        Mutation::Delete { id } => (id.as_bytes().to_vec(), None),
    }
}

/// What a changelog record asks of a restoring index.
#[derive(Debug)]
pub enum Restore {
    /// Store this document under this number.
    Put(u64, Box<DocRecord>),
    /// Remove the document with this id.
    Delete(String),
}

/// Decodes a changelog record; an error names what is wrong (a restore stops on it: an
/// index restored past a damaged record would not decide as the lost one did).
pub fn decode(key: &[u8], value: Option<&[u8]>, params_id: &str) -> Result<Restore, String> {
    let id = std::str::from_utf8(key).map_err(|_| "a key that is not UTF-8".to_string())?;
    let Some(value) = value else {
        return Ok(Restore::Delete(id.to_string()));
    };
    let v: ChangelogValue =
        serde_json::from_slice(value).map_err(|e| format!("not a changelog record: {e}"))?;
    if v.schema != CHANGELOG_SCHEMA {
        return Err(format!(
            "schema {:?}, this version reads {CHANGELOG_SCHEMA}",
            v.schema
        ));
    }
    if v.params_id != params_id {
        return Err(format!(
            "written by an index with parameters {} but this index has {params_id}: restore \
             with the settings the changelog was written with, or use a new changelog topic",
            v.params_id
        ));
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&v.record)
        .map_err(|e| format!("record is not base64: {e}"))?;
    let rec = DocRecord::decode(&raw).map_err(|e| format!("doc record: {e}"))?;
    if rec.id != id {
        return Err(format!("key {id:?} holds the record of {:?}", rec.id));
    }
    Ok(Restore::Put(v.num, Box::new(rec)))
}
