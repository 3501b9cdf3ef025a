//! `neardup-lab shards`: the sharded decider of the design note (docs/scale-out.md, *Past
//! one decider*), its shards and aggregator ([`crate::dedup::sharded`]) run in one process,
//! page by page beside one decider, on the synthetic stream of `neardup-lab index` or on the
//! pages of a corpus (`--corpus`, signed with the default settings).
//!
//! It reports, per shard count, the decisions that differ from one decider's (0 expected),
//! each shard's CPU per page (votes, store or count, the aggregator's removals) and the
//! largest (the shards run in parallel, so the largest bounds the rate), the aggregator's,
//! the votes per page, and the rate this projects for a decider of S shards on S cores.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::cli::input;
use crate::dedup::sharded::{Aggregator, Judged, Shard, Vote};
use crate::dedup::{Deduplicator, PageRef};
use crate::index::{Index, IndexParams};
use crate::signature::{Signed, Signer};
use crate::synthetic::{Generator, Synth};

/// Arguments of `neardup-lab shards`.
#[derive(Args, Debug)]
pub struct BenchShardsArgs {
    /// Pages in the stream (synthetic pages; with --corpus, at most this many of its pages)
    #[arg(long, default_value_t = 200_000)]
    pub docs: u64,
    /// Shard counts, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub shards: Vec<usize>,
    /// Share of pages that are edited copies of an earlier page
    #[arg(long, default_value_t = 0.2)]
    pub copy_rate: f64,
    /// Seed of the synthetic stream
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Real pages instead (JSONL, plain or gzip, with url and html; id optional), signed
    /// with the default settings and decided in file order
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Run the shards and the aggregator only, not one decider beside them (half the
    /// memory; nothing compared)
    #[arg(long)]
    pub shards_only: bool,
    /// Pages read between a decision and its arrival at the shards (through Kafka, a commit
    /// interval: thousands of pages while a role catches up)
    #[arg(long, default_value_t = 0)]
    pub lag: usize,
    /// With --corpus: this many copies of the corpus's tenth page after it, under other URLs
    /// of its host (a login wall, a soft error page)
    #[arg(long, default_value_t = 0)]
    pub flood: usize,
}

/// One shard count.
#[derive(Debug, Serialize)]
pub struct ShardsRow {
    /// Shards.
    pub shards: usize,
    /// Pages decided.
    pub pages: u64,
    /// Decisions (kind and canonical page) that differ from one decider's (none without
    /// one decider: `--shards-only`).
    pub differing: Option<u64>,
    /// Duplicates found.
    pub duplicates: u64,
    /// One decider (the Deduplicator over one index): µs a page.
    pub single_us: Option<f64>,
    /// Mean over shards of a shard's CPU a page (probe, store, removals), µs.
    pub shard_mean_us: f64,
    /// The busiest shard's, µs a page.
    pub shard_max_us: f64,
    /// The aggregator's (merging the votes, deciding), µs a page.
    pub aggregator_us: f64,
    /// Votes a page (matches over all shards).
    pub votes_per_page: f64,
    /// The most votes one page got (over all shards).
    pub max_votes: u64,
    /// Pages the shards stored as copies of an earlier page at once (`CopyKey`).
    pub copies: u64,
    /// The rate of S shards on S cores: 1 / max(busiest shard, aggregator), pages a second.
    pub projected_pages_per_second: f64,
    /// Against one decider's rate.
    pub speedup: Option<f64>,
}

/// A signed page of the stream.
#[derive(Clone)]
pub struct StreamPage {
    /// Id.
    pub id: String,
    /// URL.
    pub url: String,
    /// Its signatures.
    pub signed: Signed,
}

/// The pages of a corpus (at most `limit`), signed with `params`' settings, in file order.
pub fn corpus_pages(
    path: &std::path::Path,
    params: &IndexParams,
    limit: u64,
) -> Result<Vec<StreamPage>> {
    #[derive(serde::Deserialize)]
    struct Line {
        id: Option<String>,
        url: String,
        html: String,
    }
    let signer = Signer::new(&params.signature)?;
    let mut reader = input::open(path)?;
    let (mut pages, mut n) = (Vec::new(), 0);
    while (pages.len() as u64) < limit {
        let batch = input::read_batch(&mut reader, &mut n, 1000, 1 << 30, usize::MAX)?;
        if batch.is_empty() {
            break;
        }
        for l in batch {
            if pages.len() as u64 >= limit {
                break;
            }
            let p: Line = serde_json::from_slice(&l.bytes)
                .with_context(|| format!("{} line {}", path.display(), l.number))?;
            let id = p.id.unwrap_or_else(|| format!("line-{}", l.number));
            pages.push(StreamPage {
                signed: signer.sign(&p.html),
                id,
                url: p.url,
            });
        }
    }
    Ok(pages)
}

/// `pages` with `n` copies of its tenth page (or its last, when shorter) after it, under
/// other URLs of its host.
fn with_flood(mut pages: Vec<StreamPage>, n: usize) -> Vec<StreamPage> {
    let Some(at) = (pages.len().min(10)).checked_sub(1).filter(|_| n > 0) else {
        return pages;
    };
    let p = pages[at].clone();
    let copies = (0..n).map(|c| StreamPage {
        id: format!("flood-{c}"),
        url: format!("{}?copy={c}", p.url),
        signed: p.signed.clone(),
    });
    pages.splice(at + 1..at + 1, copies);
    pages
}

/// The synthetic stream of `neardup-lab index`, made as it is read.
fn synthetic_pages(a: &BenchShardsArgs) -> impl Iterator<Item = StreamPage> {
    let mut gen = Generator::new(Synth {
        seed: a.seed,
        copy_rate: a.copy_rate,
        ..Synth::default()
    });
    (0..a.docs).map(move |_| {
        let p = gen.next_page();
        StreamPage {
            id: p.id,
            url: p.url,
            signed: p.signed,
        }
    })
}

/// Decides `pages` with one decider and with `shards` shards and an aggregator, page by
/// page, and compares.
pub fn run_one<P: std::borrow::Borrow<StreamPage>>(
    pages: impl IntoIterator<Item = P>,
    shards: usize,
    params: &IndexParams,
    compare: bool,
    lag: usize,
) -> Result<ShardsRow> {
    let mut single = match compare {
        true => Some(Deduplicator::new(Index::memory(params.clone())?)?),
        false => None,
    };
    let mut parts: Vec<Shard> = (0..shards)
        .map(|k| Shard::new(Index::memory(params.clone())?, k, shards))
        .collect::<Result<_, _>>()?;
    let mut aggregator = Aggregator::new();
    let mut shard_ns = vec![0u128; shards];
    let (mut single_ns, mut agg_ns) = (0u128, 0u128);
    let (mut differing, mut duplicates, mut nvotes, mut max_votes) = (0u64, 0u64, 0u64, 0u64);
    // the decisions on their way to the shards
    let mut late: std::collections::VecDeque<(String, crate::index::Decision)> =
        std::collections::VecDeque::new();
    let mut votes: Vec<Vec<Vote>> = vec![Vec::new(); shards];
    let mut n = 0usize;
    for (i, p) in pages.into_iter().enumerate() {
        let p = p.borrow();
        n += 1;
        let page = PageRef {
            id: &p.id,
            url: &p.url,
            first_seen: 1_795_000_000 + (i / 1000) as i64,
        };
        // one decider
        let t = Instant::now();
        let want = match single.as_mut() {
            Some(d) => Some(d.decide(page, &p.signed)?),
            None => None,
        };
        single_ns += t.elapsed().as_nanos();
        // the shards: votes, then the owner stores the page tentatively
        let mut judged = Vec::with_capacity(shards);
        let owner = crate::dedup::sharded::owner(&p.id, shards);
        let copies = parts[owner].copies();
        for (k, shard) in parts.iter_mut().enumerate() {
            let t = Instant::now();
            judged.push(shard.read(i as u64, page, &p.signed, &mut votes[k])?);
            shard_ns[k] += t.elapsed().as_nanos();
        }
        if judged.windows(2).any(|w| w[0] != w[1]) {
            bail!(
                "page {i} ({}): the shards judged it differently: {judged:?}",
                p.id
            );
        }
        // the aggregator
        let t = Instant::now();
        let decision = aggregator.decide(i as u64, &p.id, judged[0], votes.iter().flatten())?;
        agg_ns += t.elapsed().as_nanos();
        let page_votes = votes.iter().map(|v| v.len() as u64).sum::<u64>();
        nvotes += page_votes;
        max_votes = max_votes.max(page_votes);
        if parts[owner].copies() > copies && decision.kind == crate::index::DecisionKind::Unique {
            bail!("page {i} ({}): stored as a copy, decided unique", p.id);
        }
        // the owner takes a page that was not unique out of its lists, `lag` pages later
        late.push_back((p.id.clone(), decision.clone()));
        while late.len() > lag {
            let (id, d) = late.pop_front().expect("a decision waits");
            for (k, shard) in parts.iter_mut().enumerate() {
                let t = Instant::now();
                shard.decided(&id, &d)?;
                shard_ns[k] += t.elapsed().as_nanos();
            }
        }
        duplicates += u64::from(decision.kind == crate::index::DecisionKind::Duplicate);
        // a repeated id gets its stored decision whole, as one decider answers it
        let repeated = judged[0] == Judged::Repeated;
        if want.is_some_and(|w| {
            (repeated && w.decision != decision)
                || w.decision.kind != decision.kind
                || w.decision.canonical_id != decision.canonical_id
        }) {
            differing += 1;
        }
    }
    let per = |ns: u128| ns as f64 / 1000.0 / n.max(1) as f64;
    let single_us = compare.then(|| per(single_ns));
    let shard_us: Vec<f64> = shard_ns.iter().map(|&n| per(n)).collect();
    let shard_max_us = shard_us.iter().copied().fold(0.0, f64::max);
    let aggregator_us = per(agg_ns);
    let projected = 1e6 / shard_max_us.max(aggregator_us).max(1e-9);
    Ok(ShardsRow {
        shards,
        pages: n as u64,
        differing: compare.then_some(differing),
        duplicates,
        single_us,
        shard_mean_us: shard_us.iter().sum::<f64>() / shards as f64,
        shard_max_us,
        aggregator_us,
        votes_per_page: nvotes as f64 / n.max(1) as f64,
        max_votes,
        copies: parts.iter().map(Shard::copies).sum(),
        projected_pages_per_second: projected,
        speedup: single_us.map(|u| projected * u / 1e6),
    })
}

/// A figure of the table, or a dash when it was not measured.
fn show(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

/// Runs the simulation and prints a table.
pub fn run(a: BenchShardsArgs) -> Result<Vec<ShardsRow>> {
    if a.shards.is_empty() || a.shards.contains(&0) {
        bail!("shards must be at least 1");
    }
    let params = IndexParams::default();
    let corpus = match &a.corpus {
        Some(path) => Some(with_flood(corpus_pages(path, &params, a.docs)?, a.flood)),
        None if a.flood > 0 => bail!("--flood copies a page of --corpus"),
        None => None,
    };
    println!(
        "| shards | pages | differing | one decider µs | shard mean µs | busiest shard µs | aggregator µs | votes a page | most votes of a page | copies stored at once | projected pages/s | × one decider |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for &s in &a.shards {
        let r = match &corpus {
            Some(pages) => run_one(pages, s, &params, !a.shards_only, a.lag)?,
            None => run_one(synthetic_pages(&a), s, &params, !a.shards_only, a.lag)?,
        };
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} | {:.0} | {} |",
            r.shards,
            r.pages,
            show(r.differing.map(|d| d as f64), 0),
            show(r.single_us, 1),
            r.shard_mean_us,
            r.shard_max_us,
            r.aggregator_us,
            r.votes_per_page,
            r.max_votes,
            r.copies,
            r.projected_pages_per_second,
            show(r.speedup, 2)
        );
        rows.push(r);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sharded decider decides every synthetic page as one decider does, whatever the
    /// number of shards, and finds the copies.
    #[test]
    fn shards_decide_as_one_decider() {
        let a = BenchShardsArgs {
            docs: 4000,
            shards: vec![],
            copy_rate: 0.3,
            seed: 5,
            corpus: None,
            shards_only: false,
            lag: 0,
            flood: 0,
        };
        for (s, lag) in [(1, 0), (3, 0), (7, 0), (3, 700)] {
            let r = run_one(synthetic_pages(&a), s, &IndexParams::default(), true, lag).unwrap();
            assert_eq!(r.differing, Some(0), "{s} shards, lag {lag}");
            assert!(
                r.duplicates > 800,
                "{s} shards: {} duplicates",
                r.duplicates
            );
            assert!(r.votes_per_page > 0.0);
        }
    }

    /// The dev sample's path, or `None` (the test skipped) where it is missing outside CI.
    fn dev_sample() -> Option<std::path::PathBuf> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/goldstyle-dev-sample.jsonl.gz");
        if !path.exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI=true and no {}: this test checks real pages",
                path.display()
            );
            eprintln!("skipped: no {}", path.display());
            return None;
        }
        Some(path)
    }

    /// And every real page of the dev sample, at the default text rules (the software-text
    /// counts, the host and identity rules included).
    #[test]
    fn shards_decide_real_pages_as_one_decider() {
        let Some(path) = dev_sample() else {
            return;
        };
        let params = IndexParams::default();
        let mut pages = corpus_pages(&path, &params, u64::MAX).unwrap();
        assert!(pages.len() > 100, "{} pages", pages.len());
        // a crawler's repeats: pages sent again (an at-least-once replay)
        let again: Vec<StreamPage> = pages.iter().step_by(7).cloned().collect();
        pages.extend(again);
        // decisions that reach the shards at once, or a commit interval's pages later
        for (s, lag) in [(1, 0), (2, 0), (4, 0), (2, 150)] {
            let r = run_one(&pages, s, &params, true, lag).unwrap();
            assert_eq!(r.differing, Some(0), "{s} shards, lag {lag}: {r:?}");
            assert!(r.duplicates > 10, "{s} shards: {r:?}");
        }
    }

    /// A flood of copies of a few pages (a login wall under thousands of URLs of its host,
    /// and the same page on other hosts) while no decision reaches the shards (the
    /// aggregator restarting): the decisions are one decider's, and each copy votes for
    /// the first page of its kind on each shard, not for every copy read before (about
    /// n²/(2S) votes a shard for n copies if they were held as unique until decided).
    #[test]
    fn a_flood_of_copies_votes_for_one_page_of_them_a_shard() {
        let Some(path) = dev_sample() else {
            return;
        };
        let params = IndexParams::default();
        let real = corpus_pages(&path, &params, u64::MAX).unwrap();
        let mut pages: Vec<StreamPage> = Vec::new();
        // pages of the sample far apart, each with its identity (the key needs one)
        let floods = [3usize, 40, 90, 150];
        for &k in &floods {
            assert!(
                real[k].signed.identity.is_some(),
                "page {k} has no identity"
            );
        }
        for (i, p) in real.iter().enumerate() {
            pages.push(p.clone());
            if let Some(f) = floods.iter().position(|&k| k == i) {
                for c in 0..500 {
                    // copies under other URLs of the page's host, and on three other hosts
                    let url = match c % 10 {
                        0..=6 => format!("{}?session={c}", p.url),
                        h => format!("https://mirror-{h}.example/{f}/{c}"),
                    };
                    pages.push(StreamPage {
                        id: format!("flood-{f}-{c}"),
                        url,
                        signed: p.signed.clone(),
                    });
                }
            }
        }
        for s in [1, 2, 4] {
            let r = run_one(&pages, s, &params, true, usize::MAX).unwrap();
            assert_eq!(r.differing, Some(0), "{s} shards: {r:?}");
            // the votes of the pages alone, plus a flood's: its 4 hosts, the first page of
            // each a shard (the flooded pages are far apart in the sample, so a copy of one
            // matches no other flood)
            let alone = run_one(&real, s, &params, false, usize::MAX).unwrap();
            assert!(
                r.max_votes <= alone.max_votes + 4 * s as u64,
                "{s} shards: {r:?}, the pages alone {alone:?}"
            );
            assert!(r.copies >= 4 * (500 - 4 * s as u64), "{s} shards: {r:?}");
            assert!(r.duplicates >= 2000, "{s} shards: {r:?}");
        }
    }
}
