//! Group membership at the default settings against a real broker: SIGKILLs during the first
//! group join, during rebalances and mid-batch, with two members for part of the run; SIGTERM
//! at every moment of the start-up. No session, heartbeat or fetch setting is shortened: the
//! stage runs as a user gets it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

const OUTPUTS: [&str; 3] = ["pages-unique", "pages-duplicate", "pages-dead-letter"];

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// What a feeder produces next (`stopping`: asked to end; `None`: done).
type Next = Box<dyn FnMut(bool) -> Option<Input> + Send>;

/// Produces records to `pages` at about `rate` a second from a thread, while the stage is
/// killed and restarted, so that a restarted member always finds work; [`Feeder::finish`]
/// ends it and returns what it produced, in order.
struct Feeder {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Input>>,
}

impl Feeder {
    fn start(b: &Broker, rate: u64, mut next: Next) -> Feeder {
        let stop = Arc::new(AtomicBool::new(false));
        let (stop2, addr) = (Arc::clone(&stop), b.addr());
        let handle = std::thread::spawn(move || {
            let p = producer(&addr);
            let mut all = Vec::new();
            let per_tick = (rate / 10).max(1);
            loop {
                let tick = Instant::now();
                let stopping = stop2.load(Ordering::SeqCst);
                let batch: Vec<Input> = (0..per_tick).map_while(|_| next(stopping)).collect();
                if batch.is_empty() {
                    return all;
                }
                send_all(&p, "pages", &batch);
                all.extend(batch);
                std::thread::sleep(Duration::from_millis(100).saturating_sub(tick.elapsed()));
            }
        });
        Feeder { stop, handle }
    }

    fn finish(self) -> Vec<Input> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap()
    }
}

fn record(story: u64, copy: u64, template: u64, edit: bool, id: String) -> Input {
    let url = format!("https://site{copy}.test/story/{story}");
    (
        (story % 3) as i32,
        format!("story-{story}"),
        Some(page_json(&id, &url, &story_page(story, template, edit))),
    )
}

/// Stories with three copies each (three templates, the last edited), the copies of a story
/// in its partition, each copy `lag` stories after the one before; when stopping, no new
/// story starts and the open ones get their copies.
fn stories_with_copies(lag: u64) -> Next {
    let (mut started, mut c1, mut c2, mut k) = (0u64, 0u64, 0u64, 0u64);
    Box::new(move |stopping| {
        for _ in 0..3 {
            k += 1;
            match k % 3 {
                0 if !stopping => {
                    started += 1;
                    let s = started - 1;
                    return Some(record(s, 0, 0, false, format!("s{s:05}-c0")));
                }
                1 if c1 < started && (stopping || c1 + lag <= started) => {
                    c1 += 1;
                    let s = c1 - 1;
                    return Some(record(s, 1, 1, false, format!("s{s:05}-c1")));
                }
                2 if c2 < c1 && (stopping || c2 + lag <= c1) => {
                    c2 += 1;
                    let s = c2 - 1;
                    return Some(record(s, 2, 2, true, format!("s{s:05}-c2")));
                }
                _ => {}
            }
        }
        None
    })
}

/// Pages that appear once (ids `u…`): unique whoever decides them.
fn singletons() -> Next {
    let mut n = 0u64;
    Box::new(move |stopping| {
        if stopping {
            return None;
        }
        n += 1;
        let s = 100_000 + n;
        Some(record(s, 9, s % 3, false, format!("u{s:06}")))
    })
}

/// One SIGKILL: when it landed and what the member was doing (printed).
#[derive(Debug)]
#[allow(dead_code)] // every field is printed with the kill
struct Kill {
    what: &'static str,
    member: char,
    after_ms: u128,
    assigned: f64,
    in_flight: f64,
}

/// The distinct inputs answered so far.
fn answered(b: &Broker) -> BTreeSet<String> {
    b.read(&OUTPUTS, usize::MAX, Duration::from_secs(120))
        .iter()
        .map(Out::source)
        .collect()
}

fn wait_answered(b: &Broker, ids: &BTreeSet<String>, timeout: Duration, what: &str) {
    let deadline = Instant::now() + timeout;
    loop {
        let got = answered(b);
        let missing = ids.iter().filter(|i| !got.contains(*i)).count();
        if missing == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {missing} of {} inputs still unanswered",
            ids.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The index directory opens after a kill (when the stage got far enough to create it). A
/// kill while the index was being created can leave the database's files with no index in
/// them yet (its format and parameters are written together, after the files exist): the
/// command says so, and the next start creates the index there (the test starts the stage
/// again on it).
fn index_opens(index: &Path, after: &str) {
    if index.join("CURRENT").exists() {
        let out = neardup()
            .args(["index", "stats", "--index"])
            .arg(index)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("no neardup index here (no stored parameters)"),
            "the index does not open after {after}: {err}"
        );
    }
}

/// 20 SIGKILLs at random points of a run on three partitions, at the default session
/// timeout, while a producer keeps feeding the topic: during the first group join,
/// mid-batch, while a second member joins or the first rejoins (rebalances) and while both
/// are members. Every input
/// is answered, repeats are byte-identical and the decisions equal one uninterrupted
/// file-mode run.
///
/// Two members each keep their own index, so they decide alike only pages whose earlier
/// copies they both saw: while the second member is in the group, the input is pages that
/// appear once (unique whoever decides them); the stories with copies come before and after.
#[test]
fn twenty_kills_at_default_settings_lose_nothing_and_decide_like_one_run() {
    let _g = serial();
    let b = broker_with_topics();
    let dir = tempfile::tempdir().unwrap();
    let (index_a, index_b) = (dir.path().join("index-a"), dir.path().join("index-b"));
    let rate: u64 = env_or("NEARDUP_GROUP_RATE", 150);
    let extra: usize = env_or("NEARDUP_GROUP_EXTRA_KILLS", 0);
    let seed: u64 = env_or("NEARDUP_GROUP_SEED", 0x2545_F491_4F6C_DD1D);
    let mut rng = Rng(seed);
    eprintln!("seed {seed:#x}, fed at {rate} records/s");
    let started = Instant::now();
    let mut kills: Vec<Kill> = Vec::new();
    let mut n_logs = 0;
    let mut log = |m: char| {
        n_logs += 1;
        dir.path().join(format!("{m}-{n_logs}.log"))
    };
    let start = |index: &Path, log: &Path| Stage::start(&b, index, log, &[]);
    let kill =
        |s: &mut Stage, what: &'static str, member: char, t0: Instant, kills: &mut Vec<Kill>| {
            let k = Kill {
                what,
                member,
                after_ms: t0.elapsed().as_millis(),
                assigned: s.metric("neardup_assigned_partitions", ""),
                in_flight: s.metric("neardup_in_flight_records", ""),
            };
            s.signal("KILL");
            assert_eq!(
                s.wait(Duration::from_secs(10)),
                None,
                "killed by the signal"
            );
            eprintln!("kill {}: {k:?}", kills.len() + 1);
            kills.push(k);
        };
    // a restarted member answers again (the fed records keep coming)
    let working = |s: &Stage, what: &str| {
        let out = s.metric("neardup_records_out_total", "");
        wait_until(Duration::from_secs(120), what, || {
            s.metric("neardup_records_out_total", "") > out
        });
    };

    // phase 1: stories with copies, one member
    let feed = Feeder::start(&b, rate, stories_with_copies(40));
    // three kills during the first group join: the first within 100 ms of the spawn, before
    // the index exists or the group is joined (the first join takes a few hundred
    // milliseconds, less on a fast machine), the others at random in the first 600 ms
    for i in 0..3 {
        let t0 = Instant::now();
        let mut a = start(&index_a, &log('a'));
        let within = if i == 0 { 100 } else { 600 };
        std::thread::sleep(Duration::from_millis(rng.below(within)));
        kill(&mut a, "first join", 'a', t0, &mut kills);
        index_opens(&index_a, "a kill during the first join");
    }
    // ten kills mid-batch (and the longer variant's extra ones): the backlog of the
    // downtime is being worked off
    for _ in 0..10 + extra {
        let t0 = Instant::now();
        let mut a = start(&index_a, &log('a'));
        working(&a, "outputs after a restart");
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        // then at a moment with records in flight (within 3 s): a machine that answers each
        // record in a millisecond or two has none most of the time
        let until = Instant::now() + Duration::from_secs(3);
        while a.metric("neardup_in_flight_records", "") <= 0.0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        kill(&mut a, "mid-batch", 'a', t0, &mut kills);
        index_opens(&index_a, "a mid-batch kill");
    }
    let mut a = start(&index_a, &log('a'));
    working(&a, "outputs after the last restart of phase 1");
    let phase1 = feed.finish();
    wait_answered(&b, &ids(&phase1), Duration::from_secs(300), "phase 1");

    // phase 2: pages that appear once; a second member joins, both are killed
    let feed = Feeder::start(&b, rate, singletons());
    let t0 = Instant::now();
    let mut m_b = start(&index_b, &log('b'));
    // the group rebalances while b joins: kill a in the middle of it
    std::thread::sleep(Duration::from_millis(200 + rng.below(1500)));
    kill(
        &mut a,
        "rebalance (second member joining)",
        'a',
        t0,
        &mut kills,
    );
    let t0 = Instant::now();
    a = start(&index_a, &log('a'));
    // and b while a rejoins
    std::thread::sleep(Duration::from_millis(rng.below(800)));
    kill(
        &mut m_b,
        "rebalance (first member rejoining)",
        'b',
        t0,
        &mut kills,
    );
    for _ in 0..3 {
        let t0 = Instant::now();
        m_b = start(&index_b, &log('b'));
        working(&m_b, "the second member's outputs");
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        kill(&mut m_b, "mid-batch (two members)", 'b', t0, &mut kills);
        index_opens(&index_b, "a kill of the second member");
    }
    m_b = start(&index_b, &log('b'));
    working(&m_b, "the second member back");
    for _ in 0..2 {
        let t0 = Instant::now();
        working(&a, "outputs of the first member beside the second");
        std::thread::sleep(Duration::from_millis(rng.below(300)));
        kill(&mut a, "mid-batch (two members)", 'a', t0, &mut kills);
        index_opens(&index_a, "a kill of the first member");
        a = start(&index_a, &log('a'));
    }
    working(&a, "the first member back");
    let phase2 = feed.finish();
    let mut all: Vec<Input> = phase1;
    all.extend(phase2);
    let all_ids = ids(&all);
    wait_answered(&b, &all_ids, Duration::from_secs(300), "the whole run");
    // both members stop; neither leaves the group for good while the other goes on: a
    // static member sends no leave request, so its partitions would wait for its session
    // to time out (45 s by default)
    for (s, m) in [(&mut m_b, 'b'), (&mut a, 'a')] {
        s.signal("TERM");
        assert_eq!(
            s.wait(Duration::from_secs(60)),
            Some(0),
            "SIGTERM of {m} exits 0"
        );
    }

    assert_eq!(kills.len(), 20 + extra, "{kills:?}");
    // the kills landed where they were meant to
    assert!(
        kills
            .iter()
            .any(|k| k.what == "first join" && k.assigned == 0.0),
        "no kill before the first assignment: {kills:?}"
    );
    let in_flight = kills.iter().filter(|k| k.in_flight > 0.0).count();
    assert!(
        in_flight >= 3,
        "fewer than three kills with records in flight: {kills:?}"
    );
    let outs = b.read_quiet(
        &OUTPUTS,
        usize::MAX,
        Duration::from_secs(300),
        Duration::from_secs(5),
    );
    let (first, repeats) = first_outputs(&outs, &all_ids);
    let got: BTreeMap<_, _> = first.values().map(|o| decision_of(&o.json())).collect();
    let expected = file_mode(&all, dir.path());
    assert_eq!(got.len(), expected.len());
    let differ: Vec<_> = expected
        .iter()
        .filter(|(id, d)| got.get(*id) != Some(d))
        .take(5)
        .collect();
    assert!(
        differ.is_empty(),
        "decisions differ from an uninterrupted run, e.g. {differ:?}"
    );
    let n1 = got.keys().filter(|id| id.ends_with("-c0")).count();
    let dups = got.values().filter(|d| d.0 == "duplicate").count();
    assert!(dups >= n1, "{dups} duplicates of {n1} stories");
    eprintln!(
        "{} inputs ({n1} stories with copies), {} kills ({} before the first assignment, \
         {in_flight} with records in flight), 0 lost, {repeats} repeated outputs (all \
         byte-identical), {dups} duplicates as in one run, {} s in all",
        all_ids.len(),
        kills.len(),
        kills.iter().filter(|k| k.assigned == 0.0).count(),
        started.elapsed().as_secs()
    );
}

/// Whether process `pid` has a handler for SIGTERM (the SigCgt mask of /proc/PID/status).
fn catches_sigterm(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
}

/// SIGTERM at 0 ms, at 50 ms, during the group join and mid-run: each time the process exits
/// 0 with the index whole; afterwards a run answers every input once (repeats
/// byte-identical).
#[test]
fn sigterm_at_any_moment_of_start_up_exits_zero() {
    let _g = serial();
    let b = broker_with_topics();
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let records = synthetic(300, 3);
    b.produce("pages", &records);
    let mut cases = Vec::new();
    for (n, case) in ["0 ms", "50 ms", "group join", "mid-run"]
        .iter()
        .enumerate()
    {
        let s = Stage::start(&b, &index, &dir.path().join(format!("{n}.log")), &[]);
        let t0 = Instant::now();
        match *case {
            "0 ms" => {
                // the first moment a process can act on a signal: its handler is installed
                // (before that, while the dynamic loader runs, no program can catch one).
                // The stage installs it before main, so its start-up has not begun.
                let deadline = Instant::now() + Duration::from_secs(10);
                while !catches_sigterm(s.child.id()) {
                    assert!(Instant::now() < deadline, "SIGTERM never caught");
                    std::hint::spin_loop();
                }
                // SAFETY: kill(2) on our own child's pid
                let r = unsafe { libc::kill(s.child.id() as libc::pid_t, libc::SIGTERM) };
                assert_eq!(r, 0);
            }
            "50 ms" => {
                std::thread::sleep(Duration::from_millis(50));
                s.signal("TERM");
            }
            "group join" => {
                // the index is open and the member waits for its partitions
                let deadline = Instant::now() + Duration::from_secs(60);
                while !s
                    .get("/readyz")
                    .is_some_and(|(_, body)| body.contains("no partitions assigned"))
                {
                    assert!(Instant::now() < deadline, "never saw the group join");
                    std::thread::sleep(Duration::from_millis(5));
                }
                s.signal("TERM");
            }
            _ => {
                wait_until(Duration::from_secs(60), "outputs", || {
                    s.metric("neardup_records_out_total", "") > 0.0
                });
                s.signal("TERM");
            }
        }
        let mut s = s;
        let code = s.wait(Duration::from_secs(60));
        let log = std::fs::read_to_string(&s.log).unwrap_or_default();
        assert_eq!(code, Some(0), "SIGTERM at {case} exits 0; log:\n{log}");
        if n == 0 {
            // how far the start-up got (a loaded machine may delay the signal by a few ms)
            eprintln!("SIGTERM at 0 ms: index made: {}", index.exists());
        }
        index_opens(&index, &format!("SIGTERM at {case}"));
        cases.push(format!(
            "{case}: exit 0 after {} ms",
            t0.elapsed().as_millis()
        ));
    }
    eprintln!("{cases:?}");
    let s = Stage::start(&b, &index, &dir.path().join("final.log"), &[]);
    let ids = ids(&records);
    wait_answered(&b, &ids, Duration::from_secs(120), "the final run");
    s.signal("TERM");
    let outs = b.read(&OUTPUTS, usize::MAX, Duration::from_secs(60));
    first_outputs(&outs, &ids);
}
