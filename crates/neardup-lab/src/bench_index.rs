//! `neardup-lab index`: builds indexes of N synthetic pages (see [`crate::synthetic`]) and
//! reports, per N and method, one deciding thread: sustained decisions per second over the
//! last 10 % of N, decision latency percentiles, bytes per document on disk per column
//! family, memory, build time, and the share of true near-copies found.
//!
//! Every (N, method) runs in a child process of its own, so its memory figures are its own.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::bench_stage::cpu_seconds;
use crate::dedup::{Deduplicator, PageRef};
use crate::index::{DecisionKind, Index, IndexParams, Method};
use crate::signature::{SignatureConfig, Signer};
use crate::synthetic::{set_stats, Generator, SetStats, Synth};

/// Arguments of `neardup-lab index`.
#[derive(Args, Debug, Clone)]
pub struct BenchIndexArgs {
    /// Index sizes, comma-separated (e.g. 100000,1000000,10000000)
    #[arg(long, value_delimiter = ',', default_value = "100000")]
    pub docs: Vec<u64>,
    /// Methods, comma-separated: spotsigs, chain, alg-g, alg-h (64 bits), alg-h-128, alg-h-256
    #[arg(long, value_delimiter = ',', default_value = "spotsigs")]
    pub methods: Vec<String>,
    /// Directory for the indexes (a temporary directory by default; each run's index is
    /// removed after it)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep each run's index as DIR/index-METHOD-N (for `neardup-lab serve`, `serve`,
    /// `explain`) instead of removing it
    #[arg(long, requires = "dir")]
    pub keep: bool,
    /// Stop a run after this many seconds of building and report how far it got
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Similarity threshold τ
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,
    /// Share of pages that are edited copies of an earlier page
    #[arg(long, default_value_t = 0.2)]
    pub copy_rate: f64,
    /// Seed of the synthetic stream
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the statistics the synthetic model is fitted to, measured on this page corpus
    /// (JSONL, plain or gzip) with the real signer, next to the model's, and exit
    #[arg(long)]
    pub calibrate: Option<PathBuf>,
    /// Print rows as JSON lines
    #[arg(long)]
    pub json: bool,
    /// Run exactly one size and method in this process (used by the parent run)
    #[arg(long, hide = true)]
    pub single: bool,
}

/// One (N, method) run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IndexRow {
    /// Method (with the fingerprint width for alg-h).
    pub method: String,
    /// Documents asked for.
    pub target_docs: u64,
    /// Documents decided (less than asked when the time limit stopped the run).
    pub docs: u64,
    /// Decisions per second of the deciding thread and their latency.
    #[serde(flatten)]
    pub latency: Latency,
    /// CPU time of the whole process (RocksDB's background threads included) per decision
    /// over the last 10 %, less the generation of the synthetic pages, microseconds.
    pub cpu_us_per_decision: Option<f64>,
    /// Wall time to build the index (generation of the pages included), seconds.
    pub build_seconds: f64,
    /// Bytes on disk per document, by column family (after a flush).
    pub family_bytes_per_doc: Vec<(String, f64)>,
    /// Bytes of the whole index directory per document (logs included).
    pub dir_bytes_per_doc: f64,
    /// Bytes of the in-memory lists per document.
    pub lists_bytes_per_doc: f64,
    /// Bytes of the in-memory fingerprint tables (alg.G, alg.H) per document.
    #[serde(default)]
    pub tables_bytes_per_doc: f64,
    /// Resident memory at the end, MiB.
    pub rss_mib: f64,
    /// Peak resident memory, MiB.
    pub peak_rss_mib: f64,
    /// Seconds to write the lists snapshot at the end of the run (a clean shutdown).
    #[serde(default)]
    pub snapshot_seconds: f64,
    /// Peak resident memory once the lists snapshot is written, MiB (what a clean stop
    /// needs: above `peak_rss_mib` when writing the snapshot takes memory of its own).
    #[serde(default)]
    pub stop_peak_rss_mib: f64,
    /// Bytes of the lists snapshot per document.
    #[serde(default)]
    pub snapshot_bytes_per_doc: f64,
    /// Seconds to reopen the index after a clean shutdown (the lists read from the snapshot).
    pub reopen_seconds: f64,
    /// Seconds to reopen the index without a snapshot (after a crash: the lists rebuilt from
    /// every stored signature set).
    #[serde(default)]
    pub rebuild_seconds: f64,
    /// Copies whose Jaccard to their original reaches τ.
    pub copies_expected: u64,
    /// Of those, decided duplicate.
    pub copies_found: u64,
    /// Originals (not copies) decided duplicate.
    pub originals_duplicate: u64,
    /// Copies reaching τ whose fingerprint is within the Hamming radius of their original's
    /// (what a fingerprint index promises to find).
    #[serde(default)]
    pub copies_within_k: u64,
    /// Of those, decided duplicate.
    #[serde(default)]
    pub copies_within_k_found: u64,
    /// Decisions: unique, duplicate, skipped.
    pub unique: u64,
    /// Duplicates.
    pub duplicate: u64,
    /// Skipped.
    pub skipped: u64,
}

fn params_for(method: &str, tau: f64) -> Result<(IndexParams, u32)> {
    let (m, bits, rh) = match method {
        "spotsigs" => (Method::Spotsigs, 64, 3),
        "chain" => (Method::Chain, 64, 3),
        "alg-g" => (Method::AlgG, 64, 3),
        "alg-h" | "alg-h-64" => (Method::AlgH, 64, 3),
        // the radius grows with the width: the same resemblance, k·(1 − r)/2
        "alg-h-128" => (Method::AlgH, 128, 6),
        "alg-h-256" => (Method::AlgH, 256, 12),
        other => bail!(
            "unknown method {other:?} (known: spotsigs, chain, alg-g, alg-h, alg-h-128, alg-h-256)"
        ),
    };
    let params = IndexParams {
        method: m,
        threshold: tau,
        rh,
        signature: SignatureConfig {
            fingerprint_bits: bits,
            ..SignatureConfig::default()
        },
        ..IndexParams::default()
    };
    Ok((params, bits))
}

/// Decisions per second over the first and the last 10 % of a run, and the latency of the
/// last 10 %.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Decisions per second over the last 10 %.
    pub decisions_per_second: f64,
    /// The same over the first 10 %.
    pub first_decisions_per_second: f64,
    /// Latency over the last 10 %, microseconds: the median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Longest.
    pub max_us: f64,
}

impl Latency {
    /// From the number and total nanoseconds of the first 10 %'s decisions, and every
    /// latency of the last 10 % in nanoseconds (sorted here).
    pub fn of(first: (u64, u64), last: &mut [u32]) -> Latency {
        let rate = |count: u64, ns: u64| count as f64 / (ns as f64 / 1e9).max(1e-12);
        let ns: u64 = last.iter().map(|&x| u64::from(x)).sum();
        last.sort_unstable();
        Latency {
            decisions_per_second: rate(last.len() as u64, ns),
            first_decisions_per_second: rate(first.0, first.1),
            p50_us: percentile(last, 0.5),
            p99_us: percentile(last, 0.99),
            p999_us: percentile(last, 0.999),
            max_us: last.last().map_or(0.0, |&x| f64::from(x) / 1000.0),
        }
    }
}

/// A field of `/proc/self/status` in KiB (0 where it cannot be read).
pub(crate) fn status_kib(field: &str) -> f64 {
    process_status_kib("self", field)
}

/// A `/proc/PID/status` field in KiB of process `pid` ("self": this one); 0 where /proc
/// does not tell.
pub(crate) fn process_status_kib(pid: &str, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}

/// Bytes of the files under `path` (0 for a directory that cannot be read).
pub(crate) fn dir_bytes(path: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(path) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

/// CPU time of the calling thread, seconds (0 where the clock is not available).
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Builds one index of `n` synthetic pages with `method` in `dir`.
pub fn run_one(method: &str, n: u64, dir: &Path, args: &BenchIndexArgs) -> Result<IndexRow> {
    let (params, bits) = params_for(method, args.threshold)?;
    let tau = params.threshold;
    let mut dedup = Deduplicator::new(Index::open_dir(dir, params.clone())?)?;
    let mut gen = Generator::new(Synth {
        seed: args.seed,
        copy_rate: args.copy_rate,
        fingerprint_bits: bits,
        ..Synth::default()
    });
    // every decision's latency, and the process CPU time at every 1 % of the target, so a
    // run stopped by the time limit is measured over the last 10 % of what it reached
    let mut lat: Vec<u32> = Vec::with_capacity(n.min(50_000_000) as usize);
    let step = (n / 100).max(1);
    let mut cpu_marks: Vec<(u64, Option<f64>, f64)> = vec![(0, cpu_seconds(None), 0.0)];
    // CPU time spent generating pages (this thread's), left out of the CPU a decision
    let mut gen_cpu = 0.0;
    let mut row = IndexRow {
        method: method.to_string(),
        target_docs: n,
        ..IndexRow::default()
    };
    let started = Instant::now();
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    for i in 0..n {
        if let Some(limit) = args.max_seconds {
            if i % 1024 == 0 && started.elapsed().as_secs_f64() > limit {
                break;
            }
        }
        if i % step == 0 && i > 0 {
            cpu_marks.push((i, cpu_seconds(None), gen_cpu));
        }
        let g = thread_cpu_seconds();
        let page = gen.next_page();
        gen_cpu += thread_cpu_seconds() - g;
        let t = Instant::now();
        let out = dedup.decide(
            PageRef {
                id: &page.id,
                url: &page.url,
                first_seen: 1_795_000_000 + (i / 1000) as i64,
            },
            &page.signed,
        )?;
        // as the stage does: the log of a batch of decisions is written out at once
        if (i + 1) % crate::dedup::WAL_BATCH as u64 == 0 {
            dedup.index().flush_wal()?;
        }
        lat.push(u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX));
        row.docs += 1;
        match out.decision.kind {
            DecisionKind::Unique => row.unique += 1,
            DecisionKind::Duplicate => row.duplicate += 1,
            DecisionKind::Skipped => row.skipped += 1,
        }
        let dup = out.decision.kind == DecisionKind::Duplicate;
        // a copy on its original's host is one at the host's threshold (text rules 10)
        let at = if page.same_host && params.signature.host_threshold() {
            crate::dedup::host_threshold(tau)
        } else {
            tau
        };
        match page.copy_of {
            Some((_, j)) if j >= at => {
                row.copies_expected += 1;
                row.copies_found += u64::from(dup);
                let near = page.source_fingerprint.as_deref().is_some_and(|src| {
                    crate::signature::hamming(src, &page.signed.fingerprint) <= params.rh
                });
                if near {
                    row.copies_within_k += 1;
                    row.copies_within_k_found += u64::from(dup);
                }
            }
            Some(_) => {}
            None => row.originals_duplicate += u64::from(dup),
        }
        if progress && i % 100_000 == 0 && i > 0 {
            eprint!(
                "\r{method}: {i} of {n}, {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    if progress {
        eprintln!();
    }
    row.build_seconds = started.elapsed().as_secs_f64();
    let reached = lat.len();
    let tenth = (reached / 10).max(1).min(reached);
    let first_ns: u64 = lat[..tenth].iter().map(|&x| u64::from(x)).sum();
    let mut last = lat[reached - tenth..].to_vec();
    row.latency = Latency::of((tenth as u64, first_ns), &mut last);
    let from = (reached - tenth) as u64;
    let mark = cpu_marks.iter().rev().find(|(i, _, _)| *i <= from);
    if let (Some((i0, Some(c0), g0)), Some(c1)) = (mark, cpu_seconds(None)) {
        let cpu = (c1 - c0) - (gen_cpu - g0);
        row.cpu_us_per_decision = Some(cpu.max(0.0) * 1e6 / (reached as u64 - i0).max(1) as f64);
    }
    dedup.index().flush()?;
    let stats = dedup.index().stats()?;
    let docs = row.docs.max(1) as f64;
    row.family_bytes_per_doc = stats
        .families
        .iter()
        .map(|(name, _, bytes)| (name.clone(), *bytes as f64 / docs))
        .collect();
    row.lists_bytes_per_doc = stats.lists.map_or(0.0, |l| l.memory_bytes as f64 / docs);
    row.tables_bytes_per_doc = stats
        .fingerprint_tables
        .map_or(0.0, |t| t.memory_bytes as f64 / docs);
    row.rss_mib = status_kib("VmRSS:") / 1024.0;
    row.peak_rss_mib = status_kib("VmHWM:") / 1024.0;
    row.dir_bytes_per_doc = dir_bytes(dir) as f64 / docs;
    // a clean shutdown: the lists are saved, and reopening reads them
    let t = Instant::now();
    let snapshot = dedup.index_mut().save_lists()?;
    row.snapshot_seconds = t.elapsed().as_secs_f64();
    row.stop_peak_rss_mib = status_kib("VmHWM:") / 1024.0;
    if let Some(path) = &snapshot {
        row.snapshot_bytes_per_doc = std::fs::metadata(path).map_or(0, |m| m.len()) as f64 / docs;
    }
    drop(dedup);
    let t = Instant::now();
    let reopened = Index::open_dir(dir, params.clone())?;
    row.reopen_seconds = t.elapsed().as_secs_f64();
    if let Some(r) = reopened.lists_restore() {
        if let Some(why) = &r.snapshot_refused {
            bail!("the lists snapshot written at the end of the run was refused: {why}");
        }
    }
    drop(reopened);
    // after a crash there is no usable snapshot: the lists are rebuilt from `docs`
    if let Some(path) = &snapshot {
        std::fs::remove_file(path)?;
        let t = Instant::now();
        let rebuilt = Index::open_dir(dir, params)?;
        row.rebuild_seconds = t.elapsed().as_secs_f64();
        drop(rebuilt);
    } else {
        row.rebuild_seconds = row.reopen_seconds;
    }
    Ok(row)
}

/// Prints the statistics of the corpus and of the synthetic model side by side.
fn calibrate(path: &Path) -> Result<()> {
    let params = IndexParams::default();
    let signer = Signer::new(&params.signature)?;
    let mut reader = neardup::cli::input::open(path)?;
    let mut sets: Vec<Vec<u32>> = Vec::new();
    let mut line = String::new();
    #[derive(Deserialize)]
    struct HtmlOnly {
        html: String,
    }
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        let p: HtmlOnly = serde_json::from_str(&line).context("a page line without html")?;
        let s = signer.sign(&p.html);
        if s.sigs.set_len() >= params.min_signatures as usize {
            sets.push(s.sigs.hashes().collect());
        }
    }
    let corpus = set_stats(sets.iter().map(|v| v.as_slice()));
    let mut g = Generator::new(Synth {
        copy_rate: 0.0,
        ..Synth::default()
    });
    let model: Vec<Vec<u32>> = (0..sets.len())
        .map(|_| g.next_page().signed.sigs.hashes().collect())
        .collect();
    let synth = set_stats(model.iter().map(|v| v.as_slice()));
    let show = |name: &str, s: &SetStats| {
        println!(
            "{name:<8} pages {:>7}  mean signatures {:>6.1}  vocabulary {:>8}  occurrences {:>8}  seen-once share {:.3}  top page share {:.3}",
            s.pages, s.mean_signatures, s.vocabulary, s.occurrences, s.singleton_share, s.top_page_share
        );
        println!("         size quantiles {:?}", s.size_quantiles);
    };
    show("corpus", &corpus);
    show("model", &synth);
    Ok(())
}

/// Runs `neardup-lab index`.
pub fn run(args: BenchIndexArgs) -> Result<Vec<IndexRow>> {
    if let Some(path) = &args.calibrate {
        calibrate(path)?;
        return Ok(Vec::new());
    }
    if !(args.threshold > 0.0 && args.threshold <= 1.0) {
        bail!("threshold must be within (0, 1] (got {})", args.threshold);
    }
    if !(0.0..=1.0).contains(&args.copy_rate) {
        bail!("copy rate must be within [0, 1] (got {})", args.copy_rate);
    }
    for m in &args.methods {
        params_for(m, args.threshold)?;
    }
    let base = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
            tempfile::tempdir_in(d)?
        }
        None => tempfile::tempdir()?,
    };
    if args.single {
        let (Some(&n), Some(m)) = (args.docs.first(), args.methods.first()) else {
            bail!("--single needs one size and one method");
        };
        let at = match (&args.dir, args.keep) {
            (Some(d), true) => d.join(format!("index-{m}-{n}")),
            _ => base.path().join("index"),
        };
        let row = run_one(m, n, &at, &args)?;
        println!("{}", serde_json::to_string(&row)?);
        return Ok(vec![row]);
    }
    let exe = std::env::current_exe().context("the running binary")?;
    let mut rows = Vec::new();
    if !args.json {
        print_header();
    }
    for &n in &args.docs {
        for m in &args.methods {
            let mut cmd = Command::new(&exe);
            cmd.args(["index", "--single", "--json"])
                .arg("--docs")
                .arg(n.to_string())
                .arg("--methods")
                .arg(m)
                .arg("--threshold")
                .arg(args.threshold.to_string())
                .arg("--copy-rate")
                .arg(args.copy_rate.to_string())
                .arg("--seed")
                .arg(args.seed.to_string())
                .arg("--dir")
                .arg(match (&args.dir, args.keep) {
                    (Some(d), true) => d.as_path(),
                    _ => base.path(),
                });
            if args.keep {
                cmd.arg("--keep");
            }
            if let Some(s) = args.max_seconds {
                cmd.arg("--max-seconds").arg(s.to_string());
            }
            let out = cmd
                .stderr(std::process::Stdio::inherit())
                .output()
                .context("run the benchmark child")?;
            if !out.status.success() {
                bail!("benchmark of {m} at {n} documents failed ({})", out.status);
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().last().unwrap_or_default();
            let row: IndexRow = serde_json::from_str(line)
                .with_context(|| format!("benchmark child printed {line:?}"))?;
            if args.json {
                println!("{line}");
            } else {
                print_row(&row);
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

fn print_header() {
    println!(
        "| docs | method | decisions/s (last 10 %) | first 10 % | p50 µs | p99 µs | p99.9 µs | CPU µs/decision | disk B/doc (docs+ids / fingerprints / dir) | in memory B/doc (lists / fingerprint tables) | lists snapshot B/doc | RSS MiB (peak; at the stop) | build s | lists snapshot: write s / reopen s; rebuild s | copies found | copies within k found |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
}

fn print_row(r: &IndexRow) {
    let fam = |name: &str| {
        r.family_bytes_per_doc
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0.0, |x| x.1)
    };
    let docs_ids = fam("docs") + fam("ids");
    let fp = fam("fingerprints");
    let done = if r.docs < r.target_docs {
        format!("{} (stopped at {})", r.target_docs, r.docs)
    } else {
        r.docs.to_string()
    };
    println!(
        "| {done} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} | {:.0} | {:.0} ({:.0}; {:.0}) | {:.0} | {:.1} / {:.1}; {:.1} | {:.4} ({} of {}) | {} of {} |",
        r.method,
        r.latency.decisions_per_second,
        r.latency.first_decisions_per_second,
        r.latency.p50_us,
        r.latency.p99_us,
        r.latency.p999_us,
        r.cpu_us_per_decision.map_or("–".to_string(), |c| format!("{c:.0}")),
        docs_ids,
        fp,
        r.dir_bytes_per_doc,
        r.lists_bytes_per_doc,
        r.tables_bytes_per_doc,
        r.snapshot_bytes_per_doc,
        r.rss_mib,
        r.peak_rss_mib,
        r.stop_peak_rss_mib,
        r.build_seconds,
        r.snapshot_seconds,
        r.reopen_seconds,
        r.rebuild_seconds,
        r.copies_found as f64 / r.copies_expected.max(1) as f64,
        r.copies_found,
        r.copies_expected,
        r.copies_within_k_found,
        r.copies_within_k,
    );
}
