use super::*;
use crate::signature::Signatures;

fn rec(id: &str, seen: i64, kind: DecisionKind, hashes: Vec<u32>, fp: u64) -> DocRecord {
    DocRecord {
        id: id.into(),
        url: format!("https://site.test/{id}"),
        first_seen: seen,
        fingerprint: vec![fp],
        sigs: Signatures::from_hashes(hashes),
        decision: Decision::plain(kind),
        delta: None,
        template: Vec::new(),
        identity: None,
        title: None,
        blocks: Vec::new(),
        software: Vec::new(),
    }
}

fn stores() -> Vec<(Box<dyn Store>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let rocks = RocksStore::open(dir.path()).unwrap();
    vec![
        (Box::new(MemoryStore::new()), None),
        (Box::new(rocks), Some(dir)),
    ]
}

/// The same behaviour on both stores: put, find, candidates, expire.
#[test]
fn index_suite_on_both_stores() {
    for method in [Method::Chain, Method::AlgG, Method::AlgH, Method::Spotsigs] {
        for (store, _dir) in stores() {
            let params = IndexParams {
                method,
                ..Default::default()
            };
            let mut idx = Index::open(store, params).unwrap();
            let a = rec(
                "a",
                100,
                DecisionKind::Unique,
                (0..20).collect(),
                0xffff_0000_ffff_0000,
            );
            let b = rec(
                "b",
                200,
                DecisionKind::Unique,
                (100..120).collect(),
                0x1234_5678_9abc_def0,
            );
            let s = rec("s", 300, DecisionKind::Skipped, vec![1], 0);
            assert_eq!(idx.put(&a).unwrap(), 0);
            assert_eq!(idx.put(&b).unwrap(), 1);
            assert_eq!(idx.put(&s).unwrap(), 2);
            assert_eq!(idx.find_id("a").unwrap().unwrap(), a);
            assert_eq!(
                idx.find_id("s").unwrap().unwrap().decision.kind,
                DecisionKind::Skipped
            );
            assert!(idx.find_id("zz").unwrap().is_none());

            // a query close to `a` finds it through the method's index
            let q = Signatures::from_hashes((0..19).collect());
            let mut c = Vec::new();
            idx.fingerprint_candidates(&[0xffff_0000_ffff_0001], &mut c)
                .unwrap();
            let mut found: Vec<u64> = c.iter().map(|c| c.doc).collect();
            idx.list_candidates(&q, &mut c).unwrap();
            found.extend(c.iter().map(|c| c.doc));
            assert!(found.contains(&0), "{method}: {found:?}");
            assert!(!found.contains(&1), "{method}: {found:?}");

            // expire everything first seen before 150: `a` and its entries go
            assert_eq!(idx.expire(150).unwrap(), 1);
            assert!(idx.find_id("a").unwrap().is_none());
            idx.fingerprint_candidates(&[0xffff_0000_ffff_0001], &mut c)
                .unwrap();
            assert!(c.is_empty());
            idx.list_candidates(&q, &mut c).unwrap();
            assert!(c.is_empty());
            assert!(idx.find_id("b").unwrap().is_some());
            assert_eq!(idx.expire(1000).unwrap(), 2);
            for f in [Column::Fingerprints, Column::Docs, Column::Ids] {
                let mut n = 0;
                idx.store()
                    .scan(f, &[], &[0xff; 32], &mut |_, _| {
                        n += 1;
                        true
                    })
                    .unwrap();
                assert_eq!(n, 0, "{method}: family {f:?} not empty after expiring all");
            }
            if let Some(l) = idx.stats().unwrap().lists {
                assert_eq!(
                    (l.postings, l.documents),
                    (0, 0),
                    "{method}: lists not empty"
                );
            }
            let tables = idx.stats().unwrap().fingerprint_tables;
            assert_eq!(
                tables.map(|t| t.fingerprints),
                matches!(method, Method::Chain | Method::AlgG | Method::AlgH).then_some(0),
                "{method}"
            );
        }
    }
}

#[test]
fn reopen_keeps_documents_and_refuses_other_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let params = IndexParams::default();
    {
        let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
        idx.put(&rec("a", 1, DecisionKind::Unique, (0..10).collect(), 7))
            .unwrap();
    }
    let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    assert!(idx.find_id("a").unwrap().is_some());
    // the in-memory lists were rebuilt from the stored signature sets
    let mut c = Vec::new();
    idx.list_candidates(&Signatures::from_hashes((1..10).collect()), &mut c)
        .unwrap();
    assert_eq!(c.iter().map(|c| c.doc).collect::<Vec<_>>(), vec![0]);
    assert_eq!(idx.stats().unwrap().lists.unwrap().documents, 1);
    assert_eq!(
        idx.put(&rec("b", 1, DecisionKind::Unique, vec![1], 8))
            .unwrap(),
        1
    );
    drop(idx);

    let other = IndexParams {
        threshold: 0.7,
        ..params.clone()
    };
    let err = Index::open_dir(dir.path(), other).err().unwrap();
    let msg = err.to_string();
    assert!(msg.contains("threshold: 0.5 → 0.7"), "{msg}");
    assert!(msg.contains("rebuild"), "{msg}");

    let existing = Index::open_existing(Box::new(RocksStore::open(dir.path()).unwrap())).unwrap();
    assert_eq!(existing.params(), &params);
    assert_eq!(existing.stats().unwrap().next_doc, 2);
}

/// The params of a sentence-shingle index say so, refuse to be reopened with SpotSigs (or
/// another sample size), and the stored params of a SpotSigs index read as before (no
/// sentence settings in its JSON, and JSON without them is SpotSigs).
#[test]
fn sentence_index_params_are_stored_and_checked() {
    let spot = IndexParams::default();
    let json = serde_json::to_string(&spot).unwrap();
    assert!(
        !json.contains("features") && !json.contains("sentence"),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<IndexParams>(&json).unwrap(), spot);

    let mut sent = IndexParams {
        method: Method::Sentences,
        min_signatures: Method::Sentences.default_min_signatures(),
        ..IndexParams::default()
    };
    // the method and the signer's family must agree
    let err = Index::memory(sent.clone()).err().unwrap().to_string();
    assert!(
        err.contains("method sentences signs with sentences, not spotsigs"),
        "{err}"
    );
    sent.signature.features = Method::Sentences.features();
    let json = serde_json::to_string(&sent).unwrap();
    assert!(json.contains(r#""features":"sentences""#), "{json}");

    let dir = tempfile::tempdir().unwrap();
    {
        let mut idx = Index::open_dir(dir.path(), sent.clone()).unwrap();
        idx.put(&rec("a", 1, DecisionKind::Unique, vec![5, 9, 11], 7))
            .unwrap();
        let mut c = Vec::new();
        idx.list_candidates(&Signatures::from_hashes(vec![5, 9, 12]), &mut c)
            .unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].found, Found::Sentences);
    }
    let err = Index::open_dir(dir.path(), spot.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("method: \"sentences\" → \"spotsigs\""),
        "{err}"
    );
    assert!(
        err.contains("signature.features: \"sentences\" → \"(not stored)\""),
        "{err}"
    );
    let mut bigger = sent.clone();
    bigger.signature.sentence_sample = 128;
    let err = Index::open_dir(dir.path(), bigger)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("signature.sentence_sample: \"(not stored)\" → 128"),
        "{err}"
    );
    let existing = Index::open_existing(Box::new(RocksStore::open(dir.path()).unwrap())).unwrap();
    assert_eq!(existing.params(), &sent);
    drop(existing);
    assert!(Index::open_dir(dir.path(), sent).is_ok());
}

/// A stop flag ends the open (in the middle of rebuilding the lists), writes nothing, and
/// the index opens whole afterwards.
#[test]
fn a_stop_flag_interrupts_the_open_and_leaves_the_index_whole() {
    let dir = tempfile::tempdir().unwrap();
    let params = IndexParams::default();
    {
        let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
        for i in 0..5_000u32 {
            let hashes = (0..12).map(|j| i * 16 + j).collect();
            idx.put(&rec(&format!("d{i}"), 1, DecisionKind::Unique, hashes, 7))
                .unwrap();
        }
    }
    let stop = AtomicBool::new(true);
    let e = Index::open_dir_until(dir.path(), params.clone(), &stop).err();
    assert!(matches!(e, Some(IndexError::Interrupted)), "{e:?}");
    // past the first check: the rebuild itself looks at the flag
    let store = Box::new(RocksStore::open(dir.path()).unwrap());
    let e = Index::open_until(store, params.clone(), &stop).err();
    assert!(matches!(e, Some(IndexError::Interrupted)), "{e:?}");
    stop.store(false, Ordering::Relaxed);
    let idx = Index::open_dir_until(dir.path(), params, &stop).unwrap();
    assert_eq!(idx.stats().unwrap().lists.unwrap().documents, 5_000);
}

#[test]
fn format_2_index_is_refused_with_a_rebuild_message() {
    let store = MemoryStore::new();
    let mut b = Batch::default();
    b.put(Column::Meta, META_FORMAT, &2u32.to_be_bytes());
    store.write(b).unwrap();
    let err = Index::open(Box::new(store), IndexParams::default())
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(msg.contains("format version 2"), "{msg}");
    assert!(msg.contains("rebuild it into a new directory"), "{msg}");
}

#[test]
fn newer_format_is_refused_with_a_rebuild_message() {
    let store = MemoryStore::new();
    let mut b = Batch::default();
    b.put(
        Column::Meta,
        META_FORMAT,
        &(FORMAT_VERSION + 1).to_be_bytes(),
    );
    store.write(b).unwrap();
    let err = Index::open(Box::new(store), IndexParams::default())
        .err()
        .unwrap();
    assert!(matches!(err, IndexError::FormatMismatch { .. }));
    assert!(err.to_string().contains("rebuild"));
}

#[test]
fn bad_parameters_are_refused() {
    for p in [
        IndexParams {
            threshold: 0.0,
            ..Default::default()
        },
        IndexParams {
            method: Method::AlgG,
            rh: 9,
            ..Default::default()
        },
        IndexParams {
            method: Method::AlgH,
            m: 1,
            ..Default::default()
        },
    ] {
        assert!(Index::memory(p).is_err());
    }
}

/// A format-3 index (records of version 2, duplicates without signatures) opens, keeps its
/// documents, says why a duplicate has no signatures, and is marked format 4.
#[test]
fn format_3_is_read_and_marked_4() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut idx = Index::open_dir(dir.path(), IndexParams::default()).unwrap();
        idx.put(&rec("a", 1, DecisionKind::Unique, (0..40).collect(), 1))
            .unwrap();
        // a duplicate as format 3 wrote it: version-2 record, no delta
        let mut d = rec("b", 2, DecisionKind::Duplicate, vec![], 1);
        d.decision.canonical_id = Some("a".into());
        let mut bytes = d.encode_with(false);
        bytes[0] = 2;
        let mut b = Batch::default();
        b.put(Column::Docs, &1u64.to_be_bytes(), &bytes);
        b.put(Column::Ids, b"b", &1u64.to_be_bytes());
        b.put(Column::Meta, META_NEXT_DOC, &2u64.to_be_bytes());
        b.put(Column::Meta, META_FORMAT, &3u32.to_be_bytes());
        idx.store().write(b).unwrap();
    }
    let idx = Index::open_dir(dir.path(), IndexParams::default()).unwrap();
    let v = idx.store().get(Column::Meta, META_FORMAT).unwrap().unwrap();
    assert_eq!(v, FORMAT_VERSION.to_be_bytes());
    let r = idx.reader();
    let (_, b) = r.find_id("b").unwrap().unwrap();
    assert!(
        matches!(r.signatures(&b).unwrap(), StoredSigs::Unavailable(why) if why.contains("format 3"))
    );
    let (_, a) = r.find_id("a").unwrap().unwrap();
    assert_eq!(r.signatures(&a).unwrap().get().unwrap().set_len(), 40);
}

/// A duplicate decided now carries its signatures as a delta that rebuilds them exactly.
#[test]
fn duplicates_keep_their_signatures_as_a_delta() {
    let mut dd =
        crate::dedup::Deduplicator::new(Index::memory(IndexParams::default()).unwrap()).unwrap();
    let page = |id| crate::dedup::PageRef {
        id,
        url: "u",
        first_seen: 0,
    };
    let base: Vec<u32> = (0..100).collect();
    let near: Vec<u32> = (5..108).collect();
    let signed = |h: &Vec<u32>| crate::signature::Signed {
        sigs: Signatures::from_hashes(h.clone()),
        fingerprint: vec![7],
        ..Default::default()
    };
    dd.decide(page("a"), &signed(&base)).unwrap();
    let out = dd.decide(page("b"), &signed(&near)).unwrap();
    assert_eq!(out.decision.kind, DecisionKind::Duplicate);
    let r = dd.index().reader();
    let (_, b) = r.find_id("b").unwrap().unwrap();
    assert!(b.delta.as_ref().unwrap().added.len() + b.delta.as_ref().unwrap().removed.len() == 13);
    assert_eq!(
        r.signatures(&b).unwrap(),
        StoredSigs::FromCanonical(Signatures::from_hashes(near.clone()))
    );
    let many = r
        .signatures_many(vec![r.find_id("a").unwrap().map(|x| x.1), Some(b), None])
        .unwrap();
    assert_eq!(many[0].get().unwrap().set_len(), 100);
    assert_eq!(many[1].get().unwrap(), &Signatures::from_hashes(near));
    assert!(matches!(many[2], StoredSigs::Unavailable(_)));
}

/// Signature sets spread over the hash space, a fifth of them edited copies of earlier ones.
fn stream_of_sets(n: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut sets: Vec<Vec<u32>> = Vec::new();
    for i in 0..n {
        let mut set: Vec<u32> = if i > 0 && next() % 5 == 0 {
            let mut s = sets[(next() % i as u64) as usize].clone();
            s.truncate(s.len() * 4 / 5);
            s.extend((0..4).map(|_| next() as u32));
            s
        } else {
            (0..20 + next() % 40).map(|_| next() as u32).collect()
        };
        set.sort_unstable();
        set.dedup();
        sets.push(set);
    }
    sets
}

fn all_candidates(idx: &mut Index, sets: &[Vec<u32>]) -> Vec<Vec<u64>> {
    let mut c = Vec::new();
    sets.iter()
        .map(|s| {
            idx.list_candidates(&Signatures::from_hashes(s.clone()), &mut c)
                .unwrap();
            c.iter().map(|c| c.doc).collect()
        })
        .collect()
}

/// A clean shutdown saves the lists; the next open reads them and enters only what came
/// after (here: documents written after the snapshot, as after a crash), and every query
/// gets the same candidates as from lists rebuilt from the documents.
#[test]
fn lists_snapshot_reopens_and_replays_what_came_after() {
    let dir = tempfile::tempdir().unwrap();
    let params = IndexParams::default();
    let sets = stream_of_sets(900, 7);
    let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    assert!(!idx.lists_restore().unwrap().from_snapshot);
    for (i, s) in sets.iter().enumerate().take(600) {
        idx.put(&rec(
            &format!("d{i}"),
            0,
            DecisionKind::Unique,
            s.clone(),
            0,
        ))
        .unwrap();
    }
    let path = idx.save_lists().unwrap().unwrap();
    assert_eq!(path, dir.path().join(LISTS_SNAPSHOT));
    for (i, s) in sets.iter().enumerate().skip(600) {
        idx.put(&rec(
            &format!("d{i}"),
            0,
            DecisionKind::Unique,
            s.clone(),
            0,
        ))
        .unwrap();
    }
    let live = all_candidates(&mut idx, &sets);
    drop(idx);

    let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    let r = idx.lists_restore().unwrap().clone();
    assert!(r.from_snapshot, "{r:?}");
    assert_eq!(
        (r.replayed_from, r.replayed, r.snapshot_refused),
        (600, 300, None)
    );
    let from_snapshot = all_candidates(&mut idx, &sets);
    drop(idx);
    std::fs::remove_file(&path).unwrap();
    let mut idx = Index::open_dir(dir.path(), params).unwrap();
    let r = idx.lists_restore().unwrap().clone();
    assert!(!r.from_snapshot);
    assert_eq!(r.replayed, 900);
    let rebuilt = all_candidates(&mut idx, &sets);
    assert_eq!(from_snapshot, rebuilt);
    assert_eq!(live, rebuilt);
    for (i, c) in rebuilt.iter().enumerate() {
        assert!(c.contains(&(i as u64)), "doc {i} does not find itself");
    }
}

/// A snapshot from before a removal, a damaged one and one from a longer history are
/// refused with the reason, and the lists are rebuilt: a snapshot never changes a decision.
#[test]
fn stale_or_damaged_lists_snapshots_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let params = IndexParams::default();
    let sets = stream_of_sets(200, 11);
    let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    for (i, s) in sets.iter().enumerate() {
        let seen = if i < 50 { 10 } else { 1000 };
        idx.put(&rec(
            &format!("d{i}"),
            seen,
            DecisionKind::Unique,
            s.clone(),
            0,
        ))
        .unwrap();
    }
    let path = idx.save_lists().unwrap().unwrap();
    let saved = std::fs::read(&path).unwrap();
    // damaged: one byte flipped, then cut short
    let mut bad = saved.clone();
    bad[70] ^= 0x40; // inside the set lengths, which only the checksum covers
    for (bytes, reason) in [(bad, "checksum"), (saved[..saved.len() - 9].to_vec(), "")] {
        drop(idx);
        std::fs::write(&path, bytes).unwrap();
        idx = Index::open_dir(dir.path(), params.clone()).unwrap();
        let r = idx.lists_restore().unwrap();
        assert!(!r.from_snapshot);
        assert_eq!(r.replayed, 200);
        let why = r.snapshot_refused.clone().unwrap();
        assert!(why.contains(reason), "{why}");
    }
    // a length field that announces more than the file holds: refused before any allocation
    let mut huge = saved.clone();
    huge[57..65].copy_from_slice(&(1u64 << 31).to_le_bytes());
    drop(idx);
    std::fs::write(&path, huge).unwrap();
    idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    let why = idx
        .lists_restore()
        .unwrap()
        .snapshot_refused
        .clone()
        .unwrap();
    assert!(why.contains("announced"), "{why}");
    // a removal sets the snapshot aside; the old one put back is of another epoch
    std::fs::write(&path, &saved).unwrap();
    assert_eq!(idx.expire(100).unwrap(), 50);
    assert!(!path.exists());
    drop(idx);
    std::fs::write(&path, &saved).unwrap();
    let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    let r = idx.lists_restore().unwrap().clone();
    assert!(!r.from_snapshot);
    assert!(r.snapshot_refused.unwrap().contains("epoch"));
    let c = all_candidates(&mut idx, &sets);
    for (i, c) in c.iter().enumerate() {
        assert_eq!(c.contains(&(i as u64)), i >= 50, "doc {i}: {c:?}");
    }
    // a snapshot of a longer history than the index's (another copy of the directory)
    idx.save_lists().unwrap();
    let longer = std::fs::read(&path).unwrap();
    drop(idx);
    let other = tempfile::tempdir().unwrap();
    let mut small = Index::open_dir(other.path(), params.clone()).unwrap();
    small
        .put(&rec("x", 0, DecisionKind::Unique, sets[0].clone(), 0))
        .unwrap();
    drop(small);
    std::fs::write(other.path().join(LISTS_SNAPSHOT), longer).unwrap();
    let small = Index::open_dir(other.path(), params).unwrap();
    let why = small
        .lists_restore()
        .unwrap()
        .snapshot_refused
        .clone()
        .unwrap();
    assert!(why.contains("epoch") || why.contains("up to"), "{why}");
}

fn rec_at(id: &str, host: &str, hashes: Vec<u32>) -> DocRecord {
    DocRecord {
        url: format!("https://{host}/{id}"),
        ..rec(id, 1, DecisionKind::Unique, hashes, 0)
    }
}

/// Template text of a host is left out of its pages' matching (not another host's), the
/// counts survive a clean stop through their snapshot and a crash through the rebuild from
/// `docs`, identically, and a damaged snapshot is refused with the reason.
#[test]
fn frequencies_filter_template_text_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let params = IndexParams {
        frequencies: true,
        ..IndexParams::default()
    };
    let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    // every page of shop.test carries the notice 1..=5; other.test has it once
    for i in 0..20u32 {
        let mut h: Vec<u32> = (1..=5).collect();
        h.extend(1000 + i * 50..1000 + i * 50 + 20);
        idx.put(&rec_at(&format!("s{i}"), "shop.test", h)).unwrap();
    }
    idx.put(&rec_at(
        "o0",
        "other.test",
        (1..=5).chain(9000..9020).collect(),
    ))
    .unwrap();
    // a duplicate does not count: only unique pages do
    let mut dup = rec_at("d0", "shop.test", (7000..7030).collect());
    dup.decision = Decision::plain(DecisionKind::Duplicate);
    idx.put(&dup).unwrap();
    let q = Signatures::from_hashes((1..=5).chain(5000..5010).collect());
    let kept = idx.informative("https://www.shop.test/new", &q).unwrap();
    assert_eq!(
        kept.hashes().collect::<Vec<_>>(),
        (5000..5010).collect::<Vec<_>>()
    );
    assert!(idx.informative("https://other.test/x", &q).is_none());
    assert!(idx.informative("https://third.test/x", &q).is_none());
    assert_eq!(
        idx.frequencies()
            .unwrap()
            .host_count(freq::host_hash("shop.test"), 7000),
        0
    );
    let live = idx.frequencies().unwrap().clone();

    // clean stop: read back from the snapshot
    idx.save_lists().unwrap();
    drop(idx);
    let idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    let r = idx.lists_restore().unwrap().clone();
    assert!(r.freq_from_snapshot, "{r:?}");
    assert_eq!(idx.frequencies().unwrap(), &live);
    drop(idx);

    // damaged: refused with the reason, then counted again from the stored pages
    let snap = dir.path().join(freq::SNAPSHOT);
    let mut bytes = std::fs::read(&snap).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x40;
    std::fs::write(&snap, &bytes).unwrap();
    let idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    let r = idx.lists_restore().unwrap().clone();
    assert!(!r.freq_from_snapshot);
    assert!(
        r.freq_snapshot_refused
            .as_deref()
            .unwrap()
            .contains("checksum"),
        "{r:?}"
    );
    assert_eq!(idx.frequencies().unwrap(), &live);
    drop(idx);

    // crash (no snapshot at all): the rebuild gives the same counts
    std::fs::remove_file(&snap).unwrap();
    let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    assert_eq!(idx.frequencies().unwrap(), &live);

    // retention: the counts are those of the pages that stay, as a rebuild would give them
    let mut late = rec_at("late", "shop.test", (1..=5).chain(8000..8010).collect());
    late.first_seen = 10;
    idx.put(&late).unwrap();
    let gone = idx.expire(2).unwrap();
    assert_eq!(gone, 22);
    assert_eq!(idx.frequencies().unwrap().pages(), 1);
    assert!(idx.informative("https://shop.test/new", &q).is_none());
    let live = idx.frequencies().unwrap().clone();
    drop(idx);
    let idx = Index::open_dir(dir.path(), params.clone()).unwrap();
    assert_eq!(idx.frequencies().unwrap(), &live);
    // an index without lists cannot filter what it matches on: refused
    let e = Index::memory(IndexParams {
        method: Method::AlgG,
        frequencies: true,
        ..IndexParams::default()
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("no lists"), "{e}");

    // without frequencies nothing is left out and nothing is counted
    let off = Index::memory(IndexParams {
        frequencies: false,
        ..IndexParams::default()
    })
    .unwrap();
    assert!(off.frequencies().is_none());
    assert!(off.informative("https://shop.test/new", &q).is_none());
}

/// The set of ids' fingerprints answers for every stored id, whatever its decision and
/// method, after puts and after a reopen (it is filled from the `ids` family), and a
/// removed id is answered by the store.
#[test]
fn every_stored_id_is_found_after_puts_and_a_reopen() {
    for method in [Method::Spotsigs, Method::AlgG] {
        let dir = tempfile::tempdir().unwrap();
        let params = IndexParams {
            method,
            ..IndexParams::default()
        };
        let kind = |i: u32| match i % 3 {
            0 => DecisionKind::Unique,
            1 => DecisionKind::Duplicate,
            _ => DecisionKind::Skipped,
        };
        let n = 3_000u32;
        {
            let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
            for i in 0..n {
                let hashes = (0..12).map(|j| i * 16 + j).collect();
                idx.put(&rec(&format!("d{i}"), i64::from(i), kind(i), hashes, 7))
                    .unwrap();
                assert!(idx.find_id(&format!("d{i}")).unwrap().is_some());
                assert!(idx.find_id(&format!("d{}", i / 2)).unwrap().is_some());
            }
            assert!(idx.remove_id("d5").unwrap());
            assert!(idx.find_id("d5").unwrap().is_none());
        }
        let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
        for i in (0..n).filter(|&i| i != 5) {
            let rec = idx.find_id(&format!("d{i}")).unwrap();
            assert_eq!(rec.map(|r| r.decision.kind), Some(kind(i)), "d{i} {method}");
        }
        for i in n..2 * n {
            assert!(idx.find_id(&format!("d{i}")).unwrap().is_none());
        }
        assert!(idx.find_id("d5").unwrap().is_none());
        // a removed id decided again is found again
        idx.put(&rec("d5", 1, DecisionKind::Unique, vec![1, 2, 3], 7))
            .unwrap();
        assert!(idx.find_id("d5").unwrap().is_some());
    }
}

/// An index that removes its oldest pages for as long as it runs (a cap, a window) keeps
/// the ids' fingerprints and the lists' lengths the size of the pages it holds, not of
/// every page it ever decided: the set is filled again from the ids that stay once removed
/// ids fill most of it, and the lengths span the numbers of the pages listed. Kept pages
/// are found (by id and as candidates), removed ones are not.
#[test]
fn a_capped_index_stays_the_size_of_the_pages_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut idx = Index::open_dir(dir.path(), IndexParams::default()).unwrap();
    let keep = 10_000u64;
    let n = 150_000u32;
    let sigs = |i: u32| -> Vec<u32> { (0..12).map(|j| i * 16 + j).collect() };
    let mut most_ids = 0;
    let mut lists_bytes = Vec::new();
    for i in 0..n {
        let kind = if i % 5 == 0 {
            DecisionKind::Duplicate
        } else {
            DecisionKind::Unique
        };
        idx.put(&rec(&format!("d{i}"), i64::from(i), kind, sigs(i), 7))
            .unwrap();
        // 6,000 pages of 12 signatures: many entries, removed in one pass over the lists
        if idx.pages() > keep + 6_000 {
            idx.trim_oldest(keep).unwrap();
        }
        most_ids = most_ids.max(idx.ids.len());
        if i % 30_000 == 29_999 {
            lists_bytes.push(idx.lists.as_ref().unwrap().stats().memory_bytes);
        }
    }
    assert!(
        most_ids as u64 <= 2 * (keep + 6_000) + 65_536 + 1,
        "{most_ids} fingerprints for at most {} pages",
        keep + 6_000
    );
    // the lengths (4 bytes a number) do not grow with the numbers given out: 120,000
    // decisions after the first 30,000, the lists take no more memory than then
    let (first, last) = (lists_bytes[0], *lists_bytes.last().unwrap());
    assert!(last <= first + 64 * 1024, "lists {first} → {last} bytes");
    let (mut found, mut scratch) = (Vec::new(), lists::QueryScratch::default());
    for i in (n - 2_000)..n {
        assert!(idx.find_id(&format!("d{i}")).unwrap().is_some(), "d{i}");
        if i % 5 != 0 {
            let lists = idx.lists.as_ref().unwrap();
            lists.query(&sigs(i), &mut found, &mut scratch);
            let num = reader::find_id(idx.store.as_ref(), &format!("d{i}"))
                .unwrap()
                .unwrap()
                .0;
            assert_eq!(found, vec![num], "d{i}");
        }
    }
    for i in (0..50_000).step_by(997) {
        assert!(idx.find_id(&format!("d{i}")).unwrap().is_none(), "d{i}");
    }
}

/// A window's sweeps through the bounds of the oldest pages ([`super::earliest`]) remove exactly
/// the pages first seen before each cutoff, whatever order the pages came in: before a
/// reopen, after it (the bounds unknown: every page read once), between a cap's trims, and
/// a repeated id stored again under a new number.
#[test]
fn a_window_removes_every_page_first_seen_before_its_cutoff_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // id → first seen, for the pages held
    let mut held: std::collections::BTreeMap<String, i64> = Default::default();
    let mut idx = Index::open_dir(dir.path(), IndexParams::default()).unwrap();
    let mut t = 0i64;
    for round in 0..12 {
        for _ in 0..3_000 {
            t += 1;
            // one page in ten is late (first seen long before), one in fifty an id again
            let seen = if next() % 10 == 0 { t - 5_000 } else { t };
            let id = if next() % 50 == 0 && !held.is_empty() {
                let k = (next() % held.len() as u64) as usize;
                held.keys().nth(k).unwrap().clone()
            } else {
                format!("p{t}")
            };
            let kind = if next() % 4 == 0 {
                DecisionKind::Duplicate
            } else {
                DecisionKind::Unique
            };
            let hashes = vec![(next() % 5_000) as u32 + 1, (next() % 5_000) as u32 + 1, 7];
            idx.put(&rec(&id, seen, kind, hashes, next())).unwrap();
            held.insert(id, seen);
        }
        let cutoff = t - 12_000;
        idx.expire(cutoff).unwrap();
        let gone: Vec<String> = (held.iter().filter(|(_, &s)| s < cutoff))
            .map(|(id, _)| id.clone())
            .collect();
        held.retain(|_, s| *s >= cutoff);
        assert_eq!(idx.pages(), held.len() as u64, "round {round}");
        for id in &gone {
            assert!(
                idx.find_id(id).unwrap().is_none(),
                "round {round}: {id} stayed"
            );
        }
        if round == 4 {
            drop(idx);
            idx = Index::open_dir(dir.path(), IndexParams::default()).unwrap();
        }
        if round == 8 {
            // a cap: the oldest numbers go, which the pages held here must follow
            let keep = held.len() as u64 / 2;
            idx.trim_oldest(keep).unwrap();
            held.retain(|id, _| idx.find_id(id).unwrap().is_some());
            assert_eq!(held.len() as u64, keep);
        }
    }
    for id in held.keys() {
        assert!(idx.find_id(id).unwrap().is_some(), "{id} was removed");
    }
}

/// alg.G's and alg.H's tables come back from the `fingerprints` family when the index is
/// reopened, and an index of format 5 (tables on disk) gets that family from its records.
#[test]
fn fingerprint_tables_reopen_and_an_older_index_is_migrated() {
    for method in [Method::AlgG, Method::AlgH, Method::Chain] {
        let dir = tempfile::tempdir().unwrap();
        let params = IndexParams {
            method,
            ..Default::default()
        };
        let fps: Vec<u64> = (0..300u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x0123_4567_89ab_cdef)
            .collect();
        {
            let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
            for (i, &fp) in fps.iter().enumerate() {
                let kind = if i % 3 == 2 {
                    DecisionKind::Duplicate
                } else {
                    DecisionKind::Unique
                };
                let r = rec(&format!("p{i}"), 100, kind, (0..20).collect(), fp);
                idx.put(&r).unwrap();
            }
        }
        let expect = |idx: &mut Index| {
            let mut c = Vec::new();
            for (i, &fp) in fps.iter().enumerate() {
                idx.fingerprint_candidates(&[fp ^ 0b101], &mut c).unwrap();
                let docs: Vec<u64> = c.iter().map(|c| c.doc).collect();
                let want: Vec<u64> = if i % 3 == 2 { vec![] } else { vec![i as u64] };
                assert_eq!(docs, want, "{method}: page {i}");
            }
            assert_eq!(
                idx.stats()
                    .unwrap()
                    .fingerprint_tables
                    .unwrap()
                    .fingerprints,
                200
            );
        };
        let mut idx = Index::open_dir(dir.path(), params.clone()).unwrap();
        expect(&mut idx);
        // as an index of format 5 left it: no `fingerprints`, tables in `alg_g`
        let mut b = Batch::default();
        let mut keys = Vec::new();
        idx.store()
            .scan(Column::Fingerprints, &[], &[0xff; 9], &mut |k, _| {
                keys.push(k.to_vec());
                true
            })
            .unwrap();
        assert_eq!(keys.len(), 200);
        for k in &keys {
            b.delete(Column::Fingerprints, k);
            b.put(Column::AlgG, &[&[0u8, 0][..], k].concat(), &[0; 8]);
        }
        b.put(Column::Meta, b"format_version", &5u32.to_be_bytes());
        idx.store().write(b).unwrap();
        drop(idx);
        let mut idx = Index::open_dir(dir.path(), params).unwrap();
        expect(&mut idx);
        let mut old = 0;
        idx.store()
            .scan(Column::AlgG, &[], &[0xff; 19], &mut |_, _| {
                old += 1;
                true
            })
            .unwrap();
        assert_eq!(old, 0, "{method}: the old tables stay on disk");
        let v = idx
            .store()
            .get(Column::Meta, b"format_version")
            .unwrap()
            .unwrap();
        assert_eq!(v, FORMAT_VERSION.to_be_bytes());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Every method with fingerprint tables is exact about what it promises, through puts
    /// and expiry: every stored unique page within the radius is a candidate, and no other.
    #[test]
    fn fingerprint_candidates_are_every_unique_page_within_the_radius(
        method in proptest::sample::select(vec![Method::AlgG, Method::AlgH, Method::Chain]),
        rh in 0u32..=4,
        bases in proptest::array::uniform3(proptest::prelude::any::<u64>()),
        pages in proptest::collection::vec(
            (0usize..3, proptest::collection::vec(0u32..64, 0..=6), 0u8..4),
            1..60,
        ),
        cutoff in 0i64..60,
        queries in proptest::collection::vec((0usize..3, proptest::collection::vec(0u32..64, 0..=5)), 1..10),
    ) {
        let flip = |base: u64, bits: &[u32]| bits.iter().fold(base, |fp, &b| fp ^ (1 << b));
        let params = IndexParams { method, rh, ..Default::default() };
        let mut idx = Index::memory(params).unwrap();
        let mut held: Vec<(u64, u64, i64)> = Vec::new();
        for (i, (c, bits, kind)) in pages.iter().enumerate() {
            let fp = flip(bases[*c], bits);
            let kind = if *kind == 0 { DecisionKind::Duplicate } else { DecisionKind::Unique };
            let num = idx.put(&rec(&format!("p{i}"), i as i64, kind, (0..20).collect(), fp)).unwrap();
            if kind == DecisionKind::Unique {
                held.push((num, fp, i as i64));
            }
        }
        idx.expire(cutoff).unwrap();
        held.retain(|&(_, _, seen)| seen >= cutoff);
        let mut c = Vec::new();
        for (b, bits) in &queries {
            let q = flip(bases[*b], bits);
            idx.fingerprint_candidates(&[q], &mut c).unwrap();
            let got: Vec<(u64, Option<u32>)> = c.iter().map(|c| (c.doc, c.hamming)).collect();
            let want: Vec<(u64, Option<u32>)> = held
                .iter()
                .map(|&(num, fp, _)| (num, (fp ^ q).count_ones()))
                .filter(|&(_, d)| d <= rh)
                .map(|(num, d)| (num, Some(d)))
                .collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
