//! The lease of a shard or an aggregator with a standby (`--standby`): two processes of one
//! role read the same topics, and the one that holds the lease writes while the other
//! follows.
//!
//! The lease is the signed topic's one partition in a consumer group of its own,
//! `GROUP.lease` (GROUP the role's group): a process joins it once it has read its topics
//! back to its group's committed offset, and holds the lease while the group assigns it the
//! partition. It never reads from it (the partition is paused). The group uses the
//! cooperative-sticky assignor, so a process that joins leaves the lease where it is; one
//! that stops cleanly leaves the group and hands the lease over at once, and one killed or
//! paused loses it when its session ends ([`STANDBY_SESSION_TIMEOUT`], unless
//! `session.timeout.ms` is set).
//!
//! What makes the hand-over safe is not the lease but the transactional id the two
//! processes share (the role's group): the process that takes over starts its transactions
//! with it, which fences the other and aborts what it left open (`Link::take_over`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::TopicPartitionList;
use tracing::{info, warn};

use super::link::Link;
use super::settings::{StageSettings, STANDBY_SESSION_TIMEOUT};
use crate::telemetry::{self as tm, Health};

/// A process's membership of its role's lease group.
pub(super) struct Lease {
    consumer: BaseConsumer,
    topic: String,
    paused: bool,
}

/// The lease group of a role whose group is `group`.
fn group(group: &str) -> String {
    format!("{group}.lease")
}

impl Lease {
    /// Joins the lease group of the role of `s`.
    pub(super) fn join(s: &StageSettings) -> Result<Lease> {
        let mut c = super::kafka::consumer_config(s, None);
        let session = s
            .properties
            .get("session.timeout.ms")
            .cloned()
            .unwrap_or_else(|| STANDBY_SESSION_TIMEOUT.as_millis().to_string());
        c.set("group.id", group(&s.group_id))
            .set("group.protocol", "classic")
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", &session)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "latest")
            .set("enable.partition.eof", "false");
        c.remove("group.instance.id");
        // no statistics: the lease reads nothing
        c.set("statistics.interval.ms", "0");
        let consumer: BaseConsumer = c
            .create()
            .context("cannot create the lease's Kafka consumer")?;
        consumer
            .subscribe(&[s.signed_topic.as_str()])
            .context("cannot join the lease group")?;
        info!(group = %group(&s.group_id), session_timeout_ms = %session,
            "standby: joined the lease group; the process that holds it writes");
        Ok(Lease {
            consumer,
            topic: s.signed_topic.clone(),
            paused: false,
        })
    }

    /// Serves the group (its rebalances run here): whether this process holds the lease.
    pub(super) fn held(&mut self) -> Result<bool> {
        // a record fetched before the partition was paused is dropped: the lease reads none
        while let Some(r) = self.consumer.poll(Duration::ZERO) {
            if let Err(e) = r {
                warn!(error = %e, "the lease group's consumer");
            }
        }
        let held = self
            .consumer
            .assignment()
            .context("the lease's assignment")?
            .find_partition(&self.topic, 0)
            .is_some();
        if held && !self.paused {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&self.topic, 0);
            self.consumer
                .pause(&tpl)
                .context("cannot pause the lease's partition")?;
        }
        self.paused = held;
        Ok(held)
    }
}

/// Where a role stands: a process without a standby always writes; one with a standby
/// follows (reads its topics up to its group's committed offset, writes nothing) until it
/// holds the lease, then takes over and writes until it stops or loses the lease.
pub(super) struct Turn {
    standby: bool,
    lease: Option<Lease>,
    writing: bool,
    /// When the committed offset was last read while following.
    checked: Instant,
    /// When this process took the lease, until it caught up with the committed offset.
    took: Option<Instant>,
}

/// What a role does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Read up to the committed offset, write nothing.
    Follow,
    /// Decide and write.
    Write,
    /// The lease went to the other process: stop at once, writing and committing nothing
    /// more (its restart follows).
    Lost,
}

impl Turn {
    pub(super) fn new(s: &StageSettings) -> Turn {
        if s.standby {
            metrics::gauge!(tm::STANDBY).set(1.0);
        }
        Turn {
            standby: s.standby,
            lease: None,
            writing: !s.standby,
            checked: Instant::now(),
            took: None,
        }
    }

    /// Whether this process writes.
    pub(super) fn writing(&self) -> bool {
        self.writing
    }

    /// Whether [`Turn::step`] reads `caught_up`: before joining the lease group, and after
    /// taking the lease until the committed offset is reached (so a role asks its consumer's
    /// position only then).
    pub(super) fn needs_catch_up(&self) -> bool {
        self.standby && (self.lease.is_none() || self.took.is_some())
    }

    /// The next step, from whether the role has read up to `committed` (its group's
    /// committed offset of the signed topic `parts[0]`, read again here every second while
    /// following, and once more on taking over).
    pub(super) fn step(
        &mut self,
        s: &StageSettings,
        link: &mut Link,
        parts: &[(&str, i32)],
        caught_up: bool,
        committed: &mut i64,
        health: &Health,
    ) -> Result<Step> {
        if !self.standby {
            return Ok(Step::Write);
        }
        if self.writing {
            if let (Some(t), true) = (self.took, caught_up) {
                let secs = t.elapsed().as_secs_f64();
                metrics::gauge!(tm::TAKEOVER_SECONDS).set(secs);
                info!(
                    seconds = secs,
                    committed = *committed,
                    "standby: took over, read up to the committed offset: writing"
                );
                self.took = None;
            }
            // (asked ten times a second, not a record at a time: exactly-once's fencing, not
            // this check, is what keeps a writer that lost the lease from writing)
            if self.checked.elapsed() < LEASE_CHECK {
                return Ok(Step::Write);
            }
            self.checked = Instant::now();
            let held = self
                .lease
                .as_mut()
                .expect("a writer holds the lease")
                .held()?;
            return Ok(if held { Step::Write } else { Step::Lost });
        }
        if self.lease.is_none() && caught_up {
            self.lease = Some(Lease::join(s)?);
            health.following_topics.store(true, Ordering::Relaxed);
            health.publish();
        }
        if let Some(lease) = &mut self.lease {
            if lease.held()? {
                let t = Instant::now();
                info!("standby: this process holds the lease; fencing the other and taking over");
                link.take_over()?;
                *committed = link.committed(&parts[..1])?[0];
                self.writing = true;
                self.took = Some(t);
                metrics::gauge!(tm::STANDBY).set(0.0);
                health.following_topics.store(false, Ordering::Relaxed);
                health.publish();
                info!(
                    committed = *committed,
                    "standby: took the lease; reading up to the committed offset"
                );
                return Ok(Step::Write);
            }
        }
        if self.checked.elapsed() >= FOLLOW_CHECK {
            // one short try: offsets a transaction left pending (its writer killed before
            // the commit) are not read until that transaction ends, which the take-over's
            // fencing does; the lease is served meanwhile, and the last offset kept
            if let Some(c) = link.committed_once(&parts[..1], FOLLOW_CHECK) {
                *committed = c[0];
            }
            self.checked = Instant::now();
        }
        Ok(Step::Follow)
    }
}

/// How often a following process reads its group's committed offset again.
const FOLLOW_CHECK: Duration = Duration::from_secs(1);

/// How often a writing process asks whether it still holds the lease.
const LEASE_CHECK: Duration = Duration::from_millis(100);
