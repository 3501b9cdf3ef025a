//! `neardup-lab scaleout --brokers ADDR --corpus FILE`: the roles of docs/dev/architecture.md §6 as
//! separate processes through a broker, on the same pages:
//!
//! 1. throughput of one signer process, then of two, signing the loaded input topic into a
//!    signed topic (records per second from the first signed record to the last);
//! 2. bytes per signed record (with and without the text) and per changelog record, against
//!    the pages' own size;
//! 3. the decider fed from the pre-filled signed topic: decisions per second, its CPU per
//!    decision (and the broker's, with `--broker-pid`);
//! 4. restore: the decider's index directory removed, a new decider restores it from the
//!    changelog before it is ready: seconds, and seconds per million index entries.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde::Serialize;

use crate::bench_stage::{
    cpu_seconds, create_topics, create_topics_with, load_lines, produce, settings,
    stop_when_answered, Loader, Reads, UNREAD_KEPT,
};
use crate::config::Role;
use crate::dedup::{Deduplicator, PageRef};
use crate::index::{Index, IndexParams};
use crate::prepare::{prepare, Prepared};
use crate::record::changelog;
use crate::record::signed::{signature_id, Consumed, SignedRecord};
use crate::record::{Page, ValidPage};
use crate::shutdown::Shutdown;
use crate::stage::{self, Mode, StageSettings};
use crate::synthetic::{Generator, Synth};

/// Arguments of `neardup-lab scaleout`.
#[derive(Args, Debug)]
pub struct BenchScaleoutArgs {
    /// Bootstrap brokers (topics named neardup-scaleout-* are created)
    #[arg(long)]
    pub brokers: String,
    /// Page JSONL (plain or gzip); not needed with --decider-only
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Read at most this many pages
    #[arg(long)]
    pub limit: Option<usize>,
    /// Partitions of the input topic
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// Leave out records larger than this many bytes (the broker's limit)
    #[arg(long, default_value_t = 900_000)]
    pub max_broker_record: usize,
    /// The broker's process id, to report its CPU time per record (when it runs here)
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Signed records of the decider's run: synthetic pages with the signature statistics of
    /// real ones (`neardup-lab index`'s generator), 20 % edited copies
    #[arg(long, default_value_t = 200_000)]
    pub decider_records: usize,
    /// Only the latency run, fed at this many pages a second (the full benchmark feeds it
    /// at 80 % of one signer's measured rate)
    #[arg(long)]
    pub latency_only: Option<f64>,
    /// In the latency run, give this role (signer or decider) the last core to itself and
    /// put the other role, the feeder and the broker (`--broker-pid`) on the others: the
    /// role's time without other processes' work on its core. `all` (with `--latency-only`
    /// only): the single process instead of the two roles, on a core of its own
    #[arg(long)]
    pub pin: Option<Role>,
    /// In the latency run, a client property for both roles' consumers and producers,
    /// KEY=VALUE, after the benchmark's own (repeatable)
    #[arg(long)]
    pub kafka_property: Vec<String>,
    /// Only the decider: it decides --decider-indexed synthetic signed pages, then
    /// --decider-records more, which are measured (records/s and CPU a record at that index
    /// size); with --pin decider on the last core, the broker (--broker-pid) on the others
    #[arg(long)]
    pub decider_only: bool,
    /// With --decider-only: pages decided before the measured ones
    #[arg(long, default_value_t = 1_000_000)]
    pub decider_indexed: usize,
    /// With --decider-only: the decider's guarantee
    #[arg(long, default_value = "at-least-once")]
    pub guarantee: crate::config::Guarantee,
    /// With --decider-only: feed the measured records at this many a second once the index
    /// is filled (latency by hop at that rate), instead of pre-filling them (throughput)
    #[arg(long)]
    pub decider_feed: Option<f64>,
    /// With --decider-only: a decider split in this many shards instead of one decider:
    /// each shard (`--role shard`), then the aggregator (`--role aggregator`), runs alone
    /// over the whole signed topic (with --pin decider on the last core), measured over the
    /// last --decider-records
    #[arg(long)]
    pub shards: Option<usize>,
}

/// `--decider-only --shards S`: one role of a sharded decider over the signed topic.
#[derive(Debug, Serialize)]
pub struct RoleBench {
    /// `shard K` or `aggregator`.
    pub role: String,
    /// Records per second over the measured ones.
    pub records_per_second: f64,
    /// Its CPU per measured record, ms.
    pub cpu_ms_per_record: Option<f64>,
    /// The broker's CPU per measured record, ms.
    pub broker_cpu_ms_per_record: Option<f64>,
    /// Its peak resident memory over its whole life, MiB.
    pub peak_rss_mib: f64,
    /// Started again after a clean stop: seconds until it was ready (its state read back
    /// from the topics up to its last commit).
    pub restart_seconds: f64,
    /// Its directory after its clean stop, MiB (a shard's `shard-K-of-S/`, its checkpoint
    /// left out; the aggregator's `aggregator/`: its store of decisions and its state file).
    pub disk_mib: f64,
}

/// `--decider-only --shards S`: the roles of a sharded decider, one after the other.
#[derive(Debug, Serialize)]
pub struct ShardedBench {
    /// The roles' guarantee.
    pub guarantee: String,
    /// Shards.
    pub shards: usize,
    /// Signed records before the measured ones.
    pub indexed: usize,
    /// Records measured.
    pub records: usize,
    /// Whether the role measured had a core to itself.
    pub pinned: bool,
    /// Each role.
    pub roles: Vec<RoleBench>,
    /// With a core a process: the rate of the slowest role, from its CPU a record.
    pub projected_records_per_second: Option<f64>,
}

/// `--decider-only`: the decider at an index size.
#[derive(Debug, Serialize)]
pub struct DeciderBench {
    /// The decider's guarantee.
    pub guarantee: String,
    /// Pages in the index when the measurement started.
    pub indexed: usize,
    /// Records measured.
    pub records: usize,
    /// Whether the decider had a core to itself.
    pub pinned: bool,
    /// Records per second over the measured ones (consume, decode, decide, produce the
    /// output and its changelog records).
    pub records_per_second: f64,
    /// The decider's CPU per measured record, ms.
    pub cpu_ms_per_record: Option<f64>,
    /// The broker's CPU per measured record, ms.
    pub broker_cpu_ms_per_record: Option<f64>,
    /// Records per second while the index grew to `indexed`.
    pub fill_records_per_second: f64,
    /// The decider's peak resident memory (VmHWM), MiB, read before it stopped.
    pub peak_rss_mib: f64,
    /// Its peak over its whole life, the clean stop and the lists snapshot included, MiB.
    pub stop_peak_rss_mib: f64,
    /// With a feed: its rate, records a second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feed_records_per_second: Option<f64>,
    /// With a feed: the decider's time by hop over its run (the index filled first: a hop's
    /// quantiles include the fill, whose records were pre-filled; `record` and `produce` are
    /// the decider's own).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub hops: std::collections::BTreeMap<String, serde_json::Value>,
}

/// The latency run alone (`--latency-only`).
#[derive(Debug, Serialize)]
pub struct LatencyBench {
    /// Pages fed per second.
    pub feed_records_per_second: f64,
    /// The role that had a core to itself, if any.
    pub pinned: Option<Role>,
    /// The signer's time by hop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer_hops: Option<Hops>,
    /// The decider's time by hop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decider_hops: Option<Hops>,
    /// The single process's time by hop (`--pin all`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub single_hops: Option<Hops>,
}

/// The cores thread `tid` may run on (0: the calling thread).
fn mask_of(tid: i32) -> std::io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data, and the call writes at most its size into it
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Sets the cores thread `tid` may run on (0: the calling thread); threads it starts later
/// inherit them. A thread that ended meanwhile is not an error.
fn set_mask(tid: i32, set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: the call reads the set, of the size given
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) };
    match r {
        0 => Ok(()),
        _ => match std::io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            e => Err(e),
        },
    }
}

/// A mask of the given cores.
fn mask(cores: &[usize]) -> libc::cpu_set_t {
    // SAFETY: plain data; CPU_SET checks the core against the set's size
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        set
    }
}

/// Starts the process `cmd` spawns on `core` alone (a benchmark's role, pinned so that its
/// CPU a record is its own).
fn pin_to(cmd: &mut Command, core: usize) {
    let set = mask(&[core]);
    // SAFETY: between fork and exec only the affinity call, which is async-signal-safe
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The cores in a mask.
fn cores_of(set: &libc::cpu_set_t) -> Vec<usize> {
    // SAFETY: CPU_ISSET reads inside the set for cores below CPU_SETSIZE
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
        .collect()
}

/// Threads pinned for the latency run, given back their cores when dropped.
#[derive(Default)]
struct Pinned {
    saved: Vec<(i32, libc::cpu_set_t)>,
}

impl Pinned {
    /// Pins thread `tid` to `cores`, remembering its mask.
    fn pin(&mut self, tid: i32, cores: &[usize]) -> Result<()> {
        let before = mask_of(tid)?;
        set_mask(tid, &mask(cores))
            .with_context(|| format!("cannot pin thread {tid} to cores {cores:?}"))?;
        self.saved.push((tid, before));
        Ok(())
    }

    /// Pins every thread of process `pid`.
    fn pin_process(&mut self, pid: u32, cores: &[usize]) -> Result<()> {
        for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
            let Some(tid) = task?.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            match mask_of(tid) {
                Ok(_) => self.pin(tid, cores)?,
                // the thread ended meanwhile
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for (tid, set) in self.saved.drain(..).rev() {
            let _ = set_mask(tid, &set);
        }
    }
}

/// What the scale-out benchmark measured.
#[derive(Debug, Serialize)]
pub struct ScaleoutBench {
    /// Records in the corpus.
    pub records: usize,
    /// Mean bytes of an input page record.
    pub page_bytes_mean: f64,
    /// Mean bytes of a signed record with the text.
    pub signed_bytes_mean: f64,
    /// Mean bytes of a signed record without the text (`--no-text`).
    pub signed_bytes_no_text_mean: f64,
    /// Mean bytes of a changelog record's value.
    pub changelog_bytes_mean: f64,
    /// One signer process: records per second.
    pub signers_1_records_per_second: f64,
    /// Its CPU per record, ms.
    pub signer_cpu_ms_per_record: Option<f64>,
    /// The broker's CPU per record while one signer ran, ms.
    pub broker_cpu_ms_per_signed_record: Option<f64>,
    /// Two signer processes: records per second.
    pub signers_2_records_per_second: f64,
    /// The decider, fed from the pre-filled signed topic: decisions per second.
    pub decider_decisions_per_second: f64,
    /// Its CPU per decision (consume, decode, decide, produce output and changelog), ms.
    pub decider_cpu_ms_per_decision: Option<f64>,
    /// The broker's CPU per decision while the decider ran, ms.
    pub broker_cpu_ms_per_decision: Option<f64>,
    /// Index entries restored from the changelog.
    pub restore_entries: u64,
    /// Seconds the restore took (reading the changelog and storing the documents).
    pub restore_seconds: f64,
    /// The same per million entries.
    pub restore_seconds_per_million: f64,
    /// The latency run's feed: 80 % of one signer's rate, pages a second.
    pub latency_feed_records_per_second: f64,
    /// The signer's time per hop in that run (end_to_end: input timestamp → signed record
    /// acknowledged).
    pub signer_hops: std::collections::BTreeMap<String, stage::HopTimes>,
    /// The decider's (broker: the signed record's wait; end_to_end: the page's input
    /// timestamp → output acknowledged, the whole path).
    pub decider_hops: std::collections::BTreeMap<String, stage::HopTimes>,
}

struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Stops the process with SIGTERM (a clean stop: it drains, flushes its index and
    /// writes its lists snapshot) and returns its peak resident memory over its whole life,
    /// the stop included, in MiB (the kernel's account of the child, read when it is reaped).
    fn stop(mut self) -> Result<f64> {
        let pid = self.child.id();
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let mut status = 0;
            // SAFETY: an all-zero rusage is valid, and wait4 writes only into the two
            // locals; it reaps only this child.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            let got =
                unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
            if got == pid as libc::pid_t {
                // reaped here, so the handle must not signal that process id again when
                // dropped (it may be another process's by then); it holds no pipes
                std::mem::forget(self);
                // ru_maxrss is in KiB on Linux
                return Ok(usage.ru_maxrss as f64 / 1024.0);
            }
            if got < 0 {
                bail!(
                    "cannot wait for {}: {}",
                    self.log.display(),
                    std::io::Error::last_os_error()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        bail!("{} did not stop in time", self.log.display())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn spawn(args: &[String], log: &Path) -> Result<Proc> {
    let exe = crate::neardup_binary()?;
    let f = std::fs::File::create(log)?;
    let child = Command::new(exe)
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(f)
        .spawn()
        .context("start a neardup process")?;
    Ok(Proc {
        child,
        log: log.to_path_buf(),
    })
}

/// Records in `topics` (the sum of their end offsets).
fn ends(c: &BaseConsumer, topics: &[String]) -> Result<i64> {
    let mut n = 0;
    for t in topics {
        let md = c.fetch_metadata(Some(t), Duration::from_secs(10))?;
        for p in md.topics()[0].partitions() {
            n += c.fetch_watermarks(t, p.id(), Duration::from_secs(10))?.1;
        }
    }
    Ok(n)
}

/// The decisions (unique, duplicate, skipped) a decider listening on `port` has had
/// acknowledged: its `neardup_records_out_total`, dead letters left out. Counted by the
/// process, so neither a dead letter nor, under exactly-once, a transaction's commit marker
/// (which takes an offset of each partition it wrote) counts as a decision.
fn decisions(port: u16) -> Result<i64> {
    // not listening yet: nothing decided (a decider that exits is seen by the waiting loop,
    // which also has a deadline)
    let Some(body) =
        scrape(port).with_context(|| format!("the decider's metrics on port {port}"))?
    else {
        return Ok(0);
    };
    Ok(body
        .lines()
        .filter(|l| l.starts_with("neardup_records_out_total{"))
        .filter(|l| {
            ["unique", "duplicate", "skipped"]
                .iter()
                .any(|d| l.contains(&format!("decision=\"{d}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as i64)
        .and_then(|n| {
            let dead = body
                .lines()
                .filter(|l| l.starts_with("neardup_dead_letters_total"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>();
            if dead > 0.0 {
                bail!("the decider wrote {dead} dead letters: every record of the benchmark is a page to decide");
            }
            Ok(n)
        })
}

/// The decider's writes of its index's log so far (one per batch of decisions).
fn log_writes(port: u16) -> Result<f64> {
    let body = scrape(port)
        .with_context(|| format!("the decider's metrics on port {port}"))?
        .with_context(|| format!("nothing listens on the decider's metrics port {port}"))?;
    body.lines()
        .find(|l| l.starts_with("neardup_index_log_writes_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .context("the decider's metrics have no neardup_index_log_writes_total")
}

/// The text of a local process's `/metrics` on `port`, or `None` when nothing listens there
/// yet.
fn scrape(port: u16) -> Result<Option<String>> {
    let mut s = match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok(Some(body))
}

/// Waits until `count` is `target` more than `base`; returns (records per second from the
/// last look that saw none of them to the last record, seconds).
fn rate_until(
    count: &mut dyn FnMut() -> Result<i64>,
    base: i64,
    target: i64,
    procs: &mut [&mut Proc],
) -> Result<(f64, f64)> {
    // from the last look that saw none of them: the first records count too, and a short
    // run that ends between two looks still has a rate
    let mut none_yet = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        // a process that exited has nothing more to count
        for p in procs.iter_mut() {
            if let Some(st) = p.child.try_wait()? {
                bail!(
                    "a neardup process exited ({st}); log:\n{}",
                    std::fs::read_to_string(&p.log).unwrap_or_default()
                );
            }
        }
        let n = count()? - base;
        if n <= 0 {
            none_yet = Instant::now();
        }
        if n >= target {
            let secs = none_yet.elapsed().as_secs_f64().max(1e-3);
            return Ok((n as f64 / secs, secs));
        }
        if Instant::now() > deadline {
            bail!("{n} of {target} records after an hour");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ready(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    // consuming: ready, with no Kafka state to report ("ready to serve; kafka: …")
    buf.starts_with("HTTP/1.1 200") && !buf.contains("kafka:")
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The fields of the log line with `message` (JSON logs).
fn log_line(log: &Path, message: &str) -> Option<serde_json::Value> {
    let f = std::fs::File::open(log).ok()?;
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find(|v| v["message"] == message)
}

/// Mean sizes of signed and changelog records, computed with the stage's own encoders.
fn record_sizes(lines: &[Vec<u8>], params: &IndexParams) -> Result<(f64, f64, f64)> {
    let mut dedup = Deduplicator::new(Index::memory(params.clone())?)?;
    dedup.index_mut().set_journal(true);
    let signer = dedup.signer();
    let sig_id = signature_id(&params.signature);
    let params_id = crate::record::params_id(params);
    let (mut with, mut without, mut logged, mut n, mut m) = (0usize, 0usize, 0usize, 0, 0);
    for (i, l) in lines.iter().enumerate() {
        let Prepared::Page(b) = prepare(l, &signer, 64 << 20).0 else {
            continue;
        };
        let (page, signed) = *b;
        let source = Consumed {
            topic: "pages".into(),
            partition: 0,
            offset: i as i64,
            timestamp_ms: None,
        };
        let r = SignedRecord::new(&page, &signed, &sig_id, true, source.clone());
        with += serde_json::to_vec(&r)?.len();
        let r = SignedRecord::new(&page, &signed, &sig_id, false, source);
        without += serde_json::to_vec(&r)?.len();
        n += 1;
        dedup.decide(
            PageRef {
                id: &page.doc_id,
                url: &page.page.url,
                first_seen: page.fetched_at.unwrap_or(0),
            },
            &signed,
        )?;
        for mu in dedup.index_mut().take_journal() {
            logged += changelog::encode(&mu, &params_id).1.map_or(0, |v| v.len());
            m += 1;
        }
    }
    let mean = |a: usize, b: usize| a as f64 / b.max(1) as f64;
    Ok((mean(with, n), mean(without, n), mean(logged, m)))
}

/// `n` signed records of synthetic pages, as JSON, in stream order.
fn synthetic_signed(n: usize, params: &IndexParams) -> Result<Vec<Vec<u8>>> {
    SyntheticSigned::new(params).take(n)
}

/// Signed records of synthetic pages, as JSON, in stream order, made a chunk at a time.
struct SyntheticSigned {
    g: Generator,
    sig_id: String,
    next: usize,
}

impl SyntheticSigned {
    fn new(params: &IndexParams) -> SyntheticSigned {
        SyntheticSigned {
            g: Generator::new(Synth::default()),
            sig_id: signature_id(&params.signature),
            next: 0,
        }
    }

    /// The next `n` records.
    fn take(&mut self, n: usize) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let i = self.next;
            self.next += 1;
            let p = self.g.next_page();
            let page = ValidPage {
                page: Page {
                    id: Some(p.id.clone()),
                    url: p.url.clone(),
                    html: String::new(),
                    fetched_at: None,
                    headers: None,
                },
                doc_id: p.id,
                fetched_at: None,
            };
            let source = Consumed {
                topic: "pages".into(),
                partition: 0,
                offset: i as i64,
                timestamp_ms: Some(1_795_000_000_000 + i as i64),
            };
            let r = SignedRecord::new(&page, &p.signed, &self.sig_id, false, source);
            out.push(serde_json::to_vec(&r)?);
        }
        Ok(out)
    }
}

/// Records made and loaded at once, this many at a time.
const LOAD_CHUNK: usize = 100_000;

/// `--latency-only`: the latency run alone.
pub fn run_latency(a: &BenchScaleoutArgs, feed: f64) -> Result<LatencyBench> {
    let corpus = a
        .corpus
        .as_ref()
        .context("--corpus FILE is needed (but with --decider-only)")?;
    let lines = load_lines(corpus, a.limit, a.max_broker_record)?;
    let valid = lines
        .iter()
        .filter(|l| crate::record::decode_page(l, usize::MAX).is_ok())
        .count();
    eprintln!(
        "neardup-lab scaleout: latency run, {} records ({valid} valid), fed at {feed:.0} pages/s{}",
        lines.len(),
        match a.pin {
            Some(Role::All) => ", the single process on a core of its own".to_string(),
            Some(r) => format!(", the {} on a core of its own", r.as_str()),
            None => String::new(),
        }
    );
    let dir = tempfile::tempdir()?;
    let run = format!("neardup-scaleout-{}-lat", std::process::id());
    if a.pin == Some(Role::All) {
        let (hops, pinned) =
            latency_run_single(a, &lines, &IndexParams::default(), dir.path(), &run, feed)?;
        return Ok(LatencyBench {
            feed_records_per_second: feed,
            pinned: pinned.then_some(Role::All),
            signer_hops: None,
            decider_hops: None,
            single_hops: Some(hops),
        });
    }
    let (signer_hops, decider_hops) = latency_run(
        a,
        &lines,
        valid as u64,
        &IndexParams::default(),
        dir.path(),
        &run,
        feed,
    )?;
    Ok(LatencyBench {
        feed_records_per_second: feed,
        pinned: a.pin,
        signer_hops: Some(signer_hops),
        decider_hops: Some(decider_hops),
        single_hops: None,
    })
}

type Hops = std::collections::BTreeMap<String, stage::HopTimes>;

/// A feed that failed never brings the stages to their record count: they are stopped
/// through their shutdown handle (they drain and return), so the feeder's error is
/// reported instead of a wait without end.
fn stop_if_unfed(fed: &Result<()>, shutdown: &Shutdown) {
    if let Err(e) = fed {
        eprintln!("  the feed failed ({e:#}): stopping the stages");
        shutdown.stop();
    }
}

/// `--pin` names one of the full run's two roles (`all`, the single process, is a latency
/// run of its own: `--latency-only`).
/// `--decider-only`: the decider over a pre-filled signed topic of synthetic pages (real
/// pages' signature statistics, 20 % copies, no text): it decides `decider_indexed` of them,
/// then `decider_records` more are measured. With `--pin decider` it runs on the last core
/// and the broker on the others.
pub fn run_decider(a: &BenchScaleoutArgs) -> Result<DeciderBench> {
    let b = a.brokers.as_str();
    let params = IndexParams::default();
    let run = format!("neardup-decider-{}", std::process::id());
    let t = |s: &str| format!("{run}-{s}");
    let (fill, measured) = (a.decider_indexed, a.decider_records);
    let total = fill + measured;
    eprintln!(
        "neardup-lab scaleout --decider-only: {fill} pages, then {measured} measured, {}",
        a.guarantee.as_str()
    );
    let port = free_port()?;
    // the outputs and the changelog are not read back: kept to a size the disk holds
    create_topics(b, &[t("signed")], 1)?;
    create_topics_with(b, &[t("changelog")], 1, UNREAD_KEPT)?;
    create_topics_with(b, &[t("unique"), t("duplicate"), t("dead")], 3, UNREAD_KEPT)?;
    // made and loaded a chunk at a time (the records of 10M pages are 18 GB); with a feed,
    // the measured records are sent at its rate once the index is filled
    let mut synth = SyntheticSigned::new(&params);
    let loaded = if a.decider_feed.is_some() {
        fill
    } else {
        total
    };
    let tp = Instant::now();
    let mut load = Loader::new(b, &t("signed"), 1, false, 0)?;
    let mut done = 0;
    while done < loaded {
        let n = LOAD_CHUNK.min(loaded - done);
        for r in synth.take(n)? {
            load.send(&r)?;
        }
        done += n;
    }
    load.finish()?;
    eprintln!(
        "  {loaded} synthetic signed records loaded ({:.0} records/s)",
        loaded as f64 / tp.elapsed().as_secs_f64()
    );
    let fed = match a.decider_feed {
        Some(_) => synth.take(measured)?,
        None => Vec::new(),
    };
    let dir = tempfile::tempdir()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = a.pin == Some(Role::Decider) && cores >= 2;
    if a.pin.is_some() && !pin {
        bail!(
            "--decider-only pins the decider only (--pin decider), on a machine of 2 cores or more"
        );
    }
    let mut pinned = Pinned::default();
    if let (true, Some(pid)) = (pin, a.broker_pid) {
        pinned.pin_process(pid, &(0..cores - 1).collect::<Vec<_>>())?;
    }
    let args: Vec<String> = [
        "run",
        "--role",
        "decider",
        "--brokers",
        b,
        "--group-id",
        &t("decider"),
        "--signed-topic",
        &t("signed"),
        "--changelog-topic",
        &t("changelog"),
        "--unique-topic",
        &t("unique"),
        "--duplicate-topic",
        &t("duplicate"),
        "--dead-letter-topic",
        &t("dead"),
        "--index",
        &dir.path().join("index").display().to_string(),
        "--instance-id",
        "decider-0",
        "--guarantee",
        a.guarantee.as_str(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--log-format",
        "json",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(
        a.kafka_property
            .iter()
            .flat_map(|p| ["--kafka-property".to_string(), p.clone()]),
    )
    .collect();
    let exe = crate::neardup_binary()?;
    let log = dir.path().join("decider.log");
    let mut cmd = Command::new(exe);
    cmd.args(&args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
    if pin {
        pin_to(&mut cmd, cores - 1);
    }
    let mut d = Proc {
        child: cmd.spawn().context("start the decider")?,
        log,
    };
    let mut count = || decisions(port);
    let (fill_rate, fill_secs) = rate_until(&mut count, 0, fill as i64, &mut [&mut d])?;
    eprintln!("  {fill} decided ({fill_rate:.0} records/s, {fill_secs:.0} s)");
    let indexed = decisions(port)?;
    let (mut base, left) = (indexed, total as i64 - indexed);
    if a.decider_feed.is_some() {
        // a decider of its own for the fed records, on the filled index (its summary's
        // hops cover them only), fed once it has the signed topic
        d.stop()?;
        // a new process counts from nothing
        base = 0;
        let log = dir.path().join("decider-fed.log");
        cmd.stderr(std::fs::File::create(&log)?);
        d = Proc {
            child: cmd.spawn().context("start the decider")?,
            log: log.clone(),
        };
        let waited = Instant::now();
        while log_line(&log, "partitions assigned").is_none() {
            if let Some(st) = d.child.try_wait()? {
                bail!(
                    "the decider exited ({st}); log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if waited.elapsed() > Duration::from_secs(600) {
                bail!("the decider did not join in 10 minutes");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let (cpu0, broker0) = (
        cpu_seconds(Some(d.child.id())),
        a.broker_pid.and_then(|p| cpu_seconds(Some(p))),
    );
    // a fed decider may not have written yet
    let writes0 = if a.decider_feed.is_some() {
        0.0
    } else {
        log_writes(port)?
    };
    let feeder = a.decider_feed.map(|r| {
        let (b, topic) = (b.to_string(), t("signed"));
        std::thread::spawn(move || produce(&b, &topic, &fed, 1, Some(r)))
    });
    let (rate, secs) = rate_until(&mut count, base, left, &mut [&mut d])?;
    let batch = left as f64 / (log_writes(port)? - writes0).max(1.0);
    if let Some(f) = feeder {
        f.join()
            .map_err(|_| anyhow::anyhow!("the feeder panicked"))??;
    }
    let per = |now: Option<f64>, then: Option<f64>| {
        now.zip(then)
            .map(|(x, y)| 1000.0 * (x - y) / left.max(1) as f64)
    };
    let cpu = per(cpu_seconds(Some(d.child.id())), cpu0);
    let broker = per(a.broker_pid.and_then(|p| cpu_seconds(Some(p))), broker0);
    let peak_rss_mib =
        crate::bench_index::process_status_kib(&d.child.id().to_string(), "VmHWM:") / 1024.0;
    eprintln!(
        "  the decider at {indexed} indexed: {rate:.0} records/s over {left} ({secs:.1} s){}{}; \
         {batch:.1} decisions a log write; peak RSS {peak_rss_mib:.0} MiB",
        cpu.map_or(String::new(), |c| format!(", {c:.3} ms CPU a record")),
        broker.map_or(String::new(), |c| format!(", the broker {c:.3} ms"))
    );
    let log = d.log.clone();
    let stop_peak_rss_mib = d.stop()?;
    eprintln!("  peak RSS with the clean stop (snapshot written): {stop_peak_rss_mib:.0} MiB");
    drop(pinned);
    let hops = match a.decider_feed {
        None => Default::default(),
        Some(r) => {
            let line = log_line(&log, "stage stopped").context("the decider logged no summary")?;
            let hops: std::collections::BTreeMap<String, serde_json::Value> =
                serde_json::from_str(line["hops"].as_str().unwrap_or("{}"))?;
            let show = |name: &str| {
                hops.get(name).map_or(String::new(), |h| {
                    format!(
                        " {name} {:.1}/{:.1}",
                        h["p50_ms"].as_f64().unwrap_or(0.0),
                        h["p99_ms"].as_f64().unwrap_or(0.0)
                    )
                })
            };
            eprintln!(
                "  fed at {r:.0} records/s, p50/p99 ms:{}{}{}{}",
                show("broker"),
                show("decide"),
                show("produce"),
                show("record")
            );
            hops
        }
    };
    Ok(DeciderBench {
        guarantee: a.guarantee.as_str().into(),
        indexed: indexed as usize,
        records: left as usize,
        pinned: pin,
        records_per_second: rate,
        cpu_ms_per_record: cpu,
        broker_cpu_ms_per_record: broker,
        fill_records_per_second: fill_rate,
        peak_rss_mib,
        stop_peak_rss_mib,
        feed_records_per_second: a.decider_feed,
        hops,
    })
}

/// `--decider-only --shards S`: the roles of a decider split in S shards over a pre-filled
/// signed topic of synthetic pages (as `--decider-only`). Each shard, then the aggregator,
/// runs alone over the whole topic (the aggregator once every shard's votes are in), on
/// the last core with `--pin decider`; each is measured over the last `decider_records`
/// records, when a shard holds (indexed + records) / S pages.
pub fn run_sharded(a: &BenchScaleoutArgs, shards: usize) -> Result<ShardedBench> {
    if shards == 0 {
        bail!("--shards must be at least 1");
    }
    let b = a.brokers.as_str();
    let params = IndexParams::default();
    let run = format!("neardup-sharded-{}", std::process::id());
    let t = |s: &str| format!("{run}-{s}");
    let (fill, measured) = (a.decider_indexed, a.decider_records);
    let total = fill + measured;
    eprintln!(
        "neardup-lab scaleout --decider-only --shards {shards}: {fill} pages, then {measured} \
         measured, {}",
        a.guarantee.as_str()
    );
    create_topics(b, &[t("signed")], 1)?;
    create_topics(b, &[t("votes")], shards as i32)?;
    create_topics(b, &[t("unique"), t("duplicate"), t("dead")], 3)?;
    let mut synth = SyntheticSigned::new(&params);
    let tp = Instant::now();
    let mut load = Loader::new(b, &t("signed"), 1, false, 0)?;
    let mut done = 0;
    while done < total {
        let n = LOAD_CHUNK.min(total - done);
        for r in synth.take(n)? {
            load.send(&r)?;
        }
        done += n;
    }
    load.finish()?;
    eprintln!(
        "  {total} synthetic signed records loaded ({:.0} records/s)",
        total as f64 / tp.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = a.pin == Some(Role::Decider) && cores >= 2;
    if a.pin.is_some() && !pin {
        bail!("--shards pins the role measured (--pin decider), on a machine of 2 cores or more");
    }
    let mut pinned = Pinned::default();
    if let (true, Some(pid)) = (pin, a.broker_pid) {
        pinned.pin_process(pid, &(0..cores - 1).collect::<Vec<_>>())?;
    }
    let exe = crate::neardup_binary()?;
    let shards_s = shards.to_string();
    let mut roles = Vec::new();
    for k in 0..=shards {
        let port = free_port()?;
        let (name, role_args): (String, Vec<String>) = if k < shards {
            (
                format!("shard {k}"),
                vec![
                    "--role".into(),
                    "shard".into(),
                    "--shard".into(),
                    k.to_string(),
                    "--group-id".into(),
                    t(&format!("shard-{k}")),
                ],
            )
        } else {
            (
                "aggregator".into(),
                vec![
                    "--role".into(),
                    "aggregator".into(),
                    "--group-id".into(),
                    t("aggregator"),
                ],
            )
        };
        let args: Vec<String> = [
            "run",
            "--brokers",
            b,
            "--shards",
            &shards_s,
            "--signed-topic",
            &t("signed"),
            "--votes-topic",
            &t("votes"),
            "--unique-topic",
            &t("unique"),
            "--duplicate-topic",
            &t("duplicate"),
            "--dead-letter-topic",
            &t("dead"),
            "--index",
            &dir.path().join("unused").display().to_string(),
            "--guarantee",
            a.guarantee.as_str(),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--log-format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(role_args)
        .chain(
            a.kafka_property
                .iter()
                .flat_map(|p| ["--kafka-property".to_string(), p.clone()]),
        )
        .collect();
        let log = dir.path().join(format!("role-{k}.log"));
        let mut cmd = Command::new(&exe);
        cmd.args(&args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        if pin {
            pin_to(&mut cmd, cores - 1);
        }
        let mut d = Proc {
            child: cmd.spawn().with_context(|| format!("start {name}"))?,
            log,
        };
        let is_shard = k < shards;
        let mut count = || {
            if is_shard {
                records_in(port)
            } else {
                decisions(port)
            }
        };
        let (fill_rate, fill_secs) = rate_until(&mut count, 0, fill as i64, &mut [&mut d])?;
        let base = count()?;
        let (cpu0, broker0) = (
            cpu_seconds(Some(d.child.id())),
            a.broker_pid.and_then(|p| cpu_seconds(Some(p))),
        );
        let left = total as i64 - base;
        let (rate, secs) = rate_until(&mut count, base, left, &mut [&mut d])?;
        let per = |now: Option<f64>, then: Option<f64>| {
            now.zip(then)
                .map(|(x, y)| 1000.0 * (x - y) / left.max(1) as f64)
        };
        let cpu = per(cpu_seconds(Some(d.child.id())), cpu0);
        let broker = per(a.broker_pid.and_then(|p| cpu_seconds(Some(p))), broker0);
        let peak_rss_mib = d.stop()?;
        let role_dir = dir.path().join("unused").join(match is_shard {
            true => format!("shard-{k}-of-{shards}"),
            false => "aggregator".into(),
        });
        let disk_mib = crate::bench_index::dir_bytes(&role_dir) as f64 / (1 << 20) as f64;
        // started again: its state read back from the topics up to its last commit
        let log = dir.path().join(format!("role-{k}-again.log"));
        cmd.stderr(std::fs::File::create(&log)?);
        let t0 = Instant::now();
        let mut again = Proc {
            child: cmd.spawn().with_context(|| format!("start {name} again"))?,
            log,
        };
        while !ready(port) {
            if let Some(st) = again.child.try_wait()? {
                bail!(
                    "{name} exited when started again ({st}); log:\n{}",
                    std::fs::read_to_string(&again.log).unwrap_or_default()
                );
            }
            if t0.elapsed() > Duration::from_secs(3600) {
                bail!("{name} was not ready an hour after it was started again");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let restart_seconds = t0.elapsed().as_secs_f64();
        again.stop()?;
        eprintln!(
            "  {name}: {fill} read ({fill_rate:.0} records/s, {fill_secs:.0} s), then {rate:.0} \
             records/s over {left} ({secs:.1} s){}{}; peak RSS {peak_rss_mib:.0} MiB; directory \
             {disk_mib:.0} MiB; started again, ready in {restart_seconds:.1} s",
            cpu.map_or(String::new(), |c| format!(", {c:.3} ms CPU a record")),
            broker.map_or(String::new(), |c| format!(", the broker {c:.3} ms"))
        );
        roles.push(RoleBench {
            role: name,
            records_per_second: rate,
            cpu_ms_per_record: cpu,
            broker_cpu_ms_per_record: broker,
            peak_rss_mib,
            restart_seconds,
            disk_mib,
        });
    }
    drop(pinned);
    let slowest = roles
        .iter()
        .map(|r| r.cpu_ms_per_record)
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.into_iter().fold(0.0, f64::max));
    Ok(ShardedBench {
        guarantee: a.guarantee.as_str().into(),
        shards,
        indexed: fill,
        records: measured,
        pinned: pin,
        roles,
        projected_records_per_second: slowest.map(|ms| 1000.0 / ms.max(1e-9)),
    })
}

/// The signed records a shard read, from its metrics (0 before it listens).
fn records_in(port: u16) -> Result<i64> {
    let Some(body) = scrape(port).with_context(|| format!("the shard's metrics on port {port}"))?
    else {
        return Ok(0);
    };
    Ok(body
        .lines()
        .filter(|l| l.starts_with("neardup_records_in_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as i64)
}

fn check_pin(a: &BenchScaleoutArgs) -> Result<()> {
    if a.pin == Some(Role::All) {
        anyhow::bail!(
            "--pin all runs the single process alone: give it with --latency-only (the full \
             run's latency run has a signer and a decider; pin one of them)"
        );
    }
    Ok(())
}

/// The single process (`--role all`, a thread of this process with its own runtime and
/// clients) fed with `lines` at `feed` pages a second; it has the last core to itself (one
/// signing thread, as the stage chooses on one core), the feeder and the broker
/// (`--broker-pid`) the others; its time by hop, and whether it was pinned (not on one
/// core).
fn latency_run_single(
    a: &BenchScaleoutArgs,
    lines: &[Vec<u8>],
    params: &IndexParams,
    dir: &Path,
    lr: &str,
    feed: f64,
) -> Result<(Hops, bool)> {
    let b = a.brokers.as_str();
    let lt = |s: &str| format!("{lr}-{s}");
    create_topics(b, &[lt("in")], a.partitions)?;
    create_topics(b, &[lt("unique"), lt("duplicate"), lt("dead")], 3)?;
    let mut s = settings(
        Mode::Run,
        Role::All,
        b,
        lr,
        &dir.join("lat-all"),
        params,
        &a.kafka_property,
        crate::config::Guarantee::AtLeastOnce,
        None,
    )?;
    let reads = vec![Reads::of(&s, lines.len())];
    let allowed = cores_of(&mask_of(0)?);
    let mut guard = Pinned::default();
    let own = match allowed.split_last() {
        Some((own, rest)) if !rest.is_empty() => {
            if let Some(pid) = a.broker_pid {
                guard.pin_process(pid, rest)?;
            }
            guard.pin(0, rest)?;
            s.jobs = 1;
            Some(mask(&[*own]))
        }
        _ => {
            eprintln!("  one core: nothing pinned");
            None
        }
    };
    let pinned = own.is_some();
    let shutdown = Shutdown::new();
    let watch = stop_when_answered(b, reads, &shutdown);
    let stop = shutdown.clone();
    let h = std::thread::spawn(move || {
        if let Some(set) = own {
            // the thread's own mask (the stage's threads inherit it): given back when it ends
            if let Err(e) = set_mask(0, &set) {
                eprintln!("  cannot pin the stage thread ({e}): it runs on the other cores");
            }
        }
        // a stage that ends (an error) ends the wait for its answers too
        let r = stage::run(s, stop.clone());
        stop.stop();
        r
    });
    // let it join its group before feeding
    std::thread::sleep(Duration::from_secs(6));
    let fed = produce(b, &lt("in"), lines, a.partitions, Some(feed));
    stop_if_unfed(&fed, &shutdown);
    let sum = h
        .join()
        .map_err(|_| anyhow::anyhow!("the stage thread panicked"))?;
    let _ = watch.join();
    drop(guard);
    fed?;
    let sum = sum?;
    show_hops("single process", feed, &sum.hops);
    Ok((sum.hops, pinned))
}

/// A run's time by hop, one line: `who at N pages/s, p50/p99 ms: hop p50/p99, …`.
fn show_hops(who: &str, feed: f64, hops: &Hops) {
    let parts: Vec<String> = hops
        .iter()
        .map(|(k, v)| format!("{k} {:.1}/{:.1}", v.p50_ms, v.p99_ms))
        .collect();
    eprintln!(
        "  {who} at {feed:.0} pages/s, p50/p99 ms: {}",
        parts.join(", ")
    );
}

/// A signer and a decider (threads of this process, each with its own runtime and
/// clients) fed with `lines` at `feed` pages a second; their time by hop.
fn latency_run(
    a: &BenchScaleoutArgs,
    lines: &[Vec<u8>],
    valid: u64,
    params: &IndexParams,
    dir: &Path,
    lr: &str,
    feed: f64,
) -> Result<(Hops, Hops)> {
    let b = a.brokers.as_str();
    let n = lines.len();
    let lt = |s: &str| format!("{lr}-{s}");
    create_topics(b, &[lt("in")], a.partitions)?;
    create_topics(b, &[lt("signed"), lt("changelog")], 1)?;
    create_topics(b, &[lt("unique"), lt("duplicate"), lt("dead")], 3)?;
    let role = |r: Role, sub: &str| -> Result<StageSettings> {
        settings(
            Mode::Run,
            r,
            b,
            lr,
            &dir.join(sub),
            params,
            &a.kafka_property,
            crate::config::Guarantee::AtLeastOnce,
            None,
        )
    };
    let ss = role(Role::Signer, "lat-signer")?;
    let sd = role(Role::Decider, "lat-index")?;
    // the signers answer every fed page, the decider every valid one
    let reads = vec![Reads::of(&ss, n), Reads::of(&sd, valid as usize)];
    // the pinned role gets the last core this process may use, the rest everything else
    let allowed = cores_of(&mask_of(0)?);
    let pinned = a.pin.filter(|_| allowed.len() >= 2);
    if a.pin.is_some() && pinned.is_none() {
        eprintln!("  one core: nothing pinned");
    }
    let (own, rest) = allowed
        .split_last()
        .map_or((vec![], vec![]), |(o, r)| (vec![*o], r.to_vec()));
    // a pinned role signs on as many threads as it has cores, as the stage itself chooses
    // when its process is limited to them (more threads than cores only share the core)
    let (mut ss, mut sd) = (ss, sd);
    if let Some(p) = pinned {
        for (s, r) in [(&mut ss, Role::Signer), (&mut sd, Role::Decider)] {
            s.jobs = if r == p { own.len() } else { rest.len() }.max(1);
        }
    }
    let mut guard = Pinned::default();
    if pinned.is_some() {
        if let Some(pid) = a.broker_pid {
            guard.pin_process(pid, &rest)?;
        }
        guard.pin(0, &rest)?;
    }
    let own_cores = |role: Role| (pinned == Some(role)).then(|| mask(&own));
    let (own_signer, own_decider) = (own_cores(Role::Signer), own_cores(Role::Decider));
    let shutdown = Shutdown::new();
    let watch = stop_when_answered(b, reads, &shutdown);
    let run_pinned = |set: Option<libc::cpu_set_t>, s: StageSettings| {
        let stop = shutdown.clone();
        move || {
            if let Some(set) = set {
                // the thread's own mask: given back when it ends
                if let Err(e) = set_mask(0, &set) {
                    eprintln!("  cannot pin a stage thread ({e}): it runs on the other cores");
                }
            }
            // a stage that ends (an error) ends the others and the wait for their answers
            let r = stage::run(s, stop.clone());
            stop.stop();
            r
        }
    };
    let hs = std::thread::spawn(run_pinned(own_signer, ss));
    let hd = std::thread::spawn(run_pinned(own_decider, sd));
    // let both join their groups before feeding
    std::thread::sleep(Duration::from_secs(6));
    let fed = produce(b, &lt("in"), lines, a.partitions, Some(feed));
    stop_if_unfed(&fed, &shutdown);
    let join = |h: std::thread::JoinHandle<Result<stage::StageSummary>>| {
        h.join()
            .map_err(|_| anyhow::anyhow!("a stage thread panicked"))?
    };
    let (sig_sum, dec_sum) = (join(hs), join(hd));
    let _ = watch.join();
    drop(guard);
    fed?;
    let (sig_sum, dec_sum) = (sig_sum?, dec_sum?);
    show_hops("signer", feed, &sig_sum.hops);
    show_hops("decider", feed, &dec_sum.hops);
    Ok((sig_sum.hops, dec_sum.hops))
}

/// Runs `neardup-lab scaleout`.
pub fn run(a: BenchScaleoutArgs) -> Result<ScaleoutBench> {
    // checked before the first runs, not when the latency run comes to it
    check_pin(&a)?;
    let corpus = a
        .corpus
        .as_ref()
        .context("--corpus FILE is needed (but with --decider-only)")?;
    let lines = load_lines(corpus, a.limit, a.max_broker_record)?;
    let n = lines.len();
    let b = a.brokers.as_str();
    let run = format!("neardup-scaleout-{}", std::process::id());
    let t = |s: &str| format!("{run}-{s}");
    eprintln!("neardup-lab scaleout: {n} records, broker {b}");
    let params = IndexParams::default();
    let (signed_mean, no_text_mean, changelog_mean) = record_sizes(&lines, &params)?;
    let page_mean = lines.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1) as f64;
    eprintln!(
        "  bytes per record: page {page_mean:.0}, signed {signed_mean:.0} ({no_text_mean:.0} \
         without text), changelog {changelog_mean:.0}"
    );

    create_topics(b, &[t("in")], a.partitions)?;
    create_topics(b, &[t("signed1"), t("signed2")], 1)?;
    create_topics(b, &[t("unique"), t("duplicate"), t("dead")], 3)?;
    produce(b, &t("in"), &lines, a.partitions, None)?;
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", b)
        .set("group.id", t("watch"))
        .create()?;
    let dir = tempfile::tempdir()?;
    let stage = |role: &str, group: &str, extra: &[String]| -> Vec<String> {
        let mut v: Vec<String> = [
            "run",
            "--role",
            role,
            "--brokers",
            b,
            "--group-id",
            group,
            "--input-topics",
            &t("in"),
            "--unique-topic",
            &t("unique"),
            "--duplicate-topic",
            &t("duplicate"),
            "--dead-letter-topic",
            &t("dead"),
            "--log-format",
            "json",
            "--kafka-property",
            "message.max.bytes=100000000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().cloned());
        v
    };

    // 1. signers: one process, then two
    let mut signers = Vec::new();
    for (k, signed) in [(1, t("signed1")), (2, t("signed2"))] {
        let base = ends(&c, &[t("dead")])?;
        let mut procs = Vec::new();
        for i in 0..k {
            let args = stage(
                "signer",
                &t(&format!("signers{k}")),
                &[
                    "--signed-topic".into(),
                    signed.clone(),
                    "--listen".into(),
                    "off".into(),
                ],
            );
            procs.push(spawn(
                &args,
                &dir.path().join(format!("signer{k}-{i}.log")),
            )?);
        }
        let cpu0: Vec<Option<f64>> = procs
            .iter()
            .map(|p| cpu_seconds(Some(p.child.id())))
            .collect();
        let broker0 = a.broker_pid.and_then(|p| cpu_seconds(Some(p)));
        let mut refs: Vec<&mut Proc> = procs.iter_mut().collect();
        let topics = [signed.clone(), t("dead")];
        let (rate, secs) = rate_until(&mut || ends(&c, &topics), base, n as i64, &mut refs)?;
        let broker = a
            .broker_pid
            .and_then(|p| cpu_seconds(Some(p)))
            .zip(broker0)
            .map(|(x, y)| 1000.0 * (x - y) / n as f64);
        let cpu: Option<f64> = procs
            .iter()
            .zip(&cpu0)
            .map(|(p, c0)| Some(cpu_seconds(Some(p.child.id()))? - (*c0)?))
            .sum();
        eprintln!(
            "  {k} signer process(es): {rate:.0} records/s ({secs:.1} s){}{}",
            cpu.map_or(String::new(), |c| format!(
                ", {:.2} ms CPU a record",
                1000.0 * c / n as f64
            )),
            broker.map_or(String::new(), |c| format!(", the broker {c:.2} ms CPU"))
        );
        signers.push((rate, cpu.map(|c| 1000.0 * c / n as f64), broker));
        for p in procs {
            p.stop()?;
        }
    }

    let valid = ends(&c, &[t("signed1")])?;
    // 2. the decider over a pre-filled signed topic of synthetic pages
    let synth = synthetic_signed(a.decider_records, &params)?;
    create_topics(b, &[t("signed-synth"), t("changelog-synth")], 1)?;
    let tp = Instant::now();
    produce(b, &t("signed-synth"), &synth, 1, None)?;
    eprintln!(
        "  {} synthetic signed records loaded ({:.0} records/s)",
        synth.len(),
        synth.len() as f64 / tp.elapsed().as_secs_f64()
    );
    drop(synth);
    let index = dir.path().join("decider-index");
    let port = free_port()?;
    let dargs = stage(
        "decider",
        &t("decider"),
        &[
            "--signed-topic".into(),
            t("signed-synth"),
            "--index".into(),
            index.display().to_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            // the chart's static membership: a restarted decider is the same member
            "--instance-id".into(),
            t("decider-0"),
            "--changelog-topic".into(),
            t("changelog-synth"),
        ],
    );
    let decided = a.decider_records as i64;
    let mut d = spawn(&dargs, &dir.path().join("decider.log"))?;
    let (cpu0, broker0) = (
        cpu_seconds(Some(d.child.id())),
        a.broker_pid.and_then(|p| cpu_seconds(Some(p))),
    );
    let (drate, dsecs) = rate_until(&mut || decisions(port), 0, decided, &mut [&mut d])?;
    let per = |now: Option<f64>, then: Option<f64>| {
        now.zip(then)
            .map(|(x, y)| 1000.0 * (x - y) / decided as f64)
    };
    let dcpu = per(cpu_seconds(Some(d.child.id())), cpu0);
    let bcpu = per(a.broker_pid.and_then(|p| cpu_seconds(Some(p))), broker0);
    eprintln!(
        "  the decider: {drate:.0} decisions/s ({dsecs:.1} s){}{}",
        dcpu.map_or(String::new(), |c| format!(", {c:.2} ms CPU a decision")),
        bcpu.map_or(String::new(), |c| format!(", the broker {c:.2} ms CPU"))
    );
    d.stop()?;

    // 3. restore: the index lost, a new decider restores it before it is ready
    std::fs::remove_dir_all(&index)?;
    let log = dir.path().join("restore.log");
    let mut r = spawn(&dargs, &log)?;
    let started = Instant::now();
    while !ready(port) {
        if let Some(st) = r.child.try_wait()? {
            bail!(
                "the restoring decider exited ({st}); log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if started.elapsed() > Duration::from_secs(3600) {
            bail!("the restore took over an hour");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let fields = log_line(&log, "index restored from the changelog")
        .context("the decider logged no restore")?;
    let entries = fields["records"].as_u64().unwrap_or(0);
    let secs = fields["seconds"].as_f64().unwrap_or(0.0);
    eprintln!(
        "  restore: {entries} changelog records in {secs:.2} s ({:.0} s a million), ready after \
         {:.1} s",
        secs * 1e6 / entries.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
    r.stop()?;

    // 4. latency: signer and decider fed at 80 % of the one signer's rate (both roles in
    //    this process, each with its own runtime and clients, as two processes would be)
    let feed = 0.8 * signers[0].0;
    let (sig_hops, dec_hops) = latency_run(
        &a,
        &lines,
        valid as u64,
        &params,
        dir.path(),
        &t("lat"),
        feed,
    )?;
    Ok(ScaleoutBench {
        records: n,
        page_bytes_mean: page_mean,
        signed_bytes_mean: signed_mean,
        signed_bytes_no_text_mean: no_text_mean,
        changelog_bytes_mean: changelog_mean,
        signers_1_records_per_second: signers[0].0,
        signer_cpu_ms_per_record: signers[0].1,
        broker_cpu_ms_per_signed_record: signers[0].2,
        signers_2_records_per_second: signers[1].0,
        decider_decisions_per_second: drate,
        decider_cpu_ms_per_decision: dcpu,
        broker_cpu_ms_per_decision: bcpu,
        restore_entries: entries,
        restore_seconds: secs,
        restore_seconds_per_million: secs * 1e6 / entries.max(1) as f64,
        latency_feed_records_per_second: feed,
        signer_hops: sig_hops,
        decider_hops: dec_hops,
    })
}
