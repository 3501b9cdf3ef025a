//! The signatures of pages read before, kept in their compact encoding (the doc record's
//! Rice-coded stream, about 3.4 bytes a signature: some 0.6 kB a page with its key and
//! bookkeeping), bounded by a number of pages; the oldest insertion leaves first. A page's
//! stored signatures never change, so nothing expires; a page that left the index can be
//! grouped while it is still here.

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::sync::RwLock;

use crate::index::{decode_signatures, encode_signatures};
use crate::signature::Signatures;

/// The cache.
pub struct SignatureCache {
    capacity: usize,
    keys: (RandomState, RandomState),
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    map: rustc_hash::FxHashMap<u128, Box<[u8]>>,
    order: VecDeque<u128>,
}

impl SignatureCache {
    /// A cache of at most `capacity` pages (0: keeps nothing).
    pub fn new(capacity: usize) -> SignatureCache {
        SignatureCache {
            capacity,
            keys: (RandomState::new(), RandomState::new()),
            inner: RwLock::new(Inner::default()),
        }
    }

    /// The key of a page id (a 128-bit keyed hash).
    pub fn key(&self, id: &str) -> u128 {
        (u128::from(self.keys.0.hash_one(id)) << 64) | u128::from(self.keys.1.hash_one(id))
    }

    /// The signatures of `key`, if held.
    pub fn get(&self, key: u128) -> Option<Signatures> {
        if self.capacity == 0 {
            return None;
        }
        let g = self.inner.read().unwrap_or_else(|e| e.into_inner());
        // what was encoded here decodes; a failure would be a bug, and reads as a miss
        decode_signatures(g.map.get(&key)?).ok()
    }

    /// Keeps the signatures of `key`, dropping the oldest page when full.
    pub fn put(&self, key: u128, sigs: &Signatures) {
        if self.capacity == 0 {
            return;
        }
        let bytes = encode_signatures(sigs).into_boxed_slice();
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if g.map.insert(key, bytes).is_some() {
            return;
        }
        g.order.push_back(key);
        while g.map.len() > self.capacity {
            match g.order.pop_front() {
                Some(old) => {
                    g.map.remove(&old);
                }
                None => break,
            }
        }
    }

    /// Pages held.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_oldest_out_exact() {
        let c = SignatureCache::new(3);
        let set = |i: u32| Signatures::from_entries(vec![(i, 1), (i + 7, 2)]).unwrap();
        for i in 0..5u32 {
            c.put(c.key(&format!("p{i}")), &set(i));
            assert!(c.len() <= 3);
        }
        assert_eq!(c.get(c.key("p4")), Some(set(4)));
        assert_eq!(c.get(c.key("p2")), Some(set(2)));
        assert_eq!(c.get(c.key("p1")), None);
        // a page put again keeps one entry
        c.put(c.key("p4"), &set(4));
        assert_eq!(c.len(), 3);
        let off = SignatureCache::new(0);
        off.put(off.key("a"), &set(1));
        assert!(off.is_empty() && off.get(off.key("a")).is_none());
    }
}
