//! `neardup-lab tables`: alg.G's and alg.H's in-memory tables alone, at sizes where whole
//! documents would not fit the machine (100M pages): the fingerprints and document numbers
//! only, no records, no RocksDB.
//!
//! The stream: 64-bit fingerprints, uniform at random for an original (1-bit minhash bits
//! of distinct pages are), and for a copy (`--copy-rate`) one of the last 100,000
//! originals' with 0 to radius + 2 bits flipped, uniformly. A decision is a probe, then an
//! insert when nothing is within the radius, as the deduplicator does. Reported per (N,
//! method), each in a child process of its own so its memory is its own: decisions per
//! second and latency over the last 10 %, the tables' bytes a page, resident memory, the
//! time to bring the tables up again from their fingerprints (the in-memory part of
//! reopening an index), and how many copies within the radius were found (all, or the
//! index is wrong).

use std::collections::VecDeque;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::bench_index::{status_kib, Latency};
use crate::index::alg_g::AlgG;
use crate::index::alg_h::AlgH;
use crate::index::fptables::FpTables;

/// Arguments of `neardup-lab tables`.
#[derive(Args, Debug, Clone)]
pub struct BenchTablesArgs {
    /// Sizes, comma-separated (e.g. 1000000,10000000,100000000)
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    pub docs: Vec<u64>,
    /// Methods, comma-separated: alg-g, alg-h
    #[arg(long, value_delimiter = ',', default_value = "alg-g,alg-h")]
    pub methods: Vec<String>,
    /// Hamming radius
    #[arg(long, default_value_t = 3)]
    pub rh: u32,
    /// Share of pages that are copies of a recent original
    #[arg(long, default_value_t = 0.2)]
    pub copy_rate: f64,
    /// Seed of the stream
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print rows as JSON lines
    #[arg(long)]
    pub json: bool,
    /// Run exactly one size and method in this process (used by the parent run)
    #[arg(long, hide = true)]
    pub single: bool,
}

/// One (N, method) run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TablesRow {
    /// Method.
    pub method: String,
    /// Tables.
    pub tables: usize,
    /// Pages decided.
    pub docs: u64,
    /// Fingerprints held at the end (the unique pages).
    pub held: u64,
    /// Decisions per second and their latency.
    #[serde(flatten)]
    pub latency: Latency,
    /// Bytes of the tables and their shared arrays per held fingerprint.
    pub bytes_per_page: f64,
    /// Resident memory at the end, MiB.
    pub rss_mib: f64,
    /// Peak resident memory, MiB.
    pub peak_rss_mib: f64,
    /// Seconds to build the tables again from their fingerprints.
    pub reopen_seconds: f64,
    /// Copies within the radius of their original.
    pub copies_within_k: u64,
    /// Of those, found (the original among the probe's answers).
    pub copies_within_k_found: u64,
}

fn tables_for(method: &str, rh: u32) -> Result<FpTables> {
    Ok(match method {
        "alg-g" => FpTables::alg_g(AlgG::new(AlgG::default_m(rh), rh)?),
        "alg-h" => FpTables::alg_h(&AlgH::new(64, AlgH::default_m(64, rh), rh)?),
        other => bail!("unknown method {other:?} (known: alg-g, alg-h)"),
    })
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Runs one size and method in this process.
pub fn run_one(method: &str, n: u64, args: &BenchTablesArgs) -> Result<TablesRow> {
    let mut tables = tables_for(method, args.rh)?;
    let mut rng = Rng(args.seed);
    let mut recent: VecDeque<(u64, u64)> = VecDeque::with_capacity(100_001);
    let tenth = (n / 10).max(1);
    let mut last: Vec<u32> = Vec::with_capacity(tenth as usize);
    let (mut first_ns, mut first_n) = (0u64, 0u64);
    let mut row = TablesRow {
        method: method.to_string(),
        tables: tables.tables(),
        docs: n,
        ..TablesRow::default()
    };
    let mut out = Vec::new();
    let threshold = (args.copy_rate * u64::MAX as f64) as u64;
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let started = Instant::now();
    for doc in 0..n {
        let copy = !recent.is_empty() && rng.next() < threshold;
        let (fp, source) = if copy {
            let (src_doc, src_fp) = recent[(rng.next() % recent.len() as u64) as usize];
            let flips = rng.next() % u64::from(args.rh + 3);
            let mut fp = src_fp;
            while u64::from((fp ^ src_fp).count_ones()) < flips {
                fp ^= (1 << (rng.next() % 64)) & !(fp ^ src_fp);
            }
            (fp, Some((src_doc, (fp ^ src_fp).count_ones())))
        } else {
            (rng.next(), None)
        };
        let t = Instant::now();
        tables.query(&[fp], &mut out);
        let unique = out.is_empty();
        if unique {
            tables.insert(&[fp], doc)?;
        }
        let ns = u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX);
        if doc < tenth {
            first_ns += u64::from(ns);
            first_n += 1;
        } else if doc >= n - tenth {
            last.push(ns);
        }
        match source {
            Some((src, d)) if d <= args.rh => {
                row.copies_within_k += 1;
                row.copies_within_k_found += u64::from(out.iter().any(|&(x, _)| x == src));
            }
            Some(_) => {}
            None => {
                recent.push_back((doc, fp));
                if recent.len() > 100_000 {
                    recent.pop_front();
                }
            }
        }
        if progress && doc % 1_000_000 == 0 && doc > 0 {
            eprint!(
                "\r{method}: {doc} of {n}, {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    if progress {
        eprintln!();
    }
    row.latency = Latency::of((first_n, first_ns), &mut last);
    drop(last);
    let stats = tables.stats();
    row.held = stats.fingerprints as u64;
    row.bytes_per_page = stats.memory_bytes as f64 / stats.fingerprints.max(1) as f64;
    row.rss_mib = status_kib("VmRSS:") / 1024.0;
    row.peak_rss_mib = status_kib("VmHWM:") / 1024.0;
    // reopening: the fingerprints as read from their family, then the tables built from them
    let (docs, fps) = tables.held();
    drop(tables);
    let t = Instant::now();
    let mut again = tables_for(method, args.rh)?;
    again.extend(&docs, &fps)?;
    row.reopen_seconds = t.elapsed().as_secs_f64();
    if again.len() as u64 != row.held {
        bail!("rebuilt {} fingerprints of {}", again.len(), row.held);
    }
    Ok(row)
}

/// Runs `neardup-lab tables`.
pub fn run(args: BenchTablesArgs) -> Result<Vec<TablesRow>> {
    if !(0.0..=1.0).contains(&args.copy_rate) {
        bail!("copy rate must be within [0, 1] (got {})", args.copy_rate);
    }
    for m in &args.methods {
        tables_for(m, args.rh)?;
    }
    if args.single {
        let (Some(&n), Some(m)) = (args.docs.first(), args.methods.first()) else {
            bail!("--single needs one size and one method");
        };
        let row = run_one(m, n, &args)?;
        println!("{}", serde_json::to_string(&row)?);
        return Ok(vec![row]);
    }
    let exe = std::env::current_exe().context("the running binary")?;
    if !args.json {
        println!("| docs | method | tables | held | decisions/s (last 10 %) | first 10 % | p50 µs | p99 µs | p99.9 µs | max µs | B/page in memory | RSS MiB (peak) | reopen s | copies within k found |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    }
    let mut rows = Vec::new();
    for &n in &args.docs {
        for m in &args.methods {
            let out = Command::new(&exe)
                .args(["tables", "--single", "--json", "--docs"])
                .arg(n.to_string())
                .arg("--methods")
                .arg(m)
                .arg("--rh")
                .arg(args.rh.to_string())
                .arg("--copy-rate")
                .arg(args.copy_rate.to_string())
                .arg("--seed")
                .arg(args.seed.to_string())
                .stderr(std::process::Stdio::inherit())
                .output()
                .context("running one size")?;
            if !out.status.success() {
                bail!("the run of {m} at {n} failed ({})", out.status);
            }
            let line = String::from_utf8_lossy(&out.stdout);
            let row: TablesRow = serde_json::from_str(line.trim())
                .with_context(|| format!("reading the row of {m} at {n}"))?;
            if args.json {
                println!("{}", serde_json::to_string(&row)?);
            } else {
                println!(
                    "| {n} | {} | {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.1} | {:.0} ({:.0}) | {:.1} | {} of {} |",
                    row.method,
                    row.tables,
                    row.held,
                    row.latency.decisions_per_second,
                    row.latency.first_decisions_per_second,
                    row.latency.p50_us,
                    row.latency.p99_us,
                    row.latency.p999_us,
                    row.latency.max_us,
                    row.bytes_per_page,
                    row.rss_mib,
                    row.peak_rss_mib,
                    row.reopen_seconds,
                    row.copies_within_k_found,
                    row.copies_within_k,
                );
            }
            rows.push(row);
        }
    }
    Ok(rows)
}
