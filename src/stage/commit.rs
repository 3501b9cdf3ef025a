//! The commit task of exactly-once: the producer's transactions, each closed with the
//! input positions after its records and published for the decider, whose marks they clear.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tracing::warn;

use super::flow::Generation;
use super::kafka::{StageContext, TxnSync};
use super::restart::DecideAgain;
use super::watchdog::TRANSACTION_CALL;
use crate::telemetry as tm;

/// Input positions: (topic, partition) → the next offset to read.
pub(super) type Positions = HashMap<(Arc<str>, i32), i64>;

/// What the commits so far covered: the input positions, and the changelog offset after the
/// last changelog record they held.
#[derive(Default)]
pub(super) struct Committed {
    pub(super) inputs: Positions,
    pub(super) changelog_next: Option<i64>,
}

/// Exactly-once: the producer's transactions. Outputs go into the open transaction; every
/// `interval` the stage stops sending, waits for the transaction's records to be
/// acknowledged, adds the input positions after them to it and commits. The positions of
/// each commit are published to `committed` (the decider clears its marks with them).
pub(super) struct Transactions {
    /// The producer's `transactional.id` (for messages).
    pub(super) id: String,
    /// How long a transaction collects outputs.
    pub(super) interval: Duration,
    /// The positions every commit so far covered.
    pub(super) committed: Arc<Mutex<Committed>>,
    /// Counts the records committed, for a revocation waiting for them.
    pub(super) sync: Arc<TxnSync>,
}

/// Runs a transaction call on this thread (the runtime moves its other tasks away), again
/// while it fails in a way the client calls retriable; each attempt given `timeout` and
/// under the watchdog's deadline ([`watched`]).
pub(super) fn transaction_call(
    what: &str,
    txn: &Transactions,
    timeout: Duration,
    call: impl FnMut(Duration) -> Result<(), KafkaError>,
) -> Result<()> {
    tokio::task::block_in_place(|| {
        watched(what, &txn.id, timeout, call).map_err(|e| transaction_error(what, txn, e))
    })
}

/// [`retrying`] with each attempt given `timeout` (the call receives it) and under the
/// watchdog's deadline, three times that ([`super::watchdog`]): a call the client never
/// ends (adding offsets to a transaction after the node that coordinated the group died)
/// ends the process with exit code 3 instead of stalling it. The calls within a
/// transaction (begin, add the offsets, commit) are given [`TRANSACTION_CALL`]; shared by
/// the stage and the roles of a sharded decider.
pub(super) fn watched(
    what: &str,
    transactional_id: &str,
    timeout: Duration,
    mut call: impl FnMut(Duration) -> Result<(), KafkaError>,
) -> Result<(), KafkaError> {
    let started = Instant::now();
    let r = retrying(what, transactional_id, || {
        let _watch = super::watchdog::watch(what, transactional_id, timeout);
        call(timeout)
    });
    slow(what, started);
    r
}

/// A call past this is logged with its time: the process answered nothing meanwhile.
const SLOW_CALL: Duration = Duration::from_secs(1);

/// Logs a call that took longer than [`SLOW_CALL`] (begun at `started`), so that a stall
/// after a fault of the brokers shows where the time went.
pub(super) fn slow(what: &str, started: Instant) {
    let took = started.elapsed();
    if took > SLOW_CALL {
        warn!(
            seconds = took.as_secs_f64(),
            "{what} took {:.1} s (a node of the \
            brokers gone, its leaders or the group's coordinator moving)",
            took.as_secs_f64()
        );
    }
}

/// Makes a transaction call until it succeeds or fails in a way the client does not call
/// retriable (the client's documented answer to a retriable failure is the same call again).
/// Shared by the stage and the roles of a sharded decider.
fn retrying(
    what: &str,
    transactional_id: &str,
    mut call: impl FnMut() -> Result<(), KafkaError>,
) -> Result<(), KafkaError> {
    loop {
        match call() {
            Ok(()) => return Ok(()),
            Err(KafkaError::Transaction(e)) if e.is_retriable() => {
                warn!(error = %e, transactional_id, "{what}: trying again");
            }
            Err(e) => return Err(e),
        }
    }
}

/// The error that stops the stage when a transaction cannot go on.
fn transaction_error(what: &str, txn: &Transactions, e: KafkaError) -> anyhow::Error {
    let fenced = match &e {
        KafkaError::Transaction(t) => {
            t.is_fatal()
                && matches!(
                    t.code(),
                    RDKafkaErrorCode::ProducerFenced
                        | RDKafkaErrorCode::InvalidProducerEpoch
                        | RDKafkaErrorCode::Fenced
                )
        }
        _ => false,
    };
    if !fenced && super::restart::broker_fault(&e) {
        return anyhow::Error::new(DecideAgain(format!(
            "{what} failed: {e} (transactional id {})",
            txn.id
        )));
    }
    if fenced {
        anyhow!(
            "fenced: another process started with transactional id {} (a newer instance of \
             this index's stage, or its standby taking over); this one writes nothing more \
             and stops ({what}: {e})",
            txn.id
        )
    } else {
        anyhow!(
            "{what} failed: {e}; the open transaction is aborted by the broker and its records \
             are decided again after a restart (transactional id {})",
            txn.id
        )
    }
}

/// Commits the open transaction with the input positions after its records, and publishes
/// them.
pub(super) async fn commit(
    t: &Transactions,
    p: &FutureProducer<StageContext>,
    group: Option<&Generation>,
    positions: &mut Positions,
    changelog_next: Option<i64>,
) -> Result<()> {
    let started = Instant::now();
    if !positions.is_empty() {
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), next) in positions.iter() {
            tpl.add_partition_offset(topic, *partition, Offset::Offset(*next))
                .map_err(|e| anyhow!("offset {next} of {topic}/{partition}: {e}"))?;
        }
        let group = group
            .and_then(|g| g.metadata.as_deref())
            .ok_or_else(|| anyhow!("the consumer has no group metadata to commit offsets with"))?;
        transaction_call(
            "add the input offsets to the transaction",
            t,
            TRANSACTION_CALL,
            |d| p.send_offsets_to_transaction(&tpl, group, d),
        )?;
    }
    transaction_call("commit the transaction", t, TRANSACTION_CALL, |d| {
        p.commit_transaction(d)
    })?;
    metrics::counter!(tm::TRANSACTIONS).increment(1);
    metrics::histogram!(tm::TRANSACTION_COMMIT_SECONDS).record(started.elapsed().as_secs_f64());
    let mut c = t.committed.lock().unwrap_or_else(|e| e.into_inner());
    for (k, v) in positions.drain() {
        c.inputs.insert(k, v);
    }
    if changelog_next.is_some() {
        c.changelog_next = changelog_next;
    }
    Ok(())
}
