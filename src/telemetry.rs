//! Metric names, the Prometheus recorder, readiness and logging. Only the I/O shell
//! (`stage`, `http`, `cli`) uses this module; `crate::http` serves them.
//!
//! Every metric the stage exports is named here, with its unit in the name and its labels
//! in the doc comment; docs/kafka-stage.md lists the same table.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Counter, labels `topic`: records consumed.
pub const RECORDS_IN: &str = "neardup_records_in_total";
/// Counter, labels `topic`, `decision` (unique, duplicate, skipped, dead_letter): records
/// produced and acknowledged.
pub const RECORDS_OUT: &str = "neardup_records_out_total";
/// Counter, labels `reason`: dead letters.
pub const DEAD_LETTERS: &str = "neardup_dead_letters_total";
/// Counter: records whose id was decided before (the stored decision was repeated).
pub const REPEATED_IDS: &str = "neardup_repeated_ids_total";
/// Counter: pages a shard of a sharded decider took out of its lists as the aggregator
/// decided them duplicates.
pub const SHARD_DEMOTED: &str = "neardup_shard_demoted_total";
/// Counter: pages a shard of a sharded decider stored as duplicates at once, copies of an
/// earlier page it holds in everything the rules read of a page (the pages it reads again
/// at a start included).
pub const SHARD_COPIES: &str = "neardup_shard_copies_total";
/// Counter: parts of the votes records a shard wrote in parts (records past the broker's
/// record limit).
pub const VOTES_PARTS: &str = "neardup_shard_votes_parts_total";
/// Histogram, labels `stage` (decode, strip, sign, lookup, produce): seconds per record.
pub const STAGE_SECONDS: &str = "neardup_stage_duration_seconds";
/// Histogram: seconds from consuming a record to its output being acknowledged.
pub const RECORD_SECONDS: &str = "neardup_record_duration_seconds";
/// Gauge: records consumed and not yet acknowledged.
pub const IN_FLIGHT: &str = "neardup_in_flight_records";
/// Gauge: documents in the index.
pub const INDEX_DOCUMENTS: &str = "neardup_index_documents";
/// Gauge: pages (stored ids) the index holds, counted exactly: what `--max-pages` caps.
pub const INDEX_PAGES: &str = "neardup_index_pages";
/// Gauge, labels `family`: keys per RocksDB column family (an estimate).
pub const INDEX_KEYS: &str = "neardup_index_keys";
/// Gauge, labels `family`: bytes per RocksDB column family (live data and memtables).
pub const INDEX_BYTES: &str = "neardup_index_bytes";
/// Counter: index entries removed by the retention window or the page cap.
pub const INDEX_EXPIRED: &str = "neardup_index_expired_total";
/// Counter: writes of the index's log by the decider, one for each batch of decisions (at
/// most 16): decisions over writes is the batch's mean size.
pub const INDEX_LOG_WRITES: &str = "neardup_index_log_writes_total";
/// Gauge, labels `topic`, `partition`: consumer lag in records, from the client statistics.
pub const CONSUMER_LAG: &str = "neardup_consumer_lag_records";
/// Counter, labels `kind` (assign, revoke, error): consumer group rebalances.
pub const REBALANCES: &str = "neardup_rebalances_total";
/// Gauge: partitions assigned to this process.
pub const ASSIGNED_PARTITIONS: &str = "neardup_assigned_partitions";
/// Counter, labels `code`: errors reported by the Kafka client.
pub const KAFKA_ERRORS: &str = "neardup_kafka_errors_total";
/// Counter: exactly-once transactions committed.
pub const TRANSACTIONS: &str = "neardup_transactions_committed_total";
/// Histogram: seconds to commit an exactly-once transaction (offsets and commit, after its
/// records were acknowledged).
pub const TRANSACTION_COMMIT_SECONDS: &str = "neardup_transaction_commit_seconds";
/// Gauge: 1 when the stage is ready (index open, partitions assigned, brokers reachable).
pub const READY: &str = "neardup_ready";
/// 1 when the stage consumes: partitions assigned (or a standby following) and brokers reachable.
pub const CONSUMING: &str = "neardup_consuming";
/// Gauge: 1 after a fatal error (the stage stops consuming and drains).
pub const FAILED: &str = "neardup_failed";
/// Histogram, labels `hop` (broker, decide, queue, prepare, in_order, produce, end_to_end): seconds per record of
/// each hop (see the stage's summary).
pub const HOP_SECONDS: &str = "neardup_hop_duration_seconds";
/// Counter: index mutations read from the changelog while restoring the index.
pub const CHANGELOG_RESTORED: &str = "neardup_changelog_restored_records_total";
/// Gauge: changelog records still to read before the restored index is complete (0 when
/// no restore is running).
pub const CHANGELOG_REMAINING: &str = "neardup_changelog_restore_remaining_records";
/// Counter: index mutations written to the changelog and acknowledged.
pub const CHANGELOG_WRITTEN: &str = "neardup_changelog_records_total";
/// Gauge: 1 while a decider with a standby follows the changelog, 0 while it decides.
pub const STANDBY: &str = "neardup_standby";
/// Gauge: seconds the last take-over by a standby took (fencing the other decider and
/// reading the changelog to its end).
pub const TAKEOVER_SECONDS: &str = "neardup_standby_takeover_seconds";
/// Histogram, labels `endpoint` (group, explain): seconds per serving request.
pub const SERVE_SECONDS: &str = "neardup_serve_duration_seconds";
/// Counter, labels `endpoint`, `status`: serving requests answered.
pub const SERVE_REQUESTS: &str = "neardup_serve_requests_total";

/// Every metric: name, type, help. The table in docs/kafka-stage.md is checked against this list.
pub const METRICS: &[(&str, &str, &str)] = &[
    (RECORDS_IN, "counter", "Records consumed, by topic."),
    (
        RECORDS_OUT,
        "counter",
        "Records produced and acknowledged, by output topic and decision.",
    ),
    (DEAD_LETTERS, "counter", "Dead letters, by reason."),
    (
        REPEATED_IDS,
        "counter",
        "Records whose id was decided before (stored decision repeated).",
    ),
    (
        SHARD_DEMOTED,
        "counter",
        "Pages a shard took out of its lists as the aggregator decided them duplicates.",
    ),
    (
        SHARD_COPIES,
        "counter",
        "Pages a shard stored as duplicates at once: copies of an earlier page in all the rules read.",
    ),
    (
        VOTES_PARTS,
        "counter",
        "Parts of the votes records a shard wrote in parts, past the record limit.",
    ),
    (
        STAGE_SECONDS,
        "histogram",
        "Seconds per record in each stage: decode, strip, sign, lookup, produce.",
    ),
    (
        RECORD_SECONDS,
        "histogram",
        "Seconds from consuming a record to its output being acknowledged.",
    ),
    (
        IN_FLIGHT,
        "gauge",
        "Records consumed and not yet acknowledged.",
    ),
    (INDEX_DOCUMENTS, "gauge", "Documents in the index."),
    (
        INDEX_PAGES,
        "gauge",
        "Pages (stored ids) the index holds: what --max-pages caps.",
    ),
    (
        HOP_SECONDS,
        "histogram",
        "Seconds per record of each hop: broker, decide (= queue + prepare + in_order), produce, end_to_end.",
    ),
    (
        CHANGELOG_RESTORED,
        "counter",
        "Index mutations read from the changelog while restoring the index.",
    ),
    (
        CHANGELOG_REMAINING,
        "gauge",
        "Changelog records still to read before the restored index is complete.",
    ),
    (
        CHANGELOG_WRITTEN,
        "counter",
        "Index mutations written to the changelog and acknowledged.",
    ),
    (
        INDEX_KEYS,
        "gauge",
        "Keys per index column family (estimate).",
    ),
    (
        INDEX_BYTES,
        "gauge",
        "Bytes per index column family (live data and memtables).",
    ),
    (
        INDEX_EXPIRED,
        "counter",
        "Index entries removed by the retention window or the page cap (--max-pages).",
    ),
    (
        INDEX_LOG_WRITES,
        "counter",
        "Writes of the index's log, one per batch of decisions (at most 16).",
    ),
    (
        CONSUMER_LAG,
        "gauge",
        "Consumer lag in records, by topic and partition.",
    ),
    (REBALANCES, "counter", "Consumer group rebalances, by kind."),
    (
        ASSIGNED_PARTITIONS,
        "gauge",
        "Partitions assigned to this process.",
    ),
    (
        KAFKA_ERRORS,
        "counter",
        "Errors reported by the Kafka client, by code.",
    ),
    (
        TRANSACTIONS,
        "counter",
        "Exactly-once transactions committed.",
    ),
    (
        TRANSACTION_COMMIT_SECONDS,
        "histogram",
        "Seconds to commit an exactly-once transaction.",
    ),
    (
        STANDBY,
        "gauge",
        "1 while a process with a standby follows (a decider the changelog, a shard or the aggregator its topics), 0 while it writes.",
    ),
    (
        TAKEOVER_SECONDS,
        "gauge",
        "Seconds the last take-over by a standby took.",
    ),
    (READY, "gauge", "1 when the stage is ready (index open, not draining or failed)."),
    (
        CONSUMING,
        "gauge",
        "1 when the stage consumes: partitions assigned (or a standby following the changelog) and brokers reachable.",
    ),
    (FAILED, "gauge", "1 after a fatal error."),
    (
        SERVE_SECONDS,
        "histogram",
        "Seconds per serving request (/v1/group, /v1/explain), by endpoint.",
    ),
    (
        SERVE_REQUESTS,
        "counter",
        "Serving requests answered, by endpoint and status code.",
    ),
];

/// Histogram buckets in seconds (100 µs to 30 s).
const BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide Prometheus recorder (once) and returns its handle.
pub fn metrics_handle() -> Result<PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
        .context("metric buckets")?
        .build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_ok() {
        for (name, kind, help) in METRICS {
            match *kind {
                "counter" => metrics::describe_counter!(*name, *help),
                "gauge" => metrics::describe_gauge!(*name, *help),
                _ => metrics::describe_histogram!(*name, metrics::Unit::Seconds, *help),
            }
        }
    }
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// What `/healthz` and `/readyz` answer.
#[derive(Debug, Default)]
pub struct Health {
    /// The index is open.
    pub index_open: AtomicBool,
    /// Partitions assigned.
    pub assigned: AtomicUsize,
    /// The brokers answered lately (cleared when the client reports all brokers down).
    pub brokers_down: AtomicBool,
    /// Draining after a stop signal.
    pub draining: AtomicBool,
    /// A fatal error happened (the index cannot be written, a record cannot be produced).
    pub failed: AtomicBool,
    /// What the fatal error was, for `/readyz`.
    pub failure: std::sync::Mutex<Option<String>>,
    /// `neardup serve`: no Kafka, ready once the index is open.
    pub serve_only: AtomicBool,
    /// Restoring the index from the changelog: how far, for `/readyz`.
    pub restoring: std::sync::Mutex<Option<String>>,
    /// A standby decider following the changelog (ready with no partitions assigned).
    pub following: AtomicBool,
    /// A standby of a shard or the aggregator, reading its topics up to its group's
    /// committed offset (ready, writing nothing).
    pub following_topics: AtomicBool,
    /// Records waiting on the assigned partitions, as the client last reported (its
    /// statistics, every 5 s).
    pub lag: std::sync::atomic::AtomicI64,
    /// When the stage last answered a record (milliseconds since the Unix epoch; 0: not yet).
    pub progress_ms: std::sync::atomic::AtomicU64,
}

/// How long a stage with records waiting may answer none before `/healthz` says it is
/// stuck (the liveness probe then restarts it). Far above any pause of a healthy stage: a
/// rebalance, a transaction commit, a broker's leader moving.
pub const STALL: std::time::Duration = std::time::Duration::from_secs(300);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Health {
    /// Readiness of `neardup serve`: the index open, no Kafka.
    pub fn serving() -> Health {
        Health {
            serve_only: AtomicBool::new(true),
            ..Health::default()
        }
    }

    /// Ready (`/readyz`, a Service's readiness): the index open, not draining or failed,
    /// whatever Kafka's state: a signer beyond the partition count and a decider whose
    /// brokers are away still answer `/v1/group` and `/metrics`. Kafka's state is
    /// [`Health::consuming`], shown in the reason and the `neardup_consuming` gauge.
    pub fn ready(&self) -> bool {
        self.started() && !self.draining.load(Ordering::Relaxed)
    }

    /// Started (`/startupz`): the index is open (a signer at once) and no fatal error.
    pub fn started(&self) -> bool {
        self.index_open.load(Ordering::Relaxed) && !self.failed.load(Ordering::Relaxed)
    }

    /// Consuming: partitions assigned (or a standby following the changelog) and brokers
    /// reachable (`neardup serve`: always).
    pub fn consuming(&self) -> bool {
        self.serve_only.load(Ordering::Relaxed)
            || ((self.assigned.load(Ordering::Relaxed) > 0
                || self.following.load(Ordering::Relaxed))
                && !self.brokers_down.load(Ordering::Relaxed))
    }

    /// Records that a record was answered (liveness).
    pub fn progressed(&self) {
        self.progress_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Why the stage is stuck (`/healthz`, liveness): failed, or records waiting on its
    /// partitions and none answered for [`STALL`] (counted from the index's opening when
    /// none was answered yet). `None`: alive.
    pub fn stuck(&self) -> Option<String> {
        if self.failed.load(Ordering::Relaxed) {
            return Some(self.reason());
        }
        let waiting = self.lag.load(Ordering::Relaxed);
        // (a standby shard or aggregator answers nothing: the records past the committed
        // offset are the writer's)
        if waiting <= 0
            || self.assigned.load(Ordering::Relaxed) == 0
            || self.brokers_down.load(Ordering::Relaxed)
            || self.draining.load(Ordering::Relaxed)
            || self.following_topics.load(Ordering::Relaxed)
        {
            return None;
        }
        let last = self.progress_ms.load(Ordering::Relaxed);
        if last == 0 {
            return None;
        }
        let idle = now_ms().saturating_sub(last);
        (idle > STALL.as_millis() as u64).then(|| {
            format!(
                "stuck: {waiting} records waiting and none answered for {} s",
                idle / 1000
            )
        })
    }

    /// Updates the readiness gauge.
    pub fn publish(&self) {
        metrics::gauge!(READY).set(if self.ready() { 1.0 } else { 0.0 });
        metrics::gauge!(CONSUMING).set(if self.ready() && self.consuming() {
            1.0
        } else {
            0.0
        });
        metrics::gauge!(FAILED).set(if self.failed.load(Ordering::Relaxed) {
            1.0
        } else {
            0.0
        });
    }

    /// Records a fatal error: not ready any more, `neardup_failed` 1, `/readyz` says why.
    pub fn fail(&self, why: &str) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(why.chars().take(500).collect());
        }
        drop(f);
        self.failed.store(true, Ordering::Relaxed);
        self.publish();
    }

    /// Why the stage is not ready, for `/readyz`.
    pub fn reason(&self) -> String {
        if self.failed.load(Ordering::Relaxed) {
            return match &*self.failure.lock().unwrap_or_else(|e| e.into_inner()) {
                Some(why) => format!("failed: {why}"),
                None => "failed".into(),
            };
        }
        if self.draining.load(Ordering::Relaxed) {
            "draining"
        } else if !self.index_open.load(Ordering::Relaxed) {
            if let Some(r) = &*self.restoring.lock().unwrap_or_else(|e| e.into_inner()) {
                return r.clone();
            }
            "index not open"
        } else if self.serve_only.load(Ordering::Relaxed) {
            "ready"
        } else if self.brokers_down.load(Ordering::Relaxed) {
            "ready to serve; kafka: brokers unreachable"
        } else if self.following.load(Ordering::Relaxed) {
            "ready: standby, following the changelog"
        } else if self.following_topics.load(Ordering::Relaxed) {
            "ready: standby, following the signed topic"
        } else if self.assigned.load(Ordering::Relaxed) == 0 {
            "ready to serve; kafka: no partitions assigned"
        } else {
            "ready"
        }
        .into()
    }
}

/// How logs are written.
#[derive(Clone, Copy, Debug, serde::Deserialize, serde::Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// JSON lines unless stderr is a terminal.
    #[default]
    Auto,
    /// JSON lines.
    Json,
    /// Human-readable lines.
    Text,
}

neardup_core::impl_from_str_serde!(LogFormat);

/// Sets up logging on stderr: JSON lines unless `format` is text or (auto) stderr is a
/// terminal. The level comes from `RUST_LOG` (default `info`).
pub fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // a second call (tests) keeps the first subscriber
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

/// CPU seconds (user + system, all threads) a process has used so far: this process when
/// `pid` is None. Reads /proc (clock ticks of 1/100 s); None where it cannot.
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // the fields after the command name, which is in parentheses and may hold spaces
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_in_the_documented_table() {
        let readme = include_str!("../docs/kafka-stage.md");
        for (name, kind, _) in METRICS {
            let row = readme
                .lines()
                .find(|l| l.starts_with(&format!("| `{name}` |")))
                .unwrap_or_else(|| {
                    panic!("{name} is missing from the metric table of docs/kafka-stage.md")
                });
            assert!(row.contains(kind), "{name}: docs/kafka-stage.md says {row}");
        }
    }

    #[test]
    fn readiness_needs_the_index_and_shows_kafkas_state() {
        let h = Health::default();
        assert!(!h.ready() && !h.started());
        assert_eq!(h.reason(), "index not open");
        h.index_open.store(true, Ordering::Relaxed);
        // no partition (a signer beyond the partition count): ready, not consuming
        assert!(h.ready() && h.started() && !h.consuming());
        assert_eq!(h.reason(), "ready to serve; kafka: no partitions assigned");
        h.assigned.store(2, Ordering::Relaxed);
        assert!(h.ready() && h.consuming());
        assert_eq!(h.reason(), "ready");
        // brokers away: still serving, not consuming
        h.brokers_down.store(true, Ordering::Relaxed);
        assert!(h.ready() && !h.consuming());
        assert_eq!(h.reason(), "ready to serve; kafka: brokers unreachable");
        h.brokers_down.store(false, Ordering::Relaxed);
        h.draining.store(true, Ordering::Relaxed);
        assert!(!h.ready());
        assert_eq!(h.reason(), "draining");
        h.fail("the index cannot record a decision: No space left on device");
        h.fail("a later error");
        assert!(!h.ready() && !h.started());
        assert_eq!(
            h.reason(),
            "failed: the index cannot record a decision: No space left on device"
        );
        assert!(h.stuck().unwrap().starts_with("failed:"));
    }

    #[test]
    fn liveness_fails_only_with_records_waiting_and_none_answered_for_the_stall() {
        let h = Health::default();
        h.index_open.store(true, Ordering::Relaxed);
        h.progressed();
        h.assigned.store(1, Ordering::Relaxed);
        assert_eq!(h.stuck(), None, "nothing waiting");
        h.lag.store(40, Ordering::Relaxed);
        assert_eq!(h.stuck(), None, "answered lately");
        let long_ago = now_ms() - STALL.as_millis() as u64 - 1_000;
        h.progress_ms.store(long_ago, Ordering::Relaxed);
        let why = h.stuck().expect("stuck");
        assert!(why.contains("40 records waiting"), "{why}");
        // an idle stage with nothing to read, or one whose brokers are away, is alive
        h.lag.store(0, Ordering::Relaxed);
        assert_eq!(h.stuck(), None);
        h.lag.store(40, Ordering::Relaxed);
        h.brokers_down.store(true, Ordering::Relaxed);
        assert_eq!(h.stuck(), None);
        h.brokers_down.store(false, Ordering::Relaxed);
        // a standby shard or aggregator answers nothing: the records waiting are the
        // writer's, and it is alive while it follows
        h.following_topics.store(true, Ordering::Relaxed);
        assert_eq!(h.stuck(), None);
        assert!(h.reason().contains("following the signed topic"));
        h.following_topics.store(false, Ordering::Relaxed);
        assert!(h.stuck().is_some());
        h.progressed();
        assert_eq!(h.stuck(), None, "a record answered: alive again");
    }
}
