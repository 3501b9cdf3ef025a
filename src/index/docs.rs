//! The document store: one record per document id, with the stored decision.
//!
//! Value layout of a `docs` entry (version 1, all integers big-endian):
//!
//! | field | encoding |
//! |---|---|
//! | record version | u8 = 1 |
//! | decision | u8: 0 unique, 1 duplicate, 2 skipped |
//! | first seen | i64, Unix seconds |
//! | fingerprint | u8 word count n, then n × u64 |
//! | signatures | u32 count n, then n × (hash u32, freq u32), ascending hash |
//! | id, url | u32 length + UTF-8 bytes each |
//! | canonical id, canonical url | u32 length + bytes each (length 0: none) |
//! | similarity | f64 (NaN: none) |
//! | hamming | u32 (u32::MAX: none) |
//! | method | u8: 0 none, 1 alg-g, 2 alg-h, 3 spotsigs |

use super::IndexError;
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
}

impl Found {
    /// Name as in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Found::AlgG => "alg-g",
            Found::AlgH => "alg-h",
            Found::Spotsigs => "spotsigs",
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
}

const RECORD_VERSION: u8 = 1;

fn put_str(out: &mut Vec<u8>, s: Option<&str>) {
    let s = s.unwrap_or("");
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
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
        let mut out = Vec::with_capacity(64 + sigs.len() * 8 + self.url.len());
        out.push(RECORD_VERSION);
        out.push(match d.kind {
            DecisionKind::Unique => 0,
            DecisionKind::Duplicate => 1,
            DecisionKind::Skipped => 2,
        });
        out.extend_from_slice(&self.first_seen.to_be_bytes());
        out.push(self.fingerprint.len() as u8);
        for w in &self.fingerprint {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out.extend_from_slice(&(sigs.len() as u32).to_be_bytes());
        for &(h, f) in sigs {
            out.extend_from_slice(&h.to_be_bytes());
            out.extend_from_slice(&f.to_be_bytes());
        }
        put_str(&mut out, Some(&self.id));
        put_str(&mut out, Some(&self.url));
        put_str(&mut out, d.canonical_id.as_deref());
        put_str(&mut out, d.canonical_url.as_deref());
        out.extend_from_slice(&d.similarity.unwrap_or(f64::NAN).to_be_bytes());
        out.extend_from_slice(&d.hamming.unwrap_or(u32::MAX).to_be_bytes());
        out.push(match d.found_by {
            None => 0,
            Some(Found::AlgG) => 1,
            Some(Found::AlgH) => 2,
            Some(Found::Spotsigs) => 3,
        });
        out
    }

    /// Decodes a record; any inconsistency is an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<DocRecord, IndexError> {
        let mut r = Reader { b: bytes, at: 0 };
        let version = r.u8()?;
        if version != RECORD_VERSION {
            return Err(IndexError::Corrupt(format!("doc record version {version}")));
        }
        let kind = match r.u8()? {
            0 => DecisionKind::Unique,
            1 => DecisionKind::Duplicate,
            2 => DecisionKind::Skipped,
            k => return Err(IndexError::Corrupt(format!("decision code {k}"))),
        };
        let first_seen = r.u64()? as i64;
        let words = r.u8()? as usize;
        let fingerprint = (0..words).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
        let n = r.u32()? as usize;
        if n > bytes.len() / 8 {
            return Err(IndexError::Corrupt("signature count exceeds record".into()));
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            entries.push((r.u32()?, r.u32()?));
        }
        let sigs = Signatures::from_entries(entries)
            .ok_or_else(|| IndexError::Corrupt("signatures not sorted".into()))?;
        let id = r.str()?;
        let url = r.str()?;
        let canonical_id = Some(r.str()?).filter(|s| !s.is_empty());
        let canonical_url = Some(r.str()?).filter(|s| !s.is_empty());
        let similarity = Some(f64::from_bits(r.u64()?)).filter(|s| !s.is_nan());
        let hamming = Some(r.u32()?).filter(|&h| h != u32::MAX);
        let found_by = match r.u8()? {
            0 => None,
            1 => Some(Found::AlgG),
            2 => Some(Found::AlgH),
            3 => Some(Found::Spotsigs),
            m => return Err(IndexError::Corrupt(format!("method code {m}"))),
        };
        Ok(DocRecord {
            id,
            url,
            first_seen,
            fingerprint,
            sigs,
            decision: Decision {
                kind,
                canonical_id,
                canonical_url,
                similarity,
                hamming,
                found_by,
            },
        })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], IndexError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| IndexError::Corrupt("doc record cut short".into()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, IndexError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, IndexError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, IndexError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn str(&mut self) -> Result<String, IndexError> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| IndexError::Corrupt("string not UTF-8".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_corruption() {
        let rec = DocRecord {
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
        };
        let bytes = rec.encode();
        assert_eq!(DocRecord::decode(&bytes).unwrap(), rec);
        let lean = DocRecord::decode(&rec.encode_with(false)).unwrap();
        assert_eq!(lean.sigs.set_len(), 0);
        assert_eq!(lean.decision, rec.decision);
        for cut in 0..bytes.len() {
            assert!(DocRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let plain = DocRecord {
            decision: Decision::plain(DecisionKind::Skipped),
            sigs: Signatures::default(),
            ..rec
        };
        assert_eq!(DocRecord::decode(&plain.encode()).unwrap(), plain);
    }
}
