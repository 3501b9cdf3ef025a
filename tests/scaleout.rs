//! Scale-out against a real broker (docs/dev/architecture.md §6): signers (a stateless consumer group) write
//! signed records, one decider decides them in order and writes its index mutations to a
//! changelog. Two signers and a decider decide as `neardup dedup` does over the pages in the
//! order the decider consumed them; a killed signer, a killed decider and a lost index
//! directory (restored from the changelog) lose nothing, repeat byte-identically and change
//! no later decision.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::*;

const OUTPUTS: [&str; 3] = ["pages-unique", "pages-duplicate", "pages-dead-letter"];
const SIGNED: &str = "pages-signed";
const CHANGELOG: &str = "pages-index-changelog";

fn topics(b: &Broker) {
    b.create_topics(&[
        ("pages", 4),
        (SIGNED, 1),
        (CHANGELOG, 1),
        ("pages-unique", 3),
        ("pages-duplicate", 3),
        ("pages-dead-letter", 1),
    ]);
}

fn signer(b: &Broker, dir: &Path, name: &str) -> Stage {
    Stage::start(
        b,
        &dir.join(format!("{name}-unused")),
        &dir.join(format!("{name}.log")),
        &["--role", "signer", "--instance-id", name],
    )
}

/// The decider, a static member as the chart makes it (the pod name of its StatefulSet).
fn decider(b: &Broker, dir: &Path, index: &Path, log: &str) -> Stage {
    Stage::start(
        b,
        index,
        &dir.join(log),
        &["--role", "decider", "--instance-id", "decider-0"],
    )
}

/// `neardup run` of a role (`role`: its role and instance id) under exactly-once.
fn exactly_once(b: &Broker, index: &Path, log: &Path, role: &[&str]) -> Stage {
    let args: Vec<&str> = role
        .iter()
        .chain(&["--guarantee", "exactly-once"])
        .copied()
        .collect();
    Stage::start(b, index, log, &args)
}

/// Whether a ready stage runs on one heap (`glibc.malloc.arena_max=1` in the environment it
/// started with, src/allocator.rs), keeping its name across its starts.
fn one_heap(s: &Stage) -> bool {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return false;
    }
    let pid = s.child.id();
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let tunables: Vec<String> = env
        .split(|&b| b == 0)
        .filter_map(|e| e.strip_prefix(b"GLIBC_TUNABLES="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(tunables.len(), 1, "{tunables:?}");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim_end(), "neardup", "the process keeps its name");
    tunables[0].contains("glibc.malloc.arena_max=1")
}

/// A decider exactly-once whose configuration file and Kafka properties file are each given
/// as a file or through a pipe (a shell's `<(…)`), as `how` says ("file", "pipe": the
/// configuration; "properties-pipe": the properties), its brokers nowhere: it starts, reads
/// its settings and serves /healthz while it looks for them.
fn decider_configured(dir: &Path, config: &str, properties: &str, how: &str) -> Stage {
    let http = free_port();
    let log = dir.join(format!("decider-{how}.log"));
    let (c, p) = (dir.join("decider.toml"), dir.join("decider.properties"));
    std::fs::write(&c, config).unwrap();
    std::fs::write(&p, properties).unwrap();
    let (c, p) = (c.display().to_string(), p.display().to_string());
    let piped = |f: &str| format!("<(cat '{f}')");
    let (c, p) = match how {
        "file" => (c, p),
        "pipe" => (piped(&c), p),
        _ => (c, piped(&p)),
    };
    let script = format!(
        "exec \"$0\" --config {c} run --kafka-properties-file {p} --brokers 127.0.0.1:{} \
         --index '{}' --listen 127.0.0.1:{http} --log-format json --role decider \
         --instance-id decider-0 --guarantee exactly-once",
        free_port(),
        dir.join(format!("index-{how}")).display(),
    );
    let child = std::process::Command::new("bash")
        .args(["-c", &script])
        .arg(neardup().get_program())
        .env_remove("GLIBC_TUNABLES")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let s = Stage { child, http, log };
    wait_until(Duration::from_secs(60), "the decider's /healthz", || {
        matches!(s.get("/healthz"), Some((200, _)))
    });
    s
}

/// A deciding role exactly-once starts itself again on one heap and reads its settings a
/// second time: from regular files it does, and runs with them; when one of them comes
/// through a pipe, which the second read would find empty (the defaults taken), it stays on
/// a heap a thread and says why; and settings read differently the second time stop it with
/// the reason instead of running on others than the first start read.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn one_heap_runs_on_the_settings_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[stage]\nmax-in-flight = 777\n";
    let properties = "client.id=decider-configured\n";
    for how in ["file", "pipe", "properties-pipe"] {
        let s = decider_configured(dir.path(), config, properties, how);
        let log = std::fs::read_to_string(&s.log).unwrap();
        let starting = log
            .lines()
            .find(|l| l.contains("\"starting\""))
            .unwrap_or_else(|| panic!("no start line ({how}):\n{log}"));
        assert!(
            starting.contains(r#"\"max_in_flight\":777"#)
                && starting.contains("decider-configured"),
            "{how}: not the settings given: {starting}"
        );
        assert_eq!(one_heap(&s), how == "file", "{how}:\n{log}");
        let warned = log.contains("settings read from other than regular files");
        assert_eq!(warned, how != "file", "{how}:\n{log}");
    }
    // the second image of a start whose settings were other the first time
    let second = neardup()
        .args(["--config"])
        .arg(dir.path().join("decider.toml"))
        .args(["run", "--brokers", "127.0.0.1:9", "--index"])
        .arg(dir.path().join("index-other"))
        .args(["--role", "decider", "--guarantee", "exactly-once"])
        .env("GLIBC_TUNABLES", neardup::allocator::ONE_HEAP_TUNABLES)
        .env(neardup::allocator::SETTINGS_READ_BEFORE, "0123456789abcdef")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("second.log")).unwrap())
        .spawn()
        .unwrap();
    // stopped on drop, should it not stop by itself
    let mut second = Stage {
        child: second,
        http: 0,
        log: dir.path().join("second.log"),
    };
    let mut code = None;
    wait_until(Duration::from_secs(30), "the second image to stop", || {
        code = second.child.try_wait().unwrap().map(|s| s.code());
        code.is_some()
    });
    let stderr = std::fs::read_to_string(dir.path().join("second.log")).unwrap();
    assert_eq!(code, Some(Some(2)), "{stderr}");
    assert!(
        stderr.contains("differ from what it read the first time"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("index-other").exists(),
        "it opened its index"
    );
}

/// Two signers and a decider, ready, the signers sharing the input's four partitions.
fn roles(b: &Broker, dir: &Path, index: &Path) -> (Stage, Stage, Stage) {
    let sa = signer(b, dir, "signer-a");
    let sb = signer(b, dir, "signer-b");
    let d = decider(b, dir, index, "decider-1.log");
    for s in [&sa, &sb, &d] {
        s.wait_ready(Duration::from_secs(60));
    }
    // at-least-once every role keeps a heap a thread (src/allocator.rs)
    for s in [&sa, &sb, &d] {
        assert!(!one_heap(s));
    }
    wait_until(
        Duration::from_secs(60),
        "the signers share the input",
        || {
            sa.metric("neardup_assigned_partitions", "")
                + sb.metric("neardup_assigned_partitions", "")
                == 4.0
        },
    );
    (sa, sb, d)
}

/// The pages of the input in the order the decider consumed them: the first signed record
/// of each id on the (one-partition) signed topic.
fn decided_order(b: &Broker, inputs: &[Input]) -> Vec<Input> {
    let by_id: BTreeMap<String, &Input> = inputs
        .iter()
        .filter_map(|r| {
            let v: serde_json::Value = serde_json::from_slice(r.2.as_ref()?).ok()?;
            Some((v["id"].as_str()?.to_string(), r))
        })
        .collect();
    let signed = b.read(&[SIGNED], usize::MAX, Duration::from_secs(120));
    let schema = validator("signed.v1.schema.json");
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for o in &signed {
        let v = o.json();
        if let Err(e) = schema.validate(&v) {
            panic!("signed record does not follow its schema: {e}: {v}");
        }
        assert_eq!(o.headers["neardup-schema"], "neardup.signed.v1");
        let id = v["id"].as_str().unwrap().to_string();
        if seen.insert(id.clone()) {
            order.push((*by_id[&id]).clone());
        }
    }
    order
}

/// The id of a page record of the input.
fn input_id(r: &Input) -> String {
    serde_json::from_slice::<serde_json::Value>(r.2.as_ref().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every changelog record follows its schema; returns the ids it stores, in order.
fn changelog_ids(b: &Broker) -> Vec<String> {
    let schema = validator("changelog.v1.schema.json");
    b.read(&[CHANGELOG], usize::MAX, Duration::from_secs(120))
        .iter()
        .map(|o| {
            assert!(!o.value.is_empty(), "no retention window: no tombstones");
            let v = o.json();
            if let Err(e) = schema.validate(&v) {
                panic!("changelog record does not follow its schema: {e}: {v}");
            }
            o.key.clone().unwrap()
        })
        .collect()
}

fn decisions(outs: &[Out]) -> BTreeMap<String, (String, String)> {
    outs.iter()
        .filter(|o| o.topic != "pages-dead-letter")
        .map(|o| decision_of(&o.json()))
        .collect()
}

/// Pages and a few records that are not pages (dead letters from the signers).
fn inputs(stories: u64) -> (Vec<Input>, usize) {
    let mut records = synthetic(stories, 4);
    let bad = [&b"not json"[..], br#"{"html":"<p>no url</p>"}"#];
    for (i, v) in bad.iter().enumerate() {
        records.push((i as i32, format!("bad-{i}"), Some(v.to_vec())));
    }
    (records, bad.len())
}

#[test]
fn two_signers_and_a_decider_decide_as_file_mode_over_the_decided_order() {
    let _g = serial();
    let b = Broker::start();
    topics(&b);
    let dir = tempfile::tempdir().unwrap();
    let (sa, sb, d) = roles(&b, dir.path(), &dir.path().join("index"));
    let (records, bad) = inputs(100);
    let pages = records.len() - bad;
    b.produce("pages", &records);
    wait_until(Duration::from_secs(180), "every page decided", || {
        d.metric("neardup_records_out_total", "") >= pages as f64
    });
    let (na, nb) = (
        sa.metric("neardup_records_in_total", ""),
        sb.metric("neardup_records_in_total", ""),
    );
    assert!(na > 0.0 && nb > 0.0, "both signers signed ({na}, {nb})");
    assert_eq!(na + nb, records.len() as f64);
    assert_eq!(
        sa.metric("neardup_dead_letters_total", "") + sb.metric("neardup_dead_letters_total", ""),
        bad as f64,
        "bad input is a dead letter at the signer"
    );

    let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120));
    let mut ids = ids(&records);
    let dead: Vec<&Out> = outs
        .iter()
        .filter(|o| o.topic == "pages-dead-letter")
        .collect();
    assert_eq!(dead.len(), bad);
    for o in &dead {
        ids.insert(o.source());
    }
    let (first, repeats) = first_outputs(&outs, &ids);
    assert_eq!(repeats, 0, "no failure: every input answered once");
    assert_eq!(first.len(), records.len());
    let tagged = validator("tagged.v1.schema.json");
    for o in outs.iter().filter(|o| o.topic != "pages-dead-letter") {
        let v = o.json();
        assert!(tagged.is_valid(&v), "tagged record off its schema: {v}");
        assert!(
            v["text"].as_str().is_some_and(|t| !t.is_empty()),
            "the text came along"
        );
    }

    // the decisions are file mode's over the pages in the order the decider read them
    let order = decided_order(&b, &records);
    assert_eq!(order.len(), pages);
    let got = decisions(&outs);
    assert_eq!(got, file_mode(&order, dir.path()));
    let dups = got.values().filter(|(d, _)| d == "duplicate").count();
    assert!(dups >= 150, "the copies were found ({dups})");

    // every decided page is in the changelog, in the decided order
    let logged = changelog_ids(&b);
    let order_ids: Vec<String> = order.iter().map(input_id).collect();
    assert_eq!(logged, order_ids);

    // a restore cut short leaves its marker: the next start throws the partial index away
    // and restores all of it again
    let mut d = d;
    d.signal("TERM");
    assert_eq!(d.wait(Duration::from_secs(60)), Some(0));
    let index = dir.path().join("index");
    std::fs::write(index.join("changelog-restore"), b"cut short\n").unwrap();
    let d2 = decider(&b, dir.path(), &index, "decider-again.log");
    d2.wait_ready(Duration::from_secs(120));
    assert_eq!(
        d2.metric("neardup_changelog_restored_records_total", ""),
        pages as f64
    );
    assert!(!index.join("changelog-restore").exists());
    let log = std::fs::read_to_string(dir.path().join("decider-again.log")).unwrap();
    assert!(log.contains("cut short"), "{log}");
}

#[test]
fn killed_signer_killed_decider_and_a_lost_index_lose_nothing_and_change_nothing() {
    let _g = serial();
    let b = Broker::start();
    topics(&b);
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let (mut sa, sb, mut d) = roles(&b, dir.path(), &index);
    let (records, bad) = inputs(300);
    let pages = records.len() - bad;
    let third = records.len() / 3;
    let (first, rest) = records.split_at(third);
    let (second, last) = rest.split_at(third);
    b.produce("pages", first);

    // a signer killed mid-stream, restarted as the same member
    wait_until(Duration::from_secs(120), "signing under way", || {
        sa.metric("neardup_records_out_total", "") >= 50.0
    });
    sa.signal("KILL");
    assert_eq!(sa.wait(Duration::from_secs(10)), None);
    let sa = signer(&b, dir.path(), "signer-a");
    sa.wait_ready(Duration::from_secs(60));

    // the decider killed mid-stream; restarted on the same volume, it completes the
    // changelog with its latest documents and goes on
    wait_until(Duration::from_secs(120), "deciding under way", || {
        d.metric("neardup_records_out_total", "") >= 150.0
    });
    d.signal("KILL");
    assert_eq!(d.wait(Duration::from_secs(10)), None);
    let mut d = decider(&b, dir.path(), &index, "decider-2.log");
    d.wait_ready(Duration::from_secs(120));
    let log = std::fs::read_to_string(dir.path().join("decider-2.log")).unwrap();
    assert!(
        log.contains("changelog completed with the index's latest documents"),
        "{log}"
    );
    // the second third arrives over about 3 s, so that the kill lands while it is decided
    let feed = feed_paced(
        &b.addr(),
        "pages",
        second.to_vec(),
        10,
        Duration::from_millis(100),
    );

    // killed again, and its index directory lost with it
    wait_until(Duration::from_secs(120), "deciding under way again", || {
        d.metric("neardup_records_out_total", "") >= 100.0
    });
    d.signal("KILL");
    assert_eq!(d.wait(Duration::from_secs(10)), None);
    let decided_before: BTreeSet<String> = b
        .read(&OUTPUTS, usize::MAX, Duration::from_secs(120))
        .iter()
        .map(Out::source)
        .collect();
    assert!(
        decided_before.len() < pages,
        "killed mid-stream ({} of {pages})",
        decided_before.len()
    );
    feed.join().unwrap();
    std::fs::remove_dir_all(&index).unwrap();

    // a new decider restores the index from the changelog before it consumes
    let d2 = decider(&b, dir.path(), &index, "decider-3.log");
    d2.wait_ready(Duration::from_secs(120));
    let restored = d2.metric("neardup_changelog_restored_records_total", "");
    assert!(
        restored >= 250.0,
        "restored from the changelog ({restored} records)"
    );
    let log = std::fs::read_to_string(dir.path().join("decider-3.log")).unwrap();
    assert!(log.contains("index restored from the changelog"), "{log}");
    b.produce("pages", last);

    let mut ids = ids(&records);
    wait_until(Duration::from_secs(300), "every input answered", || {
        let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120));
        let answered: BTreeSet<String> = outs.iter().map(Out::source).collect();
        answered.iter().filter(|s| ids.contains(*s)).count() >= ids.len()
            && outs
                .iter()
                .filter(|o| o.topic == "pages-dead-letter")
                .count()
                >= bad
    });
    let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120));
    for o in outs.iter().filter(|o| o.topic == "pages-dead-letter") {
        ids.insert(o.source());
    }
    // nothing lost; a repeated output byte-identical to the first
    let (first, repeats) = first_outputs(&outs, &ids);
    eprintln!(
        "{} inputs, {} outputs, {repeats} repeated, {restored} changelog records restored",
        ids.len(),
        outs.len()
    );
    assert!(first.len() >= records.len());
    // and every decision, before and after the loss, is the one an uninterrupted process
    // makes over the pages in the order the decider read them
    let order = decided_order(&b, &records);
    assert_eq!(order.len(), pages);
    assert_eq!(decisions(&outs), file_mode(&order, dir.path()));
    drop((sa, sb, d2));
}

/// A page cap (`--max-pages`) through the stage: past the cap a sweep removes the oldest
/// pages, their tombstones go to the changelog, the decisions are those of file mode with
/// the same cap over the decided order (a page whose earlier copies left is new again), and
/// an index restored from the changelog holds the same pages.
#[test]
fn a_page_cap_removes_the_oldest_pages_through_the_changelog_as_file_mode_does() {
    let _g = serial();
    let b = Broker::start();
    topics(&b);
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let cap = ["--max-pages", "5000"];
    let decider = |log: &str| {
        let mut args = vec!["--role", "decider", "--instance-id", "decider-0"];
        args.extend(cap);
        Stage::start(&b, &index, &dir.path().join(log), &args)
    };
    let sa = signer(&b, dir.path(), "signer-a");
    let mut d = decider("decider-1.log");
    for s in [&sa, &d] {
        s.wait_ready(Duration::from_secs(60));
    }
    // 10,500 pages: the sweep after the 10,000th decision finds 10,000 pages and trims
    // them to 4,750; 500 more are decided after it
    let records = synthetic(3_500, 4);
    b.produce("pages", &records);
    wait_until(Duration::from_secs(600), "every page decided", || {
        d.metric("neardup_records_out_total", "") >= records.len() as f64
    });
    let expired = d.metric("neardup_index_expired_total", "");
    assert_eq!(expired, 5_250.0, "10,000 pages trimmed to 95 % of the cap");
    wait_until(Duration::from_secs(30), "the pages gauge", || {
        d.metric("neardup_index_pages", "") == 5_250.0
    });

    let order = decided_order(&b, &records);
    assert_eq!(order.len(), records.len());
    let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120));
    let got = decisions(&outs);
    let want = file_mode_with(&order, dir.path(), &cap);
    let differ: Vec<_> = want
        .iter()
        .filter(|(id, d)| got.get(*id) != Some(*d))
        .map(|(id, d)| (id, d, got.get(id)))
        .take(20)
        .collect();
    assert!(
        differ.is_empty() && got.len() == want.len(),
        "{} decisions, {} in file mode; (id, file mode, stage): {differ:?}",
        got.len(),
        want.len()
    );
    let new_again = order[10_000..]
        .iter()
        .filter(|r| {
            let id = input_id(r);
            got[&id].0 == "unique" && !id.ends_with("-c0")
        })
        .count();
    assert!(
        new_again > 0,
        "a copy whose earlier copies left is new again"
    );

    // the changelog: a tombstone for each of the 5,250 oldest pages, in decided order
    let log = b.read(&[CHANGELOG], usize::MAX, Duration::from_secs(120));
    let tombstones: Vec<String> = log
        .iter()
        .filter(|o| o.value.is_empty())
        .map(|o| o.key.clone().unwrap())
        .collect();
    let oldest: Vec<String> = order[..5_250].iter().map(input_id).collect();
    assert_eq!(tombstones, oldest);

    // a lost volume: the restored index holds the 5,250 pages that stayed
    d.signal("TERM");
    assert_eq!(d.wait(Duration::from_secs(60)), Some(0));
    std::fs::remove_dir_all(&index).unwrap();
    let d2 = decider("decider-2.log");
    d2.wait_ready(Duration::from_secs(120));
    wait_until(Duration::from_secs(30), "the restored pages gauge", || {
        d2.metric("neardup_index_pages", "") == 5_250.0
    });
    drop((sa, d2));
}

#[test]
fn topics_create_makes_the_stages_topics_and_refuses_a_split_changelog() {
    let _g = serial();
    let b = Broker::start();
    b.create_topics(&[("pages", 4)]);
    let create = |extra: &[&str]| {
        neardup()
            .args(["topics", "create", "--brokers", &b.addr()])
            .args(["--partitions", "3", "--replication-factor", "1"])
            .args(extra)
            .output()
            .unwrap()
    };
    // the first run creates the topics; a second finds them on the brokers, with those
    // partitions, and leaves them
    for want in ["created", "exists"] {
        let out = create(&[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for (t, parts) in [
            ("pages-unique", 3),
            ("pages-duplicate", 3),
            ("pages-dead-letter", 3),
            (SIGNED, 1),
            (CHANGELOG, 1),
        ] {
            let e = v
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["topic"] == t)
                .unwrap_or_else(|| panic!("{t} in {v}"));
            let state = (
                e["state"].as_str().unwrap(),
                e["partitions"].as_i64().unwrap(),
            );
            assert_eq!(state, (want, parts), "{t}");
            // one replica: min.insync.replicas 1, set when created, read back after
            assert_eq!(e["min_insync_replicas"], "1", "{t}: {e}");
        }
    }
    // more than the replicas is refused before anything is asked of the brokers
    let over = create(&["--min-insync-replicas", "2"]);
    assert_eq!(over.status.code(), Some(2), "{over:?}");
    assert!(
        String::from_utf8_lossy(&over.stderr).contains("min-insync-replicas"),
        "{over:?}"
    );
    // a changelog of several partitions would lose the order of the decisions
    b.create_topics(&[("split-changelog", 2)]);
    let split = create(&["--changelog-topic", "split-changelog"]);
    assert!(!split.status.success());
    let err = String::from_utf8_lossy(&split.stderr);
    assert!(err.contains("exactly one"), "{err}");
    // a decider started on it, or on a missing one (the brokers would create it with their
    // defaults), exits with the reason
    let dir = tempfile::tempdir().unwrap();
    let refused = |name: &str, changelog: &str| {
        let log = dir.path().join(format!("{name}.log"));
        let mut d = Stage::start(
            &b,
            &dir.path().join(name),
            &log,
            &[
                "--role",
                "decider",
                "--changelog-topic",
                changelog,
                "--failure-hold",
                "0s",
            ],
        );
        assert_eq!(d.wait(Duration::from_secs(60)), Some(2), "{changelog}");
        std::fs::read_to_string(log).unwrap()
    };
    let log = refused("split", "split-changelog");
    assert!(log.contains("exactly one"), "{log}");
    let log = refused("missing", "no-such-changelog");
    assert!(
        log.contains("does not exist") && log.contains("topics create"),
        "{log}"
    );
}

/// Signers × 2 and a decider, all with exactly-once, 20 SIGKILLs at default settings: seven
/// of each signer and six of the decider, at random moments (start-up, group joins and the
/// rebalances the signers' restarts cause, mid-transaction). A read_committed consumer sees
/// every input answered exactly once, with no repeat; the decider's signed topic holds each
/// page once; and the decisions are those of one uninterrupted process over that order.
#[test]
fn twenty_kills_of_signers_and_decider_with_exactly_once_answer_every_input_once() {
    let _g = serial();
    let b = Broker::start();
    topics(&b);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let index = d.join("index");
    let start = |what: usize, n: usize| -> Stage {
        match what {
            0 | 1 => {
                let name = ["signer-a", "signer-b"][what];
                let (unused, log) = (
                    d.join(format!("{name}-unused")),
                    d.join(format!("{name}-{n}.log")),
                );
                exactly_once(
                    &b,
                    &unused,
                    &log,
                    &["--role", "signer", "--instance-id", name],
                )
            }
            _ => {
                let log = d.join(format!("decider-{n}.log"));
                exactly_once(
                    &b,
                    &index,
                    &log,
                    &["--role", "decider", "--instance-id", "decider-0"],
                )
            }
        }
    };
    let (records, bad) = inputs(env_or("NEARDUP_EOS_STORIES", 1500));
    let ids = ids(&records);
    // the input arrives while the roles are killed: 125 records a second, about 36 s
    let feed = feed_paced(
        &b.addr(),
        "pages",
        records.clone(),
        25,
        Duration::from_millis(200),
    );
    let mut stages: Vec<Stage> = (0..3).map(|w| start(w, 0)).collect();
    let mut worked = 0;
    // 7, 7 and 6 kills; a third during start-up or the group join, the rest once it works
    for (k, kill) in kill_schedule(20, 3, 0x2545_F491_4F6C_DD1D)
        .into_iter()
        .enumerate()
    {
        let w = kill.role;
        let s = &mut stages[w];
        if kill.when_ready {
            s.wait_ready(Duration::from_secs(90));
            // exactly-once the decider runs on one heap, on huge pages; a signer keeps a
            // heap a thread (src/allocator.rs)
            if cfg!(all(target_os = "linux", target_env = "gnu")) {
                assert_eq!(one_heap(s), w == 2);
            }
        }
        std::thread::sleep(kill.after);
        worked += usize::from(s.metric("neardup_records_out_total", "") > 0.0);
        s.signal("KILL");
        assert_eq!(s.wait(Duration::from_secs(10)), None);
        eprintln!("kill {}: {}", k + 1, ["signer-a", "signer-b", "decider"][w]);
        stages[w] = start(w, k + 1);
    }
    feed.join().unwrap();
    assert!(
        worked >= 5,
        "fewer than five kills of a role that had written ({worked})"
    );
    wait_until(Duration::from_secs(600), "every input answered", || {
        b.read(&OUTPUTS, usize::MAX, Duration::from_secs(60)).len() >= records.len()
    });
    let (outs, ids) = stop_and_check_exactly_once(&b, &mut stages, &OUTPUTS, ids);
    assert_eq!(ids.len(), records.len(), "one dead letter per bad record");
    let signed = b.read(&[SIGNED], usize::MAX, Duration::from_secs(120));
    assert_eq!(
        signed.len(),
        records.len() - bad,
        "each page signed once as read_committed sees it"
    );
    let order = decided_order(&b, &records);
    assert_eq!(decisions(&outs), file_mode(&order, d));
    // kills left aborted transactions behind, which read_committed consumers never saw
    let all = b.read_uncommitted(&[SIGNED, OUTPUTS[0], OUTPUTS[1], OUTPUTS[2]]);
    let committed = signed.len() + outs.len();
    eprintln!("{committed} committed records, {all} with the aborted ones, {worked} kills of a role that had written");
    assert!(
        all > committed,
        "no kill left an aborted transaction ({all} records)"
    );
}

/// A signer killed while its transaction holds signed records, and started again under its
/// instance id (the chart's signers: the pod name), ends that transaction at once: the new
/// process's producer fences the old one's transactional id and the broker aborts what it
/// left open. So the decider, a read_committed reader of the signed topic, goes on within
/// seconds, where under a new id the open transaction would hold it back until the broker
/// timed it out (`transaction.timeout.ms`, 60 s). Every input is answered once.
#[test]
fn a_signer_started_again_under_its_instance_id_ends_the_transaction_it_left_open_at_once() {
    let _g = serial();
    let b = Broker::start();
    topics(&b);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let start_signer = |n: usize| -> Stage {
        let log = d.join(format!("signer-{n}.log"));
        let role = ["--role", "signer", "--instance-id", "signer-0"];
        exactly_once(&b, &d.join("signer-unused"), &log, &role)
    };
    let role = ["--role", "decider", "--instance-id", "decider-0"];
    let mut decider = exactly_once(&b, &d.join("index"), &d.join("decider.log"), &role);
    let mut signer = start_signer(0);
    for s in [&signer, &decider] {
        s.wait_ready(Duration::from_secs(60));
    }
    let (records, bad) = inputs(400);
    let ids = ids(&records);
    // 200 records a second: the signer's transactions (250 ms each) keep signing
    let feed = feed_paced(
        &b.addr(),
        "pages",
        records.clone(),
        20,
        Duration::from_millis(100),
    );
    let answered = |s: &Stage| s.metric("neardup_records_out_total", "");
    wait_until(Duration::from_secs(60), "the decider answers", || {
        answered(&decider) >= 100.0
    });
    // the signer paused at a moment its open transaction holds signed records (the signed
    // topic's last stable offset before its end), then killed
    let mut pauses = 0;
    loop {
        signer.signal("STOP");
        pauses += 1;
        if b.open_transaction(SIGNED, 0) {
            break;
        }
        assert!(
            pauses < 20,
            "no open transaction with records in {pauses} pauses"
        );
        signer.signal("CONT");
        std::thread::sleep(Duration::from_millis(100));
    }
    signer.signal("KILL");
    assert_eq!(signer.wait(Duration::from_secs(10)), None);
    let killed = std::time::Instant::now();
    signer = start_signer(1);
    feed.join().unwrap();
    let fed = std::time::Instant::now();
    let pages = (records.len() - bad) as f64;
    wait_until(Duration::from_secs(180), "every page answered", || {
        answered(&decider) >= pages
    });
    let took = killed.elapsed();
    eprintln!(
        "every page answered {:.1} s after the kill, {:.1} s after the last was fed ({pauses} \
         pause(s))",
        took.as_secs_f64(),
        fed.elapsed().as_secs_f64()
    );
    assert!(
        took < Duration::from_secs(30),
        "every page answered {took:?} after the kill: the open transaction waited for the \
         broker's timeout"
    );
    let (outs, ids) = stop_and_check_exactly_once(&b, [&mut signer, &mut decider], &OUTPUTS, ids);
    assert_eq!(ids.len(), records.len(), "one dead letter per bad record");
    assert_eq!(outs.len(), records.len(), "every input answered once");
}

/// A decider with a standby, at defaults: two deciders of one index (`--standby`), each with
/// its own index directory, and a signer, all exactly-once, while pages arrive. The
/// deciding one is stopped cleanly (SIGTERM): it leaves, and the other takes over at once.
/// Then the deciding one is killed (SIGKILL): the standby takes over, and the killed one, started
/// again, follows (it does not take the place of the deciding one). Later the deciding one is
/// paused (SIGSTOP): the other takes over, and the paused one, resumed, is fenced and stops.
/// A decider that exits (fenced, or handing the signed topic back) is started again, as its
/// pod would be. A read_committed consumer sees every input answered exactly once, and the
/// decisions are those of one uninterrupted process over the decided order.
#[test]
fn a_standby_decider_takes_over_from_a_killed_and_from_a_paused_decider_exactly_once() {
    let _g = serial();
    let b = Broker::start();
    topics(&b);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let eos = ["--guarantee", "exactly-once"];
    let mut starts = 0usize;
    let mut start_decider = |i: usize| -> Stage {
        starts += 1;
        let name = format!("decider-{i}");
        let mut args = vec!["--role", "decider", "--instance-id", &name, "--standby"];
        args.extend(eos);
        Stage::start(
            &b,
            &d.join(format!("index-{i}")),
            &d.join(format!("{name}-{starts}.log")),
            &args,
        )
    };
    let mut deciders = [start_decider(0), start_decider(1)];
    let mut signer_args = vec!["--role", "signer", "--instance-id", "signer-a"];
    signer_args.extend(eos);
    let signer = Stage::start(
        &b,
        &d.join("signer-unused"),
        &d.join("signer.log"),
        &signer_args,
    );
    for s in deciders.iter().chain([&signer]) {
        s.wait_ready(Duration::from_secs(90));
    }
    let (records, bad) = inputs(env_or("NEARDUP_STANDBY_STORIES", 3000));
    let ids = ids(&records);
    // 100 records a second, about 90 s
    let feed = feed_paced(
        &b.addr(),
        "pages",
        records.clone(),
        20,
        Duration::from_millis(200),
    );
    // the deciding one: its standby gauge is 0 and it has written
    let standby_gauge = |s: &Stage| -> Option<f64> {
        let (_, body) = s.get("/metrics")?;
        body.lines()
            .find_map(|l| l.strip_prefix("neardup_standby ")?.trim().parse().ok())
    };
    let deciding = |ds: &[Stage; 2]| -> Option<usize> {
        (0..2).find(|&i| {
            standby_gauge(&ds[i]) == Some(0.0)
                && ds[i].metric("neardup_records_out_total", "") > 0.0
        })
    };
    // a decider that stopped (handed over, or fenced) starts again, as its pod would
    let restart_exited = |ds: &mut [Stage; 2], start: &mut dyn FnMut(usize) -> Stage| {
        for (i, d) in ds.iter_mut().enumerate() {
            if let Some(st) = d.child.try_wait().unwrap() {
                eprintln!("decider-{i} exited ({st}); starting it again");
                *d = start(i);
            }
        }
    };
    let mut takeovers = Vec::new();
    for how in ["TERM", "KILL", "STOP"] {
        let mut active = None;
        wait_until(Duration::from_secs(120), "a decider decides", || {
            restart_exited(&mut deciders, &mut start_decider);
            active = deciding(&deciders);
            active.is_some()
        });
        let a = active.unwrap();
        let other = 1 - a;
        deciders[other].wait_ready(Duration::from_secs(90));
        std::thread::sleep(Duration::from_millis(1500));
        let before = deciders[other].metric("neardup_records_out_total", "");
        let written = deciders[a].metric("neardup_records_out_total", "");
        let t = std::time::Instant::now();
        deciders[a].signal(how);
        wait_until(Duration::from_secs(120), "the standby takes over", || {
            standby_gauge(&deciders[other]) == Some(0.0)
                && deciders[other].metric("neardup_records_out_total", "") > before
        });
        let took = t.elapsed().as_secs_f64();
        let own = deciders[other].metric("neardup_standby_takeover_seconds", "");
        eprintln!(
            "SIG{how} of decider-{a}: decider-{other} decides {took:.1} s later (its take-over: {own:.2} s)"
        );
        takeovers.push(took);
        if how == "TERM" {
            // a clean stop: the process leaves both groups, and the other one takes over
            // without waiting for a session
            assert_eq!(deciders[a].wait(Duration::from_secs(60)), Some(0));
            deciders[a] = start_decider(a);
        } else if how == "KILL" {
            assert_eq!(deciders[a].wait(Duration::from_secs(10)), None);
            deciders[a] = start_decider(a);
            // the restarted process follows: joining, it leaves the lease where it is
            deciders[a].wait_ready(Duration::from_secs(90));
            let out = deciders[other].metric("neardup_records_out_total", "");
            wait_until(
                Duration::from_secs(60),
                "the deciding one decides on",
                || deciders[other].metric("neardup_records_out_total", "") > out,
            );
            assert_eq!(
                deciding(&deciders),
                Some(other),
                "a restarted standby took the place of the deciding decider"
            );
            assert_eq!(standby_gauge(&deciders[a]), Some(1.0));
            assert!(deciders[other].child.try_wait().unwrap().is_none());
        } else {
            // resumed, the paused decider stops and writes nothing more (the exactly-once
            // check below sees no repeat): fenced when it tries to write its open
            // transaction, or, with nothing left to write, when it finds its session gone
            // and the signed topic with the other decider
            deciders[a].signal("CONT");
            let code = deciders[a].wait(Duration::from_secs(120));
            let log = std::fs::read_to_string(&deciders[a].log).unwrap();
            let fenced = code.is_some_and(|c| c != 0) && log.contains("fenced");
            let handed_over = code == Some(0)
                && (log.contains("the lease went to the other decider")
                    || log.contains("the signed topic went to the other decider"));
            assert!(
                fenced || handed_over,
                "the resumed decider stops ({code:?}); log:\n{log}"
            );
            eprintln!(
                "decider-{a} resumed: stopped ({}), exit {code:?} ({written} outputs before the pause)",
                if fenced { "fenced" } else { "handed over" }
            );
            deciders[a] = start_decider(a);
        }
    }
    feed.join().unwrap();
    wait_until(Duration::from_secs(600), "every input answered", || {
        restart_exited(&mut deciders, &mut start_decider);
        b.read(&OUTPUTS, usize::MAX, Duration::from_secs(60)).len() >= records.len()
    });
    let mut signer = signer;
    let (outs, ids) =
        stop_and_check_exactly_once(&b, deciders.iter_mut().chain([&mut signer]), &OUTPUTS, ids);
    assert_eq!(ids.len(), records.len(), "one dead letter per bad record");
    let order = decided_order(&b, &records);
    assert_eq!(order.len(), records.len() - bad);
    assert_eq!(decisions(&outs), file_mode(&order, d));
    eprintln!(
        "take-over after SIGTERM {:.1} s, after SIGKILL {:.1} s, after SIGSTOP {:.1} s",
        takeovers[0], takeovers[1], takeovers[2]
    );
}
