//! Criterion benches of reading stored document records, over the records the dev corpus's
//! pages leave in an index (`../shared/data/goldstyle-dev.jsonl.gz`, or the file in
//! `NEARDUP_BENCH_CORPUS`): the whole record, what the software-text counts take of it (a
//! recount after a sweep reads every stored record so), and its first-seen time (what a
//! window's sweep reads of the records it passes). They skip with a message when the
//! corpus is absent, and assert what they read.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use neardup::dedup::{Deduplicator, PageRef};
use neardup::index::{Column, DocRecord, Index, IndexParams};
use neardup_lab::bench::bench_corpus;

const PAGES: usize = 1_000;

/// The stored records of the first [`PAGES`] pages of the corpus, decided in order.
fn records() -> Option<Vec<Vec<u8>>> {
    let lines = bench_corpus()?;
    let mut d = Deduplicator::new(Index::memory(IndexParams::default()).expect("index"))
        .expect("deduplicator");
    for (i, line) in lines.take(PAGES).enumerate() {
        let v: serde_json::Value = serde_json::from_str(&line.expect("corpus line")).expect("json");
        let (id, url) = (
            v["id"].as_str().expect("id"),
            v["url"].as_str().expect("url"),
        );
        let page = PageRef {
            id,
            url,
            first_seen: i as i64,
        };
        d.process(page, v["html"].as_str().expect("html"))
            .expect("decided");
    }
    let mut out = Vec::new();
    d.index()
        .store()
        .scan(Column::Docs, &[], &[0xff; 9], &mut |_, v| {
            out.push(v.to_vec());
            true
        })
        .expect("scan");
    assert_eq!(out.len(), PAGES, "a record for every page decided");
    Some(out)
}

fn benches(c: &mut Criterion) {
    let Some(records) = records() else { return };
    // the pages with short blocks: those a recount counts
    let mut blocks = Vec::new();
    let with_blocks = records
        .iter()
        .filter(|r| {
            DocRecord::decode_counted(r, &mut blocks).expect("record");
            !blocks.is_empty()
        })
        .count();
    assert!(
        with_blocks > PAGES / 2,
        "{with_blocks} of {PAGES} pages have short blocks"
    );
    let mut g = c.benchmark_group("stored records");
    g.throughput(Throughput::Elements(records.len() as u64));
    g.bench_function("whole record (DocRecord::decode)", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for r in &records {
                n += DocRecord::decode(black_box(r))
                    .expect("record")
                    .blocks
                    .len();
            }
            n
        })
    });
    g.bench_function("what the software-text counts take (decode_counted)", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for r in &records {
                let (url, fp) =
                    DocRecord::decode_counted(black_box(r), &mut blocks).expect("record");
                n += blocks.len() + url.len() + (fp & 1) as usize;
            }
            n
        })
    });
    g.bench_function("first seen (decode_first_seen)", |b| {
        b.iter(|| {
            let mut n = 0i64;
            for r in &records {
                n += DocRecord::decode_first_seen(black_box(r)).expect("record");
            }
            n
        })
    });
    g.finish();
}

criterion_group!(group, benches);
criterion_main!(group);
