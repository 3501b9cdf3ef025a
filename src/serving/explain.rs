//! Why a page was decided as it was: its stored decision, its canonical page, the
//! similarity and the signatures the two share and do not share; for two pages, their
//! similarity under every method.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::error::ServeError;
use crate::dedup::{kept_apart, KeptApart};
use crate::index::freq::host_hash;
use crate::index::{DecisionKind, DocRecord, Found, IndexReader, Method, StoredSigs};
use crate::signature::fingerprint::{fingerprint, hamming};
use crate::signature::{similarity, FingerprintKind, Measure, Signatures, Signer};

/// Page texts by id, to show signatures as strings (the index keeps only their hashes).
#[derive(Default)]
pub struct Texts {
    strings: HashMap<u32, String>,
}

impl Texts {
    /// Adds the signature strings of a page's HTML.
    pub fn add_html(&mut self, signer: &Signer, html: &str) {
        for s in signer.signature_strings(html) {
            self.strings.insert(Signer::signature_hash(&s), s);
        }
    }

    /// Adds the signature strings of plain text.
    pub fn add_text(&mut self, signer: &Signer, text: &str) {
        for s in signer.text_signature_strings(text) {
            self.strings.insert(Signer::signature_hash(&s), s);
        }
    }

    fn show(&self, h: u32) -> String {
        match self.strings.get(&h) {
            Some(s) => s.clone(),
            None => format!("0x{h:08x}"),
        }
    }
}

/// Shared and unshared signatures of two pages.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SignatureComparison {
    /// Distinct signatures of the first page.
    pub first: usize,
    /// Distinct signatures of the second page.
    pub second: usize,
    /// In both, as strings where a page's text was given, else as hashes (`0x…`).
    pub shared: Vec<String>,
    /// Only in the first page.
    pub only_first: Vec<String>,
    /// Only in the second page.
    pub only_second: Vec<String>,
}

/// How one method sees a pair.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MethodVerdict {
    /// `spotsigs` (`sentences` in an index of sentence shingles), `spotsigs-weighted`,
    /// `alg-g`, `alg-h-64`, `alg-h-128`, `alg-h-256`.
    pub method: String,
    /// Similarity (exact for the signature sets; estimated from the Hamming distance,
    /// `1 − 2h/k`, for the fingerprints).
    pub similarity: f64,
    /// Hamming distance of the fingerprints (fingerprint methods).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hamming: Option<u32>,
    /// Fingerprint width in bits (fingerprint methods).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits: Option<u32>,
    /// Whether this index, with its τ and Hamming radius, would match the pair this way,
    /// by similarity alone (`kept_apart` says when the deduplicator's template and host
    /// tests keep the pair apart whatever it is). Absent where the index was not built for
    /// it (another width).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<bool>,
}

/// Two pages compared.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PairExplanation {
    /// The first id.
    pub first: String,
    /// The second id.
    pub second: String,
    /// Under every method.
    pub methods: Vec<MethodVerdict>,
    /// Why the index would not match the two pages whatever their similarity (the
    /// methods' `matches` are by similarity alone): `same-template`, the later page is
    /// short (signed by its word shingles or whole) and laid out in the earlier one's
    /// template; `same-host`, one of them is short and both are of one host (text rules 3
    /// and later); `other-text`, both are of one host and show less than half of the same
    /// blocks (text rules 7 and later). Absent when none holds. Only a unique page keeps its template
    /// sample, so when the later page is a duplicate only the earlier page's sample is
    /// known: `same-host` is then said when the earlier page is short, and `same-template`
    /// not at all. Never said of two pages of one identity (the same whole visible text,
    /// numbers aside; text rules 5 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_apart: Option<KeptApart>,
    /// The similarity the index asks of two pages of one host that are not one page, when
    /// it is above τ (text rules 10 and later, [`crate::dedup::HOST_THRESHOLD`]); the
    /// signature methods' `matches` are then judged at it. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_threshold: Option<f64>,
    /// Shared and unshared signatures.
    pub signatures: SignatureComparison,
}

/// The answer of `GET /v1/explain/{id}` and `neardup explain`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Explanation {
    /// The page.
    pub id: String,
    /// Its URL.
    pub url: String,
    /// First seen, Unix seconds.
    pub first_seen: i64,
    /// The stored decision.
    pub decision: DecisionKind,
    /// The canonical page's id (duplicates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical_id: Option<String>,
    /// The canonical page's URL (duplicates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical_url: Option<String>,
    /// Whether the canonical page is still in the index (duplicates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical_indexed: Option<bool>,
    /// The stored similarity to the canonical page (duplicates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// Which index found the canonical page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_by: Option<Found>,
    /// The Hamming distance, where a fingerprint index found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hamming: Option<u32>,
    /// The index's method.
    pub method: Method,
    /// The index's τ.
    pub threshold: f64,
    /// The index's measure.
    pub measure: Measure,
    /// Distinct signatures of the page, where stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signatures: Option<usize>,
    /// Why the page's signatures are not available, if they are not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signatures_unavailable: Option<String>,
    /// How many of its signatures were left out of matching as software text when it was
    /// decided (a unique page, text rules 6 and later); absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software_signatures: Option<usize>,
    /// The page against its canonical page (duplicates), or against the second id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared: Option<PairExplanation>,
}

/// What explaining reads: the index.
pub(super) struct Explaining<'a> {
    pub(super) reader: &'a IndexReader,
}

impl Explaining<'_> {
    /// Explains the decision of `id`, and compares it with `other` (or, for a duplicate,
    /// with its canonical page). `texts` turns signature hashes into strings.
    pub(super) fn explain(
        &self,
        id: &str,
        other: Option<&str>,
        texts: &Texts,
    ) -> Result<Explanation, ServeError> {
        let (num, rec) = self.reader.find_id(id)?.ok_or_else(|| {
            ServeError::NotFound(format!(
                "{id:?} is not in the index (never decided, or expired)"
            ))
        })?;
        let params = self.reader.params();
        let stored = self.reader.signatures(&rec)?;
        let d = &rec.decision;
        let canonical = match d.canonical_id.as_deref() {
            Some(c) => self.reader.find_id(c)?,
            None => None,
        };
        let mut out = Explanation {
            id: rec.id.clone(),
            url: rec.url.clone(),
            first_seen: rec.first_seen,
            decision: d.kind,
            canonical_id: d.canonical_id.clone(),
            canonical_url: d.canonical_url.clone(),
            canonical_indexed: d.canonical_id.as_ref().map(|_| canonical.is_some()),
            similarity: d.similarity,
            found_by: d.found_by,
            hamming: d.hamming,
            method: params.method,
            threshold: params.threshold,
            measure: params.measure,
            signatures: stored.get().map(Signatures::set_len),
            signatures_unavailable: match &stored {
                StoredSigs::Unavailable(why) => Some(why.to_string()),
                _ => None,
            },
            software_signatures: (!rec.software.is_empty()).then_some(rec.software.len()),
            compared: None,
        };
        let second = match other {
            Some(o) => Some(self.reader.find_id(o)?.ok_or_else(|| {
                ServeError::NotFound(format!(
                    "{o:?} is not in the index (never decided, or expired)"
                ))
            })?),
            None => canonical,
        };
        if let (Some(a), Some((num_b, b))) = (stored.get(), second) {
            let sb = self.reader.signatures(&b)?;
            if let Some(sb) = sb.get() {
                let mut pair = self.pair(&rec, a, &b, sb, texts);
                // the template test is the later page's, as when it was decided
                let (later, earlier) = if num > num_b { (&rec, &b) } else { (&b, &rec) };
                let hosts = params.signature.short_pages_across_hosts_only();
                // a page is not kept apart from itself
                let keys = crate::dedup::Keys {
                    identity: later.identity,
                    title: later.title,
                    sigs: Some(&later.sigs),
                    blocks: &later.blocks,
                    host: None,
                }
                .on_host(params.signature.host_text().then_some(&*later.url));
                pair.kept_apart = (num != num_b)
                    .then(|| {
                        kept_apart(&later.template, keys, earlier, &mut || {
                            hosts.then(|| host_hash(&later.url))
                        })
                    })
                    .flatten();
                let host_tau = params
                    .signature
                    .host_threshold()
                    .then(|| crate::dedup::host_threshold(params.threshold));
                let at = crate::dedup::pair_threshold(
                    params.threshold,
                    host_tau,
                    &keys,
                    earlier,
                    || Some(host_hash(&later.url)),
                );
                if num != num_b && at > params.threshold {
                    pair.host_threshold = Some(at);
                    let (ea, eb) = (a.entries(), sb.entries());
                    for (m, measure) in pair
                        .methods
                        .iter_mut()
                        .zip([Measure::Jaccard, Measure::Weighted])
                    {
                        if m.matches.is_some() {
                            m.matches =
                                Some(crate::signature::similarity_at_least(ea, eb, measure, at));
                        }
                    }
                }
                out.compared = Some(pair);
            }
        }
        Ok(out)
    }

    /// Two stored pages under every method.
    fn pair(
        &self,
        ra: &DocRecord,
        a: &Signatures,
        rb: &DocRecord,
        b: &Signatures,
        texts: &Texts,
    ) -> PairExplanation {
        let p = self.reader.params();
        let (ea, eb) = (a.entries(), b.entries());
        // the stored signature sets are of the index's family
        let family = p.signature.features.as_str();
        let mut methods = vec![
            MethodVerdict {
                method: family.into(),
                similarity: similarity(ea, eb, Measure::Jaccard),
                hamming: None,
                bits: None,
                matches: (p.measure == Measure::Jaccard).then(|| {
                    crate::signature::similarity_at_least(ea, eb, Measure::Jaccard, p.threshold)
                }),
            },
            MethodVerdict {
                method: format!("{family}-weighted"),
                similarity: similarity(ea, eb, Measure::Weighted),
                hamming: None,
                bits: None,
                matches: (p.measure == Measure::Weighted).then(|| {
                    crate::signature::similarity_at_least(ea, eb, Measure::Weighted, p.threshold)
                }),
            },
        ];
        let kind = p.signature.fingerprint;
        let built_bits = p.signature.fingerprint_bits;
        let widths: &[u32] = match kind {
            FingerprintKind::Simhash => &[64],
            FingerprintKind::Minhash1 => &[64, 128, 256],
        };
        for &bits in widths {
            // the stored fingerprints where the index was built at this width, else
            // computed from the signatures (the fingerprint is a function of them)
            let (fa, fb) = if bits == built_bits {
                (ra.fingerprint.clone(), rb.fingerprint.clone())
            } else {
                (fingerprint(a, kind, bits), fingerprint(b, kind, bits))
            };
            let h = hamming(&fa, &fb);
            let est = 1.0 - 2.0 * f64::from(h) / f64::from(bits);
            let at_built = bits == built_bits;
            if bits == 64 {
                // alg.G indexes the first stored word, whatever the width
                let first = |r: &DocRecord| r.fingerprint.first().copied().unwrap_or(0);
                let h64 = hamming(&[first(ra)], &[first(rb)]);
                methods.push(MethodVerdict {
                    method: "alg-g".into(),
                    similarity: 1.0 - 2.0 * f64::from(h64) / 64.0,
                    hamming: Some(h64),
                    bits: Some(64),
                    matches: matches!(p.method, Method::AlgG | Method::Chain)
                        .then_some(h64 <= p.rh),
                });
            }
            methods.push(MethodVerdict {
                method: format!("alg-h-{bits}"),
                similarity: est.max(0.0),
                hamming: Some(h),
                bits: Some(bits),
                matches: (at_built && p.method == Method::AlgH).then_some(h <= p.rh),
            });
        }
        let (mut shared, mut only_a, mut only_b) = (Vec::new(), Vec::new(), Vec::new());
        let (mut i, mut j) = (0, 0);
        while i < ea.len() || j < eb.len() {
            if j == eb.len() || (i < ea.len() && ea[i].0 < eb[j].0) {
                only_a.push(texts.show(ea[i].0));
                i += 1;
            } else if i == ea.len() || eb[j].0 < ea[i].0 {
                only_b.push(texts.show(eb[j].0));
                j += 1;
            } else {
                shared.push(texts.show(ea[i].0));
                i += 1;
                j += 1;
            }
        }
        PairExplanation {
            first: ra.id.clone(),
            second: rb.id.clone(),
            methods,
            kept_apart: None,
            host_threshold: None,
            signatures: SignatureComparison {
                first: ea.len(),
                second: eb.len(),
                shared,
                only_first: only_a,
                only_second: only_b,
            },
        }
    }
}
