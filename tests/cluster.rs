//! The stage on a three-node Apache Kafka cluster (KRaft; replication factor 3,
//! min.insync.replicas 2, as `neardup topics create` makes the stage's topics), at its
//! defaults, while pages arrive: the node that coordinates the stage's group SIGKILLed (its
//! leaders move to the other two), brought back (the leaders move back to it), then a
//! rolling restart of every node. Under exactly-once a read_committed consumer sees every
//! input answered once; under at-least-once every input is answered, a repeat
//! byte-identical to the first answer. How long the stage took to answer again after each
//! fault is printed.

mod common;

use std::time::{Duration, Instant};

use common::*;

const OUTPUTS: [&str; 3] = ["pages-unique", "pages-duplicate", "pages-dead-letter"];

/// The stage's topics made by `neardup topics create` at its defaults (replication factor
/// 3): each created with min.insync.replicas 2.
fn stage_topics(c: &Cluster) {
    let out = neardup()
        .args([
            "topics",
            "create",
            "--brokers",
            &c.addr(),
            "--partitions",
            "3",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for t in v.as_array().unwrap() {
        assert_eq!(t["state"], "created", "{t}");
        assert_eq!(t["min_insync_replicas"], "2", "{t}");
    }
}

/// Waits until the stage answered `more` records beyond `from` (or every one of `total`,
/// when the feed ended first); returns how long it took.
fn answering(s: &Stage, from: f64, more: f64, total: usize, what: &str) -> Duration {
    let t = Instant::now();
    let want = (from + more).min(total as f64);
    while s.metric("neardup_records_out_total", "") < want {
        if t.elapsed() > Duration::from_secs(180) {
            if std::env::var_os("NEARDUP_CLUSTER_GDB").is_some() {
                let bt = std::process::Command::new("gdb")
                    .args([
                        "-p",
                        &s.child.id().to_string(),
                        "-batch",
                        "-ex",
                        "thread apply all bt",
                    ])
                    .output();
                if let Ok(o) = bt {
                    std::fs::write("/tmp/cluster-stuck-bt.txt", &o.stdout).ok();
                }
            }
            let log = std::fs::read_to_string(&s.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(80).collect();
            panic!(
                "timed out waiting for {what}; the stage's log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    t.elapsed()
}

fn faults_while_pages_arrive(guarantee: &str) {
    let _g = serial();
    let mut c = Cluster::start();
    c.create_topics(&[("pages", 3)]);
    stage_topics(&c);
    let all = [
        "pages",
        "pages-unique",
        "pages-duplicate",
        "pages-dead-letter",
        "pages-signed",
        "pages-index-changelog",
        "__consumer_offsets",
    ];
    let dir = tempfile::tempdir().unwrap();
    let records = synthetic(env_or("NEARDUP_CLUSTER_STORIES", 1500), 3);
    let ids = ids(&records);
    let mut s = Stage::start_at(
        &c.addr(),
        &dir.path().join("index"),
        &dir.path().join("stage.log"),
        &["--guarantee", guarantee],
    );
    s.wait_ready(Duration::from_secs(120));
    c.wait_in_sync(&all);
    // pages arrive for the whole test: 15 records every 150 ms
    let feed = {
        let (addr, records) = (c.addr(), records.clone());
        std::thread::spawn(move || {
            let p = producer(&addr);
            for chunk in records.chunks(15) {
                send_all(&p, "pages", chunk);
                std::thread::sleep(Duration::from_millis(150));
            }
        })
    };
    answering(&s, 0.0, 100.0, ids.len(), "the first outputs");

    // the node that coordinates the group and leads its offsets, SIGKILLed
    let victim = c
        .leader("__consumer_offsets", 0)
        .expect("a group coordinator");
    let led_before = c.leader("pages-unique", 0);
    let at = s.metric("neardup_records_out_total", "");
    c.nodes[victim].stop();
    let back = answering(&s, at, 100.0, ids.len(), "outputs with a node killed");
    let moved = c.leader("__consumer_offsets", 0);
    assert!(moved.is_some() && moved != Some(victim), "{moved:?}");
    eprintln!(
        "{guarantee}: node {} (group coordinator) SIGKILLed: answering again after {:.1} s",
        victim + 1,
        back.as_secs_f64()
    );
    // it comes back; its replicas catch up and the leaders move back to it
    std::thread::sleep(Duration::from_secs(5));
    c.nodes[victim].restart();
    c.wait_in_sync(&all);
    if led_before == Some(victim) {
        wait_until(Duration::from_secs(60), "the leader moved back", || {
            c.leader("pages-unique", 0) == Some(victim)
        });
    }
    let at = s.metric("neardup_records_out_total", "");
    let back = answering(
        &s,
        at,
        50.0,
        ids.len(),
        "outputs after the leaders moved back",
    );
    eprintln!(
        "{guarantee}: node {} back, leaders moved back: {:.1} s to 50 more outputs",
        victim + 1,
        back.as_secs_f64()
    );

    // a rolling restart: each node stopped as an orchestrator stops it (SIGTERM, a
    // controlled shutdown that moves its leaders away first), started, and in sync again
    for i in 0..c.nodes.len() {
        let at = s.metric("neardup_records_out_total", "");
        c.nodes[i].terminate();
        let down = answering(&s, at, 30.0, ids.len(), "outputs with a node stopped");
        c.nodes[i].restart();
        c.wait_in_sync(&all);
        eprintln!(
            "{guarantee}: rolling restart, node {} stopped: {:.1} s to 30 more outputs; \
             restarted and in sync",
            i + 1,
            down.as_secs_f64()
        );
    }
    feed.join().unwrap();
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the stage died during the faults"
    );

    let reader = c.any();
    wait_until(Duration::from_secs(600), "every input answered", || {
        answers(&reader.read(&OUTPUTS, ids.len(), Duration::from_secs(30))).len() >= ids.len()
    });
    if guarantee == "exactly-once" {
        stop_and_check_exactly_once(reader, [&mut s], &OUTPUTS, ids.clone());
    } else {
        s.signal("TERM");
        assert_eq!(s.wait(Duration::from_secs(60)), Some(0));
        let outs = reader.read_quiet(
            &OUTPUTS,
            usize::MAX,
            Duration::from_secs(120),
            Duration::from_secs(5),
        );
        let (first, repeats) = first_outputs(&outs, &ids);
        assert_eq!(first.len(), ids.len(), "every input answered");
        eprintln!(
            "{guarantee}: {} inputs answered, {repeats} repeats (byte-identical)",
            ids.len()
        );
    }
}

/// Passed once (every input answered once, 10.5 s to answer again after the kill); in two
/// later runs, with the group coordinator's node SIGKILLed 3 s after the stage joined, the
/// stage answered nothing more for 180 s, every thread idle and no error logged (the
/// liveness probe would restart it after 300 s). Not diagnosed yet: run it with
/// `cargo test --release --test cluster -- --ignored --nocapture` (NEARDUP_CLUSTER_GDB=1
/// writes the threads' stacks to /tmp/cluster-stuck-bt.txt when it times out).
#[test]
#[ignore = "exactly-once can stall when the group coordinator dies early: under diagnosis (docs/benchmarks/2026-11-28-production.md)"]
fn exactly_once_on_a_three_node_cluster_survives_a_node_killed_leaders_moved_and_a_rolling_restart()
{
    faults_while_pages_arrive("exactly-once");
}

#[test]
fn at_least_once_on_a_three_node_cluster_loses_nothing_through_the_same_faults() {
    faults_while_pages_arrive("at-least-once");
}
