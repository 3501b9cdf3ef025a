//! Which signatures may have an entry outside their shard's base: one bit per group of
//! signatures that share their top `bits` bits, set while any signature of the group may
//! have an entry in its shard's middle run or buffer.
//!
//! A shard keeps most of its entries in the base (at 10M indexed pages more than nine in
//! ten: the middle run is merged into the base at `√(2·96·|base|)` entries, so it holds
//! half that on average, and the buffer at most 96), and a lookup that had to search all
//! three runs asked for some ten cache lines, four or five of them for the two small runs. The deciding thread is then bound by how many misses the
//! core keeps in flight, not by the instructions: a profile at 10M put a third of the
//! query's samples just behind its prefetch instructions, waiting for a free fill buffer.
//! With this map a lookup whose group bit is clear reads the base alone.
//!
//! It is exact in the direction that matters: an entry in a middle run or a buffer always
//! has its group's bit set (set when the entry is pushed). A bit may stay set after its
//! entries moved to the base or left the lists; all the bits of a shard are cleared when
//! its middle run is merged into its base, which leaves the shard's two small runs empty.
//!
//! The map has three bits fewer than the presence map (a group of eight times as many
//! signatures: at 10M, 64 MiB against 512). It is rebuilt from the shards' small runs when
//! the presence map doubles, and cleared when a snapshot is written (every run is then
//! merged into its base) or read (a snapshot holds bases only).

use super::layout::SHARD_BITS;
use super::presence::TopBits;

/// How many bits fewer than the presence map.
pub(crate) const COARSER: u32 = 3;

/// The map (see the module's text). Read and set through [`TopBits`]: a set bit means a
/// signature of the group may have an entry in its shard's middle run or buffer.
#[derive(Debug, Clone)]
pub(crate) struct Recent {
    map: TopBits,
}

impl std::ops::Deref for Recent {
    type Target = TopBits;

    fn deref(&self) -> &TopBits {
        &self.map
    }
}

impl std::ops::DerefMut for Recent {
    fn deref_mut(&mut self) -> &mut TopBits {
        &mut self.map
    }
}

impl Recent {
    /// An empty map for a presence map of `presence_bits` bits.
    pub(crate) fn for_presence(presence_bits: u32) -> Recent {
        let bits = presence_bits - COARSER;
        debug_assert!(bits > SHARD_BITS, "a group must lie within a shard");
        Recent {
            map: TopBits::with_bits(bits),
        }
    }

    /// Clears the bits of every group of shard `shard` (its middle run and buffer are empty).
    pub(crate) fn clear_shard(&mut self, shard: usize) {
        let per = self.map.bits() - SHARD_BITS;
        let first = shard << per;
        let words = self.map.words_mut();
        if per >= 6 {
            let n = 1usize << (per - 6);
            let at = first >> 6;
            words[at..at + n].fill(0);
        } else {
            let mask = ((1u64 << (1u32 << per)) - 1) << (first & 63);
            words[first >> 6] &= !mask;
        }
    }

    /// Whether no bit is set.
    #[cfg(test)]
    pub(crate) fn words_all_clear(&self) -> bool {
        self.map.words().iter().all(|&w| w == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::lists::presence;

    #[test]
    fn groups_and_shards() {
        for presence_bits in presence::MIN_BITS..=presence::MAX_BITS {
            let mut r = Recent::for_presence(presence_bits);
            assert_eq!(r.bits(), presence_bits - COARSER);
            let sigs = [0x0001_0000u32, 0x0001_ffff, 0x0002_0000, 0xffff_ffff, 0];
            for &s in &sigs {
                assert!(!r.get(s));
                r.set(s);
                assert!(r.get(s));
            }
            // shard 1 cleared: its two signatures only
            r.clear_shard(1);
            assert!(!r.get(0x0001_0000));
            assert!(!r.get(0x0001_ffff));
            for s in [0x0002_0000u32, 0xffff_ffff, 0] {
                assert!(r.get(s), "{s:#x} cleared with shard 1");
            }
            r.clear_shard(0xffff);
            r.clear_shard(0);
            r.clear_shard(2);
            assert!(r.words_all_clear());
        }
    }
}
