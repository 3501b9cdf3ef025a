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

/// The changelog record of an index mutation. The value is written as serde's JSON writer
/// writes a [`ChangelogValue`] (a test compares the bytes), straight into one buffer sized
/// for it once, the record's base64 included: a decider writes one for every page it stores,
/// and the value's own copies of its strings were a fortieth of its deciding thread.
pub fn encode(m: &Mutation, params_id: &str) -> ChangelogRecord {
    match m {
        Mutation::Put { num, id, record } => {
            use std::io::Write as _;
            let b64 = &base64::engine::general_purpose::STANDARD;
            let record_len = base64::encoded_len(record.len(), true).expect("a record in memory");
            let mut v = Vec::with_capacity(record_len + params_id.len() + 128);
            let string = |v: &mut Vec<u8>, s: &str| {
                serde_json::to_writer(&mut *v, s).expect("a string to memory")
            };
            v.extend_from_slice(b"{\"schema\":");
            string(&mut v, CHANGELOG_SCHEMA);
            write!(v, ",\"num\":{num},\"params_id\":").expect("to memory");
            string(&mut v, params_id);
            write!(v, ",\"index_format\":{FORMAT_VERSION},\"record\":\"").expect("to memory");
            let at = v.len();
            v.resize(at + record_len, 0);
            let written = b64
                .encode_slice(record, &mut v[at..])
                .expect("sized by encoded_len");
            debug_assert_eq!(written, record_len);
            v.extend_from_slice(b"\"}");
            (id.as_bytes().to_vec(), Some(v))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Decision, DecisionKind, Index, IndexParams};
    use crate::signature::Signatures;

    fn rec(id: &str, seen: i64, kind: DecisionKind, hashes: Vec<u32>, fp: u64) -> DocRecord {
        DocRecord {
            id: id.into(),
            url: format!("https://site.test/{id}"),
            first_seen: seen,
            fingerprint: vec![fp],
            sigs: Signatures::from_hashes(hashes),
            decision: Decision::plain(kind),
            delta: None,
            template: Vec::new(),
            identity: None,
            title: None,
            blocks: Vec::new(),
            software: Vec::new(),
        }
    }

    /// `n` signature sets, a fifth of them near copies of an earlier one.
    fn stream_of_sets(n: usize, seed: u64) -> Vec<Vec<u32>> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut sets: Vec<Vec<u32>> = Vec::new();
        for i in 0..n {
            let mut set: Vec<u32> = if i > 0 && next() % 5 == 0 {
                let mut s = sets[(next() % i as u64) as usize].clone();
                s.truncate(s.len() * 4 / 5);
                s.extend((0..4).map(|_| next() as u32));
                s
            } else {
                (0..20 + next() % 40).map(|_| next() as u32).collect()
            };
            set.sort_unstable();
            set.dedup();
            sets.push(set);
        }
        sets
    }

    fn all_docs(idx: &Index) -> Vec<(u64, Vec<u8>)> {
        let mut v = Vec::new();
        idx.stored_from(0, &mut |m| {
            if let Mutation::Put { num, record, .. } = m {
                v.push((num, record));
            }
            true
        })
        .unwrap();
        v
    }

    fn all_candidates(idx: &mut Index, sets: &[Vec<u32>]) -> Vec<Vec<u64>> {
        let mut c = Vec::new();
        sets.iter()
            .map(|s| {
                idx.list_candidates(&Signatures::from_hashes(s.clone()), &mut c)
                    .unwrap();
                c.iter().map(|c| c.doc).collect()
            })
            .collect()
    }

    /// The journal holds every put and removal in order; an index restored from it through
    /// the changelog's encoding has the same documents under the same numbers, the same lists
    /// and makes the same decisions, and a restore done twice changes nothing.
    #[test]
    fn journal_restores_an_identical_index() {
        let params = IndexParams::default();
        let pid = crate::record::params_id(&params);
        let mut src = Index::memory(params.clone()).unwrap();
        src.set_journal(true);
        let sets = stream_of_sets(300, 7);
        for (i, s) in sets.iter().enumerate() {
            let kind = if i % 5 == 4 {
                DecisionKind::Duplicate
            } else {
                DecisionKind::Unique
            };
            src.put(&rec(&format!("d{i}"), i as i64, kind, s.clone(), i as u64))
                .unwrap();
        }
        // the retention window removes the first 50: tombstones
        assert_eq!(src.expire(50).unwrap(), 50);
        let journal = src.take_journal();
        assert!(src.take_journal().is_empty(), "taken once");
        assert_eq!(journal.len(), 350);
        assert!(matches!(&journal[0], Mutation::Put { num: 0, id, .. } if id == "d0"));
        assert!(matches!(&journal[300], Mutation::Delete { id } if id == "d0"));

        let log: Vec<_> = journal.iter().map(|m| encode(m, &pid)).collect();
        let mut dst = Index::memory(params.clone()).unwrap();
        for pass in 0..2 {
            if pass == 1 {
                assert_eq!(dst.next_doc(), src.next_doc());
                assert_eq!(all_docs(&dst), all_docs(&src));
            }
            for (k, v) in &log {
                match decode(k, v.as_deref(), &pid).unwrap() {
                    Restore::Put(num, r) => {
                        dst.restore_put(num, &r).unwrap();
                    }
                    Restore::Delete(id) => {
                        dst.remove_id(&id).unwrap();
                    }
                }
            }
        }
        // a changelog read twice (before compaction a log may hold records again): the stored
        // ones are skipped, the removed ones put again and removed again
        assert_eq!(all_docs(&dst), all_docs(&src));
        assert_eq!(
            all_candidates(&mut dst, &sets),
            all_candidates(&mut src, &sets)
        );
        // other parameters are refused with the reason
        let e = decode(&log[1].0, log[1].1.as_deref(), "00000000").unwrap_err();
        assert!(
            e.contains("other parameters") || e.contains("parameters"),
            "{e}"
        );
        // damage is refused
        let e = decode(b"d1", Some(b"{\"schema\":1}"), &pid).unwrap_err();
        assert!(e.contains("not a changelog record"), "{e}");
        let e = decode(b"other-id", log[1].1.as_deref(), &pid).unwrap_err();
        assert!(e.contains("holds the record of"), "{e}");
    }

    /// The value written straight into its buffer is the JSON serde writes of a
    /// [`ChangelogValue`], for records of every length modulo 3 (base64's padding) and
    /// parameter ids that need escapes.
    #[test]
    fn the_value_is_the_json_of_a_changelog_value() {
        for params_id in ["1a2b3c4d", "", "quo\"te\\ and \u{1}\n", "é😀"] {
            for len in [0usize, 1, 2, 3, 4, 5, 57, 1000] {
                let record: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
                let num = (len as u64) << 33 | 7;
                let m = Mutation::Put {
                    num,
                    id: format!("id-{len}"),
                    record: record.clone(),
                };
                let (key, value) = encode(&m, params_id);
                let want = ChangelogValue {
                    schema: CHANGELOG_SCHEMA.to_string(),
                    num,
                    params_id: params_id.to_string(),
                    index_format: FORMAT_VERSION,
                    record: base64::engine::general_purpose::STANDARD.encode(&record),
                };
                assert_eq!(key, format!("id-{len}").into_bytes());
                assert_eq!(
                    String::from_utf8(value.unwrap()).unwrap(),
                    serde_json::to_string(&want).unwrap(),
                    "params id {params_id:?}, {len} bytes"
                );
            }
        }
    }
}
