//! `neardup-lab`: throughput of each stage of the signing path over a corpus, next to a
//! floor (one pass that only separates tags from text), on one core and on all cores, and
//! of the whole decision path.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::config::{self, DetectOptions, FileConfig, MethodOptions, SignatureOptions};
use crate::dedup::{Deduplicator, PageRef};
use crate::index::Index;
use crate::prepare::prepare;
use crate::record::decode_page;
use crate::signature::{Signed, Signer};
use crate::text::{self, StripMode, StripOptions, Tokens};
use neardup::cli::input;

/// Arguments of `neardup-lab`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// Another benchmark instead of the signing path
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// Page JSONL (plain or gzip) with an `html` field (required for the signing path)
    #[arg(long, env = "NEARDUP_CORPUS")]
    pub corpus: Option<PathBuf>,
    /// Read at most this many pages
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print rows as JSON lines
    #[arg(long)]
    pub json: bool,
    /// Also benchmark the Kafka stage against file mode through this broker (topics named
    /// neardup-bench-* are created)
    #[arg(long)]
    pub brokers: Option<String>,
    /// With --brokers: only the stage benchmark
    #[arg(long)]
    pub stage_only: bool,
    /// With --brokers: leave out records larger than this many bytes (the broker's limit)
    #[arg(long, default_value_t = 900_000)]
    pub max_broker_record: usize,
    /// With --brokers: a client property for the stage's consumer and producer, KEY=VALUE,
    /// after the benchmark's own (repeatable)
    #[arg(long = "kafka-property", value_name = "KEY=VALUE")]
    pub kafka_property: Vec<String>,
    /// With --brokers: the broker's process id, to report its CPU time per record (when it
    /// runs on this machine)
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// With --brokers: the stage's guarantee, at-least-once or exactly-once
    #[arg(long, default_value = "at-least-once")]
    pub guarantee: crate::config::Guarantee,
    /// With --brokers and exactly-once: how long a transaction collects outputs, e.g. 100ms
    #[arg(long, value_parser = crate::config::parse_duration)]
    pub transaction_interval: Option<std::time::Duration>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub method: MethodOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub detect: DetectOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub signature: SignatureOptions,
}

/// Benchmarks other than the signing path.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// The index at scale: N synthetic pages with the statistics of real ones, per method
    Index(crate::bench_index::BenchIndexArgs),
    /// Serving: result sets of ids through POST /v1/group, in the handler and over HTTP,
    /// cached and uncached
    Serve(crate::bench_serve::BenchServeArgs),
    /// Scale-out through a broker: one vs two signer processes, the decider fed from a
    /// pre-filled signed topic, record sizes, restoring an index from the changelog
    Scaleout(crate::bench_scaleout::BenchScaleoutArgs),
    /// A simulation of the sharded decider: S shards each probing the pages they own, an
    /// aggregator deciding; checks the decisions against one decider and projects the rate
    Shards(crate::bench_shards::BenchShardsArgs),
    /// alg.G's and alg.H's in-memory tables alone, fingerprints and document numbers only,
    /// to 100M pages and beyond
    Tables(crate::bench_tables::BenchTablesArgs),
}

#[derive(Deserialize)]
struct HtmlOnly {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    url: String,
    html: String,
}

/// One measured pass.
#[derive(Debug, Serialize)]
pub struct Row {
    /// What was measured.
    pub pass: String,
    /// Threads used.
    pub threads: usize,
    /// Seconds.
    pub seconds: f64,
    /// Pages per second.
    pub pages_per_second: f64,
    /// Megabytes (10^6) of HTML per second.
    pub mb_per_second: f64,
}

/// The lines of the corpus the criterion benches read: `NEARDUP_BENCH_CORPUS`, else the dev
/// corpus (`../shared/data/goldstyle-dev.jsonl.gz`); `None`, with a message, when it is
/// absent (the benches then skip).
pub fn bench_corpus() -> Option<impl Iterator<Item = std::io::Result<String>>> {
    use std::io::BufRead;
    let path = std::env::var_os("NEARDUP_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data/goldstyle-dev.jsonl.gz"));
    let Ok(file) = std::fs::File::open(&path) else {
        eprintln!("bench skipped: corpus {} not found", path.display());
        return None;
    };
    Some(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(file)).lines())
}

/// One pass over the bytes that only separates tags from text (no entities, no parsing):
/// the floor every real stripper is compared with. Returns the text bytes.
pub fn floor_pass(html: &str) -> usize {
    let b = html.as_bytes();
    let mut text = 0;
    let mut at = 0;
    while at < b.len() {
        match memchr::memchr(b'<', &b[at..]) {
            None => {
                text += b.len() - at;
                break;
            }
            Some(lt) => {
                text += lt;
                match memchr::memchr(b'>', &b[at + lt..]) {
                    None => break,
                    Some(gt) => at += lt + gt + 1,
                }
            }
        }
    }
    text
}

/// The options of `neardup-lab` the stage benchmark reads.
fn stage_args(args: &BenchArgs) -> Result<crate::bench_stage::StageBenchArgs<'_>> {
    Ok(crate::bench_stage::StageBenchArgs {
        corpus: args
            .corpus
            .as_deref()
            .context("the stage benchmark needs --corpus FILE")?,
        limit: args.limit,
        max_broker_record: args.max_broker_record,
        kafka_property: &args.kafka_property,
        broker_pid: args.broker_pid,
        guarantee: args.guarantee,
        transaction_interval: args.transaction_interval,
        method: args.method.clone(),
        detect: args.detect.clone(),
        signature: args.signature.clone(),
    })
}

/// Runs `neardup-lab`.
pub fn run(args: BenchArgs, file: &FileConfig) -> Result<Vec<Row>> {
    match args.command {
        Some(BenchCommand::Index(a)) => {
            crate::bench_index::run(a)?;
            return Ok(Vec::new());
        }
        Some(BenchCommand::Tables(a)) => {
            crate::bench_tables::run(a)?;
            return Ok(Vec::new());
        }
        Some(BenchCommand::Serve(a)) => {
            crate::bench_serve::run(a)?;
            return Ok(Vec::new());
        }
        Some(BenchCommand::Shards(a)) => {
            crate::bench_shards::run(a)?;
            return Ok(Vec::new());
        }
        Some(BenchCommand::Scaleout(a)) => {
            if let (true, Some(shards)) = (a.decider_only, a.shards) {
                let r = crate::bench_scaleout::run_sharded(&a, shards)?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                return Ok(Vec::new());
            }
            if a.decider_only {
                let r = crate::bench_scaleout::run_decider(&a)?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                return Ok(Vec::new());
            }
            if let Some(feed) = a.latency_only {
                let r = crate::bench_scaleout::run_latency(&a, feed)?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                return Ok(Vec::new());
            }
            let r = crate::bench_scaleout::run(a)?;
            println!("{}", serde_json::to_string_pretty(&r)?);
            return Ok(Vec::new());
        }
        None => {}
    }
    let Some(corpus) = args.corpus.clone() else {
        anyhow::bail!("neardup-lab needs --corpus FILE, or a benchmark: index, tables, serve, scaleout, shards");
    };
    let options = config::Options {
        signature: args.signature.clone(),
        detect: args.detect.clone(),
        method: args.method.clone(),
        ..Default::default()
    };
    let params = config::Config::resolve(options, file)?.params;
    if let (Some(b), true) = (&args.brokers, args.stage_only) {
        let r = crate::bench_stage::run(&stage_args(&args)?, b, &params, file)?;
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(Vec::new());
    }
    let signer = Signer::new(&params.signature)?;
    let mut reader = input::open(&corpus)?;
    let mut pages: Vec<HtmlOnly> = Vec::new();
    // the records as they are read (the stage decodes each before it signs it)
    let mut records: Vec<Vec<u8>> = Vec::new();
    let mut n = 0;
    let limit = args.limit.unwrap_or(usize::MAX);
    while pages.len() < limit {
        let batch = input::read_batch(&mut reader, &mut n, 1000, 1 << 30, usize::MAX)?;
        if batch.is_empty() {
            break;
        }
        for l in batch.into_iter().take(limit - pages.len()) {
            pages.push(
                serde_json::from_slice(&l.bytes).with_context(|| format!("line {}", l.number))?,
            );
            records.push(l.bytes);
        }
    }
    let bytes: usize = pages.iter().map(|p| p.html.len()).sum();
    let threads = rayon::current_num_threads();
    let mut rows = Vec::new();
    let mut measure = |pass: &str, threads: usize, f: &mut dyn FnMut() -> usize| {
        let t = Instant::now();
        let check = f();
        let s = t.elapsed().as_secs_f64();
        std::hint::black_box(check);
        let row = Row {
            pass: pass.to_string(),
            threads,
            seconds: s,
            pages_per_second: pages.len() as f64 / s,
            mb_per_second: bytes as f64 / 1e6 / s,
        };
        if args.json {
            println!("{}", serde_json::to_string(&row).unwrap_or_default());
        } else {
            println!(
                "{:<34} {:>7} {:>9.2} {:>11.0} {:>9.1}",
                row.pass, row.threads, row.seconds, row.pages_per_second, row.mb_per_second
            );
        }
        rows.push(row);
    };
    if !args.json {
        eprintln!(
            "neardup-lab: {} pages, {:.1} MB of HTML",
            pages.len(),
            bytes as f64 / 1e6
        );
        println!(
            "{:<34} {:>7} {:>9} {:>11} {:>9}",
            "pass", "threads", "seconds", "pages/s", "MB/s"
        );
    }
    let bytes_opts = StripOptions {
        mode: StripMode::Bytes,
        ..params.signature.strip_options()
    };
    let tokens_opts = StripOptions {
        mode: StripMode::Tokens,
        ..bytes_opts
    };
    let tree_opts = StripOptions {
        mode: StripMode::Tree,
        ..bytes_opts
    };
    measure("floor: split tags from text", 1, &mut || {
        pages.iter().map(|p| floor_pass(&p.html)).sum()
    });
    measure("strip (bytes, default)", 1, &mut || {
        pages
            .iter()
            .map(|p| text::strip(&p.html, &bytes_opts).text.len())
            .sum()
    });
    measure("strip (html5ever tokenizer)", 1, &mut || {
        pages
            .iter()
            .map(|p| text::strip(&p.html, &tokens_opts).text.len())
            .sum()
    });
    measure("strip (tree)", 1, &mut || {
        pages
            .iter()
            .map(|p| text::strip(&p.html, &tree_opts).text.len())
            .sum()
    });
    let stripped: Vec<_> = pages
        .iter()
        .map(|p| text::strip(&p.html, &bytes_opts))
        .collect();
    measure("tokens + spotsigs + fingerprint", 1, &mut || {
        let mut t = Tokens::default();
        stripped
            .iter()
            .map(|s| {
                signer.tokens(s, &mut t);
                let sigs = crate::signature::spotsigs::spotsigs(
                    &t,
                    crate::signature::SpotParams {
                        distance: params.signature.spot_distance,
                        chain: params.signature.chain_len,
                    },
                );
                crate::signature::fingerprint(
                    &sigs,
                    params.signature.fingerprint,
                    params.signature.fingerprint_bits,
                )[0] as usize
            })
            .fold(0usize, |a, b| a ^ b)
    });
    measure("sign: full path", 1, &mut || {
        pages
            .iter()
            .map(|p| signer.sign(&p.html).sigs.set_len())
            .sum()
    });
    // the stage's record limit by default
    let max_record = 64 << 20;
    measure("decode: JSON record -> page", 1, &mut || {
        records
            .iter()
            .map(|r| decode_page(r, max_record).map_or(0, |p| p.page.html.len()))
            .sum()
    });
    // the time of each page alone: the floor of a signing stage's own time per page,
    // whatever its queueing (a page is signed by one thread); a stage's pool thread also
    // decodes the record first
    let sign_each: Vec<f64> = pages
        .iter()
        .map(|p| {
            let t = Instant::now();
            std::hint::black_box(signer.sign(&p.html).sigs.set_len());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let prepare_each: Vec<f64> = records
        .iter()
        .map(|r| {
            let t = Instant::now();
            std::hint::black_box(prepare(r, &signer, max_record));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    for (pass, mut each) in [
        ("sign: one page", sign_each),
        ("decode + sign: one record", prepare_each),
    ] {
        each.sort_by(f64::total_cmp);
        let q = |f: f64| each[((each.len() as f64 * f) as usize).min(each.len().saturating_sub(1))];
        if each.is_empty() {
            continue;
        }
        let over_5ms = each.iter().filter(|&&t| t > 5.0).count();
        let line = serde_json::json!({
            "pass": format!("{pass}, ms"),
            "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999),
            "max": each[each.len() - 1],
            "pages_over_5ms": over_5ms,
        });
        if args.json {
            println!("{line}");
        } else {
            eprintln!(
                "{pass}: p50 {:.2} ms, p90 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2}; {} of {} over 5 ms",
                q(0.5), q(0.9), q(0.99), q(0.999), each[each.len() - 1],
                over_5ms, each.len()
            );
        }
    }
    measure("sign: full path", threads, &mut || {
        pages
            .par_iter()
            .map(|p| signer.sign(&p.html).sigs.set_len())
            .sum()
    });
    let dir = tempfile::tempdir()?;
    let mut dedup = Deduplicator::new(Index::open_dir(dir.path(), params.clone())?)?;
    let mut err = None;
    measure(
        &format!("sign ({threads} threads) + decide ({})", params.method),
        threads,
        &mut || {
            let mut dups = 0;
            for (ci, chunk) in pages.chunks(256).enumerate() {
                let signed: Vec<Signed> = chunk.par_iter().map(|p| signer.sign(&p.html)).collect();
                for (i, (p, s)) in chunk.iter().zip(&signed).enumerate() {
                    let id =
                        p.id.clone()
                            .unwrap_or_else(|| format!("bench-{}", ci * 256 + i));
                    match dedup.decide(
                        PageRef {
                            id: &id,
                            url: &p.url,
                            first_seen: 0,
                        },
                        s,
                    ) {
                        Ok(o) => {
                            dups +=
                                (o.decision.kind == crate::index::DecisionKind::Duplicate) as usize
                        }
                        Err(e) => {
                            err = Some(e);
                            return dups;
                        }
                    }
                }
                // as `neardup dedup` does before it writes a batch's lines
                if let Err(e) = dedup.index().flush_wal() {
                    err = Some(e);
                    return dups;
                }
            }
            dups
        },
    );
    if let Some(e) = err {
        return Err(e.into());
    }
    if let Some(b) = &args.brokers {
        let r = crate::bench_stage::run(&stage_args(&args)?, b, &params, file)?;
        println!("{}", serde_json::to_string_pretty(&r)?);
    }
    Ok(rows)
}
