//! Exactly-once against Apache Kafka: outputs, dead letters and input offsets in
//! transactions, the index brought back to the last commit after a crash, an older process
//! of an index fenced.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;

const OUTPUTS: [&str; 3] = ["pages-unique", "pages-duplicate", "pages-dead-letter"];
const EXACTLY_ONCE: [&str; 2] = ["--guarantee", "exactly-once"];

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// 20 SIGKILLs of the single process at default settings with exactly-once on: three during
/// start-up (before its first assignment), three right after it joined the group, fourteen
/// mid-stream (records in flight, a transaction open or committing). A read_committed
/// consumer then sees every input answered exactly once, with no repeat, and the decisions
/// equal an uninterrupted file-mode run's: the index dropped what aborted transactions had
/// decided.
#[test]
fn twenty_kills_with_exactly_once_answer_every_input_once_as_one_run_would() {
    let _g = serial();
    let b = broker_with_topics();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let seed: u64 = env_or("NEARDUP_EOS_SEED", 0x9E37_79B9_7F4A_7C15);
    let mut rng = Rng(seed);
    // enough that the run is not over before the last kill: more stories are fed whenever
    // the outputs so far (which count repeats too) come within 6,000 records of the input,
    // however fast the machine answers (a run answered 1,000 to 4,000 records before its
    // kill on the machines tried)
    let batch: u64 = env_or("NEARDUP_EOS_STORIES", 6000);
    let mut records = synthetic(batch, 3);
    b.produce("pages", &records);
    let mut stories = batch;
    let mut outputs = 0.0;
    let started = Instant::now();
    let mut n = 0;
    let mut log = || {
        n += 1;
        dir.path().join(format!("run-{n}.log"))
    };
    let mut kills: Vec<(&str, f64, f64)> = Vec::new();
    let mut kill = |s: &mut Stage, what: &'static str| {
        let out = s.metric("neardup_records_out_total", "");
        let committed = s.metric("neardup_transactions_committed_total", "");
        s.signal("KILL");
        assert_eq!(
            s.wait(Duration::from_secs(10)),
            None,
            "killed by the signal"
        );
        eprintln!(
            "kill {}: {what}, {out} outputs, {committed} transactions",
            kills.len() + 1
        );
        kills.push((what, out, committed));
    };
    for _ in 0..3 {
        let mut s = Stage::start(&b, &index, &log(), &EXACTLY_ONCE);
        std::thread::sleep(Duration::from_millis(rng.below(800)));
        kill(&mut s, "start-up");
    }
    for _ in 0..3 {
        let mut s = Stage::start(&b, &index, &log(), &EXACTLY_ONCE);
        s.wait_ready(Duration::from_secs(90));
        std::thread::sleep(Duration::from_millis(rng.below(100)));
        kill(&mut s, "first join");
    }
    for _ in 0..14 {
        if outputs + 6000.0 > records.len() as f64 {
            let more = synthetic_range(stories, stories + batch, 3);
            b.produce("pages", &more);
            records.extend(more);
            stories += batch;
        }
        let mut s = Stage::start(&b, &index, &log(), &EXACTLY_ONCE);
        s.wait_ready(Duration::from_secs(90));
        let deadline = Instant::now() + Duration::from_secs(90);
        while s.metric("neardup_records_out_total", "") == 0.0 {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&s.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "no outputs after a restart; log tail:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(rng.below(400)));
        outputs += s.metric("neardup_records_out_total", "");
        kill(&mut s, "mid-stream");
    }
    let ids = ids(&records);
    let answered = answers(&b.read(&OUTPUTS, usize::MAX, Duration::from_secs(60)));
    assert!(
        answered.len() < ids.len(),
        "the run ended before the last kill ({} of {} answered)",
        answered.len(),
        ids.len()
    );
    let mut s = Stage::start(&b, &index, &log(), &EXACTLY_ONCE);
    s.wait_ready(Duration::from_secs(90));
    wait_until(Duration::from_secs(600), "every input answered", || {
        b.read_quiet(
            &OUTPUTS,
            ids.len(),
            Duration::from_secs(30),
            Duration::from_secs(2),
        )
        .len()
            >= ids.len()
    });
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(60)), Some(0), "SIGTERM exits 0");

    let outs = b.read_quiet(
        &OUTPUTS,
        usize::MAX,
        Duration::from_secs(120),
        Duration::from_secs(5),
    );
    check_exactly_once(&outs, &ids);
    let got: BTreeMap<_, _> = outs.iter().map(|o| decision_of(&o.json())).collect();
    let expected = file_mode(&records, dir.path());
    let differ: Vec<_> = expected
        .iter()
        .filter(|(id, d)| got.get(*id) != Some(d))
        .take(5)
        .collect();
    assert!(
        differ.is_empty(),
        "decisions differ from an uninterrupted run, e.g. {differ:?}"
    );
    // an uncommitted transaction's outputs exist on the broker but are not read: reading
    // uncommitted shows more records than inputs
    let all = b.read_uncommitted(&OUTPUTS);
    eprintln!(
        "{} inputs, 20 kills, every input answered once; {} output records on the broker \
         in all (aborted ones included); {} s",
        ids.len(),
        all,
        started.elapsed().as_secs()
    );
    assert!(
        all > ids.len(),
        "no kill left an aborted transaction behind ({all} records for {} inputs)",
        ids.len()
    );
}

/// A second process started on the same index while the first is paused (SIGSTOP) takes
/// over; the first, resumed, is fenced by the broker and writes nothing more: every input
/// is still answered once.
#[test]
fn a_paused_process_is_fenced_when_it_comes_back() {
    let _g = serial();
    let b = broker_with_topics();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let records = synthetic(600, 3);
    let ids = ids(&records);
    b.produce("pages", &records[..records.len() / 2]);
    let mut a = Stage::start(&b, &index, &dir.path().join("a.log"), &EXACTLY_ONCE);
    a.wait_ready(Duration::from_secs(90));
    wait_until(
        Duration::from_secs(90),
        "outputs of the first process",
        || a.metric("neardup_records_out_total", "") > 0.0,
    );
    a.signal("STOP");
    // its copy of the index: what a standby would have (a checkpoint taken while paused)
    let copy = dir.path().join("index-b");
    copy_dir(&index, &copy);
    let mut s = Stage::start(&b, &copy, &dir.path().join("b.log"), &EXACTLY_ONCE);
    s.wait_ready(Duration::from_secs(120));
    b.produce("pages", &records[records.len() / 2..]);
    wait_until(Duration::from_secs(300), "every input answered", || {
        answers(&b.read(&OUTPUTS, ids.len(), Duration::from_secs(30))).len() >= ids.len()
    });
    a.signal("CONT");
    let code = a.wait(Duration::from_secs(120));
    assert_ne!(code, Some(0), "the fenced process stops with an error");
    let log = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
    assert!(log.contains("fenced"), "the log says it was fenced");
    stop_and_check_exactly_once(&b, [&mut s], &OUTPUTS, ids);
}

/// Near-copies on different partitions: copy `c` of story `s` goes to partition
/// `(s + c) % partitions`, so one story's copies are decided in whatever order the
/// partitions are consumed.
fn spread(records: Vec<Input>, partitions: i32) -> Vec<Input> {
    records
        .into_iter()
        .map(|(_, key, v)| {
            let id: serde_json::Value = serde_json::from_slice(v.as_ref().unwrap()).unwrap();
            let id = id["id"].as_str().unwrap().to_string();
            // ids are sSSSSS-cC
            let story: i32 = id[1..6].parse().unwrap();
            let copy: i32 = id[8..].parse().unwrap();
            ((story + copy) % partitions, key, v)
        })
        .collect()
}

/// The ids a start's undo removed (its log at debug level for target neardup::undo).
fn undone(log: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("exactly-once: undone"))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["fields"]["id"]
                .as_str()
                .or(v["id"].as_str())
                .unwrap_or_else(|| panic!("no id in {l}"))
                .to_string()
        })
        .collect()
}

/// Kills that land mid-transaction with near-copies on different partitions: the next start
/// removes from the index exactly what the aborted transactions decided (every page answered
/// only in an aborted transaction, and nothing a committed one answered), and in the end a
/// read_committed consumer sees every input answered once, each story one unique page and
/// its other copies duplicates of a copy of the same story.
#[test]
fn kills_mid_transaction_undo_what_the_aborted_transactions_decided() {
    let _g = serial();
    // the start's undo names the documents it removes at debug level
    std::env::set_var("NEARDUP_TEST_RUST_LOG", "info,neardup::undo=debug");
    let b = broker_with_topics();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let records = spread(synthetic(env_or("NEARDUP_EOS_STORIES", 4000), 3), 3);
    let ids = ids(&records);
    b.produce("pages", &records);
    let mut rng = Rng(env_or("NEARDUP_EOS_SEED", 0x2545_F491_4F6C_DD1D));
    let log = |n: usize| dir.path().join(format!("undo-{n}.log"));
    let mut removed_in_all = 0;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut s = Stage::start(&b, &index, &log(0), &EXACTLY_ONCE);
    for k in 1..=6 {
        s.wait_ready(Duration::from_secs(90));
        let at = s.metric("neardup_records_out_total", "");
        wait_until(Duration::from_secs(90), "outputs after the start", || {
            s.metric("neardup_records_out_total", "") > at
        });
        std::thread::sleep(Duration::from_millis(rng.below(400)));
        s.signal("KILL");
        assert_eq!(
            s.wait(Duration::from_secs(10)),
            None,
            "killed by the signal"
        );
        let committed: BTreeSet<String> = b
            .read_quiet(
                &OUTPUTS,
                usize::MAX,
                Duration::from_secs(60),
                Duration::from_secs(3),
            )
            .iter()
            .map(Out::source)
            .collect();
        // the pages this run answered in a transaction that did not commit: more records
        // for them on the broker than before this run, and none a read_committed
        // consumer sees
        let held = answers(&b.read_all_uncommitted(&OUTPUTS));
        let aborted: BTreeSet<String> = held
            .iter()
            .filter(|(id, n)| !committed.contains(*id) && **n > seen.get(*id).copied().unwrap_or(0))
            .map(|(id, _)| id.clone())
            .collect();
        seen = held;
        s = Stage::start(&b, &index, &log(k), &EXACTLY_ONCE);
        s.wait_ready(Duration::from_secs(90));
        let u = undone(&log(k));
        eprintln!(
            "kill {k}: {} answered, {} answered only in aborted transactions, {} undone",
            committed.len(),
            aborted.len(),
            u.len()
        );
        let wrongly: Vec<_> = u.intersection(&committed).take(5).collect();
        assert!(
            wrongly.is_empty(),
            "committed decisions undone, e.g. {wrongly:?}"
        );
        let kept: Vec<_> = aborted.difference(&u).take(5).collect();
        assert!(
            kept.is_empty(),
            "decisions of an aborted transaction left in the index, e.g. {kept:?}"
        );
        removed_in_all += u.len();
    }
    assert!(
        removed_in_all > 0,
        "no kill landed mid-transaction: nothing was undone"
    );
    wait_until(Duration::from_secs(600), "every input answered", || {
        answers(&b.read(&OUTPUTS, ids.len(), Duration::from_secs(30))).len() >= ids.len()
    });
    let (outs, _) = stop_and_check_exactly_once(&b, [&mut s], &OUTPUTS, ids);
    // each story: one unique page, its other copies duplicates of a copy of the same story
    let mut stories: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for o in &outs {
        let (id, (decision, canonical)) = decision_of(&o.json());
        stories
            .entry(id[..6].to_string())
            .or_default()
            .push((decision, canonical));
    }
    for (story, copies) in &stories {
        let unique = copies.iter().filter(|(d, _)| d == "unique").count();
        assert_eq!(unique, 1, "story {story}: {copies:?}");
        for (d, c) in copies {
            assert!(
                d == "unique" || c.starts_with(story.as_str()),
                "story {story}: {copies:?}"
            );
        }
    }
    eprintln!("6 kills mid-transaction, {removed_in_all} documents undone in all");
}

/// A changelog added beside a large index is filled under exactly-once in bounded
/// transactions (4,096 documents each), and a fill killed midway resumes where it stopped:
/// the changelog a read_committed reader sees then holds every document of the index.
#[test]
fn a_changelog_filled_from_a_large_index_resumes_after_a_kill() {
    let _g = serial();
    let b = Broker::start();
    b.create_topics(&[
        ("pages-signed", 1),
        ("pages-index-changelog", 1),
        ("pages-unique", 1),
        ("pages-duplicate", 1),
        ("pages-dead-letter", 1),
    ]);
    let dir = tempfile::tempdir().unwrap();
    // an index of 24,000 documents made in file mode (no changelog)
    let records = synthetic(env_or("NEARDUP_FILL_STORIES", 8000), 1);
    let ids = ids(&records);
    file_mode(&records, dir.path());
    let index = dir.path().join("file-mode-index");
    let marker = index.join("changelog-fill");
    let decider = |log: &str| {
        Stage::start(
            &b,
            &index,
            &dir.path().join(log),
            &[
                "--role",
                "decider",
                "--instance-id",
                "decider-0",
                "--guarantee",
                "exactly-once",
            ],
        )
    };
    let mut d = decider("fill-1.log");
    // killed once a chunk's transaction committed and before the last
    let deadline = Instant::now() + Duration::from_secs(120);
    let at = loop {
        // the marker: the next document, then the changelog's name
        if let Ok(t) = std::fs::read_to_string(&marker) {
            let n: u64 = t.lines().next().unwrap_or("").trim().parse().unwrap_or(0);
            if n > 0 {
                break n;
            }
        }
        assert!(Instant::now() < deadline, "no chunk of the fill committed");
        std::thread::sleep(Duration::from_millis(2));
    };
    d.signal("KILL");
    assert_eq!(d.wait(Duration::from_secs(10)), None);
    let after_kill = std::fs::read_to_string(&marker).unwrap();
    let mut lines = after_kill.lines();
    let at_kill: u64 = lines.next().unwrap().trim().parse().unwrap();
    assert_eq!(
        lines.next(),
        Some("pages-index-changelog"),
        "the marker names its topic"
    );
    assert!(
        at_kill >= at && (at_kill as usize) < ids.len(),
        "killed mid-fill ({at_kill} of {})",
        ids.len()
    );
    let written = b.read(
        &["pages-index-changelog"],
        usize::MAX,
        Duration::from_secs(60),
    );
    assert!(
        written.len() as u64 >= at_kill && written.len() < ids.len(),
        "the committed chunks are in the changelog ({} records, {at_kill} marked)",
        written.len()
    );
    // the restart resumes at the marker, and the changelog holds the whole index
    let mut d = decider("fill-2.log");
    d.wait_ready(Duration::from_secs(180));
    let log = std::fs::read_to_string(dir.path().join("fill-2.log")).unwrap();
    assert!(log.contains("resuming the changelog fill"), "{log}");
    assert!(!marker.exists(), "the fill is over");
    let keys: BTreeSet<String> = b
        .read(
            &["pages-index-changelog"],
            usize::MAX,
            Duration::from_secs(120),
        )
        .iter()
        .map(|o| o.key.clone().unwrap())
        .collect();
    let missing: Vec<_> = ids.difference(&keys).take(5).collect();
    assert!(
        missing.is_empty(),
        "documents missing from the changelog, e.g. {missing:?}"
    );
    d.signal("TERM");
    assert_eq!(d.wait(Duration::from_secs(60)), Some(0));
    // a decider restored from that changelog alone holds every document
    std::fs::remove_dir_all(&index).unwrap();
    let mut d = decider("fill-3.log");
    d.wait_ready(Duration::from_secs(300));
    // (a chunk committed just before the kill, its progress not yet recorded, is written
    // twice: compaction keeps one)
    assert!(d.metric("neardup_changelog_restored_records_total", "") as usize >= ids.len());
    d.signal("TERM");
    assert_eq!(d.wait(Duration::from_secs(60)), Some(0));
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
