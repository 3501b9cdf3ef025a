//! The end of the stage: waits for the decider and the producer within the grace period,
//! gathers their counts and latencies, commits what was acknowledged (at-least-once), flushes
//! the index with its lists snapshot and leaves the group.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tracing::{info, warn};

use super::close::{bounded, close_consumer, CLIENT_CLOSE_WAIT};
use super::decide::Decided;
use super::flow::{HopTimes, StageSummary};
use super::kafka::StageConsumer;
use super::produce::Produced;
use super::settings::{Mode, StageSettings};
use crate::dedup::Deduplicator;

/// Waits for the producer and the decider to finish what is in flight, at most the grace
/// period. `None`: a run's grace period ended first, and what is in flight is left for
/// redelivery; a replay's is an error (its range is not answered whole).
pub(super) async fn drain(
    s: &StageSettings,
    producing: tokio::task::JoinHandle<Produced>,
    decider: std::thread::JoinHandle<Decided>,
) -> Result<Option<(Produced, Decided)>> {
    let grace = s.grace_period;
    let drained = tokio::time::timeout(grace, async {
        let produced = producing.await.map_err(|e| anyhow!("producer task: {e}"))?;
        let decided = tokio::task::spawn_blocking(move || decider.join())
            .await?
            .map_err(|_| anyhow!("the decider thread panicked"))?;
        Ok::<_, anyhow::Error>((produced, decided))
    })
    .await;
    match drained {
        Ok(r) => r.map(Some),
        Err(_) if s.mode == Mode::Replay && !s.dry_run => {
            // a replay reads its range once: nothing comes again
            Err(anyhow!(
                "grace period of {grace:?} over with records not produced: the replay did not \
                 answer its whole range; run it again"
            ))
        }
        Err(_) => {
            warn!(
                grace_s = grace.as_secs_f64(),
                "grace period over: records still in flight are left for redelivery"
            );
            Ok(None)
        }
    }
}

/// Fills `summary` from what the producer and the decider returned; the index comes back,
/// and the first error of either.
pub(super) fn gather(
    summary: &mut StageSummary,
    ((produced, mut lat), (dedup, counts, decided)): (Produced, Decided),
) -> (Option<Deduplicator>, Option<anyhow::Error>) {
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
    let mut failure = None;
    match produced {
        Ok(n) => summary.produced = n,
        Err(e) => failure = Some(e),
    }
    if let Err(e) = decided {
        failure = Some(e);
    }
    (dedup, failure)
}

/// Commits the stored offsets (acknowledged outputs only; a synchronous commit waits without
/// end for a coordinator that is gone: bounded). Exactly-once committed the offsets in its
/// transactions, and a dry run commits nothing.
pub(super) fn commit_offsets(consumer: &Arc<StageConsumer>) {
    let c = Arc::clone(consumer);
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

/// Flushes the index and writes its lists snapshot, so that the next start reads the lists
/// instead of rebuilding them (a dry run's copy is thrown away). A flush that fails is the
/// stage's error unless it already has one.
pub(super) fn flush_index(
    s: &StageSettings,
    d: &mut Deduplicator,
    failure: &Option<anyhow::Error>,
) -> Result<()> {
    match (d.index().flush(), failure) {
        (Ok(()), _) => {}
        (Err(e), None) => return Err(anyhow!(e).context("cannot flush the index")),
        (Err(e), Some(_)) => warn!(error = %e, "cannot flush the index either"),
    }
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
    Ok(())
}

/// Leaves the group: unsubscribes and closes the consumer within bounds.
pub(super) fn leave(consumer: Arc<StageConsumer>) {
    consumer.unsubscribe();
    close_consumer(consumer);
}
