//! The fuzz targets' checks, shared by the cargo fuzz targets (fuzz/fuzz_targets/) and the
//! test suite (tests/fuzz.rs), which replays every kept input and runs a mutation fuzzer on
//! the stable toolchain. Each check takes arbitrary bytes: an error is fine, a panic is a bug.

use std::sync::OnceLock;

use neardup::dedup::{Deduplicator, PageRef};
use neardup::index::{Batch, Column, DocRecord, Index, IndexParams, Method};
use neardup::prepare::prepare;
use neardup::signature::{SignatureConfig, Signer};

fn signer() -> &'static Signer {
    static S: OnceLock<Signer> = OnceLock::new();
    S.get_or_init(|| Signer::new(&SignatureConfig::default()).expect("default signer"))
}

/// decode → strip → sign → fingerprint: the bytes as a page record (the stage's and file
/// mode's path, its decoding checked against the JSON library's), and as the HTML of a page.
pub fn page(data: &[u8]) {
    let s = signer();
    let _ = prepare(data, s, 1 << 24);
    // the decoder's fast path accepts only what the JSON library accepts, and decodes it
    // to the same page (or refuses it for the same reason)
    use neardup::record::{decode_page, decode_page_general};
    match (
        decode_page(data, 1 << 24),
        decode_page_general(data, 1 << 24),
    ) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.page, b.page, "the fast path and the JSON library differ");
            assert_eq!((a.doc_id, a.fetched_at), (b.doc_id, b.fetched_at));
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "the two decoders refuse differently"),
        (a, b) => panic!("one decoder refuses: fast path {a:?}, JSON library {b:?}"),
    }
    let signed = s.sign(&String::from_utf8_lossy(data));
    assert_eq!(signed.fingerprint.len(), 1, "one 64-bit fingerprint");
}

/// The two tokenizing strip paths on the bytes as HTML: the byte scanner (the default) must
/// give exactly what html5ever's tokenizer (the reference) gives.
pub fn strip(data: &[u8]) {
    use neardup::text::{strip, StripMode, StripOptions};
    let html = String::from_utf8_lossy(data);
    let run = |mode| {
        strip(
            &html,
            &StripOptions {
                mode,
                max_bytes: 1 << 24,
                ..Default::default()
            },
        )
    };
    let (bytes, tokens) = (run(StripMode::Bytes), run(StripMode::Tokens));
    assert_eq!(
        bytes, tokens,
        "the byte scanner and html5ever's tokenizer differ"
    );
}

/// The index's document record decoding: what decodes re-encodes to a record that decodes
/// to the same fields.
pub fn doc(data: &[u8]) {
    if let Ok(d) = DocRecord::decode(data) {
        let again = DocRecord::decode(&d.encode()).expect("a re-encoded record decodes");
        assert_eq!(again.id, d.id);
        assert_eq!(again.url, d.url);
        assert_eq!(again.first_seen, d.first_seen);
        assert_eq!(again.fingerprint, d.fingerprint);
        assert_eq!(again.encode(), d.encode());
    }
}

const PAGES: [&str; 3] = [
    "<html><body><article><p>The council said on Monday that the new bridge over the river \
     would open in the spring, and the mayor said it is the largest project the city has \
     built in a decade, with the costs shared by the state and the county.</p></article>\
     </body></html>",
    "<html><body><div id=story><p>The council said on Monday that the new bridge over the \
     river would open in the spring, and the mayor said it is the largest project the city \
     has built in a decade.</p></div><div class=ad>Buy now</div></body></html>",
    "<html><body><main><p>A storm is expected to reach the coast by the weekend, and the \
     weather service said that the rain will be the heaviest of the year in the north.</p>\
     </main></body></html>",
];

/// Index keys and values: an index (the first byte picks one of the methods) holding
/// two real pages gets arbitrary entries (family, key length, value length, key, value) in
/// any of its column families, then every read path runs over it: decisions for new and
/// known pages, lookups by id and number, statistics, expiry.
pub fn index(data: &[u8]) {
    let Some((&first, mut rest)) = data.split_first() else {
        return;
    };
    let method = Method::ALL[first as usize % Method::ALL.len()];
    let mut params = IndexParams {
        method,
        min_signatures: 1,
        ..Default::default()
    };
    params.signature.features = method.features();
    let mut d = Deduplicator::new(Index::memory(params).expect("a memory index opens"))
        .expect("a fresh index");
    for (i, html) in PAGES[..2].iter().enumerate() {
        let id = format!("page-{i}");
        let page = PageRef {
            id: &id,
            url: "https://a.test/",
            first_seen: 1_790_000_000,
        };
        d.process(page, html)
            .expect("a fresh index takes real pages");
    }
    let mut batch = Batch::new();
    while let [f, kl, vl, tail @ ..] = rest {
        let (kl, vl) = (*kl as usize % 48, *vl as usize);
        if tail.len() < kl {
            break;
        }
        let (key, tail) = tail.split_at(kl);
        let (value, tail) = tail.split_at(vl.min(tail.len()));
        batch.put(Column::ALL[*f as usize % Column::ALL.len()], key, value);
        rest = tail;
    }
    d.index()
        .store()
        .write(batch)
        .expect("a memory store takes any batch");
    for (i, html) in PAGES.iter().enumerate() {
        let id = format!("page-{i}");
        let page = PageRef {
            id: &id,
            url: "https://b.test/",
            first_seen: 1_790_000_100,
        };
        let _ = d.process(page, html);
    }
    let index = d.index_mut();
    for n in 0..4 {
        let _ = index.doc(n);
    }
    let _ = index.find_id("page-0");
    let _ = index.stats();
    let _ = index.expire(1_790_000_050);
    let _ = index.expire(i64::MAX);
}
