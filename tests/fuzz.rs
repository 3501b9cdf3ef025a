//! The fuzz targets' inputs in the test suite: every input kept under `tests/data/fuzz/`
//! (`page-*`, `doc-*`, `index-*`, `strip-*`, named after the target) is replayed by the
//! default suite (`fuzz_regressions`), and `strip_paths_agree_on_mutated_pages` runs the
//! strip target's differential check over a fixed set of generated pages. The coverage-guided fuzzers are cargo fuzz targets (`fuzz/`, run by
//! `scripts/fuzz.sh`); `fuzz_for_a_while` is a mutation fuzzer over the same checks that
//! needs only the stable toolchain (`NEARDUP_FUZZ_STABLE=1 scripts/fuzz.sh`). Seeds are the
//! project's own fixtures.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use neardup::index::DocRecord;
use neardup::signature::{SignatureConfig, Signer};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for f in ["examples/pages.jsonl", "examples/bad.jsonl"] {
        for l in std::fs::read(root().join(f))
            .unwrap()
            .split(|b| *b == b'\n')
        {
            if !l.is_empty() {
                v.push(l.to_vec());
            }
        }
    }
    for e in std::fs::read_dir(root().join("tests/data"))
        .unwrap()
        .flatten()
    {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "html") {
            let html = std::fs::read_to_string(&p).unwrap();
            v.push(
                serde_json::to_vec(&serde_json::json!({"url": "https://f.test/", "html": html}))
                    .unwrap(),
            );
        }
    }
    v
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&[u8]] = &[
    b"<",
    b"<title>",
    b"</title >",
    b"<textarea>",
    b"<xmp>",
    b"<plaintext>",
    b"<svg><title>",
    b"</svg>",
    b"<template>",
    b"<head>",
    b"</head>",
    b"<body>",
    b"<a href=x>",
    b"</a>",
    b"<div class=\"post-content\">",
    b"<div class='comments'>",
    b"<nav id=x class=y class=popup>",
    b"</div>",
    b"<br/>",
    b"<script><!--",
    b"<script>",
    b"--!>",
    b"-->",
    b"<!DOCTYPE html>",
    b"<?xml?>",
    b"</ >",
    b"</>",
    b"&eacute",
    b"&notin;",
    b"&#x80;",
    b"&#",
    b"\r\n",
    b"\xef\xbb\xbf",
    b"\xc2\xa0",
    b"\xe2\x80\x83",
    b">",
    b"</",
    b"<!--",
    b"-->",
    b"<script>",
    b"</script>",
    b"<style>",
    b"&amp;",
    b"&#x110000;",
    b"&#0;",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"\xff",
    b"\0",
    b"the ",
    b"<div a=1 a=2>",
    b"<div role=dialog>",
    b"<section ROLE=\"navigation main\">",
    b"<td class=x role=\"&#x64;ialog\">",
    b"<div role=a role=dialog>",
    b"<ul Role='complementary'>",
    b"<div CLASS=comment ROLE=\"none Dialog\">",
    b"<div ro\0le=dialog cl\0ass=ad>",
    b"<div role=\"\tx\x0cdialog\r\n\">",
    b"<div role='&#9;dialog&nbsp;'>",
    b"<div role=\"dialog\x0b\">",
    b"<div id=dialog style=\"display:none\">",
    b"<div ID=Dialog2 HIDDEN>",
    b"<section class=\"x dialog\" style='DISPLAY : none !important' hidden=hidden>",
    b"<div id=dialog style=\"display:&#110;one\">",
    b"<div style=display:none style=display:block id=dialog>",
    b"<div hid\0den id=dialog sty\0le=display:none>",
    b"<td class=dialog style=\"color:red;display:\tnone\">",
    b"<div id=dialog style=\"display:none\0\">",
    b"<div id=dialog style='display:none\xc3\xa9'>",
    b"<![CDATA[",
    b"<p>",
    b"\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
];

fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(8) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let end = (at + rng.below(64)).min(v.len());
                v.drain(at.min(end)..end);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let cap = if rng.below(10) == 0 { 5000 } else { 4 };
                let times = 1 + rng.below(cap);
                for _ in 0..times {
                    v.splice(at..at, t.iter().copied());
                }
            }
            3 if !other.is_empty() => {
                let a = rng.below(other.len());
                let b = (a + rng.below(4096)).min(other.len());
                v.splice(at..at, other[a..b].iter().copied());
            }
            4 => v.truncate(at),
            _ => {
                let b = rng.next() as u8;
                v.insert(at.min(v.len()), b);
            }
        }
    }
    v
}

fn keep(name: &str, input: &[u8]) -> PathBuf {
    let dir = root().join("tests/data/fuzz");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}-{:08x}.bin", crc32fast::hash(input)));
    std::fs::write(&p, input).unwrap();
    p
}

#[test]
#[ignore]
fn fuzz_for_a_while() {
    let secs: u64 = std::env::var("NEARDUP_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let target = std::env::var("NEARDUP_FUZZ_TARGET").unwrap_or_else(|_| "page".into());
    let signer = Signer::new(&SignatureConfig::default()).unwrap();
    let seeds = seeds();
    let doc_seeds: Vec<Vec<u8>> = seeds
        .iter()
        .filter_map(|s| neardup::record::decode_page(s, 1 << 24).ok())
        .map(|p| {
            let signed = signer.sign(&p.page.html);
            DocRecord {
                id: p.doc_id,
                url: p.page.url,
                first_seen: 1_790_000_000,
                fingerprint: signed.fingerprint,
                sigs: signed.sigs,
                decision: neardup::index::Decision::plain(neardup::index::DecisionKind::Unique),
                delta: None,
                template: signed.template,
                identity: signed.identity,
                title: signed.title,
                blocks: signed.short.blocks,
                software: signed
                    .short
                    .sigs
                    .first()
                    .map(|b| b.1.clone())
                    .unwrap_or_default(),
            }
            .encode()
        })
        .collect();
    let index_seeds = index_seeds();
    let html_seeds = html_seeds();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ secs);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut runs = 0u64;
    std::panic::set_hook(Box::new(|_| {}));
    while Instant::now() < deadline {
        let pool = match target.as_str() {
            "doc" => &doc_seeds,
            "index" => &index_seeds,
            "strip" => &html_seeds,
            _ => &seeds,
        };
        let a = &pool[rng.below(pool.len())];
        let b = &pool[rng.below(pool.len())];
        let input = mutate(&mut rng, a, b);
        let r = std::panic::catch_unwind(|| match target.as_str() {
            "doc" => checks::doc(&input),
            "index" => checks::index(&input),
            "strip" => checks::strip(&input),
            _ => checks::page(&input),
        });
        if r.is_err() {
            let p = keep(&target, &input);
            let _ = std::panic::take_hook();
            panic!("target {target}: a panic, input kept in {}", p.display());
        }
        runs += 1;
    }
    let _ = std::panic::take_hook();
    eprintln!("fuzz {target}: {runs} inputs in {secs} s, no panic");
}

/// Seeds of the strip target: the fixture pages and the example records' HTML.
fn html_seeds() -> Vec<Vec<u8>> {
    seeds()
        .iter()
        .filter_map(|s| serde_json::from_slice::<serde_json::Value>(s).ok())
        .filter_map(|v| v["html"].as_str().map(|h| h.as_bytes().to_vec()))
        .collect()
}

/// The byte scanner and html5ever's tokenizer agree on pages made by mutating the fixtures
/// (a fixed sequence of generated inputs: markup, entities, raw text, comments, broken tags
/// and UTF-8 spliced in anywhere).
#[test]
fn strip_paths_agree_on_mutated_pages() {
    let seeds = html_seeds();
    assert!(seeds.len() >= 5, "{} seeds", seeds.len());
    let mut rng = Rng(0x005E_ED0F_5791);
    for i in 0..20_000 {
        let a = &seeds[rng.below(seeds.len())];
        let b = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, a, b);
        if std::panic::catch_unwind(|| checks::strip(&input)).is_err() {
            let p = keep("strip", &input);
            panic!("input {i}: the strip paths differ, kept in {}", p.display());
        }
    }
}

/// Seeds of the index target: each method, with an entry of a plausible key length in
/// each column family.
fn index_seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for method in 0..4u8 {
        v.push(vec![method]);
        for (family, key_len) in [
            (0u8, 8u8),
            (1, 8),
            (2, 12),
            (3, 18),
            (4, 16),
            (5, 16),
            (6, 8),
        ] {
            let mut input = vec![method, family, key_len, 8];
            input.extend((0..key_len).map(|i| i.wrapping_mul(37)));
            input.extend([0, 0, 0, 0, 0, 0, 0, 1]);
            v.push(input);
        }
    }
    v
}

/// Every input the fuzzers ever kept, and the seeds, still run without a panic.
#[test]
fn fuzz_regressions() {
    for s in seeds() {
        checks::page(&s);
    }
    for s in index_seeds() {
        checks::index(&s);
    }
    let dir = root().join("tests/data/fuzz");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        let p: &Path = &e.path();
        let bytes = std::fs::read(p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        match name.split('-').next() {
            Some("doc") => checks::doc(&bytes),
            Some("index") => checks::index(&bytes),
            Some("page") => checks::page(&bytes),
            Some("strip") => checks::strip(&bytes),
            _ => panic!(
                "{name}: a kept input is named after its target (page-, doc-, index-, strip-)"
            ),
        }
    }
}
