//! The Kafka link of the roles of a sharded decider (a shard, the aggregator): one consumer
//! that reads its partitions by assignment from their start, and one producer whose records
//! are committed with the consumer's offsets, in a transaction under exactly-once.
//!
//! Both roles hold state that is a function of what they read, in order: at every start
//! they read their input from its start again, and produce only past the offsets their
//! group committed. So their state after a crash, a kill or a lost pod is the one they had
//! at their last commit, whatever the guarantee, and they need no volume.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::commit::{slow, watched};
use super::kafka::{topic_partitions, StageContext};
use super::restart::{broker_fault, DecideAgain};
use super::settings::StageSettings;
use super::watchdog::TRANSACTION_CALL;
use crate::config::Guarantee;
use crate::telemetry::{self as tm, Health};

/// How long starting the transactions, a flush or a commit of offsets may take (the calls
/// within a transaction take [`TRANSACTION_CALL`] an attempt; every transaction call is
/// under the watchdog, three times its timeout).
const CALL: Duration = Duration::from_secs(60);

/// Records sent before a commit is due, whatever the interval.
const COMMIT_RECORDS: u64 = 10_000;

/// How often the offsets are committed again while nothing is sent: a group that commits
/// nothing loses its offsets after the brokers' `offsets.retention.minutes` (7 days by
/// default), and a role without them would read and write everything again.
const KEEP_OFFSETS: Duration = Duration::from_secs(3600);

/// The producer's context: the first delivery that failed.
#[derive(Default)]
pub(super) struct Deliveries {
    failed: Mutex<Option<KafkaError>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = r {
            let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            if f.is_none() {
                *f = Some(e.clone());
            }
        }
    }
}

/// A role's consumer and producer.
pub(super) struct Link {
    pub(super) consumer: BaseConsumer<StageContext>,
    producer: BaseProducer<Deliveries>,
    exactly_once: bool,
    /// The transactional id (exactly-once: the group).
    id: String,
    open: bool,
    sent: u64,
    last_commit: Instant,
    interval: Duration,
}

impl Link {
    /// The link of a role whose group is `s.group_id` (its transactional id, too); the
    /// consumer's lag, errors and the brokers' state go to `health` and the metrics.
    pub(super) fn new(s: &StageSettings, health: &Arc<Health>) -> Result<Link> {
        let ctx = StageContext::new(Arc::clone(health), None);
        let consumer = super::kafka::role_consumer(s, ctx)?;
        let exactly_once = s.guarantee == Guarantee::ExactlyOnce;
        let producer = super::kafka::role_producer(
            s,
            Deliveries::default(),
            exactly_once.then_some(s.group_id.as_str()),
        )?;
        let mut link = Link {
            consumer,
            producer,
            exactly_once,
            id: s.group_id.clone(),
            open: false,
            sent: 0,
            last_commit: Instant::now(),
            interval: if exactly_once {
                s.transaction_interval
            } else {
                Duration::from_secs(1)
            },
        };
        if !s.standby {
            link.take_over()?;
        }
        Ok(link)
    }

    /// Makes this process the one that writes: under exactly-once it starts its
    /// transactions, which fences an earlier process of this role (a standby's other
    /// process, or this one before a restart) and aborts what that one left open. A
    /// process with a standby calls it once it holds the lease, and reads its group's
    /// committed offsets after it.
    pub(super) fn take_over(&mut self) -> Result<()> {
        if self.exactly_once {
            let what = "starting the transactions";
            let p = &self.producer;
            watched(what, &self.id, CALL, |d| p.init_transactions(d))
                .map_err(|e| fault(what, e))?;
        }
        Ok(())
    }

    /// The partitions of `topic`, as the brokers say (an error when it does not exist).
    pub(super) fn partitions(&self, topic: &str) -> Result<usize> {
        match topic_partitions(&self.consumer, topic)? {
            Some(parts) => Ok(parts.len()),
            None => bail!("topic {topic} does not exist: create it with neardup topics create"),
        }
    }

    /// Refuses topics a sharded decider cannot read: a signed topic split in partitions (the
    /// shards and the aggregator read one order) or a votes topic without one partition a
    /// shard.
    pub(super) fn check_topics(&self, s: &StageSettings) -> Result<()> {
        let signed_parts = self.partitions(&s.signed_topic)?;
        if signed_parts != 1 {
            bail!(
                "the signed topic {} has {signed_parts} partitions: the shards and the \
                 aggregator read one order, so it must have one",
                s.signed_topic
            );
        }
        let votes_parts = self.partitions(&s.votes_topic)?;
        if votes_parts != s.shards {
            bail!(
                "the votes topic {} has {votes_parts} partitions and the decider {} shards: it \
                 needs one partition a shard (neardup topics create --shards {})",
                s.votes_topic,
                s.shards,
                s.shards
            );
        }
        Ok(())
    }

    /// Refuses a partition whose first records are gone (a retention or compaction policy
    /// removed them): the role's state is read again from the start at every start.
    pub(super) fn check_kept_whole(&self, topic: &str, partition: i32) -> Result<()> {
        let (low, _) = self
            .consumer
            .fetch_watermarks(topic, partition, Duration::from_secs(30))
            .with_context(|| format!("cannot read the offsets of {topic}:{partition}"))?;
        if low > 0 {
            bail!(
                "{topic}:{partition} starts at offset {low}, its first records are gone: the \
                 shards and the aggregator read the signed and votes topics from their start at \
                 every start, so these must keep every record (retention.ms=-1, no compaction; \
                 neardup topics create --shards makes them so)"
            );
        }
        Ok(())
    }

    /// The offsets the group committed for these partitions (0 where none).
    pub(super) fn committed(&self, parts: &[(&str, i32)]) -> Result<Vec<i64>> {
        let mut tpl = TopicPartitionList::new();
        for (t, p) in parts {
            tpl.add_partition(t, *p);
        }
        // the group's coordinator may not be there yet (a new cluster, a broker that
        // moved): asked again for up to a minute
        let deadline = Instant::now() + CALL;
        let got = loop {
            match self
                .consumer
                .committed_offsets(tpl.clone(), Duration::from_secs(30))
            {
                Ok(got) => break got,
                Err(e) if Instant::now() < deadline => {
                    tracing::info!(error = %e, "the group's committed offsets: asking again");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(e).context("cannot read the group's committed offsets"),
            }
        };
        parts
            .iter()
            .map(|(t, p)| {
                Ok(match got.find_partition(t, *p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => 0,
                })
            })
            .collect()
    }

    /// The offsets the group committed for these partitions (0 where none), asked once
    /// within `timeout`: `None` when the brokers did not answer in time (a transaction's
    /// offsets still pending, a coordinator moving).
    pub(super) fn committed_once(
        &self,
        parts: &[(&str, i32)],
        timeout: Duration,
    ) -> Option<Vec<i64>> {
        let mut tpl = TopicPartitionList::new();
        for (t, p) in parts {
            tpl.add_partition(t, *p);
        }
        let got = match self.consumer.committed_offsets(tpl, timeout) {
            Ok(got) => got,
            Err(e) => {
                tracing::debug!(error = %e, "the group's committed offsets: not read this time");
                return None;
            }
        };
        Some(
            parts
                .iter()
                .map(
                    |(t, p)| match got.find_partition(t, *p).map(|e| e.offset()) {
                        Some(Offset::Offset(o)) => o,
                        _ => 0,
                    },
                )
                .collect(),
        )
    }

    /// Assigns the partitions `parts` from the offsets `at` beside them (0: from the start).
    pub(super) fn assign_at(&self, parts: &[(&str, i32)], at: &[i64]) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for (&(t, p), &at) in parts.iter().zip(at) {
            let offset = if at > 0 {
                Offset::Offset(at)
            } else {
                Offset::Beginning
            };
            tpl.add_partition_offset(t, p, offset)?;
        }
        self.consumer
            .assign(&tpl)
            .context("cannot assign the partitions")
    }

    /// The next offset the consumer reads of a partition (0 before its first fetch).
    pub(super) fn position(&self, topic: &str, partition: i32) -> i64 {
        match self
            .consumer
            .position()
            .ok()
            .and_then(|tpl| tpl.find_partition(topic, partition).map(|e| e.offset()))
        {
            Some(Offset::Offset(o)) => o,
            _ => 0,
        }
    }

    /// The next record, or none within 100 ms. A consume error is counted and logged, as
    /// the stage's consume task does, and the client goes on (it retries by itself).
    pub(super) fn poll(&self) -> Option<rdkafka::message::BorrowedMessage<'_>> {
        match self.consumer.poll(Duration::from_millis(100))? {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!(error = %e, "consume error");
                metrics::counter!(tm::KAFKA_ERRORS, "code" => super::kafka::code(&e)).increment(1);
                std::thread::sleep(Duration::from_millis(100));
                None
            }
        }
    }

    /// Pauses or resumes reading a partition (a queue of records waiting is full, or has room
    /// again).
    pub(super) fn pause(&self, topic: &str, partition: i32, paused: bool) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, partition);
        if paused {
            self.consumer.pause(&tpl)?;
        } else {
            self.consumer.resume(&tpl)?;
        }
        Ok(())
    }

    /// Opens a transaction unless one is open (exactly-once), under the watchdog as every
    /// transaction call.
    fn begin(&mut self) -> Result<()> {
        if !self.open {
            let (p, what) = (&self.producer, "beginning a transaction");
            watched(what, &self.id, TRANSACTION_CALL, |_| p.begin_transaction())
                .map_err(|e| fault(what, e))?;
            self.open = true;
        }
        Ok(())
    }

    /// Sends a record (in the open transaction under exactly-once, opened here when none is).
    pub(super) fn send(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        payload: &[u8],
        headers: &[(&str, String)],
    ) -> Result<()> {
        if self.exactly_once {
            self.begin()?;
        }
        let mut h = OwnedHeaders::new_with_capacity(headers.len());
        for (k, v) in headers {
            h = h.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        let mut rec = BaseRecord::to(topic).payload(payload).headers(h);
        if let Some(k) = key {
            rec = rec.key(k);
        }
        if let Some(p) = partition {
            rec = rec.partition(p);
        }
        loop {
            match self.producer.send(rec) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    rec = r;
                    self.producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => return Err(fault(&format!("producing to {topic}"), e)),
            }
        }
        self.producer.poll(Duration::ZERO);
        self.sent += 1;
        Ok(())
    }

    /// A commit is due: records were sent, and the interval passed or many were; or the
    /// offsets were last committed [`KEEP_OFFSETS`] ago.
    pub(super) fn due(&self) -> bool {
        (self.sent > 0
            && (self.sent >= COMMIT_RECORDS || self.last_commit.elapsed() >= self.interval))
            || self.last_commit.elapsed() >= KEEP_OFFSETS
    }

    /// Commits what was sent with these offsets (the next record to read of each partition):
    /// in the open transaction under exactly-once; else once every record is acknowledged.
    pub(super) fn commit(&mut self, offsets: &[(&str, i32, i64)]) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for (t, p, o) in offsets {
            tpl.add_partition_offset(t, *p, Offset::Offset(*o))?;
        }
        let started = Instant::now();
        if self.exactly_once {
            self.begin()?;
            // a call that fails in a way the client calls retriable is made again, as the
            // stage's are
            let (p, id) = (&self.producer, self.id.as_str());
            // each attempt under the watchdog, as the stage's: the client can wait without
            // end to add the offsets when the node that coordinated the group died
            let group = self
                .consumer
                .group_metadata()
                .context("the consumer has no group metadata")?;
            let what = "adding the offsets to the transaction";
            watched(what, id, TRANSACTION_CALL, |d| {
                p.send_offsets_to_transaction(&tpl, &group, d)
            })
            .map_err(|e| fault(what, e))?;
            let what = "committing the transaction";
            watched(what, id, TRANSACTION_CALL, |d| p.commit_transaction(d))
                .map_err(|e| fault(what, e))?;
            self.open = false;
            metrics::counter!(tm::TRANSACTIONS).increment(1);
            metrics::histogram!(tm::TRANSACTION_COMMIT_SECONDS)
                .record(started.elapsed().as_secs_f64());
        } else {
            let what = "waiting for the acknowledgements";
            let flushed = self.producer.flush(CALL);
            slow(what, started);
            flushed.map_err(|e| fault(what, e))?;
            let failed = self
                .producer
                .context()
                .failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(e) = failed {
                return Err(fault("a record was not acknowledged", e));
            }
            let at = Instant::now();
            let committed = self.consumer.commit(&tpl, CommitMode::Sync);
            slow("committing the offsets", at);
            committed.context("cannot commit the offsets")?;
        }
        self.sent = 0;
        self.last_commit = Instant::now();
        Ok(())
    }
}

/// The error of a failed call: under exactly-once, after a fault of the brokers, the exit a
/// restart is the answer to ([`DecideAgain`]); a restart reads the input again from its
/// start either way.
fn fault(what: &str, e: KafkaError) -> anyhow::Error {
    metrics::counter!(tm::KAFKA_ERRORS, "code" => super::kafka::code(&e)).increment(1);
    let why = format!("{what}: {e}");
    if broker_fault(&e) || matches!(&e, KafkaError::Transaction(t) if t.txn_requires_abort()) {
        anyhow::Error::new(DecideAgain(why))
    } else {
        anyhow::anyhow!(why)
    }
}
