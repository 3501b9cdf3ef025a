//! `neardup-lab --brokers ADDR`: the Kafka stage against file mode on the same pages, in
//! the same run: throughput of `neardup dedup`, of the stage (the replay pipeline, bounded),
//! and the consume → acknowledged latency of `neardup run` fed at 80 % of the stage's rate.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde::Serialize;

use crate::config::{
    Config, DedupOptions, DetectOptions, FileConfig, Guarantee, KafkaOptions, MethodOptions,
    Options, Role, SignatureOptions, StageOptions,
};
use crate::index::IndexParams;
use crate::shutdown::Shutdown;
use crate::stage::{self, Mode, StageSettings};
use neardup::cli::input;

/// What the stage benchmark measured.
#[derive(Debug, Serialize)]
pub struct StageBench {
    /// Records in the corpus.
    pub records: usize,
    /// Megabytes of records.
    pub megabytes: f64,
    /// `neardup dedup` on the corpus file: pages per second.
    pub dedup_pages_per_second: f64,
    /// Loading the records into the input topic: records per second.
    pub produce_records_per_second: f64,
    /// The stage over the whole topic (replay pipeline, fresh index): records per second.
    pub stage_records_per_second: f64,
    /// Stage throughput / dedup throughput.
    pub stage_vs_dedup: f64,
    /// CPU time of `neardup dedup` per record (user + system, all threads), ms (where /proc
    /// tells).
    pub dedup_cpu_ms_per_record: Option<f64>,
    /// CPU time of the stage per record (its consumer, signing pool, index and producer), ms.
    pub stage_cpu_ms_per_record: Option<f64>,
    /// dedup CPU / stage CPU per record: the share of file-mode throughput the stage reaches
    /// when its cores are its own and the broker serves as fast as it consumes.
    pub stage_cpu_efficiency: Option<f64>,
    /// CPU time of the broker per record while the stage ran (with --broker-pid), ms.
    pub broker_cpu_ms_per_record: Option<f64>,
    /// Rate the latency run was fed at (80 % of the stage's).
    pub latency_feed_records_per_second: f64,
    /// `neardup run` at that rate: median consume → acknowledged, ms.
    pub latency_p50_ms: f64,
    /// 99th percentile, ms.
    pub latency_p99_ms: f64,
    /// Longest, ms.
    pub latency_max_ms: f64,
    /// That run's time per hop (broker, decide, produce, end to end).
    pub latency_hops: std::collections::BTreeMap<String, crate::stage::HopTimes>,
}

pub use crate::telemetry::cpu_seconds;

pub(super) fn create_topics(brokers: &str, names: &[String], partitions: i32) -> Result<()> {
    create_topics_with(brokers, names, partitions, &[])
}

/// The settings of topics whose records the benchmark never reads back: about 1 GiB kept a
/// partition, in segments of a quarter of it. At 10M pages a decider's outputs and
/// changelog (each record carries the page's signatures, as the signed record does) would
/// otherwise take about twice the signed topic's 11 GB again, more than the disk has beside
/// it and the index.
pub(super) const UNREAD_KEPT: &[(&str, &str)] = &[
    ("retention.bytes", "1073741824"),
    ("segment.bytes", "268435456"),
];

/// [`create_topics`], each topic with the settings `configs`.
pub(super) fn create_topics_with(
    brokers: &str,
    names: &[String],
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()?;
    let topics: Vec<NewTopic<'_>> = names
        .iter()
        .map(|n| {
            configs.iter().fold(
                NewTopic::new(n, partitions, TopicReplication::Fixed(1)),
                |t, &(k, v)| t.set(k, v),
            )
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for r in rt.block_on(admin.create_topics(&topics, &AdminOptions::new()))? {
        if let Err((t, e)) = r {
            bail!("cannot create topic {t}: {e}");
        }
    }
    Ok(())
}

/// What a stage fed by a benchmark has answered: its group's committed offsets on the
/// topics it reads.
pub(super) struct Reads {
    /// The stage's consumer group.
    pub group: String,
    /// Its input topics (produced without transactions, so an end offset counts records).
    pub topics: Vec<String>,
    /// Records the feed puts in them.
    pub records: i64,
}

impl Reads {
    /// What `s` reads, `records` of them.
    pub(super) fn of(s: &StageSettings, records: usize) -> Reads {
        Reads {
            group: s.group_id.clone(),
            topics: s.input_topics.clone(),
            records: records as i64,
        }
    }

    /// A client of the group that only reads its committed offsets.
    fn client(&self, brokers: &str) -> Result<rdkafka::consumer::BaseConsumer> {
        Ok(ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", &self.group)
            .set("enable.auto.commit", "false")
            .create()?)
    }

    /// Whether the group has committed the end of every partition, `records` in all (an end
    /// offset counts records only in a topic written without transactions, whose commit
    /// markers take offsets too: the benchmarks feed their stages so).
    fn done(&self, c: &rdkafka::consumer::BaseConsumer) -> Result<bool> {
        use rdkafka::consumer::Consumer;
        use rdkafka::{Offset, TopicPartitionList};
        let wait = Duration::from_secs(10);
        let (mut ends, mut list) = (0, TopicPartitionList::new());
        let mut end = std::collections::HashMap::new();
        for t in &self.topics {
            let md = c.fetch_metadata(Some(t), wait)?;
            for p in md.topics()[0].partitions() {
                let high = c.fetch_watermarks(t, p.id(), wait)?.1;
                ends += high;
                end.insert((t.clone(), p.id()), high);
                list.add_partition(t, p.id());
            }
        }
        if ends < self.records {
            return Ok(false);
        }
        let committed = c.committed_offsets(list, wait)?;
        Ok(committed.elements().iter().all(|e| {
            let high = end[&(e.topic().to_string(), e.partition())];
            high == 0 || matches!(e.offset(), Offset::Offset(o) if o >= high)
        }))
    }
}

/// Stops stages the way an operator does once they have answered everything they were fed:
/// through their shutdown handle, when every group in `reads` has committed its topics'
/// ends (the stages commit an offset only after its output is acknowledged). A thread,
/// which also ends when `shutdown` is stopped by someone else.
pub(super) fn stop_when_answered(
    brokers: &str,
    reads: Vec<Reads>,
    shutdown: &Shutdown,
) -> std::thread::JoinHandle<()> {
    let (brokers, shutdown) = (brokers.to_string(), shutdown.clone());
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(3600);
        let clients: Vec<_> = match reads.iter().map(|r| r.client(&brokers)).collect() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("  cannot read the stages' progress ({e:#}): stopping them");
                shutdown.stop();
                return;
            }
        };
        while !shutdown.requested() {
            let all = reads.iter().zip(&clients).try_fold(true, |all, (r, c)| {
                Ok::<_, anyhow::Error>(all && r.done(c)?)
            });
            match all {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => eprintln!("  cannot read the stages' progress ({e:#}): trying again"),
            }
            if Instant::now() > deadline {
                eprintln!("  the stages have not answered every record in an hour: stopping them");
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        shutdown.stop();
    })
}

/// Counts the records the broker did not take (a delivery report with an error), keeping
/// the first error: a load that lost records fails instead of leaving a benchmark waiting
/// for answers to records that never arrived.
#[derive(Default)]
struct Deliveries {
    failed: std::sync::atomic::AtomicU64,
    first: std::sync::Mutex<Option<String>>,
}

impl rdkafka::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, r: &rdkafka::message::DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = r {
            self.failed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.first
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| e.to_string());
        }
    }
}

/// The loading producer, within a stock broker's limits (batches of at most 1,000,000
/// bytes, under its `message.max.bytes`; a record longer than that alone in its batch, which
/// such a broker refuses, and the load fails): batches that fill for 100 ms to load a topic
/// fast, or, feeding at a rate (a latency run), the batching of a crawler that sends each
/// page when it has it.
fn producer(brokers: &str, feeding: bool, longest: usize) -> Result<BaseProducer<Deliveries>> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("linger.ms", if feeding { "5" } else { "100" })
        .set("batch.size", "1000000")
        .set(
            "message.max.bytes",
            (longest + 65_536).max(1_000_000).to_string(),
        )
        .create_with_context(Deliveries::default())?)
}

/// How long a full local queue may stay full before the load fails.
const QUEUE_FULL_FOR: Duration = Duration::from_secs(120);

/// Produces `lines` round-robin over `partitions`, at most `rate` records per second; fails
/// on the first record the client refuses (other than a full queue, which waits at most
/// [`QUEUE_FULL_FOR`]) and when any record was not delivered.
pub(super) fn produce(
    brokers: &str,
    topic: &str,
    lines: &[Vec<u8>],
    partitions: i32,
    rate: Option<f64>,
) -> Result<()> {
    let longest = lines.iter().map(Vec::len).max().unwrap_or(0);
    let mut load = Loader::new(brokers, topic, partitions, rate.is_some(), longest)?;
    let mut started = Instant::now();
    for (i, l) in lines.iter().enumerate() {
        if let Some(r) = rate {
            // feeding: the clock starts once the first page is acknowledged, so that the
            // producer's own start (its idempotent producer id, about 0.5 s from the test
            // broker) is not counted as the broker's delay of the pages behind it
            if i == 1 {
                load.p.flush(Duration::from_secs(60))?;
                started = Instant::now();
            }
            let due = Duration::from_secs_f64(i.saturating_sub(1) as f64 / r);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        load.send(l)?;
    }
    load.finish()
}

/// A load of records into one topic, sent as they come (a benchmark that makes its records
/// a chunk at a time never holds them all), round-robin over the partitions.
pub(super) struct Loader {
    p: BaseProducer<Deliveries>,
    topic: String,
    partitions: i32,
    sent: usize,
}

impl Loader {
    /// `longest`: the longest record to come (0: none above the stock broker's limit).
    pub(super) fn new(
        brokers: &str,
        topic: &str,
        partitions: i32,
        feeding: bool,
        longest: usize,
    ) -> Result<Loader> {
        Ok(Loader {
            p: producer(brokers, feeding, longest)?,
            topic: topic.to_string(),
            partitions,
            sent: 0,
        })
    }

    /// Sends one record; fails on a record the client refuses (a full queue waits at most
    /// [`QUEUE_FULL_FOR`]).
    pub(super) fn send(&mut self, l: &[u8]) -> Result<()> {
        use rdkafka::error::{KafkaError, RDKafkaErrorCode};
        let i = self.sent;
        let key = format!("k{i}");
        let mut rec: BaseRecord<'_, str, [u8], ()> = BaseRecord::to(&self.topic)
            .partition(i as i32 % self.partitions)
            .key(key.as_str())
            .payload(l);
        let full_since = Instant::now();
        loop {
            match self.p.send(rec) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                    if full_since.elapsed() < QUEUE_FULL_FOR =>
                {
                    rec = back;
                    self.p.poll(Duration::from_millis(5));
                }
                Err((e, _)) => bail!(
                    "record {i} ({} bytes) not sent to {}: {e}",
                    l.len(),
                    self.topic
                ),
            }
        }
        self.p.poll(Duration::ZERO);
        self.sent += 1;
        Ok(())
    }

    /// Waits for every record's acknowledgement; fails when any was not delivered.
    pub(super) fn finish(self) -> Result<()> {
        let topic = &self.topic;
        self.p
            .flush(Duration::from_secs(300))
            .with_context(|| format!("records to {topic} still unacknowledged after 300 s"))?;
        let failed = self
            .p
            .context()
            .failed
            .load(std::sync::atomic::Ordering::Relaxed);
        if failed > 0 {
            let first = self
                .p
                .context()
                .first
                .lock()
                .unwrap()
                .clone()
                .unwrap_or_default();
            bail!(
                "{failed} of {} records to {topic} were not delivered (the first: {first})",
                self.sent
            );
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn settings(
    mode: Mode,
    role: Role,
    brokers: &str,
    run: &str,
    index: &Path,
    params: &IndexParams,
    extra: &[String],
    guarantee: Guarantee,
    transaction_interval: Option<Duration>,
) -> Result<StageSettings> {
    let kafka = KafkaOptions {
        brokers: Some(brokers.to_string()),
        group_id: Some(format!("{run}-{mode:?}-{}", role.as_str())),
        instance_id: None,
        input_topics: Some(vec![format!("{run}-in")]),
        unique_topic: Some(format!("{run}-unique")),
        duplicate_topic: Some(format!("{run}-duplicate")),
        dead_letter_topic: Some(format!("{run}-dead")),
        signed_topic: Some(format!("{run}-signed")),
        votes_topic: None,
        changelog_topic: (role == Role::Decider).then(|| format!("{run}-changelog")),
        kafka_property: Some(
            ["message.max.bytes=100000000"]
                .iter()
                .map(|p| p.to_string())
                .chain(extra.iter().cloned())
                .collect(),
        ),
        kafka_properties_file: None,
        guarantee: None,
        transaction_interval,
    };
    let stage = StageOptions {
        index: Some(index.to_path_buf()),
        listen: Some("off".into()),
        no_text: Some(false),
        role: Some(role),
        ..Default::default()
    };
    let options = Options {
        kafka,
        stage,
        ..Default::default()
    };
    let mut c = Config::resolve(options, &FileConfig::default())?;
    c.params = params.clone();
    let mut s = StageSettings::resolve(mode, &c)?;
    // the throughput run reads the topic once in a replay: exactly-once is set on it here
    // (a user's replay refuses it, for it may be run again over the same range)
    s.guarantee = guarantee;
    Ok(s)
}

/// The records of a corpus file that a broker can serve (at most `limit`).
pub(super) fn load_lines(
    corpus: &Path,
    limit: Option<usize>,
    max_broker_record: usize,
) -> Result<Vec<Vec<u8>>> {
    let limit = limit.unwrap_or(usize::MAX);
    let mut reader = input::open(corpus)?;
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut n = 0;
    while lines.len() < limit {
        let batch = input::read_batch(&mut reader, &mut n, 1000, 1 << 30, usize::MAX)?;
        if batch.is_empty() {
            break;
        }
        lines.extend(batch.into_iter().take(limit - lines.len()).map(|l| l.bytes));
    }
    // records the broker can serve: some brokers return nothing for a record over a few
    // MB, which would stall its partition (the stage's own limit is --max-record-bytes)
    let before = lines.len();
    lines.retain(|l| l.len() <= max_broker_record);
    if lines.len() < before {
        eprintln!(
            "  left out {} records over {max_broker_record} bytes (--max-broker-record)",
            before - lines.len(),
        );
    }
    Ok(lines)
}

/// What the stage benchmark is run on (the options of `neardup-lab` it reads).
pub struct StageBenchArgs<'a> {
    /// Page JSONL.
    pub corpus: &'a Path,
    /// Read at most this many pages.
    pub limit: Option<usize>,
    /// Leave out records larger than this (the broker's limit).
    pub max_broker_record: usize,
    /// Client properties for the stage, after the benchmark's own.
    pub kafka_property: &'a [String],
    /// The broker's process id, for its CPU time.
    pub broker_pid: Option<u32>,
    /// The stage's guarantee.
    pub guarantee: Guarantee,
    /// Exactly-once: the transaction interval (the stage's default when absent).
    pub transaction_interval: Option<Duration>,
    /// The detection options, for the file-mode run.
    pub method: MethodOptions,
    /// The detection options, for the file-mode run.
    pub detect: DetectOptions,
    /// The signature options, for the file-mode run.
    pub signature: SignatureOptions,
}

/// Runs the stage benchmark over the corpus at `args.corpus`.
pub fn run(
    args: &StageBenchArgs<'_>,
    brokers: &str,
    params: &IndexParams,
    file: &FileConfig,
) -> Result<StageBench> {
    let corpus = args.corpus;
    let lines = load_lines(corpus, args.limit, args.max_broker_record)?;
    let megabytes = lines.iter().map(|l| l.len() + 1).sum::<usize>() as f64 / 1e6;
    let dir = tempfile::tempdir()?;
    eprintln!(
        "neardup-lab (stage): {} records, {megabytes:.1} MB, broker {brokers}",
        lines.len()
    );

    // 1. file mode on the same records
    let jsonl = dir.path().join("corpus.jsonl");
    std::fs::write(&jsonl, lines.join(&b'\n')).context("write the corpus copy")?;
    let cpu0 = cpu_seconds(None);
    let dedup = neardup::cli::dedup::run(
        neardup::cli::dedup::DedupArgs {
            input: jsonl.clone(),
            io: DedupOptions {
                index: Some(dir.path().join("dedup-index")),
                unique: Some(dir.path().join("dedup-unique.jsonl")),
                duplicates: Some(dir.path().join("dedup-dup.jsonl")),
                dead_letter: Some(dir.path().join("dedup-dead.jsonl")),
                max_record_bytes: Some(neardup::config::DEFAULT_MAX_RECORD_BYTES),
                ..Default::default()
            },
            method: args.method.clone(),
            detect: args.detect.clone(),
            signature: args.signature.clone(),
            summary_json: false,
        },
        file,
    )?;
    let per_record = |now: Option<f64>, then: Option<f64>| {
        now.zip(then)
            .map(|(b, a)| 1000.0 * (b - a) / lines.len() as f64)
    };
    let ms = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.2}"));
    let dedup_cpu = per_record(cpu_seconds(None), cpu0);
    eprintln!(
        "  neardup dedup: {:.0} pages/s, {} ms CPU a page",
        dedup.pages_per_second,
        ms(dedup_cpu)
    );

    // 2. the stage over a loaded topic
    let run_id = format!("neardup-bench-{}", std::process::id());
    let partitions = 3;
    let topics: Vec<String> = ["in", "unique", "duplicate", "dead"]
        .iter()
        .map(|t| format!("{run_id}-{t}"))
        .collect();
    create_topics(brokers, &topics, partitions)?;
    let t = Instant::now();
    produce(brokers, &topics[0], &lines, partitions, None)?;
    let produce_rate = lines.len() as f64 / t.elapsed().as_secs_f64();
    eprintln!("  loaded the input topic: {produce_rate:.0} records/s");
    let s = settings(
        Mode::Replay,
        Role::All,
        brokers,
        &run_id,
        &dir.path().join("stage-index"),
        params,
        args.kafka_property,
        args.guarantee,
        args.transaction_interval,
    )?;
    let (cpu0, broker0) = (
        cpu_seconds(None),
        args.broker_pid.and_then(|p| cpu_seconds(Some(p))),
    );
    let summary = stage::run(s, crate::shutdown::Shutdown::new())?;
    let stage_cpu = per_record(cpu_seconds(None), cpu0);
    let broker_cpu = per_record(args.broker_pid.and_then(|p| cpu_seconds(Some(p))), broker0);
    let efficiency = dedup_cpu.zip(stage_cpu).map(|(d, s)| d / s);
    if summary.records as usize != lines.len() {
        bail!(
            "the stage read {} of {} records",
            summary.records,
            lines.len()
        );
    }
    let stage_rate = summary.records_per_second;
    eprintln!(
        "  neardup stage: {stage_rate:.0} records/s ({:.0} % of dedup), {} ms CPU a record ({} \
         % of dedup's efficiency){}",
        100.0 * stage_rate / dedup.pages_per_second,
        ms(stage_cpu),
        efficiency.map_or("?".to_string(), |e| format!("{:.0}", 100.0 * e)),
        broker_cpu.map_or(String::new(), |b| format!(
            "; the broker {b:.2} ms CPU a record"
        ))
    );

    // 3. latency of `neardup run` fed at 80 % of the stage's rate
    let run2 = format!("{run_id}-lat");
    let topics2: Vec<String> = ["in", "unique", "duplicate", "dead"]
        .iter()
        .map(|t| format!("{run2}-{t}"))
        .collect();
    create_topics(brokers, &topics2, partitions)?;
    let s2 = settings(
        Mode::Run,
        Role::All,
        brokers,
        &run2,
        &dir.path().join("lat-index"),
        params,
        args.kafka_property,
        args.guarantee,
        args.transaction_interval,
    )?;
    let feed = 0.8 * stage_rate;
    let shutdown = Shutdown::new();
    let watch = stop_when_answered(brokers, vec![Reads::of(&s2, lines.len())], &shutdown);
    let stop = shutdown.clone();
    let stage_thread = std::thread::spawn(move || {
        // a stage that ends (an error) ends the wait for its answers too
        let r = stage::run(s2, stop.clone());
        stop.stop();
        r
    });
    // let the consumer join its group before feeding
    std::thread::sleep(Duration::from_secs(6));
    let fed = produce(brokers, &topics2[0], &lines, partitions, Some(feed));
    if fed.is_err() {
        shutdown.stop();
    }
    let lat = stage_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the stage thread panicked"))?;
    let _ = watch.join();
    fed?;
    let lat = lat?;
    eprintln!(
        "  neardup run at {feed:.0} records/s: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        lat.latency_p50_ms, lat.latency_p99_ms, lat.latency_max_ms
    );
    Ok(StageBench {
        records: lines.len(),
        megabytes,
        dedup_pages_per_second: dedup.pages_per_second,
        produce_records_per_second: produce_rate,
        stage_records_per_second: stage_rate,
        stage_vs_dedup: stage_rate / dedup.pages_per_second,
        dedup_cpu_ms_per_record: dedup_cpu,
        stage_cpu_ms_per_record: stage_cpu,
        stage_cpu_efficiency: efficiency,
        broker_cpu_ms_per_record: broker_cpu,
        latency_feed_records_per_second: feed,
        latency_p50_ms: lat.latency_p50_ms,
        latency_p99_ms: lat.latency_p99_ms,
        latency_max_ms: lat.latency_max_ms,
        latency_hops: lat.hops,
    })
}
