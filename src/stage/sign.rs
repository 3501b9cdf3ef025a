//! The sign task: on the pool of `jobs` threads, a consumed record becomes a prepared page.
//! A decider that reads pages a signer signed decodes the signed record; any other role
//! strips and signs the page. Either way the payload goes along, for a dead letter.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::flow::PrepOutput;
use super::settings::StageSettings;
use crate::config::Role;
use crate::prepare::{prepare, PrepareTimes, Prepared};
use crate::record::signed::{signature_id, SignedRecord};
use crate::signature::Signer;

/// The pool and what its jobs need.
pub(super) struct SignPool {
    pool: rayon::ThreadPool,
    signer: Arc<Signer>,
    /// The signature settings' id a signed record must carry (a decider of signed pages).
    signed_by: Option<Arc<str>>,
    fp_words: usize,
    max_record_bytes: usize,
}

impl SignPool {
    pub(super) fn new(s: &StageSettings, signer: Arc<Signer>) -> anyhow::Result<SignPool> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(s.jobs)
            .thread_name(|i| format!("neardup-sign-{i}"))
            .build()?;
        Ok(SignPool {
            pool,
            signer,
            signed_by: (s.role == Role::Decider)
                .then(|| Arc::from(signature_id(&s.params.signature).as_str())),
            fp_words: (s.params.signature.fingerprint_bits / 64) as usize,
            max_record_bytes: s.max_record_bytes,
        })
    }

    /// Prepares `payload` on the pool; the answer arrives on the returned channel.
    pub(super) fn submit(
        &self,
        payload: Vec<u8>,
        timestamp_ms: Option<i64>,
    ) -> oneshot::Receiver<PrepOutput> {
        let (tx, rx) = oneshot::channel();
        let (signer, max) = (Arc::clone(&self.signer), self.max_record_bytes);
        let (signed_by, fp_words) = (self.signed_by.clone(), self.fp_words);
        self.pool.spawn(move || {
            let out = match signed_by {
                Some(want) => decode_signed(payload, &want, fp_words, timestamp_ms),
                None => {
                    let started = Instant::now();
                    let (prepared, times) = prepare(&payload, &signer, max);
                    PrepOutput {
                        payload,
                        prepared,
                        times,
                        has_text: true,
                        origin_ms: timestamp_ms,
                        ran: (started, Instant::now()),
                    }
                }
            };
            let _ = tx.send(out);
        });
        rx
    }
}

/// A signed record as the decider's pool prepares it: the page and its signatures, or why
/// the record is bad; the page's input timestamp, else the signed record's own.
fn decode_signed(
    payload: Vec<u8>,
    want: &str,
    fp_words: usize,
    timestamp_ms: Option<i64>,
) -> PrepOutput {
    let started = Instant::now();
    let p = SignedRecord::decode(&payload, want, fp_words);
    let times = PrepareTimes {
        decode: started.elapsed(),
        ..Default::default()
    };
    let (prepared, has_text, origin_ms) = match p {
        Ok((page, signed, text, origin)) => (
            Prepared::Page(Box::new((page, signed))),
            text,
            origin.or(timestamp_ms),
        ),
        Err(bad) => (Prepared::Bad(bad), false, timestamp_ms),
    };
    PrepOutput {
        payload,
        prepared,
        times,
        has_text,
        origin_ms,
        ran: (started, Instant::now()),
    }
}
