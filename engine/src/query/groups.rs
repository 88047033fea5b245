//! [`GroupTable`]: a grouped query's groups, found by their key values without building an
//! owned key per row.
//!
//! A row's key is its evaluated key expressions, borrowed from the page or the plan. Two keys
//! are the same group when SQLite calls every part equal under the key's collation (`1` and
//! `1.0`; `'a'` and `'A'` under NOCASE; `'a'` and `'a  '` under RTRIM): the hash is computed
//! from the borrowed parts normalized on the fly, and the equality test compares them with the
//! group's stored key values under the same rules ([`same_key`]), so a group owns nothing but
//! its key values and states (no normalized copy of its key).

use std::cmp::Ordering;
use std::hash::{BuildHasher, Hasher};

use hashbrown::DefaultHashBuilder;

use crate::datatype3::{compare_values, Collation};
use crate::value::{Value, ValueRef};

use super::aggregate::{rtrim, AggState, KeyPart};
use super::group_index::{GroupIndex, Slot};
use super::sort::prefix_under;

/// A group's key values: one is held in the group itself (no allocation of its own).
pub type GroupKeys = smallvec::SmallVec<[Value; 1]>;

/// A group's aggregate states: up to two are held in the group itself, beside its key, so that
/// finding a row's group and updating its states reach for one place in memory (`count(*)`
/// beside a `sum` is common: with one inline, the second state moved both to a block of their
/// own, a second cache miss a row and 96 more bytes a group).
pub type GroupStates = smallvec::SmallVec<[AggState; 2]>;

/// One group: its key values and aggregate states.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Group {
    /// The key values SQLite shows for the group (they differ from row to row only under
    /// NOCASE or RTRIM, or as 1 and 1.0): those of its row with the lowest rowid, or, with a
    /// one-argument `min()` or `max()`, of the row that aggregate chose (see
    /// `super::key_row`).
    pub keys: GroupKeys,
    /// The rowid of the row `keys` came from.
    pub keys_rowid: i64,
    /// One state per aggregate.
    pub states: GroupStates,
}

/// Asks the CPU to start loading every cache line of `x`: a hint that never faults.
#[inline(always)]
fn prefetch_lines<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..std::mem::size_of::<T>()).step_by(64) {
        // SAFETY: an address inside `x`, only computed; a prefetch reads and writes nothing.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (x as *const T).cast::<i8>().wrapping_add(at),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Up to this many groups, a key is looked for by comparing it with each group's key in turn
/// (no hash to compute); beyond, through the hash index.
const LINEAR_GROUPS: usize = 8;

/// From this many groups on (an index of 512 KiB and more: past a core's L1 and most of its
/// L2), a page's rows ask for their index entries ahead ([`GroupTable::probes_ahead`]).
const PROBE_AHEAD_GROUPS: usize = 16 * 1024;

/// No packed key: a real, a NOCASE or RTRIM text, a long text, a blob, several parts.
/// ([`packed_part`] never gives it: its top byte is at most 8 or 0x80.)
const UNPACKED: u64 = u64::MAX;

/// The packed form of a one-part key, or of a key of two integers from 0 to 2^31 - 1 (`GROUP
/// BY l_partkey, l_suppkey`: the first over the second's 31 bits), or [`UNPACKED`]. A table's
/// keys all have one number of parts, so two packed keys are the same group exactly when they
/// are equal; a packed and an unpacked key (`1` and `1.0`) may still be.
#[inline(always)]
fn packed_of(values: &[ValueRef<'_>], collations: &[Collation]) -> u64 {
    const PAIR: std::ops::Range<i64> = 0..1 << 31;
    match (values, collations) {
        ([v], [c]) => packed_part(*v, *c).unwrap_or(UNPACKED),
        ([ValueRef::Integer(a), ValueRef::Integer(b)], _)
            if PAIR.contains(a) && PAIR.contains(b) =>
        {
            ((*a as u64) << 31) | *b as u64
        }
        _ => UNPACKED,
    }
}

/// Groups by normalized key, in order of first appearance.
#[derive(Debug, Clone, Default)]
pub struct GroupTable {
    /// Indices into `groups`, hashed by normalized key, each beside its packed key: the
    /// entry holds the packed form of a one-part key ([`packed_part`]) when it packs, so that
    /// looking up such a key compares two numbers in the index itself instead of reaching
    /// for the group and its key values.
    index: GroupIndex,
    hasher: DefaultHashBuilder,
    /// The groups in order of first appearance.
    pub groups: Vec<Group>,
    /// The group the last row went to, and its packed key (or [`UNPACKED`]).
    last: Option<(usize, u64)>,
    /// At least the highest row id a group was met or made at: no group's `keys_rowid` is
    /// above it, so a row above it is no group's lower row (rows mostly come in rowid
    /// order: the group need not be read to know).
    max_rowid: i64,
    /// An estimate of the bytes the table holds ([`group_bytes`] of each group when it was
    /// made, plus what [`Self::add_bytes`] adds).
    bytes: usize,
    /// Whether every group's key is above the key of the group before, in SQLite's group
    /// order (a table clustered by its key: `GROUP BY order_id`, or a Django-style text
    /// timestamp, over rows in rowid order): the index is then empty, since a row's key is
    /// its last group's (found without it) or above every group's (a new group), and the
    /// groups are already in key order. Any other key builds the index of every group
    /// ([`Self::index_every_group`]) and ends this.
    ascending: bool,
}

/// How the borrowed key `values` compares with the stored key `keys` in SQLite's group order
/// ([`compare_key_values`]).
fn compare_to_keys(values: &[ValueRef<'_>], keys: &[Value], collations: &[Collation]) -> Ordering {
    compare_parts(
        values.iter().copied(),
        keys.iter().map(Value::as_ref),
        collations,
    )
}

/// Two keys' parts compared in turn, each under its collation.
fn compare_parts<'a, 'b>(
    a: impl Iterator<Item = ValueRef<'a>>,
    b: impl Iterator<Item = ValueRef<'b>>,
    collations: &[Collation],
) -> Ordering {
    for ((x, y), c) in a.zip(b).zip(collations) {
        let o = compare_values(x, y, *c);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// An estimate of the bytes group `g` takes in a table: the group, its index entry (at the
/// index's lowest load; it holds 32 bits of the key's hash), the entry that sorts it by key when the table is handed
/// over or spilled, its key values and their bytes, and its aggregate states as made.
pub fn group_bytes(g: &Group) -> usize {
    use std::mem::size_of;
    let heap = |v: &Value| match v {
        Value::Text(b) | Value::Blob(b) => b.capacity(),
        _ => 0,
    };
    size_of::<Group>()
        + 2 * size_of::<Slot>()
        + size_of::<(u128, usize)>()
        + if g.keys.spilled() {
            g.keys.capacity() * size_of::<Value>()
        } else {
            0
        }
        + g.keys.iter().map(heap).sum::<usize>()
        + if g.states.spilled() {
            g.states.capacity() * size_of::<AggState>()
        } else {
            0
        }
}

impl PartialEq for GroupTable {
    fn eq(&self, other: &Self) -> bool {
        self.groups == other.groups
    }
}

/// Feeds `t` normalized under `collation` to `h`, in the same pieces whether `t` is raw text
/// or a stored [`KeyPart::Text`] (normalizing is idempotent and keeps NOCASE lengths), so the
/// two hash alike.
fn hash_text(t: &[u8], collation: Collation, h: &mut impl Hasher) {
    match collation {
        Collation::Binary => h.write(t),
        Collation::RTrim => h.write(rtrim(t)),
        Collation::NoCase => {
            // `datatype3::nocase_key` a chunk at a time: folded up to the first NUL, zeros
            // after it.
            let mut buf = [0u8; 64];
            let mut past_nul = false;
            for chunk in t.chunks(64) {
                let b = &mut buf[..chunk.len()];
                if past_nul {
                    b.fill(0);
                } else {
                    b.copy_from_slice(chunk);
                    b.make_ascii_lowercase();
                    if let Some(nul) = b.iter().position(|&c| c == 0) {
                        b[nul..].fill(0);
                        past_nul = true;
                    }
                }
                h.write(b);
            }
        }
    }
}

fn hash_value(v: ValueRef<'_>, collation: Collation, h: &mut impl Hasher) {
    match v {
        ValueRef::Null => h.write_u8(0),
        ValueRef::Integer(i) => {
            h.write_u8(1);
            h.write_i64(i);
        }
        ValueRef::Real(r) => match KeyPart::of_real(r) {
            KeyPart::Integer(i) => {
                h.write_u8(1);
                h.write_i64(i);
            }
            _ => {
                h.write_u8(2);
                h.write_u64(r.to_bits());
            }
        },
        ValueRef::Text(t) => {
            h.write_u8(3);
            hash_text(t, collation, h);
            h.write_u8(0xff);
        }
        ValueRef::Blob(b) => {
            h.write_u8(4);
            h.write(b);
            h.write_u8(0xff);
        }
    }
}

/// Byte equality, inline: group keys are mostly short (flags, codes, dates), where a call to
/// `memcmp` costs more than the comparison.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && if a.len() <= 16 {
            a.iter().zip(b).all(|(x, y)| x == y)
        } else {
            a == b
        }
}

/// Whether the stored key value `k` and the value `v` are one group under `collation`
/// (what `KeyPart::of(k) == KeyPart::of(v)` says, without building either).
#[inline]
fn same_key(k: &Value, v: ValueRef<'_>, collation: Collation) -> bool {
    match (k.as_ref(), v) {
        (ValueRef::Null, ValueRef::Null) => true,
        (ValueRef::Integer(a), ValueRef::Integer(b)) => a == b,
        (ValueRef::Integer(a), ValueRef::Real(r)) | (ValueRef::Real(r), ValueRef::Integer(a)) => {
            matches!(KeyPart::of_real(r), KeyPart::Integer(b) if b == a)
        }
        (ValueRef::Real(a), ValueRef::Real(b)) => KeyPart::of_real(a) == KeyPart::of_real(b),
        (ValueRef::Text(a), ValueRef::Text(t)) => match collation {
            Collation::Binary => same_bytes(a, t),
            Collation::NoCase => Collation::NoCase.compare(a, t) == Ordering::Equal,
            Collation::RTrim => rtrim(a) == rtrim(t),
        },
        (ValueRef::Blob(a), ValueRef::Blob(b)) => same_bytes(a, b),
        _ => false,
    }
}

impl GroupTable {
    /// Whether group `g`'s key is `values`.
    #[inline]
    fn matches(&self, g: usize, values: &[ValueRef<'_>], collations: &[Collation]) -> bool {
        self.groups[g]
            .keys
            .iter()
            .zip(values)
            .zip(collations)
            .all(|((k, v), c)| same_key(k, *v, *c))
    }

    /// The index's hash of the key `values` (normalized under `collations`: equal keys hash
    /// alike whatever their spelling).
    #[inline]
    pub fn key_hash(&self, values: &[ValueRef<'_>], collations: &[Collation]) -> u32 {
        let mut h = self.hasher.build_hasher();
        for (v, c) in values.iter().zip(collations) {
            hash_value(*v, *c, &mut h);
        }
        (h.finish() >> 32) as u32
    }

    /// Whether looking keys up goes through an index too large for the CPU's nearer caches:
    /// a page's rows then ask for their entries ahead ([`Self::prefetch_key`]).
    #[inline]
    pub fn probes_ahead(&self) -> bool {
        self.index.len() >= PROBE_AHEAD_GROUPS
    }

    /// Asks the CPU to start loading the index entry a lookup of a key whose
    /// [`Self::key_hash`] is `hash` starts at.
    #[inline(always)]
    pub fn prefetch_key(&self, hash: u32) {
        self.index.prefetch(hash);
    }

    /// The group whose key is `values` (one per key, under `collations`), if there is one.
    pub fn find(&self, values: &[ValueRef<'_>], collations: &[Collation]) -> Option<usize> {
        if self.ascending {
            // No index yet: the groups in turn (`find_or_insert` builds the index instead).
            return (0..self.groups.len()).find(|&g| self.matches(g, values, collations));
        }
        self.find_packed(values, collations, packed_of(values, collations), None)
    }

    /// Group `g`'s index entry.
    fn slot_of(&self, g: usize, collations: &[Collation]) -> Slot {
        let keys = &self.groups[g].keys;
        let refs: smallvec::SmallVec<[ValueRef<'_>; 2]> = keys.iter().map(Value::as_ref).collect();
        Slot {
            packed: packed_of(&refs, collations),
            group: u32::try_from(g).expect("a group table spills long before 2^32 groups"),
            hash: self.key_hash(&refs, collations),
        }
    }

    /// Whether `values` is above the last group's key (while [`Self::ascending`], every
    /// group's), or there is no group.
    #[inline]
    fn above_every_group(&self, values: &[ValueRef<'_>], collations: &[Collation]) -> bool {
        self.groups
            .last()
            .is_none_or(|top| compare_to_keys(values, &top.keys, collations) == Ordering::Greater)
    }

    /// Ends [`Self::ascending`]: every group goes into the index.
    #[cold]
    fn index_every_group(&mut self, collations: &[Collation]) {
        if !std::mem::take(&mut self.ascending) {
            return;
        }
        self.index.reserve(self.groups.len());
        for g in 0..self.groups.len() {
            let slot = self.slot_of(g, collations);
            self.index.insert_unique(slot);
        }
    }

    /// [`Self::find`] of a key whose packed form is `packed` ([`packed_of`]).
    #[inline]
    fn find_packed(
        &self,
        values: &[ValueRef<'_>],
        collations: &[Collation],
        packed: u64,
        hash: Option<u32>,
    ) -> Option<usize> {
        if values.is_empty() {
            return (!self.groups.is_empty()).then_some(0);
        }
        if self.groups.len() <= LINEAR_GROUPS {
            return (0..self.groups.len()).find(|&g| self.matches(g, values, collations));
        }
        let hash = hash.unwrap_or_else(|| self.key_hash(values, collations));
        self.index
            .find(hash, |s| {
                if packed != UNPACKED && s.packed != UNPACKED {
                    s.packed == packed
                } else {
                    self.matches(s.group as usize, values, collations)
                }
            })
            .map(|s| s.group as usize)
    }

    /// The group of the row `rowid` whose key is `values`, created with `states` when new;
    /// with `lowest_rowid_keys` a group seen again from a lower rowid takes that row's key
    /// values.
    pub fn find_or_insert(
        &mut self,
        values: &[ValueRef<'_>],
        collations: &[Collation],
        rowid: i64,
        lowest_rowid_keys: bool,
        states: impl FnOnce() -> GroupStates,
    ) -> usize {
        self.find_or_insert_hashed(values, collations, rowid, lowest_rowid_keys, states, None)
    }

    /// [`Self::find_or_insert`] of a key whose [`Self::key_hash`] may be known already.
    pub fn find_or_insert_hashed(
        &mut self,
        values: &[ValueRef<'_>],
        collations: &[Collation],
        rowid: i64,
        lowest_rowid_keys: bool,
        states: impl FnOnce() -> GroupStates,
        hash: Option<u32>,
    ) -> usize {
        // Neighbouring rows often share a group: try the last one before hashing (by its
        // packed key when both pack, without reaching for its key values).
        let packed = packed_of(values, collations);
        let last = self.last.and_then(|(g, p)| {
            let same = if packed != UNPACKED && p != UNPACKED {
                p == packed
            } else {
                self.matches(g, values, collations)
            };
            same.then_some(g)
        });
        let found = match last {
            Some(g) => Some(g),
            None if self.ascending => {
                if self.above_every_group(values, collations) {
                    None
                } else {
                    self.index_every_group(collations);
                    self.find_packed(values, collations, packed, hash)
                }
            }
            None => self.find_packed(values, collations, packed, hash),
        };
        match found {
            Some(g) => {
                let group = &mut self.groups[g];
                // A group spans three cache lines; the caller updates its states next: ask
                // for all of them at once rather than one miss after another.
                prefetch_lines(group);
                // Otherwise (a min()/max() rule) the caller chooses the keys after the
                // update (`key_row::after_update`).
                if lowest_rowid_keys && rowid <= self.max_rowid && rowid < group.keys_rowid {
                    if group.keys.iter().zip(values).any(|(k, v)| k.as_ref() != *v) {
                        group.keys = values.iter().map(|v| ValueRef::to_owned(*v)).collect();
                    }
                    group.keys_rowid = rowid;
                }
                self.max_rowid = self.max_rowid.max(rowid);
                self.last = Some((g, packed));
                g
            }
            None => self.push(
                Group {
                    keys: values.iter().map(|v| ValueRef::to_owned(*v)).collect(),
                    keys_rowid: rowid,
                    states: states(),
                },
                collations,
            ),
        }
    }

    /// The groups sorted by key (SQLite's group order, [`compare_group_keys`]); the lookup
    /// is given up. No two groups of a table have equal keys, so the order is total.
    ///
    /// Sorted by [`key_prefix`] first, so that most comparisons are one of two integers
    /// beside each other in memory rather than of values behind two pointers.
    pub fn into_key_order(self, collations: &[Collation]) -> Vec<Group> {
        // The lookup freed before the sort's order is made: this is the table's peak.
        let GroupTable {
            index,
            mut groups,
            ascending,
            ..
        } = self;
        drop(index);
        if ascending {
            return groups;
        }
        let mut order: Vec<(u128, usize)> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (key_prefix(g, collations), i))
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| compare_group_keys(&groups[a.1], &groups[b.1], collations))
        });
        // The groups moved into that order in place, a cycle of the permutation at a time
        // (place `at` takes the group at `order[at].1`; a followed place is marked done).
        // Each step reads a group at a random place, a cache miss: `ahead` runs along the
        // cycle `AHEAD` places in front and asks for each group it passes, so that several
        // misses are under way at once (the permutation of 400k groups took a fifth of
        // `GROUP BY k` over 632k keys, one miss after another).
        const DONE: usize = usize::MAX;
        const AHEAD: usize = 8;
        for start in 0..order.len() {
            if order[start].1 == DONE {
                continue;
            }
            let mut ahead = Some(start);
            let step_ahead =
                |order: &[(u128, usize)], groups: &[Group], ahead: &mut Option<usize>| {
                    if let Some(a) = ahead.take() {
                        let next = order[a].1;
                        if next != start && next != DONE {
                            prefetch_lines(&groups[next]);
                            *ahead = Some(next);
                        }
                    }
                };
            for _ in 0..AHEAD {
                step_ahead(&order, &groups, &mut ahead);
            }
            let mut at = start;
            while order[at].1 != DONE {
                let from = std::mem::replace(&mut order[at].1, DONE);
                if from == start {
                    break;
                }
                groups.swap(at, from);
                at = from;
                step_ahead(&order, &groups, &mut ahead);
            }
        }
        groups
    }

    /// An estimate of the bytes the table holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Counts `bytes` more in the table's estimate (what its groups' states grew by).
    pub fn add_bytes(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Adds `group`, whose key no group has yet; returns its index.
    pub fn push(&mut self, group: Group, collations: &[Collation]) -> usize {
        let g = self.groups.len();
        self.max_rowid = self.max_rowid.max(group.keys_rowid);
        self.bytes += group_bytes(&group);
        let (packed, ascends) = {
            let refs: smallvec::SmallVec<[ValueRef<'_>; 2]> =
                group.keys.iter().map(Value::as_ref).collect();
            let ascends = if g == 0 {
                !refs.is_empty()
            } else {
                self.ascending && self.above_every_group(&refs, collations)
            };
            (packed_of(&refs, collations), ascends)
        };
        self.groups.push(group);
        self.last = Some((g, packed));
        if ascends {
            self.ascending = true;
        } else if self.ascending {
            // Every group into the index, this one too.
            self.index_every_group(collations);
        } else if !self.groups[g].keys.is_empty() {
            let slot = self.slot_of(g, collations);
            self.index.insert_unique(slot);
        }
        g
    }
}

/// Orders two groups by their keys as SQLite's grouping sorter does (each key under its
/// collation); `Equal` exactly when they are the same group.
pub fn compare_group_keys(a: &Group, b: &Group, collations: &[Collation]) -> Ordering {
    compare_key_values(&a.keys, &b.keys, collations)
}

/// [`compare_group_keys`] of two groups' key values.
pub fn compare_key_values(a: &[Value], b: &[Value], collations: &[Collation]) -> Ordering {
    compare_parts(
        a.iter().map(Value::as_ref),
        b.iter().map(Value::as_ref),
        collations,
    )
}

/// An order-preserving prefix of a group's key (its first part, as SQLite's grouping sorter
/// orders it: NULLs first, then numbers, texts under the key's collation, blobs): a lower
/// prefix is a lower key; equal prefixes say nothing ([`super::sort::prefix_under`]).
#[inline]
pub fn key_prefix(g: &Group, collations: &[Collation]) -> u128 {
    match (g.keys.first(), collations.first()) {
        (Some(v), Some(c)) => prefix_under(v.as_ref(), *c, false, true),
        _ => 0,
    }
}

/// One key part as a number for [`packed_key`]: NULL is 0, a text of at most seven bytes under
/// BINARY its length plus one in the top byte over its bytes, an integer within 2^55 of zero
/// 0x80 in the top byte over its low 56 bits. Different values (or storage classes) get
/// different numbers.
#[inline(always)]
pub(super) fn packed_part(v: ValueRef<'_>, collation: Collation) -> Option<u64> {
    match v {
        ValueRef::Null => Some(0),
        ValueRef::Text(t) if t.len() <= 7 && collation == Collation::Binary => {
            let bytes = t.iter().fold(0u64, |k, &b| (k << 8) | u64::from(b));
            Some(((t.len() as u64 + 1) << 56) | bytes)
        }
        ValueRef::Integer(i) if (-(1i64 << 55)..1i64 << 55).contains(&i) => {
            Some((0x80 << 56) | (i as u64 & ((1 << 56) - 1)))
        }
        _ => None,
    }
}

/// A group key of at most two parts as one number, when every part is NULL, an integer
/// within 2^55 of zero, or a text of at most seven bytes under BINARY (flags, codes): two rows
/// with the same number have identical key values, so they are in the same group and either
/// shows the same keys. `None` for any other key (reals, which equal integers, NOCASE and
/// RTRIM texts, which equal other spellings, longer texts, blobs, more parts).
#[inline(always)]
pub fn packed_key<'a>(mut parts: impl Iterator<Item = (ValueRef<'a>, Collation)>) -> Option<u128> {
    let Some((v, c)) = parts.next() else {
        return Some(0);
    };
    let first = packed_part(v, c)?;
    let Some((v, c)) = parts.next() else {
        return Some(u128::from(first));
    };
    let second = packed_part(v, c)?;
    if parts.next().is_some() {
        return None;
    }
    Some((u128::from(first) << 64) | u128::from(second))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(t: &GroupTable, v: &[ValueRef<'_>], c: &[Collation]) -> Option<usize> {
        t.find(v, c)
    }

    #[test]
    fn a_group_of_one_key_and_two_states_is_one_block() {
        // Its key and two states inline (no allocation of their own), in at most 152 bytes.
        let g = Group {
            keys: smallvec::smallvec![Value::Integer(1)],
            keys_rowid: 1,
            states: smallvec::smallvec![AggState::Count(0), AggState::Count(1)],
        };
        assert_eq!(std::mem::size_of::<Slot>(), 16);
        assert!(!g.keys.spilled() && !g.states.spilled());
        assert!(std::mem::size_of::<Group>() <= 152);
        assert_eq!(
            group_bytes(&g),
            std::mem::size_of::<Group>()
                + 2 * std::mem::size_of::<Slot>()
                + std::mem::size_of::<(u128, usize)>()
        );
    }

    #[test]
    fn keys_hashed_ahead_find_the_groups_their_spellings_share() {
        // Past PROBE_AHEAD_GROUPS, with the hash given as a page's rows compute it ahead:
        // 7 and 7.0, 'k7' and 'K7' under NOCASE are one group each, found again by any
        // spelling, and no key makes a second group.
        let c = [Collation::NoCase];
        let mut t = GroupTable::default();
        let keys = 3 * PROBE_AHEAD_GROUPS as i64;
        let texts: Vec<String> = (0..keys).map(|n| format!("k{n}")).collect();
        let upper: Vec<String> = texts.iter().map(|t| t.to_uppercase()).collect();
        let spell = |n: i64, turn: i64| match turn % 4 {
            0 => ValueRef::Integer(n),
            1 => ValueRef::Real(n as f64),
            2 => ValueRef::Text(texts[n as usize].as_bytes()),
            _ => ValueRef::Text(upper[n as usize].as_bytes()),
        };
        // The group each key (number, or text) went to when first met.
        let mut first: Vec<Option<usize>> = vec![None; 2 * keys as usize];
        let mut rowid = 0;
        for turn in 0..4 {
            for n in (0..keys).map(|i| (i * 7919) % keys) {
                rowid += 1;
                let v = [spell(n, turn)];
                let hash = t.probes_ahead().then(|| t.key_hash(&v, &c));
                let g = t.find_or_insert_hashed(&v, &c, rowid, true, GroupStates::new, hash);
                let key = (turn / 2 * keys + n) as usize;
                assert_eq!(*first[key].get_or_insert(g), g, "turn {turn}, key {n}");
            }
        }
        assert!(t.probes_ahead());
        assert_eq!(t.groups.len() as i64, 2 * keys);
    }

    #[test]
    fn ascending_integer_keys_need_no_index_until_a_key_falls_back() {
        let c = [Collation::Binary];
        let mut t = GroupTable::default();
        let mut rowid = 0;
        let mut row = |t: &mut GroupTable, v: ValueRef<'_>| {
            rowid += 1;
            t.find_or_insert(&[v], &c, rowid, true, GroupStates::new)
        };
        for k in 1..=100 {
            assert_eq!(row(&mut t, ValueRef::Integer(k * 10)), k as usize - 1);
            assert_eq!(row(&mut t, ValueRef::Integer(k * 10)), k as usize - 1);
        }
        assert!(t.ascending);
        assert!(t.index.len() == 0);
        // Found without the index, one group at a time.
        assert_eq!(key_of(&t, &[ValueRef::Integer(500)], &c), Some(49));
        assert_eq!(key_of(&t, &[ValueRef::Integer(505)], &c), None);
        // A real spelling of a group's integer is that group: the index is built for it.
        assert_eq!(row(&mut t, ValueRef::Real(70.0)), 6);
        assert!(!t.ascending);
        assert_eq!(t.index.len(), 100);
        assert_eq!(row(&mut t, ValueRef::Integer(500)), 49);
        assert_eq!(row(&mut t, ValueRef::Integer(5)), 100);
        assert_eq!(row(&mut t, ValueRef::Integer(2000)), 101);
        let keys: Vec<Value> = t
            .into_key_order(&c)
            .into_iter()
            .map(|g| g.keys[0].clone())
            .collect();
        let mut expected: Vec<Value> = (1..=100).map(|k| Value::Integer(k * 10)).collect();
        expected.insert(0, Value::Integer(5));
        expected.push(Value::Integer(2000));
        assert_eq!(keys, expected);

        // A lower key first met as a new group (a second range of the table) leaves the
        // mode too, and the groups still come out in key order.
        let mut t = GroupTable::default();
        for k in [3, 4, 9, 1, 4, 2] {
            row(&mut t, ValueRef::Integer(k));
        }
        assert_eq!(t.groups.len(), 5);
        let order: Vec<Value> = t
            .into_key_order(&c)
            .into_iter()
            .map(|g| g.keys[0].clone())
            .collect();
        assert_eq!(order, [1, 2, 3, 4, 9].map(Value::Integer));
    }

    #[test]
    fn keys_of_two_small_integers_pack_and_still_meet_their_other_spellings() {
        use ValueRef::{Integer as I, Real as R};
        let c = [Collation::Binary, Collation::Binary];
        let top = (1i64 << 31) - 1;
        assert_eq!(packed_of(&[I(0), I(0)], &c), 0);
        assert_ne!(packed_of(&[I(1), I(0)], &c), packed_of(&[I(0), I(1)], &c));
        assert_ne!(packed_of(&[I(top), I(top)], &c), UNPACKED);
        for unpacked in [[I(1 << 31), I(0)], [I(0), I(-1)], [I(0), R(1.0)]] {
            assert_eq!(packed_of(&unpacked, &c), UNPACKED, "{unpacked:?}");
        }
        // Enough groups for the index, in no key order; each key met again packed and as a
        // real, which is the same group (found by its values where either does not pack).
        let mut t = GroupTable::default();
        let mut rowid = 0;
        let mut row = |t: &mut GroupTable, v: &[ValueRef<'_>]| {
            rowid += 1;
            t.find_or_insert(v, &c, rowid, true, GroupStates::new)
        };
        let keys: Vec<(i64, i64)> = (0..500)
            .map(|i| ((i * 7919) % 501, (i * 31) % 17))
            .collect();
        for (g, &(a, b)) in keys.iter().enumerate() {
            assert_eq!(row(&mut t, &[I(a), I(b)]), g);
        }
        assert!(!t.ascending);
        for (g, &(a, b)) in keys.iter().enumerate().rev() {
            assert_eq!(row(&mut t, &[I(a), R(b as f64)]), g);
            assert_eq!(row(&mut t, &[R(a as f64), I(b)]), g);
            assert_eq!(row(&mut t, &[I(a), I(b)]), g);
            // The swapped pair is another group (or none yet).
            if a != b && a < 17 && b < 501 {
                let other = keys.iter().position(|&k| k == (b, a));
                assert_eq!(key_of(&t, &[I(b), I(a)], &c), other);
            }
        }
        // A group first met as reals is found by its packed spelling.
        let g = row(&mut t, &[R(600.0), R(3.0)]);
        assert_eq!(row(&mut t, &[I(600), I(3)]), g);
        assert_eq!(t.groups.len(), 501);
    }

    #[test]
    fn ascending_texts_and_compound_keys_need_no_index_either() {
        use Collation::*;
        let t_of = |rows: &[&[ValueRef<'_>]], c: &[Collation]| {
            let mut t = GroupTable::default();
            let found: Vec<usize> = rows
                .iter()
                .enumerate()
                .map(|(i, v)| t.find_or_insert(v, c, i as i64 + 1, true, GroupStates::new))
                .collect();
            (t, found)
        };
        let text = |s: &'static str| ValueRef::Text(s.as_bytes());
        // Text timestamps as an application appends them, under NOCASE: 'b' and 'B' are one
        // group, met again after a higher key.
        let (t, found) = t_of(
            &[
                &[text("2024-01-01 10:00")],
                &[text("2024-01-01 10:00")],
                &[text("2024-01-01 10:05")],
                &[text("a")],
                &[text("B")],
            ],
            &[NoCase],
        );
        assert_eq!(found, [0, 0, 1, 2, 3]);
        assert!(t.ascending && t.index.len() == 0);
        let (t, found) = t_of(
            &[&[text("a")], &[text("B")], &[text("c")], &[text("b")]],
            &[NoCase],
        );
        assert_eq!(found, [0, 1, 2, 1]);
        assert!(!t.ascending);
        // Two parts, compared in turn: (2, 'a') is above (1, 'y').
        let (i, x) = (ValueRef::Integer, text);
        let (t, found) = t_of(
            &[
                &[i(1), x("x")],
                &[i(1), x("y")],
                &[i(2), x("a")],
                &[i(1), x("y")],
                &[i(1), x("a")],
            ],
            &[Binary, Binary],
        );
        assert_eq!(found, [0, 1, 2, 1, 3]);
        let order: Vec<Vec<Value>> = t
            .into_key_order(&[Binary, Binary])
            .into_iter()
            .map(|g| g.keys.to_vec())
            .collect();
        let key = |n: i64, s: &str| vec![Value::Integer(n), Value::text(s)];
        assert_eq!(order, [key(1, "a"), key(1, "x"), key(1, "y"), key(2, "a")]);
    }

    #[test]
    fn borrowed_keys_find_the_groups_sqlite_calls_equal() {
        use Collation::*;
        let mut t = GroupTable::default();
        let cases: [(&[ValueRef<'_>], &[Collation]); 6] = [
            (
                &[ValueRef::Integer(1), ValueRef::Text(b"a")],
                &[Binary, NoCase],
            ),
            (
                &[ValueRef::Real(2.5), ValueRef::Text(b"x  ")],
                &[Binary, RTrim],
            ),
            (&[ValueRef::Null, ValueRef::Blob(b"b")], &[Binary, Binary]),
            (&[ValueRef::Real(0.0), ValueRef::Null], &[Binary, Binary]),
            (
                &[ValueRef::Text(&[b'Q'; 200]), ValueRef::Null],
                &[NoCase, Binary],
            ),
            (
                &[ValueRef::Integer(7), ValueRef::Integer(8)],
                &[Binary, Binary],
            ),
        ];
        for (i, (v, c)) in cases.iter().enumerate() {
            assert_eq!(t.find_or_insert(v, c, i as i64, true, GroupStates::new), i);
        }
        // Equal under SQLite's rules: the same group, found from borrowed values.
        let q = [b'q'; 200];
        let equal: [(&[ValueRef<'_>], &[Collation], usize); 5] = [
            (
                &[ValueRef::Real(1.0), ValueRef::Text(b"A")],
                &[Binary, NoCase],
                0,
            ),
            (
                &[ValueRef::Real(2.5), ValueRef::Text(b"x")],
                &[Binary, RTrim],
                1,
            ),
            (
                &[ValueRef::Integer(0), ValueRef::Null],
                &[Binary, Binary],
                3,
            ),
            (
                &[ValueRef::Real(-0.0), ValueRef::Null],
                &[Binary, Binary],
                3,
            ),
            (&[ValueRef::Text(&q), ValueRef::Null], &[NoCase, Binary], 4),
        ];
        for (v, c, g) in equal {
            assert_eq!(key_of(&t, v, c), Some(g), "{v:?}");
        }
        // Not equal: text is not a number, a blob is not text, BINARY is case-sensitive.
        let other: [(&[ValueRef<'_>], &[Collation]); 4] = [
            (
                &[ValueRef::Text(b"1"), ValueRef::Text(b"a")],
                &[Binary, NoCase],
            ),
            (&[ValueRef::Null, ValueRef::Text(b"b")], &[Binary, Binary]),
            (
                &[ValueRef::Integer(7), ValueRef::Real(8.5)],
                &[Binary, Binary],
            ),
            (
                &[ValueRef::Real(2.5000001), ValueRef::Text(b"x")],
                &[Binary, RTrim],
            ),
        ];
        for (v, c) in other {
            assert_eq!(key_of(&t, v, c), None, "{v:?}");
        }
        // A lower rowid brings its own spelling of the key.
        t.find_or_insert(
            &[ValueRef::Real(1.0), ValueRef::Text(b"A")],
            &[Binary, NoCase],
            -1,
            true,
            GroupStates::new,
        );
        assert_eq!(t.groups[0].keys[..], [Value::Real(1.0), Value::text("A")]);
    }

    #[test]
    fn rows_above_every_rowid_met_keep_the_keys_and_lower_rows_bring_theirs() {
        use Collation::NoCase;
        let mut t = GroupTable::default();
        let meet = |t: &mut GroupTable, key: &'static [u8], rowid: i64| {
            t.find_or_insert(
                &[ValueRef::Text(key)],
                &[NoCase],
                rowid,
                true,
                GroupStates::new,
            )
        };
        // Groups met in rowid order, then out of it (a leaf of lower rowids read last).
        assert_eq!(meet(&mut t, b"b", 10), 0);
        assert_eq!(meet(&mut t, b"x", 30), 1);
        assert_eq!(meet(&mut t, b"B", 40), 0);
        assert_eq!(t.groups[0].keys[..], [Value::text("b")]);
        meet(&mut t, b"B", 20);
        assert_eq!(
            (t.groups[0].keys_rowid, &t.groups[0].keys[..]),
            (10, &[Value::text("b")][..])
        );
        meet(&mut t, b"B", 5);
        assert_eq!(
            (t.groups[0].keys_rowid, &t.groups[0].keys[..]),
            (5, &[Value::text("B")][..])
        );
        // A group pushed whole raises the bound with its row id.
        let mut u = GroupTable::default();
        u.push(
            Group {
                keys: std::iter::once(Value::text("q")).collect(),
                keys_rowid: 100,
                states: GroupStates::new(),
            },
            &[NoCase],
        );
        meet(&mut u, b"Q", 50);
        assert_eq!(
            (u.groups[0].keys_rowid, &u.groups[0].keys[..]),
            (50, &[Value::text("Q")][..])
        );
    }
}
