use super::*;
use crate::dedup::{Deduplicator, PageRef};
use crate::index::{DecisionKind, Index, IndexParams};

const RIVER: &str = include_str!("../../tests/data/story-river.html");
const RIVER_EDITED: &str = include_str!("../../tests/data/story-river-edited.html");
const RIVER_OTHER: &str = include_str!("../../tests/data/story-river-other-template.html");
const SCHOOL: &str = include_str!("../../tests/data/story-school.html");
const MARKET: &str = include_str!("../../tests/data/story-market.html");

/// The pages decided as `neardup eval` decides them (one Deduplicator, in order), and the
/// outcomes.
fn decided() -> (Deduplicator, Vec<(&'static str, crate::dedup::Outcome)>) {
    let mut dd = Deduplicator::new(Index::memory(IndexParams::default()).unwrap()).unwrap();
    let mut out = Vec::new();
    for (id, html) in [
        ("river", RIVER),
        ("school", SCHOOL),
        ("river-edited", RIVER_EDITED),
        ("market", MARKET),
        ("river-other", RIVER_OTHER),
    ] {
        let page = PageRef {
            id,
            url: "https://t.test/",
            first_seen: 0,
        };
        out.push((id, dd.process(page, html).unwrap()));
    }
    (dd, out)
}

#[test]
fn explain_gives_the_similarity_the_decision_computed() {
    let (dd, outcomes) = decided();
    let service = Service::new(dd.index().reader(), Limits::default()).unwrap();
    let mut dups = 0;
    for (id, o) in &outcomes {
        let x = service.explain(id, None, &Texts::default()).unwrap();
        assert_eq!(x.decision, o.decision.kind);
        assert_eq!(x.similarity, o.decision.similarity);
        if o.decision.kind == DecisionKind::Duplicate {
            dups += 1;
            let c = x.compared.as_ref().unwrap();
            assert_eq!(c.second, o.decision.canonical_id.clone().unwrap());
            // recomputed from the stored signatures: exactly the decision's similarity
            assert_eq!(Some(c.methods[0].similarity), o.decision.similarity);
            assert_eq!(c.methods[0].matches, Some(true));
            let s = &c.signatures;
            assert_eq!(s.shared.len() + s.only_first.len(), s.first);
            assert!(s.shared.iter().all(|h| h.starts_with("0x")));
        }
    }
    assert!(dups >= 2, "{outcomes:?}");
    // with the texts, the signatures read as strings
    let mut texts = Texts::default();
    texts.add_html(service.signer(), RIVER);
    texts.add_html(service.signer(), RIVER_EDITED);
    let x = service.explain("river-edited", None, &texts).unwrap();
    let s = x.compared.unwrap().signatures;
    assert!(s.shared.iter().all(|t| t.contains(':')), "{:?}", s.shared);
    // two unrelated pages: compared, no method matches
    let x = service.explain("river", Some("school"), &texts).unwrap();
    let c = x.compared.unwrap();
    assert_eq!(c.methods[0].matches, Some(false));
    assert!(matches!(
        service.explain("nope", None, &texts),
        Err(ServeError::NotFound(_))
    ));
    assert!(matches!(
        service.explain("river", Some("nope"), &texts),
        Err(ServeError::NotFound(_))
    ));
}

#[test]
fn group_answers_ids_and_inline_pages_and_caches() {
    let (dd, _) = decided();
    let service = Service::new(dd.index().reader(), Limits::default()).unwrap();
    let req = GroupRequest {
        items: vec![
            Item::Id("school".into()),
            Item::Id("river-edited".into()),
            Item::Page(PageItem {
                id: Some("inline".into()),
                text: None,
                html: Some(RIVER.into()),
            }),
            Item::Id("river-other".into()),
            Item::Id("market".into()),
        ],
        threshold: None,
    };
    let a = service.group(&req).unwrap();
    assert_eq!(a.groups.len(), 1, "{a:?}");
    let g = &a.groups[0];
    assert_eq!(g.representative.item, 1);
    let members: Vec<usize> = g.members.iter().map(|m| m.item).collect();
    assert_eq!(members, vec![2, 3]);
    assert!(!a.cached);
    let b = service.group(&req).unwrap();
    assert!(b.cached);
    assert_eq!(b.groups, a.groups);
    // a stricter τ splits what a looser one joins
    let strict = GroupRequest {
        threshold: Some(ThresholdKey(0.999)),
        ..req.clone()
    };
    let s = service.group(&strict).unwrap();
    assert!(s.groups.len() <= 1 && s.groups.iter().all(|g| g.members.len() < 2));
    // bounds
    let many = GroupRequest {
        items: (0..1001).map(|i| Item::Id(format!("x{i}"))).collect(),
        threshold: None,
    };
    assert!(matches!(service.group(&many), Err(ServeError::TooLarge(_))));
    let bad = GroupRequest {
        items: vec![],
        threshold: Some(ThresholdKey(0.0)),
    };
    assert!(matches!(
        service.group(&bad),
        Err(ServeError::BadRequest(_))
    ));
    let both = GroupRequest {
        items: vec![Item::Page(PageItem {
            id: None,
            text: Some("a".into()),
            html: Some("b".into()),
        })],
        threshold: None,
    };
    assert!(matches!(
        service.group(&both),
        Err(ServeError::BadRequest(_))
    ));
}

#[test]
fn preload_reads_the_most_recent_pages_only() {
    let (dd, outcomes) = decided();
    let limits = Limits {
        signature_cache_entries: 2,
        ..Limits::default()
    };
    let service = Service::new(dd.index().reader(), limits).unwrap();
    // the last two documents: market (unique) and river-other (a duplicate, via its delta)
    assert_eq!(service.preload(&|| false).unwrap(), 2);
    let (last, prev) = (outcomes[4].0, outcomes[3].0);
    assert!(service
        .signatures
        .get(service.signatures.key(last))
        .is_some());
    assert!(service
        .signatures
        .get(service.signatures.key(prev))
        .is_some());
    assert!(service
        .signatures
        .get(service.signatures.key("river"))
        .is_none());
}

#[test]
fn explain_says_when_a_pair_is_kept_apart() {
    use crate::dedup::KeptApart;
    use crate::signature::{Family, Signatures, Signed, TEXT_RULES};
    // pages signed whole (short pages: they have a template sample) with the same
    // signatures, in layouts with nothing in common unless the same number
    let whole = |k: u32| Signed {
        text: crate::text::Stripped::default(),
        sigs: Signatures::from_hashes((1..=40).map(|i| i * 7919).collect()),
        fingerprint: vec![0x5eed],
        tokens: 40,
        family: Family::Page,
        template: (0..32).map(|i| k * 1000 + i).collect(),
        identity: None,
        title: None,
        short: Default::default(),
    };
    // (id, URL, layout, canonical) decided in order, and the service over them
    type Page = (&'static str, &'static str, u32, Option<&'static str>);
    let decided = |text_rules: u32, pages: &[Page]| {
        let mut params = IndexParams::default();
        params.signature.text_rules = text_rules;
        let mut dd = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
        for &(id, url, k, canonical) in pages {
            let page = PageRef {
                id,
                url,
                first_seen: 1,
            };
            let o = dd.decide(page, &whole(k)).unwrap();
            assert_eq!(
                o.decision.canonical_id.as_deref(),
                canonical,
                "{text_rules}: {id}"
            );
        }
        Service::new(dd.index().reader(), Limits::default()).unwrap()
    };
    let schema = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/explain.v1.schema.json"
    ))
    .unwrap();
    let schema = jsonschema::validator_for(&serde_json::from_slice(&schema).unwrap()).unwrap();
    let kept_apart = |service: &Service, a: &str, b: &str| {
        let x = service.explain(a, Some(b), &Texts::default()).unwrap();
        // as published: the schema holds the field
        let json = serde_json::to_value(&x).unwrap();
        assert!(schema.is_valid(&json), "{json}");
        let c = x.compared.unwrap();
        // by similarity alone every pair matches
        assert_eq!(c.methods[0].matches, Some(true), "{a} {b}");
        c.kept_apart
    };
    for text_rules in [TEXT_RULES, 3, 2] {
        let late = text_rules >= 3;
        // a page of the same host in another layout: kept apart from text rules 3 on, in
        // either order; a page of another host and layout is a copy
        let service = decided(
            text_rules,
            &[
                ("c1", "https://shop.example/c/cameras", 1, None),
                (
                    "p1",
                    "http://WWW.Shop.Example:8080/p/1",
                    2,
                    (!late).then_some("c1"),
                ),
                ("o1", "https://other.example/c/cameras", 3, Some("c1")),
            ],
        );
        let host = late.then_some(KeptApart::SameHost);
        assert_eq!(kept_apart(&service, "p1", "c1"), host, "{text_rules}");
        assert_eq!(kept_apart(&service, "c1", "p1"), host, "{text_rules}");
        assert_eq!(kept_apart(&service, "o1", "c1"), None, "{text_rules}");
        assert_eq!(kept_apart(&service, "o1", "p1"), None, "{text_rules}");
        // a page is not kept apart from itself (its own template, its own host)
        assert_eq!(kept_apart(&service, "c1", "c1"), None, "{text_rules}");
        // a page of another host in the same layout: kept apart at every revision, in
        // either order (the later page's template decides)
        let service = decided(
            text_rules,
            &[
                ("c1", "https://shop.example/c/cameras", 1, None),
                ("t1", "https://mirror.example/c/cameras", 1, None),
            ],
        );
        let template = Some(KeptApart::SameTemplate);
        assert_eq!(kept_apart(&service, "t1", "c1"), template, "{text_rules}");
        assert_eq!(kept_apart(&service, "c1", "t1"), template, "{text_rules}");
        // unique pages are compared with nothing unless asked
        for id in ["c1", "t1"] {
            let x = service.explain(id, None, &Texts::default()).unwrap();
            assert!(x.compared.is_none(), "{id}: unique, compared with nothing");
        }
    }
    let service = decided(
        TEXT_RULES,
        &[
            ("c1", "https://shop.example/c/cameras", 1, None),
            ("o1", "https://other.example/c/cameras", 3, Some("c1")),
        ],
    );
    // a duplicate is never kept apart from its canonical page
    let x = service.explain("o1", None, &Texts::default()).unwrap();
    assert_eq!(x.compared.unwrap().kept_apart, None);
}

#[test]
fn explain_says_when_two_pages_of_one_host_were_signed_on_its_template() {
    use crate::dedup::KeptApart;
    use crate::signature::{Family, ShortBlocks, Signatures, Signed, TEXT_RULES};
    // one signature set and one title (a blog's box and its name); the posts differ: of each
    // page's five blocks only the box (a long block, bit 0 set) is the other's too
    let post = |k: u32| Signed {
        text: crate::text::Stripped::default(),
        sigs: Signatures::from_hashes((1..=40).map(|i| i * 7919).collect()),
        fingerprint: vec![0x5eed],
        tokens: 400,
        family: Family::Spotsigs,
        template: Vec::new(),
        identity: Some(u64::from(k)),
        title: Some(77),
        short: ShortBlocks {
            blocks: [1001]
                .into_iter()
                .chain((0..4).map(|i| (k * 100 + i) * 2))
                .collect::<std::collections::BTreeSet<u32>>()
                .into_iter()
                .collect(),
            sigs: Vec::new(),
        },
    };
    for (text_rules, apart) in [(TEXT_RULES, true), (6, false)] {
        let mut params = IndexParams::default();
        params.signature.text_rules = text_rules;
        let mut dd = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
        for (id, k) in [("a", 1), ("b", 2)] {
            let page = PageRef {
                id,
                url: &format!("https://blog.example/{id}"),
                first_seen: 1,
            };
            dd.decide(page, &post(k)).unwrap();
        }
        let b = dd.index().find_id("b").unwrap().unwrap();
        assert_eq!(
            b.decision.canonical_id.as_deref(),
            (!apart).then_some("a"),
            "{text_rules}"
        );
        let service = Service::new(dd.index().reader(), Limits::default()).unwrap();
        let x = service.explain("b", Some("a"), &Texts::default()).unwrap();
        assert_eq!(
            x.compared.unwrap().kept_apart,
            apart.then_some(KeptApart::OtherText),
            "{text_rules}"
        );
    }
}

#[test]
fn explain_says_when_pages_of_one_host_are_below_its_threshold() {
    use crate::dedup::HOST_THRESHOLD;
    use crate::signature::{Family, Signatures, Signed, TEXT_RULES};
    // two long pages (no template sample) sharing 60 of their 100 distinct signatures
    let long = |from: u32| Signed {
        text: crate::text::Stripped::default(),
        sigs: Signatures::from_hashes((from..from + 80).map(|i| i * 7919).collect()),
        fingerprint: vec![0x5eed],
        tokens: 800,
        family: Family::Spotsigs,
        template: Vec::new(),
        identity: None,
        title: None,
        short: Default::default(),
    };
    for (text_rules, second_url, canonical, threshold) in [
        (
            TEXT_RULES,
            "https://www.news.example/b",
            None,
            Some(HOST_THRESHOLD),
        ),
        (9, "https://www.news.example/b", Some("a"), None),
        (TEXT_RULES, "https://other.example/b", Some("a"), None),
    ] {
        let mut params = IndexParams::default();
        params.signature.text_rules = text_rules;
        let mut dd = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
        for (id, url, from, expected) in [
            ("a", "https://news.example/a", 1, None),
            ("b", second_url, 21, canonical),
        ] {
            let page = PageRef {
                id,
                url,
                first_seen: 1,
            };
            let o = dd.decide(page, &long(from)).unwrap();
            assert_eq!(o.decision.canonical_id.as_deref(), expected, "{text_rules}");
        }
        let service = Service::new(dd.index().reader(), Limits::default()).unwrap();
        let c = service
            .explain("b", Some("a"), &Texts::default())
            .unwrap()
            .compared
            .unwrap();
        assert!((c.methods[0].similarity - 0.6).abs() < 1e-9);
        assert_eq!(c.host_threshold, threshold, "{text_rules} {second_url}");
        assert_eq!(c.kept_apart, None);
        // matched by similarity at τ, unless the host's threshold applies
        assert_eq!(c.methods[0].matches, Some(threshold.is_none()));
    }
}
