//! The follow task of a decider with a standby: it follows the changelog until this process
//! holds the lease and the group assigns it the signed topic, then fences the other decider
//! (their shared transactional id), reads the changelog to its end and resumes the signed
//! topic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, Producer};
use tokio::sync::{oneshot, watch};
use tracing::{info, warn};

use super::commit::{transaction_call, Transactions};
use super::kafka::{self, StageConsumer, StageContext};
use super::settings::StageSettings;
use super::standby::{self, Standby};
use super::watchdog::START_TRANSACTIONS;
use crate::dedup::Deduplicator;
use crate::telemetry::{self as tm, Health};

/// How following ended.
struct Followed {
    dedup: Deduplicator,
    /// The first record of the signed topic that arrived while following (it should not:
    /// the assignment is paused), read again after the take-over.
    again: Option<(String, i32, i64)>,
    /// A stop signal ended it.
    stopped: bool,
}

/// Follows, then takes over. False: the stage stopped (a signal, or the signed topic went
/// away again before the take-over ended); the index is back in `dedup` either way.
#[allow(clippy::too_many_arguments)]
pub(super) async fn follow_then_take_over(
    s: &StageSettings,
    sb: &Standby,
    t: &Transactions,
    p: &FutureProducer<StageContext>,
    consumer: &StageConsumer,
    dedup: &mut Option<Deduplicator>,
    health: &Arc<Health>,
    stop_rx: &mut watch::Receiver<bool>,
) -> Result<bool> {
    let Some(d) = dedup.take() else {
        return Ok(false);
    };
    let followed = follow_until_assigned(s, sb, consumer, d, health, stop_rx).await?;
    if followed.stopped || s.shutdown.requested() {
        health.following.store(false, Ordering::Relaxed);
        *dedup = Some(followed.dedup);
        return Ok(false);
    }
    if consumer.assignment().map_or(0, |a| a.count()) == 0 {
        // taken away again before the take-over began: the other decider is not fenced
        warn!("standby: the signed topic went away before the take-over; stopping (a restart follows the changelog)");
        sb.lose();
        health.following.store(false, Ordering::Relaxed);
        *dedup = Some(followed.dedup);
        return Ok(false);
    }
    take_over(s, sb, t, p, consumer, followed, dedup, health).await
}

/// Follows the changelog on a thread of its own while the consumer is polled (its
/// rebalance callbacks run then), until the signed topic is assigned (the consumer
/// subscribes once this process holds the lease), a stop, or an error.
async fn follow_until_assigned(
    s: &StageSettings,
    sb: &Standby,
    consumer: &StageConsumer,
    d: Deduplicator,
    health: &Arc<Health>,
    stop_rx: &mut watch::Receiver<bool>,
) -> Result<Followed> {
    let until = Arc::new(AtomicBool::new(false));
    health.following.store(true, Ordering::Relaxed);
    health.publish();
    info!(signed_topic = %s.signed_topic, changelog = s.changelog_topic.as_deref().unwrap_or(""),
        "standby: following the changelog until the signed topic is assigned to this process");
    let (done_tx, mut done_rx) = oneshot::channel();
    {
        let (s, health, until) = (s.clone(), Arc::clone(health), Arc::clone(&until));
        std::thread::Builder::new()
            .name("neardup-follow".into())
            .spawn(move || {
                let mut d = d;
                let r = standby::follow(&s, d.index_mut(), &health, &until, false);
                let _ = done_tx.send((d, r));
            })?;
    }
    let mut again: Option<(String, i32, i64)> = None;
    let mut stopped = false;
    let mut ended = None;
    let mut subscribed = false;
    // holding the lease, the assignment waits for the other process to leave the decider's
    // group (its session at most); far longer is said once
    let mut warn_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = sb.leased(), if !subscribed => {
                if *stop_rx.borrow() || s.shutdown.requested() {
                    // won and lost again, or a stop came with it: nothing to subscribe to
                    stopped = true;
                    break;
                }
                let topics: Vec<&str> = s.input_topics.iter().map(String::as_str).collect();
                if let Err(e) = consumer.subscribe(&topics) {
                    until.store(true, Ordering::Release);
                    return Err(anyhow!("cannot subscribe to the signed topic: {e}"));
                }
                subscribed = true;
                warn_at = Some(tokio::time::Instant::now() + ASSIGNMENT_WARN);
                info!(topics = ?s.input_topics, group = %s.group_id,
                    "standby: holding the lease, subscribed; waiting for the signed topic");
            }
            _ = sb.assigned() => break,
            _ = tokio::time::sleep_until(warn_at.unwrap_or_else(tokio::time::Instant::now)),
                if warn_at.is_some() => {
                warn_at = None;
                warn!(wait_s = ASSIGNMENT_WARN.as_secs_f64(), group = %s.group_id,
                    "standby: this process holds the lease but the signed topic is not \
                     assigned to it: another member of the decider's group keeps it (an older \
                     version without the lease, or a process of another index in the same \
                     group); following meanwhile");
            }
            _ = stop_rx.changed() => { stopped = true; break }
            r = &mut done_rx => {
                // the follower ended on its own: an error (a stop ends it too)
                ended = Some(r.map_err(|_| anyhow!("the changelog follower panicked"))?);
                break;
            }
            m = consumer.recv() => match m {
                Ok(m) => {
                    if again.is_none() {
                        again = Some((m.topic().to_string(), m.partition(), m.offset()));
                    }
                }
                Err(e) if kafka::fenced(&e) => {
                    until.store(true, Ordering::Release);
                    return Err(anyhow!(
                        "the broker fenced this member of group {}: another process has its \
                         instance id ({e})",
                        s.group_id
                    ));
                }
                Err(e) => {
                    warn!(error = %e, "consume error");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    until.store(true, Ordering::Release);
    let (dedup, followed) = match ended {
        Some(x) => x,
        None => done_rx
            .await
            .map_err(|_| anyhow!("the changelog follower panicked"))?,
    };
    let followed = followed.context("the standby cannot follow the changelog")?;
    info!(
        records = followed.records,
        changelog_next = followed.next,
        "standby: stopped following"
    );
    Ok(Followed {
        dedup,
        again,
        stopped,
    })
}

/// How long a process holding the lease waits for the signed topic before it says so.
const ASSIGNMENT_WARN: Duration = Duration::from_secs(60);

/// Fences the other decider (it writes nothing more) and ends its open transaction, reads
/// the changelog to its read_committed end, which is then all it committed, and resumes the
/// signed topic.
#[allow(clippy::too_many_arguments)]
async fn take_over(
    s: &StageSettings,
    sb: &Standby,
    t: &Transactions,
    p: &FutureProducer<StageContext>,
    consumer: &StageConsumer,
    followed: Followed,
    dedup: &mut Option<Deduplicator>,
    health: &Arc<Health>,
) -> Result<bool> {
    let started = Instant::now();
    info!("standby: the signed topic is assigned to this process: taking over");
    transaction_call("initialise transactions", t, START_TRANSACTIONS, |d| {
        p.init_transactions(d)
    })?;
    let fenced_s = started.elapsed().as_secs_f64();
    let (d, caught) = {
        let (s, health, mut d) = (s.clone(), Arc::clone(health), followed.dedup);
        tokio::task::spawn_blocking(move || {
            let never = AtomicBool::new(false);
            let r = standby::follow(&s, d.index_mut(), &health, &never, true);
            (d, r)
        })
        .await?
    };
    let caught = caught?;
    d.index()
        .flush_wal()
        .context("the index cannot write its log")?;
    *dedup = Some(d);
    health.following.store(false, Ordering::Relaxed);
    sb.activate();
    let assignment = consumer
        .assignment()
        .context("cannot read the consumer's assignment")?;
    if assignment.count() == 0 {
        warn!("standby: the signed topic went away during the take-over; stopping (a restart follows the changelog)");
        sb.lose();
        return Ok(false);
    }
    if let Some((topic, partition, offset)) = followed.again {
        consumer
            .seek(
                &topic,
                partition,
                rdkafka::Offset::Offset(offset),
                Duration::from_secs(10),
            )
            .context("cannot go back to the first signed record")?;
    }
    consumer
        .resume(&assignment)
        .context("cannot resume the signed topic")?;
    let secs = started.elapsed().as_secs_f64();
    metrics::gauge!(tm::TAKEOVER_SECONDS).set(secs);
    health.publish();
    info!(
        seconds = secs,
        fence_seconds = fenced_s,
        changelog_records = caught.records,
        changelog_next = caught.next,
        transactional_id = %t.id,
        "standby: took over; deciding the signed topic"
    );
    Ok(true)
}
