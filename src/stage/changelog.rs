//! The decider's changelog (docs/dev/architecture.md §6): every index mutation is produced to a compacted
//! topic with the output it belongs to, so the RocksDB directory is a cache of that topic.
//!
//! - **Writing**: the index journals its mutations ([`crate::index::Mutation`]); the
//!   decide loop attaches them to the record's output, and the record's input offset is
//!   stored only when the output and its changelog records are acknowledged
//!   ([`super::Extra`]). One partition: its order is the order of decisions.
//! - **Restoring**: a decider whose index is empty (a new or lost volume), or whose last
//!   restore was cut short (the marker file `changelog-restore` in the index directory),
//!   reads the changelog from its start to the end seen at start before it consumes: each
//!   document is stored under the number it had, each tombstone removes one; a document
//!   already there is skipped, so a restore cut short starts again harmlessly. `/readyz`
//!   reports the progress and so do `neardup_changelog_*` metrics.
//! - **Completing**: after a crash the index may hold documents whose changelog records
//!   were never acknowledged (at most `max-in-flight` records were on their way); a
//!   decider that starts with an index therefore writes its last `max-in-flight` documents
//!   again (all of them when the changelog is empty: a changelog added to a running
//!   index). Compaction keeps the latest copy, and the numbers they carry keep the order.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tracing::{info, warn};

use super::kafka::{self, StageContext};
use super::StageSettings;
use crate::index::{Index, IndexError, Mutation};
use crate::record::{self, changelog};
use crate::telemetry::{self as tm, Health};

/// The file in the index directory that marks a restore in progress.
pub const RESTORE_MARKER: &str = "changelog-restore";

/// How long a restore waits for the brokers without receiving anything before it fails.
const STALL: Duration = Duration::from_secs(300);

/// The changelog's partition 0 offsets (low, high). A topic that does not exist is refused
/// (one the brokers would create on the first write would have their default partitions
/// and retention), and so is one of more than one partition: its order is the decisions'.
fn bounds(c: &BaseConsumer, topic: &str) -> Result<(i64, i64)> {
    let timeout = Duration::from_secs(30);
    let parts = kafka::topic_partitions(c, topic)?.ok_or_else(|| {
        anyhow!(
            "changelog topic {topic} does not exist: create it with one partition and \
             cleanup.policy=compact (neardup topics create does), or set changelog-topic off"
        )
    })?;
    if parts.len() != 1 {
        bail!(
            "changelog topic {topic} has {} partitions; it must have exactly one (its order is \
             the order of the decisions): create it with one partition and cleanup.policy=compact",
            parts.len()
        );
    }
    let (low, high) = c
        .fetch_watermarks(topic, 0, timeout)
        .with_context(|| format!("cannot read the offsets of changelog topic {topic}"))?;
    Ok((low, high))
}

/// Before the index is opened: a restore that was cut short left a partial index, which is
/// thrown away (the changelog holds all of it; reading it again over a partial index could
/// number some documents otherwise). Keeps the instance id and the marker. Returns whether
/// it did.
pub(super) fn discard_partial(s: &StageSettings) -> Result<bool> {
    if !s.index.join(RESTORE_MARKER).exists() {
        return Ok(false);
    }
    warn!(index = %s.index.display(),
        "the last restore from the changelog was cut short: restoring again from the start");
    for entry in
        std::fs::read_dir(&s.index).with_context(|| format!("cannot read {}", s.index.display()))?
    {
        let entry = entry?;
        let name = entry.file_name();
        if name == RESTORE_MARKER || name == super::settings::INSTANCE_ID_FILE {
            continue;
        }
        let path = entry.path();
        let r = if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        r.with_context(|| format!("cannot remove {}", path.display()))?;
    }
    Ok(true)
}

/// A decider's signed topic must exist and have one partition: the decisions follow its
/// order, and a restarted or restored decider must read it in the same order again.
pub(super) fn check_signed(s: &StageSettings) -> Result<()> {
    let c = kafka::reader(s, "check")?;
    let topic = &s.signed_topic;
    match kafka::topic_partitions(&c, topic)? {
        Some(parts) if parts.len() == 1 => Ok(()),
        Some(parts) => bail!(
            "signed topic {topic} has {} partitions; it must have exactly one (the decider \
             decides in its order)",
            parts.len()
        ),
        None => bail!(
            "signed topic {topic} does not exist: create it with one partition (neardup topics \
             create does)"
        ),
    }
}

/// Restores the index from the changelog when it is empty or a restore was cut short;
/// returns the documents stored (0 when nothing was restored). Blocking.
pub(super) fn restore(
    s: &StageSettings,
    index: &mut Index,
    topic: &str,
    health: &Health,
) -> Result<u64> {
    let marker = s.index.join(RESTORE_MARKER);
    let resume = marker.exists();
    if index.next_doc() > 0 && !resume {
        return Ok(0);
    }
    let c = kafka::reader(s, "restore")?;
    let (low, high) = bounds(&c, topic)?;
    if high <= low {
        let _ = std::fs::remove_file(&marker);
        return Ok(0);
    }
    std::fs::write(&marker, b"a restore from the changelog is in progress\n")
        .with_context(|| format!("cannot write {}", marker.display()))?;
    info!(
        topic,
        records = high - low,
        resume,
        "restoring the index from the changelog"
    );
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
    c.assign(&tpl)
        .context("cannot assign the changelog partition")?;
    let params_id = record::params_id(index.params());
    let started = Instant::now();
    let (mut read, mut stored, mut removed) = (0u64, 0u64, 0u64);
    let mut last_progress = Instant::now();
    let mut last_report = Instant::now();
    let total = (high - low) as u64;
    let report = |read: u64| {
        let left = total.saturating_sub(read);
        metrics::gauge!(tm::CHANGELOG_REMAINING).set(left as f64);
        *health.restoring.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
            "restoring the index from changelog {topic}: {read} of {total} records"
        ));
        health.publish();
    };
    report(0);
    let stop = s.shutdown.flag();
    let mut next = low;
    while next < high {
        if stop.load(Ordering::Relaxed) {
            return Err(IndexError::Interrupted.into());
        }
        let Some(m) = c.poll(Duration::from_millis(500)) else {
            if last_progress.elapsed() > STALL {
                bail!(
                    "the changelog restore received nothing for {} s at offset {next} of \
                     {high} of {topic} (brokers unreachable?); the next start resumes it",
                    STALL.as_secs()
                );
            }
            continue;
        };
        let m = match m {
            Ok(m) => m,
            // the end of the partition is at or past the end seen at start (compaction may
            // have removed the last records before it)
            Err(KafkaError::PartitionEOF(_)) => break,
            Err(e) => {
                warn!(error = %e, "changelog restore: consume error");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        last_progress = Instant::now();
        next = m.offset() + 1;
        read += 1;
        let (put, gone) = apply(index, topic, &m, &params_id)?;
        stored += put;
        removed += gone;
        metrics::counter!(tm::CHANGELOG_RESTORED).increment(1);
        if last_report.elapsed() >= Duration::from_secs(1) {
            last_report = Instant::now();
            report(read);
        }
    }
    index.set_changelog_next(next as u64)?;
    index.flush()?;
    std::fs::remove_file(&marker).with_context(|| format!("cannot remove {}", marker.display()))?;
    metrics::gauge!(tm::CHANGELOG_REMAINING).set(0.0);
    *health.restoring.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let secs = started.elapsed().as_secs_f64();
    info!(
        topic,
        records = read,
        stored,
        removed,
        documents = index.next_doc(),
        seconds = secs,
        records_per_second = read as f64 / secs.max(1e-9),
        "index restored from the changelog"
    );
    Ok(stored)
}

/// Applies one changelog record to the index: (documents stored, documents removed).
pub(super) fn apply(
    index: &mut Index,
    topic: &str,
    m: &rdkafka::message::BorrowedMessage<'_>,
    params_id: &str,
) -> Result<(u64, u64)> {
    let change =
        changelog::decode(m.key().unwrap_or_default(), m.payload(), params_id).map_err(|why| {
            anyhow!(
                "changelog {topic} offset {}: {why}; the index cannot be restored past it",
                m.offset()
            )
        })?;
    Ok(match change {
        changelog::Restore::Put(num, rec) => (u64::from(index.restore_put(num, &rec)?), 0),
        changelog::Restore::Delete(id) => (0, u64::from(index.remove_id(&id)?)),
    })
}

/// The file in the index directory that records how far a fill of an empty changelog got:
/// the number of the next document to write (decimal) and the changelog's name, a line each.
/// A fill killed midway resumes there.
pub const FILL_MARKER: &str = "changelog-fill";

/// A step of the transactions a fill writes in (exactly-once): the caller's producer begins
/// or commits one.
pub(super) enum TxnStep {
    Begin,
    Commit,
}

/// Documents written in one transaction (exactly-once) of a changelog fill, and between two
/// records of its progress: a few MiB, far inside the transaction timeout.
const FILL_CHUNK: usize = 4096;

/// Writes the index's last `max-in-flight` documents to the changelog again (all of them
/// when the changelog is empty: a fill), and waits for the acknowledgements. With
/// exactly-once (`txn`), every chunk of [`FILL_CHUNK`] documents is a transaction of its
/// own, so no transaction outlives its timeout however large the index. A fill records its
/// progress after every chunk in [`FILL_MARKER`]: a start that finds the marker resumes the
/// fill there (the changelog is no longer empty, but lacks the documents after it).
pub(super) async fn republish(
    s: &StageSettings,
    index: &Index,
    producer: &FutureProducer<StageContext>,
    topic: &str,
    just_restored: bool,
    txn: Option<&(dyn Fn(TxnStep) -> Result<()> + Send + Sync)>,
) -> Result<()> {
    let marker = s.index.join(FILL_MARKER);
    if just_restored || index.next_doc() == 0 {
        remove_marker(&marker)?;
        return Ok(());
    }
    let resume = read_marker(&marker, topic)?;
    let (from, fill) = match resume {
        Some(n) => (n, true),
        None => {
            let c = kafka::reader(s, "restore")?;
            let t = topic.to_string();
            let (low, high) = tokio::task::spawn_blocking(move || bounds(&c, &t)).await??;
            if high <= low {
                write_marker(&marker, 0, topic)?;
                (0, true)
            } else {
                (
                    index.next_doc().saturating_sub(s.max_in_flight as u64),
                    false,
                )
            }
        }
    };
    if let Some(n) = resume {
        info!(
            topic,
            from = n,
            "resuming the changelog fill where it stopped"
        );
    }
    let params_id = record::params_id(index.params());
    let started = Instant::now();
    let mut next = from;
    let (mut written, mut transactions) = (0u64, 0u64);
    loop {
        let mut chunk: Vec<Mutation> = Vec::new();
        index.stored_from(next, &mut |m| {
            chunk.push(m);
            chunk.len() < FILL_CHUNK
        })?;
        let Some(Mutation::Put { num, .. }) = chunk.last() else {
            break;
        };
        let after = num + 1;
        if let Some(step) = txn {
            step(TxnStep::Begin)?;
        }
        let mut acks = Vec::with_capacity(chunk.len());
        for m in &chunk {
            let (key, value) = changelog::encode(m, &params_id);
            acks.push(send(producer, topic, &key, value.as_deref()).await?);
        }
        for a in acks {
            a.await?;
        }
        if let Some(step) = txn {
            step(TxnStep::Commit)?;
            transactions += 1;
        }
        next = after;
        written += chunk.len() as u64;
        if fill {
            write_marker(&marker, next, topic)?;
        }
    }
    remove_marker(&marker)?;
    info!(
        topic,
        from,
        documents = written,
        transactions,
        seconds = started.elapsed().as_secs_f64(),
        whole = fill,
        "changelog completed with the index's latest documents"
    );
    Ok(())
}

/// The document to resume a fill of `topic` at; a marker of another topic (the changelog
/// renamed since) is a fill that starts again.
fn read_marker(path: &std::path::Path, topic: &str) -> Result<Option<u64>> {
    match std::fs::read_to_string(path) {
        Ok(t) => {
            let mut lines = t.lines();
            let next: u64 = lines.next().unwrap_or("").trim().parse().with_context(|| {
                format!(
                    "{} does not hold a document number (remove it to fill the changelog \
                     again from the start)",
                    path.display()
                )
            })?;
            if lines.next().map(str::trim) != Some(topic) {
                warn!(topic, "a changelog fill of another topic was cut short: filling this one from its start");
                return Ok(None);
            }
            Ok(Some(next))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes the marker durably (the next document, then the topic, a line each): a temporary
/// file synced, then renamed over it.
fn write_marker(path: &std::path::Path, next: u64, topic: &str) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f =
        std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    writeln!(f, "{next}\n{topic}")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn remove_marker(path: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// A changelog record on its way: resolves to its offset when it is acknowledged.
pub(super) type Ack = std::pin::Pin<Box<dyn std::future::Future<Output = Result<i64>> + Send>>;

/// Sends one changelog record (partition 0; `None`: a tombstone).
pub(super) async fn send(
    producer: &FutureProducer<StageContext>,
    topic: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Ack> {
    let fut = loop {
        let mut rec: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).partition(0).key(key);
        if let Some(v) = value {
            rec = rec.payload(v);
        }
        match producer.send_result(rec) {
            Ok(f) => break f,
            Err((
                KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                _,
            )) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err((e, _)) => {
                return Err(
                    anyhow::Error::new(e).context(format!("cannot produce to changelog {topic}"))
                )
            }
        }
    };
    let topic: Arc<str> = Arc::from(topic);
    Ok(Box::pin(async move {
        match fut.await {
            Ok(Ok(delivery)) => {
                metrics::counter!(tm::CHANGELOG_WRITTEN).increment(1);
                Ok(delivery.offset)
            }
            Ok(Err((e, _))) => {
                Err(anyhow::Error::new(e).context(format!("changelog {topic} refused a record")))
            }
            Err(_) => Err(anyhow!("changelog {topic}: the delivery was cancelled")),
        }
    }))
}
