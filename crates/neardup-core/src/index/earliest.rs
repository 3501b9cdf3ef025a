//! Where the oldest stored documents are: for every block of [`BLOCK`] document numbers,
//! a time no later than the earliest first-seen time of the documents stored in it, and a
//! number no greater than the lowest one stored.
//!
//! A retention window's sweep (every 10,000 decisions) reads only the blocks whose bound is
//! before its cutoff, where it read every stored document: at 2M pages held, that was all
//! 2M records decoded for every 10,000 pages decided. A cap's sweep reads from the lowest
//! number, not over the removed ones before it.
//!
//! A bound only goes down as documents are stored, and a removal leaves it as it is (a
//! bound of more documents is a bound of fewer), so no removal can make one wrong; a sweep
//! that read a block sets its bound again from what stays. Nothing here is persisted: an
//! index opened knows no bounds, and its first window sweep reads every stored document
//! once, which makes them known.

use std::collections::BTreeMap;

/// Document numbers a block spans, log2. At 2M pages, 489 blocks (16 bytes of key and
/// bound each, about 32 in the tree map's nodes, half full when blocks come in order); a
/// window's sweep reads at most a block beyond the pages it removes at either end
/// of them when pages arrive in the order they were first seen.
pub const BLOCK_BITS: u32 = 12;

/// Document numbers a block spans.
pub const BLOCK: u64 = 1 << BLOCK_BITS;

/// The bounds (see the module's documentation).
#[derive(Debug, Default)]
pub struct Earliest {
    /// Block (number >> [`BLOCK_BITS`]) → a time no later than the first-seen time of any
    /// document stored in it. Every block holding a stored document has one once `known`.
    bounds: BTreeMap<u64, i64>,
    /// Whether every stored document's block has a bound (false until a sweep read them
    /// all: documents stored before the index was opened have none).
    known: bool,
    /// No stored document has a lower number.
    low: u64,
}

impl Earliest {
    /// Document `num`, first seen at `first_seen`, was stored.
    pub fn stored(&mut self, num: u64, first_seen: i64) {
        self.low = self.low.min(num);
        let b = self.bounds.entry(num >> BLOCK_BITS).or_insert(i64::MAX);
        *b = (*b).min(first_seen);
    }

    /// The ranges of numbers `[from, to)` that may hold a document first seen before
    /// `cutoff`, ascending: every number while the bounds are not known.
    pub fn before(&self, cutoff: i64) -> Vec<(u64, u64)> {
        if !self.known {
            return vec![(self.low, u64::MAX)];
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (&block, _) in self.bounds.iter().filter(|(_, &t)| t < cutoff) {
            // the last block's end is the end of the numbers
            let (from, to) = (block << BLOCK_BITS, (block + 1).saturating_mul(BLOCK));
            match out.last_mut() {
                Some(last) if last.1 == from => last.1 = to,
                _ => out.push((from.max(self.low), to)),
            }
        }
        out
    }

    /// The ranges `read` (as [`Earliest::before`] gave them) were read whole, and `stay`
    /// holds the bounds of the documents in them that stay: their bounds are those now.
    /// Reading every number makes the bounds known.
    pub fn read(&mut self, read: &[(u64, u64)], stay: Earliest) {
        let low = self.low;
        // a block is read whole when the range spans it from the lowest number stored in it
        let whole = |b: u64, from: u64, to: u64| {
            (b << BLOCK_BITS).max(low) >= from
                && (to == u64::MAX || (b + 1).saturating_mul(BLOCK) <= to)
        };
        for &(from, to) in read {
            let blocks: Vec<u64> = (self.bounds.range(from >> BLOCK_BITS..))
                .map(|(&b, _)| b)
                .take_while(|&b| b << BLOCK_BITS < to)
                .filter(|&b| whole(b, from, to))
                .collect();
            for b in blocks {
                self.bounds.remove(&b);
            }
        }
        // a block read in part keeps its bound as well: documents outside the range stay
        for (b, t) in stay.bounds {
            let have = self.bounds.entry(b).or_insert(t);
            *have = (*have).min(t);
        }
        if read.iter().any(|&(from, to)| from <= low && to == u64::MAX) {
            self.known = true;
        }
    }

    /// Every document numbered below `num` was removed.
    pub fn removed_below(&mut self, num: u64) {
        self.low = self.low.max(num);
        let keep = self.bounds.split_off(&(num >> BLOCK_BITS));
        self.bounds = keep;
    }

    /// No stored document has a lower number.
    pub fn low(&self) -> u64 {
        self.low
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Documents (number, first seen) stored; a sweep at a cutoff through the bounds
    /// finds exactly what a read of every document finds, however the times are ordered.
    #[test]
    fn a_sweep_through_the_bounds_finds_every_expired_document() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut held: BTreeMap<u64, i64> = BTreeMap::new();
        let mut e = Earliest::default();
        // stored before the bounds are known (an index opened with documents)
        for num in 0..20_000u64 {
            held.insert(num, num as i64 / 10);
        }
        let mut num = 20_000u64;
        let (mut reads, mut all) = (0usize, 0usize);
        for round in 0..200i64 {
            for _ in 0..1_000 {
                // mostly in order, one in 20 from long before (a replay, a late page)
                let t = if next() % 20 == 0 {
                    (next() % 1_000) as i64
                } else {
                    num as i64 / 10
                };
                held.insert(num, t);
                e.stored(num, t);
                num += 1;
            }
            // a window's sweep, the window some 100,000 documents long
            let cutoff = round * 100 - 8_000;
            let ranges = e.before(cutoff);
            let mut stay = Earliest::default();
            let mut expired = Vec::new();
            for &(from, to) in &ranges {
                for (&n, &t) in held.range(from..to) {
                    reads += 1;
                    if t < cutoff {
                        expired.push(n);
                    } else {
                        stay.stored(n, t);
                    }
                }
            }
            all += held.len();
            for n in &expired {
                held.remove(n);
            }
            e.read(&ranges, stay);
            assert!(
                held.values().all(|&t| t >= cutoff),
                "round {round}: a document first seen before {cutoff} was not found"
            );
            // now and then a cap's sweep: the lowest numbers go
            if round % 50 == 49 {
                let below = *held.keys().nth(held.len() / 10).unwrap();
                held.retain(|&n, _| n >= below);
                e.removed_below(below);
            }
            assert!(held.keys().next().is_none_or(|&n| n >= e.low()));
        }
        assert!(e.known);
        // the first sweep reads every document, the others the blocks of the newest pages
        // (late ones among them) and of the cutoff: far fewer than all those held
        assert!(reads * 5 < all, "{reads} documents read of {all}");
    }

    #[test]
    fn a_block_read_in_part_keeps_its_bound() {
        let mut e = Earliest::default();
        e.read(&[(0, u64::MAX)], Earliest::default());
        e.stored(10, 5);
        e.stored(BLOCK + 1, 100);
        e.removed_below(8);
        assert_eq!(e.before(50), vec![(8, BLOCK)]);
        // a range starting inside block 0 (from the low number) still replaces its bound
        let mut stay = Earliest::default();
        stay.stored(10, 60);
        e.read(&[(8, BLOCK)], stay);
        assert_eq!(e.before(50), Vec::<(u64, u64)>::new());
        assert_eq!(e.before(61), vec![(8, BLOCK)]);
        assert_eq!(e.before(101), vec![(8, 2 * BLOCK)]);
    }
}
