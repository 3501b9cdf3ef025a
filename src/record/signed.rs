//! The signed record (`schemas/signed.v1.schema.json`): what a signer hands the decider
//! on the internal `signed` topic. It carries everything the decision and the tagged
//! output need and nothing of the markup: the page's id, URL, fetch time and headers, the
//! stripped text (unless left out), the signature multiset in the doc record's compact
//! coding, the fingerprint, the template sample of a short page and where the page was
//! consumed. The decider checks `signature_id` against its own signature settings: pages
//! signed otherwise would be compared with the index on other terms.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{parse_time, BadReason, BadRecord, Page, ValidPage};
use crate::index::{decode_signatures, encode_signatures};
use crate::signature::{Family, SignatureConfig, Signed};
use crate::text::Stripped;

/// Schema name of signed records.
pub const SIGNED_SCHEMA: &str = "neardup.signed.v1";

/// Where a signed page was consumed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Consumed {
    /// Input topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// The input record's timestamp, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_ms: Option<i64>,
}

/// A signed page.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SignedRecord {
    /// `neardup.signed.v1`.
    pub schema: String,
    /// Document id (the record's, or the hash of its URL).
    pub id: String,
    /// Page URL.
    pub url: String,
    /// Fetch time, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
    /// HTTP response headers, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// The stripped text; absent when the signer leaves text out (or it did not fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tokens of the signed text.
    pub tokens: usize,
    /// The signature family (spotsigs, words, sentences, page).
    pub family: Family,
    /// The signature multiset, base64 of the doc record's Rice-coded form.
    pub signatures: String,
    /// Fingerprint, hex (word 0 first).
    pub fingerprint: String,
    /// Template sample of a short page (the smallest CRC32s of its blocks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub template: Vec<u32>,
    /// The identity of the page's whole visible text, hex (text rules 5 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The hash of the page's title, hex (text rules 5 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Hashes of the page's short blocks, ascending (text rules 6 and later; its long
    /// blocks too, tagged by bit 0, with 7 and later;
    /// [`crate::signature::software`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<u32>,
    /// For each short block of the signed text that makes some of the page's signatures on
    /// its own: `[block hash, [signature hashes]]`, ascending (text rules 6 and later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_signatures: Vec<(u32, Vec<u32>)>,
    /// Identifies the signature settings the page was signed with.
    pub signature_id: String,
    /// Where the page was consumed.
    pub source: Consumed,
}

/// A short identifier of signature settings (CRC32 of their JSON, hex).
pub fn signature_id(c: &SignatureConfig) -> String {
    format!(
        "{:08x}",
        crc32fast::hash(&serde_json::to_vec(c).unwrap_or_default())
    )
}

impl SignedRecord {
    /// The signed record of a decoded and signed page.
    pub fn new(
        page: &ValidPage,
        signed: &Signed,
        signature_id: &str,
        keep_text: bool,
        source: Consumed,
    ) -> SignedRecord {
        SignedRecord {
            schema: SIGNED_SCHEMA.to_string(),
            id: page.doc_id.clone(),
            url: page.page.url.clone(),
            fetched_at: page.page.fetched_at.clone(),
            headers: page.page.headers.clone(),
            text: keep_text.then(|| signed.text.text.clone()),
            tokens: signed.tokens,
            family: signed.family,
            signatures: base64::engine::general_purpose::STANDARD
                .encode(encode_signatures(&signed.sigs)),
            fingerprint: crate::signature::fingerprint::to_hex(&signed.fingerprint),
            template: signed.template.clone(),
            identity: signed.identity.map(|i| format!("{i:016x}")),
            title: signed.title.map(|t| format!("{t:016x}")),
            blocks: signed.short.blocks.clone(),
            block_signatures: signed.short.sigs.clone(),
            signature_id: signature_id.to_string(),
            source,
        }
    }

    /// Decodes a signed record: the page as the decider sees it (the fetch time falls back
    /// to the input record's timestamp, as the single process does), its signatures,
    /// whether the text came along, and the input record's timestamp (ms). Anything else is a bad record
    /// ([`BadReason::BadSignedRecord`], [`BadReason::SignatureMismatch`]).
    pub fn decode(
        bytes: &[u8],
        want_signature_id: &str,
        fingerprint_words: usize,
    ) -> Result<(ValidPage, Signed, bool, Option<i64>), BadRecord> {
        let bad = |detail: String| BadRecord {
            reason: BadReason::BadSignedRecord,
            detail,
        };
        let r: SignedRecord =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a signed record: {e}")))?;
        if r.schema != SIGNED_SCHEMA {
            return Err(bad(format!(
                "schema {:?}, this decider reads {SIGNED_SCHEMA}",
                r.schema
            )));
        }
        if r.signature_id != want_signature_id {
            return Err(BadRecord {
                reason: BadReason::SignatureMismatch,
                detail: format!(
                    "signed with signature settings {} but this decider's are {}: give the \
                     signers and the decider the same signature settings, then replay the \
                     source ({}:{}:{})",
                    r.signature_id,
                    want_signature_id,
                    r.source.topic,
                    r.source.partition,
                    r.source.offset
                ),
            });
        }
        if r.id.is_empty() {
            return Err(bad("empty id".into()));
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&r.signatures)
            .map_err(|e| bad(format!("signatures are not base64: {e}")))?;
        let sigs = decode_signatures(&raw).map_err(|e| bad(format!("signatures: {e}")))?;
        let fingerprint = from_hex(&r.fingerprint)
            .filter(|f| f.len() == fingerprint_words)
            .ok_or_else(|| {
                bad(format!(
                    "fingerprint {:?} is not {fingerprint_words} hex words",
                    r.fingerprint
                ))
            })?;
        if r.template.len() > crate::signature::template::SAMPLE
            || r.template.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(bad(format!(
                "template sample of {} values, not ascending or over {}",
                r.template.len(),
                crate::signature::template::SAMPLE
            )));
        }
        let hex64 = |field: &str, v: &Option<String>| -> Result<Option<u64>, BadRecord> {
            match v {
                None => Ok(None),
                Some(h) => Some(h)
                    .filter(|h| h.len() == 16)
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .map(Some)
                    .ok_or_else(|| bad(format!("{field} {h:?} is not 16 hex digits"))),
            }
        };
        let short = crate::signature::ShortBlocks {
            blocks: r.blocks,
            sigs: r.block_signatures,
        };
        if !short.well_formed() {
            return Err(bad(
                "short blocks not ascending and distinct, or a block without signatures".into(),
            ));
        }
        let own = |h: &u32| sigs.contains(*h);
        if let Some((block, _)) = short.sigs.iter().find(|(_, s)| !s.iter().all(own)) {
            return Err(bad(format!(
                "block_signatures of block {block} name signatures the page does not have"
            )));
        }
        let identity = hex64("identity", &r.identity)?;
        let title = hex64("title", &r.title)?;
        let fetched = match &r.fetched_at {
            None => None,
            Some(t) => Some(parse_time(t).ok_or_else(|| BadRecord {
                reason: BadReason::InvalidFetchedAt,
                detail: format!("fetched_at {t:?} is not RFC 3339"),
            })?),
        };
        let has_text = r.text.is_some();
        let origin_ms = r.source.timestamp_ms;
        let page = ValidPage {
            page: Page {
                id: Some(r.id.clone()),
                url: r.url,
                html: String::new(),
                fetched_at: r.fetched_at,
                headers: r.headers,
            },
            doc_id: r.id,
            fetched_at: fetched.or(r.source.timestamp_ms.map(|ms| ms.div_euclid(1000))),
        };
        let signed = Signed {
            text: Stripped {
                text: r.text.unwrap_or_default(),
                ..Default::default()
            },
            sigs,
            fingerprint,
            tokens: r.tokens,
            family: r.family,
            template: r.template,
            identity,
            title,
            short,
        };
        Ok((page, signed, has_text, origin_ms))
    }
}

/// Parses lowercase or uppercase hex of whole 64-bit words.
fn from_hex(s: &str) -> Option<Vec<u64>> {
    if s.is_empty() || s.len() % 16 != 0 || !s.is_ascii() {
        return None;
    }
    (0..s.len() / 16)
        .map(|i| u64::from_str_radix(&s[i * 16..i * 16 + 16], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::decode_page;
    use crate::signature::Signer;

    fn signed_page() -> (ValidPage, Signed, String) {
        let html = "<html><body><article><p>The council said on Monday that the new bridge \
                    over the river would be opened to traffic in the spring of next year, \
                    after a delay of two years caused by the rising cost of steel and a \
                    dispute with the builder about the design of the approach roads.</p>\
                    <p>Photo by the staff of the harbor office</p></article></body></html>";
        let json = serde_json::json!({"id": "p1", "url": "https://a.test/1", "html": html,
            "fetched_at": "2026-11-20T08:15:00Z", "headers": {"content-type": "text/html"}});
        let page = decode_page(json.to_string().as_bytes(), 1 << 20).unwrap();
        let cfg = SignatureConfig::default();
        let signer = Signer::new(&cfg).unwrap();
        let signed = signer.sign(&page.page.html);
        (page, signed, signature_id(&cfg))
    }

    fn source() -> Consumed {
        Consumed {
            topic: "pages".into(),
            partition: 2,
            offset: 7,
            timestamp_ms: Some(1_795_162_000_000),
        }
    }

    #[test]
    fn round_trip_keeps_what_the_decision_and_the_output_need() {
        let (page, signed, id) = signed_page();
        assert!(signed.sigs.set_len() > 5);
        let rec = SignedRecord::new(&page, &signed, &id, true, source());
        let bytes = serde_json::to_vec(&rec).unwrap();
        let (p, s, has_text, origin) = SignedRecord::decode(&bytes, &id, 1).unwrap();
        assert!(has_text);
        // the short blocks, with the signatures the caption makes on its own
        assert!(!signed.short.sigs.is_empty(), "{:?}", signed.short);
        assert_eq!(s.short, signed.short);
        assert_eq!(origin, Some(1_795_162_000_000));
        assert_eq!(p.doc_id, "p1");
        assert_eq!(p.page.url, page.page.url);
        assert_eq!(p.page.fetched_at, page.page.fetched_at);
        assert_eq!(p.page.headers, page.page.headers);
        assert_eq!(p.fetched_at, page.fetched_at);
        assert_eq!(s.sigs, signed.sigs);
        assert_eq!(s.fingerprint, signed.fingerprint);
        assert_eq!(s.template, signed.template);
        assert!(signed.identity.is_some());
        assert_eq!(s.identity, signed.identity);
        assert_eq!(s.title, signed.title);
        assert_eq!(s.family, signed.family);
        assert_eq!(s.tokens, signed.tokens);
        assert_eq!(s.text.text, signed.text.text);
        // without text, and without a fetch time: the input record's timestamp stands in
        let mut bare = page.clone();
        bare.page.fetched_at = None;
        bare.fetched_at = None;
        let rec = SignedRecord::new(&bare, &signed, &id, false, source());
        let (p, _, has_text, _) =
            SignedRecord::decode(&serde_json::to_vec(&rec).unwrap(), &id, 1).unwrap();
        assert!(!has_text);
        assert_eq!(p.fetched_at, Some(1_795_162_000));
    }

    #[test]
    fn damaged_or_foreign_records_are_bad_with_a_reason() {
        let (page, signed, id) = signed_page();
        let rec = SignedRecord::new(&page, &signed, &id, true, source());
        let reason = |bytes: &[u8], want: &str| SignedRecord::decode(bytes, want, 1).unwrap_err();
        assert_eq!(reason(b"{not json", &id).reason, BadReason::BadSignedRecord);
        let other = reason(&serde_json::to_vec(&rec).unwrap(), "00000000");
        assert_eq!(other.reason, BadReason::SignatureMismatch);
        assert!(other.detail.contains("pages:2:7"), "{}", other.detail);
        for (field, value) in [
            ("signatures", serde_json::json!("%%%")),
            ("signatures", serde_json::json!("AAAA")),
            ("fingerprint", serde_json::json!("12ab")),
            (
                "fingerprint",
                serde_json::json!("00000000000000010000000000000002"),
            ),
            ("template", serde_json::json!([5, 3])),
            ("template", serde_json::json!((0..40).collect::<Vec<u32>>())),
            ("identity", serde_json::json!("12ab")),
            ("identity", serde_json::json!("0123456789abcdeg")),
            ("title", serde_json::json!("00")),
            ("blocks", serde_json::json!([9, 9])),
            ("block_signatures", serde_json::json!([[7, []]])),
            // a block that is not among the page's short blocks
            ("block_signatures", serde_json::json!([[1, [2]]])),
            ("block_signatures", serde_json::json!([[7, [3, 2]]])),
            // a signature the page does not have
            (
                "block_signatures",
                serde_json::json!([[rec.blocks[0], [1]]]),
            ),
            ("schema", serde_json::json!("neardup.signed.v9")),
            ("id", serde_json::json!("")),
            ("extra", serde_json::json!(1)),
        ] {
            let mut v = serde_json::to_value(&rec).unwrap();
            v[field] = value;
            let e = reason(&serde_json::to_vec(&v).unwrap(), &id);
            assert_eq!(
                e.reason,
                BadReason::BadSignedRecord,
                "{field}: {}",
                e.detail
            );
        }
    }
}
