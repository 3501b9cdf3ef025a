//! One input record made ready for a decision: decoded, validated and signed, off the
//! deciding thread. File mode, the stage and the benchmarks share it; the deciding is
//! [`crate::dedup::Deduplicator`]'s.

use std::time::{Duration, Instant};

use crate::record::{decode_page, BadRecord, ValidPage};
use crate::signature::{Signed, Signer};

/// A decoded and signed input record, or why it is bad.
pub enum Prepared {
    /// A valid page and its signatures.
    Page(Box<(ValidPage, Signed)>),
    /// A record that cannot be processed.
    Bad(BadRecord),
    /// An empty record (whitespace only).
    Blank,
}

/// Where the time of [`prepare`] went.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrepareTimes {
    /// Decoding and validating the record.
    pub decode: Duration,
    /// Stripping the markup.
    pub strip: Duration,
    /// Tokens, signatures and the fingerprint.
    pub sign: Duration,
}

/// Decodes, validates and signs one input record (pure; run it on any thread).
pub fn prepare(bytes: &[u8], signer: &Signer, max_record_bytes: usize) -> (Prepared, PrepareTimes) {
    let mut times = PrepareTimes::default();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return (Prepared::Blank, times);
    }
    let started = Instant::now();
    let decoded = decode_page(bytes, max_record_bytes);
    times.decode = started.elapsed();
    match decoded {
        Ok(mut p) => {
            let started = Instant::now();
            let (signed, strip) = signer.sign_timed(&p.page.html);
            times.strip = strip;
            times.sign = started.elapsed().saturating_sub(strip);
            // nothing reads the HTML past its signatures: freed here, on the thread that
            // decoded it, rather than held until the page is decided and written
            p.page.html = String::new();
            (Prepared::Page(Box::new((p, signed))), times)
        }
        Err(bad) => (Prepared::Bad(bad), times),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::SignatureConfig;

    /// A prepared page carries its signatures and every field of the record but its HTML,
    /// which is not held while the page waits to be decided.
    #[test]
    fn a_prepared_page_keeps_its_signatures_not_its_html() {
        let html = "<html><body><article><p>The council said on Monday that the new bridge \
                    over the river would be opened to traffic in the spring of next year, \
                    after a delay of two years caused by the rising cost of steel.</p>\
                    </article></body></html>";
        let json = serde_json::json!({"id": "p1", "url": "https://a.test/1", "html": html,
            "fetched_at": "2026-11-20T08:15:00Z"});
        let signer = Signer::new(&SignatureConfig::default()).unwrap();
        let (prepared, _) = prepare(json.to_string().as_bytes(), &signer, 1 << 20);
        let Prepared::Page(b) = prepared else {
            panic!("not a page");
        };
        let (page, signed) = *b;
        assert_eq!(page.page.html, "");
        assert_eq!(page.doc_id, "p1");
        assert_eq!(page.page.url, "https://a.test/1");
        assert!(page.fetched_at.is_some());
        let direct = signer.sign(html);
        assert!(direct.sigs.set_len() > 0);
        assert_eq!(signed.sigs, direct.sigs);
        assert_eq!(signed.fingerprint, direct.fingerprint);
    }
}
