//! Kafka clients of the stage: their configuration, the client context (rebalances,
//! statistics, errors → metrics and readiness) and the replay bounds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tracing::{info, warn};

use super::settings::{is_secret, StageSettings, Start};
use crate::config::{Guarantee, Role};
use crate::telemetry::{self as tm, Health};

/// The stage's consumer.
pub type StageConsumer = StreamConsumer<StageContext>;

/// Client context: turns client events into metrics, logs and readiness.
#[derive(Clone)]
pub struct StageContext {
    health: Arc<Health>,
    /// Counts the assignments and revocations of this consumer (a new group generation).
    rebalances: Arc<AtomicU64>,
    /// Exactly-once: how a revocation waits for the records consumed before it.
    txn: Option<Arc<TxnSync>>,
    /// A decider with a standby: what an assignment means for it.
    standby: Option<Arc<dyn OnAssign>>,
}

/// What an assignment means beyond the consumer itself: a decider with a standby keeps what
/// it was assigned paused while it follows, and stops when, deciding, it got nothing. Called
/// on the consumer's thread after each assignment, with a way to pause the partitions.
pub trait OnAssign: Send + Sync {
    /// `tpl` was assigned; `pause` pauses partitions of this consumer.
    fn on_assign(
        &self,
        tpl: &TopicPartitionList,
        pause: &dyn Fn(&TopicPartitionList) -> Result<(), KafkaError>,
    );
}

/// Exactly-once: before partitions are revoked, every record consumed so far is answered and
/// committed, so that no transaction holds records of partitions this process no longer
/// owns (their new owner starts from the offsets committed here).
#[derive(Default)]
pub struct TxnSync {
    /// Records consumed.
    pub consumed: AtomicU64,
    /// Records whose outputs a committed transaction holds.
    committed: std::sync::Mutex<u64>,
    changed: std::sync::Condvar,
    /// A revocation waits: commit what is open as soon as its records are acknowledged.
    pub revoking: std::sync::atomic::AtomicBool,
    /// The producer stopped: nobody commits any more.
    pub stopped: std::sync::atomic::AtomicBool,
}

impl TxnSync {
    /// `n` more records are held by a committed transaction.
    pub fn committed(&self, n: u64) {
        *self.committed.lock().unwrap_or_else(|e| e.into_inner()) += n;
        self.changed.notify_all();
    }

    /// The producer stopped.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let _g = self.committed.lock().unwrap_or_else(|e| e.into_inner());
        self.changed.notify_all();
    }

    /// Waits until every record consumed so far is committed (at most `wait`); false when
    /// it was not.
    fn drain(&self, wait: Duration) -> bool {
        let target = self.consumed.load(Ordering::Acquire);
        let deadline = std::time::Instant::now() + wait;
        self.revoking.store(true, Ordering::Release);
        let mut c = self.committed.lock().unwrap_or_else(|e| e.into_inner());
        let done = loop {
            if *c >= target {
                break true;
            }
            let now = std::time::Instant::now();
            if now >= deadline || self.stopped.load(Ordering::Acquire) {
                break false;
            }
            c = self
                .changed
                .wait_timeout(c, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        self.revoking.store(false, Ordering::Release);
        done
    }
}

impl StageContext {
    /// A context reporting into `health`; with `txn`, revocations wait for the records
    /// consumed before them to be committed (exactly-once).
    pub fn new(health: Arc<Health>, txn: Option<Arc<TxnSync>>) -> StageContext {
        StageContext {
            health,
            rebalances: Arc::default(),
            txn,
            standby: None,
        }
    }

    /// With a standby's state: an assignment while following is held paused until the
    /// take-over, and a deciding process that loses the signed topic stops.
    pub fn with_standby(mut self, standby: Option<Arc<dyn OnAssign>>) -> StageContext {
        self.standby = standby;
        self
    }

    /// How many times partitions were assigned or revoked so far.
    pub fn rebalances(&self) -> u64 {
        self.rebalances.load(Ordering::Acquire)
    }
}

/// A short, bounded label for a client error.
pub fn code(e: &KafkaError) -> String {
    match e.rdkafka_error_code() {
        Some(c) => format!("{c:?}"),
        None => "other".into(),
    }
}

/// The broker fenced this static member: another process joined with its instance id (a
/// fatal error of the client).
pub fn fenced(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::FencedInstanceId | RDKafkaErrorCode::Fatal)
    )
}

impl ClientContext for StageContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!(facility = fac, "{log_message}"),
            RDKafkaLogLevel::Warning => warn!(facility = fac, "{log_message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                info!(facility = fac, "{log_message}")
            }
            RDKafkaLogLevel::Debug => tracing::debug!(facility = fac, "{log_message}"),
        }
    }

    fn stats(&self, stats: Statistics) {
        // the records of a partition the stage has not read yet: its last stable offset less
        // the stage's position. (The client's own consumer_lag counts from the committed
        // offset, which offsets committed in a transaction never move: under exactly-once
        // it would only grow.)
        let mut waiting = 0i64;
        for (topic, t) in &stats.topics {
            for (p, part) in &t.partitions {
                if *p >= 0 && part.app_offset >= 0 && part.ls_offset >= 0 {
                    let lag = (part.ls_offset - part.app_offset).max(0);
                    waiting += lag;
                    metrics::gauge!(tm::CONSUMER_LAG, "topic" => topic.clone(), "partition" => p.to_string())
                        .set(lag as f64);
                }
            }
        }
        if stats.client_type == "consumer" {
            let before = self.health.lag.swap(waiting, Ordering::Relaxed);
            if before <= 0 && waiting > 0 {
                // records wait from now: the stall is counted from here, not from the last
                // answer before an idle spell
                self.health.progressed();
            }
        }
        // brokers answer again after an outage
        let up = stats.brokers.values().any(|b| b.state == "UP");
        if up && self.health.brokers_down.swap(false, Ordering::Relaxed) {
            info!("brokers reachable again");
            self.health.publish();
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if matches!(error, KafkaError::PartitionEOF(_))
            || error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF)
        {
            // the end of a partition, which a replay asks to be told of: no error
            return;
        }
        metrics::counter!(tm::KAFKA_ERRORS, "code" => code(&error)).increment(1);
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.health.brokers_down.store(true, Ordering::Relaxed);
            self.health.publish();
        }
        warn!(error = %error, reason, "kafka client error");
    }
}

impl ConsumerContext for StageContext {
    fn pre_rebalance(&self, _c: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            metrics::counter!(tm::REBALANCES, "kind" => "revoke").increment(1);
            info!(partitions = tpl.count(), "partitions revoked");
            if let Some(t) = &self.txn {
                if !t.stopped.load(Ordering::Acquire) {
                    // the other tasks of this thread move to another while it waits
                    let done = tokio::task::block_in_place(|| t.drain(REVOKE_DRAIN));
                    if done {
                        info!("exactly-once: the records consumed before the revocation are committed");
                    } else {
                        warn!(
                            wait_s = REVOKE_DRAIN.as_secs_f64(),
                            "exactly-once: the records \
                            consumed before the revocation were not committed in time; their \
                            transaction will be refused and the stage stops"
                        );
                    }
                }
            }
        }
    }

    fn post_rebalance(&self, c: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.rebalances.fetch_add(1, Ordering::AcqRel);
        match rebalance {
            Rebalance::Assign(tpl) => {
                metrics::counter!(tm::REBALANCES, "kind" => "assign").increment(1);
                info!(partitions = tpl.count(), "partitions assigned");
                if let Some(sb) = &self.standby {
                    sb.on_assign(tpl, &|t| c.pause(t));
                }
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => {
                metrics::counter!(tm::REBALANCES, "kind" => "error").increment(1);
                warn!(error = %e, "rebalance error");
            }
        }
        let n = c.assignment().map(|a| a.count()).unwrap_or(0);
        self.health.assigned.store(n, Ordering::Relaxed);
        metrics::gauge!(tm::ASSIGNED_PARTITIONS).set(n as f64);
        self.health.publish();
    }
}

/// How long a revocation waits for the records consumed before it to be committed.
const REVOKE_DRAIN: Duration = Duration::from_secs(60);

fn base_config(s: &StageSettings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.brokers)
        .set("client.id", format!("neardup-{}", std::process::id()))
        .set("statistics.interval.ms", "5000");
    c.set_log_level(RDKafkaLogLevel::Warning);
    c
}

fn apply_user(c: &mut ClientConfig, s: &StageSettings) {
    for (k, v) in &s.properties {
        c.set(k, v);
    }
}

fn describe(s: &StageSettings) -> String {
    s.properties
        .iter()
        .map(|(k, v)| {
            if is_secret(k) {
                format!("{k}=<redacted>")
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks the client properties offline: the client library accepts every name and value
/// (nothing connects).
pub fn validate(s: &StageSettings) -> Result<()> {
    consumer_config(s, Some("neardup-check"))
        .create_native_config()
        .map_err(|e| anyhow::anyhow!("invalid consumer property: {e}"))?;
    producer_config(s)
        .create_native_config()
        .map_err(|e| anyhow::anyhow!("invalid producer property: {e}"))?;
    Ok(())
}

/// The output topics the brokers say do not exist (the stage would hold its records until
/// its grace period ran out). Asked through the producer, so a broker that creates topics on
/// use creates them here as it would on the first record; a topic whose metadata cannot be
/// read (brokers unreachable, not authorised) is not named: its records fail later with
/// their own error. A topic just created may take a moment to show in every broker's
/// metadata: one named missing is asked again for up to [`TOPIC_SETTLE`], as
/// [`topic_partitions`] does.
pub fn missing_outputs(p: &FutureProducer<StageContext>, s: &StageSettings) -> Vec<String> {
    let outputs = match s.role {
        Role::Signer => vec![&s.signed_topic, &s.dead_letter_topic],
        _ => vec![&s.unique_topic, &s.duplicate_topic, &s.dead_letter_topic],
    };
    let named = |t: &str| match p.client().fetch_metadata(Some(t), Duration::from_secs(5)) {
        Ok(md) => md.topics().iter().find(|m| m.name() == t).is_some_and(|m| {
            m.error().is_none_or(|e| {
                RDKafkaErrorCode::from(e) != RDKafkaErrorCode::UnknownTopicOrPartition
            })
        }),
        Err(_) => true,
    };
    let mut asked: Vec<&String> = Vec::new();
    for t in outputs {
        if !asked.contains(&t) {
            asked.push(t);
        }
    }
    let deadline = std::time::Instant::now() + TOPIC_SETTLE;
    asked
        .into_iter()
        .filter(|t| !until_named(t, deadline, || named(t)))
        .cloned()
        .collect()
}

/// The consumer: manual offset store, auto commit of stored offsets; a static member of
/// its group when `instance_id` is given.
pub fn consumer(
    s: &StageSettings,
    ctx: StageContext,
    instance_id: Option<&str>,
) -> Result<StageConsumer> {
    consumer_config(s, instance_id)
        .create_with_context(ctx)
        .with_context(|| {
            format!(
                "cannot create the Kafka consumer (brokers {}, properties: {})",
                s.brokers,
                describe(s)
            )
        })
}

pub(super) fn consumer_config(s: &StageSettings, instance_id: Option<&str>) -> ClientConfig {
    let mut c = base_config(s);
    let fetch_bytes = (s.max_record_bytes as u64 + (1 << 20)).min(1 << 30);
    let user_max = s
        .properties
        .get("message.max.bytes")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let fetch_total = fetch_bytes.max(52_428_800).max(user_max);
    c.set("group.id", &s.group_id)
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "1000")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "10")
        // a record up to the record limit must fit one fetch, or its partition would stall
        // on brokers that do not return an oversized first record
        .set("max.partition.fetch.bytes", fetch_bytes.to_string())
        .set("fetch.max.bytes", fetch_total.to_string())
        .set(
            "receive.message.max.bytes",
            (fetch_total + (1 << 20)).to_string(),
        )
        .set(
            "enable.partition.eof",
            if s.mode == super::Mode::Replay {
                "true"
            } else {
                "false"
            },
        );
    if let Some(id) = instance_id {
        c.set("group.instance.id", id);
    }
    // input offsets are committed in the transactions of the outputs; records of
    // transactions that were aborted are never read (a decider's signed topic)
    c.set("isolation.level", "read_committed");
    if s.standby {
        c.set(
            "session.timeout.ms",
            super::settings::STANDBY_SESSION_TIMEOUT
                .as_millis()
                .to_string(),
        );
    }
    apply_user(&mut c, s);
    if s.guarantee == Guarantee::ExactlyOnce {
        c.set("enable.auto.commit", "false");
    }
    // properties meant for the producer only are not passed to the consumer
    for k in PRODUCER_ONLY {
        c.remove(k);
    }
    c
}

/// A consumer that reads a topic by assignment, outside any group's offsets (the
/// changelog restore): end of partition reported, nothing committed.
pub fn reader(s: &StageSettings, purpose: &str) -> Result<rdkafka::consumer::BaseConsumer> {
    reader_with(s, purpose, true)
}

/// [`reader`], reporting the end of a partition or not (a follower of the changelog reaches
/// it again after every record).
pub fn reader_with(
    s: &StageSettings,
    purpose: &str,
    eof: bool,
) -> Result<rdkafka::consumer::BaseConsumer> {
    let mut c = consumer_config(s, None);
    c.set("group.id", format!("{}-{purpose}", s.group_id))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", if eof { "true" } else { "false" });
    c.remove("group.instance.id");
    c.create().with_context(|| {
        format!(
            "cannot create the Kafka consumer for the {purpose} (brokers {}, properties: {})",
            s.brokers,
            describe(s)
        )
    })
}

/// The consumer of a role of a sharded decider: reads by assignment, commits the group's
/// offsets itself (in its transactions under exactly-once).
pub fn role_consumer(
    s: &StageSettings,
    ctx: StageContext,
) -> Result<rdkafka::consumer::BaseConsumer<StageContext>> {
    let mut c = consumer_config(s, None);
    c.set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false");
    c.remove("group.instance.id");
    c.create_with_context(ctx).with_context(|| {
        format!(
            "cannot create the Kafka consumer (brokers {}, properties: {})",
            s.brokers,
            describe(s)
        )
    })
}

/// The producer of a role of a sharded decider: idempotent, `acks=all`, transactional with
/// `transactional_id` (exactly-once).
pub fn role_producer<C: rdkafka::producer::ProducerContext>(
    s: &StageSettings,
    ctx: C,
    transactional_id: Option<&str>,
) -> Result<rdkafka::producer::BaseProducer<C>> {
    let mut c = producer_config(s);
    // its context keeps no statistics (the consumer's report the lag)
    c.set("statistics.interval.ms", "0");
    if transactional_id.is_none() {
        // a record that fails for good stops the producer before the records after it land:
        // a gap in a votes partition would leave the aggregator without a shard's votes
        c.set("enable.gapless.guarantee", "true");
    }
    set_transactional(&mut c, transactional_id);
    c.create_with_context(ctx)
        .with_context(|| producer_failed(s))
}

/// An admin client with the stage's brokers and client properties (security settings).
pub fn admin(
    s: &StageSettings,
) -> Result<rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>> {
    let mut c = base_config(s);
    c.remove("statistics.interval.ms");
    apply_user(&mut c, s);
    for k in CONSUMER_ONLY.iter().chain(PRODUCER_ONLY) {
        c.remove(k);
    }
    c.create().with_context(|| {
        format!(
            "cannot create the Kafka admin client (brokers {}, properties: {})",
            s.brokers,
            describe(s)
        )
    })
}

const PRODUCER_ONLY: &[&str] = &[
    "linger.ms",
    "queue.buffering.max.ms",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "batch.num.messages",
    "batch.size",
    "compression.type",
    "compression.codec",
    "compression.level",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "request.timeout.ms",
    "retries",
    "message.send.max.retries",
    "retry.backoff.ms",
    "max.in.flight.requests.per.connection",
    "max.in.flight",
    "partitioner",
    "transactional.id",
    "transaction.timeout.ms",
];

const CONSUMER_ONLY: &[&str] = &[
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "fetch.wait.max.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.message.max.bytes",
    "max.partition.fetch.bytes",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "group.instance.id",
    "group.protocol",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "enable.partition.eof",
    "check.crcs",
    "isolation.level",
];

/// The producer's `transaction.timeout.ms` under exactly-once (a `kafka-property` may set
/// another): a transaction open longer is aborted by the broker, and a process that dies
/// with one open holds back read_committed consumers at most this long.
pub const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The producer: idempotent, `acks=all`; transactional with `transactional_id`
/// (exactly-once).
pub fn producer(
    s: &StageSettings,
    ctx: StageContext,
    transactional_id: Option<&str>,
) -> Result<FutureProducer<StageContext>> {
    let mut c = producer_config(s);
    set_transactional(&mut c, transactional_id);
    c.create_with_context(ctx)
        .with_context(|| producer_failed(s))
}

/// The error of a producer that cannot be created.
fn producer_failed(s: &StageSettings) -> String {
    format!(
        "cannot create the Kafka producer (brokers {}, properties: {})",
        s.brokers,
        describe(s)
    )
}

/// Makes a producer's configuration transactional under `transactional_id` (`None`: left as
/// it is).
fn set_transactional(c: &mut ClientConfig, transactional_id: Option<&str>) {
    if let Some(id) = transactional_id {
        c.set("transactional.id", id);
        // in a transaction a record that fails fails the transaction: no gap can land
        c.remove("enable.gapless.guarantee");
        if c.get("transaction.timeout.ms").is_none() {
            // named, not left to the client: the longest a transaction may stay open before
            // the broker aborts it (transactions here last transaction-interval, a changelog
            // fill's one chunk at most)
            c.set(
                "transaction.timeout.ms",
                TRANSACTION_TIMEOUT.as_millis().to_string(),
            );
        }
    }
}

fn producer_config(s: &StageSettings) -> ClientConfig {
    let mut c = base_config(s);
    c.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5");
    if s.changelog_topic.is_some() {
        // a changelog record that fails for good must stop the producer rather than let the
        // records after it land: a gap would restore an index the decider never had
        c.set("enable.gapless.guarantee", "true");
    }
    apply_user(&mut c, s);
    for k in CONSUMER_ONLY {
        c.remove(k);
    }
    c
}

/// Replay bounds: per partition, the offset to stop before (the end seen at start).
#[derive(Debug, Default)]
pub struct ReplayBounds {
    parts: BTreeMap<(String, i32), Bound>,
}

#[derive(Debug)]
struct Bound {
    start: i64,
    end: i64,
    done: bool,
}

impl ReplayBounds {
    /// Number of partitions replayed.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// No partitions.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Every partition reached its end.
    pub fn all_done(&self) -> bool {
        self.parts.values().all(|b| b.done)
    }

    /// Whether the record at `offset` is within the bounds; marks the partition done when
    /// its last record is taken or passed.
    pub fn take(&mut self, topic: &str, partition: i32, offset: i64) -> bool {
        let Some(b) = self.parts.get_mut(&(topic.to_string(), partition)) else {
            return false;
        };
        if b.done || offset >= b.end {
            b.done = true;
            return false;
        }
        if offset + 1 >= b.end {
            b.done = true;
        }
        true
    }

    /// A partition reported its end: done if the end seen at start was reached.
    pub fn eof(&mut self, partition: i32) {
        // the EOF event carries no topic: only a partition number unique across topics can
        // be marked; others finish when their last record is taken
        let matching: Vec<_> = self
            .parts
            .iter()
            .filter(|((_, p), _)| *p == partition)
            .map(|(k, _)| k.clone())
            .collect();
        if matching.len() == 1 {
            // reaching the current end means every record before the start-time end was read
            if let Some(b) = self.parts.get_mut(&matching[0]) {
                b.done = true;
            }
        }
    }

    /// `topic:partition` → (start, end).
    pub fn ranges(&self) -> BTreeMap<String, (i64, i64)> {
        self.parts
            .iter()
            .map(|((t, p), b)| (format!("{t}:{p}"), (b.start, b.end)))
            .collect()
    }
}

/// How long a topic the brokers do not name is asked for again before it is called missing
/// (an input, output, signed, votes or changelog topic).
const TOPIC_SETTLE: Duration = Duration::from_secs(10);

/// Asks `named` every 500 ms until it says yes or `deadline` passes; the answer. A node
/// learns of a new topic a moment after the controller does: a process started right after
/// its topics were created would otherwise stop, and its pod restart. The first no is
/// logged, so that a wait at the start has its reason in the log.
fn until_named(topic: &str, deadline: std::time::Instant, mut named: impl FnMut() -> bool) -> bool {
    let mut told = false;
    loop {
        if named() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        if !told {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            info!(
                "topic {topic} is not named by the brokers yet; asked again for up to {:.0} s",
                left.as_secs_f64().ceil()
            );
            told = true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The partition ids of `topic` as the brokers name them, or `None` when it does not exist
/// (or has no partitions) after [`TOPIC_SETTLE`] of asking again. An error reading the
/// metadata is returned at once.
pub(super) fn topic_partitions<X: ConsumerContext, C: Consumer<X>>(
    c: &C,
    topic: &str,
) -> Result<Option<Vec<i32>>> {
    let mut found = None;
    let mut error = None;
    until_named(topic, std::time::Instant::now() + TOPIC_SETTLE, || match c
        .fetch_metadata(Some(topic), Duration::from_secs(30))
    {
        Ok(md) => {
            found = md
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .filter(|t| t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.partitions().iter().map(|p| p.id()).collect::<Vec<_>>());
            found.is_some()
        }
        Err(e) => {
            error = Some(e);
            true
        }
    });
    match error {
        Some(e) => Err(e).with_context(|| format!("cannot read the metadata of topic {topic}")),
        None => Ok(found),
    }
}

/// Assigns every partition of the input topics at the replay start and reads the end
/// offsets; returns the bounds.
pub fn assign_replay(c: &StageConsumer, s: &StageSettings) -> Result<ReplayBounds> {
    let timeout = Duration::from_secs(30);
    let mut tpl = TopicPartitionList::new();
    let mut bounds = ReplayBounds::default();
    for topic in &s.input_topics {
        let Some(parts) = topic_partitions(c, topic)? else {
            bail!("topic {topic} does not exist or has no partitions");
        };
        for p in parts {
            let (low, high) = c
                .fetch_watermarks(topic, p, timeout)
                .with_context(|| format!("cannot read the offsets of {topic}:{p}"))?;
            tpl.add_partition_offset(topic, p, Offset::Beginning)?;
            bounds.parts.insert(
                (topic.clone(), p),
                Bound {
                    start: low,
                    end: high,
                    done: high <= low,
                },
            );
        }
    }
    match &s.start {
        Start::Earliest => {}
        Start::Offsets(list) => {
            for (t, p, off) in list {
                let Some(b) = bounds.parts.get_mut(&(t.clone(), *p)) else {
                    bail!("start names {t}:{p}, which does not exist");
                };
                if *off > b.end {
                    bail!(
                        "start {t}:{p}:{off} is past the end of the partition (its end offset \
                         is {}): nothing there to replay",
                        b.end
                    );
                }
                tpl.set_partition_offset(t, *p, Offset::Offset(*off))?;
                b.start = (*off).max(b.start);
                b.done = b.start >= b.end;
            }
        }
        Start::Time(ms) => {
            let mut q = TopicPartitionList::new();
            for (t, p) in bounds.parts.keys() {
                q.add_partition_offset(t, *p, Offset::Offset(*ms))?;
            }
            let found = c
                .offsets_for_times(q, timeout)
                .context("cannot look up the offsets of the start time")?;
            for e in found.elements() {
                let key = (e.topic().to_string(), e.partition());
                let Some(b) = bounds.parts.get_mut(&key) else {
                    continue;
                };
                match e.offset() {
                    Offset::Offset(o) => {
                        tpl.set_partition_offset(e.topic(), e.partition(), Offset::Offset(o))?;
                        b.start = o;
                        b.done = o >= b.end;
                    }
                    // no record at or after the time
                    _ => {
                        b.start = b.end;
                        b.done = true;
                    }
                }
            }
        }
    }
    c.assign(&tpl)
        .context("cannot assign the replay partitions")?;
    for ((t, p), b) in &bounds.parts {
        info!(topic = %t, partition = p, start = b.start, end = b.end, "replay bounds");
    }
    Ok(bounds)
}
