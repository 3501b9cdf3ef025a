//! A decider with a standby (`--standby`): two decider processes of one index, each with
//! its own index directory. Which of them decides is a lease: the signed topic's one
//! partition in the group `GROUP.lease` (GROUP the decider's group), which uses the
//! cooperative-sticky assignor, so a process that joins leaves the lease where it is (a
//! standby restarted beside a deciding process does not take its place). Only the process
//! that holds the lease joins the decider's own group on the signed topic.
//!
//! - **Following.** A process without the lease reads the changelog (`read_committed`) into
//!   its index, from the offset the index records
//!   ([`crate::index::Index::changelog_next`]), and is ready: it serves `/v1/group` and
//!   `/v1/explain` from its index.
//! - **Taking over.** When it gets the lease (the other process left, or its session of
//!   [`STANDBY_SESSION_TIMEOUT`](super::settings::STANDBY_SESSION_TIMEOUT) ran out), it
//!   subscribes to the signed topic and, once the group assigns it the partition, keeps the
//!   partition paused, starts its transactional producer with the id both processes share
//!   (the broker fences the other one and aborts the transaction it left open), reads the
//!   changelog to its end, and only then consumes the signed topic, from the offset the last
//!   committed transaction stored. Its index is then what the committed outputs announced: it
//!   decides as the other process would have.
//! - **Handing over.** A deciding process that loses the lease, or the signed topic in a
//!   rebalance, stops (its open transaction was committed before a revocation, and one left
//!   open is aborted by the other's fencing); its restart follows.
//! - **Starting.** Every start of such a process first removes the documents of decisions no
//!   changelog position covers yet ([`crate::index::Index::rewind_pending`]): committed ones
//!   come back from the changelog under their numbers, aborted ones stay away.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use super::lease::Lease;
use super::{changelog, kafka, StageSettings};
use crate::index::Index;
use crate::record;
use crate::telemetry::{self as tm, Health};

/// The state a decider with a standby shares with its consumer's rebalance callbacks.
pub struct Standby {
    /// This process decides (after its take-over).
    active: AtomicBool,
    /// The signed topic was assigned while following.
    assigned: Notify,
    /// This process got the lease while following.
    leased: Notify,
    /// The deciding process lost the signed topic.
    lost: AtomicBool,
    /// Ends the consuming loop (the stage's stop signal).
    stop: Arc<watch::Sender<bool>>,
}

impl Standby {
    /// A follower; `stop` ends the stage's consuming loop when it loses the signed topic.
    pub fn new(stop: Arc<watch::Sender<bool>>) -> Standby {
        metrics::gauge!(tm::STANDBY).set(1.0);
        Standby {
            active: AtomicBool::new(false),
            assigned: Notify::new(),
            leased: Notify::new(),
            lost: AtomicBool::new(false),
            stop,
        }
    }

    /// The signed topic went away during a take-over: the stage stops.
    pub fn lose(&self) {
        self.lost.store(true, Ordering::Release);
    }

    /// The deciding process lost the signed topic (the stage stopped for it).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Waits until the signed topic is assigned.
    pub async fn assigned(&self) {
        self.assigned.notified().await
    }

    /// Waits until this process holds the lease.
    pub async fn leased(&self) {
        self.leased.notified().await
    }

    /// Joins the lease group and serves it on a thread of its own until the returned keeper
    /// is dropped (every end of the stage, an error's included) or the stage stops: wakes
    /// [`Standby::leased`] when this process gets the lease, and stops the stage when it
    /// loses the lease it held (a paused process whose session ran out: the other one takes
    /// over and fences it).
    pub fn keep_lease(self: &Arc<Self>, s: &StageSettings) -> Result<LeaseKeeper> {
        let mut lease = Lease::join(s)?;
        let sb = Arc::clone(self);
        let shutdown = s.shutdown.clone();
        let quit = Arc::new(AtomicBool::new(false));
        let q = Arc::clone(&quit);
        let thread = std::thread::Builder::new()
            .name("neardup-lease".into())
            .spawn(move || {
                let mut held = false;
                while !q.load(Ordering::Acquire) && !shutdown.requested() && !*sb.stop.borrow() {
                    match lease.held() {
                        Ok(true) if !held => {
                            held = true;
                            info!("standby: this process holds the lease");
                            sb.leased.notify_one();
                        }
                        Ok(false) if held => {
                            warn!("standby: the lease went to the other decider; stopping (a restart follows the changelog)");
                            sb.lose();
                            let _ = sb.stop.send(true);
                            break;
                        }
                        Ok(_) => {}
                        Err(e) => warn!(error = %e, "standby: the lease group"),
                    }
                    std::thread::sleep(LEASE_POLL);
                }
                // dropped here: the lease group's consumer leaves the group, and the other
                // process takes the lease at once
                drop(lease);
            })
            .context("cannot start the lease thread")?;
        Ok(LeaseKeeper {
            quit,
            thread: Some(thread),
        })
    }

    /// From now on this process decides.
    pub fn activate(&self) {
        self.active.store(true, Ordering::Release);
        metrics::gauge!(tm::STANDBY).set(0.0);
    }
}

/// The lease thread of a decider with a standby: dropping it ends the thread, which leaves
/// the lease group (waited for up to [`LEASE_LEAVE`]), so that the other process need not
/// wait for this one's session to end.
pub struct LeaseKeeper {
    quit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = Instant::now() + LEASE_LEAVE;
        while !thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            warn!(
                wait_s = LEASE_LEAVE.as_secs_f64(),
                "standby: the lease group's consumer did not leave in time; the other process \
                 takes the lease when this one's session ends"
            );
        }
    }
}

/// How long the end of a stage waits for the lease group's consumer to leave its group.
const LEASE_LEAVE: Duration = Duration::from_secs(10);

/// How often the lease thread serves the lease group.
const LEASE_POLL: Duration = Duration::from_millis(100);

/// How often a follower writes out its index and the changelog offset it reached.
const FOLLOW_FLUSH: Duration = Duration::from_secs(1);

impl kafka::OnAssign for Standby {
    /// After an assignment (on the consumer's thread): a follower keeps the new partitions
    /// paused and wakes the take-over; a deciding process that got nothing stops.
    fn on_assign(
        &self,
        tpl: &TopicPartitionList,
        pause: &dyn Fn(&TopicPartitionList) -> Result<(), KafkaError>,
    ) {
        if self.active.load(Ordering::Acquire) {
            if tpl.count() == 0 {
                warn!("standby: the signed topic went to the other decider; stopping (a restart follows the changelog)");
                self.lost.store(true, Ordering::Release);
                let _ = self.stop.send(true);
            }
        } else if tpl.count() > 0 {
            if let Err(e) = pause(tpl) {
                warn!(error = %e, "standby: cannot pause the assigned signed topic");
            }
            self.assigned.notify_one();
        }
    }
}

/// What following did.
#[derive(Debug, Default)]
pub struct Followed {
    /// Changelog records applied.
    pub records: u64,
    /// The changelog offset after the last one.
    pub next: u64,
}

/// Follows the changelog into `index` from the offset the index records until `until` is
/// set (or the stage stops); with `to_end`, until the end of the changelog instead (a
/// `read_committed` end: after the other decider was fenced, everything it committed).
/// Blocking.
pub fn follow(
    s: &StageSettings,
    index: &mut Index,
    health: &Health,
    until: &AtomicBool,
    to_end: bool,
) -> Result<Followed> {
    let topic = s
        .changelog_topic
        .as_deref()
        .context("a standby needs the changelog")?;
    let from = index
        .changelog_next()
        .context("cannot read the index's changelog offset")?;
    if from.is_none() && index.next_doc() > 0 {
        warn!(
            topic,
            "standby: the index records no changelog offset (it was written without exactly-once \
             or before this version); reading the changelog from its start"
        );
    }
    let from = from.unwrap_or(0);
    let c = kafka::reader_with(s, "standby", to_end)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(from as i64))?;
    c.assign(&tpl)
        .context("cannot assign the changelog partition")?;
    let params_id = record::params_id(index.params());
    let stop = s.shutdown.flag();
    let mut done = Followed {
        records: 0,
        next: from,
    };
    let mut written = from;
    let mut last_flush = Instant::now();
    let flush = |index: &mut Index, next: u64| -> Result<()> {
        index.set_changelog_next(next)?;
        index
            .flush_wal()
            .context("the index cannot write its log")?;
        Ok(())
    };
    loop {
        if stop.load(Ordering::Relaxed) || (!to_end && until.load(Ordering::Acquire)) {
            break;
        }
        let polled = c.poll(Duration::from_millis(100));
        match polled {
            None => {}
            Some(Err(KafkaError::PartitionEOF(_))) if to_end => break,
            Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Err(e)) => {
                warn!(error = %e, "standby: changelog consume error");
                std::thread::sleep(Duration::from_millis(100));
            }
            Some(Ok(m)) => {
                changelog::apply(index, topic, &m, &params_id)?;
                metrics::counter!(tm::CHANGELOG_RESTORED).increment(1);
                done.records += 1;
                done.next = m.offset() as u64 + 1;
            }
        }
        if done.next != written && last_flush.elapsed() >= FOLLOW_FLUSH {
            flush(index, done.next)?;
            written = done.next;
            last_flush = Instant::now();
            health.publish();
        }
    }
    if done.next != written {
        flush(index, done.next)?;
    }
    Ok(done)
}
