//! `neardup eval`: pairwise precision, recall and F1 on a labelled corpus.
//!
//! Corpus lines are pages with a `cluster` field (pages sharing a non-null cluster are
//! near-duplicates). Pages are signed once for each signature family the methods need
//! (SpotSigs, sentence shingles), then for every method × threshold they run in file order
//! through a fresh temporary RocksDB index. A predicted pair is a duplicate and
//! its canonical page, or two duplicates sharing a canonical page.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use rayon::prelude::*;
use serde::Deserialize;

use super::{input, report};
use crate::config::{Config, DetectOptions, FileConfig, MethodOptions, Options, SignatureOptions};
use crate::dedup::{Deduplicator, PageRef};
use crate::index::{DecisionKind, Index, Method};
use crate::signature::{Signed, Signer};
pub use report::{KindRow, Row};

/// Arguments of `neardup eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Labelled corpus JSONL (plain or gzip) with id, url, html, cluster
    #[arg(long, env = "NEARDUP_CORPUS")]
    pub corpus: PathBuf,
    /// Methods, comma-separated [default: spotsigs]
    #[arg(long, env = "NEARDUP_METHOD", value_delimiter = ',')]
    pub method: Vec<Method>,
    /// Thresholds, comma-separated [default: 0.5]
    #[arg(long, env = "NEARDUP_THRESHOLD", value_delimiter = ',')]
    pub threshold: Vec<f64>,
    /// Same-template (hard negative) pairs TSV [default: beside the corpus]
    #[arg(long)]
    pub same_template: Option<PathBuf>,
    /// Gray pairs TSV (negatives whose texts overlap) [default: beside the corpus]
    #[arg(long)]
    pub gray: Option<PathBuf>,
    /// Read at most this many pages
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print rows as JSON lines instead of a table
    #[arg(long)]
    pub json: bool,
    /// After each row, precision, recall and F1 by page length: a pair counts in the bucket
    /// of its shorter page (words of the signed text), with the pages skipped per bucket
    #[arg(long)]
    pub by_length: bool,
    /// After each row, precision, recall and F1 by kind of pair: the pages' `kind` labels
    /// (a page without one is `page`) and whether they are on one host (JSON rows and the
    /// report always carry it)
    #[arg(long)]
    pub by_kind: bool,
    /// Also write a self-contained HTML report: the table, a precision-recall curve per
    /// method over τ, and the false positive and false negative pairs with both texts
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub detect: DetectOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub signature: SignatureOptions,
}

#[derive(Deserialize)]
struct LabelledPage {
    id: String,
    url: String,
    html: String,
    cluster: Option<String>,
    /// What kind of page it is, for the table by kind (e.g. `aggregator`, `wire`, `forum`).
    #[serde(default)]
    kind: Option<String>,
}

/// The kind of a pair of pages: their `kind` labels (a page without one is `page`; two
/// different ones joined with `+` in order) and whether they are on one host, so that a
/// rule's effect on aggregator copies, wire stories, mirrors or forums shows apart.
fn pair_kind(a: &LabelledPage, b: &LabelledPage) -> String {
    let ka = a.kind.as_deref().unwrap_or("page");
    let kb = b.kind.as_deref().unwrap_or("page");
    let kinds = match ka.cmp(kb) {
        std::cmp::Ordering::Equal => ka.to_string(),
        std::cmp::Ordering::Less => format!("{ka}+{kb}"),
        std::cmp::Ordering::Greater => format!("{kb}+{ka}"),
    };
    let host = if crate::index::freq::host_hash(&a.url) == crate::index::freq::host_hash(&b.url) {
        "same host"
    } else {
        "other hosts"
    };
    format!("{kinds}, {host}")
}

/// Precision and recall by [`pair_kind`], in the order of the kinds' names.
fn by_kind(
    pages: &[LabelledPage],
    gold: &HashSet<Pair>,
    predicted: &HashSet<Pair>,
) -> Vec<KindRow> {
    let mut rows: std::collections::BTreeMap<String, (usize, usize, usize)> = Default::default();
    let kind = |p: &Pair| pair_kind(&pages[p.0 as usize], &pages[p.1 as usize]);
    for p in gold {
        let e = rows.entry(kind(p)).or_default();
        e.0 += 1;
        if predicted.contains(p) {
            e.2 += 1;
        }
    }
    for p in predicted {
        rows.entry(kind(p)).or_default().1 += 1;
    }
    rows.into_iter()
        .map(|(kind, (gold, predicted, tp))| KindRow {
            kind,
            gold,
            predicted,
            true_positives: tp,
            precision: if predicted == 0 {
                1.0
            } else {
                tp as f64 / predicted as f64
            },
            recall: if gold == 0 {
                1.0
            } else {
                tp as f64 / gold as f64
            },
        })
        .collect()
}

/// The table of [`EvalArgs::by_kind`].
fn print_by_kind(rows: &[KindRow]) {
    println!(
        "    {:<36} {:>5} {:>9} {:>5} {:>9} {:>7}",
        "kind", "gold", "predicted", "tp", "precision", "recall"
    );
    for r in rows {
        println!(
            "    {:<36} {:>5} {:>9} {:>5} {:>9.3} {:>7.3}",
            r.kind, r.gold, r.predicted, r.true_positives, r.precision, r.recall
        );
    }
}

type Pair = (u32, u32);

fn pair(a: u32, b: u32) -> Pair {
    (a.min(b), a.max(b))
}

fn sibling(corpus: &Path, suffix: &str) -> Option<PathBuf> {
    let name = corpus.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gz").unwrap_or(name);
    let stem = stem.strip_suffix(".jsonl").unwrap_or(stem);
    let dir = corpus.parent().unwrap_or(Path::new("."));
    let mut candidates = vec![dir.join(format!("{stem}-{suffix}"))];
    if let Some(base) = stem.strip_suffix("-sample") {
        candidates.push(dir.join(format!("{base}-{suffix}")));
    }
    candidates.into_iter().find(|p| p.exists())
}

fn read_pairs(path: &Path, ids: &HashMap<String, u32>) -> Result<HashSet<Pair>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (Some(a), Some(b)) = (col("id_a"), col("id_b")) else {
        bail!("{} has no id_a / id_b columns", path.display());
    };
    let mut out = HashSet::new();
    for l in lines {
        let f: Vec<&str> = l.split('\t').collect();
        if let (Some(x), Some(y)) = (
            f.get(a).and_then(|i| ids.get(*i)),
            f.get(b).and_then(|i| ids.get(*i)),
        ) {
            out.insert(pair(*x, *y));
        }
    }
    Ok(out)
}

/// Pairs within each group of page numbers.
fn pairs_of(groups: impl Iterator<Item = Vec<u32>>) -> HashSet<Pair> {
    let mut out = HashSet::new();
    for g in groups {
        for (i, &a) in g.iter().enumerate() {
            for &b in &g[i + 1..] {
                out.insert(pair(a, b));
            }
        }
    }
    out
}

/// Runs `neardup eval`.
pub fn run(args: EvalArgs, file: &FileConfig) -> Result<Vec<Row>> {
    let methods = if args.method.is_empty() {
        vec![Method::default()]
    } else {
        args.method.clone()
    };
    let thresholds = if args.threshold.is_empty() {
        vec![0.5]
    } else {
        args.threshold.clone()
    };
    // one parameter set a method (its signature family, its default min-signatures), and
    // one signer for each distinct signature setting among them
    let mut method_params = Vec::new();
    let mut signers: Vec<Signer> = Vec::new();
    for &method in &methods {
        let options = Options {
            signature: args.signature.clone(),
            detect: args.detect.clone(),
            method: MethodOptions {
                method: Some(method),
                threshold: Some(thresholds[0]),
            },
            ..Default::default()
        };
        let params = Config::resolve(options, file)?.params;
        let at = match signers.iter().position(|s| *s.config() == params.signature) {
            Some(at) => at,
            None => {
                signers.push(Signer::new(&params.signature)?);
                signers.len() - 1
            }
        };
        method_params.push((method, params, at));
    }
    let mut report = match &args.report {
        Some(path) => Some(report::Report::create(
            path,
            methods.len() * thresholds.len(),
        )?),
        None => None,
    };
    // with a report, every method also runs over the curves' τ grid (rows not printed)
    let grid = report
        .as_ref()
        .map_or(Vec::new(), |_| report::grid(&thresholds));

    let t0 = Instant::now();
    let mut pages: Vec<LabelledPage> = Vec::new();
    input::for_each_json(&args.corpus, |p: LabelledPage| {
        pages.push(p);
        args.limit.is_none_or(|lim| pages.len() < lim)
    })?;
    let bytes: usize = pages.iter().map(|p| p.html.len()).sum();
    let t_read = t0.elapsed().as_secs_f64();
    let mut signed_by: Vec<Vec<Signed>> = Vec::with_capacity(signers.len());
    for signer in &signers {
        let t1 = Instant::now();
        signed_by.push(pages.par_iter().map(|p| signer.sign(&p.html)).collect());
        let t_sign = t1.elapsed().as_secs_f64();
        eprintln!(
            "neardup eval: {} pages, {:.1} MB read in {:.1} s; signed ({}) in {:.1} s ({:.0} pages/s, {:.1} MB/s on {} threads)",
            pages.len(),
            bytes as f64 / 1e6,
            t_read,
            signer.config().features.as_str(),
            t_sign,
            pages.len() as f64 / t_sign,
            bytes as f64 / 1e6 / t_sign,
            rayon::current_num_threads()
        );
    }

    let ids: HashMap<String, u32> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.clone(), i as u32))
        .collect();
    let mut clusters: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, p) in pages.iter().enumerate() {
        if let Some(c) = &p.cluster {
            clusters.entry(c).or_default().push(i as u32);
        }
    }
    let gold = pairs_of(clusters.into_values());
    let same_template = match args
        .same_template
        .clone()
        .or_else(|| sibling(&args.corpus, "same_template_pairs.tsv"))
    {
        Some(p) => Some(read_pairs(&p, &ids)?),
        None => None,
    };
    let gray = match args
        .gray
        .clone()
        .or_else(|| sibling(&args.corpus, "gray_pairs.tsv"))
    {
        Some(p) => Some(read_pairs(&p, &ids)?),
        None => None,
    };

    let mut rows = Vec::new();
    if !args.json {
        println!(
            "{:<9} {:>5} {:>9} {:>5} {:>5} {:>9} {:>7} {:>6} {:>13} {:>6} {:>8} {:>9}",
            "method",
            "tau",
            "predicted",
            "gold",
            "tp",
            "precision",
            "recall",
            "f1",
            "same-tmpl-fp",
            "gray",
            "skipped",
            "decide/s"
        );
    }
    for (method, base, at) in &method_params {
        let (method, signed) = (*method, &signed_by[*at]);
        for (k, &tau) in thresholds.iter().chain(&grid).enumerate() {
            let requested = k < thresholds.len();
            let mut params = base.clone();
            params.threshold = tau;
            let dir = tempfile::tempdir()?;
            let mut dedup = Deduplicator::new(Index::open_dir(dir.path(), params)?)?;
            let mut groups: HashMap<u32, Vec<u32>> = HashMap::new();
            let mut skipped = 0;
            let mut skipped_pages: HashSet<u32> = HashSet::new();
            let t = Instant::now();
            for (i, (p, s)) in pages.iter().zip(signed).enumerate() {
                let page = PageRef {
                    id: &p.id,
                    url: &p.url,
                    first_seen: 0,
                };
                let out = dedup.decide(page, s)?;
                match out.decision.kind {
                    DecisionKind::Duplicate => {
                        let canon = out
                            .decision
                            .canonical_id
                            .as_deref()
                            .and_then(|c| ids.get(c));
                        let canon = *canon.context("canonical id not in corpus")?;
                        groups
                            .entry(canon)
                            .or_insert_with(|| vec![canon])
                            .push(i as u32);
                    }
                    DecisionKind::Skipped => {
                        skipped += 1;
                        skipped_pages.insert(i as u32);
                    }
                    DecisionKind::Unique => {}
                }
            }
            let decide_rate = pages.len() as f64 / t.elapsed().as_secs_f64();
            let predicted = pairs_of(groups.into_values());
            let tp = predicted.intersection(&gold).count();
            let precision = if predicted.is_empty() {
                1.0
            } else {
                tp as f64 / predicted.len() as f64
            };
            let recall = if gold.is_empty() {
                1.0
            } else {
                tp as f64 / gold.len() as f64
            };
            let f1 = if precision + recall == 0.0 {
                0.0
            } else {
                2.0 * precision * recall / (precision + recall)
            };
            let row = Row {
                method: method.to_string(),
                threshold: tau,
                predicted: predicted.len(),
                gold: gold.len(),
                true_positives: tp,
                precision,
                recall,
                f1,
                same_template_fp: same_template
                    .as_ref()
                    .map(|s| predicted.intersection(s).count()),
                gray_predicted: gray.as_ref().map(|g| predicted.intersection(g).count()),
                skipped,
                decide_pages_per_second: decide_rate,
                by_kind: by_kind(&pages, &gold, &predicted),
            };
            if let Some(r) = report.as_mut() {
                r.add(&row, requested, &predicted, &gold, &skipped_pages);
            }
            if !requested {
                continue;
            }
            let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
            if args.json {
                println!("{}", serde_json::to_string(&row)?);
            } else {
                println!(
                    "{:<9} {:>5.2} {:>9} {:>5} {:>5} {:>9.3} {:>7.3} {:>6.3} {:>13} {:>6} {:>8} {:>9.0}",
                    row.method, tau, row.predicted, row.gold, tp, precision, recall, f1,
                    opt(row.same_template_fp), opt(row.gray_predicted), skipped, decide_rate
                );
            }
            if args.by_length && !args.json {
                print_by_length(signed, &gold, &predicted, &skipped_pages);
            }
            if args.by_kind && !args.json {
                print_by_kind(&row.by_kind);
            }
            rows.push(row);
        }
    }
    if let Some(r) = report {
        let info: Vec<report::Page> = pages
            .iter()
            .map(|p| report::Page {
                id: &p.id,
                url: &p.url,
                cluster: p.cluster.as_deref(),
            })
            .collect();
        r.write(&report::Inputs {
            corpus: &args.corpus,
            rows: &rows,
            pages: &info,
            // texts and highlighted signatures are those of the first method's family
            signed: &signed_by[method_params[0].2],
            signer: &signers[method_params[0].2],
            same_template: same_template.as_ref(),
            gray: gray.as_ref(),
        })?;
    }
    Ok(rows)
}

/// Page-length buckets, in words of the signed text.
const LENGTH_BUCKETS: &[(usize, usize, &str)] = &[
    (0, 25, "<25 words"),
    (25, 50, "25-49"),
    (50, 100, "50-99"),
    (100, 200, "100-199"),
    (200, 400, "200-399"),
    (400, usize::MAX, "400+"),
];

fn bucket_of(words: usize) -> usize {
    LENGTH_BUCKETS
        .iter()
        .position(|&(lo, hi, _)| words >= lo && words < hi)
        .unwrap_or(LENGTH_BUCKETS.len() - 1)
}

/// The table of [`EvalArgs::by_length`].
fn print_by_length(
    signed: &[Signed],
    gold: &HashSet<Pair>,
    predicted: &HashSet<Pair>,
    skipped: &HashSet<u32>,
) {
    let n = LENGTH_BUCKETS.len();
    let bucket = |p: &Pair| {
        let w = signed[p.0 as usize].tokens.min(signed[p.1 as usize].tokens);
        bucket_of(w)
    };
    let (mut pages, mut skip) = (vec![0usize; n], vec![0usize; n]);
    for (i, s) in signed.iter().enumerate() {
        pages[bucket_of(s.tokens)] += 1;
        if skipped.contains(&(i as u32)) {
            skip[bucket_of(s.tokens)] += 1;
        }
    }
    let (mut g, mut pr, mut tp) = (vec![0usize; n], vec![0usize; n], vec![0usize; n]);
    for p in gold {
        g[bucket(p)] += 1;
        if predicted.contains(p) {
            tp[bucket(p)] += 1;
        }
    }
    for p in predicted {
        pr[bucket(p)] += 1;
    }
    println!(
        "    {:<10} {:>6} {:>8} {:>5} {:>9} {:>5} {:>9} {:>7} {:>6}",
        "length", "pages", "skipped", "gold", "predicted", "tp", "precision", "recall", "f1"
    );
    for b in 0..n {
        let p = if pr[b] == 0 {
            1.0
        } else {
            tp[b] as f64 / pr[b] as f64
        };
        let r = if g[b] == 0 {
            1.0
        } else {
            tp[b] as f64 / g[b] as f64
        };
        let f = if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        };
        println!(
            "    {:<10} {:>6} {:>8} {:>5} {:>9} {:>5} {:>9.3} {:>7.3} {:>6.3}",
            LENGTH_BUCKETS[b].2, pages[b], skip[b], g[b], pr[b], tp[b], p, r, f
        );
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    /// The example pages labelled: the river story in three templates, the school story and
    /// its mirror.
    fn corpus(dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pages.jsonl"),
        )
        .unwrap();
        let mut out = String::new();
        for line in text.lines() {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            let cluster = match v["id"].as_str().unwrap() {
                "ex-001" | "ex-003" | "ex-007" => Some("river"),
                "ex-002" | "ex-011" => Some("school"),
                _ => None,
            };
            v["cluster"] = cluster.into();
            out.push_str(&serde_json::to_string(&v).unwrap());
            out.push('\n');
        }
        let path = dir.join("labelled.jsonl");
        std::fs::write(&path, out).unwrap();
        path
    }

    #[test]
    fn a_pair_kind_is_its_pages_kinds_and_their_hosts() {
        let page = |url: &str, kind: Option<&str>| LabelledPage {
            id: url.into(),
            url: url.into(),
            html: String::new(),
            cluster: None,
            kind: kind.map(str::to_string),
        };
        let a = page("https://www.news.example/a", Some("wire"));
        let b = page("http://news.example:8080/b", Some("aggregator"));
        let c = page("https://other.example/c", Some("wire"));
        let d = page("https://other.example/d", None);
        assert_eq!(pair_kind(&a, &b), "aggregator+wire, same host");
        assert_eq!(pair_kind(&b, &a), "aggregator+wire, same host");
        assert_eq!(pair_kind(&a, &c), "wire, other hosts");
        assert_eq!(pair_kind(&c, &d), "page+wire, same host");
        let pages = [a, b, c, d];
        let gold: HashSet<Pair> = [(0, 2), (2, 3)].into();
        let predicted: HashSet<Pair> = [(0, 2), (0, 1)].into();
        let rows = by_kind(&pages, &gold, &predicted);
        let kinds: Vec<(&str, usize, usize, usize)> = rows
            .iter()
            .map(|r| (r.kind.as_str(), r.gold, r.predicted, r.true_positives))
            .collect();
        assert_eq!(
            kinds,
            [
                ("aggregator+wire, same host", 0, 1, 0),
                ("page+wire, same host", 1, 0, 0),
                ("wire, other hosts", 1, 1, 1),
            ]
        );
        assert_eq!((rows[0].precision, rows[0].recall), (0.0, 1.0));
        assert_eq!((rows[1].precision, rows[1].recall), (1.0, 0.0));
    }

    #[test]
    fn methods_of_both_signature_families_in_one_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = corpus(dir.path());
        let cli = Cli::try_parse_from([
            "neardup",
            "eval",
            "--corpus",
            path.to_str().unwrap(),
            "--method",
            "spotsigs,sentences,alg-g,alg-h",
            "--threshold",
            "0.5",
        ])
        .unwrap();
        let Command::Eval(args) = cli.command else {
            panic!("not eval")
        };
        let rows = run(args, &FileConfig::default()).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.method.as_str()).collect();
        assert_eq!(names, ["spotsigs", "sentences", "alg-g", "alg-h"]);
        for r in &rows {
            assert_eq!(r.gold, 4, "{}", r.method);
            assert_eq!(r.precision, 1.0, "{}: no false pairs", r.method);
        }
        let (spot, sent) = (&rows[0], &rows[1]);
        assert_eq!(spot.true_positives, 4);
        // by kind: the pages carry none; every gold pair is counted once
        let by: usize = spot.by_kind.iter().map(|k| k.gold).sum();
        assert_eq!(by, 4);
        assert!(spot.by_kind.iter().all(|k| k.kind.starts_with("page, ")));
        // the mirror is an exact copy in every family
        assert!(sent.true_positives >= 1);
        // the navigation page and the loading stub have fewer than five sentences
        assert!(sent.skipped >= 2, "{}", sent.skipped);
        assert!(
            Cli::try_parse_from(["neardup", "eval", "--corpus", "x", "--method", "sentence"])
                .is_err()
        );
    }
}
