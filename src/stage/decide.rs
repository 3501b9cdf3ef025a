//! The decider thread of the stage: one signed page at a time, in consumption order,
//! against the index; each becomes an [`Outbound`] record for the producer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::sync::mpsc;
use tracing::warn;

use super::commit::Committed;
use super::flow::{
    observe, position_bytes, Extra, Inbound, Job, Outbound, PrepOutput, HEADER_CANONICAL,
    HEADER_DECISION, HEADER_ID, HEADER_REASON, HEADER_SCHEMA,
};
use super::settings::StageSettings;
use crate::dedup::{Deduplicator, PageRef, WAL_BATCH};
use crate::index::{DecisionKind, Index};
use crate::prepare::Prepared;
use crate::record::now_secs;
use crate::record::{self, changelog, BadReason, BadRecord, DeadLetter, Source};
use crate::telemetry as tm;

/// What the decider thread hands back: the index, its counts and how it ended.
pub(super) type Decided = (Option<Deduplicator>, Counts, Result<()>);

/// What the decider decided, for the summary.
#[derive(Default)]
pub(super) struct Counts {
    pub(super) signed: u64,
    pub(super) unique: u64,
    pub(super) duplicate: u64,
    pub(super) skipped: u64,
    pub(super) dead_letter: u64,
    pub(super) repeated: u64,
    pub(super) expired: u64,
}

/// The largest value the producer may send, from `message.max.bytes` (default 1,000,000),
/// less room for the key and headers.
pub(super) fn max_output_bytes(s: &StageSettings) -> usize {
    let limit = s
        .properties
        .get("message.max.bytes")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1_000_000);
    limit.saturating_sub(64 * 1024).max(16 * 1024)
}

/// A job's page, prepared on the pool.
pub(super) struct Taken {
    pub(super) inbound: Inbound,
    pub(super) page: crate::record::ValidPage,
    pub(super) signed: crate::signature::Signed,
    /// The page has its text.
    pub(super) has_text: bool,
    /// The input record's timestamp, ms.
    pub(super) origin_ms: Option<i64>,
}

/// The next job's page once the pool prepared it (the times observed), or the dead letter
/// of a record that has none.
pub(super) fn take(
    job: Job,
    dead_t: &Arc<str>,
    max_out: usize,
    counts: &mut Counts,
) -> Result<Result<Taken, Outbound>> {
    let PrepOutput {
        payload,
        prepared,
        times,
        has_text,
        origin_ms,
        ran,
    } = job
        .prepared
        .blocking_recv()
        .map_err(|_| anyhow!("a signing task was lost"))?;
    observe("decode", times.decode);
    let mut inbound = job.inbound;
    inbound.prepared = Some(ran);
    Ok(match page_or_bad(prepared, &payload) {
        Err(bad) => {
            counts.dead_letter += 1;
            Err(dead_letter(inbound, &bad, &payload, dead_t, max_out))
        }
        Ok(b) => {
            let (page, signed) = *b;
            observe("strip", times.strip);
            observe("sign", times.sign);
            Ok(Taken {
                inbound,
                page,
                signed,
                has_text,
                origin_ms,
            })
        }
    })
}

/// The page of a prepared record, or why there is none.
fn page_or_bad(
    prepared: Prepared,
    payload: &[u8],
) -> Result<Box<(crate::record::ValidPage, crate::signature::Signed)>, BadRecord> {
    match prepared {
        Prepared::Blank => Err(BadRecord {
            reason: BadReason::EmptyRecord,
            detail: if payload.is_empty() {
                "the record has no value".into()
            } else {
                "the record value is only whitespace".into()
            },
        }),
        Prepared::Bad(b) => Err(b),
        Prepared::Page(p) => Ok(p),
    }
}

/// The dead letter of a consumed record that cannot be processed.
pub(super) fn dead_letter(
    inbound: Inbound,
    bad: &BadRecord,
    payload: &[u8],
    dead_t: &Arc<str>,
    max_out: usize,
) -> Outbound {
    metrics::counter!(tm::DEAD_LETTERS, "reason" => bad.reason.as_str()).increment(1);
    let src = Source::Kafka {
        topic: inbound.topic.to_string(),
        partition: inbound.partition,
        offset: inbound.offset,
    };
    let dl = DeadLetter::fitting(bad, src, payload, max_out);
    let origin_ms = inbound.timestamp_ms;
    Outbound {
        inbound,
        topic: Arc::clone(dead_t),
        payload: serde_json::to_vec(&dl).expect("serializable"),
        headers: vec![
            (HEADER_DECISION, "dead_letter".into()),
            (HEADER_REASON, bad.reason.as_str().into()),
            (HEADER_SCHEMA, record::DEAD_LETTER_SCHEMA.into()),
        ],
        label: "dead_letter",
        extra: Vec::new(),
        decided: Instant::now(),
        origin_ms,
    }
}

/// An upper bound of the bytes of a page's changelog record: its doc record holds the id
/// and URL, a duplicate's also its canonical page's (which passed the same bound), the
/// signatures (at most 5 bytes each in the Rice coding), the template sample, the short
/// blocks and the signatures left out as software text (at most 5 bytes each, Rice-coded
/// too, and the latter among the signatures); base64 adds a third, the JSON envelope and
/// the key a little.
fn changelog_bound(page: &crate::record::ValidPage, signed: &crate::signature::Signed) -> usize {
    let own = page.doc_id.len() + page.page.url.len();
    let record = 2 * own
        + 10 * signed.sigs.set_len()
        + 4 * signed.template.len()
        + 5 * signed.short.blocks.len()
        + 64;
    record * 4 / 3 + own + 256
}

/// What the decide task holds between records: its settings, the output topics, the marks
/// of exactly-once and the retention window.
struct Decider<'a> {
    s: &'a StageSettings,
    params_id: String,
    max_out: usize,
    unique_t: Arc<str>,
    dup_t: Arc<str>,
    dead_t: Arc<str>,
    changelog: Option<Arc<str>>,
    /// Exactly-once: the marks of the decisions no commit has covered yet, in decision order.
    marks: Option<VecDeque<(Arc<str>, i32, i64)>>,
    retention: Option<crate::dedup::Retention>,
}

pub(super) fn decide_loop(
    s: &StageSettings,
    dedup: &mut Deduplicator,
    mut jobs: mpsc::Receiver<Job>,
    out: mpsc::Sender<Outbound>,
    counts: &mut Counts,
    committed: Option<Arc<Mutex<Committed>>>,
) -> Result<()> {
    let mut dc = Decider {
        s,
        params_id: record::params_id(&s.params),
        max_out: max_output_bytes(s),
        unique_t: Arc::from(s.unique_topic.as_str()),
        dup_t: Arc::from(s.duplicate_topic.as_str()),
        dead_t: Arc::from(s.dead_letter_topic.as_str()),
        changelog: s.changelog_topic.as_deref().map(Arc::from),
        marks: committed.as_ref().map(|_| VecDeque::new()),
        retention: crate::dedup::Retention::new(s.retention, s.max_pages),
    };
    // exactly-once: the changelog offset after the last commit, as recorded in the index
    let mut changelog_next: Option<i64> = None;
    dedup.index_mut().set_journal(dc.changelog.is_some());
    // the index as opened (or restored) is shown before the first record comes
    publish_index_stats(dedup.index());
    let mut last_stats = Instant::now();
    // the records waiting in the queue and already signed (at most WAL_BATCH) are decided
    // one after the other, the index's log of their decisions is handed to the operating
    // system once, and only then are they passed on to be produced: an offset is stored
    // after its record's decision is in the log's file, so a decision lost with the process
    // is made again on redelivery
    let mut ready: Vec<Outbound> = Vec::with_capacity(WAL_BATCH);
    let mut next = jobs.blocking_recv();
    while let Some(job) = next {
        // the records decided already are not held while this one is still being signed
        if !ready.is_empty()
            && job.prepared.is_empty()
            && !publish(dedup.index(), &mut ready, &out)?
        {
            return Ok(());
        }
        let mut ob = match take(job, &dc.dead_t, dc.max_out, counts)? {
            Err(dead) => dead,
            Ok(taken) => dc.decide_one(dedup, taken, counts)?,
        };
        if let Some(r) = dc.retention.as_mut().filter(|r| r.due()) {
            // nor through a sweep
            if !publish(dedup.index(), &mut ready, &out)? {
                return Ok(());
            }
            let n = r.sweep(dedup.index_mut())?;
            counts.expired += n;
            metrics::counter!(tm::INDEX_EXPIRED).increment(n);
        }
        // the index mutations of this record (and of a sweep) go to the changelog with it:
        // its offset is stored once all of them are acknowledged
        if let Some(topic) = &dc.changelog {
            for m in dedup.index_mut().take_journal() {
                let (key, value) = changelog::encode(&m, &dc.params_id);
                ob.extra.push(Extra {
                    topic: Arc::clone(topic),
                    key,
                    payload: value,
                });
            }
        }
        ready.push(ob);
        next = if ready.len() < WAL_BATCH {
            jobs.try_recv().ok()
        } else {
            None
        };
        if next.is_some() {
            continue;
        }
        if !publish(dedup.index(), &mut ready, &out)? {
            return Ok(());
        }
        // exact and cheap: kept current, where the families' figures wait for their interval
        metrics::gauge!(tm::INDEX_PAGES).set(dedup.index().pages() as f64);
        if let (Some(c), Some(marks)) = (&committed, dc.marks.as_mut()) {
            clear_committed(dedup.index_mut(), marks, c, &mut changelog_next)?;
        }
        if last_stats.elapsed() >= Duration::from_secs(15) {
            last_stats = Instant::now();
            publish_index_stats(dedup.index());
        }
        next = jobs.blocking_recv();
    }
    publish_index_stats(dedup.index());
    Ok(())
}

impl Decider<'_> {
    /// Decides one prepared page and makes its output record (a dead letter when its
    /// changelog record could not be written).
    fn decide_one(
        &mut self,
        dedup: &mut Deduplicator,
        taken: Taken,
        counts: &mut Counts,
    ) -> Result<Outbound> {
        let Taken {
            inbound,
            page,
            signed,
            has_text,
            origin_ms,
        } = taken;
        if self.changelog.is_some() && changelog_bound(&page, &signed) > self.max_out {
            // its changelog record could not be written: the stage would stop on it at
            // every start
            counts.dead_letter += 1;
            let bad = BadRecord {
                reason: BadReason::TooLarge,
                detail: format!(
                    "the page's index record (with its id, URL and {} signatures) would not \
                     fit the changelog's record limit of {} bytes",
                    signed.sigs.set_len(),
                    self.max_out
                ),
            };
            let head = inbound.head.clone();
            return Ok(dead_letter(
                inbound,
                &bad,
                &head,
                &self.dead_t,
                self.max_out,
            ));
        }
        let first_seen = page
            .fetched_at
            .or(inbound.timestamp_ms.map(|ms| ms.div_euclid(1000)))
            .unwrap_or_else(now_secs);
        // exactly-once: the decision's document is written with a mark of its input's
        // position, in one write; a crash before the commit leaves the mark, and the next
        // start removes what the decision stored
        let position = self.marks.as_mut().map(|marks| {
            marks.push_back((
                Arc::clone(&inbound.topic),
                inbound.partition,
                inbound.offset,
            ));
            position_bytes(&inbound.topic, inbound.partition, inbound.offset)
        });
        let t = Instant::now();
        let outcome = dedup
            .decide_marked(
                PageRef {
                    id: &page.doc_id,
                    url: &page.page.url,
                    first_seen,
                },
                &signed,
                position.as_deref(),
            )
            .context("the index cannot record a decision")?;
        observe("lookup", t.elapsed());
        if outcome.repeated {
            counts.repeated += 1;
            metrics::counter!(tm::REPEATED_IDS).increment(1);
        }
        if let Some(r) = &mut self.retention {
            r.decided(first_seen);
        }
        self.output(
            inbound, &page, &signed, &outcome, has_text, origin_ms, counts,
        )
    }

    /// The tagged record of a decision, for the topic of its kind (the text left out when
    /// the record would be too large with it).
    #[allow(clippy::too_many_arguments)]
    fn output(
        &self,
        inbound: Inbound,
        page: &crate::record::ValidPage,
        signed: &crate::signature::Signed,
        outcome: &crate::dedup::Outcome,
        has_text: bool,
        origin_ms: Option<i64>,
        counts: &mut Counts,
    ) -> Result<Outbound> {
        let (payload, label) = tagged_payload(
            self.s,
            &self.params_id,
            self.max_out,
            page,
            signed,
            &outcome.decision,
            outcome.repeated,
            has_text,
        )?;
        let topic = match outcome.decision.kind {
            DecisionKind::Unique => {
                counts.unique += 1;
                &self.unique_t
            }
            DecisionKind::Skipped => {
                counts.skipped += 1;
                &self.unique_t
            }
            DecisionKind::Duplicate => {
                counts.duplicate += 1;
                &self.dup_t
            }
        };
        let headers = tagged_headers(&page.doc_id, &outcome.decision, label);
        Ok(Outbound {
            inbound,
            topic: Arc::clone(topic),
            payload,
            headers,
            label,
            extra: Vec::new(),
            decided: Instant::now(),
            origin_ms,
        })
    }
}

/// The tagged record of a decision and its label (`unique`, `skipped` or `duplicate`): the
/// text left out when the record would be too large with it. A decider and the aggregator
/// of a sharded decider write the same bytes for the same decision.
#[allow(clippy::too_many_arguments)]
pub(super) fn tagged_payload(
    s: &StageSettings,
    params_id: &str,
    max_out: usize,
    page: &crate::record::ValidPage,
    signed: &crate::signature::Signed,
    decision: &crate::index::Decision,
    repeated: bool,
    has_text: bool,
) -> Result<(Vec<u8>, &'static str)> {
    // a signed record carries the text unless its signer left it out
    let keep_text = s.keep_text && has_text;
    let mut rec = record::tagged(
        page, signed, decision, repeated, &s.params, params_id, keep_text,
    );
    rec.dedup.repeated = None;
    let mut payload = serde_json::to_vec(&rec)?;
    if payload.len() > max_out && rec.text.is_some() {
        rec.text = None;
        payload = serde_json::to_vec(&rec)?;
    }
    let label = match decision.kind {
        DecisionKind::Unique => "unique",
        DecisionKind::Skipped => "skipped",
        DecisionKind::Duplicate => "duplicate",
    };
    Ok((payload, label))
}

/// The headers of a tagged record.
pub(super) fn tagged_headers(
    id: &str,
    decision: &crate::index::Decision,
    label: &'static str,
) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        (HEADER_DECISION, label.to_string()),
        (HEADER_SCHEMA, record::TAGGED_SCHEMA.to_string()),
        (HEADER_ID, id.to_string()),
    ];
    if let Some(c) = &decision.canonical_id {
        headers.push((HEADER_CANONICAL, c.clone()));
    }
    headers
}

/// Clears the marks of the decisions that commits have covered since the last call.
fn clear_committed(
    index: &mut Index,
    marks: &mut VecDeque<(Arc<str>, i32, i64)>,
    committed: &Mutex<Committed>,
    changelog_next: &mut Option<i64>,
) -> Result<()> {
    let mut done = Vec::new();
    let mut next = None;
    {
        let c = committed.lock().unwrap_or_else(|e| e.into_inner());
        // read with the positions: the changelog records of the decisions these cover are
        // all before it
        if c.changelog_next != *changelog_next {
            *changelog_next = c.changelog_next;
            next = c.changelog_next.map(|n| n as u64);
        }
        while let Some((topic, partition, offset)) = marks.front() {
            match c.inputs.get(&(Arc::clone(topic), *partition)) {
                Some(&next) if *offset < next => {
                    done.push(position_bytes(topic, *partition, *offset));
                    marks.pop_front();
                }
                _ => break,
            }
        }
    }
    index
        .clear_pending(done.iter().map(Vec::as_slice), next)
        .context("the index cannot record a decision")?;
    Ok(())
}

/// Writes out the index's log of the decisions in `ready`, then hands them on to be
/// produced, in order; false when the producer stopped (its error is reported by the
/// caller).
fn publish(index: &Index, ready: &mut Vec<Outbound>, out: &mpsc::Sender<Outbound>) -> Result<bool> {
    if ready.is_empty() {
        return Ok(true);
    }
    index
        .flush_wal()
        .context("the index cannot write its log")?;
    metrics::counter!(tm::INDEX_LOG_WRITES).increment(1);
    let now = Instant::now();
    for mut ob in ready.drain(..) {
        // the wait for the batch's log is the stage's own time
        ob.decided = now;
        if out.blocking_send(ob).is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The index's gauges: the families' estimates only, which cost a few property reads (the
/// lists' shape, which [`Index::stats`] also gives, is a pass over all their entries, and
/// stopped the decisions for half a second every interval at 1M pages).
fn publish_index_stats(index: &Index) {
    match index.family_stats() {
        Ok(families) => {
            let docs = families
                .iter()
                .find(|(f, _, _)| f == "docs")
                .map_or(0, |(_, k, _)| *k);
            metrics::gauge!(tm::INDEX_DOCUMENTS).set(docs as f64);
            metrics::gauge!(tm::INDEX_PAGES).set(index.pages() as f64);
            for (family, keys, bytes) in families {
                metrics::gauge!(tm::INDEX_KEYS, "family" => family.clone()).set(keys as f64);
                metrics::gauge!(tm::INDEX_BYTES, "family" => family).set(bytes as f64);
            }
        }
        Err(e) => warn!(error = %e, "cannot read index statistics"),
    }
}
