//! What the stage's tasks hand each other: a consumed record on its way ([`Inbound`]), the
//! pool's work on it ([`PrepOutput`], [`Job`]), an output with the records produced along
//! with it ([`Outbound`], [`Extra`]), the headers the outputs carry, and what a run did
//! ([`StageSummary`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::prepare::{PrepareTimes, Prepared};
use crate::telemetry as tm;

/// Header with the decision (`unique`, `duplicate`, `skipped`) or `dead_letter`.
pub const HEADER_DECISION: &str = "neardup-decision";
/// Header with the page's id (tagged records): what the shards of a sharded decider read
/// the duplicates they own by.
pub const HEADER_ID: &str = "neardup-id";
/// Header with the canonical document id (duplicates).
pub const HEADER_CANONICAL: &str = "neardup-canonical-id";
/// Header with the schema of the value.
pub const HEADER_SCHEMA: &str = "neardup-schema";
/// Header with the dead letter's reason.
pub const HEADER_REASON: &str = "neardup-reason";

/// What a run or replay did (printed as JSON by `neardup replay`).
#[derive(Debug, Default, Clone, Serialize)]
pub struct StageSummary {
    /// `run` or `replay`.
    pub mode: String,
    /// Records consumed.
    pub records: u64,
    /// Unique pages.
    pub unique: u64,
    /// Duplicates.
    pub duplicate: u64,
    /// Skipped pages.
    pub skipped: u64,
    /// Dead letters.
    pub dead_letter: u64,
    /// Signed records written (the signer role).
    #[serde(skip_serializing_if = "is_zero")]
    pub signed: u64,
    /// Index documents restored from the changelog before consuming.
    #[serde(skip_serializing_if = "is_zero")]
    pub restored: u64,
    /// Records whose id was decided before.
    pub repeated: u64,
    /// Outputs acknowledged (0 in a dry run).
    pub produced: u64,
    /// Index entries removed by the retention window.
    pub expired: u64,
    /// Decided and counted only.
    pub dry_run: bool,
    /// Why the run ended: end (replay bounds reached), signal, error.
    pub stopped_by: String,
    /// Replay: per `topic:partition`, the first offset and the end offset seen at start.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub partitions: BTreeMap<String, (i64, i64)>,
    /// Wall time.
    pub seconds: f64,
    /// Records per second.
    pub records_per_second: f64,
    /// Median time from consuming a record to its output being acknowledged, ms.
    pub latency_p50_ms: f64,
    /// 99th percentile of that time, ms.
    pub latency_p99_ms: f64,
    /// Longest such time, ms.
    pub latency_max_ms: f64,
    /// Where the time went, per hop: record (consumed → acknowledged), broker (the input
    /// record's timestamp → consumed), decide (consumed → decided or signed; cut in queue,
    /// prepare and in_order: waiting for a pool thread, its work, then waiting for the
    /// records before and deciding), produce
    /// (decided → acknowledged), end_to_end (the input record's timestamp → acknowledged;
    /// for a decider, the timestamp of the page its signer read).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hops: BTreeMap<String, HopTimes>,
}

/// Quantiles of one hop's time.
#[derive(Debug, Default, Clone, Serialize)]
pub struct HopTimes {
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Longest, ms.
    pub max_ms: f64,
}

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A consumed record on its way through the stage.
pub(super) struct Inbound {
    pub(super) topic: Arc<str>,
    pub(super) partition: i32,
    pub(super) offset: i64,
    pub(super) key: Option<Vec<u8>>,
    pub(super) timestamp_ms: Option<i64>,
    pub(super) consumed: Instant,
    /// Time from the record's timestamp to its consumption (the broker's share).
    pub(super) broker_wait: Option<Duration>,
    /// The first bytes of the record (for a dead letter if its output is refused).
    pub(super) head: Vec<u8>,
    /// The record's size.
    pub(super) len: usize,
    /// When a pool thread started preparing it and when it was done (decode, strip, sign;
    /// or decode a signed record).
    pub(super) prepared: Option<(Instant, Instant)>,
    /// Exactly-once: the group generation it was consumed in.
    pub(super) generation: Option<Generation>,
    pub(super) _permit: InFlight,
}

/// Exactly-once: a group generation as this process saw it (a number it gives each
/// assignment and revocation, and the group's metadata then, which an input offset is
/// committed with).
#[derive(Clone)]
pub(super) struct Generation {
    pub(super) epoch: u64,
    pub(super) metadata: Option<Arc<rdkafka::consumer::ConsumerGroupMetadata>>,
}

/// Exactly-once: a decision's input position as the index keeps it in its marks
/// ([`crate::index::Index::mark_pending`]): the topic, a zero byte, the partition and the
/// offset (big-endian).
pub(super) fn position_bytes(topic: &str, partition: i32, offset: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(topic.len() + 13);
    b.extend_from_slice(topic.as_bytes());
    b.push(0);
    b.extend_from_slice(&partition.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b
}

/// The topic, partition and offset of [`position_bytes`].
pub(super) fn parse_position(b: &[u8]) -> Option<(&str, i32, i64)> {
    let n = b.len().checked_sub(13)?;
    if b[n] != 0 {
        return None;
    }
    let topic = std::str::from_utf8(&b[..n]).ok()?;
    let partition = i32::from_be_bytes(b[n + 1..n + 5].try_into().ok()?);
    let offset = i64::from_be_bytes(b[n + 5..].try_into().ok()?);
    Some((topic, partition, offset))
}

/// A record's place in the `max-in-flight` bound; `neardup_in_flight_records` counts the
/// places taken, up when a record is consumed and down when its output is acknowledged
/// (or it is dropped).
pub(super) struct InFlight(#[allow(dead_code)] OwnedSemaphorePermit);

impl InFlight {
    pub(super) fn new(permit: OwnedSemaphorePermit) -> InFlight {
        metrics::gauge!(tm::IN_FLIGHT).increment(1.0);
        InFlight(permit)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!(tm::IN_FLIGHT).decrement(1.0);
    }
}

/// Bytes of the original kept for a dead letter written when an output is refused.
pub(super) const HEAD_BYTES: usize = 64 * 1024;

/// A record decoded (and signed) on the pool.
pub(super) struct PrepOutput {
    /// The record's bytes.
    pub(super) payload: Vec<u8>,
    /// The page, or why there is none.
    pub(super) prepared: Prepared,
    /// Where the time went.
    pub(super) times: PrepareTimes,
    /// The page has its text (a signed record may come without it).
    pub(super) has_text: bool,
    /// The input record's timestamp, ms (a signed record carries its input's).
    pub(super) origin_ms: Option<i64>,
    /// When a pool thread started on the record and when it was done.
    pub(super) ran: (Instant, Instant),
}

pub(super) struct Job {
    pub(super) inbound: Inbound,
    pub(super) prepared: oneshot::Receiver<PrepOutput>,
}

/// An output record.
pub(super) struct Outbound {
    pub(super) inbound: Inbound,
    pub(super) topic: Arc<str>,
    pub(super) payload: Vec<u8>,
    pub(super) headers: Vec<(&'static str, String)>,
    pub(super) label: &'static str,
    /// Records produced with it, before it (the changelog records of its index mutations):
    /// the input offset is stored once all of them are acknowledged too.
    pub(super) extra: Vec<Extra>,
    /// When it was decided (or signed).
    pub(super) decided: Instant,
    /// The input record's timestamp, ms, for the end-to-end time.
    pub(super) origin_ms: Option<i64>,
}

/// A record produced along with an output: key and value (`None`: a tombstone).
pub(super) struct Extra {
    pub(super) topic: Arc<str>,
    pub(super) key: Vec<u8>,
    pub(super) payload: Option<Vec<u8>>,
}

/// Time since a Unix timestamp in ms (none for a timestamp in the future or absent).
pub(super) fn since_ms(ms: Option<i64>) -> Option<Duration> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_millis() as i64;
    let d = now - ms?;
    (d >= 0).then(|| Duration::from_millis(d as u64))
}

pub(super) fn observe(stage: &'static str, d: Duration) {
    metrics::histogram!(tm::STAGE_SECONDS, "stage" => stage).record(d.as_secs_f64());
}
