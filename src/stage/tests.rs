//! In-process tests of the decider and the producer: records go through the same functions
//! the stage runs, fed by channels (the decider) or a real broker (the producer).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::commit::Committed;
use super::decide::{decide_loop, Counts};
use super::flow::{InFlight, Inbound, Job, Outbound, PrepOutput};
use super::flow::{HEADER_CANONICAL, HEADER_DECISION, HEADER_REASON};
use super::kafka::{self, StageContext};
use super::produce::produce_loop;
use super::{Mode, StageSettings};
use crate::config::{Config, FileConfig, KafkaOptions, Options, Role, StageOptions};
use crate::dedup::Deduplicator;
use crate::index::Index;
use crate::record::changelog;

#[path = "../../tests/common/mod.rs"]
mod common;

const PAGES: &str = include_str!("../../examples/pages.jsonl");
const TOPIC: &str = "pages";

/// The stage's settings at their defaults, with this index (and a changelog topic).
fn settings(index: &Path, changelog: Option<&str>) -> StageSettings {
    settings_at(index, changelog, None)
}

/// The same, with these brokers.
fn settings_at(index: &Path, changelog: Option<&str>, brokers: Option<&str>) -> StageSettings {
    let kafka = KafkaOptions {
        changelog_topic: changelog.map(str::to_string),
        brokers: brokers.map(str::to_string),
        ..Default::default()
    };
    let stage = StageOptions {
        index: Some(index.to_path_buf()),
        role: Some(Role::All),
        ..Default::default()
    };
    let o = Options {
        kafka,
        stage,
        ..Default::default()
    };
    StageSettings::resolve(
        Mode::Run,
        &Config::resolve(o, &FileConfig::default()).unwrap(),
    )
    .unwrap()
}

fn open(s: &StageSettings) -> Deduplicator {
    Deduplicator::new(Index::open_dir(&s.index, s.params.clone()).unwrap()).unwrap()
}

/// A consumed record at `offset` of partition 0, prepared as a pool thread prepares it.
fn job(s: &StageSettings, dedup: &Deduplicator, offset: i64, payload: &[u8]) -> Job {
    let (tx, rx) = oneshot::channel();
    let (prepared, times) = crate::prepare::prepare(payload, &dedup.signer(), s.max_record_bytes);
    let now = Instant::now();
    tx.send(PrepOutput {
        payload: payload.to_vec(),
        prepared,
        times,
        has_text: true,
        origin_ms: Some(1_764_000_000_000),
        ran: (now, now),
    })
    .ok()
    .expect("the receiver is alive");
    let permit = Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap();
    Job {
        inbound: Inbound {
            topic: Arc::from(TOPIC),
            partition: 0,
            offset,
            key: Some(format!("k{offset}").into_bytes()),
            timestamp_ms: Some(1_764_000_000_000),
            consumed: now,
            broker_wait: None,
            head: payload[..payload.len().min(super::flow::HEAD_BYTES)].to_vec(),
            len: payload.len(),
            prepared: None,
            generation: None,
            _permit: InFlight::new(permit),
        },
        prepared: rx,
    }
}

/// Runs the decider over `records` (from `first` on) as the stage does, to the end of its
/// queue; returns its outputs in order and its counts.
fn decide_all(
    s: &StageSettings,
    dedup: &mut Deduplicator,
    records: &[&[u8]],
    first: i64,
    committed: Option<Arc<Mutex<Committed>>>,
) -> (Vec<Outbound>, Counts) {
    let (job_tx, job_rx) = mpsc::channel(records.len() + 1);
    for (i, r) in records.iter().enumerate() {
        job_tx
            .try_send(job(s, dedup, first + i as i64, r))
            .map_err(|_| "queue full")
            .unwrap();
    }
    drop(job_tx);
    let (out_tx, mut out_rx) = mpsc::channel(records.len() + 1);
    let mut counts = Counts::default();
    decide_loop(s, dedup, job_rx, out_tx, &mut counts, committed).unwrap();
    let mut outs = Vec::new();
    while let Ok(ob) = out_rx.try_recv() {
        outs.push(ob);
    }
    (outs, counts)
}

fn header<'a>(ob: &'a Outbound, name: &str) -> Option<&'a str> {
    ob.headers
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.as_str())
}

fn example_pages() -> Vec<&'static [u8]> {
    PAGES
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::as_bytes)
        .collect()
}

/// The decider answers every record once, in consumption order, on the topic of its
/// decision with its headers; a bad record is a dead letter in its place; a redelivered
/// record is answered with the same bytes.
#[test]
fn decider_answers_in_order_and_again_with_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), None);
    let mut dedup = open(&s);
    let mut records = example_pages();
    records.insert(4, b"{\"url\": 5, \"html\": \"<p>x</p>\"}");
    let (outs, counts) = decide_all(&s, &mut dedup, &records, 0, None);

    assert_eq!(outs.len(), records.len(), "every record is answered");
    let offsets: Vec<i64> = outs.iter().map(|o| o.inbound.offset).collect();
    assert_eq!(offsets, (0..records.len() as i64).collect::<Vec<_>>());
    assert_eq!(
        (
            counts.unique,
            counts.duplicate,
            counts.skipped,
            counts.dead_letter
        ),
        (8, 3, 2, 1),
        "the example pages' decisions (README), and the bad record"
    );
    let bad = &outs[4];
    assert_eq!(&*bad.topic, s.dead_letter_topic.as_str());
    assert_eq!(header(bad, HEADER_DECISION), Some("dead_letter"));
    assert!(header(bad, HEADER_REASON).is_some());
    let dl: serde_json::Value = serde_json::from_slice(&bad.payload).unwrap();
    assert_eq!(dl["source"]["offset"], 4, "{dl}");
    for ob in outs.iter().filter(|o| o.label != "dead_letter") {
        let rec: serde_json::Value = serde_json::from_slice(&ob.payload).unwrap();
        let decision = rec["dedup"]["decision"].as_str().unwrap();
        assert_eq!(header(ob, HEADER_DECISION), Some(decision));
        let want = if decision == "duplicate" {
            &s.duplicate_topic
        } else {
            &s.unique_topic
        };
        assert_eq!(&*ob.topic, want.as_str(), "{decision}");
        assert_eq!(
            header(ob, HEADER_CANONICAL),
            rec["dedup"]["canonical_id"].as_str(),
        );
        assert!(
            rec["dedup"].get("repeated").is_none(),
            "outputs of one record are equal"
        );
    }
    let ex003 = outs
        .iter()
        .find(|o| {
            serde_json::from_slice::<serde_json::Value>(&o.payload).unwrap()["id"] == "ex-003"
        })
        .unwrap();
    assert_eq!(header(ex003, HEADER_CANONICAL), Some("ex-001"));

    // redelivered: the stored decisions, the same bytes
    let (again, counts) = decide_all(&s, &mut dedup, &records, 0, None);
    assert_eq!(counts.repeated, records.len() as u64 - 1);
    for (a, b) in outs.iter().zip(&again) {
        assert_eq!(a.topic, b.topic);
        assert_eq!(a.headers, b.headers);
        if a.label != "dead_letter" {
            assert_eq!(a.payload, b.payload, "offset {}", a.inbound.offset);
        }
    }
}

/// With a changelog, each output carries its index mutations; applied in order to an empty
/// index they make one that answers every page as the first did.
#[test]
fn changelog_records_rebuild_an_index_that_decides_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(&dir.path().join("a"), Some("pages-index-changelog"));
    let mut dedup = open(&s);
    let records = example_pages();
    let (outs, _) = decide_all(&s, &mut dedup, &records, 0, None);
    let params_id = crate::record::params_id(&s.params);
    let mut stored = 0;
    let b = settings(&dir.path().join("b"), None);
    let mut restored = Index::open_dir(&b.index, b.params.clone()).unwrap();
    for ob in &outs {
        for e in &ob.extra {
            assert_eq!(&*e.topic, "pages-index-changelog");
            match changelog::decode(&e.key, e.payload.as_deref(), &params_id).unwrap() {
                changelog::Restore::Put(num, rec) => {
                    stored += u64::from(restored.restore_put(num, &rec).unwrap())
                }
                changelog::Restore::Delete(id) => {
                    restored.remove_id(&id).unwrap();
                }
            }
        }
    }
    assert_eq!(stored, records.len() as u64, "one document a page");
    let mut from_log = Deduplicator::new(restored).unwrap();
    let (again, counts) = decide_all(&b, &mut from_log, &records, 0, None);
    assert_eq!(counts.repeated, records.len() as u64);
    for (a, b) in outs.iter().zip(&again) {
        assert_eq!(a.payload, b.payload, "offset {}", a.inbound.offset);
    }
    // a changelog record for a page too large for the producer's limit would stop a restore:
    // such a page is a dead letter instead
    let huge = format!(
        "{{\"id\":\"huge\",\"url\":\"https://example.test/{}\",\"html\":\"<p>a b c</p>\"}}",
        "u".repeat(1 << 20)
    );
    let (outs, counts) = decide_all(&s, &mut dedup, &[huge.as_bytes()], 100, None);
    assert_eq!(counts.dead_letter, 1);
    assert_eq!(&*outs[0].topic, s.dead_letter_topic.as_str());
    assert!(outs[0].extra.is_empty());
}

/// Exactly-once: a decision leaves a mark in the index until a commit covers its input
/// offset; the decider clears the marks the commits it is told of covered.
#[test]
fn decisions_stay_marked_until_a_commit_covers_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), None);
    let mut dedup = open(&s);
    let records = example_pages();
    let jobs: Vec<Job> = (0..=records.len())
        .map(|i| match records.get(i) {
            Some(r) => job(&s, &dedup, i as i64, r),
            None => job(
                &s,
                &dedup,
                i as i64,
                br#"{"id": "next", "url": "https://example.test/next", "html": "<p>next</p>"}"#,
            ),
        })
        .collect();
    let committed: Arc<Mutex<Committed>> = Arc::default();
    let (job_tx, job_rx) = mpsc::channel(jobs.len());
    let (out_tx, mut out_rx) = mpsc::channel(jobs.len());
    let decider = {
        let (s, committed) = (s.clone(), Some(Arc::clone(&committed)));
        std::thread::spawn(move || {
            let mut counts = Counts::default();
            decide_loop(&s, &mut dedup, job_rx, out_tx, &mut counts, committed).unwrap();
            dedup
        })
    };
    let mut jobs = jobs.into_iter();
    for j in jobs.by_ref().take(records.len()) {
        job_tx.blocking_send(j).map_err(|_| "decider gone").unwrap();
    }
    for _ in 0..records.len() {
        out_rx.blocking_recv().unwrap();
    }
    // a commit covers offsets 0 to 4; the decider clears their marks after its next batch
    committed
        .lock()
        .unwrap()
        .inputs
        .insert((Arc::from(TOPIC), 0), 5);
    job_tx
        .blocking_send(jobs.next().unwrap())
        .map_err(|_| "decider gone")
        .unwrap();
    out_rx.blocking_recv().unwrap();
    drop(job_tx);
    let dedup = decider.join().unwrap();
    let left = dedup.index().pending().unwrap();
    let ids: Vec<&str> = left.iter().map(|(_, _, id)| id.as_str()).collect();
    let mut want: Vec<String> = (6..=13).map(|n| format!("ex-{n:03}")).collect();
    want.push("next".into());
    assert_eq!(ids, want, "offsets 5 on are not committed yet");
}

/// The producer writes every output in consumption order (within each output topic), with
/// its changelog records; answers an output the broker refuses as too large with a dead
/// letter in its place, under the input's key; and stores the input offsets, so that the
/// group's commit covers every answered input.
#[test]
fn producer_writes_outputs_in_order_and_commits_past_the_answered_inputs() {
    use rdkafka::consumer::{CommitMode, Consumer};
    use rdkafka::TopicPartitionList;
    use std::time::Duration;
    let _one = common::serial();
    let broker = common::Broker::start();
    let dir = tempfile::tempdir().unwrap();
    let changelog_topic = "pages-index-changelog";
    let s = settings_at(dir.path(), Some(changelog_topic), Some(&broker.addr()));
    let topics = [
        TOPIC,
        s.unique_topic.as_str(),
        s.duplicate_topic.as_str(),
        s.dead_letter_topic.as_str(),
        changelog_topic,
    ];
    broker.create_topics(&topics.map(|t| (t, 1)));
    let pages = example_pages();
    let inputs: Vec<common::Input> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| (0, format!("k{i}"), Some(p.to_vec())))
        .collect();
    broker.produce(TOPIC, &inputs);

    // the example pages' decisions (8 unique, 3 duplicates, 2 skipped), the second's output
    // (ex-002, unique) made larger than a record may be
    let mut dedup = open(&s);
    let (mut outs, _) = decide_all(&s, &mut dedup, &pages, 0, None);
    outs[1].payload = vec![b' '; 2 << 20];
    let logged: usize = outs.iter().map(|o| o.extra.len()).sum();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in_runtime = rt.enter();
    let health = Arc::new(crate::telemetry::Health::default());
    let ctx = StageContext::new(Arc::clone(&health), None);
    let consumer = Arc::new(kafka::consumer(&s, ctx.clone(), None).unwrap());
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(TOPIC, 0);
    consumer.assign(&tpl).unwrap();
    let producer = kafka::producer(&s, ctx, None).unwrap();
    let (tx, rx) = mpsc::channel(outs.len());
    for ob in outs {
        tx.try_send(ob).map_err(|_| "queue full").unwrap();
    }
    drop(tx);
    let (acked, _) = rt.block_on(produce_loop(
        Some(producer),
        Arc::from(s.dead_letter_topic.as_str()),
        Arc::clone(&consumer),
        rx,
        s.max_in_flight,
        Arc::clone(&health),
        false,
        None,
    ));
    assert_eq!(acked.unwrap(), pages.len() as u64);
    consumer.commit_consumer_state(CommitMode::Sync).unwrap();
    assert_eq!(
        broker.committed(&s.group_id, TOPIC, 1),
        vec![pages.len() as i64]
    );

    let outputs = broker.read(&topics[1..4], pages.len(), Duration::from_secs(30));
    assert_eq!(outputs.len(), pages.len());
    // each output keeps its input's key: k<offset>
    let offset = |o: &common::Out| -> usize { o.key.as_deref().unwrap()[1..].parse().unwrap() };
    for t in &topics[1..4] {
        let order: Vec<usize> = outputs
            .iter()
            .filter(|o| o.topic == *t)
            .map(offset)
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{t}: {order:?}");
    }
    let count = |t: &str| outputs.iter().filter(|o| o.topic == t).count();
    assert_eq!(
        count(&s.unique_topic),
        7 + 2,
        "unique and skipped, less the refused one"
    );
    assert_eq!(count(&s.duplicate_topic), 3);
    let dead: Vec<&common::Out> = outputs
        .iter()
        .filter(|o| o.topic == s.dead_letter_topic)
        .collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].json()["reason"],
        "output_too_large",
        "{}",
        dead[0].json()
    );
    assert_eq!(dead[0].source(), format!("{TOPIC}:0:1"));
    assert_eq!(dead[0].key.as_deref(), Some("k1"));
    assert_eq!(
        dead[0].headers["neardup-decision"], "dead_letter",
        "{:?}",
        dead[0].headers
    );
    // the changelog records of every decision (the refused output's too: its decision
    // stands, and a redelivery answers it from the index)
    let log = broker.read(&[changelog_topic], logged, Duration::from_secs(30));
    assert_eq!(log.len(), logged);
    assert!(logged >= pages.len(), "one document a page at least");
}
