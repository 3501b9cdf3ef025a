//! The Kafka stage: `neardup run` (a consumer group member) and `neardup replay` (a bounded
//! pass over a historical topic). It only drives the [`Deduplicator`]; nothing here decides.
//!
//! # Flow and guarantees
//!
//! ```text
//! consumer ──► sign pool (rayon, `jobs` threads) ──► decider thread ──► producer ──► offset store
//!   (recv)        decode, strip, sign             one at a time,      acks=all,     after the ack,
//!                                                 input order         idempotent    in order
//! ```
//!
//! - **Bounded**: a semaphore of `max-in-flight` permits is taken when a record is consumed
//!   and given back when its output is acknowledged; every channel is bounded by it.
//! - **At-least-once**: `enable.auto.offset.store=false`; the offset of a record is stored
//!   only after its output record was acknowledged, and acknowledgements are handled in
//!   consumption order, so a stored offset never passes a record whose output is not
//!   durable. Stored offsets are committed every second and on shutdown.
//! - **Idempotent**: a redelivered record has an id the index already holds, so it gets the
//!   stored decision and the same output bytes (tagged records carry no per-run fields).
//! - **Ordered**: records are decided and produced in consumption order, which keeps the
//!   order within each partition; the idempotent producer keeps it on the broker.
//! - **Shutdown**: SIGTERM / SIGINT stop consumption, in-flight records are finished within
//!   the grace period, stored offsets are committed and the index is flushed.
//! - **Fatal errors** (the index cannot be written, an output cannot be produced): the stage
//!   stops consuming, readiness turns false, the records before the failure are finished,
//!   nothing after it is committed, and the process exits with an error.

pub mod kafka;
pub mod settings;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use futures::stream::{FuturesOrdered, StreamExt};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tracing::{error, info, warn};

use crate::dedup::{prepare, Deduplicator, PageRef, PrepareTimes, Prepared};
use crate::index::{DecisionKind, Index};
use crate::record::{self, BadReason, BadRecord, DeadLetter, Source};
use crate::telemetry::{self as tm, Health};
pub use settings::{Mode, StageSettings, Start};

use kafka::{StageConsumer, StageContext};

/// Header with the decision (`unique`, `duplicate`, `skipped`) or `dead_letter`.
pub const HEADER_DECISION: &str = "neardup-decision";
/// Header with the canonical document id (duplicates).
pub const HEADER_CANONICAL: &str = "neardup-canonical-id";
/// Header with the schema of the value.
pub const HEADER_SCHEMA: &str = "neardup-schema";
/// Header with the dead letter's reason.
pub const HEADER_REASON: &str = "neardup-reason";

/// What a run or replay did (printed as JSON by `neardup replay`).
#[derive(Debug, Default, Clone, Serialize)]
pub struct StageSummary {
    /// `run` or `replay`.
    pub mode: String,
    /// Records consumed.
    pub records: u64,
    /// Unique pages.
    pub unique: u64,
    /// Duplicates.
    pub duplicate: u64,
    /// Skipped pages.
    pub skipped: u64,
    /// Dead letters.
    pub dead_letter: u64,
    /// Records whose id was decided before.
    pub repeated: u64,
    /// Outputs acknowledged (0 in a dry run).
    pub produced: u64,
    /// Index entries removed by the retention window.
    pub expired: u64,
    /// Decided and counted only.
    pub dry_run: bool,
    /// Why the run ended: end (replay bounds reached), signal, error.
    pub stopped_by: String,
    /// Replay: per `topic:partition`, the first offset and the end offset seen at start.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub partitions: BTreeMap<String, (i64, i64)>,
    /// Wall time.
    pub seconds: f64,
    /// Records per second.
    pub records_per_second: f64,
    /// Median time from consuming a record to its output being acknowledged, ms.
    pub latency_p50_ms: f64,
    /// 99th percentile of that time, ms.
    pub latency_p99_ms: f64,
    /// Longest such time, ms.
    pub latency_max_ms: f64,
}

/// A uniform sample of per-record latencies (reservoir of at most `CAP` values).
#[derive(Default)]
struct Latencies {
    seen: u64,
    sample: Vec<f32>,
    max: f64,
    rng: u64,
}

impl Latencies {
    const CAP: usize = 100_000;

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

    fn quantile_ms(&mut self, q: f64) -> f64 {
        if self.sample.is_empty() {
            return 0.0;
        }
        self.sample.sort_by(f32::total_cmp);
        let i = ((self.sample.len() - 1) as f64 * q).round() as usize;
        self.sample[i] as f64 * 1000.0
    }
}

/// A consumed record on its way through the stage.
struct Inbound {
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    timestamp_ms: Option<i64>,
    consumed: Instant,
    /// The first bytes of the record (for a dead letter if its output is refused).
    head: Vec<u8>,
    /// The record's size.
    len: usize,
    _permit: InFlight,
}

/// A record's place in the `max-in-flight` bound; `neardup_in_flight_records` counts the
/// places taken, up when a record is consumed and down when its output is acknowledged
/// (or it is dropped).
struct InFlight(#[allow(dead_code)] OwnedSemaphorePermit);

impl InFlight {
    fn new(permit: OwnedSemaphorePermit) -> InFlight {
        metrics::gauge!(tm::IN_FLIGHT).increment(1.0);
        InFlight(permit)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!(tm::IN_FLIGHT).decrement(1.0);
    }
}

/// Bytes of the original kept for a dead letter written when an output is refused.
const HEAD_BYTES: usize = 64 * 1024;

type PrepOutput = (Vec<u8>, Prepared, PrepareTimes);

struct Job {
    inbound: Inbound,
    prepared: oneshot::Receiver<PrepOutput>,
}

/// An output record.
struct Outbound {
    inbound: Inbound,
    topic: Arc<str>,
    payload: Vec<u8>,
    headers: Vec<(&'static str, String)>,
    label: &'static str,
}

#[derive(Default)]
struct Counts {
    unique: u64,
    duplicate: u64,
    skipped: u64,
    dead_letter: u64,
    repeated: u64,
    expired: u64,
}

/// Runs the stage until stopped (run) or until the replay bounds are reached (replay).
pub fn run(settings: StageSettings) -> Result<StageSummary> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("neardup-io")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(run_async(settings))
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

async fn run_async(s: StageSettings) -> Result<StageSummary> {
    let started = Instant::now();
    let health = Arc::new(Health::default());
    let metrics = tm::metrics_handle()?;
    let http = match s.listen {
        Some(addr) => {
            let l = tm::bind(addr).await?;
            info!(address = %addr, "serving /metrics, /healthz, /readyz");
            Some(tokio::spawn(tm::serve(
                l,
                Arc::clone(&health),
                metrics.clone(),
            )))
        }
        None => None,
    };
    health.publish();
    let result = stage(&s, &health, started).await;
    if let Err(e) = &result {
        let why = format!("{e:#}");
        health.fail(&why);
        if http.is_some() && !s.failure_hold.is_zero() {
            error!(error = %why, hold_s = s.failure_hold.as_secs_f64(),
                "stopped by a fatal error; /readyz and /metrics report it until the hold ends or SIGTERM");
            tokio::select! {
                _ = tokio::time::sleep(s.failure_hold) => {}
                _ = wait_for_signal() => {}
            }
        }
    }
    if let Some(h) = http {
        h.abort();
    }
    result
}

/// The stage proper, between opening the index and the final commit.
async fn stage(s: &StageSettings, health: &Arc<Health>, started: Instant) -> Result<StageSummary> {
    // the index: a dry run decides against a checkpoint and leaves the index unchanged
    // opening rebuilds the in-memory lists from the stored documents (about 25 s a million
    // documents): /healthz answers meanwhile, /readyz waits for it
    let opening = Instant::now();
    let (index, scratch) = {
        let s2 = s.clone();
        tokio::task::spawn_blocking(move || open_index(&s2)).await??
    };
    let mut dedup = Deduplicator::new(index)?;
    health.index_open.store(true, Ordering::Relaxed);
    info!(index = %s.index.display(), method = s.params.method.as_str(),
        threshold = s.params.threshold, dry_run = s.dry_run,
        open_s = opening.elapsed().as_secs_f64(), "index open");

    let ctx = StageContext::new(Arc::clone(health));
    let consumer: Arc<StageConsumer> = Arc::new(kafka::consumer(s, ctx.clone())?);
    let producer: Option<FutureProducer<StageContext>> = if s.dry_run {
        None
    } else {
        Some(kafka::producer(s, ctx.clone())?)
    };
    let mut bounds = match s.mode {
        Mode::Run => {
            let topics: Vec<&str> = s.input_topics.iter().map(String::as_str).collect();
            consumer.subscribe(&topics).context("cannot subscribe")?;
            info!(topics = ?s.input_topics, group = %s.group_id, "subscribed");
            None
        }
        Mode::Replay => {
            let c = Arc::clone(&consumer);
            let s2 = s.clone();
            let b = tokio::task::spawn_blocking(move || kafka::assign_replay(&c, &s2)).await??;
            health.assigned.store(b.len(), Ordering::Relaxed);
            Some(b)
        }
    };
    let mut summary = StageSummary {
        mode: match s.mode {
            Mode::Run => "run".into(),
            Mode::Replay => "replay".into(),
        },
        dry_run: s.dry_run,
        ..Default::default()
    };
    if let Some(b) = &bounds {
        summary.partitions = b.ranges();
    }

    // stop signals
    let (stop_tx, mut stop_rx) = watch::channel(false);
    {
        let stop_tx = stop_tx.clone();
        let health = Arc::clone(health);
        tokio::spawn(async move {
            wait_for_signal().await;
            info!("stop signal: draining in-flight records");
            health.draining.store(true, Ordering::Relaxed);
            health.publish();
            let _ = stop_tx.send(true);
        });
    }

    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(s.jobs)
            .thread_name(|i| format!("neardup-sign-{i}"))
            .build()?,
    );
    let signer = dedup.signer();
    let sem = Arc::new(Semaphore::new(s.max_in_flight));
    let (job_tx, job_rx) = mpsc::channel::<Job>(s.max_in_flight);
    let (out_tx, out_rx) = mpsc::channel::<Outbound>(s.max_in_flight);

    // the decider: one thread, decisions in consumption order
    let decider = {
        let s = s.clone();
        std::thread::Builder::new()
            .name("neardup-decide".into())
            .spawn(move || {
                let mut counts = Counts::default();
                let r = decide_loop(&s, &mut dedup, job_rx, out_tx, &mut counts);
                (dedup, counts, r)
            })?
    };

    // the producer and the offset store
    let producing = tokio::spawn(produce_loop(
        producer,
        Arc::from(s.dead_letter_topic.as_str()),
        Arc::clone(&consumer),
        out_rx,
        s.max_in_flight,
        Arc::clone(health),
        s.dry_run,
    ));

    // consume until stopped, failed or (replay) at the end offsets
    let mut stopped_by = "signal";
    if bounds.as_ref().is_some_and(|b| b.all_done()) {
        stopped_by = "end";
    } else {
        loop {
            if *stop_rx.borrow() {
                break;
            }
            let permit = tokio::select! {
                p = Arc::clone(&sem).acquire_owned() => p.expect("semaphore never closed"),
                _ = stop_rx.changed() => break,
            };
            let msg = tokio::select! {
                m = consumer.recv() => m,
                _ = stop_rx.changed() => break,
            };
            let m = match msg {
                Ok(m) => m,
                Err(KafkaError::PartitionEOF(p)) => {
                    if let Some(b) = &mut bounds {
                        b.eof(p);
                        if b.all_done() {
                            stopped_by = "end";
                            break;
                        }
                    }
                    continue;
                }
                Err(e) => {
                    warn!(error = %e, "consume error");
                    metrics::counter!(tm::KAFKA_ERRORS, "code" => kafka::code(&e)).increment(1);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            health.brokers_down.store(false, Ordering::Relaxed);
            let (topic, partition, offset) = (m.topic(), m.partition(), m.offset());
            if let Some(b) = &mut bounds {
                if !b.take(topic, partition, offset) {
                    if b.all_done() {
                        stopped_by = "end";
                        break;
                    }
                    continue;
                }
            }
            metrics::counter!(tm::RECORDS_IN, "topic" => topic.to_string()).increment(1);
            summary.records += 1;
            let value = m.payload().unwrap_or_default();
            let inbound = Inbound {
                topic: Arc::from(topic),
                partition,
                offset,
                key: m.key().map(<[u8]>::to_vec),
                timestamp_ms: m.timestamp().to_millis(),
                consumed: Instant::now(),
                head: value[..value.len().min(HEAD_BYTES)].to_vec(),
                len: value.len(),
                _permit: InFlight::new(permit),
            };
            let payload = m.payload().map(<[u8]>::to_vec).unwrap_or_default();
            drop(m);
            let (tx, rx) = oneshot::channel();
            let (signer, max) = (Arc::clone(&signer), s.max_record_bytes);
            pool.spawn(move || {
                let (p, t) = prepare(&payload, &signer, max);
                let _ = tx.send((payload, p, t));
            });
            if job_tx
                .send(Job {
                    inbound,
                    prepared: rx,
                })
                .await
                .is_err()
            {
                // the decider stopped: a fatal error, reported below
                stopped_by = "error";
                break;
            }
            if bounds.as_ref().is_some_and(|b| b.all_done()) {
                stopped_by = "end";
                break;
            }
            if s.stop_after.is_some_and(|n| summary.records >= n) {
                stopped_by = "end";
                break;
            }
        }
    }
    drop(job_tx);
    health.draining.store(true, Ordering::Relaxed);
    health.publish();

    // drain within the grace period
    let grace = s.grace_period;
    let drained = tokio::time::timeout(grace, async {
        let produced = producing.await.map_err(|e| anyhow!("producer task: {e}"))?;
        let decided = tokio::task::spawn_blocking(move || decider.join())
            .await?
            .map_err(|_| anyhow!("the decider thread panicked"))?;
        Ok::<_, anyhow::Error>((produced, decided))
    })
    .await;

    let mut failure: Option<anyhow::Error> = None;
    let mut dedup_back = None;
    match drained {
        Err(_) => {
            warn!(
                grace_s = grace.as_secs_f64(),
                "grace period over: records still in flight are left for redelivery"
            );
        }
        Ok(Err(e)) => failure = Some(e),
        Ok(Ok(((produced, mut lat), (dedup, counts, decided)))) => {
            summary.latency_p50_ms = lat.quantile_ms(0.5);
            summary.latency_p99_ms = lat.quantile_ms(0.99);
            summary.latency_max_ms = lat.max * 1000.0;
            summary.unique = counts.unique;
            summary.duplicate = counts.duplicate;
            summary.skipped = counts.skipped;
            summary.dead_letter = counts.dead_letter;
            summary.repeated = counts.repeated;
            summary.expired = counts.expired;
            match produced {
                Ok(n) => summary.produced = n,
                Err(e) => failure = Some(e),
            }
            if let Err(e) = decided {
                failure = Some(e);
            }
            dedup_back = Some(dedup);
        }
    }
    if let Some(e) = &failure {
        stopped_by = "error";
        health.fail(&format!("{e:#}"));
    }

    // commit what is stored (acknowledged outputs only), then flush the index
    // (a synchronous commit waits without end for a coordinator that is gone: bounded)
    if !s.dry_run {
        let c = Arc::clone(&consumer);
        let commit = bounded("commit", CLIENT_CLOSE_WAIT, move || {
            c.commit_consumer_state(CommitMode::Sync)
        });
        match commit {
            Some(Ok(())) => info!("offsets committed"),
            Some(Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset))) => {}
            Some(Err(e)) => {
                warn!(error = %e, "final commit failed; uncommitted records will be redelivered")
            }
            None => warn!(
                wait_s = CLIENT_CLOSE_WAIT.as_secs_f64(),
                "final commit not answered in time (brokers unreachable?); uncommitted records \
                 will be redelivered"
            ),
        }
    }
    if let Some(d) = &dedup_back {
        match (d.index().flush(), &failure) {
            (Ok(()), _) => {}
            (Err(e), None) => return Err(anyhow!(e).context("cannot flush the index")),
            (Err(e), Some(_)) => warn!(error = %e, "cannot flush the index either"),
        }
    }
    consumer.unsubscribe();
    if bounded("close", CLIENT_CLOSE_WAIT, move || drop(consumer)).is_none() {
        warn!(
            wait_s = CLIENT_CLOSE_WAIT.as_secs_f64(),
            "the Kafka consumer did not close in time (brokers unreachable?); not waiting for it"
        );
    }
    drop(dedup_back);
    if let Some(dir) = scratch {
        let _ = std::fs::remove_dir_all(dir);
    }
    summary.stopped_by = stopped_by.into();
    summary.seconds = started.elapsed().as_secs_f64();
    summary.records_per_second = summary.records as f64 / summary.seconds.max(1e-9);
    info!(
        records = summary.records,
        unique = summary.unique,
        duplicate = summary.duplicate,
        skipped = summary.skipped,
        dead_letter = summary.dead_letter,
        stopped_by,
        "stage stopped"
    );
    match failure {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// How long the final commit and closing the Kafka consumer may take each.
const CLIENT_CLOSE_WAIT: Duration = Duration::from_secs(10);

/// Runs `f` on a thread of its own and waits for it at most `wait`; `None` if it did not
/// finish in time (the thread is left behind and ends with the process). The final commit
/// and closing the consumer (leaving the group) wait without end for a group coordinator
/// that is gone; by then the outputs are acknowledged, so the process may go on and exit.
fn bounded<T: Send + 'static>(
    what: &str,
    wait: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("neardup-{what}"))
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(wait).ok()
}

/// Opens the index; for a dry run, a checkpoint copy in a scratch directory.
fn open_index(s: &StageSettings) -> Result<(Index, Option<std::path::PathBuf>)> {
    if !s.dry_run {
        let idx = Index::open_dir(&s.index, s.params.clone())
            .with_context(|| format!("cannot open index {}", s.index.display()))?;
        return Ok((idx, None));
    }
    let scratch = std::env::temp_dir().join(format!(
        "neardup-dry-run-{}-{}",
        std::process::id(),
        now_secs()
    ));
    if s.index.exists() {
        Index::checkpoint(&s.index, &scratch)
            .with_context(|| format!("cannot copy index {} for the dry run", s.index.display()))?;
    }
    let idx = Index::open_dir(&scratch, s.params.clone())
        .with_context(|| format!("cannot open index {}", s.index.display()))?;
    Ok((idx, Some(scratch)))
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            std::future::pending::<()>().await;
            return;
        };
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The largest value the producer may send, from `message.max.bytes` (default 1,000,000),
/// less room for the key and headers.
fn max_output_bytes(s: &StageSettings) -> usize {
    let limit = s
        .properties
        .get("message.max.bytes")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1_000_000);
    limit.saturating_sub(64 * 1024).max(16 * 1024)
}

fn observe(stage: &'static str, d: Duration) {
    metrics::histogram!(tm::STAGE_SECONDS, "stage" => stage).record(d.as_secs_f64());
}

fn decide_loop(
    s: &StageSettings,
    dedup: &mut Deduplicator,
    mut jobs: mpsc::Receiver<Job>,
    out: mpsc::Sender<Outbound>,
    counts: &mut Counts,
) -> Result<()> {
    let params_id = record::params_id(&s.params);
    let max_out = max_output_bytes(s);
    let (unique_t, dup_t, dead_t): (Arc<str>, Arc<str>, Arc<str>) = (
        Arc::from(s.unique_topic.as_str()),
        Arc::from(s.duplicate_topic.as_str()),
        Arc::from(s.dead_letter_topic.as_str()),
    );
    let mut newest_seen = i64::MIN;
    let mut since_sweep = 0u64;
    let mut last_stats = Instant::now() - Duration::from_secs(60);
    while let Some(job) = jobs.blocking_recv() {
        let (payload, prepared, times) = job
            .prepared
            .blocking_recv()
            .map_err(|_| anyhow!("a signing task was lost"))?;
        observe("decode", times.decode);
        let inbound = job.inbound;
        let page_or_bad = match prepared {
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
        };
        let ob = match page_or_bad {
            Err(bad) => {
                counts.dead_letter += 1;
                metrics::counter!(tm::DEAD_LETTERS, "reason" => bad.reason.as_str()).increment(1);
                let src = Source::Kafka {
                    topic: inbound.topic.to_string(),
                    partition: inbound.partition,
                    offset: inbound.offset,
                };
                let dl = DeadLetter::fitting(&bad, src, &payload, max_out);
                Outbound {
                    inbound,
                    topic: Arc::clone(&dead_t),
                    payload: serde_json::to_vec(&dl)?,
                    headers: vec![
                        (HEADER_DECISION, "dead_letter".into()),
                        (HEADER_REASON, bad.reason.as_str().into()),
                        (HEADER_SCHEMA, record::DEAD_LETTER_SCHEMA.into()),
                    ],
                    label: "dead_letter",
                }
            }
            Ok(b) => {
                let (page, signed) = *b;
                observe("strip", times.strip);
                observe("sign", times.sign);
                let first_seen = page
                    .fetched_at
                    .or(inbound.timestamp_ms.map(|ms| ms.div_euclid(1000)))
                    .unwrap_or_else(now_secs);
                newest_seen = newest_seen.max(first_seen);
                let t = Instant::now();
                let outcome = dedup
                    .decide(
                        PageRef {
                            id: &page.doc_id,
                            url: &page.page.url,
                            first_seen,
                        },
                        &signed,
                    )
                    .context("the index cannot record a decision")?;
                observe("lookup", t.elapsed());
                if outcome.repeated {
                    counts.repeated += 1;
                    metrics::counter!(tm::REPEATED_IDS).increment(1);
                }
                let mut rec =
                    record::tagged(&page, &signed, &outcome, &s.params, &params_id, s.keep_text);
                rec.dedup.repeated = None;
                let mut payload = serde_json::to_vec(&rec)?;
                if payload.len() > max_out && rec.text.is_some() {
                    rec.text = None;
                    payload = serde_json::to_vec(&rec)?;
                }
                let (topic, label) = match outcome.decision.kind {
                    DecisionKind::Unique => {
                        counts.unique += 1;
                        (&unique_t, "unique")
                    }
                    DecisionKind::Skipped => {
                        counts.skipped += 1;
                        (&unique_t, "skipped")
                    }
                    DecisionKind::Duplicate => {
                        counts.duplicate += 1;
                        (&dup_t, "duplicate")
                    }
                };
                let mut headers = vec![
                    (HEADER_DECISION, label.to_string()),
                    (HEADER_SCHEMA, record::TAGGED_SCHEMA.to_string()),
                ];
                if let Some(c) = &outcome.decision.canonical_id {
                    headers.push((HEADER_CANONICAL, c.clone()));
                }
                since_sweep += 1;
                Outbound {
                    inbound,
                    topic: Arc::clone(topic),
                    payload,
                    headers,
                    label,
                }
            }
        };
        if out.blocking_send(ob).is_err() {
            // the producer stopped: its error is reported by the caller
            return Ok(());
        }
        if let (Some(window), true) = (s.retention, since_sweep >= 10_000) {
            since_sweep = 0;
            let n = dedup
                .index_mut()
                .expire(newest_seen - window.as_secs() as i64)?;
            counts.expired += n;
            metrics::counter!(tm::INDEX_EXPIRED).increment(n);
        }
        if last_stats.elapsed() >= Duration::from_secs(15) {
            last_stats = Instant::now();
            publish_index_stats(dedup.index());
        }
    }
    publish_index_stats(dedup.index());
    Ok(())
}

fn publish_index_stats(index: &Index) {
    match index.stats() {
        Ok(st) => {
            let docs = st
                .families
                .iter()
                .find(|(f, _, _)| f == "docs")
                .map_or(0, |(_, k, _)| *k);
            metrics::gauge!(tm::INDEX_DOCUMENTS).set(docs as f64);
            for (family, keys, bytes) in st.families {
                metrics::gauge!(tm::INDEX_KEYS, "family" => family.clone()).set(keys as f64);
                metrics::gauge!(tm::INDEX_BYTES, "family" => family).set(bytes as f64);
            }
        }
        Err(e) => warn!(error = %e, "cannot read index statistics"),
    }
}

/// Produces the outputs in order and stores each input offset once its output is
/// acknowledged. Returns the number of acknowledged outputs.
async fn produce_loop(
    producer: Option<FutureProducer<StageContext>>,
    dead_topic: Arc<str>,
    consumer: Arc<StageConsumer>,
    mut rx: mpsc::Receiver<Outbound>,
    max_pending: usize,
    health: Arc<Health>,
    dry_run: bool,
) -> (Result<u64>, Latencies) {
    let mut lat = Latencies {
        rng: 0x9E37_79B9_7F4A_7C15,
        ..Default::default()
    };
    let r = produce_inner(
        producer,
        dead_topic,
        consumer,
        &mut rx,
        max_pending,
        health,
        dry_run,
        &mut lat,
    )
    .await;
    (r, lat)
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
    lat: &mut Latencies,
) -> Result<u64> {
    type Ack = (
        Result<(), KafkaError>,
        Outbound,
        Instant, // sent
    );
    let mut pending: FuturesOrdered<
        std::pin::Pin<Box<dyn std::future::Future<Output = Ack> + Send>>,
    > = FuturesOrdered::new();
    let mut open = true;
    let mut acked = 0u64;
    loop {
        if !open && pending.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some((res, ob, sent)) = pending.next(), if !pending.is_empty() => {
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
                lat.add(took);
                let label = if ob.label == "output_too_large" { "dead_letter" } else { ob.label };
                metrics::counter!(tm::RECORDS_OUT, "topic" => ob.topic.to_string(), "decision" => label)
                    .increment(1);
                if !dry_run {
                    acked += 1;
                    let i = &ob.inbound;
                    if let Err(e) = consumer.store_offset(&i.topic, i.partition, i.offset) {
                        // the partition was revoked: its new owner reprocesses the record
                        tracing::debug!(error = %e, topic = %i.topic, partition = i.partition,
                            offset = i.offset, "offset not stored");
                    }
                }
            }
            o = rx.recv(), if open && pending.len() < max_pending => match o {
                None => open = false,
                Some(ob) => {
                    let sent = Instant::now();
                    match &producer {
                        None => pending.push_back(Box::pin(async move { (Ok(()), ob, sent) })),
                        Some(p) => {
                            let fut = send(p, &ob).await;
                            pending.push_back(Box::pin(async move {
                                let res = match fut {
                                    Err(e) => Err(e),
                                    Ok(f) => match f.await {
                                        Ok(Ok(_)) => Ok(()),
                                        Ok(Err((e, _))) => Err(e),
                                        Err(_) => Err(KafkaError::Canceled),
                                    },
                                };
                                (res, ob, sent)
                            }));
                        }
                    }
                }
            },
        }
    }
    Ok(acked)
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
