//! The stage's start-up, in the order it must happen: the index (or, for a signer, the
//! signer alone), the Kafka clients, the output topics checked, exactly-once's fencing and
//! alignment, the changelog completed, the input subscribed or assigned, and a standby's
//! follow and take-over. A stop signal ends any of the waits; what was opened is closed.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::producer::{FutureProducer, Producer};
use tokio::sync::watch;
use tracing::info;

use super::align::align_index;
use super::changelog;
use super::close::{close_consumer, close_index};
use super::commit::{transaction_call, Transactions};
use super::flow::StageSummary;
use super::kafka::{self, ReplayBounds, StageConsumer, StageContext, TxnSync};
use super::membership;
use super::open::{open_decider, remove_scratch};
use super::settings::{Mode, StageSettings};
use super::standby::{LeaseKeeper, Standby};
use super::takeover::follow_then_take_over;
use super::watchdog::{START_TRANSACTIONS, TRANSACTION_CALL};
use crate::config::{Guarantee, Role};
use crate::dedup::Deduplicator;
use crate::http::ServiceSlot;
use crate::signature::Signer;
use crate::telemetry::{self as tm, Health};

/// What the stage runs with once started.
pub(super) struct Running {
    /// The decider's index; none for a signer.
    pub(super) dedup: Option<Deduplicator>,
    /// A dry run's checkpoint copy, removed at the end.
    pub(super) scratch: Option<PathBuf>,
    pub(super) signer: Arc<Signer>,
    pub(super) instance: Option<String>,
    /// Exactly-once: how a revocation waits for the records consumed before it.
    pub(super) sync: Option<Arc<TxnSync>>,
    pub(super) standby: Option<Arc<Standby>>,
    pub(super) ctx: StageContext,
    pub(super) consumer: Arc<StageConsumer>,
    /// Exactly-once: the transactions (their commits also tell the decider what they covered).
    pub(super) txn: Option<Transactions>,
    /// None for a dry run.
    pub(super) producer: Option<FutureProducer<StageContext>>,
    /// A replay's end offsets.
    pub(super) bounds: Option<ReplayBounds>,
    /// A decider with a standby: its lease, left when the stage ends (dropped last).
    pub(super) lease: Option<LeaseKeeper>,
}

/// How the start-up ended.
pub(super) enum StartUp {
    Ready(Box<Running>),
    /// Stopped before consuming anything: by a signal `during` a wait, or a standby that
    /// handed its place over (`by`).
    Stopped {
        during: &'static str,
        by: &'static str,
    },
}

/// Starts the stage. `stop_tx` ends a standby's wait when its place is taken.
pub(super) async fn start(
    s: &StageSettings,
    health: &Arc<Health>,
    service: &ServiceSlot,
    summary: &mut StageSummary,
    stop_tx: &Arc<watch::Sender<bool>>,
    stop_rx: &mut watch::Receiver<bool>,
) -> Result<StartUp> {
    let stopped = |during| StartUp::Stopped {
        during,
        by: "signal",
    };
    let Some((dedup, scratch, signer)) = open(s, health, service, summary).await? else {
        return Ok(stopped("index open"));
    };
    if *stop_rx.borrow() || s.shutdown.requested() {
        drop(dedup);
        remove_scratch(scratch);
        return Ok(stopped("index open"));
    }
    let mut r = connect(s, health, dedup, scratch, signer, stop_tx)?;
    let during = prepare(s, health, &mut r, summary, stop_rx).await?;
    if let Some(during) = during {
        drop(r.dedup);
        remove_scratch(r.scratch);
        return Ok(stopped(during));
    }
    if let (Some(sb), Some(t), Some(p)) = (&r.standby, &r.txn, &r.producer) {
        let taken =
            follow_then_take_over(s, sb, t, p, &r.consumer, &mut r.dedup, health, stop_rx).await?;
        if !taken {
            let by = if sb.lost() { "handed-over" } else { "signal" };
            if let Some(d) = &mut r.dedup {
                close_index(d);
            }
            drop(r.dedup);
            close_consumer(r.consumer);
            remove_scratch(r.scratch);
            return Ok(StartUp::Stopped {
                during: "standby",
                by,
            });
        }
    }
    Ok(StartUp::Ready(Box::new(r)))
}

/// The decider's index, or a signer's signer alone (it keeps no index): a dry run decides
/// against a checkpoint and leaves the index unchanged; opening reads the lists snapshot of
/// the last clean stop and enters the documents after it, or without one rebuilds the
/// in-memory lists from every stored document (about 25 s a million): /healthz answers
/// meanwhile, /readyz waits for it, a stop signal ends it (`None`).
#[allow(clippy::type_complexity)]
async fn open(
    s: &StageSettings,
    health: &Arc<Health>,
    service: &ServiceSlot,
    summary: &mut StageSummary,
) -> Result<Option<(Option<Deduplicator>, Option<PathBuf>, Arc<Signer>)>> {
    if s.role == Role::Signer {
        let signer = Signer::new(&s.params.signature)
            .map_err(|e| anyhow!("invalid signature settings: {e}"))?;
        health.index_open.store(true, Ordering::Relaxed);
        health.progressed();
        info!(role = s.role.as_str(), signed_topic = %s.signed_topic, "signer: no index");
        return Ok(Some((None, None, Arc::new(signer))));
    }
    Ok(open_decider(s, health, service, summary)
        .await?
        .map(|(dedup, scratch)| {
            let signer = dedup.signer();
            (Some(dedup), scratch, signer)
        }))
}

/// Makes the Kafka clients. A standby first undoes what its index holds beyond the
/// changelog offset it records: that comes back from the changelog if it was committed.
fn connect(
    s: &StageSettings,
    health: &Arc<Health>,
    mut dedup: Option<Deduplicator>,
    scratch: Option<PathBuf>,
    signer: Arc<Signer>,
    stop_tx: &Arc<watch::Sender<bool>>,
) -> Result<Running> {
    let instance = membership::instance_id(s)?;
    let exactly_once = s.guarantee == Guarantee::ExactlyOnce && !s.dry_run;
    let sync = exactly_once.then(|| Arc::new(TxnSync::default()));
    let standby = s
        .standby
        .then(|| Arc::new(Standby::new(Arc::clone(stop_tx))));
    if let (Some(_), Some(d)) = (&standby, &mut dedup) {
        let done = d
            .index_mut()
            .rewind_pending()
            .context("cannot undo the decisions no changelog offset covers")?;
        info!(
            removed = done.removed,
            marks = done.uncommitted,
            changelog_next = d.index().changelog_next().ok().flatten(),
            "standby: the index is the changelog up to the offset it records"
        );
    }
    // the process that holds the lease joins the decider's group on the signed topic
    let lease = standby.as_ref().map(|sb| sb.keep_lease(s)).transpose()?;
    let on_assign = standby.clone().map(|sb| -> Arc<dyn kafka::OnAssign> { sb });
    let ctx = StageContext::new(Arc::clone(health), sync.clone()).with_standby(on_assign);
    // a decider with a standby is a dynamic member of the decider's group: which process
    // decides is the lease's, and one that stops cleanly leaves the group at once, so the
    // other is assigned the signed topic without waiting for the stopped one's session
    let member = if s.standby { None } else { instance.as_deref() };
    let consumer = Arc::new(kafka::consumer(s, ctx.clone(), member)?);
    let txn = sync.as_ref().map(|sync| Transactions {
        id: membership::transactional_id(s, instance.as_deref()),
        interval: s.transaction_interval,
        committed: Arc::default(),
        sync: Arc::clone(sync),
    });
    let producer = if s.dry_run {
        None
    } else {
        Some(kafka::producer(
            s,
            ctx.clone(),
            txn.as_ref().map(|t| t.id.as_str()),
        )?)
    };
    Ok(Running {
        dedup,
        scratch,
        signer,
        instance,
        sync,
        standby,
        ctx,
        consumer,
        txn,
        producer,
        bounds: None,
        lease,
    })
}

/// Checks the outputs, fences an older process and aligns the index (exactly-once),
/// completes the changelog and subscribes or assigns the input. `Some(wait)`: a stop signal
/// ended that wait.
async fn prepare(
    s: &StageSettings,
    health: &Health,
    r: &mut Running,
    summary: &mut StageSummary,
    stop_rx: &mut watch::Receiver<bool>,
) -> Result<Option<&'static str>> {
    if let Some(p) = &r.producer {
        let (p, s2) = (p.clone(), s.clone());
        let check = tokio::task::spawn_blocking(move || kafka::missing_outputs(&p, &s2));
        // a stop ends the wait (brokers unreachable: up to 5 s a topic)
        let missing = tokio::select! {
            m = check => m?,
            _ = stop_rx.changed() => return Ok(Some("topic check")),
        };
        if !missing.is_empty() {
            bail!(
                "output topic{} {} {} not exist: create {} first (neardup topics create makes \
                 the stage's topics)",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                if missing.len() > 1 { "do" } else { "does" },
                if missing.len() > 1 { "them" } else { "it" },
            );
        }
    }
    for t in &s.input_topics {
        // a ready stage shows its counters before its first record
        metrics::counter!(tm::RECORDS_IN, "topic" => t.clone()).increment(0);
    }
    if let (Some(t), Some(p), None) = (&r.txn, &r.producer, &r.standby) {
        // fences an older process of this index (it writes nothing more) and ends the
        // transaction it left open, so the committed offsets read below are final
        let started = Instant::now();
        transaction_call("initialise transactions", t, START_TRANSACTIONS, |d| {
            p.init_transactions(d)
        })?;
        info!(transactional_id = %t.id, interval_ms = t.interval.as_millis() as u64,
            seconds = started.elapsed().as_secs_f64(), "exactly-once: transactions initialised");
        if let Some(d) = &mut r.dedup {
            align_index(d, &r.consumer).await?;
        }
    }
    if let (Some(p), Some(topic), Some(d), None) =
        (&r.producer, &s.changelog_topic, &r.dedup, &r.standby)
    {
        // the documents stored just before a crash may be missing from the changelog, or the
        // changelog is new beside an existing index (with exactly-once, in bounded
        // transactions of their own: a transactional producer sends nothing outside one)
        let txn = r.txn.as_ref();
        let step = |st: changelog::TxnStep| -> Result<()> {
            let t = txn.expect("exactly-once");
            match st {
                changelog::TxnStep::Begin => {
                    transaction_call("begin a transaction", t, TRANSACTION_CALL, |_| {
                        p.begin_transaction()
                    })
                }
                changelog::TxnStep::Commit => {
                    transaction_call("commit the transaction", t, START_TRANSACTIONS, |d| {
                        p.commit_transaction(d)
                    })
                }
            }
        };
        let step: Option<&(dyn Fn(changelog::TxnStep) -> Result<()> + Send + Sync)> =
            if txn.is_some() { Some(&step) } else { None };
        changelog::republish(s, d.index(), p, topic, summary.restored > 0, step).await?;
    }
    match s.mode {
        Mode::Run if r.standby.is_some() => {
            info!(topic = %s.signed_topic, group = %s.group_id,
                "standby: subscribing to the signed topic once this process holds the lease");
        }
        Mode::Run => {
            let topics: Vec<&str> = s.input_topics.iter().map(String::as_str).collect();
            r.consumer.subscribe(&topics).context("cannot subscribe")?;
            info!(topics = ?s.input_topics, group = %s.group_id,
                instance_id = r.instance.as_deref().unwrap_or("(dynamic)"), "subscribed");
        }
        Mode::Replay => {
            let c = Arc::clone(&r.consumer);
            let s2 = s.clone();
            let assign = tokio::task::spawn_blocking(move || kafka::assign_replay(&c, &s2));
            let b = tokio::select! {
                b = assign => b??,
                _ = stop_rx.changed() => return Ok(Some("replay assignment")),
            };
            health.assigned.store(b.len(), Ordering::Relaxed);
            summary.partitions = b.ranges();
            r.bounds = Some(b);
        }
    }
    Ok(None)
}
