//! [`PageRows::resolve`]: the groups of a batched page's selected rows, found once per
//! distinct key on the page rather than once per row.
//!
//! A key of at most two parts that are NULL, integers near zero or short BINARY texts (Q1's
//! return flag and line status) packs into one number ([`super::groups::packed_key`],
//! [`packed_slots`]): rows with the same number have identical key values, so they share a
//! group and show the same keys. The page remembers the numbers it has seen with their groups;
//! only the first row of each (and any row whose key does not pack) goes through the group
//! table's lookup, which for a later row of the same number would find the same group and
//! change nothing: its rowid is higher (rows come in rowid order), so it brings no keys of
//! its own. A lower rowid (never on a well-formed page) takes the lookup again.

use smallvec::SmallVec;

use crate::datatype3::Collation;
use crate::decode::{CellBatch, ABSENT};
use crate::value::ValueRef;

use partitioner::format::read_be_int;

use super::batch::{Selection, Source};
use super::groups::{packed_part, GroupStates, GroupTable};

/// Up to this many packed keys a page remembers with their groups (more distinct keys on one
/// page take the group table's lookup).
const PAGE_KEYS: usize = 8;

/// How many rows ahead a row's lookup asks for a later row's index entry
/// ([`GroupTable::probes_ahead`]).
const PROBE_AHEAD: usize = 8;

/// A batched page's selected rows, for finding their groups.
pub struct PageRows<'s> {
    /// The selected rows.
    pub sel: &'s Selection,
    /// Every row's rowid.
    pub rowids: &'s [i64],
    /// Each key part's collation.
    pub collations: &'s [Collation],
    /// A group seen again from a lower rowid takes that row's keys.
    pub lowest_rowid_keys: bool,
}

impl PageRows<'_> {
    /// Each selected row's group into `groups` (cleared first): `packed(k, r)` is the packed
    /// key of selected row `k` (row `r` of the page), if it packs, and `part(k, r, j)` its key
    /// part `j`; `new_group` makes a new group's aggregate states.
    #[inline(always)]
    pub fn resolve<'a>(
        &self,
        table: &mut GroupTable,
        groups: &mut Vec<u32>,
        new_group: impl Fn() -> GroupStates,
        packed: impl Fn(usize, u32) -> Option<u128>,
        part: impl Fn(usize, u32, usize) -> ValueRef<'a>,
    ) {
        groups.clear();
        let parts = self.collations.len();
        let mut seen: SmallVec<[(u128, u32, i64); PAGE_KEYS]> = SmallVec::new();
        let mut last = 0usize;
        let mut key: SmallVec<[ValueRef<'a>; 4]> = SmallVec::new();
        // With an index past the nearer caches, every row's key hash first, and each row's
        // lookup asks for the entry of the row `PROBE_AHEAD` places on: the misses overlap.
        let mut hashes: SmallVec<[u32; 256]> = SmallVec::new();
        if table.probes_ahead() {
            hashes.extend(self.sel.iter().enumerate().map(|(k, &r)| {
                key.clear();
                key.extend((0..parts).map(|j| part(k, r, j)));
                table.key_hash(&key, self.collations)
            }));
            for &h in hashes.iter().take(PROBE_AHEAD) {
                table.prefetch_key(h);
            }
        }
        for (k, &r) in self.sel.iter().enumerate() {
            if let Some(&h) = hashes.get(k + PROBE_AHEAD) {
                table.prefetch_key(h);
            }
            let rowid = self.rowids[r as usize];
            let code = packed(k, r);
            let hit = code.and_then(|p| {
                if seen.get(last).is_some_and(|e| e.0 == p) {
                    Some(last)
                } else {
                    seen.iter().position(|e| e.0 == p)
                }
            });
            if let Some(h) = hit {
                if rowid >= seen[h].2 {
                    groups.push(seen[h].1);
                    last = h;
                    continue;
                }
            }
            key.clear();
            key.extend((0..parts).map(|j| part(k, r, j)));
            let g = table.find_or_insert_hashed(
                &key,
                self.collations,
                rowid,
                self.lowest_rowid_keys,
                &new_group,
                hashes.get(k).copied(),
            );
            match (hit, code) {
                (Some(h), _) => seen[h].2 = rowid,
                (None, Some(p)) if seen.len() < PAGE_KEYS => {
                    last = seen.len();
                    seen.push((p, g as u32, rowid));
                }
                _ => {}
            }
            groups.push(g as u32);
        }
    }
}

/// The packed key of row `r` whose key parts are the slots `sources` (under `collations`),
/// read straight from the decoded cells: what [`super::groups::packed_key`] gives for the
/// values [`super::batch::Batch::slot`] reads, or `None` (also for some keys that would pack,
/// such as a stored NaN: the group table's lookup then decides).
#[inline(always)]
pub fn packed_slots(
    cells: &CellBatch,
    base: &[u8],
    sources: &[Source<'_>],
    collations: &[Collation],
    r: u32,
) -> Option<u128> {
    if sources.len() > 2 {
        return None;
    }
    let mut code = 0u128;
    for (&source, &collation) in sources.iter().zip(collations) {
        let part = match source {
            Source::Record {
                needed,
                real,
                default,
            } => {
                let slot = cells.slot(r as usize, needed);
                match slot.serial {
                    0 => 0,
                    s @ 13..=27 if s & 1 == 1 => {
                        if collation != Collation::Binary {
                            return None;
                        }
                        let t = slot.bytes(base);
                        let bytes = t.iter().fold(0u64, |k, &b| (k << 8) | u64::from(b));
                        ((t.len() as u64 + 1) << 56) | bytes
                    }
                    8 | 9 if !real => {
                        packed_part(ValueRef::Integer(i64::from(slot.serial - 8)), collation)?
                    }
                    s @ 1..=6 if !real => {
                        let size = [0, 1, 2, 3, 4, 6, 8][s as usize];
                        let at = slot.offset as usize;
                        let i = read_be_int(base.get(at..at + size)?);
                        packed_part(ValueRef::Integer(i), collation)?
                    }
                    ABSENT => packed_part(default, collation)?,
                    _ => return None,
                }
            }
            Source::Rowid => {
                packed_part(ValueRef::Integer(cells.rowid(base, r as usize)), collation)?
            }
        };
        code = (code << 64) | u128::from(part);
    }
    Some(code)
}
