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
//! - **Exactly-once** (`--guarantee exactly-once`): outputs and input offsets commit together
//!   in Kafka transactions ([`produce`]); decisions are marked in the index until a commit
//!   covers them, and at start the index drops what no commit covered ([`align_index`]).
//! - **Idempotent**: a redelivered record has an id the index already holds, so it gets the
//!   stored decision and the same output bytes (tagged records carry no per-run fields).
//! - **Ordered**: records are decided and produced in consumption order, which keeps the
//!   order within each partition; the idempotent producer keeps it on the broker.
//! - **Shutdown**: SIGTERM / SIGINT stop consumption, in-flight records are finished within
//!   the grace period, stored offsets are committed and the index is flushed.
//! - **Fatal errors** (the index cannot be written, an output cannot be produced): the stage
//!   stops consuming, readiness turns false, the records before the failure are finished,
//!   nothing after it is committed, and the process exits with an error.

mod changelog;
mod decide;
mod flow;
pub mod kafka;
mod membership;
mod open;
mod produce;
pub mod settings;
mod signer;
mod standby;
mod watchdog;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, Producer};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tracing::{error, info, warn};

pub use crate::config::Role;
use crate::http::{AppState, ServiceSlot};
use crate::prepare::{prepare, PrepareTimes, Prepared};
use crate::record::signed::{signature_id, SignedRecord};
use crate::telemetry::{self as tm, Health};
pub use settings::{Membership, Mode, StageSettings, Start};

use crate::config::Guarantee;
use decide::{decide_loop, Counts};
use flow::{
    parse_position, since_ms, Generation, InFlight, Inbound, Job, Outbound, PrepOutput, HEAD_BYTES,
};
pub use flow::{
    HopTimes, StageSummary, HEADER_CANONICAL, HEADER_DECISION, HEADER_REASON, HEADER_SCHEMA,
};
use kafka::{StageConsumer, StageContext};
use open::{open_decider, remove_scratch};
use produce::{produce_loop, Committed, Transactions};

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

/// A signed record as the decider's pool prepares it: the page and its signatures, or why
/// the record is bad; the page's input timestamp, else the signed record's own.
fn decode_signed(
    payload: Vec<u8>,
    want: &str,
    fp_words: usize,
    timestamp_ms: Option<i64>,
) -> PrepOutput {
    let started = Instant::now();
    let p = SignedRecord::decode(&payload, want, fp_words);
    let times = PrepareTimes {
        decode: started.elapsed(),
        ..Default::default()
    };
    let (prepared, has_text, origin_ms) = match p {
        Ok((page, signed, text, origin)) => (
            Prepared::Page(Box::new((page, signed))),
            text,
            origin.or(timestamp_ms),
        ),
        Err(bad) => (Prepared::Bad(bad), false, timestamp_ms),
    };
    PrepOutput {
        payload,
        prepared,
        times,
        has_text,
        origin_ms,
        ran: (started, Instant::now()),
    }
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
    let result = stage(&s, &health, &service, started).await;
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

/// The stage proper, between opening the index and the final commit.
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
    // stop signals: caught since the process started (crate::signals); from here on they
    // also end the waits of the start-up
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    {
        let health = Arc::clone(health);
        let stop_tx = Arc::clone(&stop_tx);
        let shutdown = s.shutdown.clone();
        tokio::spawn(async move {
            shutdown.wait().await;
            info!("stop signal: draining in-flight records");
            health.draining.store(true, Ordering::Relaxed);
            health.publish();
            let _ = stop_tx.send(true);
        });
    }
    let stopped_early = |summary: StageSummary, during: &str| {
        info!(
            during,
            "stop signal during start-up: stopped before consuming anything"
        );
        StageSummary {
            seconds: started.elapsed().as_secs_f64(),
            ..summary
        }
    };

    // the index (not for a signer, which keeps none): a dry run decides against a
    // checkpoint and leaves the index unchanged; opening reads the lists snapshot of the
    // last clean stop and enters the documents after it, or without one rebuilds the
    // in-memory lists from every stored document (about 25 s a million): /healthz answers
    // meanwhile, /readyz waits for it, a stop signal ends it
    let (mut dedup, scratch, signer) = if s.role == Role::Signer {
        let signer = crate::signature::Signer::new(&s.params.signature)
            .map_err(|e| anyhow!("invalid signature settings: {e}"))?;
        health.index_open.store(true, Ordering::Relaxed);
        health.progressed();
        info!(role = s.role.as_str(), signed_topic = %s.signed_topic, "signer: no index");
        (None, None, Arc::new(signer))
    } else {
        match open_decider(s, health, service, &mut summary).await? {
            Some((dedup, scratch)) => {
                let signer = dedup.signer();
                (Some(dedup), scratch, signer)
            }
            None => return Ok(stopped_early(summary, "index open")),
        }
    };
    if *stop_rx.borrow() || s.shutdown.requested() {
        drop(dedup);
        remove_scratch(scratch);
        return Ok(stopped_early(summary, "index open"));
    }

    let instance = membership::instance_id(s)?;
    let exactly_once = s.guarantee == Guarantee::ExactlyOnce && !s.dry_run;
    let sync = exactly_once.then(|| Arc::new(kafka::TxnSync::default()));
    let standby = s
        .standby
        .then(|| Arc::new(standby::Standby::new(Arc::clone(&stop_tx))));
    if let (Some(_), Some(d)) = (&standby, &mut dedup) {
        // the index is the changelog below the offset it records: what decisions stored
        // beyond it goes, and comes back from the changelog if it was committed
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
    let on_assign = standby.clone().map(|sb| -> Arc<dyn kafka::OnAssign> { sb });
    let ctx = StageContext::new(Arc::clone(health), sync.clone()).with_standby(on_assign);
    let consumer: Arc<StageConsumer> =
        Arc::new(kafka::consumer(s, ctx.clone(), instance.as_deref())?);
    let committed: Arc<std::sync::Mutex<Committed>> = Arc::default();
    let txn = if exactly_once {
        Some(Transactions {
            id: membership::transactional_id(s, instance.as_deref()),
            interval: s.transaction_interval,
            committed: Arc::clone(&committed),
            sync: Arc::clone(sync.as_ref().expect("exactly-once")),
        })
    } else {
        None
    };
    let producer: Option<FutureProducer<StageContext>> = if s.dry_run {
        None
    } else {
        Some(kafka::producer(
            s,
            ctx.clone(),
            txn.as_ref().map(|t| t.id.as_str()),
        )?)
    };
    if let Some(p) = &producer {
        let (p, s2) = (p.clone(), s.clone());
        let check = tokio::task::spawn_blocking(move || {
            kafka::missing_outputs(&p, &s2, Duration::from_secs(5))
        });
        // a stop ends the wait (brokers unreachable: up to 5 s a topic)
        let missing = tokio::select! {
            m = check => m?,
            _ = stop_rx.changed() => return Ok(stopped_early(summary, "topic check")),
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
    if let (Some(t), Some(p), None) = (&txn, &producer, &standby) {
        // fences an older process of this index (it writes nothing more) and ends the
        // transaction it left open, so the committed offsets read below are final
        let started = Instant::now();
        produce::transaction_call("initialise transactions", t, || {
            p.init_transactions(Duration::from_secs(30))
        })?;
        info!(transactional_id = %t.id, interval_ms = t.interval.as_millis() as u64,
            seconds = started.elapsed().as_secs_f64(), "exactly-once: transactions initialised");
        if let Some(d) = &mut dedup {
            align_index(d, &consumer).await?;
        }
    }
    if let (Some(p), Some(topic), Some(d), None) = (&producer, &s.changelog_topic, &dedup, &standby)
    {
        // the documents stored just before a crash may be missing from the changelog, or the
        // changelog is new beside an existing index (with exactly-once, in bounded
        // transactions of their own: a transactional producer sends nothing outside one)
        let step = |st: changelog::TxnStep| -> Result<()> {
            let t = txn.as_ref().expect("exactly-once");
            match st {
                changelog::TxnStep::Begin => {
                    produce::transaction_call("begin a transaction", t, || p.begin_transaction())
                }
                changelog::TxnStep::Commit => {
                    produce::transaction_call("commit the transaction", t, || {
                        p.commit_transaction(Duration::from_secs(30))
                    })
                }
            }
        };
        let step: Option<&(dyn Fn(changelog::TxnStep) -> Result<()> + Send + Sync)> =
            if txn.is_some() { Some(&step) } else { None };
        changelog::republish(s, d.index(), p, topic, summary.restored > 0, step).await?;
    }
    let mut bounds = match s.mode {
        Mode::Run => {
            let topics: Vec<&str> = s.input_topics.iter().map(String::as_str).collect();
            consumer.subscribe(&topics).context("cannot subscribe")?;
            info!(topics = ?s.input_topics, group = %s.group_id,
                instance_id = instance.as_deref().unwrap_or("(dynamic)"), "subscribed");
            None
        }
        Mode::Replay => {
            let c = Arc::clone(&consumer);
            let s2 = s.clone();
            let assign = tokio::task::spawn_blocking(move || kafka::assign_replay(&c, &s2));
            let b = tokio::select! {
                b = assign => b??,
                _ = stop_rx.changed() => {
                    drop(dedup);
                    remove_scratch(scratch);
                    return Ok(stopped_early(summary, "replay assignment"));
                }
            };
            health.assigned.store(b.len(), Ordering::Relaxed);
            Some(b)
        }
    };
    if let Some(b) = &bounds {
        summary.partitions = b.ranges();
    }
    if let (Some(sb), Some(t), Some(p)) = (&standby, &txn, &producer) {
        // follow the changelog until the signed topic is assigned, then take over
        let taken = take_over(s, sb, t, p, &consumer, &mut dedup, health, &mut stop_rx).await?;
        if !taken {
            if let Some(d) = &mut dedup {
                close_index(d);
            }
            drop(dedup);
            let c = Arc::clone(&consumer);
            drop(consumer);
            if bounded("close", CLIENT_CLOSE_WAIT, move || drop(c)).is_none() {
                warn!("the Kafka consumer did not close in time (brokers unreachable?); not waiting for it");
            }
            return Ok(StageSummary {
                stopped_by: if sb.lost() { "handed-over" } else { "signal" }.into(),
                ..stopped_early(summary, "standby")
            });
        }
    }

    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(s.jobs)
            .thread_name(|i| format!("neardup-sign-{i}"))
            .build()?,
    );
    let signature_id: Arc<str> = Arc::from(signature_id(&s.params.signature).as_str());
    let fp_words = (s.params.signature.fingerprint_bits / 64) as usize;
    let sem = Arc::new(Semaphore::new(s.max_in_flight));
    let (job_tx, job_rx) = mpsc::channel::<Job>(s.max_in_flight);
    let (out_tx, out_rx) = mpsc::channel::<Outbound>(s.max_in_flight);

    // the decider (one thread, decisions in consumption order), or the signer's loop
    let decider = {
        let s = s.clone();
        let committed = exactly_once.then(|| Arc::clone(&committed));
        std::thread::Builder::new()
            .name("neardup-decide".into())
            .spawn(move || {
                let mut counts = Counts::default();
                let r = match dedup.as_mut() {
                    Some(d) => decide_loop(&s, d, job_rx, out_tx, &mut counts, committed),
                    None => signer::sign_loop(&s, job_rx, out_tx, &mut counts),
                };
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
        txn,
    ));

    // consume until stopped, failed or (replay) at the end offsets
    let mut stopped_by = "signal";
    let mut consume_failure: Option<anyhow::Error> = None;
    let mut generation: Option<Generation> = None;
    if bounds.as_ref().is_some_and(|b| b.all_done()) {
        stopped_by = "end";
    } else {
        loop {
            if *stop_rx.borrow() || s.shutdown.requested() {
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
                Err(e) if kafka::fenced(&e) => {
                    let why = format!(
                        "the broker fenced this member: another process is in group {} with \
                         instance id {}, or this one's group session timed out (brokers \
                         unreachable for longer than session.timeout.ms) and it was replaced; \
                         a restart rejoins. Give each process its own --instance-id: a copy \
                         of an index directory carries the id it keeps (file instance-id), \
                         delete that file in the copy to have a new id made",
                        s.group_id,
                        instance.as_deref().unwrap_or("?")
                    );
                    error!(error = %e, "{why}");
                    consume_failure = Some(anyhow!(why));
                    stopped_by = "error";
                    break;
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
            let mut inbound = Inbound {
                topic: Arc::from(topic),
                partition,
                offset,
                key: m.key().map(<[u8]>::to_vec),
                timestamp_ms: m.timestamp().to_millis(),
                consumed: Instant::now(),
                broker_wait: since_ms(m.timestamp().to_millis()),
                head: value[..value.len().min(HEAD_BYTES)].to_vec(),
                len: value.len(),
                prepared: None,
                generation: None,
                _permit: InFlight::new(permit),
            };
            let payload = m.payload().map(<[u8]>::to_vec).unwrap_or_default();
            drop(m);
            if exactly_once {
                let epoch = ctx.rebalances();
                if generation.as_ref().is_none_or(|g| g.epoch != epoch) {
                    generation = Some(Generation {
                        epoch,
                        metadata: consumer.group_metadata().map(Arc::new),
                    });
                }
                inbound.generation = generation.clone();
                if let Some(t) = &sync {
                    t.consumed.fetch_add(1, Ordering::AcqRel);
                }
            }
            let (tx, rx) = oneshot::channel();
            let (signer, max) = (Arc::clone(&signer), s.max_record_bytes);
            let signed_by = (s.role == Role::Decider).then(|| Arc::clone(&signature_id));
            let timestamp_ms = inbound.timestamp_ms;
            pool.spawn(move || {
                let out = match signed_by {
                    // the decider reads pages a signer signed
                    Some(want) => decode_signed(payload, &want, fp_words, timestamp_ms),
                    None => {
                        let started = Instant::now();
                        let (prepared, times) = prepare(&payload, &signer, max);
                        PrepOutput {
                            payload,
                            prepared,
                            times,
                            has_text: true,
                            origin_ms: timestamp_ms,
                            ran: (started, Instant::now()),
                        }
                    }
                };
                let _ = tx.send(out);
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

    let mut failure: Option<anyhow::Error> = consume_failure;
    let mut dedup_back = None;
    match drained {
        Err(_) if s.mode == Mode::Replay && !s.dry_run => {
            // a replay reads its range once: nothing comes again
            failure = Some(anyhow!(
                "grace period of {:?} over with records not produced: the replay did not \
                 answer its whole range; run it again",
                grace
            ));
        }
        Err(_) => {
            warn!(
                grace_s = grace.as_secs_f64(),
                "grace period over: records still in flight are left for redelivery"
            );
        }
        Ok(Err(e)) => failure = Some(e),
        Ok(Ok(((produced, mut lat), (dedup, counts, decided)))) => {
            summary.latency_p50_ms = lat.record.quantile_ms(0.5);
            summary.latency_p99_ms = lat.record.quantile_ms(0.99);
            summary.latency_max_ms = lat.record.max * 1000.0;
            for (name, l) in lat.all() {
                if l.seen > 0 {
                    summary.hops.insert(
                        name.to_string(),
                        HopTimes {
                            p50_ms: l.quantile_ms(0.5),
                            p99_ms: l.quantile_ms(0.99),
                            max_ms: l.max * 1000.0,
                        },
                    );
                }
            }
            summary.unique = counts.unique;
            summary.duplicate = counts.duplicate;
            summary.skipped = counts.skipped;
            summary.dead_letter = counts.dead_letter;
            summary.signed = counts.signed;
            summary.repeated = counts.repeated;
            summary.expired = counts.expired;
            match produced {
                Ok(n) => summary.produced = n,
                Err(e) => failure = Some(e),
            }
            if let Err(e) = decided {
                failure = Some(e);
            }
            dedup_back = dedup;
        }
    }
    if let Some(e) = &failure {
        stopped_by = "error";
        health.fail(&format!("{e:#}"));
    } else if standby.as_ref().is_some_and(|sb| sb.lost()) {
        stopped_by = "handed-over";
    }

    // commit what is stored (acknowledged outputs only), then flush the index
    // (a synchronous commit waits without end for a coordinator that is gone: bounded);
    // exactly-once committed the offsets in its transactions
    if !s.dry_run && !exactly_once {
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
    if let Some(d) = &mut dedup_back {
        match (d.index().flush(), &failure) {
            (Ok(()), _) => {}
            (Err(e), None) => return Err(anyhow!(e).context("cannot flush the index")),
            (Err(e), Some(_)) => warn!(error = %e, "cannot flush the index either"),
        }
        // the next start reads the lists instead of rebuilding them (a dry run's copy is
        // thrown away)
        if !s.dry_run {
            let t = Instant::now();
            match d.index_mut().save_lists() {
                Ok(Some(path)) => info!(path = %path.display(),
                    seconds = t.elapsed().as_secs_f64(), "lists snapshot written"),
                Ok(None) => {}
                Err(e) => warn!(error = %e,
                    "cannot write the lists snapshot; the next start rebuilds the lists"),
            }
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
    remove_scratch(scratch);
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

/// Exactly-once: brings the index back to the last committed transaction. Every decision
/// was marked with its input position before it was made; a mark at or after the group's
/// committed offset of its partition belongs to a transaction that was aborted or never
/// committed, and the document it stored is removed, so that its record, read again, is
/// decided as it was the first time.
async fn align_index(d: &mut crate::dedup::Deduplicator, consumer: &StageConsumer) -> Result<()> {
    let marks = d
        .index()
        .pending()
        .context("cannot read the index's pending decisions")?;
    if marks.is_empty() {
        return Ok(());
    }
    let mut tpl = rdkafka::TopicPartitionList::new();
    for (position, _, _) in &marks {
        let (topic, partition, _) = parse_position(position)
            .ok_or_else(|| anyhow!("the index holds a pending decision of no input position"))?;
        if tpl.find_partition(topic, partition).is_none() {
            tpl.add_partition(topic, partition);
        }
    }
    let got =
        tokio::task::block_in_place(|| consumer.committed_offsets(tpl, Duration::from_secs(30)))
            .context("cannot read the committed offsets to align the index with")?;
    let mut committed: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for e in got.elements() {
        if let rdkafka::Offset::Offset(o) = e.offset() {
            committed.insert((e.topic().to_string(), e.partition()), o);
        }
    }
    let is_committed = |position: &[u8]| {
        parse_position(position).is_some_and(|(t, p, o)| {
            committed
                .get(&(t.to_string(), p))
                .is_some_and(|&next| o < next)
        })
    };
    // each document removed, named at debug level (target neardup::undo)
    let named: Vec<&str> = if tracing::enabled!(target: "neardup::undo", tracing::Level::DEBUG) {
        let mut v = Vec::new();
        for (position, _, id) in &marks {
            if !is_committed(position) && d.index().find_id(id)?.is_some() {
                v.push(id.as_str());
            }
        }
        v
    } else {
        Vec::new()
    };
    let started = Instant::now();
    let done = d
        .index_mut()
        .undo_pending(&mut |position| is_committed(position))
        .context("cannot undo the decisions of an uncommitted transaction")?;
    for id in named {
        if d.index().find_id(id)?.is_none() {
            tracing::debug!(target: "neardup::undo", id, "exactly-once: undone");
        }
    }
    info!(
        uncommitted = done.uncommitted,
        removed = done.removed,
        committed = done.committed,
        seconds = started.elapsed().as_secs_f64(),
        "exactly-once: the index is aligned with the last committed transaction"
    );
    Ok(())
}

/// A decider with a standby: follows the changelog until the group assigns the signed topic
/// to this process, then fences the other decider (their shared transactional id), reads the
/// changelog to its end and resumes the signed topic. False: the stage stopped (a signal, or
/// the signed topic went away again before the take-over ended).
#[allow(clippy::too_many_arguments)]
async fn take_over(
    s: &StageSettings,
    sb: &standby::Standby,
    t: &Transactions,
    p: &FutureProducer<StageContext>,
    consumer: &StageConsumer,
    dedup: &mut Option<crate::dedup::Deduplicator>,
    health: &Arc<Health>,
    stop_rx: &mut watch::Receiver<bool>,
) -> Result<bool> {
    let Some(d) = dedup.take() else {
        return Ok(false);
    };
    let until = Arc::new(std::sync::atomic::AtomicBool::new(false));
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
    // the consumer is polled meanwhile (its rebalance callbacks run then); a record of the
    // signed topic that arrives before the take-over (it should not: the assignment is
    // paused) is read again after it
    let mut again: Option<(String, i32, i64)> = None;
    let mut stopped = false;
    let mut ended = None;
    loop {
        tokio::select! {
            _ = sb.assigned() => break,
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
    let (mut d, followed) = match ended {
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
    if stopped || s.shutdown.requested() {
        health.following.store(false, Ordering::Relaxed);
        *dedup = Some(d);
        return Ok(false);
    }
    if consumer.assignment().map_or(0, |a| a.count()) == 0 {
        // taken away again before the take-over began: the other decider is not fenced
        warn!("standby: the signed topic went away before the take-over; stopping (a restart follows the changelog)");
        sb.lose();
        health.following.store(false, Ordering::Relaxed);
        *dedup = Some(d);
        return Ok(false);
    }
    let started = Instant::now();
    info!("standby: the signed topic is assigned to this process: taking over");
    // fences the other decider (it writes nothing more) and ends its open transaction, so
    // that the changelog's read_committed end is all it committed
    produce::transaction_call("initialise transactions", t, || {
        p.init_transactions(Duration::from_secs(30))
    })?;
    let fenced_s = started.elapsed().as_secs_f64();
    let (d, caught) = {
        let (s, health) = (s.clone(), Arc::clone(health));
        tokio::task::spawn_blocking(move || {
            let never = std::sync::atomic::AtomicBool::new(false);
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
    if let Some((topic, partition, offset)) = again {
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

/// Writes the index out and its lists snapshot (a stop before consuming anything).
fn close_index(d: &mut crate::dedup::Deduplicator) {
    if let Err(e) = d.index().flush() {
        warn!(error = %e, "cannot flush the index");
        return;
    }
    match d.index_mut().save_lists() {
        Ok(_) => {}
        Err(e) => {
            warn!(error = %e, "cannot write the lists snapshot; the next start rebuilds the lists")
        }
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

#[cfg(test)]
mod tests;
