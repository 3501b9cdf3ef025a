//! Exactly-once against Apache Kafka: outputs, dead letters and input offsets in
//! transactions, the index brought back to the last commit after a crash, an older process
//! of an index fenced.

mod common;

use std::collections::BTreeMap;
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
    // enough that the run is not over before the last kill (a run answers about a thousand
    // records between its first output and its kill)
    let records = synthetic(env_or("NEARDUP_EOS_STORIES", 6000), 3);
    let ids = ids(&records);
    b.produce("pages", &records);
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
        kill(&mut s, "mid-stream");
    }
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

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
