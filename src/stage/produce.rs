//! The produce task: outputs in consumption order, each input offset stored once its output
//! is acknowledged (exactly-once: committed in the outputs' transaction, [`super::commit`]),
//! a dead letter instead of an output the broker refuses as too large.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use futures::stream::{FuturesOrdered, StreamExt};
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use tokio::sync::mpsc;
use tracing::{error, warn};

use super::changelog;
use super::commit::{commit, transaction_call, Positions, Transactions};
use super::flow::{
    observe, since_ms, Generation, Outbound, HEADER_DECISION, HEADER_REASON, HEADER_SCHEMA,
};
use super::kafka::{self, StageConsumer, StageContext};
use super::restart::{self, DecideAgain};
use super::watchdog::TRANSACTION_CALL;
use crate::record::{self, BadReason, BadRecord, DeadLetter, Source};
use crate::telemetry::{self as tm, Health};

/// What the producer task hands back: the records produced and the latencies.
pub(super) type Produced = (Result<u64>, Hops);

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
    let mut task = ProduceTask {
        // exactly-once: a transaction is open from the first record after a commit; when its
        // interval is over, nothing more is sent until its records are acknowledged and it
        // is committed with the input positions after them
        txn: txn.filter(|_| producer.is_some() && !dry_run),
        producer,
        dead_topic,
        consumer,
        health,
        dry_run,
        open: OpenTxn::default(),
        pending: FuturesOrdered::new(),
        acked: 0,
    };
    let r = task.run(&mut rx, max_pending, &mut lat).await;
    if let Some(s) = sync {
        s.stop();
    }
    (r, lat)
}

/// An output on its way: the delivery result, the record, when it was sent, and the last
/// changelog offset of the records sent with it.
type Ack = (
    Result<(), KafkaError>,
    Outbound,
    Instant,
    Result<Option<i64>>,
);

/// The transaction open now (exactly-once).
#[derive(Default)]
struct OpenTxn {
    /// When it began; none when no transaction is open.
    began: Option<Instant>,
    /// Its interval is over (or a revocation waits): commit once its records are
    /// acknowledged, sending nothing more meanwhile.
    closing: bool,
    /// The input positions after its acknowledged records.
    positions: Positions,
    /// The changelog offset after its last changelog record.
    changelog_next: Option<i64>,
    records: u64,
    /// The group generation its records were consumed in.
    group: Option<Generation>,
}

struct ProduceTask {
    producer: Option<FutureProducer<StageContext>>,
    dead_topic: Arc<str>,
    consumer: Arc<StageConsumer>,
    health: Arc<Health>,
    dry_run: bool,
    txn: Option<Transactions>,
    open: OpenTxn,
    pending: FuturesOrdered<Pin<Box<dyn std::future::Future<Output = Ack> + Send>>>,
    acked: u64,
}

impl ProduceTask {
    /// A changelog record's failure: under exactly-once, on a broker fault, the open
    /// transaction cannot commit ([`restart`]).
    fn in_transaction(&self, e: anyhow::Error) -> anyhow::Error {
        let fault = e
            .chain()
            .filter_map(|c| c.downcast_ref::<KafkaError>())
            .any(restart::broker_fault);
        match self.txn.is_some() && fault {
            true => anyhow::Error::new(DecideAgain(format!("{e:#}"))),
            false => e,
        }
    }

    async fn run(
        &mut self,
        rx: &mut mpsc::Receiver<Outbound>,
        max_pending: usize,
        lat: &mut Hops,
    ) -> Result<u64> {
        let mut open = true;
        // a record of a later group generation than the open transaction's, held until
        // that transaction is committed
        let mut held: Option<Outbound> = None;
        loop {
            self.commit_when_due(open).await?;
            let mut incoming = if self.open.began.is_none() {
                held.take()
            } else {
                None
            };
            if incoming.is_none() {
                if !open && self.pending.is_empty() {
                    break;
                }
                let deadline = match (&self.txn, self.open.began) {
                    (Some(t), Some(began)) if !self.open.closing => Some(began + t.interval),
                    _ => None,
                };
                let receive = open
                    && !self.open.closing
                    && held.is_none()
                    && self.pending.len() < max_pending;
                tokio::select! {
                    biased;
                    _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now).into()), if deadline.is_some() => {
                        self.open.closing = true;
                    }
                    Some(ack) = self.pending.next(), if !self.pending.is_empty() => {
                        self.acknowledged(ack, lat).await?;
                    }
                    o = rx.recv(), if receive => match o {
                        None => open = false,
                        Some(ob) => incoming = Some(ob),
                    },
                }
            }
            if let Some(ob) = incoming {
                held = self.send(ob).await?;
            }
        }
        Ok(self.acked)
    }

    /// Exactly-once: commits the open transaction once it is closing (or the input ended,
    /// `open` false) and all its records are acknowledged; a revocation waiting for it
    /// closes it.
    async fn commit_when_due(&mut self, open: bool) -> Result<()> {
        let (Some(t), Some(p)) = (&self.txn, &self.producer) else {
            return Ok(());
        };
        if self.open.began.is_none() {
            return Ok(());
        }
        if self.pending.is_empty() && (self.open.closing || !open) {
            let o = &mut self.open;
            let group = o.group.take();
            commit(
                t,
                p,
                group.as_ref(),
                &mut o.positions,
                o.changelog_next.take(),
            )
            .await
            .inspect_err(|e| {
                error!(error = %e, "the transaction was not committed: stopping");
                self.health.fail(&format!("{e:#}"));
            })?;
            t.sync.committed(std::mem::take(&mut o.records));
            o.began = None;
            o.closing = false;
        } else if t.sync.revoking.load(Ordering::Acquire) {
            // a revocation waits for this transaction: commit it as soon as it may be
            self.open.closing = true;
        }
        Ok(())
    }

    /// An output's delivery: its latencies observed and its input position stored (or, in
    /// a transaction, kept for the commit). An output the broker refused as too large is
    /// replaced by a dead letter; any other failure stops the stage.
    async fn acknowledged(&mut self, (res, ob, sent, extra): Ack, lat: &mut Hops) -> Result<()> {
        let last_changelog = match extra {
            Ok(last) => last,
            Err(e) => {
                error!(error = %format!("{e:#}"), source_topic = %ob.inbound.topic,
                    partition = ob.inbound.partition, offset = ob.inbound.offset,
                    "a changelog record was not acknowledged: stopping without committing it");
                self.health.fail(&format!("{e:#}"));
                return Err(self.in_transaction(e));
            }
        };
        let (res, ob) = match res {
            Err(e) if too_large(&e) && ob.label != "output_too_large" => {
                warn!(error = %e, topic = %ob.topic, bytes = ob.payload.len(),
                    source_topic = %ob.inbound.topic, partition = ob.inbound.partition,
                    offset = ob.inbound.offset, "output refused as too large: writing a dead letter instead");
                let fb = fallback(ob, self.dead_topic.clone(), &e);
                let res = match &self.producer {
                    None => Ok(()),
                    Some(p) => match send(p, &fb).await {
                        Err(e) => Err(e),
                        Ok(f) => delivered(f.await),
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
            let fault = self.txn.is_some() && restart::broker_fault(&e);
            let e = format!("cannot produce to {}: {e}", ob.topic);
            self.health.fail(&e);
            return Err(match fault {
                true => anyhow::Error::new(DecideAgain(e)),
                false => anyhow!(e),
            });
        }
        observe("produce", sent.elapsed());
        record_latencies(&ob, lat);
        let label = if ob.label == "output_too_large" {
            "dead_letter"
        } else {
            ob.label
        };
        metrics::counter!(tm::RECORDS_OUT, "topic" => ob.topic.to_string(), "decision" => label)
            .increment(1);
        self.health.progressed();
        if self.dry_run {
            return Ok(());
        }
        self.acked += 1;
        let i = &ob.inbound;
        if self.txn.is_some() {
            // committed with the transaction
            let o = &mut self.open;
            o.positions
                .insert((Arc::clone(&i.topic), i.partition), i.offset + 1);
            if let Some(c) = last_changelog {
                o.changelog_next = Some(o.changelog_next.map_or(c + 1, |n| n.max(c + 1)));
            }
            o.records += 1;
        } else if let Err(e) = self.consumer.store_offset(&i.topic, i.partition, i.offset) {
            // the partition was revoked: its new owner reprocesses the record
            tracing::debug!(error = %e, topic = %i.topic, partition = i.partition,
                offset = i.offset, "offset not stored");
        }
        Ok(())
    }

    /// Sends an output and its changelog records, in a transaction when exactly-once (one
    /// is begun if none is open). `Some`: the record belongs to a later group generation than
    /// the open transaction, which is closed first; it comes back to be sent after the
    /// commit.
    async fn send(&mut self, ob: Outbound) -> Result<Option<Outbound>> {
        let sent = Instant::now();
        if let (Some(t), Some(p)) = (&self.txn, &self.producer) {
            // a transaction holds the records of one group generation: its offsets are
            // committed with that generation, which the broker refuses once the group
            // has moved on (a revoked partition's records are then decided again)
            let generation = ob.inbound.generation.clone();
            let o = &mut self.open;
            if o.began.is_some()
                && o.group.as_ref().map(|g| g.epoch) != generation.as_ref().map(|g| g.epoch)
            {
                o.closing = true;
                return Ok(Some(ob));
            }
            if o.began.is_none() {
                transaction_call("begin a transaction", t, TRANSACTION_CALL, |_| {
                    p.begin_transaction()
                })
                .inspect_err(|e| self.health.fail(&format!("{e:#}")))?;
                o.began = Some(sent);
                o.group = generation;
            }
        }
        let Some(p) = &self.producer else {
            self.pending
                .push_back(Box::pin(async move { (Ok(()), ob, sent, Ok(None)) }));
            return Ok(None);
        };
        // the changelog records are sent first, in decision order on their one partition;
        // the input offset is stored only when they and the output are acknowledged (one
        // that cannot be sent stops the stage before the output is sent and before anything
        // after it: no gap in the changelog)
        let mut acks: Vec<changelog::Ack> = Vec::with_capacity(ob.extra.len());
        for x in &ob.extra {
            match changelog::send(p, &x.topic, &x.key, x.payload.as_deref()).await {
                Ok(f) => acks.push(f),
                Err(e) => {
                    error!(error = %format!("{e:#}"), source_topic = %ob.inbound.topic,
                        partition = ob.inbound.partition, offset = ob.inbound.offset,
                        "a changelog record cannot be sent: stopping without committing it");
                    self.health.fail(&format!("{e:#}"));
                    return Err(self.in_transaction(e));
                }
            }
        }
        let fut = send(p, &ob).await;
        self.pending.push_back(Box::pin(async move {
            let mut extra: Result<Option<i64>> = Ok(None);
            for a in acks {
                match (a.await, &mut extra) {
                    (Ok(o), Ok(last)) => *last = Some(last.map_or(o, |l| l.max(o))),
                    (Err(e), Ok(_)) => extra = Err(e),
                    (_, Err(_)) => {}
                }
            }
            let res = match fut {
                Err(e) => Err(e),
                Ok(f) => delivered(f.await),
            };
            (res, ob, sent, extra)
        }));
        Ok(None)
    }
}

/// A delivery future's outcome as a result.
fn delivered(
    r: Result<
        rdkafka::producer::future_producer::OwnedDeliveryResult,
        futures::channel::oneshot::Canceled,
    >,
) -> Result<(), KafkaError> {
    match r {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((e, _))) => Err(e),
        Err(_) => Err(KafkaError::Canceled),
    }
}

/// Records where an acknowledged output's time went: the summary's samples and the hop
/// histograms.
fn record_latencies(ob: &Outbound, lat: &mut Hops) {
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
    let span = |a: Instant, b: Instant| Some(b.saturating_duration_since(a).as_secs_f64());
    hop(
        "broker",
        &mut lat.broker,
        i.broker_wait.map(|d| d.as_secs_f64()),
    );
    hop("decide", &mut lat.decide, span(i.consumed, ob.decided));
    if let Some((started, done)) = i.prepared {
        hop("queue", &mut lat.queue, span(i.consumed, started));
        hop("prepare", &mut lat.prepare, span(started, done));
        hop("in_order", &mut lat.in_order, span(done, ob.decided));
    }
    hop(
        "produce",
        &mut lat.produce,
        Some(ob.decided.elapsed().as_secs_f64()),
    );
    hop(
        "end_to_end",
        &mut lat.end_to_end,
        since_ms(ob.origin_ms).map(|d| d.as_secs_f64()),
    );
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
