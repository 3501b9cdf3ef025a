//! Which signatures have a list at all: one bit per group of signatures that share their
//! top `bits` bits, set while any signature of the group has an entry in the lists.
//!
//! A query reads the list of every one of its signatures, and most of them have none: on
//! the synthetic stream of `neardup-lab index` four occurrences in five are of a
//! signature no page has had before. Without this map each such probe costs the misses of
//! a list lookup (the shard's header, the line its search starts from, the buffer of new
//! entries); with it, one line of a bitmap answers "no list" for all but the groups that
//! are set. It is exact in the direction that matters: a signature with an entry always has
//! its bit set, so a probe is skipped only when its list is empty.
//!
//! The map starts at 2^20 bits (128 KiB) and doubles, rebuilt from the lists, whenever a
//! quarter of its bits are set, up to one bit per 32-bit signature (2^32 bits, 512 MiB, at
//! about 540 million distinct listed signatures). A bit is cleared when the last entry of
//! its group leaves the lists (retention), so the map does not fill up with the dead.

/// Bits of the smallest map (2^20 bits, 128 KiB).
pub(crate) const MIN_BITS: u32 = 20;
/// Bits of the largest map: one bit per signature.
pub(crate) const MAX_BITS: u32 = 32;

/// A bitmap over the top `bits` bits of signatures: one bit per group of signatures that
/// share them (the presence map, and the coarser map of [`super::recent`]).
#[derive(Debug, Clone)]
pub(crate) struct TopBits {
    bits: u32,
    words: Vec<u64>,
}

impl TopBits {
    /// A map of `bits` bits, all clear.
    pub(crate) fn with_bits(bits: u32) -> TopBits {
        debug_assert!((6..=MAX_BITS).contains(&bits));
        TopBits {
            bits,
            words: vec![0; 1usize << (bits - 6)],
        }
    }

    /// Bits of the map: signatures sharing their top `bits` bits share a bit.
    pub(crate) fn bits(&self) -> u32 {
        self.bits
    }

    /// The words, for whole-range updates.
    pub(crate) fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// The words.
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    #[inline]
    fn slot(&self, sig: u32) -> usize {
        // bits ≤ 32, so the shift is at most 26 and at least 0
        (u64::from(sig) >> (32 - self.bits)) as usize
    }

    /// Whether the bit of `sig`'s group is set.
    #[inline]
    pub(crate) fn get(&self, sig: u32) -> bool {
        let s = self.slot(sig);
        (self.words[s >> 6] >> (s & 63)) & 1 == 1
    }

    /// Asks for the line holding `sig`'s bit without waiting for it ([`super::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self, sig: u32) {
        super::layout::prefetch(&self.words[self.slot(sig) >> 6]);
    }

    /// Sets the bit of `sig`'s group; whether it was clear.
    #[inline]
    pub(crate) fn set(&mut self, sig: u32) -> bool {
        let s = self.slot(sig);
        let w = &mut self.words[s >> 6];
        let m = 1u64 << (s & 63);
        let was_clear = *w & m == 0;
        *w |= m;
        was_clear
    }

    /// Clears the bit of `sig`'s group; whether it was set.
    pub(crate) fn clear(&mut self, sig: u32) -> bool {
        let s = self.slot(sig);
        let w = &mut self.words[s >> 6];
        let m = 1u64 << (s & 63);
        let was_set = *w & m != 0;
        *w &= !m;
        was_set
    }

    /// Bytes of memory held.
    pub(crate) fn bytes(&self) -> u64 {
        self.words.capacity() as u64 * 8
    }
}

/// The presence map: [`TopBits`] with a count of the bits set.
#[derive(Debug, Clone)]
pub(crate) struct Presence {
    map: TopBits,
    ones: u64,
}

impl Default for Presence {
    fn default() -> Self {
        Presence::with_bits(MIN_BITS)
    }
}

impl Presence {
    pub(crate) fn with_bits(bits: u32) -> Presence {
        debug_assert!((MIN_BITS..=MAX_BITS).contains(&bits));
        Presence {
            map: TopBits::with_bits(bits),
            ones: 0,
        }
    }

    /// Bits of the map: signatures sharing their top `bits` bits share a bit.
    pub(crate) fn bits(&self) -> u32 {
        self.map.bits()
    }

    /// Whether a signature of `sig`'s group has an entry (always true if `sig` has one).
    #[inline]
    pub(crate) fn may_contain(&self, sig: u32) -> bool {
        self.map.get(sig)
    }

    /// Asks for the line holding `sig`'s bit without waiting for it.
    #[inline]
    pub(crate) fn prefetch(&self, sig: u32) {
        self.map.prefetch(sig);
    }

    /// Sets the bit of `sig`'s group.
    #[inline]
    pub(crate) fn set(&mut self, sig: u32) {
        self.ones += u64::from(self.map.set(sig));
    }

    /// Clears the bit of `sig`'s group (its last entry left the lists).
    pub(crate) fn clear(&mut self, sig: u32) {
        self.ones -= u64::from(self.map.clear(sig));
    }

    /// Clears every bit, the map keeping its size (to be set again from the entries).
    pub(crate) fn clear_all(&mut self) {
        self.map.words_mut().fill(0);
        self.ones = 0;
    }

    /// The inclusive range of signatures that share `sig`'s bit.
    pub(crate) fn group(&self, sig: u32) -> (u32, u32) {
        let free = 32 - self.bits();
        let first = ((u64::from(sig) >> free) << free) as u32;
        let last = (u64::from(first) + (1u64 << free) - 1) as u32;
        (first, last)
    }

    /// Whether the map should double: a quarter of its bits are set (a probe of a new
    /// signature then finds its group set one time in four) and it is not yet one bit per
    /// signature.
    pub(crate) fn full(&self) -> bool {
        self.bits() < MAX_BITS && self.ones * 4 > self.map.words().len() as u64 * 64
    }

    /// A map of `bits + 1` bits with the bits `fill` sets (those of every signature that
    /// has an entry), its set bits counted once at the end.
    pub(crate) fn doubled(&self, fill: impl FnOnce(&mut TopBits)) -> Presence {
        let mut map = TopBits::with_bits((self.bits() + 1).min(MAX_BITS));
        fill(&mut map);
        let ones = map.words().iter().map(|w| u64::from(w.count_ones())).sum();
        Presence { map, ones }
    }

    /// Set bits.
    #[cfg(test)]
    pub(crate) fn ones(&self) -> u64 {
        self.ones
    }

    /// Bytes of memory held.
    pub(crate) fn bytes(&self) -> u64 {
        self.map.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_bits() {
        let mut p = Presence::default();
        assert!(!p.may_contain(0xdead_beef));
        p.set(0xdead_beef);
        assert!(p.may_contain(0xdead_beef));
        // the same top 20 bits share the bit
        assert!(p.may_contain(0xdead_b000));
        assert!(!p.may_contain(0xdead_a000));
        assert_eq!(p.group(0xdead_beef), (0xdead_b000, 0xdead_bfff));
        assert_eq!(p.ones(), 1);
        p.set(0xdead_b001);
        assert_eq!(p.ones(), 1);
        p.clear(0xdead_beef);
        assert!(!p.may_contain(0xdead_b001));
        assert_eq!(p.ones(), 0);
        p.clear(0xdead_beef);
        assert_eq!(p.ones(), 0);
    }

    #[test]
    fn doubling_up_to_one_bit_a_signature() {
        let mut p = Presence::default();
        let sigs = [0u32, 1, 0x8000_0000, u32::MAX];
        for &s in &sigs {
            p.set(s);
        }
        while p.bits() < MAX_BITS {
            p = p.doubled(|map| {
                for &s in &sigs {
                    map.set(s);
                }
            });
            assert!(sigs.iter().all(|&s| p.may_contain(s)));
        }
        assert_eq!(p.bits(), 32);
        assert_eq!(p.group(7), (7, 7));
        assert_eq!(p.group(u32::MAX), (u32::MAX, u32::MAX));
        assert!(!p.may_contain(2));
        assert_eq!(p.ones(), 4);
        assert!(!p.full());
    }
}
