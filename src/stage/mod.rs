//! The Kafka stage: `neardup run` (a consumer group member) and `neardup replay` (a bounded
//! pass over a historical topic). It only drives the [`Deduplicator`]; nothing here decides.
//!
//! # Tasks
//!
//! ```text
//! consume ──► sign pool (rayon, `jobs` threads) ──► decide thread ──► produce ──► commit
//!  (recv)       decode, strip, sign                one at a time,     acks=all,    offsets after
//!                                                  input order        idempotent   the ack, in order
//! ```
//!
//! [`stage`] is their composition, each task in a file of its own: [`start`] (the index,
//! the clients, exactly-once's fencing and alignment ([`align`]), the input; a standby's
//! [`takeover`], which follows the changelog), [`consume`], [`sign`] (decode a signed record,
//! or strip and sign a page), [`decide`] (or a signer's [`signer`] loop), [`produce`],
//! [`commit`] (exactly-once's transactions) and [`finish`] (drain, final commit, index
//! flush); [`close`] closes the clients and the index within bounds.
//!
//! # Guarantees
//!
//! - **Bounded**: a semaphore of `max-in-flight` permits is taken when a record is consumed
//!   and given back when its output is acknowledged; every channel is bounded by it.
//! - **At-least-once**: `enable.auto.offset.store=false`; the offset of a record is stored
//!   only after its output record was acknowledged, and acknowledgements are handled in
//!   consumption order, so a stored offset never passes a record whose output is not
//!   durable. Stored offsets are committed every second and on shutdown.
//! - **Exactly-once** (`--guarantee exactly-once`): outputs and input offsets commit together
//!   in Kafka transactions ([`commit`]); decisions are marked in the index until a commit
//!   covers them, and at start the index drops what no commit covered ([`align`]).
//! - **Idempotent**: a redelivered record has an id the index already holds, so it gets the
//!   stored decision and the same output bytes (tagged records carry no per-run fields).
//! - **Ordered**: records are decided and produced in consumption order, which keeps the
//!   order within each partition; the idempotent producer keeps it on the broker.
//! - **Shutdown**: SIGTERM / SIGINT stop consumption, in-flight records are finished within
//!   the grace period, stored offsets are committed and the index is flushed.
//! - **Fatal errors** (the index cannot be written, an output cannot be produced): the stage
//!   stops consuming, readiness turns false, the records before the failure are finished,
//!   nothing after it is committed, and the process exits with an error.

mod aggregate;
mod align;
mod changelog;
mod checkpoint;
mod close;
mod commit;
mod consume;
mod decide;
mod finish;
mod flow;
pub mod kafka;
mod lease;
mod link;
mod membership;
mod open;
mod produce;
mod restart;
pub mod settings;
mod shard;
mod sign;
mod signer;
mod standby;
mod start;
mod takeover;
mod watchdog;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch, Semaphore};
use tracing::{error, info};

pub use crate::config::Role;
use crate::http::{AppState, ServiceSlot};
use crate::telemetry::{self as tm, Health};
pub use restart::{exit_code, DecideAgain, EXIT_DECIDE_AGAIN};
pub use settings::{Membership, Mode, StageSettings, Start};

use consume::Intake;
use decide::{decide_loop, Counts, Decided};
pub use flow::{
    HopTimes, StageSummary, HEADER_CANONICAL, HEADER_DECISION, HEADER_ID, HEADER_REASON,
    HEADER_SCHEMA,
};
use flow::{Job, Outbound};
use open::remove_scratch;
use produce::produce_loop;
use sign::SignPool;
use start::StartUp;

/// Runs the stage until `shutdown` is triggered (run) or until the replay bounds are reached
/// (replay); on a stop it drains what is in flight and returns.
pub fn run(
    mut settings: StageSettings,
    shutdown: crate::shutdown::Shutdown,
) -> Result<StageSummary> {
    settings.shutdown = shutdown;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("neardup-io")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = rt.block_on(run_async(settings));
    // a blocking task a stop left behind (the metadata reads of a replay's assignment, up to
    // 30 s each) must not hold the exit: everything that matters was awaited above
    rt.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn run_async(s: StageSettings) -> Result<StageSummary> {
    let started = Instant::now();
    let health = Arc::new(Health::default());
    let metrics = tm::metrics_handle()?;
    let service: Arc<ServiceSlot> = Arc::default();
    let http = match s.listen {
        Some(addr) => {
            let l = crate::http::bind(addr).await?;
            info!(address = %addr, "serving /metrics, /healthz, /readyz, /v1/group, /v1/explain");
            let state = AppState {
                health: Arc::clone(&health),
                metrics: metrics.clone(),
                service: Arc::clone(&service),
            };
            let limits = s.http;
            let app = crate::http::router(state, limits);
            Some(tokio::spawn(crate::http::serve(
                l,
                app,
                limits,
                std::future::pending(),
                Duration::ZERO,
            )))
        }
        None => None,
    };
    health.publish();
    let result = match s.role {
        Role::Shard | Role::Aggregator => {
            tokio::task::block_in_place(|| sharded_role(&s, &health, started))
        }
        _ => stage(&s, &health, &service, started).await,
    };
    if let Err(e) = &result {
        let why = format!("{e:#}");
        health.fail(&why);
        if http.is_some() && !s.failure_hold.is_zero() {
            error!(error = %why, hold_s = s.failure_hold.as_secs_f64(),
                "stopped by a fatal error; /readyz and /metrics report it until the hold ends or SIGTERM");
            tokio::select! {
                _ = tokio::time::sleep(s.failure_hold) => {}
                _ = s.shutdown.wait() => {}
            }
        }
    }
    if let Some(h) = http {
        h.abort();
    }
    result
}

/// The stage proper, between opening the index and the final commit: a composition of its
/// tasks. Start-up ([`start`]), then the consume task ([`consume`]) hands records to the sign
/// pool ([`sign`]) and, in order, to the decider thread ([`decide`], or a signer's
/// [`signer`] loop), whose outputs the producer task sends and commits ([`produce`]); at a
/// stop, what is in flight is finished and the index closed ([`finish`]).
async fn stage(
    s: &StageSettings,
    health: &Arc<Health>,
    service: &ServiceSlot,
    started: Instant,
) -> Result<StageSummary> {
    let mut summary = StageSummary {
        mode: match s.mode {
            Mode::Run => "run".into(),
            Mode::Replay => "replay".into(),
        },
        dry_run: s.dry_run,
        stopped_by: "signal".into(),
        ..Default::default()
    };
    if s.replay_at_least_once {
        info!(
            "a replay is at-least-once: the file's guarantee exactly-once is the stage's \
             (neardup run); a replay run again writes its outputs again"
        );
    }
    let (stop_tx, mut stop_rx) = stop_signals(s, health);
    let mut r = match start::start(s, health, service, &mut summary, &stop_tx, &mut stop_rx).await?
    {
        StartUp::Ready(r) => *r,
        StartUp::Stopped { during, by } => {
            info!(
                during,
                "stop signal during start-up: stopped before consuming anything"
            );
            return Ok(StageSummary {
                stopped_by: by.into(),
                seconds: started.elapsed().as_secs_f64(),
                ..summary
            });
        }
    };
    let exactly_once = r.sync.is_some();

    let pool = SignPool::new(s, Arc::clone(&r.signer))?;
    let permits = Arc::new(Semaphore::new(s.max_in_flight));
    let (job_tx, job_rx) = mpsc::channel::<Job>(s.max_in_flight);
    let (out_tx, out_rx) = mpsc::channel::<Outbound>(s.max_in_flight);
    // exactly-once: the decider clears its marks with what the commits covered
    let committed = r.txn.as_ref().map(|t| Arc::clone(&t.committed));
    let decider = spawn_decider(s, r.dedup.take(), job_rx, out_tx, committed)?;
    let producing = tokio::spawn(produce_loop(
        r.producer.take(),
        Arc::from(s.dead_letter_topic.as_str()),
        Arc::clone(&r.consumer),
        out_rx,
        s.max_in_flight,
        Arc::clone(health),
        s.dry_run,
        r.txn.take(),
    ));
    let consumed = Intake {
        s,
        health,
        consumer: &r.consumer,
        ctx: &r.ctx,
        instance: r.instance.as_deref(),
        sync: r.sync.as_deref(),
        bounds: r.bounds.as_mut(),
        permits,
        pool: &pool,
        jobs: job_tx,
    }
    .run(&mut stop_rx)
    .await;
    summary.records = consumed.records;
    health.draining.store(true, Ordering::Relaxed);
    health.publish();

    let mut failure = consumed.failure;
    let mut dedup_back = None;
    match finish::drain(s, producing, decider).await {
        Ok(Some(done)) => {
            let (dedup, e) = finish::gather(&mut summary, done);
            dedup_back = dedup;
            failure = e.or(failure);
        }
        Ok(None) => {}
        Err(e) => failure = Some(e),
    }
    let mut stopped_by = consumed.stopped_by;
    if let Some(e) = &failure {
        stopped_by = "error";
        health.fail(&format!("{e:#}"));
    } else if r.standby.as_ref().is_some_and(|sb| sb.lost()) {
        stopped_by = "handed-over";
    }
    if !s.dry_run && !exactly_once {
        finish::commit_offsets(&r.consumer);
    }
    if let Some(d) = &mut dedup_back {
        finish::flush_index(s, d, &failure)?;
    }
    finish::leave(r.consumer);
    // a standby decider leaves its lease group last: the other process takes over at once
    drop(r.lease);
    drop(dedup_back);
    remove_scratch(r.scratch);
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
        hops = %serde_json::to_string(&summary.hops).unwrap_or_default(),
        "stage stopped"
    );
    match failure {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// A role of a decider split by owned pages: a shard ([`shard`]) or the aggregator
/// ([`aggregate`]), each one loop on its own Kafka link ([`link`]).
fn sharded_role(s: &StageSettings, health: &Arc<Health>, started: Instant) -> Result<StageSummary> {
    let mut summary = StageSummary {
        mode: "run".into(),
        stopped_by: "signal".into(),
        ..Default::default()
    };
    let outcome = if s.role == Role::Shard {
        shard::run(s, health).map(|c| {
            summary.records = c.records;
            summary.produced = c.records;
            if c.lost_lease {
                summary.stopped_by = "lease".into();
            }
        })
    } else {
        aggregate::run(s, health).map(|c| {
            summary.records = c.records;
            summary.unique = c.unique;
            summary.duplicate = c.duplicate;
            summary.skipped = c.skipped;
            summary.dead_letter = c.dead_letter;
            summary.repeated = c.repeated;
            summary.produced = c.records;
            if c.lost_lease {
                summary.stopped_by = "lease".into();
            }
        })
    };
    if let Err(e) = outcome {
        health.fail(&format!("{e:#}"));
        return Err(e);
    }
    summary.seconds = started.elapsed().as_secs_f64();
    summary.records_per_second = summary.records as f64 / summary.seconds.max(1e-9);
    info!(
        role = s.role.as_str(),
        records = summary.records,
        unique = summary.unique,
        duplicate = summary.duplicate,
        "stage stopped"
    );
    Ok(summary)
}

/// Stop signals: caught since the process started ([`crate::signals`]); from here on they
/// also end the waits of the start-up and the consume task, and turn readiness to draining.
fn stop_signals(
    s: &StageSettings,
    health: &Arc<Health>,
) -> (Arc<watch::Sender<bool>>, watch::Receiver<bool>) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    let (health, tx, shutdown) = (Arc::clone(health), Arc::clone(&stop_tx), s.shutdown.clone());
    tokio::spawn(async move {
        shutdown.wait().await;
        info!("stop signal: draining in-flight records");
        health.draining.store(true, Ordering::Relaxed);
        health.publish();
        let _ = tx.send(true);
    });
    (stop_tx, stop_rx)
}

/// The decider thread (one, decisions in consumption order), or the signer's loop in its
/// place; it hands the index back when the job channel closes.
fn spawn_decider(
    s: &StageSettings,
    mut dedup: Option<crate::dedup::Deduplicator>,
    jobs: mpsc::Receiver<Job>,
    out: mpsc::Sender<Outbound>,
    committed: Option<Arc<std::sync::Mutex<commit::Committed>>>,
) -> Result<std::thread::JoinHandle<Decided>> {
    let s = s.clone();
    Ok(std::thread::Builder::new()
        .name("neardup-decide".into())
        .spawn(move || {
            let mut counts = Counts::default();
            let r = match dedup.as_mut() {
                Some(d) => decide_loop(&s, d, jobs, out, &mut counts, committed),
                None => signer::sign_loop(&s, jobs, out, &mut counts),
            };
            (dedup, counts, r)
        })?)
}

#[cfg(test)]
mod tests;
