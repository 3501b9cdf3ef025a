//! The signer role's loop: each consumed page, signed on the pool, becomes a signed record
//! for the decider (`schemas/signed.v1.schema.json`) or a dead letter, in consumption
//! order. Nothing here keeps state: any number of signers share the input topics' group.

use std::sync::Arc;

use anyhow::Result;
use tokio::sync::mpsc;

use super::decide::{max_output_bytes, take, Counts, Taken};
use super::flow::{Job, Outbound, HEADER_SCHEMA};
use super::settings::StageSettings;
use crate::record::signed::{signature_id, Consumed, SignedRecord, SIGNED_SCHEMA};

pub(super) fn sign_loop(
    s: &StageSettings,
    mut jobs: mpsc::Receiver<Job>,
    out: mpsc::Sender<Outbound>,
    counts: &mut Counts,
) -> Result<()> {
    let sig_id = signature_id(&s.params.signature);
    let max_out = max_output_bytes(s);
    let signed_t: Arc<str> = Arc::from(s.signed_topic.as_str());
    let dead_t: Arc<str> = Arc::from(s.dead_letter_topic.as_str());
    while let Some(job) = jobs.blocking_recv() {
        let ob = match take(job, &dead_t, max_out, counts)? {
            Err(dead) => dead,
            Ok(Taken {
                inbound,
                page,
                signed,
                ..
            }) => {
                let inbound_ts = inbound.timestamp_ms;
                let source = Consumed {
                    topic: inbound.topic.to_string(),
                    partition: inbound.partition,
                    offset: inbound.offset,
                    timestamp_ms: inbound.timestamp_ms,
                };
                let mut rec = SignedRecord::new(&page, &signed, &sig_id, s.keep_text, source);
                let mut payload = serde_json::to_vec(&rec)?;
                if payload.len() > max_out && rec.text.is_some() {
                    // the decider's output then goes without the text, as the single
                    // process's does when the text does not fit
                    rec.text = None;
                    payload = serde_json::to_vec(&rec)?;
                }
                counts.signed += 1;
                Outbound {
                    inbound,
                    topic: Arc::clone(&signed_t),
                    payload,
                    headers: vec![(HEADER_SCHEMA, SIGNED_SCHEMA.to_string())],
                    label: "signed",
                    extra: Vec::new(),
                    decided: std::time::Instant::now(),
                    origin_ms: inbound_ts,
                }
            }
        };
        if out.blocking_send(ob).is_err() {
            // the producer stopped: its error is reported by the caller
            return Ok(());
        }
    }
    Ok(())
}
