//! `neardup dedup`: page JSONL in, tagged JSONL out, with a local index. No broker.
//!
//! A reader thread reads batches of lines and decodes and signs them on a pool of worker
//! threads (both cores); the calling thread decides the pages one at a time in input
//! order and writes the records. Bad lines go to the dead-letter file with their line
//! number and reason, and the run goes on.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use rayon::prelude::*;
use serde::Serialize;

use super::input::{self, Line};
use crate::config::{
    Config, DedupOptions, DetectOptions, FileConfig, MethodOptions, Options, SignatureOptions,
};
use crate::dedup::{Deduplicator, PageRef};
use crate::index::{DecisionKind, Index};
use crate::prepare::Prepared;
use crate::record::{self, DeadLetter, Source};
use crate::signature::Signer;

/// Arguments of `neardup dedup`.
#[derive(Args, Debug)]
pub struct DedupArgs {
    /// Page JSONL (plain or gzip), - for stdin
    #[arg(long, env = "NEARDUP_INPUT")]
    pub input: PathBuf,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub io: DedupOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub method: MethodOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub detect: DetectOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub signature: SignatureOptions,
    /// Print the summary as JSON on stdout instead of a line on stderr
    #[arg(long)]
    pub summary_json: bool,
}

/// What a run did.
#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Input lines read.
    pub lines: u64,
    /// Valid pages decided.
    pub pages: u64,
    /// Unique pages.
    pub unique: u64,
    /// Duplicate pages.
    pub duplicate: u64,
    /// Skipped pages (too few signatures).
    pub skipped: u64,
    /// Pages whose id was decided before (stored decision repeated).
    pub repeated: u64,
    /// Bad lines sent to the dead-letter file.
    pub bad: u64,
    /// Blank lines ignored.
    pub blank: u64,
    /// Index entries removed by the retention window.
    pub expired: u64,
    /// Input bytes.
    pub bytes: u64,
    /// Wall time.
    pub seconds: f64,
    /// Pages per second.
    pub pages_per_second: f64,
    /// Input megabytes (10^6) per second.
    pub mb_per_second: f64,
}

/// Decodes and signs a batch on the current rayon pool, keeping the order.
pub fn prepare(lines: &[Line], signer: &Signer, max_record_bytes: usize) -> Vec<Prepared> {
    lines
        .par_iter()
        .map(|l| {
            if l.cut() {
                return Prepared::Bad(record::BadRecord {
                    reason: record::BadReason::TooLarge,
                    detail: format!(
                        "record has {} bytes, the limit is {max_record_bytes}",
                        l.len
                    ),
                });
            }
            crate::prepare::prepare(&l.bytes, signer, max_record_bytes).0
        })
        .collect()
}

fn create(path: &Path) -> Result<Box<dyn Write + Send>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdout()));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(f))
}

/// Runs `neardup dedup`.
pub fn run(args: DedupArgs, file: &FileConfig) -> Result<Summary> {
    let c = Config::resolve(
        Options {
            signature: args.signature.clone(),
            detect: args.detect.clone(),
            method: args.method.clone(),
            dedup: args.io.clone(),
            ..Default::default()
        },
        file,
    )?;
    let (params, retention, max_pages, io) = (c.params, c.retention, c.max_pages, c.dedup);
    let index_dir = io.index.clone();
    let index = Index::open_dir(&index_dir, params.clone())
        .with_context(|| format!("cannot open index {}", index_dir.display()))?;
    if let Some(why) = index
        .lists_restore()
        .and_then(|r| r.snapshot_refused.as_ref())
    {
        eprintln!("neardup dedup: lists snapshot not used ({why}); the lists were rebuilt");
    }
    let mut dedup = Deduplicator::new(index)?;
    let signer = dedup.signer();
    let (keep_text, max_record, jobs) = (io.keep_text, io.max_record_bytes, io.jobs);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .thread_name(|i| format!("neardup-sign-{i}"))
        .build()?;

    let unique_path = io.unique.clone();
    let mut unique_out = BufWriter::new(create(&unique_path)?);
    let mut dup_out = match &io.duplicates {
        Some(p) if *p != unique_path => Some(BufWriter::new(create(p)?)),
        _ => None,
    };
    let dead_path = io.dead_letter.clone();
    let mut dead_out: Option<BufWriter<Box<dyn Write + Send>>> = None;
    let input_name = args.input.display().to_string();
    // the bar counts decompressed bytes, so a gzip input gets a spinner instead of a total
    let gzip = args.input.extension().is_some_and(|e| e == "gz");
    let total_bytes = std::fs::metadata(&args.input)
        .ok()
        .filter(|_| !gzip)
        .map(|m| m.len());

    let progress = if std::io::stderr().is_terminal() {
        let pb = match total_bytes {
            Some(n) => indicatif::ProgressBar::new(n),
            None => indicatif::ProgressBar::new_spinner(),
        };
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
            )
            .expect("static template"),
        );
        Some(pb)
    } else {
        None
    };

    let mut reader = input::open(&args.input)?;
    let (tx, rx) = crossbeam_channel::bounded::<Result<(Vec<Line>, Vec<Prepared>)>>(2);
    let started = Instant::now();
    let params_id = record::params_id(&params);
    let mut s = Summary::default();
    let mut retention = crate::dedup::Retention::new(retention, max_pages);

    std::thread::scope(|scope| -> Result<()> {
        let signer = &signer;
        let pool = &pool;
        // reading overlaps signing: one thread reads batches, another hands them to the
        // signing pool, the decisions are made here in input order
        let (read_tx, read_rx) = crossbeam_channel::bounded::<Result<Vec<Line>>>(1);
        // about five batches are in flight (read, queued, signing, signed, deciding), each
        // taken whole by the pool: 4 MiB of input a signing thread keeps the threads busy
        // while the memory the pages in flight take, which the kernel zeroes as it is first
        // touched, stays small (`--jobs 1` over the dev pages: a peak of 117–122 MB against
        // 246–249 MB at 32 MiB a batch, a quarter of the page faults)
        let batch_bytes = (4usize << 20).saturating_mul(jobs.max(1)).min(32 << 20);
        scope.spawn(move || {
            let mut number = 0u64;
            loop {
                let batch =
                    input::read_batch(&mut reader, &mut number, 512, batch_bytes, max_record);
                let done = matches!(&batch, Ok(l) if l.is_empty()) || batch.is_err();
                if read_tx.send(batch).is_err() || done {
                    break;
                }
            }
        });
        scope.spawn(move || {
            for batch in read_rx.iter() {
                let msg = batch.map(|lines| {
                    let prepared = pool.install(|| prepare(&lines, signer, max_record));
                    (lines, prepared)
                });
                let done = matches!(&msg, Ok((l, _)) if l.is_empty()) || msg.is_err();
                if tx.send(msg).is_err() || done {
                    break;
                }
            }
        });
        // a batch's output lines are written once the index's log of its decisions is in
        // the log's file, so a line in the output is never of a decision the index lost
        let (mut unique_lines, mut dup_lines) = (Vec::new(), Vec::new());
        for msg in rx.iter() {
            let (lines, prepared) = msg?;
            if lines.is_empty() {
                break;
            }
            for (line, item) in lines.iter().zip(prepared) {
                s.lines += 1;
                s.bytes += line.len + 1;
                match item {
                    Prepared::Blank => s.blank += 1,
                    Prepared::Bad(bad) => {
                        s.bad += 1;
                        let w = match &mut dead_out {
                            Some(w) => w,
                            None => dead_out.insert(BufWriter::new(create(&dead_path)?)),
                        };
                        let src = Source::File {
                            path: input_name.clone(),
                            line: line.number,
                        };
                        let mut letter = DeadLetter::new(&bad, src, &line.bytes);
                        if line.cut() {
                            // only the start of an overlong line was kept
                            letter.original_bytes = Some(line.len);
                            letter.original_truncated = Some(true);
                        }
                        serde_json::to_writer(&mut *w, &letter)?;
                        w.write_all(b"\n")?;
                    }
                    Prepared::Page(b) => {
                        let (page, signed) = *b;
                        let first_seen = page.fetched_at.unwrap_or_else(crate::record::now_secs);
                        let outcome = dedup.decide(
                            PageRef {
                                id: &page.doc_id,
                                url: &page.page.url,
                                first_seen,
                            },
                            &signed,
                        )?;
                        s.pages += 1;
                        s.repeated += outcome.repeated as u64;
                        let out = match outcome.decision.kind {
                            DecisionKind::Unique => {
                                s.unique += 1;
                                &mut unique_lines
                            }
                            DecisionKind::Skipped => {
                                s.skipped += 1;
                                &mut unique_lines
                            }
                            DecisionKind::Duplicate => {
                                s.duplicate += 1;
                                if dup_out.is_some() {
                                    &mut dup_lines
                                } else {
                                    &mut unique_lines
                                }
                            }
                        };
                        let rec = record::tagged(
                            &page,
                            &signed,
                            &outcome.decision,
                            outcome.repeated,
                            &params,
                            &params_id,
                            keep_text,
                        );
                        serde_json::to_writer(&mut *out, &rec)?;
                        out.push(b'\n');
                        if let Some(r) = &mut retention {
                            r.decided(first_seen);
                            // right after the page that made it due, as the stage sweeps,
                            // so that both decide the next page on the same index
                            if r.due() {
                                s.expired += r.sweep(dedup.index_mut())?;
                            }
                        }
                    }
                }
            }
            dedup.index().flush_wal()?;
            unique_out.write_all(&unique_lines)?;
            unique_lines.clear();
            if let Some(w) = &mut dup_out {
                w.write_all(&dup_lines)?;
                dup_lines.clear();
            }
            if let Some(pb) = &progress {
                pb.set_position(s.bytes);
                pb.set_message(format!(
                    "{} pages, {} dup, {} bad",
                    s.pages, s.duplicate, s.bad
                ));
            }
        }
        Ok(())
    })?;

    if let Some(r) = &mut retention {
        s.expired += r.finish(dedup.index_mut())?;
    }
    unique_out.flush()?;
    if let Some(w) = &mut dup_out {
        w.flush()?;
    }
    if let Some(w) = &mut dead_out {
        w.flush()?;
    }
    dedup.index().flush()?;
    // the next run reads the lists instead of rebuilding them from every document
    dedup.index_mut().save_lists()?;
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    s.seconds = started.elapsed().as_secs_f64();
    s.pages_per_second = s.pages as f64 / s.seconds.max(1e-9);
    s.mb_per_second = s.bytes as f64 / 1e6 / s.seconds.max(1e-9);
    if args.summary_json {
        println!("{}", serde_json::to_string(&s)?);
    } else {
        eprintln!(
            "neardup dedup: {} pages: {} unique, {} duplicate, {} skipped ({} repeated ids); \
             {} bad lines{}; {:.1} s, {:.0} pages/s, {:.1} MB/s",
            s.pages,
            s.unique,
            s.duplicate,
            s.skipped,
            s.repeated,
            s.bad,
            if s.bad > 0 {
                format!(" (dead letters in {})", dead_path.display())
            } else {
                String::new()
            },
            s.seconds,
            s.pages_per_second,
            s.mb_per_second
        );
    }
    Ok(s)
}
