//! [`GroupIndex`]: the hash index of a [`super::groups::GroupTable`], an open-addressing
//! table of 16-byte entries probed linearly, whose place for a hash can be asked for ahead of
//! time ([`GroupIndex::prefetch`]).
//!
//! With hundreds of thousands of groups the index is larger than the CPU's caches, and a
//! lookup is a cache miss: `GROUP BY l_partkey` (200k groups) spent half its time waiting for
//! them, one after another. A general-purpose table (hashbrown keeps its control bytes and
//! entries apart: two misses) says nowhere where a hash will be looked for; this one does, so
//! the page's rows ask for their entries several rows ahead
//! ([`super::page_groups::PageRows::resolve`]) and the misses overlap. The entry holds the
//! group's number, the key packed into a number when it packs, and 32 bits of the key's
//! hash: the place is taken from the hash's low bits, growing rehashes nothing, and an entry
//! of another hash is passed over without looking at its group.

/// An entry: a group, its one-part key packed into a number ([`super::groups`]'s
/// `packed_part`, or `u64::MAX` when it does not pack), and its key's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot {
    /// The packed key, or `u64::MAX`.
    pub packed: u64,
    /// The group's number in its table ([`EMPTY`] in an unused entry).
    pub group: u32,
    /// The key's hash.
    pub hash: u32,
}

/// The group number of an unused entry (a table holds fewer than 2^32 - 1 groups: it spills
/// long before).
const EMPTY: u32 = u32::MAX;

const UNUSED: Slot = Slot {
    packed: 0,
    group: EMPTY,
    hash: 0,
};

/// The index: a power of two of entries, at most half of them used.
#[derive(Debug, Clone, Default)]
pub(super) struct GroupIndex {
    slots: Vec<Slot>,
    len: usize,
}

impl GroupIndex {
    /// How many groups are in the index.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The entry a lookup of `hash` starts at.
    #[inline(always)]
    fn home(&self, hash: u32) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    /// Asks the CPU to start loading the entry a lookup of `hash` starts at (a hint that
    /// never faults).
    #[inline(always)]
    pub fn prefetch(&self, hash: u32) {
        if self.slots.is_empty() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a pointer to an element of `slots`, only prefetched, never dereferenced.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                self.slots.as_ptr().add(self.home(hash)).cast::<i8>(),
            );
        }
    }

    /// The entry of hash `hash` for which `same` holds, if any.
    #[inline]
    pub fn find(&self, hash: u32, mut same: impl FnMut(&Slot) -> bool) -> Option<&Slot> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = self.home(hash);
        loop {
            let s = &self.slots[at];
            if s.group == EMPTY {
                return None;
            }
            if s.hash == hash && same(s) {
                return Some(s);
            }
            at = (at + 1) & mask;
        }
    }

    /// Makes room for `more` groups without growing.
    pub fn reserve(&mut self, more: usize) {
        let need = self.len.saturating_add(more).saturating_mul(2);
        if need > self.slots.len() {
            self.grow_to(need.next_power_of_two().max(16));
        }
    }

    /// Adds `slot`, whose key is in no entry.
    pub fn insert_unique(&mut self, slot: Slot) {
        debug_assert_ne!(slot.group, EMPTY);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow_to((self.slots.len() * 2).max(16));
        }
        self.place(slot);
        self.len += 1;
    }

    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let mut at = self.home(slot.hash);
        while self.slots[at].group != EMPTY {
            at = (at + 1) & mask;
        }
        self.slots[at] = slot;
    }

    fn grow_to(&mut self, entries: usize) {
        let old = std::mem::replace(&mut self.slots, vec![UNUSED; entries]);
        for s in old.into_iter().filter(|s| s.group != EMPTY) {
            self.place(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_hash_and_test_through_growth_and_collisions() {
        let mut index = GroupIndex::default();
        assert!(index.find(7, |_| true).is_none());
        // Hashes that share their low bits collide and are probed past.
        for g in 0..1000u32 {
            index.insert_unique(Slot {
                packed: u64::from(g) * 3,
                group: g,
                hash: (g % 10) << 20,
            });
        }
        assert_eq!(index.len(), 1000);
        assert!(index.slots.len() >= 2000 && index.slots.len().is_power_of_two());
        for g in 0..1000u32 {
            let hash = (g % 10) << 20;
            index.prefetch(hash);
            let found = index.find(hash, |s| s.packed == u64::from(g) * 3);
            assert_eq!(found.map(|s| s.group), Some(g));
        }
        assert!(index.find(3 << 20, |s| s.packed == 1).is_none());
        assert!(index.find(11, |_| true).is_none());
        let mut reserved = GroupIndex::default();
        reserved.reserve(100);
        let entries = reserved.slots.len();
        for g in 0..100 {
            reserved.insert_unique(Slot {
                packed: 0,
                group: g,
                hash: g.wrapping_mul(0x9E37_79B9),
            });
        }
        assert_eq!(reserved.slots.len(), entries, "no growth after reserving");
    }
}
