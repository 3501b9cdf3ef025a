//! Exactly-once at start: the index is brought back to the group's last committed
//! transaction before anything is consumed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use rdkafka::consumer::Consumer;
use tracing::info;

use super::flow::parse_position;
use super::kafka::StageConsumer;
use crate::dedup::Deduplicator;

/// Exactly-once: brings the index back to the last committed transaction. Every decision
/// was marked with its input position before it was made; a mark at or after the group's
/// committed offset of its partition belongs to a transaction that was aborted or never
/// committed, and the document it stored is removed, so that its record, read again, is
/// decided as it was the first time.
pub(super) async fn align_index(d: &mut Deduplicator, consumer: &StageConsumer) -> Result<()> {
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
