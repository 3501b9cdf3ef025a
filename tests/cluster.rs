//! The stage on a three-node Apache Kafka cluster (KRaft; replication factor 3,
//! min.insync.replicas 2, as `neardup topics create` makes the stage's topics), at its
//! defaults, while pages arrive: the node that coordinates the stage's group SIGKILLed (its
//! leaders move to the other two), brought back (the leaders move back to it), then a
//! rolling restart of every node. Under exactly-once a read_committed consumer sees every
//! input answered once; under at-least-once every input is answered, a repeat
//! byte-identical to the first answer. How long the stage took to answer again after each
//! fault is printed. Under exactly-once the stage may exit with code 3 when its open
//! transaction cannot commit (a transaction call the client never ends, `src/stage/watchdog.rs`,
//! or an error that requires an abort, `src/stage/restart.rs`), and under either guarantee
//! with code 2 when the broker fences its static member as the group's coordinator moves (a
//! fault of the broker's: the client's consumer cannot go on after a fence, and a restart
//! rejoins); it is then restarted as an orchestrator restarts it, and the restarts are
//! printed too. Any other exit fails the test.

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

/// The stage as an orchestrator keeps it: restarted when it exits with code 3, the exit of an
/// open transaction that cannot commit (exactly-once only), or with code 2 after the broker
/// fenced its static member (a restart rejoins); any other exit fails the test. Its outputs are counted across restarts.
struct Kept<'a> {
    s: Stage,
    start: Box<dyn Fn(usize) -> Stage + 'a>,
    /// Outputs of the processes before this one, as last seen.
    base: f64,
    last: f64,
    restarts: Vec<Instant>,
    /// Exit code 3 is the exit of exactly-once only.
    exactly_once: bool,
}

impl Kept<'_> {
    /// The outputs acknowledged so far, across restarts.
    fn outputs(&mut self) -> f64 {
        if let Some(st) = self.s.child.try_wait().unwrap() {
            let log = std::fs::read_to_string(&self.s.log).unwrap_or_default();
            // the log's last lines, where the stage's error is, come last in the message
            let tail = log_tail(&self.s, 12);
            // the exits a restart is the answer to: an open transaction that cannot commit
            // (code 3), and the broker fencing the stage's static member when its group's
            // coordinator moved (code 2: the client's consumer cannot go on after a fence)
            // the error the process ended with: the last error line of the log (the
            // watchdog's, which exits at once) or the one the process printed as it exited
            let last = log
                .lines()
                .rev()
                .find(|l| l.starts_with("neardup: error:") || l.contains("\"level\":\"ERROR\""));
            let why = match st.code() {
                Some(3) if self.exactly_once => "so that a restart decides its records again",
                Some(2) => "the broker fenced this member",
                _ => "",
            };
            let why = last.filter(|l| !why.is_empty() && l.contains(why));
            let why = why.unwrap_or_else(|| {
                panic!(
                    "the stage exited with {st} other than with an open transaction that cannot \
                     commit or a fence of its member; its log:\n{log}\n\nthe log ends:\n{tail}"
                )
            });
            self.restarts.push(Instant::now());
            eprintln!(
                "the stage exited with {st}: restart {}; its error: {why}",
                self.restarts.len()
            );
            self.base += self.last;
            self.last = 0.0;
            self.s = (self.start)(self.restarts.len());
            self.s.wait_ready(Duration::from_secs(120));
        }
        self.last = self
            .last
            .max(self.s.metric("neardup_records_out_total", ""));
        self.base + self.last
    }
}

/// The last `n` lines of the stage's log.
fn log_tail(s: &Stage, n: usize) -> String {
    let log = std::fs::read_to_string(&s.log).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(n).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Waits until the stage answered `more` records beyond `from` (or every one of `total`,
/// when the feed ended first); returns how long it took.
fn answering(k: &mut Kept, from: f64, more: f64, total: usize, what: &str) -> Duration {
    let t = Instant::now();
    let want = (from + more).min(total as f64);
    while k.outputs() < want {
        if t.elapsed() > Duration::from_secs(180) {
            let s = &k.s;
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
            panic!(
                "timed out waiting for {what}; the stage's log ends:\n{}",
                log_tail(s, 80)
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
    let (addr, path) = (c.addr(), dir.path().to_path_buf());
    let start = move |n: usize| {
        Stage::start_at(
            &addr,
            &path.join("index"),
            &path.join(format!("stage-{n}.log")),
            &["--guarantee", guarantee],
        )
    };
    let s = start(0);
    s.wait_ready(Duration::from_secs(120));
    let mut k = Kept {
        s,
        start: Box::new(start),
        base: 0.0,
        last: 0.0,
        restarts: Vec::new(),
        exactly_once: guarantee == "exactly-once",
    };
    c.wait_in_sync(&all);
    // pages arrive for the whole test, however long its faults take: 15 records every
    // 150 ms, a story's three copies (two near-copies) one after the other, until the
    // faults are over
    let stop_feed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feed = {
        let (addr, stop) = (c.addr(), std::sync::Arc::clone(&stop_feed));
        std::thread::spawn(move || {
            let p = producer(&addr);
            let mut sent: Vec<Input> = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let chunk: Vec<Input> = (sent.len() as u64..sent.len() as u64 + 15)
                    .map(|i| {
                        let (story, copy) = (i / 3, i % 3);
                        let id = format!("s{story:05}-c{copy}");
                        let url = format!("https://site{copy}.test/story/{story}");
                        let html = story_page(story, copy, copy == 2);
                        (
                            (story % 3) as i32,
                            format!("story-{story}"),
                            Some(page_json(&id, &url, &html)),
                        )
                    })
                    .collect();
                send_all(&p, "pages", &chunk);
                sent.extend(chunk);
                std::thread::sleep(Duration::from_millis(150));
            }
            sent
        })
    };
    // the feed goes on through every wait below
    let open = usize::MAX;
    answering(&mut k, 0.0, 100.0, open, "the first outputs");

    // the node that coordinates the group and leads its offsets, SIGKILLed
    let victim = c
        .leader("__consumer_offsets", 0)
        .expect("a group coordinator");
    let led_before = c.leader("pages-unique", 0);
    let at = k.outputs();
    c.nodes[victim].stop();
    let back = answering(&mut k, at, 100.0, open, "outputs with a node killed");
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
    let at = k.outputs();
    let back = answering(
        &mut k,
        at,
        50.0,
        open,
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
        let at = k.outputs();
        c.nodes[i].terminate();
        let down = answering(&mut k, at, 30.0, open, "outputs with a node stopped");
        c.nodes[i].restart();
        c.wait_in_sync(&all);
        eprintln!(
            "{guarantee}: rolling restart, node {} stopped: {:.1} s to 30 more outputs; \
             restarted and in sync",
            i + 1,
            down.as_secs_f64()
        );
    }
    stop_feed.store(true, std::sync::atomic::Ordering::Relaxed);
    let records = feed.join().unwrap();
    let ids = ids(&records);
    let reader = c.any();
    // the stage is kept through this wait too: a fault's exit (code 3 after the last node's
    // restart, say) is restarted, as an orchestrator restarts it, and the restart answers
    let t = Instant::now();
    loop {
        k.outputs();
        // every record read (a repeat at-least-once would take the place of an answer)
        if answers(&reader.read(&OUTPUTS, usize::MAX, Duration::from_secs(30))).len() >= ids.len() {
            break;
        }
        if t.elapsed() > Duration::from_secs(600) {
            panic!(
                "timed out waiting for every input answered; the stage's log ends:\n{}",
                log_tail(&k.s, 80)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("{guarantee}: {} restarts", k.restarts.len());
    if guarantee == "exactly-once" {
        stop_and_check_exactly_once(reader, [&mut k.s], &OUTPUTS, ids.clone());
    } else {
        k.s.signal("TERM");
        assert_eq!(k.s.wait(Duration::from_secs(60)), Some(0));
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

/// With the group coordinator's node SIGKILLed, the client can wait for ever to add the input
/// offsets to a transaction (it keeps asking the node that left); the stage's watchdog ends
/// such a call after 30 s of running time, the process exits with code 3 and is restarted,
/// as an orchestrator restarts it.
#[test]
fn exactly_once_on_a_three_node_cluster_survives_a_node_killed_leaders_moved_and_a_rolling_restart()
{
    faults_while_pages_arrive("exactly-once");
}

#[test]
fn at_least_once_on_a_three_node_cluster_loses_nothing_through_the_same_faults() {
    faults_while_pages_arrive("at-least-once");
}
