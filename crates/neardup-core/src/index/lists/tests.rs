use super::*;
use proptest::prelude::*;

const TAUS: [f64; 6] = [0.28, 0.3, 0.5, 0.8, 0.9, 1.0];

fn jaccard(a: &[u32], b: &[u32]) -> f64 {
    let inter = a.iter().filter(|x| b.binary_search(x).is_ok()).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

fn build(lists: &mut Lists, sets: &[Vec<u32>]) {
    for (doc, set) in sets.iter().enumerate() {
        lists.insert(set, doc as u64).unwrap();
    }
}

fn set() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::btree_set(0u32..24, 1..14).prop_map(|s| s.into_iter().collect())
}

/// Every live doc with Jaccard ≥ τ is a candidate, and no candidate lies outside the
/// length window or was removed.
fn check(
    lists: &Lists,
    sets: &[Vec<u32>],
    live: &[bool],
    q: &[u32],
    out: &mut Vec<u64>,
) -> Result<(), TestCaseError> {
    let mut hits = QueryScratch::default();
    lists.query(q, out, &mut hits);
    prop_assert!(out.windows(2).all(|w| w[0] < w[1]));
    let (lo, hi) = lists.length_window(q.len());
    for &doc in out.iter() {
        prop_assert!(live[doc as usize], "removed doc {} returned", doc);
        let len = sets[doc as usize].len() as u32;
        prop_assert!(
            lo <= len && len <= hi,
            "doc {} of length {} outside",
            doc,
            len
        );
    }
    for (doc, set) in sets.iter().enumerate() {
        if live[doc] && jaccard(set, q) >= lists.tau() {
            prop_assert!(
                out.binary_search(&(doc as u64)).is_ok(),
                "missed doc {} (J = {})",
                doc,
                jaccard(set, q)
            );
        }
    }
    Ok(())
}

/// Removes the documents `removed` picks (each once), marking them in `live`.
fn remove_some(
    lists: &mut Lists,
    sets: &[Vec<u32>],
    live: &mut [bool],
    removed: &[prop::sample::Index],
) {
    for ix in removed {
        let doc = ix.index(sets.len());
        if live[doc] {
            live[doc] = false;
            lists.remove(&sets[doc], doc as u64);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Against brute force: every pair ≥ τ is a candidate, before and after removals,
    /// and after the lists are rebuilt in another order.
    #[test]
    fn candidates_contain_every_similar_doc(
        tau in 0..TAUS.len(),
        sets in prop::collection::vec(set(), 1..80),
        queries in prop::collection::vec(set(), 1..16),
        removed in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let mut lists = Lists::new(TAUS[tau], true).unwrap();
        build(&mut lists, &sets);
        let mut live = vec![true; sets.len()];
        let mut out = Vec::new();
        for q in queries.iter().chain(sets.iter().take(8)) {
            check(&lists, &sets, &live, q, &mut out)?;
        }
        remove_some(&mut lists, &sets, &mut live, &removed);
        for q in queries.iter().chain(sets.iter()) {
            check(&lists, &sets, &live, q, &mut out)?;
        }
        // rebuilt from the live documents in reverse order: other prefixes, same answers
        let mut rebuilt = Lists::new(TAUS[tau], true).unwrap();
        for doc in (0..sets.len()).rev().filter(|&d| live[d]) {
            rebuilt.insert(&sets[doc], doc as u64).unwrap();
        }
        for q in queries.iter().chain(sets.iter()) {
            check(&rebuilt, &sets, &live, q, &mut out)?;
        }
    }

    /// Without the count filter (weighted measure) the candidates only grow.
    #[test]
    fn count_filter_only_removes(
        sets in prop::collection::vec(set(), 1..60),
        q in set(),
    ) {
        let mut with = Lists::new(0.5, true).unwrap();
        let mut without = Lists::new(0.5, false).unwrap();
        build(&mut with, &sets);
        build(&mut without, &sets);
        let (mut a, mut b, mut h) = (Vec::new(), Vec::new(), QueryScratch::default());
        with.query(&q, &mut a, &mut h);
        without.query(&q, &mut b, &mut h);
        prop_assert!(a.iter().all(|d| b.binary_search(d).is_ok()));
    }
}

proptest! {
    #[test]
    fn lower_bound_equals_binary_search(
        mut v in prop::collection::vec(any::<u16>(), 0..400),
        keys in prop::collection::vec(any::<u16>(), 1..50),
    ) {
        v.sort_unstable();
        for k in keys.into_iter().chain(v.iter().copied()).chain([0, u16::MAX]) {
            prop_assert_eq!(lower_bound(&v, k), v.partition_point(|&x| x < k));
        }
    }
}

/// Signatures spread over the whole hash space (other shards, other presence groups).
fn spread(set: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = set
        .iter()
        .map(|&x| x.wrapping_mul(0x9e37_79b1) ^ 0x5bd1_e995)
        .collect();
    v.sort_unstable();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same against brute force with signatures in many shards and presence groups,
    /// and the presence map exact where it must be: every listed signature is present,
    /// and nothing is left set once every document is removed.
    #[test]
    fn spread_signatures_and_presence(
        tau in 0..TAUS.len(),
        sets in prop::collection::vec(set(), 1..60),
        queries in prop::collection::vec(set(), 1..10),
        removed in prop::collection::vec(any::<prop::sample::Index>(), 0..30),
    ) {
        let sets: Vec<Vec<u32>> = sets.iter().map(|s| spread(s)).collect();
        let queries: Vec<Vec<u32>> = queries.iter().map(|s| spread(s)).collect();
        let mut lists = Lists::new(TAUS[tau], true).unwrap();
        build(&mut lists, &sets);
        let mut live = vec![true; sets.len()];
        let mut out = Vec::new();
        remove_some(&mut lists, &sets, &mut live, &removed);
        for q in queries.iter().chain(sets.iter()) {
            check(&lists, &sets, &live, q, &mut out)?;
        }
        for (h, sh) in lists.shards.iter().enumerate() {
            let mut each = Vec::new();
            sh.for_each_signature(h, |s| each.push(s));
            prop_assert_eq!(&each, &sh.signatures(h).collect::<Vec<_>>());
            for s in each {
                prop_assert!(lists.presence.may_contain(s), "listed {s:#x} not present");
            }
        }
        for doc in (0..sets.len()).filter(|&d| live[d]) {
            lists.remove(&sets[doc], doc as u64);
        }
        prop_assert_eq!(lists.presence.ones(), 0);
    }
}

/// The presence map doubles as signatures arrive and stays exact across the doubling.
#[test]
fn presence_grows_and_finds_every_copy() {
    let mut lists = Lists::new(0.5, true).unwrap();
    let bits = lists.presence.bits();
    let mut sets = Vec::new();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for doc in 0..60_000u64 {
        let mut set: Vec<u32> = (0..16)
            .map(|k| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // a quarter of the signatures in shards 0..4, whose runs are merged many
                // times while the map doubles
                if k % 4 == 0 {
                    rng as u32 & 0x0003_ffff
                } else {
                    rng as u32
                }
            })
            .collect();
        set.sort_unstable();
        set.dedup();
        lists.insert(&set, doc).unwrap();
        sets.push(set);
        if doc % 1_000 == 0 {
            assert_recent_exact(&lists);
        }
    }
    assert!(lists.presence.bits() > bits, "map did not grow");
    // the set bits, counted once after each doubling, are the groups listed
    let free = 32 - lists.presence.bits();
    let mut groups: Vec<u64> = (lists.shards.iter().enumerate())
        .flat_map(|(h, sh)| sh.signatures(h))
        .map(|s| u64::from(s) >> free)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    assert_eq!(lists.presence.ones(), groups.len() as u64);
    assert_eq!(lists.recent.bits(), lists.presence.bits() - recent::COARSER);
    assert!(
        (0..4).all(|h| lists.shards[h].base_len() > 2 * shard::PENDING),
        "no middle run was merged into a base"
    );
    assert_recent_exact(&lists);
    let (mut out, mut hits) = (Vec::new(), QueryScratch::default());
    for (doc, set) in sets.iter().enumerate().step_by(97) {
        lists.query(set, &mut out, &mut hits);
        assert!(out.contains(&(doc as u64)), "doc {doc} not found");
    }
}

#[test]
fn prefixes_take_the_shortest_lists() {
    let mut lists = Lists::new(0.5, true).unwrap();
    // ten documents share signatures 1000..1005; each also has five of its own
    for doc in 0..10u32 {
        let mut set: Vec<u32> = (0..5).map(|j| doc * 10 + j).collect();
        set.extend(1000..1005);
        lists.insert(&set, u64::from(doc)).unwrap();
    }
    // p(10) = 6: each takes its five own signatures and the shortest shared list
    assert_eq!(lists.stats().postings, 60);
    let shared: usize = (1000..1005).map(|s| lists.count(s)).sum();
    assert_eq!(shared, 10);
    // balanced: every shared list holds two documents
    assert!((1000..1005).all(|s| lists.count(s) == 2));
}

#[test]
fn count_filter_drops_pages_sharing_one_common_phrase() {
    let mut lists = Lists::new(0.5, true).unwrap();
    let a: Vec<u32> = (0..60).collect();
    lists.insert(&a, 0).unwrap();
    // a query of 60 signatures sharing only a few with `a`
    let mut q: Vec<u32> = (55..115).collect();
    q.sort_unstable();
    let (mut out, mut hits) = (Vec::new(), QueryScratch::default());
    lists.query(&q, &mut out, &mut hits);
    assert!(out.is_empty(), "{out:?}");
    // a near copy is found
    let near: Vec<u32> = (5..65).collect();
    lists.query(&near, &mut out, &mut hits);
    assert_eq!(out, vec![0]);
    assert_eq!(lists.required_hits(60, 60), 40 - 29);
}

#[test]
fn remove_after_insert_leaves_nothing() {
    for tau in TAUS {
        let mut lists = Lists::new(tau, true).unwrap();
        let sets = vec![vec![1, 2, 3], vec![5], vec![0, 4, 8, 9, 10, 11, 20], vec![]];
        build(&mut lists, &sets);
        assert!(lists.stats().postings > 0);
        for (doc, set) in sets.iter().enumerate() {
            lists.remove(set, doc as u64);
        }
        let s = lists.stats();
        assert_eq!(
            (s.postings, s.signatures, s.documents),
            (0, 0, 0),
            "tau={tau}"
        );
    }
}

#[test]
fn prefix_and_window_use_exact_integers() {
    let lists = Lists::new(0.28, true).unwrap();
    // 0.28 * 25 = 7.000000000000001 in floating point: the prefix is 25 - 7 + 1.
    assert_eq!(lists.prefix_len(25), 19);
    assert_eq!(lists.length_window(25), (7, 89));
    // 7 / 0.28 = 24.999999999999996 in floating point: the window ends at 25.
    assert_eq!(lists.length_window(7), (2, 25));
    let lists = Lists::new(0.3, true).unwrap();
    assert_eq!(lists.prefix_len(10), 8);
    assert_eq!(lists.length_window(10), (3, 33));
    let lists = Lists::new(0.8, true).unwrap();
    assert_eq!(lists.prefix_len(5), 2);
    assert_eq!(lists.length_window(4), (4, 5));
    let exact = Lists::new(1.0, true).unwrap();
    assert_eq!(exact.prefix_len(7), 1);
    assert_eq!(exact.length_window(7), (7, 7));
    assert_eq!(exact.prefix_len(0), 0);
    let tiny = Lists::new(1e-6, true).unwrap();
    assert_eq!(tiny.prefix_len(3), 3);
}

/// Jaccard exactly τ = 0.28 = 7/25, where `τ·25` and `7 / τ` are not exact in floating
/// point: both the small and the large set must be found.
#[test]
fn float_boundaries_keep_exact_matches() {
    let mut lists = Lists::new(0.28, true).unwrap();
    let large: Vec<u32> = (0..25).collect();
    let small: Vec<u32> = (18..25).collect();
    assert!((jaccard(&large, &small) - 0.28).abs() < 1e-12);
    build(&mut lists, &[large.clone(), small.clone()]);
    let (mut out, mut hits) = (Vec::new(), QueryScratch::default());
    lists.query(&large, &mut out, &mut hits);
    assert_eq!(out, vec![0, 1]);
    lists.query(&small, &mut out, &mut hits);
    assert_eq!(out, vec![0, 1]);
}

#[test]
fn empty_sets_match_nothing() {
    let mut lists = Lists::new(0.5, true).unwrap();
    build(&mut lists, &[vec![1, 2], vec![]]);
    let (mut out, mut hits) = (vec![99], QueryScratch::default());
    lists.query(&[], &mut out, &mut hits);
    assert!(out.is_empty());
}

#[test]
fn parameters() {
    assert!(Lists::new(1.0, true).is_ok());
    assert!(Lists::new(0.01, true).is_ok());
    assert!(Lists::new(0.0, true).is_err());
    assert!(Lists::new(-0.5, true).is_err());
    assert!(Lists::new(1.01, true).is_err());
    assert!(Lists::new(f64::NAN, true).is_err());
    let mut lists = Lists::new(0.5, true).unwrap();
    lists.insert(&[1], 7).unwrap();
    // the span's limit, asked without entering a page there (its lengths would take 16 GiB)
    assert!(lists.can_hold(7 + MAX_SPAN));
    assert!(!lists.can_hold(7 + MAX_SPAN + 1));
    assert_eq!(
        lists.insert(&[2], 7 + MAX_SPAN + 1),
        Err(DocTooLarge(7 + MAX_SPAN + 1))
    );
    assert_eq!(lists.documents, 1);
}

/// The lists keep the low 32 bits of a document number and the lengths of the pages
/// between the oldest listed and the newest: under a window that removes the oldest pages
/// the numbers go past 2^32 and the lengths stay the size of the window. Every query
/// answers as brute force does, with the full numbers, across snapshots.
#[test]
fn numbers_past_32_bits_under_a_window_and_lengths_bounded() {
    let tau = 0.5;
    let window = 3_000u64;
    let mut lists = Lists::new(tau, true).unwrap();
    // xorshift: the pages are the same at every run
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 32) as u32
    };
    // a few stories, each page a near-copy of one, so that queries find pages
    let stories: Vec<Vec<u32>> = (0..40)
        .map(|_| {
            let mut v: Vec<u32> = (0..30).map(|_| next()).collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let mut page = || {
        let mut v = stories[next() as usize % stories.len()].clone();
        for x in v.iter_mut() {
            if next() % 100 < 15 {
                *x = next();
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    };
    let start = (1u64 << 32) - 5_000;
    let mut held: std::collections::VecDeque<(u64, Vec<u32>)> = Default::default();
    let mut most_slots = 0;
    let mut scratch = QueryScratch::default();
    let mut out = Vec::new();
    for k in 0..12_000u64 {
        // every third number is a page that is not listed (a duplicate's, a skipped page's)
        let doc = start + 3 * k;
        let sigs = page();
        if k % 500 == 0 {
            lists.query(&sigs, &mut out, &mut scratch);
            let mut expect: Vec<u64> = held
                .iter()
                .filter(|(_, y)| jaccard(&sigs, y) >= tau)
                .map(|&(d, _)| d)
                .collect();
            expect.sort_unstable();
            assert!(
                expect.iter().all(|d| out.binary_search(d).is_ok()),
                "page {k}: {expect:?} not all among {out:?}"
            );
            assert!(out.iter().all(|d| held.iter().any(|(h, _)| h == d)));
        }
        lists.insert(&sigs, doc).unwrap();
        held.push_back((doc, sigs));
        if k < 6_000 {
            // a window's sweep of a few pages: one at a time
            while held.len() as u64 > window {
                let (d, s) = held.pop_front().unwrap();
                lists.remove(&s, d);
            }
        } else if held.len() as u64 > window + 2_500 {
            // a cap's sweep: thousands at once, in one pass over the shards
            let gone: Vec<(u64, Vec<u32>)> = held.drain(..held.len() - window as usize).collect();
            let entries: usize = gone.iter().map(|(_, s)| s.len()).sum();
            assert!(Lists::one_pass(entries), "{entries} entries");
            let nums: Vec<u64> = gone.iter().map(|&(d, _)| d).collect();
            let postings = lists.postings;
            lists.remove_all(&nums);
            assert!(lists.postings < postings);
            assert_eq!(lists.documents, held.len() as u64);
            assert_recent_exact(&lists);
            let total: usize = lists.shards.iter().map(|sh| sh.len()).sum();
            assert_eq!(total as u64, lists.postings);
            for (h, sh) in lists.shards.iter().enumerate() {
                for s in sh.signatures(h) {
                    assert!(lists.presence.may_contain(s), "listed {s:#x} not present");
                }
            }
        }
        most_slots = most_slots.max(lists.lens.len());
        if k == 6_000 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("lists");
            let stamp = snapshot::Stamp {
                epoch: 1,
                next_doc: doc + 1,
            };
            lists.save(&path, stamp).unwrap();
            let (back, _) = Lists::load(&path, tau, true).unwrap();
            assert_eq!((back.base, back.lens.len()), (lists.base, lists.lens.len()));
            lists = back;
        }
    }
    assert!(
        lists.base > 1 << 32,
        "the oldest page listed is past 2^32: {}",
        lists.base
    );
    // the pages held span 3 numbers each; a quarter more before the front is dropped
    assert!(
        most_slots <= 3 * (window as usize + 2_500) * 5 / 4 + 1024,
        "{most_slots} slots"
    );
    for (d, s) in held.drain(..) {
        lists.remove(&s, d);
    }
    assert_eq!(
        (lists.documents, lists.postings, lists.lens.len()),
        (0, 0, 0)
    );
    // the span starts again with the next page
    lists.insert(&[5, 9], 1 << 40).unwrap();
    lists.query(&[5, 9], &mut out, &mut scratch);
    assert_eq!(out, vec![1 << 40]);
}

/// Every signature with an entry in a middle run or a buffer has its bit set in the map of
/// entries outside the bases (a lookup without it would search the base alone).
fn assert_recent_exact(lists: &Lists) {
    for (h, sh) in lists.shards.iter().enumerate() {
        for s in sh.recent_signatures(h) {
            assert!(lists.recent.get(s), "recent {s:#x} not marked");
        }
    }
}

/// Thousands of documents in four shards, so that buffers are merged into middle runs and
/// middle runs into bases many times: the candidates stay those of brute force, before and
/// after removals and a snapshot, and the map of entries outside the bases stays exact.
#[test]
fn runs_merge_and_lookups_skip_only_what_is_in_no_run() {
    let mut lists = Lists::new(0.5, true).unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut sets: Vec<Vec<u32>> = Vec::new();
    for doc in 0..4_000u64 {
        let set: Vec<u32> = if doc % 5 == 4 {
            // a near copy of a recent document: one signature replaced
            let back = (next() as usize) % sets.len().min(50);
            let mut s = sets[sets.len() - 1 - back].clone();
            let k = (next() as usize) % s.len();
            s[k] = (next() % (4 << 16)) as u32;
            s
        } else {
            let n = 5 + (next() % 36) as usize;
            (0..n).map(|_| (next() % (4 << 16)) as u32).collect()
        };
        let mut set = set;
        set.sort_unstable();
        set.dedup();
        lists.insert(&set, doc).unwrap();
        sets.push(set);
        // after every insert: a fold that cleared a neighbour's bits shows at once
        assert_recent_exact(&lists);
    }
    assert_recent_exact(&lists);
    let (base, recent): (usize, usize) = lists
        .shards
        .iter()
        .map(|sh| (sh.base_len(), sh.recent_signatures(0).count()))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert!(base > 0 && recent > 0, "base {base}, recent {recent}");
    let mut live = vec![true; sets.len()];
    let mut out = Vec::new();
    for q in sets.iter().step_by(7) {
        check(&lists, &sets, &live, q, &mut out).unwrap();
    }
    for doc in (0..sets.len()).step_by(3) {
        live[doc] = false;
        lists.remove(&sets[doc], doc as u64);
    }
    assert_recent_exact(&lists);
    for q in sets.iter().step_by(5) {
        check(&lists, &sets, &live, q, &mut out).unwrap();
    }
    // a snapshot leaves the live lists as they are, and is read back into bases alone
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lists.snapshot");
    let stamp = snapshot::Stamp {
        epoch: 1,
        next_doc: sets.len() as u64,
    };
    lists.save(&path, stamp).unwrap();
    assert_recent_exact(&lists);
    let (mut loaded, _) = Lists::load(&path, 0.5, true).unwrap();
    assert!(loaded.recent.words_all_clear());
    for q in sets.iter().step_by(5) {
        check(&loaded, &sets, &live, q, &mut out).unwrap();
    }
    for (doc, set) in sets.iter().enumerate().take(300) {
        if !live[doc] {
            loaded.insert(set, (sets.len() + doc) as u64).unwrap();
        }
    }
    assert_recent_exact(&loaded);
}

/// A snapshot of the layout before the lengths' first number (version 1: lengths from
/// document 0) is read as one whose lengths start at 0, so an upgrade does not enter the
/// lists again from every document.
#[test]
fn a_version_1_snapshot_is_read_with_lengths_from_document_0() {
    let mut lists = Lists::new(0.5, true).unwrap();
    for d in 0..200u64 {
        let sigs: Vec<u32> = (0..20).map(|j| (d as u32 / 4) * 1_000 + j).collect();
        lists.insert(&sigs, d).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lists");
    let stamp = snapshot::Stamp {
        epoch: 3,
        next_doc: 200,
    };
    lists.save(&path, stamp).unwrap();
    // version 1: the same bytes without the first number (8 bytes after n), version 1, and
    // its own checksum
    let v2 = std::fs::read(&path).unwrap();
    let at = 8 + 4 + 8 + 1 + 8 + 8 + 8 + 8 + 4 + 8;
    assert_eq!(v2[at..at + 8], 0u64.to_le_bytes());
    let mut v1 = [&v2[..at], &v2[at + 8..v2.len() - 4]].concat();
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32fast::hash(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &v1).unwrap();
    let (back, got) = Lists::load(&path, 0.5, true).unwrap();
    assert_eq!(got, stamp);
    assert_eq!(
        (back.base, back.lens.len(), back.postings),
        (0, 200, lists.postings)
    );
    let (mut a, mut b, mut scratch) = (Vec::new(), Vec::new(), QueryScratch::default());
    for d in 0..50u32 {
        let q: Vec<u32> = (0..20).map(|j| d * 1_000 + j).collect();
        lists.query(&q, &mut a, &mut scratch);
        back.query(&q, &mut b, &mut scratch);
        assert_eq!(a, b);
        assert_eq!(
            a,
            (4 * u64::from(d)..4 * u64::from(d) + 4).collect::<Vec<_>>()
        );
    }
    // a later version is refused
    v1[8..12].copy_from_slice(&9u32.to_le_bytes());
    std::fs::write(&path, &v1).unwrap();
    assert!(Lists::load(&path, 0.5, true).is_err());
}
