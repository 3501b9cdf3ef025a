//! A bounded cache of answers to repeated requests: two generations of at most half the
//! capacity each (the older one is dropped when the newer one fills), entries older than the
//! time to live are not used. Keys are 128-bit keyed hashes of the request.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cache; `T` is cheap to clone (an `Arc`).
pub struct Cache<T> {
    capacity: usize,
    ttl: Duration,
    keys: (RandomState, RandomState),
    gens: Mutex<Generations<T>>,
}

struct Generations<T> {
    young: HashMap<u128, (Instant, T)>,
    old: HashMap<u128, (Instant, T)>,
}

impl<T: Clone + Send + 'static> Cache<T> {
    /// A cache of at most `capacity` answers (0: caches nothing), each used for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Cache<T> {
        Cache {
            capacity,
            ttl,
            keys: (RandomState::new(), RandomState::new()),
            gens: Mutex::new(Generations {
                young: HashMap::new(),
                old: HashMap::new(),
            }),
        }
    }

    /// The key of a request.
    pub fn key<K: Hash + ?Sized>(&self, k: &K) -> u128 {
        (u128::from(self.keys.0.hash_one(k)) << 64) | u128::from(self.keys.1.hash_one(k))
    }

    /// The cached answer of `key`, if fresh.
    pub fn get(&self, key: u128) -> Option<T> {
        if self.capacity == 0 {
            return None;
        }
        let mut g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = |t: &Instant| t.elapsed() < self.ttl;
        if let Some((t, v)) = g.young.get(&key) {
            return fresh(t).then(|| v.clone());
        }
        let (t, v) = g.old.remove(&key)?;
        if !fresh(&t) {
            return None;
        }
        let out = v.clone();
        let dropped = Self::insert(&mut g, self.capacity, key, (t, v));
        drop(g);
        Self::discard(dropped);
        Some(out)
    }

    /// Stores an answer.
    pub fn put(&self, key: u128, value: T) {
        if self.capacity == 0 {
            return;
        }
        let mut g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = Self::insert(&mut g, self.capacity, key, (Instant::now(), value));
        drop(g);
        Self::discard(dropped);
    }

    /// Inserts; returns the generation that was dropped, if one was.
    fn insert(
        g: &mut Generations<T>,
        capacity: usize,
        key: u128,
        v: (Instant, T),
    ) -> Option<HashMap<u128, (Instant, T)>> {
        let mut dropped = None;
        if g.young.len() >= capacity.div_ceil(2) {
            dropped = Some(std::mem::replace(&mut g.old, std::mem::take(&mut g.young)));
        }
        g.young.insert(key, v);
        dropped
    }

    /// Frees a dropped generation; a large one on a thread of its own, so that the request
    /// that turned the generations over does not wait for thousands of frees.
    fn discard(old: Option<HashMap<u128, (Instant, T)>>) {
        match old {
            Some(old) if old.len() > 1024 => {
                // without a thread to be had, the map is freed here (with the closure)
                let _ = std::thread::Builder::new()
                    .name("neardup-cache-free".into())
                    .spawn(move || drop(old));
            }
            _ => {}
        }
    }

    /// Answers held now.
    pub fn len(&self) -> usize {
        let g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        g.young.len() + g.old.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_fresh_and_keyed() {
        let c: Cache<u32> = Cache::new(4, Duration::from_secs(60));
        for i in 0..100u32 {
            c.put(c.key(&i), i);
            assert!(c.len() <= 4, "{} entries", c.len());
        }
        assert_eq!(c.get(c.key(&99u32)), Some(99));
        assert_eq!(c.get(c.key(&0u32)), None);
        assert_ne!(c.key("a"), c.key("b"));
        // a hit in the older generation survives the next turnover
        let c: Cache<u32> = Cache::new(4, Duration::from_secs(60));
        for i in 0..4u32 {
            c.put(c.key(&i), i);
        }
        assert_eq!(c.get(c.key(&0u32)), Some(0));
        let stale: Cache<u32> = Cache::new(4, Duration::ZERO);
        stale.put(stale.key(&1u32), 1);
        assert_eq!(stale.get(stale.key(&1u32)), None);
        let off: Cache<u32> = Cache::new(0, Duration::from_secs(60));
        off.put(off.key(&1u32), 1);
        assert!(off.is_empty());
    }
}
