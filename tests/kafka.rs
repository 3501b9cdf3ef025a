//! The Kafka stage against a real broker: every input offset answered exactly once, the same
//! decisions as file mode, stop and kill mid-stream without loss, two members of a group,
//! and replay.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::*;

const OUTPUTS: [&str; 3] = ["pages-unique", "pages-duplicate", "pages-dead-letter"];

fn topics(b: &Broker, input_partitions: i32) {
    b.create_topics(&[
        ("pages", input_partitions),
        ("pages-unique", 3),
        ("pages-duplicate", 3),
        ("pages-dead-letter", 1),
    ]);
}

fn decisions(outs: &[Out]) -> BTreeMap<String, (String, String)> {
    outs.iter()
        .filter(|o| o.topic != "pages-dead-letter" && !o.topic.ends_with("dead"))
        .map(|o| decision_of(&o.json()))
        .collect()
}

/// Checks every output against its schema and its headers against its value.
fn check_outputs(outs: &[Out]) {
    let tagged = validator("tagged.v1.schema.json");
    let dead = validator("dead-letter.v1.schema.json");
    for o in outs {
        let v = o.json();
        let decision = &o.headers["neardup-decision"];
        if v["schema"] == "neardup.dead-letter.v1" {
            if let Err(e) = dead.validate(&v) {
                panic!("dead letter does not follow its schema: {e}: {v}");
            }
            assert_eq!(decision, "dead_letter");
            assert_eq!(o.headers["neardup-reason"], v["reason"].as_str().unwrap());
            serde_json::from_value::<neardup::record::DeadLetter>(v).unwrap();
        } else {
            if let Err(e) = tagged.validate(&v) {
                panic!("tagged record does not follow its schema: {e}: {v}");
            }
            assert_eq!(decision, v["dedup"]["decision"].as_str().unwrap());
            if let Some(c) = v["dedup"]["canonical_id"].as_str() {
                assert_eq!(o.headers["neardup-canonical-id"], c);
            }
            let expected_topic = if decision == "duplicate" {
                "duplicate"
            } else {
                "unique"
            };
            assert!(
                o.topic.contains(expected_topic),
                "{decision} on {}",
                o.topic
            );
            serde_json::from_value::<neardup::record::Tagged>(v).unwrap();
        }
    }
}

/// The example pages (partition 0, in file order), synthetic stories over 3 partitions, and
/// bad records of every kind.
fn mixed() -> (Vec<Input>, usize) {
    let mut v: Vec<Input> = Vec::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pages.jsonl");
    for (i, line) in std::fs::read_to_string(examples)
        .unwrap()
        .lines()
        .enumerate()
    {
        v.push((0, format!("example-{i}"), Some(line.as_bytes().to_vec())));
    }
    v.extend(synthetic(20, 3));
    let big = page_json(
        "big-1",
        "https://big.test/",
        &story_page(1, 0, false).repeat(120),
    );
    assert!(big.len() > 200_000);
    let bad: Vec<(i32, &str, Option<Vec<u8>>)> = vec![
        (1, "bad-json", Some(b"this is not json".to_vec())),
        (
            2,
            "bad-utf8",
            Some(b"{\"url\":\"https://x.test/\",\"html\":\"\xff\xfe\"}".to_vec()),
        ),
        (
            0,
            "bad-missing-url",
            Some(br#"{"id":"m1","html":"<p>no url</p>"}"#.to_vec()),
        ),
        (1, "bad-oversized", Some(big)),
        (2, "bad-empty", None),
        (
            0,
            "bad-truncated",
            Some(br#"{"url":"https://t.test/","html":"<p>cut"#.to_vec()),
        ),
        (1, "bad-shape", Some(b"[1,2,3]".to_vec())),
    ];
    let n_bad = bad.len();
    v.extend(bad.into_iter().map(|(p, k, x)| (p, k.to_string(), x)));
    (v, n_bad)
}

#[test]
fn mixed_stream_is_answered_once_per_offset_like_file_mode_and_replays_identically() {
    let _g = serial();
    let b = Broker::start();
    topics(&b, 3);
    b.create_topics(&[
        ("replay-unique", 1),
        ("replay-duplicate", 1),
        ("replay-dead", 1),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let (records, n_bad) = mixed();
    b.produce("pages", &records);

    let mut stage = Stage::start(
        &b,
        &index,
        &dir.path().join("run.log"),
        &["--max-record-bytes", "200000", "--grace-period", "20s"],
    );
    stage.wait_ready(Duration::from_secs(60));
    // every thread of the stage at the batch scheduling policy (src/scheduling.rs), the test
    // process at the normal one
    let policies = thread_policies(stage.child.id());
    assert!(
        policies.len() > 4 && policies.iter().all(|&p| p == 3),
        "{policies:?}"
    );
    assert!(thread_policies(std::process::id()).iter().all(|&p| p == 0));
    let outs = b.read(&OUTPUTS, records.len(), Duration::from_secs(120));
    assert_eq!(outs.len(), records.len(), "one output per input record");
    // and nothing more
    let more = b.read(&OUTPUTS, records.len() + 1, Duration::from_secs(3));
    assert_eq!(more.len(), records.len(), "no extra outputs");
    check_outputs(&outs);

    // every input offset answered exactly once
    let sources: Vec<String> = outs.iter().map(Out::source).collect();
    let unique_sources: BTreeSet<&String> = sources.iter().collect();
    assert_eq!(
        unique_sources.len(),
        sources.len(),
        "an input answered twice"
    );
    let dead: Vec<&Out> = outs
        .iter()
        .filter(|o| o.topic == "pages-dead-letter")
        .collect();
    assert_eq!(dead.len(), n_bad);
    let reasons: BTreeSet<String> = dead
        .iter()
        .map(|o| o.headers["neardup-reason"].clone())
        .collect();
    let want: BTreeSet<String> = [
        "invalid_json",
        "not_utf8",
        "missing_url",
        "too_large",
        "empty_record",
        "truncated_json",
        "wrong_shape",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(reasons, want);
    // keys are kept
    for o in &outs {
        assert!(o.key.is_some(), "output without the input's key");
    }

    // the same decisions as file mode on the same pages
    let expected = file_mode(&records, dir.path());
    let got = decisions(&outs);
    assert_eq!(got.len(), records.len() - n_bad);
    assert_eq!(got, expected);
    assert!(got.values().filter(|(d, _)| d == "duplicate").count() >= 40);

    // metrics and health while running
    assert!(stage.metric("neardup_records_in_total", "pages") >= records.len() as f64);
    assert_eq!(stage.metric("neardup_dead_letters_total", "too_large"), 1.0);
    assert_eq!(stage.get("/healthz").unwrap().0, 200);
    assert_eq!(stage.get("/nothing").unwrap().0, 404);

    // the serving endpoints read the index the stage writes: every duplicate folds with its
    // canonical page, and explain gives the decision the stage produced
    let dups: Vec<(String, String)> = got
        .iter()
        .filter(|(_, (d, _))| d == "duplicate")
        .map(|(id, (_, c))| (id.clone(), c.clone()))
        .take(20)
        .collect();
    let items: Vec<&str> = dups
        .iter()
        .flat_map(|(d, c)| [c.as_str(), d.as_str()])
        .collect();
    let (code, answer) = http_post_json(
        stage.http,
        "/v1/group",
        &serde_json::json!({"items": items}),
    );
    assert_eq!(code, 200, "{answer}");
    assert!(answer["unknown"].as_array().unwrap().is_empty(), "{answer}");
    for (i, (d, _)) in dups.iter().enumerate() {
        let grouped = answer["groups"].as_array().unwrap().iter().any(|g| {
            g["members"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["item"] == 2 * i + 1)
                || g["representative"]["item"] == 2 * i + 1
        });
        assert!(grouped, "{d} is not grouped: {answer}");
        let (code, x) = stage.get(&format!("/v1/explain/{d}")).unwrap();
        assert_eq!(code, 200, "{x}");
        let x: serde_json::Value = serde_json::from_str(&x).unwrap();
        assert_eq!(x["canonical_id"], got[d].1.as_str(), "{x}");
    }

    // SIGTERM: drains, commits, exits 0
    stage.signal("TERM");
    assert_eq!(stage.wait(Duration::from_secs(30)), Some(0));

    // replay into the same index: byte-identical outputs
    let replay = output_ok(
        neardup()
            .args(["replay", "--brokers", &b.addr(), "--index"])
            .arg(&index)
            .args([
                "--unique-topic",
                "replay-unique",
                "--duplicate-topic",
                "replay-duplicate",
                "--dead-letter-topic",
                "replay-dead",
                "--max-record-bytes",
                "200000",
                "--kafka-property",
                "fetch.wait.max.ms=50",
                "--log-format",
                "json",
            ]),
        "replay",
    );
    let summary: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(summary["records"], records.len());
    // a partition's end is where a replay stops, not a client error
    let log = String::from_utf8_lossy(&replay.stderr);
    assert!(!log.contains("PartitionEOF"), "{log}");
    assert_eq!(summary["stopped_by"], "end");
    assert_eq!(summary["repeated"], records.len() - n_bad);
    // the stage's own time is cut in queue, prepare and in order: each a part of decide
    let hop_max = |h: &str| {
        summary["hops"][h]["max_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("no hop {h} in {}", summary["hops"]))
    };
    for part in ["queue", "prepare", "in_order"] {
        assert!(
            hop_max(part) <= hop_max("decide") + 1e-6,
            "{part} {} against decide {}",
            hop_max(part),
            hop_max("decide")
        );
    }
    let again = b.read(
        &["replay-unique", "replay-duplicate", "replay-dead"],
        records.len(),
        Duration::from_secs(60),
    );
    assert_eq!(again.len(), records.len());
    let by_source = |v: &[Out]| -> BTreeMap<String, Vec<u8>> {
        v.iter().map(|o| (o.source(), o.value.clone())).collect()
    };
    assert_eq!(by_source(&again), by_source(&outs), "replay output differs");

    // a dry run with a fresh index: the same decisions, nothing produced
    let fresh = dir.path().join("fresh-index");
    let dry = output_ok(
        neardup()
            .args(["replay", "--dry-run", "--brokers", &b.addr(), "--index"])
            .arg(&fresh)
            .args([
                "--max-record-bytes",
                "200000",
                "--kafka-property",
                "fetch.wait.max.ms=50",
            ]),
        "dry-run replay",
    );
    let s: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let count = |d: &str| got.values().filter(|(x, _)| x == d).count();
    assert_eq!(s["unique"], count("unique"));
    assert_eq!(s["duplicate"], count("duplicate"));
    assert_eq!(s["skipped"], count("skipped"));
    assert_eq!(s["dead_letter"], n_bad);
    assert_eq!(s["produced"], 0);
    assert!(!fresh.exists(), "a dry run must not create the index");
    let after = b.read(&OUTPUTS, records.len() + 1, Duration::from_secs(3));
    assert_eq!(after.len(), records.len(), "a dry run produced records");

    // refused at once, with what is wrong: output topics that do not exist (a replay would
    // hold its records until its grace period ran out, and nothing delivers them again), and
    // a start past a partition's end (nothing there to replay)
    let refused = |args: &[&str], why: &str| {
        let out = neardup()
            .args(["replay", "--brokers", &b.addr(), "--index"])
            .arg(dir.path().join("refused-index"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    };
    refused(
        &["--unique-topic", "nowhere-unique"],
        "output topic nowhere-unique does not exist",
    );
    refused(
        &["--start", "pages:0:1000000"],
        "start pages:0:1000000 is past the end of the partition",
    );

    // an input topic created while the replay asks for it is waited for (a node names a new
    // topic a moment after its controller created it), and one never created is refused
    // after that wait, with its name
    let replay_of = |topic: &str, log: &Path| {
        neardup()
            .args(["replay", "--dry-run", "--brokers", &b.addr(), "--index"])
            .arg(dir.path().join(format!("{topic}-index")))
            .args(["--input-topics", topic, "--max-record-bytes", "200000"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let asked = |log: &Path, topic: &str| {
        std::fs::read_to_string(log)
            .unwrap()
            .contains(&format!("topic {topic} is not named by the brokers yet"))
    };
    let late_log = dir.path().join("late.log");
    let late = replay_of("late-pages", &late_log);
    wait_until(
        Duration::from_secs(8),
        "the replay asks again for its input topic",
        || asked(&late_log, "late-pages"),
    );
    b.create_topics(&[("late-pages", 1)]);
    let out = late.wait_with_output().unwrap();
    let log = std::fs::read_to_string(&late_log).unwrap();
    assert!(out.status.success(), "{log}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["stopped_by"], "end", "{s}");
    let never_log = dir.path().join("never.log");
    let never = replay_of("never-pages", &never_log)
        .wait_with_output()
        .unwrap();
    let log = std::fs::read_to_string(&never_log).unwrap();
    assert_eq!(never.status.code(), Some(2), "{log}");
    assert!(asked(&never_log, "never-pages"), "{log}");
    assert!(log.contains("topic never-pages does not exist"), "{log}");
}

/// Reads all outputs (at least `n`, then until quiet) and checks: every input id answered,
/// repeated outputs byte-identical to the first.
fn check_no_loss(b: &Broker, ids: &BTreeSet<String>) -> Vec<Out> {
    let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120));
    first_outputs(&outs, ids);
    outs
}

#[test]
fn stop_and_kill_mid_stream_lose_nothing_and_repeat_identically() {
    let _g = serial();
    let b = Broker::start();
    topics(&b, 3);
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let records = synthetic(300, 3);
    let total = records.len() as f64;
    let ids = ids(&records);
    b.produce("pages", &records);
    // slow enough to be stopped mid-stream
    let slow = [
        "--max-in-flight",
        "2",
        "--jobs",
        "1",
        "--grace-period",
        "20s",
    ];
    let out_count = |s: &Stage| s.metric("neardup_records_out_total", "");

    let mut s1 = Stage::start(&b, &index, &dir.path().join("1.log"), &slow);
    wait_until(Duration::from_secs(60), "first outputs", || {
        out_count(&s1) >= 100.0
    });
    s1.signal("TERM");
    assert_eq!(s1.wait(Duration::from_secs(30)), Some(0), "SIGTERM exits 0");
    let after_term = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120)).len() as f64;
    assert!(
        after_term < total,
        "stopped mid-stream ({after_term} of {total})"
    );

    let mut s2 = Stage::start(&b, &index, &dir.path().join("2.log"), &slow);
    wait_until(Duration::from_secs(60), "more outputs", || {
        out_count(&s2) >= 150.0
    });
    s2.signal("KILL");
    assert_eq!(
        s2.wait(Duration::from_secs(10)),
        None,
        "killed by the signal"
    );
    let after_kill = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120)).len() as f64;
    assert!(
        after_kill < total,
        "killed mid-stream ({after_kill} of {total})"
    );

    // the restarted stage is the same static member (its instance id is kept in the index
    // directory): it takes the partitions back at once, at the default session timeout
    let mut s3 = Stage::start(&b, &index, &dir.path().join("3.log"), &[]);
    s3.wait_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(120), "the rest", || {
        let n = b
            .read(&OUTPUTS, usize::MAX, Duration::from_secs(120))
            .iter()
            .map(Out::source)
            .collect::<BTreeSet<_>>()
            .len();
        eprintln!(
            "answered {n}; third stage: in {} out {} lag {}",
            s3.metric("neardup_records_in_total", ""),
            s3.metric("neardup_records_out_total", ""),
            s3.metric("neardup_consumer_lag_records", "")
        );
        n >= records.len()
    });
    s3.signal("TERM");
    assert_eq!(s3.wait(Duration::from_secs(30)), Some(0));
    let outs = check_no_loss(&b, &ids);
    // decisions equal an uninterrupted file-mode run
    assert_eq!(decisions(&outs), file_mode(&records, dir.path()));
}

#[test]
fn two_members_of_a_group_split_the_partitions_and_lose_nothing() {
    let _g = serial();
    let b = Broker::start();
    topics(&b, 4);
    let dir = tempfile::tempdir().unwrap();
    let a = Stage::start(
        &b,
        &dir.path().join("index-a"),
        &dir.path().join("a.log"),
        &[],
    );
    let c = Stage::start(
        &b,
        &dir.path().join("index-b"),
        &dir.path().join("b.log"),
        &[],
    );
    a.wait_ready(Duration::from_secs(60));
    c.wait_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(60), "a settled group", || {
        a.metric("neardup_assigned_partitions", "") + c.metric("neardup_assigned_partitions", "")
            == 4.0
    });
    let records = synthetic(100, 4);
    let ids = ids(&records);
    b.produce("pages", &records);
    wait_until(Duration::from_secs(120), "all outputs", || {
        a.metric("neardup_records_out_total", "") + c.metric("neardup_records_out_total", "")
            >= records.len() as f64
    });
    let (na, nc) = (
        a.metric("neardup_records_in_total", ""),
        c.metric("neardup_records_in_total", ""),
    );
    assert!(na > 0.0 && nc > 0.0, "both members consumed ({na}, {nc})");
    check_no_loss(&b, &ids);
}

/// A small filesystem of its own for the index (tmpfs); unmounted on drop.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// Mounts one, or `None` where mounting is not allowed (it needs root).
    fn mount(path: &Path, options: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(path).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(path)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(path.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Writes a file until the filesystem is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while f.write_all(&chunk).and_then(|_| f.flush()).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn full_disk_or_unwritable_index_stops_the_stage_which_reports_it_and_commits_nothing_unprocessed()
{
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    let Some(ro) = SmallDisk::mount(&disk, "ro,size=1m") else {
        eprintln!("skipped: cannot mount a small filesystem here (needs root)");
        return;
    };
    let b = Broker::start();
    topics(&b, 3);

    // an unwritable index directory: not ready, the reason on /readyz, exit status 2
    let mut s = Stage::start(
        &b,
        &disk.join("index"),
        &dir.path().join("ro.log"),
        &["--failure-hold", "60s"],
    );
    wait_until(
        Duration::from_secs(30),
        "the failure reported",
        || matches!(s.get("/readyz"), Some((503, r)) if r.starts_with("failed:")),
    );
    let (_, reason) = s.get("/readyz").unwrap();
    assert!(reason.contains("cannot open index"), "{reason}");
    assert_eq!(s.metric("neardup_failed", ""), 1.0);
    // liveness says so too: a process that cannot go on is restarted
    assert!(
        matches!(s.get("/healthz"), Some((503, r)) if r.starts_with("failed:")),
        "{:?}",
        s.get("/healthz")
    );
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(30)), Some(2));
    drop(ro);

    // a disk that fills up mid-stream
    let _disk = SmallDisk::mount(&disk, "size=48m").expect("mount");
    let index = disk.join("index");
    let records = synthetic(300, 3);
    let ids = ids(&records);
    let (first, second) = records.split_at(records.len() / 3);
    b.produce("pages", first);
    let mut s = Stage::start(
        &b,
        &index,
        &dir.path().join("full.log"),
        &["--failure-hold", "60s"],
    );
    s.wait_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(60), "the first third", || {
        s.metric("neardup_records_out_total", "") >= first.len() as f64
    });
    fill(&disk.join("filler"));
    b.produce("pages", second);
    wait_until(
        Duration::from_secs(120),
        "the failure reported",
        || matches!(s.get("/readyz"), Some((503, r)) if r.starts_with("failed:")),
    );
    let (_, reason) = s.get("/readyz").unwrap();
    assert!(reason.contains("No space left"), "{reason}");
    assert_eq!(s.metric("neardup_failed", ""), 1.0);
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the stage exited before its failure hold"
    );
    // stopped consuming: the outputs do not grow any more
    let out_then = s.metric("neardup_records_out_total", "");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(s.metric("neardup_records_out_total", ""), out_then);
    assert!(
        out_then < records.len() as f64,
        "the disk did not fill up before the end"
    );
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(30)), Some(2));
    let log = std::fs::read_to_string(&s.log).unwrap();
    assert!(log.contains("No space left"), "the log does not say why");

    // every committed offset has its output: nothing committed that was not processed
    let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(60));
    let answered: BTreeSet<String> = outs.iter().map(Out::source).collect();
    let committed = b.committed("neardup", "pages", 3);
    let mut offsets = [0i64; 3];
    let mut covered = 0;
    for (p, _, value) in &records {
        let o = offsets[*p as usize];
        offsets[*p as usize] += 1;
        if o < committed[*p as usize] {
            covered += 1;
            let v: serde_json::Value = serde_json::from_slice(value.as_ref().unwrap()).unwrap();
            assert!(
                answered.contains(v["id"].as_str().unwrap()),
                "offset {o} of partition {p} committed without an output"
            );
        }
    }
    assert!(
        covered > 0,
        "nothing was committed before the disk filled up"
    );

    // space again: a restart resumes and loses nothing
    std::fs::remove_file(disk.join("filler")).unwrap();
    let mut s = Stage::start(&b, &index, &dir.path().join("again.log"), &[]);
    s.wait_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(120), "every record answered", || {
        b.read(&OUTPUTS, usize::MAX, Duration::from_secs(30))
            .iter()
            .map(Out::source)
            .collect::<BTreeSet<_>>()
            .len()
            >= records.len()
    });
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(30)), Some(0));
    check_no_loss(&b, &ids);
}

#[test]
fn sigterm_as_the_broker_goes_down_exits_within_the_grace_period() {
    let _g = serial();
    let mut b = Broker::start();
    topics(&b, 3);
    let dir = tempfile::tempdir().unwrap();
    let records = synthetic(400, 3);
    b.produce("pages", &records);
    let mut s = Stage::start(
        &b,
        &dir.path().join("index"),
        &dir.path().join("s.log"),
        &["--grace-period", "5s", "--failure-hold", "0s"],
    );
    s.wait_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(60), "some records", || {
        s.metric("neardup_records_out_total", "") >= 100.0
    });
    // the broker goes away mid-stream as the stage is told to stop: the drain (5 s), then
    // at most 10 s each for the final commit and for closing the consumer, which wait for
    // a group coordinator that is gone
    let asked = std::time::Instant::now();
    s.signal("TERM");
    b.terminate();
    let code = s.wait(Duration::from_secs(60));
    assert!(code.is_some(), "the stage did not exit");
    assert!(
        asked.elapsed() < Duration::from_secs(40),
        "{:?}",
        asked.elapsed()
    );
}

#[test]
fn broker_outage_pauses_the_stage_which_resumes_and_loses_nothing() {
    let _g = serial();
    let mut b = Broker::start();
    topics(&b, 3);
    let dir = tempfile::tempdir().unwrap();
    let records = synthetic(200, 3);
    let ids = ids(&records);
    let (first, second) = records.split_at(records.len() / 2);
    b.produce("pages", first);
    let mut s = Stage::start(
        &b,
        &dir.path().join("index"),
        &dir.path().join("s.log"),
        &[],
    );
    s.wait_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(60), "the first half", || {
        s.metric("neardup_records_out_total", "") >= first.len() as f64
    });

    // the broker goes away for about 30 s (15 s down, then its restart after a kill, which
    // takes about as long again): the stage stops consuming and says so, stays ready to
    // serve (a Service keeps it) and alive, and the process stays up. The outage
    // stays under the group session's 45 s: a static member whose session timed out is
    // fenced when it rejoins, and the stage stops and says so (a restart resumes it)
    let down = std::time::Instant::now();
    b.stop();
    wait_until(
        Duration::from_secs(30),
        "the outage seen",
        || matches!(s.get("/readyz"), Some((200, r)) if r.contains("brokers unreachable")),
    );
    assert_eq!(s.metric("neardup_consuming", ""), 0.0);
    assert_eq!(s.metric("neardup_ready", ""), 1.0);
    std::thread::sleep(Duration::from_secs(15));
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the stage died during the outage"
    );
    assert_eq!(s.get("/healthz").unwrap().0, 200);

    // back: the stage resumes on its own and takes the rest
    b.restart();
    eprintln!("the broker was away {:.1} s", down.elapsed().as_secs_f64());
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !matches!(s.get("/readyz"), Some((200, r)) if r == "ready\n") {
        if std::time::Instant::now() > deadline {
            let log = std::fs::read_to_string(&s.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "not ready again: {:?}; log tail:\n{}",
                s.get("/readyz"),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    b.produce("pages", second);
    wait_until(Duration::from_secs(120), "the second half", || {
        s.metric("neardup_records_out_total", "") >= records.len() as f64
    });
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(30)), Some(0));
    check_no_loss(&b, &ids);
}

#[test]
fn hostile_corpus_through_the_stage_every_offset_answered_memory_bounded() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("hostile.jsonl");
    let gen = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gen-hostile.py"))
        .arg("--out")
        .arg(&corpus)
        .status()
        .expect("python3 runs the corpus generator");
    assert!(gen.success());
    let bytes = std::fs::read(&corpus).unwrap();
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    // the test broker serves records up to a few MB only (a bigger one reads as the end of
    // its partition); file mode covers the 50 MB page and the other big ones
    let big = lines.iter().filter(|l| l.len() > 2_000_000).count();
    lines.retain(|l| l.len() <= 2_000_000);
    assert!(big < 20 && lines.len() >= 1000);
    let records: Vec<Input> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| ((i % 3) as i32, format!("h{i}"), Some(l.to_vec())))
        .collect();
    let b = Broker::start();
    topics(&b, 3);
    b.produce("pages", &records);
    let mut s = Stage::start(
        &b,
        &dir.path().join("index"),
        &dir.path().join("s.log"),
        &[],
    );
    s.wait_ready(Duration::from_secs(60));
    let mut peak = 0;
    let mut polls = 0;
    wait_until(
        Duration::from_secs(300),
        "every hostile record answered",
        || {
            peak = peak.max(peak_rss_kib(s.child.id()).unwrap_or(0));
            let (i, o) = (
                s.metric("neardup_records_in_total", ""),
                s.metric("neardup_records_out_total", ""),
            );
            polls += 1;
            if polls % 50 == 0 {
                let log = std::fs::read_to_string(&s.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(3).collect();
                eprintln!("in {i} out {o} peak {peak} KiB; log: {tail:?}");
            }
            o >= records.len() as f64
        },
    );
    assert!(s.child.try_wait().unwrap().is_none(), "the stage died");
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(60)), Some(0));
    // each offset answered exactly once: tagged by id (ids repeat in the corpus, so count
    // per key instead), dead letters by source offset
    let outs = b.read(&OUTPUTS, records.len(), Duration::from_secs(120));
    assert_eq!(outs.len(), records.len());
    let keys: BTreeSet<String> = outs.iter().map(|o| o.key.clone().unwrap()).collect();
    assert_eq!(
        keys.len(),
        records.len(),
        "an input answered twice or not at all"
    );
    check_outputs(&outs);
    // memory stays within the documented bound: 128 MiB + 6 × the 64 MiB record limit
    assert!(
        peak > 0 && peak < 512 * 1024,
        "peak resident memory {peak} KiB"
    );
    eprintln!(
        "hostile corpus through the stage: {} records, {} dead letters, peak RSS {} MiB",
        records.len(),
        outs.iter()
            .filter(|o| o.topic == "pages-dead-letter")
            .count(),
        peak / 1024
    );
}

/// Runs a program that must be installed (scripts/install-deps.sh installs it) and must
/// succeed.
fn tool(program: &str, args: &[&str], cwd: &Path) {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/install-deps.sh installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// TLS and SASL by configuration alone: the broker's listener for the stage requires
/// SCRAM-SHA-512 credentials over TLS (a certificate from the test's own CA, verified with
/// `ssl.ca.location`, host name checked). With the right properties file the stage answers
/// every record like file mode; with a wrong password it is refused, stays not ready and
/// consumes nothing; the password appears in no log line and no metric.
#[test]
fn tls_and_sasl_by_configuration_and_secrets_stay_out_of_logs_and_metrics() {
    const PASSWORD: &str = "Sc0rpion-Velvet-93";
    const WRONG: &str = "Wrong-Kestrel-17";
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // a CA and a server certificate for 127.0.0.1, signed by it
    let ossl = |args: &str| tool("openssl", &args.split(' ').collect::<Vec<_>>(), d);
    ossl("req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj /CN=neardup-test-ca");
    ossl("req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1");
    std::fs::write(
        d.join("san.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    ossl("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 30 -extfile san.cnf");

    let (b, tls_port) = Broker::start_secure(d, "crawler", PASSWORD);
    topics(&b, 3);
    let records = synthetic(60, 3);
    let ids = ids(&records);
    b.produce("pages", &records);
    let tls_addr = format!("127.0.0.1:{tls_port}");
    let props = |name: &str, password: &str| {
        let p = d.join(name);
        std::fs::write(
            &p,
            format!(
                "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
                 sasl.username=crawler\nsasl.password={password}\nssl.ca.location={}\n",
                d.join("ca.pem").display()
            ),
        )
        .unwrap();
        p.to_string_lossy().into_owned()
    };

    // a wrong password: refused, never ready, nothing consumed
    let wrong = props("wrong.properties", WRONG);
    let mut s = Stage::start_at(
        &tls_addr,
        &d.join("index-wrong"),
        &d.join("wrong.log"),
        &[
            "--kafka-properties-file",
            &wrong,
            "--group-id",
            "neardup-wrong",
        ],
    );
    let wrong_log = || std::fs::read_to_string(d.join("wrong.log")).unwrap_or_default();
    wait_until(Duration::from_secs(60), "the log says why", || {
        wrong_log().to_lowercase().contains("sasl authentication")
    });
    let ready = s.get("/readyz");
    assert!(
        matches!(&ready, Some((200, r)) if r.contains("kafka:")),
        "ready to serve, not consuming: {ready:?}"
    );
    assert_eq!(s.metric("neardup_consuming", ""), 0.0);
    assert_eq!(s.metric("neardup_records_in_total", ""), 0.0);
    let metrics = s.get("/metrics").unwrap().1;
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(30)), Some(0), "SIGTERM exits 0");
    let log = wrong_log();
    assert!(!log.contains(WRONG) && !metrics.contains(WRONG), "{log}");

    // the right one: every record answered over TLS
    let right = props("right.properties", PASSWORD);
    let mut s = Stage::start_at(
        &tls_addr,
        &d.join("index"),
        &d.join("right.log"),
        &["--kafka-properties-file", &right],
    );
    s.wait_ready(Duration::from_secs(60));
    wait_until(Duration::from_secs(120), "every record answered", || {
        s.metric("neardup_records_out_total", "") >= records.len() as f64
    });
    let metrics = s.get("/metrics").unwrap().1;
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(30)), Some(0));
    let log = std::fs::read_to_string(d.join("right.log")).unwrap();
    assert!(log.contains("<redacted>"), "the configuration is logged");
    assert!(!log.contains(PASSWORD) && !metrics.contains(PASSWORD));

    // read the outputs back over the tests' plain listener
    let outs = check_no_loss(&b, &ids);
    assert_eq!(outs.len(), records.len(), "no repeats in one clean run");
    assert_eq!(decisions(&outs), file_mode(&records, d));
}

/// OAUTHBEARER with OpenID Connect, as managed Kafka services use it: the stage's client
/// asks the token endpoint for a token with its client credentials (the grant of OIDC's
/// client-credentials flow) before it talks to any broker. An endpoint on loopback records
/// the request; no broker is needed for that part.
#[test]
fn oauthbearer_with_oidc_asks_the_token_endpoint_with_the_client_credentials() {
    use std::io::{Read, Write};
    let _g = serial();
    let endpoint = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = endpoint.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for conn in endpoint.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = vec![0u8; 16384];
            let mut got = Vec::new();
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some(head) = text.find("\r\n\r\n") {
                    let len = text[..head]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if got.len() >= head + 4 + len {
                        break;
                    }
                }
            }
            let _ = tx.send(String::from_utf8_lossy(&got).into_owned());
            let body = r#"{"error":"invalid_client"}"#;
            let _ = write!(
                c,
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let token_url = format!("http://127.0.0.1:{port}/oauth2/token");
    let props = [
        "security.protocol=SASL_PLAINTEXT".to_string(),
        "sasl.mechanism=OAUTHBEARER".into(),
        "sasl.oauthbearer.method=oidc".into(),
        "sasl.oauthbearer.client.id=neardup-stage".into(),
        "sasl.oauthbearer.client.secret=not-a-real-secret".into(),
        format!("sasl.oauthbearer.token.endpoint.url={token_url}"),
    ];
    let mut args: Vec<&str> = Vec::new();
    for p in &props {
        args.push("--kafka-property");
        args.push(p);
    }
    // a broker address nothing listens on: the token comes first
    let mut s = Stage::start_at(
        &format!("127.0.0.1:{}", free_port()),
        &dir.path().join("index"),
        &dir.path().join("oidc.log"),
        &args,
    );
    let request = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            panic!(
                "the token endpoint was never asked; log:\n{}",
                std::fs::read_to_string(dir.path().join("oidc.log")).unwrap_or_default()
            )
        });
    assert!(request.starts_with("POST /oauth2/token"), "{request}");
    assert!(
        request.contains("grant_type=client_credentials"),
        "{request}"
    );
    let basic = request
        .lines()
        .find_map(|l| {
            l.strip_prefix("Authorization: Basic ")
                .or(l.strip_prefix("authorization: Basic "))
        })
        .unwrap_or_else(|| panic!("no client credentials: {request}"));
    use base64::Engine;
    let creds = base64::engine::general_purpose::STANDARD
        .decode(basic.trim())
        .unwrap();
    assert_eq!(creds, b"neardup-stage:not-a-real-secret");
    // the secret is not in the log
    s.signal("TERM");
    assert_eq!(s.wait(Duration::from_secs(60)), Some(0), "SIGTERM exits 0");
    let log = std::fs::read_to_string(dir.path().join("oidc.log")).unwrap();
    assert!(!log.contains("not-a-real-secret"), "{log}");
}
