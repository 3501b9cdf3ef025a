use super::*;
use crate::index::{DecisionKind, Found, Index, IndexParams, Method};

const RIVER: &str = include_str!("../../tests/data/story-river.html");
const RIVER_B: &str = include_str!("../../tests/data/story-river-other-template.html");
const RIVER_EDITED: &str = include_str!("../../tests/data/story-river-edited.html");
const SCHOOL: &str = include_str!("../../tests/data/story-school.html");
const MARKET: &str = include_str!("../../tests/data/story-market.html");
const NAV: &str = include_str!("../../tests/data/nav-only.html");

fn page(id: &str) -> PageRef<'_> {
    PageRef {
        id,
        url: id,
        first_seen: 1,
    }
}

fn run(method: Method) -> Vec<(String, Outcome)> {
    let params = IndexParams {
        method,
        ..Default::default()
    };
    let mut d = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
    let pages = [
        ("river", RIVER),
        ("school", SCHOOL),
        ("river-b", RIVER_B),
        ("market", MARKET),
        ("nav", NAV),
        ("river-edited", RIVER_EDITED),
        ("river-copy", RIVER),
        ("river", RIVER_B), // a redelivered id
    ];
    pages
        .iter()
        .map(|(id, html)| (id.to_string(), d.process(page(id), html).unwrap()))
        .collect()
}

#[test]
fn fixture_stream_decisions() {
    for method in [Method::Chain, Method::Spotsigs] {
        let out = run(method);
        let kind = |i: usize| out[i].1.decision.kind;
        let canon = |i: usize| out[i].1.decision.canonical_id.clone();
        assert_eq!(kind(0), DecisionKind::Unique, "{method}");
        assert_eq!(
            kind(1),
            DecisionKind::Unique,
            "{method}: same template, other story"
        );
        assert_eq!(
            kind(2),
            DecisionKind::Duplicate,
            "{method}: river in another template"
        );
        assert_eq!(canon(2).as_deref(), Some("river"));
        assert_eq!(kind(3), DecisionKind::Unique, "{method}: market");
        assert_eq!(kind(4), DecisionKind::Skipped, "{method}: navigation only");
        assert_eq!(kind(5), DecisionKind::Duplicate, "{method}: edited river");
        assert_eq!(canon(5).as_deref(), Some("river"));
        assert_eq!(kind(6), DecisionKind::Duplicate, "{method}: exact copy");
        assert_eq!(out[6].1.decision.similarity, Some(1.0));
        // a repeated id gets its stored decision, never "duplicate of itself"
        assert!(out[7].1.repeated);
        assert_eq!(out[7].1.decision, out[0].1.decision);
    }
}

#[test]
fn chain_finds_exact_copies_through_the_fingerprint_index() {
    let out = run(Method::Chain);
    let copy = &out[6].1.decision;
    assert_eq!(copy.found_by, Some(Found::AlgG));
    assert_eq!(copy.hamming, Some(0));
}

#[test]
fn decisions_survive_a_reopen_and_replay_identically() {
    let dir = tempfile::tempdir().unwrap();
    let params = IndexParams::default();
    let stream = [("r1", RIVER), ("s1", SCHOOL), ("r2", RIVER_B)];
    let first: Vec<_> = {
        let mut d =
            Deduplicator::new(Index::open_dir(dir.path(), params.clone()).unwrap()).unwrap();
        stream
            .iter()
            .map(|(id, h)| d.process(page(id), h).unwrap())
            .collect()
    };
    let mut d = Deduplicator::new(Index::open_dir(dir.path(), params).unwrap()).unwrap();
    for ((id, h), before) in stream.iter().zip(first) {
        let again = d.process(page(id), h).unwrap();
        assert!(again.repeated);
        assert_eq!(again.decision, before.decision);
    }
}

/// The reference: the best unique document by (similarity, earliest), scanning them all.
fn brute_force(uniques: &[(u64, Vec<u32>)], q: &[u32], tau: f64) -> Option<(u64, f64)> {
    let mut best: Option<(u64, f64)> = None;
    for (num, set) in uniques {
        let sim = crate::signature::similarity(q, set, crate::signature::Measure::Jaccard);
        if sim >= tau && best.is_none_or(|(_, s)| sim > s) {
            best = Some((*num, sim));
        }
    }
    best
}

mod exact {
    use super::*;
    use crate::signature::{Signatures, Signed};
    use proptest::prelude::*;

    fn sets() -> impl Strategy<Value = Vec<Vec<u32>>> {
        // small alphabets so that pages overlap at every similarity
        prop::collection::vec(
            prop::collection::btree_set(0u32..40, 10..30).prop_map(|s| s.into_iter().collect()),
            1..120,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The default method decides exactly as a scan of every unique document would, on
        /// RocksDB, with a reopen (the lists rebuilt) half way through.
        #[test]
        fn default_method_equals_brute_force(pages in sets(), tau in prop::sample::select(vec![0.3, 0.5, 0.7, 0.9])) {
            let dir = tempfile::tempdir().unwrap();
            let params = IndexParams { threshold: tau, ..Default::default() };
            assert_eq!(params.method, Method::Spotsigs);
            let mut d = Deduplicator::new(Index::open_dir(dir.path(), params.clone()).unwrap()).unwrap();
            let mut uniques: Vec<(u64, Vec<u32>)> = Vec::new();
            for (i, set) in pages.iter().enumerate() {
                if i == pages.len() / 2 {
                    drop(d);
                    d = Deduplicator::new(Index::open_dir(dir.path(), params.clone()).unwrap()).unwrap();
                }
                let signed = Signed {
                    sigs: Signatures::from_hashes(set.clone()),
                    fingerprint: vec![i as u64],
                    ..Default::default()
                };
                let id = format!("p{i}");
                let out = d.decide(page(&id), &signed).unwrap();
                match brute_force(&uniques, set, tau) {
                    Some((num, sim)) => {
                        prop_assert_eq!(out.decision.kind, DecisionKind::Duplicate);
                        prop_assert_eq!(out.decision.canonical_id, Some(format!("p{num}")));
                        prop_assert!((out.decision.similarity.unwrap() - sim).abs() < 1e-12);
                    }
                    None => {
                        prop_assert_eq!(out.decision.kind, DecisionKind::Unique);
                        uniques.push((i as u64, set.clone()));
                    }
                }
            }
        }
    }
}
