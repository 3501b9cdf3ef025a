//! Long reliability runs against a real broker, run by `scripts/kill-test.sh` (not part of
//! the default suite: they take minutes).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;

const OUTPUTS: [&str; 3] = ["pages-unique", "pages-duplicate", "pages-dead-letter"];

/// 20 times: SIGKILL the stage at a random moment of a 10,000-record run and start it again.
/// Afterwards every input has exactly one decision (repeats byte-identical), the decisions
/// equal an uninterrupted file-mode run, and the index opened cleanly every time.
#[test]
#[ignore]
fn kill_twenty_times_during_ten_thousand_records() {
    let kills: usize = std::env::var("NEARDUP_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let b = Broker::start();
    b.create_topics(&[
        ("pages", 3),
        ("pages-unique", 3),
        ("pages-duplicate", 3),
        ("pages-dead-letter", 1),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let records = synthetic(3334, 3);
    let ids = ids(&records);
    b.produce("pages", &records);
    let started = Instant::now();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut done_at_kill = Vec::new();
    // slowed down so that 20 kills land inside the run
    let slow = ["--max-in-flight", "4", "--jobs", "1"];
    for k in 0..kills {
        let mut s = Stage::start(&b, &index, &dir.path().join(format!("{k}.log")), &slow);
        s.wait_ready(Duration::from_secs(90));
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(300 + rng % 1500));
        s.signal("KILL");
        assert_eq!(s.wait(Duration::from_secs(10)), None);
        let stats = neardup()
            .args(["index", "stats", "--index"])
            .arg(&index)
            .output()
            .unwrap();
        assert!(
            stats.status.success(),
            "the index does not open after kill {k}: {}",
            String::from_utf8_lossy(&stats.stderr)
        );
        let n = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120)).len();
        done_at_kill.push(n);
        eprintln!("kill {}: {n} outputs so far", k + 1);
        // the killed member leaves the group after its session timeout
        std::thread::sleep(Duration::from_secs(7));
    }
    assert!(
        *done_at_kill.last().unwrap() < records.len(),
        "the run ended before the last kill: {done_at_kill:?}"
    );
    let mut s = Stage::start(&b, &index, &dir.path().join("final.log"), &[]);
    s.wait_ready(Duration::from_secs(90));
    // caught up: every assigned partition reports a lag of 0 and nothing is in flight,
    // twice in a row; the outputs are then read once and checked below
    let deadline = Instant::now() + Duration::from_secs(900);
    let (mut last_report, mut caught_up) = (Instant::now(), 0);
    while caught_up < 2 {
        let lags = s.metric_values("neardup_consumer_lag_records", "topic=\"pages\"");
        let in_flight = s.metric("neardup_in_flight_records", "");
        let out = s.metric("neardup_records_out_total", "");
        if lags.len() == 3 && lags.iter().all(|&l| l == 0.0) && in_flight == 0.0 {
            caught_up += 1;
        } else {
            caught_up = 0;
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!("final run: {out} outputs, lag {lags:?}, {in_flight} in flight");
            last_report = Instant::now();
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(&s.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "the final run did not catch up: {out} outputs, lag {lags:?}; log tail:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(60)), Some(0));

    let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120));
    let mut first: BTreeMap<String, &Out> = BTreeMap::new();
    let mut repeats = 0;
    for o in &outs {
        match first.get(&o.source()) {
            None => {
                first.insert(o.source(), o);
            }
            Some(f) => {
                repeats += 1;
                assert_eq!(f.value, o.value, "a repeated output differs");
                assert_eq!(f.headers, o.headers);
            }
        }
    }
    let answered: BTreeSet<String> = first.keys().cloned().collect();
    assert_eq!(answered, ids, "inputs lost");
    // the decisions of an uninterrupted run
    let input = dir.path().join("input.jsonl");
    let mut lines = Vec::new();
    for (_, _, v) in &records {
        lines.extend_from_slice(v.as_ref().unwrap());
        lines.push(b'\n');
    }
    std::fs::write(&input, lines).unwrap();
    let out = dir.path().join("file-mode.jsonl");
    assert!(neardup()
        .args(["dedup", "--input"])
        .arg(&input)
        .arg("--index")
        .arg(dir.path().join("file-index"))
        .arg("--unique")
        .arg(&out)
        .status()
        .unwrap()
        .success());
    let expected: BTreeSet<_> = std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| decision_of(&serde_json::from_str(l).unwrap()))
        .collect();
    let got: BTreeSet<_> = first.values().map(|o| decision_of(&o.json())).collect();
    assert_eq!(got, expected, "decisions differ from an uninterrupted run");
    eprintln!(
        "kill test: {} records, {kills} kills survived, 0 lost, {repeats} repeated outputs \
         (all byte-identical), outputs at each kill {done_at_kill:?}, {:.0} s",
        records.len(),
        started.elapsed().as_secs_f64()
    );
}
