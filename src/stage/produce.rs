//! The producer side of the stage: outputs in consumption order, each input offset stored
//! once its output is acknowledged, a dead letter instead of an output the broker refuses
//! as too large.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use futures::stream::{FuturesOrdered, StreamExt};
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tracing::{error, warn};

use super::changelog;
use super::flow::{
    observe, since_ms, Generation, Outbound, HEADER_DECISION, HEADER_REASON, HEADER_SCHEMA,
};
use super::kafka::{self, StageConsumer, StageContext};
use crate::record::{self, BadReason, BadRecord, DeadLetter, Source};
use crate::telemetry::{self as tm, Health};

/// A uniform sample of per-record latencies (reservoir of at most `CAP` values).
#[derive(Default)]
pub(super) struct Latencies {
    pub(super) seen: u64,
    sample: Vec<f32>,
    pub(super) max: f64,
    rng: u64,
}

/// Where a record's time went, each a sample (the stage's summary reports them).
pub(super) struct Hops {
    /// Consumed → output acknowledged.
    pub(super) record: Latencies,
    /// The input record's timestamp → consumed (the broker's share: producing, storing,
    /// fetching, and the time the record waited in its partition).
    pub(super) broker: Latencies,
    /// Consumed → decided (or signed): queueing, decoding, stripping, signing, deciding.
    pub(super) decide: Latencies,
    /// Consumed → a pool thread starts on it (part of decide).
    pub(super) queue: Latencies,
    /// The pool thread's work: decode, strip, sign (a decider: decode the signed record).
    pub(super) prepare: Latencies,
    /// Prepared → decided or signed: waiting for the records before it (records are decided
    /// in order), then deciding (or writing the signed record).
    pub(super) in_order: Latencies,
    /// Decided → acknowledged (the output and its changelog records).
    pub(super) produce: Latencies,
    /// The input record's timestamp (a signed record carries its page's) → acknowledged.
    pub(super) end_to_end: Latencies,
}

impl Hops {
    fn new() -> Hops {
        Hops {
            record: Latencies::new(1),
            broker: Latencies::new(2),
            decide: Latencies::new(3),
            queue: Latencies::new(6),
            prepare: Latencies::new(7),
            in_order: Latencies::new(8),
            produce: Latencies::new(4),
            end_to_end: Latencies::new(5),
        }
    }

    /// Each hop's name and sample.
    pub(super) fn all(&mut self) -> [(&'static str, &mut Latencies); 8] {
        [
            ("record", &mut self.record),
            ("broker", &mut self.broker),
            ("decide", &mut self.decide),
            ("queue", &mut self.queue),
            ("prepare", &mut self.prepare),
            ("in_order", &mut self.in_order),
            ("produce", &mut self.produce),
            ("end_to_end", &mut self.end_to_end),
        ]
    }
}

impl Latencies {
    const CAP: usize = 100_000;

    fn new(seed: u64) -> Latencies {
        Latencies {
            rng: 0x9E37_79B9_7F4A_7C15 ^ seed,
            ..Default::default()
        }
    }

    fn add(&mut self, secs: f64) {
        self.seen += 1;
        self.max = self.max.max(secs);
        if self.sample.len() < Self::CAP {
            self.sample.push(secs as f32);
            return;
        }
        // xorshift: a cheap uniform index for reservoir sampling
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let j = (self.rng % self.seen) as usize;
        if j < Self::CAP {
            self.sample[j] = secs as f32;
        }
    }

    pub(super) fn quantile_ms(&mut self, q: f64) -> f64 {
        if self.sample.is_empty() {
            return 0.0;
        }
        self.sample.sort_by(f32::total_cmp);
        let i = ((self.sample.len() - 1) as f64 * q).round() as usize;
        self.sample[i] as f64 * 1000.0
    }
}

/// Input positions: (topic, partition) → the next offset to read.
pub(super) type Positions = HashMap<(Arc<str>, i32), i64>;

/// What the commits so far covered: the input positions, and the changelog offset after the
/// last changelog record they held.
#[derive(Default)]
pub(super) struct Committed {
    pub(super) inputs: Positions,
    pub(super) changelog_next: Option<i64>,
}

/// Exactly-once: the producer's transactions. Outputs go into the open transaction; every
/// `interval` the stage stops sending, waits for the transaction's records to be
/// acknowledged, adds the input positions after them to it and commits. The positions of
/// each commit are published to `committed` (the decider clears its marks with them).
pub(super) struct Transactions {
    /// The producer's `transactional.id` (for messages).
    pub(super) id: String,
    /// How long a transaction collects outputs.
    pub(super) interval: Duration,
    /// The positions every commit so far covered.
    pub(super) committed: Arc<Mutex<Committed>>,
    /// Counts the records committed, for a revocation waiting for them.
    pub(super) sync: Arc<super::kafka::TxnSync>,
}

/// How long one attempt at a transaction call may take (a retriable failure is tried again).
const TRANSACTION_CALL: Duration = Duration::from_secs(10);

/// Produces the outputs in order and stores each input offset once its output is
/// acknowledged (exactly-once: commits them in the outputs' transaction). Returns the
/// number of acknowledged outputs.
#[allow(clippy::too_many_arguments)]
pub(super) async fn produce_loop(
    producer: Option<FutureProducer<StageContext>>,
    dead_topic: Arc<str>,
    consumer: Arc<StageConsumer>,
    mut rx: mpsc::Receiver<Outbound>,
    max_pending: usize,
    health: Arc<Health>,
    dry_run: bool,
    txn: Option<Transactions>,
) -> (Result<u64>, Hops) {
    let mut lat = Hops::new();
    let sync = txn.as_ref().map(|t| Arc::clone(&t.sync));
    let r = produce_inner(
        producer,
        dead_topic,
        consumer,
        &mut rx,
        max_pending,
        health,
        dry_run,
        txn,
        &mut lat,
    )
    .await;
    if let Some(s) = sync {
        s.stop();
    }
    (r, lat)
}

/// Runs a transaction call on this thread (the runtime moves its other tasks away), again
/// while it fails in a way the client calls retriable; each attempt under the watchdog's
/// deadline ([`super::watchdog`]).
pub(super) fn transaction_call(
    what: &str,
    txn: &Transactions,
    mut call: impl FnMut() -> Result<(), KafkaError>,
) -> Result<()> {
    tokio::task::block_in_place(|| loop {
        let attempt = {
            let _watch = super::watchdog::watch(what, &txn.id);
            call()
        };
        match attempt {
            Ok(()) => return Ok(()),
            Err(KafkaError::Transaction(e)) if e.is_retriable() => {
                warn!(error = %e, transactional_id = %txn.id, "{what}: trying again");
            }
            Err(e) => return Err(transaction_error(what, txn, e)),
        }
    })
}

/// The error that stops the stage when a transaction cannot go on.
fn transaction_error(what: &str, txn: &Transactions, e: KafkaError) -> anyhow::Error {
    let fenced = match &e {
        KafkaError::Transaction(t) => {
            t.is_fatal()
                && matches!(
                    t.code(),
                    RDKafkaErrorCode::ProducerFenced
                        | RDKafkaErrorCode::InvalidProducerEpoch
                        | RDKafkaErrorCode::Fenced
                )
        }
        _ => false,
    };
    if fenced {
        anyhow!(
            "fenced: another process started with transactional id {} (a newer instance of \
             this index's stage, or its standby taking over); this one writes nothing more \
             and stops ({what}: {e})",
            txn.id
        )
    } else {
        anyhow!(
            "{what} failed: {e}; the open transaction is aborted by the broker and its records \
             are decided again after a restart (transactional id {})",
            txn.id
        )
    }
}

#[allow(clippy::too_many_arguments)]
async fn produce_inner(
    producer: Option<FutureProducer<StageContext>>,
    dead_topic: Arc<str>,
    consumer: Arc<StageConsumer>,
    rx: &mut mpsc::Receiver<Outbound>,
    max_pending: usize,
    health: Arc<Health>,
    dry_run: bool,
    txn: Option<Transactions>,
    lat: &mut Hops,
) -> Result<u64> {
    // exactly-once: a transaction is open from the first record after a commit; when its
    // interval is over, nothing more is sent until its records are acknowledged and it is
    // committed with the input positions after them
    let txn = txn.filter(|_| producer.is_some() && !dry_run);
    let mut in_txn: Option<Instant> = None;
    let mut closing = false;
    let mut positions: Positions = HashMap::new();
    // the changelog offset after the open transaction's last changelog record
    let mut changelog_next: Option<i64> = None;
    let mut txn_records = 0u64;
    type Ack = (
        Result<(), KafkaError>,
        Outbound,
        Instant,             // sent
        Result<Option<i64>>, // the records produced with it (changelog): the last offset
    );
    let mut pending: FuturesOrdered<
        std::pin::Pin<Box<dyn std::future::Future<Output = Ack> + Send>>,
    > = FuturesOrdered::new();
    let mut open = true;
    let mut acked = 0u64;
    // the group generation the open transaction's records were consumed in, and a record of
    // a later one, held until the transaction is committed
    let mut txn_group: Option<Generation> = None;
    let mut held: Option<Outbound> = None;
    loop {
        if let (Some(t), Some(p), true) = (&txn, &producer, pending.is_empty()) {
            if in_txn.is_some() && (closing || !open) {
                let group = txn_group.take();
                commit(t, p, group.as_ref(), &mut positions, changelog_next.take())
                    .await
                    .inspect_err(|e| {
                        error!(error = %e, "the transaction was not committed: stopping");
                        health.fail(&format!("{e:#}"));
                    })?;
                t.sync.committed(std::mem::take(&mut txn_records));
                in_txn = None;
                closing = false;
            }
        }
        if let (Some(t), Some(_)) = (&txn, in_txn) {
            // a revocation waits for this transaction: commit it as soon as it may be
            if t.sync.revoking.load(std::sync::atomic::Ordering::Acquire) {
                closing = true;
            }
        }
        let mut incoming = if in_txn.is_none() { held.take() } else { None };
        if incoming.is_none() {
            if !open && pending.is_empty() {
                break;
            }
            let deadline = match (&txn, in_txn) {
                (Some(t), Some(started)) if !closing => Some(started + t.interval),
                _ => None,
            };
            tokio::select! {
                biased;
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now).into()), if deadline.is_some() => {
                    closing = true;
                }
                Some((res, ob, sent, extra)) = pending.next(), if !pending.is_empty() => {
                    let last_changelog = match extra {
                        Ok(last) => last,
                        Err(e) => {
                            error!(error = %e, source_topic = %ob.inbound.topic,
                                partition = ob.inbound.partition, offset = ob.inbound.offset,
                                "a changelog record was not acknowledged: stopping without committing it");
                            health.fail(&format!("{e:#}"));
                            return Err(e);
                        }
                    };
                    let (res, ob) = match res {
                        Err(e) if too_large(&e) && ob.label != "output_too_large" => {
                            warn!(error = %e, topic = %ob.topic, bytes = ob.payload.len(),
                                source_topic = %ob.inbound.topic, partition = ob.inbound.partition,
                                offset = ob.inbound.offset, "output refused as too large: writing a dead letter instead");
                            let fb = fallback(ob, dead_topic.clone(), &e);
                            let res = match &producer {
                                None => Ok(()),
                                Some(p) => match send(p, &fb).await {
                                    Err(e) => Err(e),
                                    Ok(f) => match f.await {
                                        Ok(Ok(_)) => Ok(()),
                                        Ok(Err((e, _))) => Err(e),
                                        Err(_) => Err(KafkaError::Canceled),
                                    },
                                },
                            };
                            (res, fb)
                        }
                        other => (other, ob),
                    };
                    if let Err(e) = res {
                        error!(error = %e, topic = %ob.topic, source_topic = %ob.inbound.topic,
                            partition = ob.inbound.partition, offset = ob.inbound.offset,
                            "an output was not acknowledged: stopping without committing it");
                        metrics::counter!(tm::KAFKA_ERRORS, "code" => kafka::code(&e)).increment(1);
                        let e = anyhow!("cannot produce to {}: {e}", ob.topic);
                        health.fail(&format!("{e:#}"));
                        return Err(e);
                    }
                    observe("produce", sent.elapsed());
                    let took = ob.inbound.consumed.elapsed().as_secs_f64();
                    metrics::histogram!(tm::RECORD_SECONDS).record(took);
                    lat.record.add(took);
                    let hop = |name: &'static str, l: &mut Latencies, d: Option<f64>| {
                        if let Some(d) = d {
                            l.add(d);
                            metrics::histogram!(tm::HOP_SECONDS, "hop" => name).record(d);
                        }
                    };
                    let i = &ob.inbound;
                    hop("broker", &mut lat.broker, i.broker_wait.map(|d| d.as_secs_f64()));
                    hop("decide", &mut lat.decide, Some(ob.decided.saturating_duration_since(i.consumed).as_secs_f64()));
                    if let Some((started, done)) = i.prepared {
                        let d = |a: std::time::Instant, b: std::time::Instant| Some(b.saturating_duration_since(a).as_secs_f64());
                        hop("queue", &mut lat.queue, d(i.consumed, started));
                        hop("prepare", &mut lat.prepare, d(started, done));
                        hop("in_order", &mut lat.in_order, d(done, ob.decided));
                    }
                    hop("produce", &mut lat.produce, Some(ob.decided.elapsed().as_secs_f64()));
                    hop("end_to_end", &mut lat.end_to_end, since_ms(ob.origin_ms).map(|d| d.as_secs_f64()));
                    let label = if ob.label == "output_too_large" { "dead_letter" } else { ob.label };
                    metrics::counter!(tm::RECORDS_OUT, "topic" => ob.topic.to_string(), "decision" => label)
                        .increment(1);
                    health.progressed();
                    if !dry_run {
                        acked += 1;
                        let i = &ob.inbound;
                        if txn.is_some() {
                            // committed with the transaction
                            positions.insert((Arc::clone(&i.topic), i.partition), i.offset + 1);
                            if let Some(o) = last_changelog {
                                changelog_next = Some(changelog_next.map_or(o + 1, |n| n.max(o + 1)));
                            }
                            txn_records += 1;
                        } else if let Err(e) = consumer.store_offset(&i.topic, i.partition, i.offset) {
                            // the partition was revoked: its new owner reprocesses the record
                            tracing::debug!(error = %e, topic = %i.topic, partition = i.partition,
                                offset = i.offset, "offset not stored");
                        }
                    }
                }
                o = rx.recv(), if open && !closing && held.is_none() && pending.len() < max_pending => match o {
                    None => open = false,
                    Some(ob) => incoming = Some(ob),
                },
            }
        }
        let Some(ob) = incoming.take() else {
            continue;
        };
        let sent = Instant::now();
        if let (Some(t), Some(p)) = (&txn, &producer) {
            // a transaction holds the records of one group generation: its offsets are
            // committed with that generation, which the broker refuses once the group
            // has moved on (a revoked partition's records are then decided again)
            let generation = ob.inbound.generation.clone();
            if in_txn.is_some()
                && txn_group.as_ref().map(|g| g.epoch) != generation.as_ref().map(|g| g.epoch)
            {
                held = Some(ob);
                closing = true;
                continue;
            }
            if in_txn.is_none() {
                transaction_call("begin a transaction", t, || p.begin_transaction())
                    .inspect_err(|e| health.fail(&format!("{e:#}")))?;
                in_txn = Some(sent);
                txn_group = generation;
            }
        }
        match &producer {
            None => pending.push_back(Box::pin(async move { (Ok(()), ob, sent, Ok(None)) })),
            Some(p) => {
                // the changelog records are sent first, in decision order on
                // their one partition; the input offset is stored only when they
                // and the output are acknowledged
                // (one that cannot be sent stops the stage before the output is
                // sent and before anything after it: no gap in the changelog)
                let mut acks: Vec<changelog::Ack> = Vec::with_capacity(ob.extra.len());
                for x in &ob.extra {
                    match changelog::send(p, &x.topic, &x.key, x.payload.as_deref()).await {
                        Ok(f) => acks.push(f),
                        Err(e) => {
                            error!(error = %e, source_topic = %ob.inbound.topic,
                                    partition = ob.inbound.partition, offset = ob.inbound.offset,
                                    "a changelog record cannot be sent: stopping without committing it");
                            health.fail(&format!("{e:#}"));
                            return Err(e);
                        }
                    }
                }
                let extra: Result<Vec<changelog::Ack>> = Ok(acks);
                let fut = send(p, &ob).await;
                pending.push_back(Box::pin(async move {
                    let extra = match extra {
                        Ok(acks) => {
                            let mut r: Result<Option<i64>> = Ok(None);
                            for a in acks {
                                match (a.await, &mut r) {
                                    (Ok(o), Ok(last)) => *last = Some(last.map_or(o, |l| l.max(o))),
                                    (Err(e), Ok(_)) => r = Err(e),
                                    (_, Err(_)) => {}
                                }
                            }
                            r
                        }
                        Err(e) => Err(e),
                    };
                    let res = match fut {
                        Err(e) => Err(e),
                        Ok(f) => match f.await {
                            Ok(Ok(_)) => Ok(()),
                            Ok(Err((e, _))) => Err(e),
                            Err(_) => Err(KafkaError::Canceled),
                        },
                    };
                    (res, ob, sent, extra)
                }));
            }
        }
    }
    Ok(acked)
}

/// Commits the open transaction with the input positions after its records, and publishes
/// them.
async fn commit(
    t: &Transactions,
    p: &FutureProducer<StageContext>,
    group: Option<&Generation>,
    positions: &mut Positions,
    changelog_next: Option<i64>,
) -> Result<()> {
    let started = Instant::now();
    if !positions.is_empty() {
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), next) in positions.iter() {
            tpl.add_partition_offset(topic, *partition, Offset::Offset(*next))
                .map_err(|e| anyhow!("offset {next} of {topic}/{partition}: {e}"))?;
        }
        let group = group
            .and_then(|g| g.metadata.as_deref())
            .ok_or_else(|| anyhow!("the consumer has no group metadata to commit offsets with"))?;
        transaction_call("add the input offsets to the transaction", t, || {
            p.send_offsets_to_transaction(&tpl, group, TRANSACTION_CALL)
        })?;
    }
    transaction_call("commit the transaction", t, || {
        p.commit_transaction(TRANSACTION_CALL)
    })?;
    metrics::counter!(tm::TRANSACTIONS).increment(1);
    metrics::histogram!(tm::TRANSACTION_COMMIT_SECONDS).record(started.elapsed().as_secs_f64());
    let mut c = t.committed.lock().unwrap_or_else(|e| e.into_inner());
    for (k, v) in positions.drain() {
        c.inputs.insert(k, v);
    }
    if changelog_next.is_some() {
        c.changelog_next = changelog_next;
    }
    Ok(())
}

fn too_large(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidRecord)
    )
}

/// The dead letter that replaces an output the broker refused as too large.
fn fallback(ob: Outbound, dead_topic: Arc<str>, e: &KafkaError) -> Outbound {
    let i = &ob.inbound;
    let bad = BadRecord {
        reason: BadReason::OutputTooLarge,
        detail: format!(
            "the {} output ({} bytes to {}) was refused: {e}",
            ob.label,
            ob.payload.len(),
            ob.topic
        ),
    };
    let src = Source::Kafka {
        topic: i.topic.to_string(),
        partition: i.partition,
        offset: i.offset,
    };
    let mut dl = DeadLetter::new(&bad, src, &i.head);
    dl.original_bytes = Some(i.len as u64);
    if i.head.len() < i.len {
        dl.original_truncated = Some(true);
    }
    metrics::counter!(tm::DEAD_LETTERS, "reason" => bad.reason.as_str()).increment(1);
    Outbound {
        topic: dead_topic,
        payload: serde_json::to_vec(&dl).unwrap_or_default(),
        headers: vec![
            (HEADER_DECISION, "dead_letter".into()),
            (HEADER_REASON, bad.reason.as_str().into()),
            (HEADER_SCHEMA, record::DEAD_LETTER_SCHEMA.into()),
        ],
        label: "output_too_large",
        extra: Vec::new(),
        decided: ob.decided,
        origin_ms: ob.origin_ms,
        inbound: ob.inbound,
    }
}

async fn send(
    producer: &FutureProducer<StageContext>,
    ob: &Outbound,
) -> Result<rdkafka::producer::DeliveryFuture, KafkaError> {
    let mut headers = OwnedHeaders::new_with_capacity(ob.headers.len());
    for (k, v) in &ob.headers {
        headers = headers.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    let mut rec: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&ob.topic)
        .payload(&ob.payload[..])
        .headers(headers);
    if let Some(k) = &ob.inbound.key {
        rec = rec.key(&k[..]);
    }
    loop {
        match producer.send_result(rec) {
            Ok(f) => return Ok(f),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                rec = r;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err((e, _)) => return Err(e),
        }
    }
}
