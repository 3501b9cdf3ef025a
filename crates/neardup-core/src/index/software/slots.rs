//! A direct-mapped table of 2^n slots, each free or taken, held as an array of every slot
//! or, while few of them are taken, as an open-addressing map of the taken ones by slot.
//!
//! The software-text tables keep fewer than one slot in 32 taken while they grow
//! ([`super::SoftwareText::growing`]): as arrays, they held 384 bytes of memory for each
//! taken (block, host) slot, every byte of it zeroed by the system on first touch, and each
//! doubling zeroed the whole larger array again (96 MiB for the 3,880 dev pages: 7 % of a
//! signing core's time on one machine's profile, about 1 % on another's). The map holds the
//! same slots in 32–80 bytes each (two to four places of 16–20 bytes). The table is
//! the same either way: which key holds which slot, and so every count, depends only on the
//! slots' number and what was counted; the map turns into the array once the array would
//! be the smaller.

/// A slot's content: [`Default`] is a free slot.
pub(super) trait Slot: Copy + Default + PartialEq + std::fmt::Debug {
    /// Whether the slot is taken.
    fn taken(&self) -> bool;
}

impl Slot for [u32; 3] {
    /// A (block, host) entry is taken while its tag is not 0.
    fn taken(&self) -> bool {
        self[0] != 0
    }
}

impl Slot for [u32; 4] {
    /// A block entry is taken while its first host is not 0.
    fn taken(&self) -> bool {
        self[1] != 0
    }
}

/// A free key of the map (slots are below 2^30).
const FREE: u32 = u32::MAX;

/// The smallest map, slots.
const MIN_CAPACITY: usize = 16;

/// A table of `2^log2` slots.
#[derive(Clone, Debug)]
pub(super) struct Slots<E> {
    log2: u32,
    repr: Repr<E>,
}

#[derive(Clone, Debug)]
enum Repr<E> {
    /// Every slot, by its number.
    Array(Vec<E>),
    /// The slots looked up or taken so far, by linear probing from the slot's number times a
    /// constant, at most half the map's places used.
    Map { places: Vec<(u32, E)>, used: usize },
}

impl<E: Slot> Slots<E> {
    /// A table of `2^log2` free slots, held as a map.
    pub(super) fn new(log2: u32) -> Slots<E> {
        Slots::with_room(log2, 0)
    }

    /// A table of `2^log2` free slots, with room for `taken` of them without growing.
    fn with_room(log2: u32, taken: usize) -> Slots<E> {
        let mut s = Slots {
            log2,
            repr: Repr::Map {
                places: Vec::new(),
                used: 0,
            },
        };
        s.make_room(taken);
        s
    }

    /// A table of `2^log2` free slots, held as an array from the start.
    #[cfg(test)]
    pub(super) fn array(log2: u32) -> Slots<E> {
        Slots {
            log2,
            repr: Repr::Array(vec![E::default(); 1 << log2]),
        }
    }

    /// The number of slots, log2.
    pub(super) fn log2(&self) -> u32 {
        self.log2
    }

    /// The number of slots.
    pub(super) fn len(&self) -> usize {
        1 << self.log2
    }

    /// Memory held, bytes.
    pub(super) fn bytes(&self) -> usize {
        match &self.repr {
            Repr::Array(a) => a.len() * std::mem::size_of::<E>(),
            Repr::Map { places, .. } => places.len() * std::mem::size_of::<(u32, E)>(),
        }
    }

    /// Whether the table is held as an array.
    #[cfg(test)]
    pub(super) fn is_array(&self) -> bool {
        matches!(self.repr, Repr::Array(_))
    }

    /// The place of `slot` in a map of `2^bits` places, where its probe starts.
    #[inline]
    fn home(slot: u32, bits: u32) -> usize {
        (u64::from(slot).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    /// Slot `slot`'s content (a free slot's default if it was never taken).
    #[inline]
    pub(super) fn get(&self, slot: usize) -> E {
        debug_assert!(slot < self.len());
        match &self.repr {
            Repr::Array(a) => a[slot],
            Repr::Map { places, .. } => {
                if places.is_empty() {
                    return E::default();
                }
                let mask = places.len() - 1;
                let mut i = Self::home(slot as u32, places.len().trailing_zeros());
                loop {
                    let (k, e) = places[i];
                    if k == slot as u32 {
                        return e;
                    }
                    if k == FREE {
                        return E::default();
                    }
                    i = (i + 1) & mask;
                }
            }
        }
    }

    /// Slot `slot`, to read and write (a free slot's default if it was never taken).
    #[inline]
    pub(super) fn slot_mut(&mut self, slot: usize) -> &mut E {
        debug_assert!(slot < self.len());
        if let Repr::Map { places, used } = &self.repr {
            if (*used + 1) * 2 > places.len() {
                let taken = *used + 1;
                self.make_room(taken);
            }
        }
        match &mut self.repr {
            Repr::Array(a) => &mut a[slot],
            Repr::Map { places, used } => {
                let mask = places.len() - 1;
                let mut i = Self::home(slot as u32, places.len().trailing_zeros());
                loop {
                    let k = places[i].0;
                    if k == slot as u32 {
                        break;
                    }
                    if k == FREE {
                        places[i] = (slot as u32, E::default());
                        *used += 1;
                        break;
                    }
                    i = (i + 1) & mask;
                }
                &mut places[i].1
            }
        }
    }

    /// Makes room in a map for `taken` slots at most half its places, or turns it into the
    /// array once that is no larger.
    fn make_room(&mut self, taken: usize) {
        let Repr::Map { places, .. } = &self.repr else {
            return;
        };
        let want = (taken * 2).next_power_of_two().max(MIN_CAPACITY);
        if want <= places.len() {
            return;
        }
        let entries: Vec<(u32, E)> = places
            .iter()
            .filter(|(k, e)| *k != FREE && e.taken())
            .copied()
            .collect();
        if want * std::mem::size_of::<(u32, E)>() >= self.len() * std::mem::size_of::<E>() {
            let mut a = vec![E::default(); self.len()];
            for (k, e) in entries {
                a[k as usize] = e;
            }
            self.repr = Repr::Array(a);
            return;
        }
        let mut places = vec![(FREE, E::default()); want];
        let (mask, bits) = (want - 1, want.trailing_zeros());
        for (k, e) in &entries {
            let mut i = Self::home(*k, bits);
            while places[i].0 != FREE {
                i = (i + 1) & mask;
            }
            places[i] = (*k, *e);
        }
        self.repr = Repr::Map {
            places,
            used: entries.len(),
        };
    }

    /// The taken slots and their contents, in no set order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, E)> + '_ {
        let (array, map): (&[E], &[(u32, E)]) = match &self.repr {
            Repr::Array(a) => (a, &[]),
            Repr::Map { places, .. } => (&[], places),
        };
        let array = array.iter().enumerate().map(|(k, e)| (k, *e));
        let map = map.iter().map(|(k, e)| (*k as usize, *e));
        array.chain(map).filter(|(_, e)| e.taken())
    }

    /// The taken slots and their contents, by slot.
    pub(super) fn sorted(&self) -> Vec<(usize, E)> {
        let mut v: Vec<(usize, E)> = self.iter().collect();
        if matches!(self.repr, Repr::Map { .. }) {
            v.sort_unstable_by_key(|(k, _)| *k);
        }
        v
    }

    /// The same entries in a table of `2^log2` slots, each at the slot `slot_of` gives it.
    pub(super) fn moved(&self, log2: u32, slot_of: impl Fn(&E) -> usize) -> Slots<E> {
        let taken = self.iter().count();
        let mut t = Slots::with_room(log2, taken);
        for (_, e) in self.iter() {
            *t.slot_mut(slot_of(&e)) = e;
        }
        t
    }
}

impl<E: Slot> PartialEq for Slots<E> {
    /// Two tables are equal when they have as many slots and the same taken ones, however
    /// each is held.
    fn eq(&self, other: &Slots<E>) -> bool {
        self.log2 == other.log2 && self.sorted() == other.sorted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mix(mut x: u64) -> u64 {
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// Writes and reads the same slots of a map and an array (the oracle).
    fn check_alike(log2: u32, writes: &[(u64, u32)]) -> Slots<[u32; 3]> {
        let mut map = Slots::<[u32; 3]>::new(log2);
        let mut array = Slots::<[u32; 3]>::array(log2);
        for (i, (key, v)) in writes.iter().enumerate() {
            let slot = (mix(*key) as usize) & (array.len() - 1);
            assert_eq!(map.get(slot), array.get(slot), "write {i}");
            let (a, b) = (map.slot_mut(slot), array.slot_mut(slot));
            assert_eq!(*a, *b);
            // a look that takes nothing leaves the slot free
            if v % 3 != 0 {
                *a = [v | 1, *v, i as u32];
                *b = [v | 1, *v, i as u32];
            }
        }
        assert_eq!(map, array);
        assert_eq!(map.sorted(), array.sorted());
        for slot in 0..array.len() {
            assert_eq!(map.get(slot), array.get(slot));
        }
        map
    }

    proptest! {
        #[test]
        fn a_map_holds_the_slots_an_array_holds(
            log2 in 4u32..12,
            writes in proptest::collection::vec((0u64..5_000, any::<u32>()), 0..3_000),
        ) {
            check_alike(log2, &writes);
        }
    }

    #[test]
    fn a_map_turns_into_the_array_once_that_is_smaller() {
        let writes: Vec<(u64, u32)> = (0..40_000).map(|k| (k, 7)).collect();
        let map = check_alike(14, &writes);
        assert!(map.is_array(), "2^14 slots nearly all taken are an array");
        let few = check_alike(20, &writes[..1_000]);
        assert!(!few.is_array());
        // a thousand taken slots of a million: at most 32 bytes each
        assert!(few.bytes() <= 2_048 * 16, "{} bytes", few.bytes());
        assert!(few.bytes() * 100 < Slots::<[u32; 3]>::array(20).bytes());
    }

    #[test]
    fn moved_entries_keep_their_content() {
        let mut t = Slots::<[u32; 4]>::new(8);
        for b in 1..100u32 {
            *t.slot_mut((mix(u64::from(b)) & 255) as usize) = [b, b, 0, 0];
        }
        let before: Vec<[u32; 4]> = t.sorted().into_iter().map(|(_, e)| e).collect();
        let moved = t.moved(9, |e| (mix(u64::from(e[0])) & 511) as usize);
        assert_eq!(moved.log2(), 9);
        let mut after: Vec<[u32; 4]> = moved.iter().map(|(_, e)| e).collect();
        after.sort_unstable();
        let mut before = before;
        before.sort_unstable();
        assert_eq!(before, after);
        for (slot, e) in moved.iter() {
            assert_eq!(slot, (mix(u64::from(e[0])) & 511) as usize);
        }
    }
}
