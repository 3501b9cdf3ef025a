//! `neardup-lab shards`: a simulation of the sharded decider of the design note
//! (docs/scale-out.md, *Past one decider*), in one process, on the synthetic stream of `neardup-lab index`.
//!
//! Every shard sees every signed page in stream order and owns the pages whose id hashes to
//! it. For each page a shard (1) returns every page it owns that reaches τ (its *votes*: the
//! page's stream position and similarity), then (2) if it owns the page, stores it at once
//! under its stream position, before anyone has decided it (*tentatively*: a shard never
//! waits for the aggregator). The aggregator takes the votes of all shards for a page,
//! keeps those for pages it decided unique, and decides: the highest similarity, then the
//! earliest page, as the single decider does. A page decided duplicate is removed by its
//! owner afterwards (until then it is one more candidate the aggregator drops). Because a
//! shard returns *every* match at or above τ, not only its best, the decisions are the
//! single decider's at the default settings (SpotSigs lists, no document frequencies); the
//! run checks that page by page.
//!
//! It reports, per shard count, the decisions that differ from one decider (0 expected),
//! each shard's CPU per page (probe + store + removals) and the largest (the shards run in
//! parallel, so the largest bounds the rate), the aggregator's, the votes per page, and the
//! rate this projects for a decider of S shards on S cores.

use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use rustc_hash::FxHashSet;
use serde::Serialize;

use crate::dedup::{Deduplicator, PageRef, PairRule};
use crate::index::{Candidate, Decision, DecisionKind, DocRecord, Index, IndexParams};
use crate::synthetic::{Generator, Synth};

/// Arguments of `neardup-lab shards`.
#[derive(Args, Debug)]
pub struct BenchShardsArgs {
    /// Pages in the stream
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
}

/// One shard count.
#[derive(Debug, Serialize)]
pub struct ShardsRow {
    /// Shards.
    pub shards: usize,
    /// Pages decided.
    pub pages: u64,
    /// Decisions (kind and canonical page) that differ from one decider's.
    pub differing: u64,
    /// Duplicates found.
    pub duplicates: u64,
    /// One decider (the Deduplicator over one index): µs a page.
    pub single_us: f64,
    /// Mean over shards of a shard's CPU a page (probe, store, removals), µs.
    pub shard_mean_us: f64,
    /// The busiest shard's, µs a page.
    pub shard_max_us: f64,
    /// The aggregator's (merging the votes, deciding), µs a page.
    pub aggregator_us: f64,
    /// Votes a page (matches at or above τ over all shards).
    pub votes_per_page: f64,
    /// The rate of S shards on S cores: 1 / max(busiest shard, aggregator), pages a second.
    pub projected_pages_per_second: f64,
    /// Against one decider's rate.
    pub speedup: f64,
}

fn owner(id: &str, shards: usize) -> usize {
    (crc32fast::hash(id.as_bytes()) as usize) % shards
}

/// One shard's votes for a page: (stream position, similarity) of every page it owns that
/// the deduplicator's own rule matches with it ([`PairRule`]: informative signatures, the
/// template and host tests, τ).
fn votes(
    shard: &mut Index,
    url: &str,
    signed: &crate::signature::Signed,
    cands: &mut Vec<Candidate>,
    out: &mut Vec<(u64, f64)>,
) -> Result<()> {
    let informative = shard.informative(url, &signed.sigs);
    let q = informative.as_ref().unwrap_or(&signed.sigs);
    if q.set_len() < shard.params().min_signatures as usize {
        // too little text of its own to match on: it matches nothing
        return Ok(());
    }
    shard.list_candidates(q, cands)?;
    let hosts = shard.params().signature.short_pages_across_hosts_only();
    let mut rule = PairRule::new(shard, q, &signed.template, hosts.then_some(url))
        .with_keys(crate::dedup::Keys::of(signed));
    for c in cands.iter() {
        let Some(doc) = shard.doc(c.doc)? else {
            continue;
        };
        if let Some(sim) = rule.similarity(shard, &doc) {
            out.push((c.doc, sim));
        }
    }
    Ok(())
}

fn run_one(a: &BenchShardsArgs, shards: usize, params: &IndexParams) -> Result<ShardsRow> {
    let synth = Synth {
        seed: a.seed,
        copy_rate: a.copy_rate,
        ..Synth::default()
    };
    let mut gen = Generator::new(synth);
    let mut single = Deduplicator::new(Index::memory(params.clone())?)?;
    let mut parts: Vec<Index> = (0..shards)
        .map(|_| Index::memory(params.clone()))
        .collect::<Result<_, _>>()?;
    let mut shard_ns = vec![0u128; shards];
    let (mut single_ns, mut agg_ns) = (0u128, 0u128);
    let mut unique: FxHashSet<u64> = FxHashSet::default();
    let mut ids: Vec<String> = Vec::with_capacity(a.docs as usize);
    let (mut differing, mut duplicates, mut nvotes) = (0u64, 0u64, 0u64);
    let mut cands = Vec::new();
    let mut shard_votes: Vec<Vec<(u64, f64)>> = vec![Vec::new(); shards];
    let min_sigs = params.min_signatures as usize;
    for i in 0..a.docs {
        let p = gen.next_page();
        let first_seen = 1_795_000_000 + (i / 1000) as i64;
        // one decider
        let t = Instant::now();
        let want = single.decide(
            PageRef {
                id: &p.id,
                url: &p.url,
                first_seen,
            },
            &p.signed,
        )?;
        single_ns += t.elapsed().as_nanos();
        // the shards: votes, then the owner stores the page tentatively
        let own = owner(&p.id, shards);
        let judged = p.signed.sigs.set_len() >= min_sigs;
        for (k, shard) in parts.iter_mut().enumerate() {
            let t = Instant::now();
            shard_votes[k].clear();
            if judged {
                votes(shard, &p.url, &p.signed, &mut cands, &mut shard_votes[k])?;
                if k == own {
                    let rec = DocRecord {
                        id: p.id.clone(),
                        url: p.url.clone(),
                        first_seen,
                        fingerprint: p.signed.fingerprint.clone(),
                        sigs: p.signed.sigs.clone(),
                        decision: Decision::plain(DecisionKind::Unique),
                        delta: None,
                        identity: p.signed.identity,
                        title: p.signed.title,
                        template: p.signed.template.clone(),
                        blocks: p.signed.short.blocks.clone(),
                        software: Vec::new(),
                    };
                    shard.restore_put(i, &rec)?;
                }
            }
            shard_ns[k] += t.elapsed().as_nanos();
        }
        // the aggregator: the best vote for a page decided unique
        let t = Instant::now();
        let mut best: Option<(u64, f64)> = None;
        for v in shard_votes.iter().flatten() {
            nvotes += 1;
            if !unique.contains(&v.0) {
                continue;
            }
            if best.is_none_or(|(n, s)| v.1 > s || (v.1 == s && v.0 < n)) {
                best = Some(*v);
            }
        }
        let kind = if !judged {
            DecisionKind::Skipped
        } else if best.is_some() {
            DecisionKind::Duplicate
        } else {
            unique.insert(i);
            DecisionKind::Unique
        };
        agg_ns += t.elapsed().as_nanos();
        ids.push(p.id.clone());
        // the owner removes a page that was not unique
        if judged && kind != DecisionKind::Unique {
            let t = Instant::now();
            parts[own].remove_id(&p.id)?;
            shard_ns[own] += t.elapsed().as_nanos();
        }
        duplicates += u64::from(kind == DecisionKind::Duplicate);
        let canonical = best.map(|(n, _)| ids[n as usize].as_str());
        if want.decision.kind != kind || want.decision.canonical_id.as_deref() != canonical {
            differing += 1;
        }
    }
    let per = |ns: u128| ns as f64 / 1000.0 / a.docs as f64;
    let single_us = per(single_ns);
    let shard_us: Vec<f64> = shard_ns.iter().map(|&n| per(n)).collect();
    let shard_max_us = shard_us.iter().copied().fold(0.0, f64::max);
    let aggregator_us = per(agg_ns);
    let projected = 1e6 / shard_max_us.max(aggregator_us).max(1e-9);
    Ok(ShardsRow {
        shards,
        pages: a.docs,
        differing,
        duplicates,
        single_us,
        shard_mean_us: shard_us.iter().sum::<f64>() / shards as f64,
        shard_max_us,
        aggregator_us,
        votes_per_page: nvotes as f64 / a.docs as f64,
        projected_pages_per_second: projected,
        speedup: projected * single_us / 1e6,
    })
}

/// Runs the simulation and prints a table.
pub fn run(a: BenchShardsArgs) -> Result<Vec<ShardsRow>> {
    if a.shards.is_empty() || a.shards.contains(&0) {
        bail!("shards must be at least 1");
    }
    let params = IndexParams::default();
    println!(
        "| shards | pages | differing | one decider µs | shard mean µs | busiest shard µs | aggregator µs | votes a page | projected pages/s | × one decider |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for &s in &a.shards {
        let r = run_one(&a, s, &params)?;
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.0} | {:.2} |",
            r.shards,
            r.pages,
            r.differing,
            r.single_us,
            r.shard_mean_us,
            r.shard_max_us,
            r.aggregator_us,
            r.votes_per_page,
            r.projected_pages_per_second,
            r.speedup
        );
        rows.push(r);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sharded decider decides every page as one decider does, whatever the number of
    /// shards, and finds the copies.
    #[test]
    fn shards_decide_as_one_decider() {
        let a = BenchShardsArgs {
            docs: 4000,
            shards: vec![],
            copy_rate: 0.3,
            seed: 5,
        };
        for s in [1, 3, 7] {
            let r = run_one(&a, s, &IndexParams::default()).unwrap();
            assert_eq!(r.differing, 0, "{s} shards");
            assert!(
                r.duplicates > 800,
                "{s} shards: {} duplicates",
                r.duplicates
            );
            assert!(r.votes_per_page > 0.0);
        }
    }
}
