use super::*;
use std::sync::atomic::{AtomicBool, Ordering};

fn collect(store: &dyn Store, f: Column, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    store
        .scan(f, lo, hi, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
    out
}

fn keys(store: &dyn Store, f: Column, lo: &[u8], hi: &[u8]) -> Vec<Vec<u8>> {
    collect(store, f, lo, hi)
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

fn put_get_delete(store: &dyn Store) {
    assert_eq!(store.get(Column::Docs, b"a").unwrap(), None);
    let mut b = Batch::default();
    b.put(Column::Docs, b"a", b"1");
    b.put(Column::Docs, b"b", b"");
    store.write(b).unwrap();
    assert_eq!(store.get(Column::Docs, b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.get(Column::Docs, b"b").unwrap(), Some(Vec::new()));

    let mut b = Batch::default();
    b.put(Column::Docs, b"a", b"2");
    store.write(b).unwrap();
    assert_eq!(store.get(Column::Docs, b"a").unwrap(), Some(b"2".to_vec()));

    let mut b = Batch::default();
    b.delete(Column::Docs, b"a");
    b.delete(Column::Docs, b"missing");
    store.write(b).unwrap();
    assert_eq!(store.get(Column::Docs, b"a").unwrap(), None);
    assert_eq!(store.get(Column::Docs, b"b").unwrap(), Some(Vec::new()));

    // An empty batch is fine.
    store.write(Batch::default()).unwrap();
}

fn batch_order(store: &dyn Store) {
    let mut b = Batch::default();
    b.put(Column::Meta, b"x", b"1");
    b.delete(Column::Meta, b"x");
    b.delete(Column::Meta, b"y");
    b.put(Column::Meta, b"y", b"2");
    b.put(Column::Meta, b"z", b"1");
    b.put(Column::Meta, b"z", b"3");
    assert_eq!(b.len(), 6);
    store.write(b).unwrap();
    assert_eq!(store.get(Column::Meta, b"x").unwrap(), None);
    assert_eq!(store.get(Column::Meta, b"y").unwrap(), Some(b"2".to_vec()));
    assert_eq!(store.get(Column::Meta, b"z").unwrap(), Some(b"3".to_vec()));
}

/// A writer repeatedly puts the same counter under two keys in two
/// families, in one batch; a reader reading key A then key B must never
/// see B older than A.
fn batch_atomicity(store: &dyn Store) {
    const ROUNDS: u64 = 2000;
    let done = AtomicBool::new(false);
    let read_u = |f: Column, k: &[u8]| -> u64 {
        store
            .get(f, k)
            .unwrap()
            .map(|v| u64::from_be_bytes(v.try_into().unwrap()))
            .unwrap_or(0)
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=ROUNDS {
                let mut b = Batch::default();
                b.put(Column::Stage, b"atom-a", &i.to_be_bytes());
                b.put(Column::Ids, b"atom-b", &i.to_be_bytes());
                store.write(b).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut checks = 0u64;
        while !done.load(Ordering::SeqCst) || checks < 10 {
            let a = read_u(Column::Stage, b"atom-a");
            let b = read_u(Column::Ids, b"atom-b");
            assert!(b >= a, "saw a={a} but older b={b}");
            checks += 1;
        }
    });
    assert_eq!(read_u(Column::Stage, b"atom-a"), ROUNDS);
    assert_eq!(read_u(Column::Ids, b"atom-b"), ROUNDS);
}

fn scans(store: &dyn Store) {
    let all: [&[u8]; 9] = [
        b"",
        b"\x00",
        b"a",
        b"a\x00",
        b"ab",
        b"abc",
        b"b",
        b"b\xff",
        b"\xff\xff",
    ];
    // Insert out of order to check ordering.
    let mut b = Batch::default();
    for k in all.iter().rev() {
        b.put(Column::AlgG, k, &[k.len() as u8]);
    }
    store.write(b).unwrap();

    let everything = keys(store, Column::AlgG, b"", &[0xff; 4]);
    let expected: Vec<Vec<u8>> = all.iter().map(|k| k.to_vec()).collect();
    assert_eq!(everything, expected);

    // [lo, hi): lo included, hi excluded.
    assert_eq!(
        keys(store, Column::AlgG, b"a", b"abc"),
        vec![b"a".to_vec(), b"a\x00".to_vec(), b"ab".to_vec()]
    );
    // Prefix scan for "a": a bound of 0xff bytes past every longer key.
    let mut hi = b"a".to_vec();
    hi.extend_from_slice(&[0xff; 9]);
    assert_eq!(keys(store, Column::AlgG, b"a", &hi).len(), 4);
    // Bounds between keys.
    assert_eq!(
        keys(store, Column::AlgG, b"aa", b"b\x00"),
        vec![b"ab".to_vec(), b"abc".to_vec(), b"b".to_vec()]
    );
    // Empty and inverted ranges.
    assert!(keys(store, Column::AlgG, b"a", b"a").is_empty());
    assert!(keys(store, Column::AlgG, b"b", b"a").is_empty());
    // Values come with their keys.
    let kv = collect(store, Column::AlgG, b"abc", b"abd");
    assert_eq!(kv, vec![(b"abc".to_vec(), vec![3u8])]);

    // Early stop.
    let mut seen = Vec::new();
    store
        .scan(Column::AlgG, b"", &[0xff; 4], &mut |k, _| {
            seen.push(k.to_vec());
            seen.len() < 3
        })
        .unwrap();
    assert_eq!(seen, expected[..3].to_vec());
}

fn isolation(store: &dyn Store) {
    let mut b = Batch::default();
    for f in Column::ALL {
        b.put(f, b"shared", f.name().as_bytes());
    }
    store.write(b).unwrap();
    for f in Column::ALL {
        assert_eq!(
            store.get(f, b"shared").unwrap(),
            Some(f.name().as_bytes().to_vec())
        );
    }
    let mut b = Batch::default();
    b.delete(Column::AlgH, b"shared");
    store.write(b).unwrap();
    assert_eq!(store.get(Column::AlgH, b"shared").unwrap(), None);
    assert!(keys(store, Column::AlgH, b"", b"\xff").is_empty());
    for f in Column::ALL {
        if f != Column::AlgH {
            assert!(store.get(f, b"shared").unwrap().is_some(), "{f:?}");
        }
    }
    assert_eq!(keys(store, Column::Ids, b"shared", b"shared\x00").len(), 1);
}

fn maintenance(store: &dyn Store) {
    let mut b = Batch::default();
    for i in 0u32..100 {
        b.put(Column::Docs, &i.to_be_bytes(), b"value");
    }
    store.write(b).unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    let stats = store.family_stats(Column::Docs).unwrap();
    assert!(stats.keys > 0 && stats.bytes > 0, "{stats:?}");
    assert_eq!(
        keys(store, Column::Docs, &[0; 4], &[0, 0, 0, 100]).len(),
        100
    );
}

/// The shared suite, run against every implementation.
fn suite(store: &dyn Store) {
    put_get_delete(store);
    batch_order(store);
    batch_atomicity(store);
    scans(store);
    isolation(store);
    maintenance(store);
}

#[test]
fn memory_store_suite() {
    suite(&MemoryStore::new());
}

#[test]
fn rocks_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(&dir.path().join("db")).unwrap();
    assert_eq!(store.path(), dir.path().join("db"));
    suite(&store);
}

#[test]
fn memory_store_stats_are_exact() {
    let store = MemoryStore::new();
    let mut b = Batch::default();
    b.put(Column::Ids, b"ab", b"cde");
    b.put(Column::Ids, b"x", b"");
    store.write(b).unwrap();
    let stats = store.family_stats(Column::Ids).unwrap();
    assert_eq!(stats, FamilyStats { keys: 2, bytes: 6 });
    assert_eq!(
        store.family_stats(Column::Docs).unwrap(),
        FamilyStats::default()
    );
}

#[test]
fn rocks_store_reopen_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = RocksStore::open(dir.path()).unwrap();
        let mut b = Batch::default();
        b.put(Column::Meta, b"version", b"1");
        b.put(Column::AlgH, b"k", b"v");
        store.write(b).unwrap();
    }
    let store = RocksStore::open(dir.path()).unwrap();
    assert_eq!(
        store.get(Column::Meta, b"version").unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(store.get(Column::AlgH, b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(store.get(Column::AlgG, b"k").unwrap(), None);
}

/// A buffered write reaches the log's file, where a process that follows the store (and
/// a restart after the writer's death) reads it, only once `flush_wal` has returned; the
/// writer itself reads it at once; a plain write is in the file on return.
#[test]
fn rocks_store_log_is_written_out_by_flush_wal() {
    let dir = tempfile::tempdir().unwrap();
    let primary = RocksStore::open(&dir.path().join("db")).unwrap();
    let mut b = Batch::new();
    b.put(Column::Docs, b"k1", b"v1");
    primary.write_buffered(b).unwrap();
    assert_eq!(
        primary.get(Column::Docs, b"k1").unwrap(),
        Some(b"v1".to_vec())
    );
    let follower =
        RocksStore::open_secondary(&dir.path().join("db"), &dir.path().join("own"), 1 << 20)
            .unwrap();
    follower.catch_up().unwrap();
    assert_eq!(follower.get(Column::Docs, b"k1").unwrap(), None);
    primary.flush_wal().unwrap();
    follower.catch_up().unwrap();
    assert_eq!(
        follower.get(Column::Docs, b"k1").unwrap(),
        Some(b"v1".to_vec())
    );
    // a plain write is in the file on return
    let mut b = Batch::new();
    b.put(Column::Meta, b"k2", b"v2");
    primary.write(b).unwrap();
    follower.catch_up().unwrap();
    assert_eq!(
        follower.get(Column::Meta, b"k2").unwrap(),
        Some(b"v2".to_vec())
    );
    // a follower writes nothing, its flush_wal included
    follower.flush_wal().unwrap();
}

#[test]
fn family_names_and_indices() {
    for (i, f) in Column::ALL.into_iter().enumerate() {
        assert_eq!(f.index(), i);
    }
    let names: Vec<&str> = Column::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(
        names,
        [
            "meta",
            "docs",
            "ids",
            "alg_g",
            "alg_h",
            "stage",
            "fingerprints"
        ]
    );
}

#[test]
fn batch_ops_roundtrip() {
    let mut b = Batch::new();
    assert!(b.is_empty());
    b.put(Column::Docs, b"k1", b"v1");
    b.delete(Column::Ids, b"k2");
    let ops: Vec<BatchOp<'_>> = b.ops().collect();
    assert_eq!(
        ops,
        vec![
            BatchOp::Put {
                family: Column::Docs,
                key: b"k1",
                value: b"v1"
            },
            BatchOp::Delete {
                family: Column::Ids,
                key: b"k2"
            },
        ]
    );
    b.clear();
    assert!(b.is_empty());
}
