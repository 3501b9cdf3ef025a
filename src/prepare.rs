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
        Ok(p) => {
            let started = Instant::now();
            let (signed, strip) = signer.sign_timed(&p.page.html);
            times.strip = strip;
            times.sign = started.elapsed().saturating_sub(strip);
            (Prepared::Page(Box::new((p, signed))), times)
        }
        Err(bad) => (Prepared::Bad(bad), times),
    }
}
