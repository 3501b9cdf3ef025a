use super::*;
use crate::index::{DecisionKind, Found, Index, IndexParams, Method};
use crate::signature::{Family, TEXT_RULES};

const RIVER: &str = include_str!("../../../../tests/data/story-river.html");
const RIVER_B: &str = include_str!("../../../../tests/data/story-river-other-template.html");
const RIVER_EDITED: &str = include_str!("../../../../tests/data/story-river-edited.html");
const SCHOOL: &str = include_str!("../../../../tests/data/story-school.html");
const MARKET: &str = include_str!("../../../../tests/data/story-market.html");
const NAV: &str = include_str!("../../../../tests/data/nav-only.html");

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

/// `n` sentences of prose, different for every seed, each of five words `word` makes from
/// a random number.
fn prose(seed: u64, n: usize, word: impl Fn(u64) -> String) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word(x)
    };
    (0..n)
        .map(|_| {
            format!(
                "The {} was a {} of the {} and there is the {} in {}.",
                next(),
                next(),
                next(),
                next(),
                next()
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
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

mod sentences {
    use super::*;

    const STORY: [&str; 12] = [
        "The regional council approved a new tram line through the harbour district on Tuesday evening.",
        "Construction is expected to begin next spring and to last about three years.",
        "The line will connect the central station with the ferry terminal and the university campus.",
        "Officials estimate the total cost at roughly four hundred million, shared with the national government.",
        "Shop owners along the route worry that the works will keep customers away for months.",
        "The council promised a compensation fund for businesses that lose more than a fifth of their turnover.",
        "Environmental groups welcomed the decision but asked for more trees along the new tracks.",
        "A citizens' initiative had collected twelve thousand signatures against the original route.",
        "The revised plan moves two stops closer to the old market hall.",
        "Trams are scheduled to run every six minutes during the morning and evening peaks.",
        "Tickets will be valid on buses and ferries without any surcharge.",
        "The first trial runs are planned for the autumn before the official opening.",
    ];

    const OTHER: [&str; 6] = [
        "A small bakery in the old town has won the national prize for its rye bread.",
        "The owners opened the shop fifteen years ago after moving from the countryside.",
        "They bake through the night and sell out most mornings before ten o'clock.",
        "The jury praised the crust, the slow fermentation and the use of local flour.",
        "Customers queued around the block on Saturday to congratulate the family.",
        "The prize comes with a trip to an international baking fair next year.",
    ];

    fn html(template: &str, sentences: &[String]) -> String {
        let body: String = sentences
            .chunks(3)
            .map(|p| format!("<p>{}</p>", p.join(" ")))
            .collect();
        format!(
            "<html><head><title>News</title></head><body><nav><a href=/>Home</a> \
             <a href=/city>City</a> <a href=/sport>Sport</a></nav><div class={template}>\
             <article>{body}</article></div><footer>Contact the \
             newsroom. Read our privacy policy. All rights reserved.</footer></body></html>"
        )
    }

    fn owned(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    fn sentence_dedup() -> Deduplicator {
        let mut params = IndexParams {
            method: Method::Sentences,
            min_signatures: Method::Sentences.default_min_signatures(),
            ..Default::default()
        };
        params.signature.features = Method::Sentences.features();
        Deduplicator::new(Index::memory(params).unwrap()).unwrap()
    }

    #[test]
    fn near_copies_are_found_and_other_stories_are_not() {
        let story = owned(&STORY);
        let mut dropped = story.clone();
        dropped.remove(4);
        let mut edited = story.clone();
        edited[1] = edited[1].replace("next spring", "early next year");
        edited[9] = edited[9].replace("six", "eight");
        let mut d = sentence_dedup();
        let pages = [
            ("story", html("story", &story)),
            ("other", html("story", &owned(&OTHER))),
            ("dropped", html("article-body", &dropped)),
            ("edited", html("story", &edited)),
            ("short", html("story", &story[..2])),
        ];
        let out: Vec<Decision> = pages
            .iter()
            .map(|(id, h)| d.process(page(id), h).unwrap().decision)
            .collect();
        assert_eq!(out[0].kind, DecisionKind::Unique);
        assert_eq!(
            out[1].kind,
            DecisionKind::Unique,
            "another story, same template"
        );
        for (i, sim) in [(2, 11.0 / 12.0), (3, 10.0 / 14.0)] {
            assert_eq!(out[i].kind, DecisionKind::Duplicate, "{}", pages[i].0);
            assert_eq!(out[i].canonical_id.as_deref(), Some("story"));
            assert_eq!(out[i].found_by, Some(Found::Sentences));
            let got = out[i].similarity.unwrap();
            assert!((got - sim).abs() < 1e-9, "{}: {got} != {sim}", pages[i].0);
        }
        // two sentences are fewer than the five a sentence page needs
        assert_eq!(out[4].kind, DecisionKind::Skipped);
    }

    #[test]
    fn the_signer_follows_the_index_family() {
        let d = sentence_dedup();
        let signed = d.signer().sign(&html("story", &owned(&STORY)));
        // the article's sentences, not the menu's or the footer's
        assert_eq!(signed.sigs.set_len(), STORY.len());
        let strings = d
            .signer()
            .signature_strings(&html("story", &owned(&STORY[..1])));
        assert_eq!(
            strings,
            ["the region council approv new tram line through the harbour district tuesday even"]
        );
    }
}

/// A short page is judged: matched with its copy in another site's template, never with a
/// page of its own template, however alike their few words are.
#[test]
fn short_pages_match_across_templates_only() {
    let with_teaser = |name: &str, title: &str, body: &str, teaser: &str| {
        let menu: String = (0..25)
            .map(|i| format!("<li><a href=\"/s/{i}\">{name} section {i}</a></li>"))
            .collect();
        format!(
            "<html><head><title>{title} | {name}</title></head><body><header>{name} News</header>\
             <nav><ul>{menu}</ul></nav><article><p>{body}</p></article>\
             <aside><a href=\"/t\">{teaser}</a></aside>\
             <footer>Copyright {name}. All rights reserved.</footer></body></html>"
        )
    };
    let site = |name: &str, body: &str| with_teaser(name, "Brush fire", body, "Most read");
    let brief = "Firefighters contained a brush fire near the reservoir on Tuesday after it \
                 burned for most of the afternoon, and the county said no homes were damaged.";
    let edited = brief.replace("Tuesday", "Tuesday evening");
    let other = "The library will open its new reading room to the public next month, the \
                 city said, with longer hours on weekends and a space for children.";
    let mut d = Deduplicator::new(Index::memory(IndexParams::default()).unwrap()).unwrap();
    let signed = d.signer().sign(&site("Valley Courier", brief));
    assert_eq!(signed.family, Family::Words);
    assert!(signed.sigs.set_len() >= 10, "{}", signed.sigs.set_len());
    assert!(!signed.template.is_empty());

    let first = d
        .process(page("a1"), &site("Valley Courier", brief))
        .unwrap();
    assert_eq!(first.decision.kind, DecisionKind::Unique);
    // the same signed words on a page of the same template about another item (another
    // title, other text elsewhere): not evidence of a copy (the words can be the site's own)
    let same_site = d
        .process(
            page("a2"),
            &with_teaser(
                "Valley Courier",
                "Budget vote",
                brief,
                "Council votes on the budget",
            ),
        )
        .unwrap();
    assert_eq!(same_site.decision.kind, DecisionKind::Unique);
    // the same item (its title) and the same signed words, the teaser list changed since:
    // that page again
    let refetched = d
        .process(
            page("a4"),
            &with_teaser(
                "Valley Courier",
                "Brush fire",
                brief,
                "Latest: the harbour festival",
            ),
        )
        .unwrap();
    assert_eq!(refetched.decision.kind, DecisionKind::Duplicate);
    assert_eq!(refetched.decision.canonical_id.as_deref(), Some("a1"));
    // the same whole page under another URL is that page: a duplicate of it
    let identical = d
        .process(page("a3"), &site("Valley Courier", brief))
        .unwrap();
    assert_eq!(identical.decision.kind, DecisionKind::Duplicate);
    assert_eq!(identical.decision.canonical_id.as_deref(), Some("a1"));
    // republished by another site, lightly edited: a duplicate of the first
    let copy = d
        .process(page("b1"), &site("Harbor Times", &edited))
        .unwrap();
    assert_eq!(copy.decision.kind, DecisionKind::Duplicate);
    assert_eq!(copy.decision.canonical_id.as_deref(), Some("a1"));
    // another story on that site is not
    let unrelated = d.process(page("b2"), &site("Harbor Times", other)).unwrap();
    assert_eq!(unrelated.decision.kind, DecisionKind::Unique);
    // the sample is stored with the short page
    let rec = d.index().find_id("a1").unwrap().unwrap();
    assert_eq!(rec.template, signed.template);
}

/// A pair of which either page is short (signed by its word shingles, or whole: it has a
/// template sample) is matched across hosts only, in whichever order the two come: the
/// page's few signatures, or its whole page's, hold its site's own text (a consent panel's,
/// a notice), which every page of the site shares whatever its layout (text rules 3).
/// Two pages signed by their regions are not affected, nor are indexes of text rules 2.
#[test]
fn short_pages_match_other_hosts_only() {
    let sigs = Signatures::from_hashes((1..=40).map(|i| i * 7919).collect());
    // block samples of layouts with nothing in common: never one template
    let layout = |k: u32| (0..32).map(|i| k * 1000 + i).collect::<Vec<u32>>();
    let signed = |family: Family, template: Vec<u32>| Signed {
        text: crate::text::Stripped::default(),
        sigs: sigs.clone(),
        fingerprint: vec![0x5eed],
        tokens: 40,
        family,
        template,
        identity: None,
        title: None,
        short: Default::default(),
    };
    let whole = |k: u32| signed(Family::Page, layout(k));
    let region = || signed(Family::Spotsigs, Vec::new());
    let at = |id: &'static str, url: &'static str| PageRef {
        id,
        url,
        first_seen: 1,
    };
    type Step = (&'static str, &'static str, Signed, Option<&'static str>);
    for method in [Method::Spotsigs, Method::Chain] {
        for text_rules in [TEXT_RULES, 3, 2] {
            let same_host = |canonical: &'static str| (text_rules < 3).then_some(canonical);
            // the short page first: another page of its site in another layout, signed
            // whole or by its region, is not its copy; a page of another host is
            let short_first: Vec<Step> = vec![
                ("c1", "https://shop.example/c/cameras", whole(1), None),
                (
                    "p1",
                    "http://WWW.Shop.Example:8080/p/1",
                    whole(2),
                    same_host("c1"),
                ),
                (
                    "a1",
                    "https://shop.example/blog/1",
                    region(),
                    same_host("c1"),
                ),
                (
                    "o1",
                    "https://mirror.example/c/cameras",
                    whole(3),
                    Some("c1"),
                ),
            ];
            // the page signed by its region first: a short page of its host is not its copy
            let region_first: Vec<Step> = vec![
                ("a1", "https://shop.example/blog/1", region(), None),
                (
                    "c1",
                    "https://shop.example/c/cameras",
                    whole(1),
                    same_host("a1"),
                ),
                (
                    "o1",
                    "https://mirror.example/c/cameras",
                    whole(3),
                    Some("a1"),
                ),
                ("a2", "https://shop.example/blog/2", region(), Some("a1")),
            ];
            for steps in [short_first, region_first] {
                let mut params = IndexParams {
                    method,
                    ..Default::default()
                };
                params.signature.text_rules = text_rules;
                let mut d = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
                for (id, url, s, want) in steps {
                    let o = d.decide(at(id, url), &s).unwrap();
                    let got = (o.decision.kind, o.decision.canonical_id.as_deref());
                    let want = match want {
                        Some(c) => (DecisionKind::Duplicate, Some(c)),
                        None => (DecisionKind::Unique, None),
                    };
                    assert_eq!(got, want, "{method} text rules {text_rules}: {id}");
                }
            }
        }
    }
}

/// Decides page `id` (its HTML `html`) first seen at `seen` and tells the schedule `r`.
fn decide_at(d: &mut Deduplicator, r: &mut Retention, id: &str, html: &str, seen: i64) {
    d.process(
        PageRef {
            id,
            url: id,
            first_seen: seen,
        },
        html,
    )
    .unwrap();
    r.decided(seen);
}

/// The retention schedule: a sweep is due every 10,000 decided pages and removes the pages
/// first seen longer than the window before the newest.
#[test]
fn retention_sweeps_every_ten_thousand_pages_behind_the_newest() {
    let mut d = Deduplicator::new(Index::memory(IndexParams::default()).unwrap()).unwrap();
    let mut r = Retention::new(Some(std::time::Duration::from_secs(100)), None).unwrap();
    assert_eq!(r.sweep(d.index_mut()).unwrap(), 0, "nothing decided yet");
    for (id, html, seen) in [("old", RIVER, 1_000), ("new", SCHOOL, 1_150)] {
        decide_at(&mut d, &mut r, id, html, seen);
    }
    assert!(!r.due());
    for _ in 2..Retention::EVERY {
        r.decided(1_150);
    }
    assert!(r.due());
    assert_eq!(
        r.sweep(d.index_mut()).unwrap(),
        1,
        "first seen 150 s before the newest"
    );
    assert!(!r.due());
    assert!(d.index().find_id("old").unwrap().is_none());
    assert!(d.index().find_id("new").unwrap().is_some());
}

/// The window removes a twentieth of itself at a time: once it removed, a sweep removes
/// again only when its cutoff has advanced by [`Retention::STEP`] of the window, so a page
/// first seen just before the cutoff stays until then.
#[test]
fn the_window_removes_once_its_cutoff_advanced_a_twentieth_of_it() {
    let mut d = Deduplicator::new(Index::memory(IndexParams::default()).unwrap()).unwrap();
    let mut r = Retention::new(Some(std::time::Duration::from_secs(100)), None).unwrap();
    decide_at(&mut d, &mut r, "old", RIVER, 1_000);
    decide_at(&mut d, &mut r, "mid", SCHOOL, 1_052);
    decide_at(&mut d, &mut r, "new", MARKET, 1_150);
    // the first sweep removes at once: the cutoff 1,050 leaves "mid"
    assert_eq!(r.sweep(d.index_mut()).unwrap(), 1);
    // newest 1,154: the cutoff 1,054 is past "mid" but 4 s on, under 5 s (a twentieth)
    r.decided(1_154);
    assert_eq!(r.sweep(d.index_mut()).unwrap(), 0);
    assert!(d.index().find_id("mid").unwrap().is_some());
    // newest 1,155: the cutoff has advanced by a twentieth of the window
    r.decided(1_155);
    assert_eq!(r.sweep(d.index_mut()).unwrap(), 1);
    assert!(d.index().find_id("mid").unwrap().is_none());
    assert!(d.index().find_id("new").unwrap().is_some());
    // the end of a run removes all the window leaves out, however little it advanced
    // (a page first seen 1,050 comes late; newest 1,159: 4 s on from 1,055)
    decide_at(&mut d, &mut r, "late", RIVER_B, 1_050);
    r.decided(1_159);
    assert_eq!(r.sweep(d.index_mut()).unwrap(), 0);
    assert_eq!(r.finish(d.index_mut()).unwrap(), 1);
    assert!(d.index().find_id("late").unwrap().is_none());
}

/// The page cap: a sweep that finds more pages than the cap removes the oldest (the
/// earliest decided) down to 95 % of it; the index counts its pages across a page stored
/// again under a new number and across a reopen, and a removed page is decided anew.
#[test]
fn a_page_cap_trims_the_oldest_pages_to_ninety_five_percent_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let page = |i: usize| {
        format!(
            "<html><body><article><p>Report {i}: the council of district {i} met on the \
             question of the bridge over the river, and the mayor said that the work would \
             start in the spring of the year {}, after the vote of the members.</p></article>\
             </body></html>",
            1900 + i
        )
    };
    let mut d =
        Deduplicator::new(Index::open_dir(dir.path(), IndexParams::default()).unwrap()).unwrap();
    let mut r = Retention::new(None, Some(100)).unwrap();
    assert!(
        Retention::new(None, None).is_none(),
        "nothing to keep: no schedule"
    );
    for i in 0..120 {
        let id = format!("p{i}");
        d.process(
            PageRef {
                id: &id,
                url: &id,
                first_seen: 1_000,
            },
            &page(i),
        )
        .unwrap();
        r.decided(1_000);
    }
    assert_eq!(d.index().pages(), 120);
    // a page stored again under a new number is still one page
    let again = d.index().find_id("p119").unwrap().unwrap();
    d.index_mut().put(&again).unwrap();
    assert_eq!(d.index().pages(), 120);
    assert_eq!(r.sweep(d.index_mut()).unwrap(), 25, "120 pages down to 95");
    assert_eq!(d.index().pages(), 95);
    assert!(
        d.index().find_id("p24").unwrap().is_none(),
        "the oldest went"
    );
    assert!(
        d.index().find_id("p25").unwrap().is_some(),
        "the newest stay"
    );
    assert_eq!(r.sweep(d.index_mut()).unwrap(), 0, "under the cap");
    drop(d);
    let mut d =
        Deduplicator::new(Index::open_dir(dir.path(), IndexParams::default()).unwrap()).unwrap();
    assert_eq!(d.index().pages(), 95, "counted again at open");
    let o = d
        .process(
            PageRef {
                id: "p0",
                url: "p0",
                first_seen: 1_000,
            },
            &page(0),
        )
        .unwrap();
    assert_eq!(
        o.decision.kind,
        DecisionKind::Unique,
        "a removed page is new again"
    );
    assert_eq!(d.index().pages(), 96);
}

/// Identical copies are duplicates (text rules 5): a page and the same page under another
/// URL, whatever its length, host, template or method, and whatever pages of its site came
/// before; a copy that differs from it only in its figures (a view count, a date) too.
mod identical {
    use super::*;
    use proptest::prelude::*;

    const WORDS: &str = "the council said on tuesday that it would open a new reading room \
        in the old library and there will be longer hours for the children of the town while \
        the river rose after a week of rain and the mayor was not sure when it could be \
        crossed again because the bridge is closed for repairs that have taken all year";

    /// `n` words drawn from [`WORDS`] by `seed` (a small generator: the same seed, the same
    /// text).
    fn words(seed: u64, n: usize) -> String {
        let pool: Vec<&str> = WORDS.split_whitespace().collect();
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                pool[(x % pool.len() as u64) as usize]
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A page of site `site` (its navigation of `nav` links and its footer) with a body of
    /// `body` words and a view count.
    fn html(site: u64, nav: usize, body: &str, views: u32) -> String {
        let menu: String = (0..nav)
            .map(|i| {
                format!(
                    "<li><a href=\"/s/{i}\">{}</a></li>",
                    words(site * 97 + i as u64, 2)
                )
            })
            .collect();
        format!(
            "<html><head><title>{}</title></head><body><header>{}</header><nav><ul>{menu}</ul></nav>\
             <article><p>{body}</p><p>{views} views</p></article><footer>{}</footer></body></html>",
            words(site, 3),
            words(site + 1, 4),
            words(site + 2, 12)
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn a_copy_under_another_url_is_a_duplicate(
            seed in any::<u64>(),
            body_words in 0usize..400,
            nav in 0usize..40,
            others in 0usize..6,
            other_host in any::<bool>(),
            views_change in any::<bool>(),
            method in prop::sample::select(vec![Method::Spotsigs, Method::AlgG, Method::Chain]),
        ) {
            let params = IndexParams { method, ..Default::default() };
            prop_assert_eq!(params.signature.text_rules, TEXT_RULES);
            let mut d = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
            let site = seed % 1000;
            let at = |host: u64, path: String| format!("https://site{host}.test/{path}");
            // other pages of the site first, so that its template is known
            for i in 0..others {
                let body = words(seed ^ ((i as u64 + 1) * 0x51), body_words.max(5));
                let url = at(site, format!("other/{i}"));
                d.process(PageRef { id: &url, url: &url, first_seen: 1 }, &html(site, nav, &body, 3))
                    .unwrap();
            }
            let body = words(seed, body_words);
            let url = at(site, "story".into());
            let original = d
                .process(PageRef { id: &url, url: &url, first_seen: 2 }, &html(site, nav, &body, 7))
                .unwrap();
            let copy_url = at(if other_host { site + 1 } else { site }, "story?utm=feed".into());
            let views = if views_change { 1234 } else { 7 };
            let copy = d
                .process(
                    PageRef { id: &copy_url, url: &copy_url, first_seen: 3 },
                    &html(site, nav, &body, views),
                )
                .unwrap();
            match original.decision.kind {
                // too little text to decide either
                DecisionKind::Skipped => prop_assert_eq!(copy.decision.kind, DecisionKind::Skipped),
                DecisionKind::Unique => {
                    prop_assert_eq!(copy.decision.kind, DecisionKind::Duplicate);
                    prop_assert_eq!(copy.decision.canonical_id, Some(url));
                }
                DecisionKind::Duplicate => {
                    prop_assert_eq!(copy.decision.kind, DecisionKind::Duplicate)
                }
            }
        }
    }
}

/// Pages of forums on many hosts that run one piece of software: its permissions box on
/// every page, topic pages of prose, and board indexes with nothing else to sign.
mod software_text {
    use super::*;
    use crate::index::software::SoftwareText;

    const BOX: [&str; 5] = [
        "You can post new topics in this forum",
        "You can reply to topics in this forum",
        "You can edit your posts in this forum",
        "You can delete your posts in this forum",
        "You can vote in polls in this forum",
    ];

    /// `n` sentences of prose, different for every seed.
    fn prose(seed: u64, n: usize) -> String {
        super::prose(seed, n, |x| format!("w{}x{}", x % 9973, (x >> 20) % 97))
    }

    /// A page of the forum named `site` (its title), with `body` above the box.
    fn boxed(site: &str, body: &str) -> String {
        let lines: String = BOX.iter().map(|l| format!("<p>{l}</p>")).collect();
        format!(
            "<html><head><title>{site} forum</title></head><body><div class=\"content\">\
             {body}</div><div class=\"permissions\">{lines}</div></body></html>"
        )
    }

    const NAMES: [&str; 8] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];

    /// A topic page: a post of prose.
    fn topic(seed: u64) -> String {
        let site = NAMES[(seed / 10) as usize % 8];
        boxed(
            site,
            &format!("<h1>Topic {seed}</h1><p>{}</p>", prose(seed, 12)),
        )
    }

    /// A board index: links to its forums (named in words: a page's identity leaves
    /// numbers aside), and the box.
    fn board(host: u64) -> String {
        let links: String = NAMES
            .iter()
            .map(|n| {
                format!(
                    "<li><a href=\"/f/{n}\">{} {n}</a></li>",
                    NAMES[host as usize]
                )
            })
            .collect();
        boxed(
            NAMES[host as usize],
            &format!("<h1>Board index</h1><ul>{links}</ul>"),
        )
    }

    /// (id, URL, page) of the stream: two topic pages on each of hosts 1 to 3 (the box
    /// becomes software text), then the board indexes of hosts 4 and 5, then one story
    /// printed by hosts 6 and 7 under the box.
    fn stream() -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for h in 1..=3u64 {
            for t in 0..2u64 {
                let id = format!("t{h}-{t}");
                out.push((
                    id.clone(),
                    format!("https://forum{h}.test/{id}"),
                    topic(h * 10 + t),
                ));
            }
        }
        for h in 4..=5u64 {
            out.push((format!("b{h}"), format!("https://forum{h}.test/"), board(h)));
        }
        for h in 6..=7u64 {
            let story = boxed(
                NAMES[h as usize],
                &format!("<h1>The harbor</h1><p>{}</p>", prose(777, 12)),
            );
            out.push((
                format!("s{h}"),
                format!("https://forum{h}.test/story"),
                story,
            ));
        }
        out
    }

    fn decide(d: &mut Deduplicator, stream: &[(String, String, String)]) -> Vec<Decision> {
        stream
            .iter()
            .map(|(id, url, html)| {
                let p = PageRef {
                    id,
                    url,
                    first_seen: 1,
                };
                d.process(p, html).unwrap().decision
            })
            .collect()
    }

    fn params(text_rules: u32) -> IndexParams {
        let mut p = IndexParams::default();
        p.signature.text_rules = text_rules;
        p
    }

    #[test]
    fn pages_that_share_only_software_text_are_kept_apart_and_copies_are_not() {
        const { assert!(TEXT_RULES >= 6) };
        let stream = stream();
        let at = |id: &str| stream.iter().position(|p| p.0 == id).unwrap();
        // before the rule: the second board index is a copy of the first, of another host
        let mut before = Deduplicator::new(Index::memory(params(5)).unwrap()).unwrap();
        let old = decide(&mut before, &stream);
        assert_eq!(
            old[at("b5")].kind,
            DecisionKind::Duplicate,
            "{:?}",
            old[at("b5")]
        );
        assert_eq!(old[at("b5")].canonical_id.as_deref(), Some("b4"));
        let mut d = Deduplicator::new(Index::memory(params(6)).unwrap()).unwrap();
        let new = decide(&mut d, &stream);
        let software = d.index_mut().software_text().unwrap().unwrap();
        for line in BOX {
            assert!(
                software.is_software(crate::signature::template::block_hash(line)),
                "{line}"
            );
        }
        assert_eq!(new[at("b4")].kind, DecisionKind::Unique);
        assert_eq!(
            new[at("b5")].kind,
            DecisionKind::Unique,
            "{:?}",
            new[at("b5")]
        );
        // the story each host prints under the box is still one story
        assert_eq!(new[at("s7")].kind, DecisionKind::Duplicate);
        assert_eq!(new[at("s7")].canonical_id.as_deref(), Some("s6"));
        // the topic pages are decided as before (the box was not known when they were)
        for h in 1..=3 {
            for t in 0..2 {
                let i = at(&format!("t{h}-{t}"));
                assert_eq!(new[i], old[i], "t{h}-{t}");
            }
        }
        // a board index is still one page with its copy under another URL, although
        // software text is all it has to sign
        let copy = [(
            "b4-copy".to_string(),
            "https://forum4.test/?sid=9".to_string(),
            board(4),
        )];
        let again = decide(&mut d, &copy);
        assert_eq!(again[0].kind, DecisionKind::Duplicate, "{:?}", again[0]);
        assert_eq!(again[0].canonical_id.as_deref(), Some("b4"));
        // the signatures left out are stored with a unique page, and only those
        let b4 = d.index().find_id("b4").unwrap().unwrap();
        assert!(!b4.software.is_empty());
        assert!(b4
            .software
            .iter()
            .all(|h| b4.sigs.hashes().any(|x| x == *h)));
        assert!(!b4.blocks.is_empty());
    }

    #[test]
    fn the_counts_come_back_as_they_were_after_a_restart_a_snapshot_or_a_removal() {
        // whole tables (text rules 6) and growing ones (7)
        for rules in [6, 7] {
            counts_come_back(rules);
        }
    }

    fn counts_come_back(rules: u32) {
        let stream = stream();
        let dir = tempfile::tempdir().unwrap();
        let live: SoftwareText = {
            let mut d =
                Deduplicator::new(Index::open_dir(dir.path(), params(rules)).unwrap()).unwrap();
            decide(&mut d, &stream);
            d.index_mut().software_text().unwrap().unwrap().clone()
        };
        assert!(live.found() >= BOX.len() as u64);
        // reopened: counted again from the stored documents
        let mut ix = Index::open_dir(dir.path(), params(rules)).unwrap();
        assert_eq!(ix.software_text().unwrap(), Some(&live));
        // a standby that applies the stored documents in order, as a changelog carries them
        let mut standby = Index::memory(params(rules)).unwrap();
        let mut puts = Vec::new();
        ix.stored_from(0, &mut |m| {
            puts.push(m);
            true
        })
        .unwrap();
        for m in puts {
            let crate::index::Mutation::Put { num, record, .. } = m else {
                unreachable!()
            };
            standby
                .restore_put(num, &crate::index::DocRecord::decode(&record).unwrap())
                .unwrap();
        }
        assert_eq!(standby.software_text().unwrap(), Some(&live));
        // from the snapshot written at a clean stop
        ix.save_lists().unwrap();
        assert!(dir.path().join(crate::index::software::SNAPSHOT).exists());
        drop(ix);
        let mut ix = Index::open_dir(dir.path(), params(rules)).unwrap();
        assert_eq!(ix.software_text().unwrap(), Some(&live));
        // after a removal, the counts are those of the documents that stay, as a rebuild
        // gives them
        assert!(ix.remove_id("t1-0").unwrap());
        assert!(ix.remove_id("t2-1").unwrap());
        assert!(!dir.path().join(crate::index::software::SNAPSHOT).exists());
        // and a page decided after the removals is counted over them
        let mut d = Deduplicator::new(ix).unwrap();
        let more = [(
            "t1-2".to_string(),
            "https://forum1.test/t1-2".to_string(),
            topic(12),
        )];
        decide(&mut d, &more);
        let after = d.index_mut().software_text().unwrap().unwrap().clone();
        assert_ne!(after, live);
        drop(d);
        let mut ix = Index::open_dir(dir.path(), params(rules)).unwrap();
        assert_eq!(ix.software_text().unwrap(), Some(&after));
        // an index of text rules 5 keeps no counts
        let mut old = Index::memory(params(5)).unwrap();
        assert!(old.software_text().unwrap().is_none());
    }
}

/// Pages of one blog whose template shows a long "about me" box beside each post: the box
/// is the page's largest text, so every page is signed on it (text rules 7).
mod host_text {
    use super::*;
    use crate::signature::{software, Signer};

    /// `n` sentences of prose, different for every seed (words of letters only: a page's
    /// identity leaves numbers aside).
    fn prose(seed: u64, n: usize) -> String {
        super::prose(seed, n, |x| {
            (0..6)
                .map(|i| char::from(b'a' + ((x >> (5 * i)) % 26) as u8))
                .collect()
        })
    }

    /// A page of the blog: the about box (about 160 words) and a post of four short
    /// paragraphs (`post` picks them).
    fn blog(post: u64, extra: &str) -> String {
        let paragraphs: String = (0..4)
            .map(|i| format!("<p>{}</p>", prose(post * 10 + i, 1)))
            .collect();
        let menu: String = (0..30)
            .map(|i| format!("<li><a href=\"/archive/{i}\">Archive page {i}</a></li>"))
            .collect();
        format!(
            "<html><head><title>The Ad Blog</title></head><body>\
             <div class=\"post\"><h2>Post</h2>{paragraphs}{extra}</div>\
             <ul class=\"archive\">{menu}</ul>\
             <div class=\"about\"><p>{}</p></div></body></html>",
            prose(4242, 16)
        )
    }

    fn params(text_rules: u32) -> IndexParams {
        let mut p = IndexParams::default();
        p.signature.text_rules = text_rules;
        p
    }

    fn decide(d: &mut Deduplicator, id: &str, url: &str, html: &str) -> Decision {
        let p = PageRef {
            id,
            url,
            first_seen: 1,
        };
        d.process(p, html).unwrap().decision
    }

    #[test]
    fn pages_of_one_host_signed_on_its_template_are_kept_apart_and_its_copies_are_not() {
        const { assert!(TEXT_RULES >= 7) };
        let (a, b) = (blog(1, ""), blog(2, ""));
        // both are signed on the box alone: the same signatures and the same title
        let signer = Signer::new(&params(7).signature).unwrap();
        let (sa, sb) = (signer.sign(&a), signer.sign(&b));
        assert_eq!(sa.sigs.entries(), sb.sigs.entries());
        assert!(sa.sigs.set_len() >= 20, "{}", sa.sigs.set_len());
        assert_eq!(sa.title, sb.title);
        assert_ne!(sa.identity, sb.identity);
        // the box is a long block, the post's paragraphs short ones
        let long = sa
            .short
            .blocks
            .iter()
            .filter(|&&h| software::is_long(h))
            .count();
        assert_eq!(long, 1, "{:?}", sa.short.blocks);
        assert!(sa.short.blocks.len() >= 5, "{:?}", sa.short.blocks);

        // text rules 6: the second post is a copy of the first (one title, one signed text)
        let mut before = Deduplicator::new(Index::memory(params(6)).unwrap()).unwrap();
        decide(&mut before, "a", "https://adblog.test/a", &a);
        let old = decide(&mut before, "b", "https://adblog.test/b", &b);
        assert_eq!(old.kind, DecisionKind::Duplicate, "{old:?}");

        let mut d = Deduplicator::new(Index::memory(params(7)).unwrap()).unwrap();
        assert_eq!(
            decide(&mut d, "a", "https://adblog.test/a", &a).kind,
            DecisionKind::Unique
        );
        // another post of the host: one box, one post of its own
        let got = decide(&mut d, "b", "https://adblog.test/b", &b);
        assert_eq!(got.kind, DecisionKind::Unique, "{got:?}");
        let keys = Keys::of(&sb).on_host(Some("https://adblog.test/b"));
        let stored_a = d.index().find_id("a").unwrap().unwrap();
        assert!(keys.other_text(&stored_a));
        assert_eq!(
            kept_apart(&[], keys, &stored_a, &mut || None),
            Some(KeptApart::OtherText)
        );
        // a re-fetch of the first post with a line added, under another URL of the host:
        // it shows five of the six blocks of its own, all five of the first's
        let refetch = blog(
            1,
            "<p>Updated a few minutes ago by the editors of this blog</p>",
        );
        let got = decide(&mut d, "a2", "https://adblog.test/a?page=1", &refetch);
        assert_eq!(got.kind, DecisionKind::Duplicate, "{got:?}");
        assert_eq!(got.canonical_id.as_deref(), Some("a"));
        // the same post on another host (a mirror): not a page of this host
        let got = decide(&mut d, "m", "https://mirror.adblog-copy.test/a", &a);
        assert_eq!(got.kind, DecisionKind::Duplicate, "{got:?}");
        assert_eq!(got.canonical_id.as_deref(), Some("a"));
        // the same visible text under another URL of the host: one page
        let got = decide(&mut d, "a3", "https://adblog.test/a?utm=x", &a);
        assert_eq!(got.canonical_id.as_deref(), Some("a"), "{got:?}");
        // a post that edits the box (one sentence more) is left to the similarity: its
        // signed text is not the host's template word for word
        let edited = blog(4, "").replace(
            "</p></div></body>",
            " The end was a test of the box.</p></div></body>",
        );
        let got = decide(&mut d, "e", "https://adblog.test/e", &edited);
        assert_eq!(got.kind, DecisionKind::Duplicate, "{got:?}");
        // a third post of the host is kept apart from both others
        let got = decide(&mut d, "c", "https://adblog.test/c", &blog(3, ""));
        assert_eq!(got.kind, DecisionKind::Unique, "{got:?}");
    }

    #[test]
    fn the_software_counts_read_the_short_blocks_only() {
        let a = blog(1, "");
        let sa = Signer::new(&params(7).signature).unwrap().sign(&a);
        let counted: Vec<u32> = software::counted(&sa.short.blocks, true).collect();
        assert_eq!(counted.len(), sa.short.blocks.len() - 1);
        assert!(counted.iter().all(|&h| !software::is_long(h)));
        // text rules 6 lists the short blocks only, untagged
        let s6 = Signer::new(&params(6).signature).unwrap().sign(&a);
        assert_eq!(s6.short.blocks.len(), counted.len());
        assert_eq!(
            software::counted(&s6.short.blocks, false).count(),
            counted.len()
        );
        // a block's kind is its hash's bit 0 with text rules 7
        let short7: Vec<u32> = s6.short.blocks.iter().map(|h| h & !1).collect();
        let mut mine = counted;
        mine.sort_unstable();
        let mut want = short7.clone();
        want.sort_unstable();
        assert_eq!(mine, want);
    }

    #[test]
    fn containment_is_of_the_smaller_list() {
        let c = software::containment;
        assert_eq!(c(&[1, 3, 5], &[1, 2, 3, 4, 5, 6]), Some(1.0));
        assert_eq!(c(&[1, 3, 5, 7], &[1, 2]), Some(0.5));
        assert_eq!(c(&[1, 3], &[2, 4]), Some(0.0));
        assert_eq!(c(&[], &[2, 4]), None);
    }
}

/// A long page in a language whose stopwords are not the spots has few SpotSigs and is
/// signed by its word shingles. From text rules 8 that does not make it short: its AMP
/// copy on its own host (another title, none of the site's text) is its duplicate. At 7 the
/// rule for short pages of one host kept the two apart. A short page of that language is
/// still short.
#[test]
fn a_long_page_with_few_spots_is_not_short() {
    const SYLLABLES: [&str; 12] = [
        "ka", "ba", "ri", "lu", "sem", "pang", "di", "nya", "ter", "mo", "gu", "wan",
    ];
    let words = |seed: u64, n: usize| -> String {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let w: String = (0..2 + (x % 3) as usize)
                    .map(|k| SYLLABLES[((x >> (8 * k)) % 12) as usize])
                    .collect();
                if i % 9 == 8 {
                    format!("{w}.")
                } else {
                    w
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let paras = |seed: u64, n: usize| -> String {
        (0..n)
            .map(|k| format!("<p>{}</p>", words(seed * 100 + k as u64, 60)))
            .collect()
    };
    let title = "Sejarah pecahnya kaum";
    let full = |body: &str| {
        format!(
            "<html><head><title>{title} | Kabar Dunia</title></head><body><nav><a href=\"/\">\
             Beranda</a> <a href=\"/berita\">Berita dunia</a> <a href=\"/opini\">Opini kami</a>\
             </nav><article><h1>{title}</h1>{body}</article><footer><p>Hak cipta Kabar Dunia \
             dilindungi undang undang negara.</p></footer></body></html>"
        )
    };
    let amp = |body: &str| {
        format!(
            "<html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}\
             </article></body></html>"
        )
    };
    let long = paras(1, 13); // 780 words
    let short = paras(2, 2); // 120 words
    let at = |id: &'static str, url: &'static str| PageRef {
        id,
        url,
        first_seen: 1,
    };
    for (text_rules, long_copy) in [
        (TEXT_RULES, DecisionKind::Duplicate),
        (7, DecisionKind::Unique),
    ] {
        let mut params = IndexParams::default();
        params.signature.text_rules = text_rules;
        let mut d = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
        let signed = d.signer().sign(&full(&long));
        assert_eq!(signed.family, Family::Words, "no spot in this language");
        assert!(signed.tokens >= crate::signature::LONG_WORDS);
        assert_eq!(signed.template.is_empty(), text_rules >= 8);
        let short_signed = d.signer().sign(&full(&short));
        assert_eq!(short_signed.family, Family::Words);
        assert!(
            !short_signed.template.is_empty(),
            "a short page stays short"
        );

        d.process(
            at("a", "https://kabar.example/2015/10/27/sejarah/"),
            &full(&long),
        )
        .unwrap();
        let o = d
            .process(
                at("a-amp", "https://kabar.example/2015/10/27/sejarah/amp"),
                &amp(&long),
            )
            .unwrap();
        assert_eq!(o.decision.kind, long_copy, "text rules {text_rules}");
        if long_copy == DecisionKind::Duplicate {
            assert_eq!(o.decision.canonical_id.as_deref(), Some("a"));
        }
        // short pages of one host are still matched across hosts only
        d.process(
            at("b", "https://kabar.example/2015/10/28/singkat/"),
            &full(&short),
        )
        .unwrap();
        let o = d
            .process(
                at("b-amp", "https://kabar.example/2015/10/28/singkat/amp"),
                &amp(&short),
            )
            .unwrap();
        assert_eq!(
            o.decision.kind,
            DecisionKind::Unique,
            "text rules {text_rules}"
        );
    }
}

/// Two stories of one host that share 60 % of their signatures: one page at text rules 9,
/// two from 10 ([`HOST_THRESHOLD`]); across hosts, or as a copy that shows nearly all the
/// same text, one page at every revision.
#[test]
fn pages_of_one_host_are_matched_at_the_host_threshold() {
    // words of letters: a page's identity leaves numbers aside
    let word = |x: u64| {
        (0..6)
            .map(|k| char::from(b'a' + ((x >> (5 * k)) % 26) as u8))
            .collect::<String>()
    };
    let html = |parts: &[String]| {
        format!(
            "<html><head><title>News</title></head><body><article>{}</article></body></html>",
            parts
                .iter()
                .map(|p| format!("<p>{p}</p>"))
                .collect::<String>()
        )
    };
    let shared = prose(1, 60, word);
    let a = html(&[shared.clone(), prose(2, 20, word)]);
    let b = html(&[shared.clone(), prose(3, 20, word)]);
    // a copy of `a` with a sentence of its own in place of its last one
    let mut tail = prose(2, 19, word);
    tail.push(' ');
    tail.push_str(&prose(4, 1, word));
    let a_copy = html(&[shared, tail]);
    let at = |id: &'static str, url: &'static str| PageRef {
        id,
        url,
        first_seen: 1,
    };
    for (text_rules, b_url, b_kind) in [
        (
            TEXT_RULES,
            "https://www.news.example/b",
            DecisionKind::Unique,
        ),
        (9, "https://www.news.example/b", DecisionKind::Duplicate),
        (
            TEXT_RULES,
            "https://other.example/b",
            DecisionKind::Duplicate,
        ),
    ] {
        let mut params = IndexParams::default();
        params.signature.text_rules = text_rules;
        let mut d = Deduplicator::new(Index::memory(params).unwrap()).unwrap();
        let (sa, sb) = (d.signer().sign(&a), d.signer().sign(&b));
        let sim = crate::signature::similarity(
            sa.sigs.entries(),
            sb.sigs.entries(),
            crate::signature::Measure::Jaccard,
        );
        assert!((0.5..HOST_THRESHOLD).contains(&sim), "{sim}");
        d.process(at("a", "https://news.example/a"), &a).unwrap();
        let o = d.process(at("b", b_url), &b).unwrap();
        assert_eq!(
            o.decision.kind, b_kind,
            "text rules {text_rules}, {b_url}: {:?}",
            o.decision
        );
        // a copy on the host itself is one page with it
        let o = d
            .process(at("a-copy", "https://news.example/a?ref=rss"), &a_copy)
            .unwrap();
        assert_eq!(o.decision.kind, DecisionKind::Duplicate);
        assert_eq!(o.decision.canonical_id.as_deref(), Some("a"));
        assert!(o.decision.similarity.unwrap() >= HOST_THRESHOLD);
    }
}

/// A page with too little text of its own is listed under its whole signature set and
/// compared on its set without software text. A probe that reaches τ with the second but not
/// with the first is no match, whatever prefix the lists chose for the page: otherwise the
/// decision would depend on the lengths of the lists when the page was listed (another
/// index, a shard of a sharded decider, lists rebuilt after a restart).
#[test]
fn a_match_does_not_depend_on_the_prefix_the_lists_chose() {
    use crate::index::{Decision, DocRecord};
    use crate::signature::Signatures;
    let p = IndexParams::default();
    assert_eq!((p.min_signatures, p.threshold), (10, 0.5));
    let doc = |id: &str, hashes: Vec<u32>, software: Vec<u32>| DocRecord {
        id: id.into(),
        url: format!("https://{id}.test/"),
        first_seen: 0,
        fingerprint: vec![0],
        sigs: Signatures::from_hashes(hashes),
        decision: Decision::plain(DecisionKind::Unique),
        delta: None,
        template: Vec::new(),
        identity: None,
        title: None,
        blocks: Vec::new(),
        software,
    };
    // six signatures of its own (the lowest hashes) and eighteen of software text: listed
    // under all 24, thirteen of them by the lists' prefix
    let own: Vec<u32> = (1..=6).collect();
    let software: Vec<u32> = (100..118).collect();
    let y = doc(
        "y",
        own.iter().chain(&software).copied().collect(),
        software,
    );
    // the probe: y's own six and six more, Jaccard 0.5 with y's own set, 0.2 with its whole
    let q = Signatures::from_hashes(own.iter().copied().chain(200..206).collect());
    let listed = y.listed_sigs(10);
    assert_eq!(listed.set_len(), 24, "listed under its whole set");
    assert!(similarity(q.entries(), y.matched_sigs().entries(), Measure::Jaccard) >= 0.5);
    let found = |found| Candidate {
        doc: 0,
        hamming: None,
        found,
    };
    let empty = Index::memory(p.clone()).unwrap();
    assert!(!found_at_any_prefix(
        &empty,
        &q,
        &y,
        &found(Found::Spotsigs)
    ));
    // a candidate of the fingerprint tables has no prefix
    assert!(found_at_any_prefix(&empty, &q, &y, &found(Found::AlgG)));

    let matches = |first: Option<DocRecord>| {
        let mut index = Index::memory(p.clone()).unwrap();
        if let Some(z) = first {
            index.put(&z).unwrap();
        }
        index.put(&y).unwrap();
        let mut cands = Vec::new();
        index.list_candidates(&q, &mut cands).unwrap();
        let found = cands
            .iter()
            .any(|c| index.doc(c.doc).unwrap().unwrap().id == "y");
        // the rule of `Deduplicator::verify` and of a shard's votes
        let mut rule = PairRule::new(&index, &q, &[], None);
        let matched = cands.iter().any(|c| {
            let d = index.doc(c.doc).unwrap().unwrap();
            d.id == "y"
                && rule.similarity(&index, &d).is_some()
                && found_at_any_prefix(&index, &q, &d, c)
        });
        (found, matched)
    };
    // alone, y's prefix holds its own signatures (the lists are empty: ties by hash), and
    // the probe meets it
    assert_eq!(matches(None), (true, false));
    // after a page that lists y's own signatures, y's prefix is all software text, and
    // the probe does not meet it; no match either way
    let z = doc(
        "z",
        own.iter().copied().chain(1000..1010).collect(),
        Vec::new(),
    );
    assert_eq!(matches(Some(z)), (false, false));
}
