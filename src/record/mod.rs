//! Records: the input page, the tagged output and the dead letter, mirroring
//! `schemas/page.v1.schema.json`, `schemas/tagged.v1.schema.json` and
//! `schemas/dead-letter.v1.schema.json`.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::index::{Decision, DecisionKind, IndexParams, FORMAT_VERSION};
use crate::signature::{fingerprint::to_hex, Signed};

pub mod changelog;
mod fast;
mod page;
pub mod signed;
pub mod votes;

pub use page::Page;

/// Why a record could not be processed. The codes are the bounded label set of metrics and
/// the `reason` of dead letters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BadReason {
    /// Bytes are not UTF-8.
    NotUtf8,
    /// Not JSON at all.
    InvalidJson,
    /// JSON that ends too early.
    TruncatedJson,
    /// JSON, but not a page object (wrong types, missing `html`).
    WrongShape,
    /// No `url` field.
    MissingUrl,
    /// An empty `url` and no `id`.
    EmptyUrl,
    /// `fetched_at` is not RFC 3339.
    InvalidFetchedAt,
    /// Larger than the configured record limit.
    TooLarge,
    /// A Kafka record with no value or only whitespace.
    EmptyRecord,
    /// The record's output was refused by the broker as too large.
    OutputTooLarge,
    /// A record of the `signed` topic that is not a signed record of this version.
    BadSignedRecord,
    /// A signed record made with other signature settings than the decider's.
    SignatureMismatch,
}

impl BadReason {
    /// The reason code.
    pub fn as_str(self) -> &'static str {
        match self {
            BadReason::NotUtf8 => "not_utf8",
            BadReason::InvalidJson => "invalid_json",
            BadReason::TruncatedJson => "truncated_json",
            BadReason::WrongShape => "wrong_shape",
            BadReason::MissingUrl => "missing_url",
            BadReason::EmptyUrl => "empty_url",
            BadReason::InvalidFetchedAt => "invalid_fetched_at",
            BadReason::TooLarge => "too_large",
            BadReason::EmptyRecord => "empty_record",
            BadReason::OutputTooLarge => "output_too_large",
            BadReason::BadSignedRecord => "bad_signed_record",
            BadReason::SignatureMismatch => "signature_mismatch",
        }
    }
}

/// A record that could not be decoded: the reason and a human-readable detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRecord {
    /// Reason code.
    pub reason: BadReason,
    /// What exactly is wrong.
    pub detail: String,
}

impl std::fmt::Display for BadRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.detail)
    }
}

/// A decoded, validated page.
#[derive(Clone, Debug)]
pub struct ValidPage {
    /// The record.
    pub page: Page,
    /// The document id (the record's or the URL hash).
    pub doc_id: String,
    /// Fetch time as Unix seconds, if given.
    pub fetched_at: Option<i64>,
}

/// FNV-1a, 64 bits: the stable hash of a URL that names a page without an id.
pub fn url_id(url: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("url-{h:016x}")
}

/// Decodes and validates one input record.
pub fn decode_page(bytes: &[u8], max_bytes: usize) -> Result<ValidPage, BadRecord> {
    let text = record_text(bytes, max_bytes)?;
    // the common shape at 1.5 times the speed; anything else, and every error, from the
    // general decoder
    let page = match fast::parse_page(text) {
        Some(page) => page,
        None => decode_general(text)?,
    };
    validate(page)
}

/// [`decode_page`] without its fast path: every record through the JSON library. The fuzz
/// checks and tests compare the two; they must agree on every input.
pub fn decode_page_general(bytes: &[u8], max_bytes: usize) -> Result<ValidPage, BadRecord> {
    validate(decode_general(record_text(bytes, max_bytes)?)?)
}

/// The record as text: at most `max_bytes`, UTF-8.
fn record_text(bytes: &[u8], max_bytes: usize) -> Result<&str, BadRecord> {
    let bad = |reason, detail: String| BadRecord { reason, detail };
    if bytes.len() > max_bytes {
        return Err(bad(
            BadReason::TooLarge,
            format!("record has {} bytes, the limit is {max_bytes}", bytes.len()),
        ));
    }
    // a record is validated whole before it is parsed: the standard library's check took
    // a twenty-fifth of a signing core over the dev pages (606 MB), a vectorised one a
    // fraction of that; a record it refuses is checked again by the standard library, which
    // says where the bytes go wrong
    if let Ok(text) = simdutf8::basic::from_utf8(bytes) {
        return Ok(text);
    }
    std::str::from_utf8(bytes).map_err(|e| {
        bad(
            BadReason::NotUtf8,
            format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        )
    })
}

/// The general decoder: any record serde's rules accept, and the reason of any other.
fn decode_general(text: &str) -> Result<Page, BadRecord> {
    let bad = |reason, detail: String| BadRecord { reason, detail };
    serde_json::from_str(text).map_err(|e| {
        use serde_json::error::Category;
        let detail = e.to_string();
        let reason = match e.classify() {
            Category::Eof => BadReason::TruncatedJson,
            Category::Syntax | Category::Io => BadReason::InvalidJson,
            Category::Data if detail.contains("missing field `url`") => BadReason::MissingUrl,
            Category::Data => BadReason::WrongShape,
        };
        bad(reason, detail)
    })
}

fn validate(page: Page) -> Result<ValidPage, BadRecord> {
    let bad = |reason, detail: String| BadRecord { reason, detail };
    let has_id = page.id.as_deref().is_some_and(|id| !id.is_empty());
    if page.url.trim().is_empty() && !has_id {
        return Err(bad(
            BadReason::EmptyUrl,
            "the url field is empty and there is no id to name the page".into(),
        ));
    }
    let fetched_at = match &page.fetched_at {
        None => None,
        Some(t) => Some(parse_time(t).ok_or_else(|| {
            bad(
                BadReason::InvalidFetchedAt,
                format!("fetched_at {t:?} is not RFC 3339"),
            )
        })?),
    };
    let doc_id = match page.id.as_deref() {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => url_id(&page.url),
    };
    Ok(ValidPage {
        page,
        doc_id,
        fetched_at,
    })
}

/// Parses an RFC 3339 time (`2026-11-20T08:15:00Z`, `…T08:15:00.5+01:00`; `T` or a space,
/// any case) to Unix seconds (fractions dropped, the offset applied). `None` for anything
/// else, including trailing bytes.
pub fn parse_time(t: &str) -> Option<i64> {
    let b = t.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(r)?;
        if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(d.iter().fold(0i64, |a, c| a * 10 + (c - b'0') as i64))
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return None;
    }
    let mut at = 19;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        at += digits;
    }
    let offset = match b.get(at)? {
        b'Z' | b'z' if at + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if at + 6 == b.len() && b[at + 3] == b':' => {
            let (oh, om) = (num(at + 1..at + 3)?, num(at + 4..at + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo)
        || d < 1
        || d > days_in[(mo - 1) as usize]
        || h > 23
        || mi > 59
        || sec > 60
    {
        return None;
    }
    // days from 1970-01-01 (the civil-from-days inverse, proleptic Gregorian)
    let (yy, mm) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

/// The `dedup` object of a tagged record.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DedupInfo {
    /// unique, duplicate or skipped.
    pub decision: DecisionKind,
    /// Canonical document id (duplicates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical_id: Option<String>,
    /// Canonical document URL (duplicates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical_url: Option<String>,
    /// Similarity to the canonical document (duplicates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// Hamming distance of the fingerprints, where a fingerprint index found the match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hamming: Option<u32>,
    /// The index that found the match (alg-g, alg-h, spotsigs), for duplicates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_by: Option<String>,
    /// The configured method.
    pub method: String,
    /// The similarity threshold τ.
    pub threshold: f64,
    /// Index format version.
    pub index_format: u32,
    /// Identifies the index parameters (CRC32 of their JSON, hex).
    pub params_id: String,
    /// File mode: the id was decided before and this is the stored decision. The Kafka
    /// stage leaves it out, so a redelivered record's output is byte-identical to the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeated: Option<bool>,
}

/// A tagged record (output).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Tagged {
    /// Schema name and version: `neardup.tagged.v1`.
    pub schema: String,
    /// Document id.
    pub id: String,
    /// Page URL.
    pub url: String,
    /// Fetch time, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
    /// HTTP response headers, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// The stripped text (blocks separated by newlines), unless turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Distinct SpotSigs signatures.
    pub signatures: usize,
    /// Fingerprint, hex.
    pub fingerprint: String,
    /// The decision.
    pub dedup: DedupInfo,
}

/// Schema name of tagged records.
pub const TAGGED_SCHEMA: &str = "neardup.tagged.v1";
/// Schema name of dead letters.
pub const DEAD_LETTER_SCHEMA: &str = "neardup.dead-letter.v1";

/// A short identifier of index parameters.
pub fn params_id(p: &IndexParams) -> String {
    format!(
        "{:08x}",
        crc32fast::hash(&serde_json::to_vec(p).unwrap_or_default())
    )
}

/// A tagged record as written: [`Tagged`]'s fields, in its order and with its rules, lent
/// from the page, its signatures and its decision instead of copied (a decider makes one
/// for every record: its own copies of the id, URL, headers and text, a dozen allocations,
/// were 3 % of the deciding thread). Written with serde's JSON writer, it gives the bytes
/// [`Tagged`] gives (a test compares them).
#[derive(Debug, Serialize)]
pub struct TaggedOut<'a> {
    /// [`TAGGED_SCHEMA`].
    pub schema: &'static str,
    /// Document id.
    pub id: &'a str,
    /// Page URL.
    pub url: &'a str,
    /// Fetch time, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<&'a str>,
    /// HTTP response headers, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<&'a BTreeMap<String, String>>,
    /// The stripped text, unless left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    /// Distinct SpotSigs signatures.
    pub signatures: usize,
    /// Fingerprint, hex.
    pub fingerprint: String,
    /// The decision.
    pub dedup: DedupOut<'a>,
}

/// [`DedupInfo`] as written, lent from the decision ([`TaggedOut`]).
#[derive(Debug, Serialize)]
pub struct DedupOut<'a> {
    /// unique, duplicate or skipped.
    pub decision: DecisionKind,
    /// Canonical document id (duplicates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical_id: Option<&'a str>,
    /// Canonical document URL (duplicates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical_url: Option<&'a str>,
    /// Similarity to the canonical document (duplicates), to six decimals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// Hamming distance of the fingerprints, where a fingerprint index found the match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hamming: Option<u32>,
    /// The index that found the match, for duplicates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_by: Option<&'static str>,
    /// The configured method.
    pub method: &'static str,
    /// The similarity threshold τ.
    pub threshold: f64,
    /// Index format version.
    pub index_format: u32,
    /// Identifies the index parameters.
    pub params_id: &'a str,
    /// File mode: the id was decided before ([`DedupInfo::repeated`]); `None` in the stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeated: Option<bool>,
}

/// Builds the tagged record of a decided page (`repeated`: the id was decided before and
/// `d` is its stored decision).
pub fn tagged<'a>(
    page: &'a ValidPage,
    signed: &'a Signed,
    d: &'a Decision,
    repeated: bool,
    params: &IndexParams,
    params_id: &'a str,
    keep_text: bool,
) -> TaggedOut<'a> {
    TaggedOut {
        schema: TAGGED_SCHEMA,
        id: &page.doc_id,
        url: &page.page.url,
        fetched_at: page.page.fetched_at.as_deref(),
        headers: page.page.headers.as_ref(),
        text: keep_text.then_some(signed.text.text.as_str()),
        signatures: signed.sigs.set_len(),
        fingerprint: to_hex(&signed.fingerprint),
        dedup: DedupOut {
            decision: d.kind,
            canonical_id: d.canonical_id.as_deref(),
            canonical_url: d.canonical_url.as_deref(),
            similarity: d.similarity.map(|s| (s * 1e6).round() / 1e6),
            hamming: d.hamming,
            found_by: d.found_by.map(|f| f.as_str()),
            method: params.method.as_str(),
            threshold: params.threshold,
            index_format: FORMAT_VERSION,
            params_id,
            repeated: Some(repeated),
        },
    }
}

/// Where a dead letter came from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// A line of an input file.
    File {
        /// Input path (`-` for stdin).
        path: String,
        /// 1-based line number.
        line: u64,
    },
    /// A Kafka record.
    Kafka {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// Offset.
        offset: i64,
    },
}

/// A dead letter: a record that could not be processed, with the original bytes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeadLetter {
    /// Schema name and version: `neardup.dead-letter.v1`.
    pub schema: String,
    /// Reason code.
    pub reason: String,
    /// What exactly is wrong.
    pub detail: String,
    /// Where the record came from.
    pub source: Source,
    /// The original bytes, base64 (the first bytes only when `original_truncated`).
    pub original_base64: String,
    /// Size of the original record in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_bytes: Option<u64>,
    /// The original was cut to fit the output record limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_truncated: Option<bool>,
}

impl DeadLetter {
    /// A dead letter for `bad` with the original bytes.
    pub fn new(bad: &BadRecord, source: Source, original: &[u8]) -> DeadLetter {
        DeadLetter {
            schema: DEAD_LETTER_SCHEMA.to_string(),
            reason: bad.reason.as_str().to_string(),
            detail: bad.detail.clone(),
            source,
            original_base64: base64::engine::general_purpose::STANDARD.encode(original),
            original_bytes: Some(original.len() as u64),
            original_truncated: None,
        }
    }

    /// A dead letter that fits in `max_json` bytes of JSON: the original is cut when needed
    /// (and `original_truncated` set).
    pub fn fitting(
        bad: &BadRecord,
        source: Source,
        original: &[u8],
        max_json: usize,
    ) -> DeadLetter {
        // base64 grows by 4/3; keep 4 KiB for the other fields
        let room = max_json.saturating_sub(4096 + bad.detail.len() * 2) / 4 * 3;
        if original.len() <= room {
            return DeadLetter::new(bad, source, original);
        }
        let mut d = DeadLetter::new(bad, source, &original[..room]);
        d.original_bytes = Some(original.len() as u64);
        d.original_truncated = Some(true);
        d
    }
}

/// The clock in Unix seconds (0 before 1970): a page's first-seen time when it carries
/// none, and the now of a retention sweep.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record lent from the page and its decision is written as the owned one is, for
    /// every kind of decision, with and without the optional fields.
    #[test]
    fn the_lent_tagged_record_writes_the_bytes_of_the_owned_one() {
        let signer = crate::signature::Signer::new(&Default::default()).unwrap();
        let params = IndexParams::default();
        let pid = params_id(&params);
        let lines = [
            r#"{"url":"https://a.test/x","html":"<p>One two three four five six seven.</p>"}"#,
            r#"{"id":"q\"uo\u00e9","url":"https://b.test/\u2028","html":"<article><p>It was the best of times, it was the worst of times.</p></article>","fetched_at":"2026-11-30T10:00:00Z","headers":{"content-type":"text/html","x-a":"\"b\""}}"#,
        ];
        let mut dup = Decision::plain(DecisionKind::Duplicate);
        dup.canonical_id = Some("c\"1".into());
        dup.canonical_url = Some("https://c.test/".into());
        dup.similarity = Some(0.123_456_789);
        dup.hamming = Some(3);
        dup.found_by = Some(crate::index::Found::Spotsigs);
        let decisions = [
            Decision::plain(DecisionKind::Unique),
            Decision::plain(DecisionKind::Skipped),
            dup,
        ];
        let mut checked = 0;
        for line in lines {
            let page = decode_page(line.as_bytes(), 1 << 20).unwrap();
            let signed = signer.sign(&page.page.html);
            for d in &decisions {
                for (repeated, keep_text) in [(false, false), (true, true)] {
                    let mut out = tagged(&page, &signed, d, repeated, &params, &pid, keep_text);
                    // the owned record as it was built before the lent one
                    let mut want = Tagged {
                        schema: TAGGED_SCHEMA.to_string(),
                        id: page.doc_id.clone(),
                        url: page.page.url.clone(),
                        fetched_at: page.page.fetched_at.clone(),
                        headers: page.page.headers.clone(),
                        text: keep_text.then(|| signed.text.text.clone()),
                        signatures: signed.sigs.set_len(),
                        fingerprint: to_hex(&signed.fingerprint),
                        dedup: DedupInfo {
                            decision: d.kind,
                            canonical_id: d.canonical_id.clone(),
                            canonical_url: d.canonical_url.clone(),
                            similarity: d.similarity.map(|s| (s * 1e6).round() / 1e6),
                            hamming: d.hamming,
                            found_by: d.found_by.map(|f| f.as_str().to_string()),
                            method: params.method.as_str().to_string(),
                            threshold: params.threshold,
                            index_format: FORMAT_VERSION,
                            params_id: pid.clone(),
                            repeated: Some(repeated),
                        },
                    };
                    for stage in [false, true] {
                        if stage {
                            out.dedup.repeated = None;
                            want.dedup.repeated = None;
                        }
                        let bytes = serde_json::to_vec(&out).unwrap();
                        assert_eq!(
                            String::from_utf8(bytes.clone()).unwrap(),
                            serde_json::to_string(&want).unwrap()
                        );
                        let back: Tagged = serde_json::from_slice(&bytes).unwrap();
                        assert_eq!(back, want);
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 24);
    }

    #[test]
    fn decode_reasons() {
        let max = 1 << 20;
        let ok = decode_page(br#"{"url":"https://a.test/","html":"<p>x</p>"}"#, max).unwrap();
        assert_eq!(ok.doc_id, url_id("https://a.test/"));
        let cases: Vec<(&[u8], BadReason)> = vec![
            (b"not json", BadReason::InvalidJson),
            (
                br#"{"url":"https://a.test/","html":"<p>"#,
                BadReason::TruncatedJson,
            ),
            (br#"{"html":"x"}"#, BadReason::MissingUrl),
            (br#"{"url":"","html":"x"}"#, BadReason::EmptyUrl),
            (br#"{"id":"","url":" ","html":"x"}"#, BadReason::EmptyUrl),
            (br#"{"url":"u"}"#, BadReason::WrongShape),
            (br#"[1,2]"#, BadReason::WrongShape),
            (br#"{"url":5,"html":"x"}"#, BadReason::WrongShape),
            (b"{\"url\":\"u\",\"html\":\"\xff\"}", BadReason::NotUtf8),
            (
                br#"{"url":"u","html":"x","fetched_at":"yesterday"}"#,
                BadReason::InvalidFetchedAt,
            ),
        ];
        for (bytes, reason) in cases {
            let got = decode_page(bytes, max).unwrap_err();
            assert_eq!(got.reason, reason, "{}", String::from_utf8_lossy(bytes));
        }
        assert_eq!(
            decode_page(&[b' '; 100], 10).unwrap_err().reason,
            BadReason::TooLarge
        );
        let t = decode_page(
            br#"{"id":"p1","url":"u","html":"","fetched_at":"2026-11-20T08:15:00Z"}"#,
            max,
        )
        .unwrap();
        assert_eq!(t.doc_id, "p1");
        let named = decode_page(br#"{"id":"p2","url":"","html":"x"}"#, max).unwrap();
        assert_eq!(named.doc_id, "p2");
        assert_eq!(t.fetched_at, Some(1_795_162_500));
    }

    #[test]
    fn rfc3339_times() {
        let z = 1_795_162_500;
        for (t, want) in [
            ("2026-11-20T08:15:00Z", Some(z)),
            ("2026-11-20t08:15:00z", Some(z)),
            ("2026-11-20 08:15:00Z", Some(z)),
            ("2026-11-20T08:15:00+01:00", Some(z - 3600)),
            ("2026-11-20T08:15:00-05:00", Some(z + 5 * 3600)),
            ("2026-11-20T08:15:00-00:00", Some(z)),
            ("2026-11-20T08:15:00.5+01:00", Some(z - 3600)),
            ("1969-12-31T23:59:59Z", Some(-1)),
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2000-02-29T00:00:00Z", Some(951_782_400)),
            ("2026-11-20T08:15:00Zjunk", None),
            ("2026-11-20T08:15:00Z\u{0}", None),
            ("2026-02-29T00:00:00Z", None),
            ("2026-11-20T24:00:00Z", None),
            ("2026-11-20T08:15:00", None),
            ("2026-11-20T08:15:00.Z", None),
            ("yesterday", None),
            ("", None),
        ] {
            assert_eq!(parse_time(t), want, "{t:?}");
        }
    }
}
