//! Criterion benches of the signing path over real pages of the dev corpus
//! (`../shared/data/goldstyle-dev.jsonl.gz`, or the file in `NEARDUP_BENCH_CORPUS`).
//! They skip with a message when the corpus is absent, and assert the counts they expect.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use neardup::signature::{
    fingerprint, group, similarity_at_least, spotsigs, Measure, SignatureConfig, Signer, SpotParams,
};
use neardup::text::{strip, StripMode, StripOptions, Tokens};
use neardup_lab::bench::{bench_corpus, floor_pass};

const PAGES: usize = 300;

fn corpus() -> Option<Vec<(String, Option<String>)>> {
    let mut out = Vec::new();
    for line in bench_corpus()?.take(PAGES) {
        let v: serde_json::Value = serde_json::from_str(&line.expect("corpus line")).expect("json");
        let html = v["html"].as_str().expect("html").to_string();
        let cluster = v["cluster"].as_str().map(String::from);
        out.push((html, cluster));
    }
    assert_eq!(
        out.len(),
        PAGES,
        "corpus has fewer pages than the bench needs"
    );
    Some(out)
}

fn benches(c: &mut Criterion) {
    let Some(pages) = corpus() else { return };
    let bytes: usize = pages.iter().map(|p| p.0.len()).sum();
    let cfg = SignatureConfig::default();
    let signer = Signer::new(&cfg).unwrap();
    let bytes_opts = StripOptions {
        mode: StripMode::Bytes,
        max_bytes: cfg.max_page_bytes,
        ..Default::default()
    };
    let tokens_opts = StripOptions {
        mode: StripMode::Tokens,
        ..bytes_opts
    };
    let tree_opts = StripOptions {
        mode: StripMode::Tree,
        ..bytes_opts
    };

    let mut g = c.benchmark_group("signing");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("floor_split_tags", |b| {
        b.iter(|| {
            pages
                .iter()
                .map(|p| floor_pass(black_box(&p.0)))
                .sum::<usize>()
        })
    });
    g.bench_function("strip_bytes", |b| {
        b.iter(|| {
            pages
                .iter()
                .map(|p| strip(black_box(&p.0), &bytes_opts).text.len())
                .sum::<usize>()
        })
    });
    g.bench_function("strip_tokens", |b| {
        b.iter(|| {
            pages
                .iter()
                .map(|p| strip(black_box(&p.0), &tokens_opts).text.len())
                .sum::<usize>()
        })
    });
    g.bench_function("strip_tree", |b| {
        b.iter(|| {
            pages
                .iter()
                .map(|p| strip(black_box(&p.0), &tree_opts).text.len())
                .sum::<usize>()
        })
    });
    let stripped: Vec<_> = pages.iter().map(|p| strip(&p.0, &bytes_opts)).collect();
    let spot = SpotParams {
        distance: cfg.spot_distance,
        chain: cfg.chain_len,
    };
    g.bench_function("tokens_spotsigs_after_strip", |b| {
        let mut t = Tokens::default();
        b.iter(|| {
            stripped
                .iter()
                .map(|s| {
                    signer.tokens(s, &mut t);
                    spotsigs::spotsigs(&t, spot).set_len()
                })
                .sum::<usize>()
        })
    });
    g.bench_function("sign_full_path", |b| {
        b.iter(|| {
            pages
                .iter()
                .map(|p| signer.sign(black_box(&p.0)).sigs.set_len())
                .sum::<usize>()
        })
    });
    g.finish();

    let signed: Vec<_> = pages.iter().map(|p| signer.sign(&p.0)).collect();
    let with_sigs = signed.iter().filter(|s| s.sigs.set_len() >= 5).count();
    assert!(
        with_sigs * 10 >= PAGES * 8,
        "only {with_sigs} of {PAGES} pages have 5+ signatures"
    );

    let mut g = c.benchmark_group("fingerprint_similarity");
    g.throughput(Throughput::Elements(signed.len() as u64));
    g.bench_function("minhash1_64", |b| {
        b.iter(|| {
            signed
                .iter()
                .map(|s| fingerprint(&s.sigs, cfg.fingerprint, 64)[0])
                .fold(0, |a, x| a ^ x)
        })
    });
    g.bench_function("jaccard_at_least_neighbours", |b| {
        b.iter(|| {
            signed
                .windows(2)
                .filter(|w| {
                    similarity_at_least(
                        w[0].sigs.entries(),
                        w[1].sigs.entries(),
                        Measure::Jaccard,
                        0.5,
                    )
                })
                .count()
        })
    });
    g.finish();

    // Result-set dedup: 100 real pages (the labelled ones first, as a search result would
    // hold several copies of a story), all pairs, under 1 ms.
    let mut picked: Vec<usize> = (0..pages.len())
        .filter(|&i| pages[i].1.is_some())
        .take(60)
        .collect();
    picked.extend(
        (0..pages.len())
            .filter(|&i| pages[i].1.is_none())
            .take(100 - picked.len()),
    );
    let sets: Vec<&[(u32, u32)]> = picked.iter().map(|&i| signed[i].sigs.entries()).collect();
    let groups = group(&sets, Measure::Jaccard, 0.5);
    let (mut pairs, mut labelled_same) = (0, 0);
    for g in &groups {
        for (x, &a) in g.iter().enumerate() {
            for &b in &g[x + 1..] {
                pairs += 1;
                let (la, lb) = (&pages[picked[a]].1, &pages[picked[b]].1);
                labelled_same += (la.is_some() && la == lb) as usize;
            }
        }
    }
    assert!(pairs > 0, "no near-duplicate group among the result set");
    assert!(
        labelled_same * 10 >= pairs * 9,
        "{labelled_same} of {pairs} grouped pairs share a label"
    );
    c.bench_function("result_set_group_100_pages", |b| {
        b.iter(|| group(black_box(&sets), Measure::Jaccard, 0.5).len())
    });
}

criterion_group!(signing, benches);
criterion_main!(signing);
