//! Long reliability runs against a real broker, run by `scripts/kill-test.sh` (not part of
//! the default suite: they take minutes).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;

const OUTPUTS: [&str; 3] = ["pages-unique", "pages-duplicate", "pages-dead-letter"];

/// 20 times: SIGKILL the stage at a random moment of a 10,000-record run and start it again.
/// Afterwards every input has exactly one decision (repeats byte-identical), the decisions
/// equal an uninterrupted file-mode run, and the index opened cleanly every time.
#[test]
#[ignore]
fn kill_twenty_times_during_ten_thousand_records() {
    let kills: usize = env_or("NEARDUP_KILLS", 20);
    let b = broker_with_topics();
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
        output_ok(
            neardup().args(["index", "stats", "--index"]).arg(&index),
            &format!("the index does not open after kill {k}"),
        );
        let n = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120)).len();
        done_at_kill.push(n);
        eprintln!("kill {}: {n} outputs so far", k + 1);
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

    // a loaded broker can pause for seconds between fetches: read until 15 s of quiet
    let outs = b.read_quiet(
        &OUTPUTS,
        usize::MAX,
        Duration::from_secs(600),
        Duration::from_secs(15),
    );
    let (first, repeats) = first_outputs(&outs, &ids);
    // the decisions of an uninterrupted run
    let expected = file_mode(&records, dir.path());
    let got: BTreeMap<_, _> = first.values().map(|o| decision_of(&o.json())).collect();
    assert_eq!(got, expected, "decisions differ from an uninterrupted run");
    eprintln!(
        "kill test: {} records, {kills} kills survived, 0 lost, {repeats} repeated outputs \
         (all byte-identical), outputs at each kill {done_at_kill:?}, {:.0} s",
        records.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Resident memory of a process in KiB (VmRSS).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Bytes of the files under a directory.
fn du(path: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Soak through the Kafka stage: NEARDUP_SOAK_RECORDS (default 1,000,000) generated records
/// (stories in three templates, one fetch day per 10,000 records) through `neardup run` with
/// a 7-day retention window, fed the way a live stage is fed: a producer alongside keeps at
/// most NEARDUP_SOAK_BACKLOG (default 3,000) records ahead of the answered ones. Prints
/// resident memory, throughput, lag and index size every 10 s, then checks that memory stays
/// flat after warm-up, throughput does not decay, the index size levels off, and every record
/// was answered and committed. Run by `scripts/soak-stage.sh`.
#[test]
#[ignore = "long: run by scripts/soak-stage.sh"]
fn soak_through_the_stage() {
    let n: u64 = env_or("NEARDUP_SOAK_RECORDS", 1_000_000);
    let backlog: u64 = env_or("NEARDUP_SOAK_BACKLOG", 3_000);
    let b = broker_with_topics();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let record = move |i: u64| -> Input {
        let (story, copy) = (i / 3, i % 3);
        let day0 = 1_790_000_000i64;
        let t = day0 + (i / 10_000) as i64 * 86_400;
        let fetched = time_rfc3339(t);
        let v = serde_json::json!({
            "id": format!("soak-{i}"),
            "url": format!("https://site{copy}.test/s/{story}"),
            "html": story_page(story, copy, copy == 2),
            "fetched_at": fetched,
        });
        (
            (story % 3) as i32,
            format!("story-{story}"),
            Some(serde_json::to_vec(&v).unwrap()),
        )
    };
    let mut s = Stage::start(
        &b,
        &index,
        &dir.path().join("soak.log"),
        // the broker answers slowly while it takes large writes: a long session
        &[
            "--retention",
            "7d",
            "--no-text",
            "--kafka-property",
            "session.timeout.ms=45000",
        ],
    );
    s.wait_ready(Duration::from_secs(90));
    let (addr, port) = (b.addr(), s.http);
    let feeder = std::thread::spawn(move || {
        const CHUNK: u64 = 500;
        let p = producer(&addr);
        let mut produced = 0;
        while produced < n {
            let answered = metric_at(port, "neardup_records_out_total", "") as u64;
            let room = (answered + backlog).saturating_sub(produced);
            if room == 0 {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            let end = (produced + CHUNK.min(room)).min(n);
            let chunk: Vec<Input> = (produced..end).map(record).collect();
            send_all(&p, "pages", &chunk);
            produced = end;
        }
    });
    let started = Instant::now();
    let broker_pid = b.pid().expect("the broker runs");
    let cpu0 = (
        cpu_seconds(Some(s.child.id())),
        cpu_seconds(Some(broker_pid)),
    );
    // (seconds, answered, RSS KiB, index bytes)
    let mut samples = Vec::<(f64, f64, u64, u64)>::new();
    let mut progress = (0.0, Instant::now());
    loop {
        let out = s.metric("neardup_records_out_total", "");
        let lag = s.metric("neardup_consumer_lag_records", "");
        let rss = rss_kib(s.child.id()).expect("the stage is running");
        let size = du(&index);
        let t = started.elapsed().as_secs_f64();
        samples.push((t, out, rss, size));
        eprintln!(
            "{t:7.0} s {out:>10.0} answered  lag {lag:>6.0}  RSS {:7.1} MiB  index {:8.1} MB",
            rss as f64 / 1024.0,
            size as f64 / 1e6
        );
        assert!(s.child.try_wait().unwrap().is_none(), "the stage died");
        if out >= n as f64 {
            break;
        }
        if out > progress.0 {
            progress = (out, Instant::now());
        }
        assert!(
            progress.1.elapsed() < Duration::from_secs(300),
            "no record answered for 5 minutes"
        );
        assert!(
            !feeder.is_finished() || out >= n as f64 - backlog as f64,
            "the feeder stopped early"
        );
        std::thread::sleep(Duration::from_secs(10));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let per_record = |now: Option<f64>, then: Option<f64>| {
        now.zip(then)
            .map_or(f64::NAN, |(b, a)| 1000.0 * (b - a) / n as f64)
    };
    let stage_cpu = per_record(cpu_seconds(Some(s.child.id())), cpu0.0);
    let broker_cpu = per_record(cpu_seconds(Some(broker_pid)), cpu0.1);
    feeder.join().expect("the feeder");
    let dead = s.metric("neardup_dead_letters_total", "");
    let rebalances = s.metric("neardup_rebalances_total", "");
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(60)), Some(0));
    assert_eq!(dead, 0.0, "dead letters in the soak");
    let committed: i64 = b.committed("neardup", "pages", 3).iter().sum();
    assert_eq!(committed, n as i64, "committed offsets after the soak");

    eprintln!(
        "{n} records answered in {elapsed:.0} s; CPU per record: stage {stage_cpu:.2} ms, \
         broker {broker_cpu:.2} ms"
    );
    let k = samples.len();
    assert!(k >= 10, "too few samples");
    let warm = &samples[k / 5..];
    let (lo, hi) = warm
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s.2), hi.max(s.2)));
    let rates: Vec<f64> = (0..5)
        .map(|f| {
            let (a, b) = (&samples[f * k / 5], &samples[((f + 1) * k / 5).min(k - 1)]);
            (b.1 - a.1) / (b.0 - a.0)
        })
        .collect();
    let half = warm.len() / 2;
    let max_first = warm[..half].iter().map(|s| s.3).max().unwrap();
    let max_second = warm[half..].iter().map(|s| s.3).max().unwrap();
    eprintln!(
        "soak through the stage: {n} records in {elapsed:.0} s ({:.0} records/s), {committed} \
         offsets committed, {rebalances} rebalances; RSS after warm-up {:.1}–{:.1} MiB; \
         records/s per fifth {:?}; index max {:.0} MB (first half after warm-up) / {:.0} MB \
         (second half)",
        n as f64 / elapsed,
        lo as f64 / 1024.0,
        hi as f64 / 1024.0,
        rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
        max_first as f64 / 1e6,
        max_second as f64 / 1e6
    );
    assert!(
        (hi as f64) <= 1.5 * lo as f64 + 64.0 * 1024.0,
        "resident memory keeps growing"
    );
    assert!(
        rates[3] >= 0.6 * rates[1].max(rates[2]),
        "throughput decays: {rates:?}"
    );
    assert!(
        (max_second as f64) <= 1.25 * max_first as f64,
        "the index keeps growing"
    );
}

/// Seconds since the epoch as RFC 3339 UTC.
fn time_rfc3339(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // civil date from a day count (the proleptic Gregorian calendar, eras of 400 years)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}
