//! The coordinator's side of a grouped query, in parallel: the executors' partial groups
//! (each executor's run sorted by key, [`super::merge::Partial::KeyOrder`]) are cut into
//! slices of the key space, one per executor, and each slice is merged, finished (aggregates,
//! `HAVING`, output columns) and, for `ORDER BY ... LIMIT`, cut to its best rows on a thread
//! of its own; the coordinator then only concatenates the slices in key order, or merges
//! their best rows.
//!
//! The slices are ranges of keys, not hashes of them: every group of one key lands in one
//! slice (the cuts are found by binary search in each sorted run), and the slices in order
//! are SQLite's group order, so the answer is the same rows in the same order as a serial
//! merge's for every core count, with the same first error: a slice stops at its first
//! failing group, and the coordinator reports the failure only where a serial merge would have
//! reached it (before the `LIMIT` is filled, after the `OFFSET`'s groups; with `ORDER BY`, the
//! first in key order).
//!
//! A run may be a file ([`super::group_spill`]: an executor's groups beyond its memory
//! budget): it is cut at the same keys, each slice reading its part from the run's nearest
//! mark. [`GroupQuery::compact`] merges an executor's spilled runs into one without finishing
//! them, so that no merge reads more than a bounded number of files.

use std::cmp::Ordering;

use crate::datatype3::Collation;
use crate::value::{Value, ValueRef};

use super::aggregate::AggState;
use super::eval::{eval, holds};
use super::group_spill::{
    bound_of, compare_to_bound, GroupReader, GroupWriter, KeyBound, SpilledGroups,
};
use super::groups::{compare_group_keys, compare_key_values, key_prefix, Group};
use super::ir::{AggSpec, Expr, QueryPlan, Shape};
use super::key_row::{self, KeyRow};
use super::marks::compare_keys;
use super::run_heap;
use super::sort::SpillError;

mod streamed;
pub use streamed::{StreamedGroups, SLICE_GROUPS};

/// Why finishing a group failed (`integer overflow`, an output column's error): SQLite's
/// message.
type GroupError = String;

/// One executor's run of groups sorted by key, as the merge takes it.
#[derive(Debug)]
pub enum Run {
    /// In memory.
    Memory(Vec<Group>),
    /// Spilled to the scratch directory.
    File(SpilledGroups),
}

impl Run {
    fn len(&self) -> usize {
        match self {
            Run::Memory(g) => g.len(),
            Run::File(f) => f.groups,
        }
    }
}

/// Where a slice's merge reads one run's groups.
enum Cursor<'r> {
    /// A part of a run in memory (its groups are taken out).
    Memory(std::slice::IterMut<'r, Group>),
    /// A range of keys of a spilled run.
    File(Box<GroupReader>),
}

/// What a grouped query's merge needs of its plan.
pub(super) struct GroupQuery<'p> {
    /// The plan (its `ORDER BY`, `LIMIT`, `OFFSET`, `DISTINCT`).
    pub plan: &'p QueryPlan,
    /// The collation of each key.
    pub collations: Vec<Collation>,
    /// The aggregates.
    pub aggregates: &'p [AggSpec],
    /// `HAVING`.
    pub having: Option<&'p Expr>,
    /// The output columns.
    pub outputs: &'p [Expr],
    /// Which row of a group shows its keys.
    key_row: KeyRow,
}

/// A finished group: its `ORDER BY` values, its place for ties (its place in key order, or
/// for `DISTINCT` its first row's rowid), its output values.
type Finished = (Vec<Value>, i64, Vec<Value>);

/// What one slice's merge produced.
struct Slice {
    /// Without `ORDER BY`: the groups that passed `HAVING`, in key order, each with its
    /// output columns or their failure (which matters only if the `OFFSET` does not skip the
    /// group).
    listed: Vec<Result<Finished, GroupError>>,
    /// With `ORDER BY`: the groups that passed `HAVING`, or with a `LIMIT` the best of them.
    ranked: Vec<Finished>,
    /// The failure that ended the slice after its rows (finishing an aggregate, `HAVING`;
    /// with `ORDER BY`, the output columns too).
    failed: Option<GroupError>,
    /// Whether the slice had any group.
    any: bool,
    /// Its groups (those merged before a `LIMIT` or a failure ended it).
    groups: u64,
}

/// A grouped query's merged answer.
#[derive(Debug)]
pub struct Merged {
    /// The result rows.
    pub rows: Vec<Vec<Value>>,
    /// The groups merged (fewer when a `LIMIT` ended the merge early).
    pub groups: u64,
}

/// What [`GroupQuery::tally`] found.
#[derive(Debug)]
pub struct Tally {
    /// The groups.
    pub groups: u64,
    /// The groups whose first key is not NULL.
    pub keyed: u64,
    /// Every group's aggregate states merged into one per aggregate.
    pub states: Vec<AggState>,
}

impl Slice {
    fn failed(e: GroupError) -> Slice {
        Slice {
            listed: Vec::new(),
            ranked: Vec::new(),
            failed: Some(e),
            any: true,
            groups: 0,
        }
    }
}

impl<'p> GroupQuery<'p> {
    /// The merge of `plan`'s groups (`None` for a plan without groups).
    pub fn of(plan: &'p QueryPlan) -> Option<Self> {
        match &plan.shape {
            Shape::Groups {
                keys,
                aggregates,
                having,
                outputs,
            } => Some(GroupQuery {
                plan,
                collations: keys.iter().map(|k| k.1).collect(),
                aggregates,
                having: having.as_ref(),
                outputs,
                key_row: KeyRow::of(&plan.shape, plan.order_by.iter().map(|k| &k.expr)),
            }),
            Shape::Rows { .. } => None,
        }
    }

    /// Combines a group with the same key's group from a later run.
    fn combine(&self, into: &mut Group, later: Group) {
        key_row::merge(self.key_row, into, later, |into, later| {
            for ((spec, s), later) in self.aggregates.iter().zip(&mut into.states).zip(later) {
                s.merge(spec, later);
            }
        })
    }

    /// Merges spilled runs (in the order written) into one run of the next level, in
    /// `dir`, without finishing the groups.
    pub fn compact(
        &self,
        runs: &[SpilledGroups],
        dir: &std::path::Path,
    ) -> Result<SpilledGroups, SpillError> {
        let level = runs.iter().map(|r| r.level).max().unwrap_or(0) + 1;
        let mut out = GroupWriter::create(dir, &self.collations, level)?;
        let cursors = runs
            .iter()
            .map(|r| Cursor::File(Box::new(r.reader(&self.collations, None, None))))
            .collect();
        merge_key_order(
            cursors,
            &self.collations,
            |into, later| self.combine(into, later),
            |_, g| out.push(&g).map(|()| true),
            |e| e,
        )?;
        out.finish()
    }
}

impl GroupQuery<'_> {
    /// Without `ORDER BY` (and not `DISTINCT`), groups come out in key order and the loop
    /// stops at the `LIMIT`.
    fn in_order(&self) -> bool {
        self.plan.order_by.is_empty() && !self.plan.distinct
    }

    fn offset(&self) -> usize {
        usize::try_from(self.plan.offset).unwrap_or(usize::MAX)
    }

    fn limit(&self) -> usize {
        self.plan
            .limit
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX))
    }

    /// The tie order of two finished groups.
    fn order(&self, a: &Finished, b: &Finished) -> Ordering {
        compare_keys(&self.plan.order_by, &a.0, &b.0).then(a.1.cmp(&b.1))
    }

    /// Merges the runs (sorted by key, in range order) on up to `threads` threads into the
    /// result rows.
    pub fn merge(&self, runs: Vec<Run>, threads: usize) -> Result<Merged, GroupError> {
        let no_keys = self.collations.is_empty();
        let mut runs = runs;
        let slices = split_runs(&mut runs, &self.collations, threads);
        let count = slices.len();
        // 'now' in an output column is the statement's on every merging thread.
        let now = super::dates::this_thread_statement_time();
        let mut done: Vec<Slice> = std::thread::scope(|scope| {
            let mut slices = slices.into_iter().enumerate();
            let first = slices.next();
            let handles: Vec<_> = slices
                .map(|(i, runs)| {
                    std::thread::Builder::new()
                        .name(format!("corescan-merge{i}"))
                        .spawn_scoped(scope, move || {
                            if let Some(now) = now {
                                super::dates::set_statement_time(now);
                            }
                            self.merge_slice(i, runs)
                        })
                })
                .collect();
            let mut out = Vec::with_capacity(count);
            if let Some((i, runs)) = first {
                out.push(self.merge_slice(i, runs));
            }
            for h in handles {
                out.push(match h {
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    Err(e) => {
                        Slice::failed(format!("could not start a thread to merge groups: {e}"))
                    }
                });
            }
            out
        });
        if no_keys && !done.iter().any(|s| s.any) {
            // An aggregate over no rows is one group.
            let states = self.aggregates.iter().map(AggState::new).collect();
            let empty = Group {
                keys: Default::default(),
                keys_rowid: i64::MIN,
                states,
            };
            let mut one = [empty];
            done = vec![self.merge_slice(0, vec![Cursor::Memory(one.iter_mut())])];
        }
        let groups = done.iter().map(|s| s.groups).sum();
        Ok(Merged {
            rows: self.combine_slices(done)?,
            groups,
        })
    }

    /// Merges the runs (sorted by key, in range order) on up to `threads` threads as
    /// [`GroupQuery::merge`] does, but counts the groups instead of finishing them, and
    /// merges every group's aggregate states into one per aggregate (for aggregates whose
    /// merge does not depend on the order: `count`). Nothing is kept per group, so the
    /// memory is the runs' readers', however many groups there are.
    pub fn tally(&self, runs: Vec<Run>, threads: usize) -> Result<Tally, GroupError> {
        let mut runs = runs;
        let slices = split_runs(&mut runs, &self.collations, threads);
        let tally_slice = |runs: Vec<Cursor<'_>>| -> Result<Tally, GroupError> {
            let mut states: Vec<AggState> = self.aggregates.iter().map(AggState::new).collect();
            let mut keyed = 0u64;
            let groups = merge_key_order(
                runs,
                &self.collations,
                |into, later| self.combine(into, later),
                |_, g: Group| {
                    if !g.keys.first().is_some_and(Value::is_null) {
                        keyed += 1;
                    }
                    for ((spec, s), later) in self.aggregates.iter().zip(&mut states).zip(g.states)
                    {
                        s.merge(spec, later);
                    }
                    Ok(true)
                },
                |e| e.to_string(),
            )?;
            Ok(Tally {
                groups: groups as u64,
                keyed,
                states,
            })
        };
        let done: Vec<Result<Tally, GroupError>> = std::thread::scope(|scope| {
            let mut slices = slices.into_iter();
            let first = slices.next();
            let handles: Vec<_> = slices
                .enumerate()
                .map(|(i, runs)| {
                    std::thread::Builder::new()
                        .name(format!("corescan-tally{}", i + 1))
                        .spawn_scoped(scope, move || tally_slice(runs))
                })
                .collect();
            let mut out = Vec::new();
            if let Some(runs) = first {
                out.push(tally_slice(runs));
            }
            for h in handles {
                out.push(match h {
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    Err(e) => Err(format!("could not start a thread to count groups: {e}")),
                });
            }
            out
        });
        let mut all = Tally {
            groups: 0,
            keyed: 0,
            states: self.aggregates.iter().map(AggState::new).collect(),
        };
        for t in done {
            let t = t?;
            all.groups += t.groups;
            all.keyed += t.keyed;
            for ((spec, s), more) in self.aggregates.iter().zip(&mut all.states).zip(t.states) {
                s.merge(spec, more);
            }
        }
        Ok(all)
    }

    /// The result rows from the slices, in key order.
    fn combine_slices(&self, slices: Vec<Slice>) -> Result<Vec<Vec<Value>>, GroupError> {
        let (offset, limit) = (self.offset(), self.limit());
        if self.in_order() {
            // As the serial loop goes: the OFFSET skips groups (after HAVING, before their
            // output columns, so a skipped group's failing output is no error), a failure
            // before the LIMIT is filled ends the query, nothing after it is looked at.
            let (mut out, mut skipped) = (Vec::new(), 0usize);
            for slice in slices {
                for row in slice.listed {
                    if out.len() >= limit {
                        return Ok(out);
                    }
                    if skipped < offset {
                        skipped += 1;
                        continue;
                    }
                    out.push(row?.2);
                }
                if let Some(e) = slice.failed {
                    if out.len() < limit {
                        return Err(e);
                    }
                }
            }
            return Ok(out);
        }
        // Every group is finished: the first failure in key order is the query's.
        let mut all: Vec<Finished> = Vec::new();
        for slice in slices {
            all.extend(slice.ranked);
            if let Some(e) = slice.failed {
                return Err(e);
            }
        }
        // Each slice's rows are in key order (or are its best, in any order): the stable
        // sort merges runs.
        all.sort_by(|a, b| self.order(a, b));
        Ok(all
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|r| r.2)
            .collect())
    }

    /// Merges and finishes one slice (number `index`, of runs in range order); its groups
    /// are taken out of the runs.
    fn merge_slice(&self, index: usize, runs: Vec<Cursor<'_>>) -> Slice {
        let in_order = self.in_order();
        // Without ORDER BY no slice needs more than OFFSET + LIMIT groups past HAVING: the
        // slices before it can only take some of those places.
        let enough = self.offset().saturating_add(self.limit());
        // With ORDER BY and LIMIT only the best `OFFSET + LIMIT` rows are kept: the buffer
        // is cut back to them whenever it holds twice as many.
        let keep = (!in_order && self.plan.limit.is_some()).then_some(enough);
        let mut slice = Slice {
            listed: Vec::new(),
            ranked: Vec::new(),
            failed: None,
            any: false,
            groups: 0,
        };
        let base = (index as i64) << 40;
        // With a LIMIT's best rows kept, a group that ranks after the last cut's worst kept
        // row can never be among them: its output columns are not computed, unless
        // computing one could fail (SQLite computes every group's before it sorts).
        let outputs_may_fail = self.outputs.iter().any(Expr::may_fail);
        let mut bar: Option<(Vec<Value>, i64)> = None;
        // A group's key values, then its aggregates' results: one buffer for every group.
        let mut slots: Vec<Value> = Vec::new();
        // A group's `ORDER BY` values (kept only for a group that takes a place).
        let sort_len = self.plan.order_by.len();
        let mut sort_buf: Vec<Value> = Vec::with_capacity(sort_len);
        let mut finish = |seq: usize, g: Group| -> Result<bool, GroupError> {
            if in_order && slice.listed.len() >= enough {
                return Ok(false);
            }
            let seq = if self.plan.distinct {
                g.keys_rowid
            } else {
                base + seq as i64
            };
            // Left out by HAVING: the merge goes on.
            let Some(refs) = self.finish_group(g, &mut slots)? else {
                return Ok(true);
            };
            if in_order {
                let row = self.output(&refs).map(|(sort, values)| (sort, seq, values));
                slice.listed.push(row);
                return Ok(true);
            }
            self.sort_values_into(&refs, &mut sort_buf)?;
            if let Some((worst, worst_seq)) = bar.as_ref().filter(|_| !outputs_may_fail) {
                let after = compare_keys(&self.plan.order_by, &sort_buf, worst)
                    .then(seq.cmp(worst_seq))
                    .is_gt();
                if after {
                    return Ok(true);
                }
            }
            let sort = std::mem::replace(&mut sort_buf, Vec::with_capacity(sort_len));
            let values = self.output_values(&refs)?;
            slice.ranked.push((sort, seq, values));
            if let Some(k) = keep.filter(|&k| k > 0 && slice.ranked.len() >= k.saturating_mul(2)) {
                slice
                    .ranked
                    .select_nth_unstable_by(k - 1, |a, b| self.order(a, b));
                slice.ranked.truncate(k);
                let worst = &slice.ranked[k - 1];
                bar = Some((worst.0.clone(), worst.1));
            }
            Ok(true)
        };
        let merged = merge_key_order(
            runs,
            &self.collations,
            |into, later| self.combine(into, later),
            &mut finish,
            |e| e.to_string(),
        );
        match merged {
            Ok(n) => {
                slice.any = n > 0;
                slice.groups = n as u64;
            }
            // Only a group's finishing fails.
            Err(e) => {
                slice.failed = Some(e);
                slice.any = true;
            }
        }
        slice
    }

    /// Finishes group `g` into `slots` (emptied first: its key values, then its aggregates'
    /// results) and returns them as references, or `None` when `HAVING` leaves the group
    /// out.
    fn finish_group<'s>(
        &self,
        g: Group,
        slots: &'s mut Vec<Value>,
    ) -> Result<Option<smallvec::SmallVec<[ValueRef<'s>; 8]>>, GroupError> {
        slots.clear();
        slots.extend(g.keys);
        for (spec, s) in self.aggregates.iter().zip(g.states) {
            slots.push(s.finish(spec)?);
        }
        let refs: smallvec::SmallVec<[ValueRef<'s>; 8]> = slots.iter().map(Value::as_ref).collect();
        if let Some(h) = self.having {
            if !holds(h, &refs)? {
                return Ok(None);
            }
        }
        Ok(Some(refs))
    }

    /// A finished group's `ORDER BY` values and output values.
    fn output(&self, refs: &[ValueRef<'_>]) -> Result<(Vec<Value>, Vec<Value>), GroupError> {
        Ok((self.sort_values(refs)?, self.output_values(refs)?))
    }

    /// A finished group's `ORDER BY` values.
    fn sort_values(&self, refs: &[ValueRef<'_>]) -> Result<Vec<Value>, GroupError> {
        let mut out = Vec::with_capacity(self.plan.order_by.len());
        self.sort_values_into(refs, &mut out)?;
        Ok(out)
    }

    /// [`GroupQuery::sort_values`] into `out`, emptied first (a buffer kept from group to
    /// group: most groups' values are compared once and thrown away).
    fn sort_values_into(
        &self,
        refs: &[ValueRef<'_>],
        out: &mut Vec<Value>,
    ) -> Result<(), GroupError> {
        out.clear();
        for k in &self.plan.order_by {
            out.push(eval(&k.expr, refs).map_err(|e| e.to_string())?);
        }
        Ok(())
    }

    /// A finished group's output values.
    fn output_values(&self, refs: &[ValueRef<'_>]) -> Result<Vec<Value>, GroupError> {
        self.outputs
            .iter()
            .map(|e| eval(e, refs))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())
    }
}

/// Cuts runs of groups sorted by key into at most `slices` slices of the key space: slice
/// `i` holds, from every run in run order, the groups between splitter `i - 1` and splitter
/// `i` (taken at even places of the largest run), so each key is in one slice and the slices
/// are in key order. Few groups stay one slice. Nothing is copied: a slice borrows its parts
/// of the runs in memory, and reads its range of keys of a spilled run.
fn split_runs<'r>(
    runs: &'r mut [Run],
    collations: &[Collation],
    slices: usize,
) -> Vec<Vec<Cursor<'r>>> {
    let total: usize = runs.iter().map(Run::len).sum();
    let slices = slices.min(total / 2);
    let in_memory = || runs.iter().all(|r| matches!(r, Run::Memory(_)));
    let splitters: Vec<KeyBound> = match runs.iter().max_by_key(|r| r.len()) {
        _ if slices <= 1 || collations.is_empty() => Vec::new(),
        None => Vec::new(),
        Some(_) if runs.len() > 1 && in_memory() => balanced_splitters(runs, collations, slices),
        Some(Run::File(f)) => f.splitters(slices),
        Some(Run::Memory(largest)) => {
            // Distinct places of one run are distinct keys.
            let mut places: Vec<usize> = (1..slices)
                .map(|i| largest.len() * i / slices)
                .filter(|&p| p > 0)
                .collect();
            places.dedup();
            places
                .into_iter()
                .map(|p| (key_prefix(&largest[p], collations), largest[p].keys.clone()))
                .collect()
        }
    };
    let mut out: Vec<Vec<Cursor<'r>>> = (0..=splitters.len())
        .map(|_| Vec::with_capacity(runs.len()))
        .collect();
    for run in runs.iter_mut() {
        match run {
            Run::Memory(run) => {
                let cuts: Vec<usize> = splitters
                    .iter()
                    .map(|s| {
                        run.partition_point(|g| {
                            compare_to_bound(g, s, collations) == Ordering::Less
                        })
                    })
                    .collect();
                let mut rest: &mut [Group] = run;
                let mut taken = 0;
                for (i, &cut) in cuts.iter().enumerate() {
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(cut - taken);
                    out[i].push(Cursor::Memory(head.iter_mut()));
                    rest = tail;
                    taken = cut;
                }
                out[cuts.len()].push(Cursor::Memory(rest.iter_mut()));
            }
            Run::File(f) => {
                for (i, slice) in out.iter_mut().enumerate() {
                    let lower = i.checked_sub(1).map(|j| splitters[j].clone());
                    let upper = splitters.get(i).cloned();
                    slice.push(Cursor::File(Box::new(f.reader(collations, lower, upper))));
                }
            }
        }
    }
    out
}

/// Splitters that cut runs in memory into `slices` slices of about equal numbers of groups,
/// whatever the runs' key ranges: each run offers keys at even places, each standing for the
/// groups of its run up to the next, and the splitters are the offered keys where the groups
/// so counted, in key order, pass each `i / slices` of the total. (Places of the largest run
/// alone cut badly when the runs hold different ranges of keys, as executors that each read
/// a range of a table clustered by the key do: with two, one slice took three quarters.)
fn balanced_splitters(runs: &[Run], collations: &[Collation], slices: usize) -> Vec<KeyBound> {
    let per_run = slices * 16;
    let mut offered: Vec<(&Group, usize)> = Vec::with_capacity(runs.len() * per_run);
    for run in runs {
        let Run::Memory(groups) = run else { continue };
        let len = groups.len();
        let places = per_run.min(len);
        for j in 0..places {
            let (at, next) = (len * j / places, len * (j + 1) / places);
            offered.push((&groups[at], next - at));
        }
    }
    offered.sort_by(|a, b| {
        key_prefix(a.0, collations)
            .cmp(&key_prefix(b.0, collations))
            .then_with(|| compare_group_keys(a.0, b.0, collations))
    });
    let total: usize = offered.iter().map(|o| o.1).sum();
    let mut splitters: Vec<KeyBound> = Vec::with_capacity(slices - 1);
    let mut counted = 0usize;
    for (group, weight) in offered {
        let due = total * (splitters.len() + 1) / slices;
        if splitters.len() + 1 < slices && counted >= due && counted > 0 {
            let bound = bound_of(group, collations);
            // Equal keys offered by two runs make one splitter (an empty slice otherwise).
            let repeated = splitters.last().is_some_and(|last| {
                last.0 == bound.0 && compare_key_values(&last.1, &bound.1, collations).is_eq()
            });
            if !repeated {
                splitters.push(bound);
            }
        }
        counted += weight;
    }
    splitters
}

/// Merges runs of groups, each sorted by key with no key twice (what executors hand over,
/// [`super::merge::Partial::KeyOrder`]), into one run in key order: groups of equal keys are
/// combined by `combine(earlier, later)` in run order (runs are in range order, which the
/// aggregate states and the shown keys depend on), and each merged group goes to `each` with
/// its place in key order, until `each` says stop. Returns how many groups went to `each`.
///
/// A k-way merge: O(groups x log runs), with no hash table and no sort. The heap holds run
/// numbers, not groups: a group in memory stays where its run holds it until it is taken, once
/// (a group is some 150 bytes, and moving it in and out of a heap of groups was half the
/// merge's time at 1.5M groups). Keys are compared by their [`key_prefix`] first; where runs
/// hold disjoint key ranges (a table clustered by its key) the run on top stays there with one
/// comparison a group.
fn merge_key_order<E>(
    runs: Vec<Cursor<'_>>,
    collations: &[Collation],
    mut combine: impl FnMut(&mut Group, Group),
    mut each: impl FnMut(usize, Group) -> Result<bool, E>,
    read_failed: impl Fn(SpillError) -> E,
) -> Result<usize, E> {
    let mut merge = KWay::new(runs, collations).map_err(&read_failed)?;
    let mut emitted = 0usize;
    while let Some((prefix, mut group)) = merge.take_lowest().map_err(&read_failed)? {
        while merge.lowest_is(prefix, &group) {
            let (_, later) = merge
                .take_lowest()
                .map_err(&read_failed)?
                .expect("a run on the heap");
            combine(&mut group, later);
        }
        emitted += 1;
        if !each(emitted - 1, group)? {
            break;
        }
    }
    Ok(emitted)
}

/// A run's next group: borrowed from a run in memory until it is taken, or read from a file
/// (boxed: the heads are moved about as the merge goes, and a group is some 150 bytes).
enum Head<'r> {
    Borrowed(&'r mut Group),
    Owned(Box<Group>),
}

impl Head<'_> {
    fn group(&self) -> &Group {
        match self {
            Head::Borrowed(g) => g,
            Head::Owned(g) => g,
        }
    }

    fn take(self) -> Group {
        match self {
            Head::Borrowed(g) => std::mem::take(g),
            Head::Owned(g) => *g,
        }
    }
}

impl<'r> Cursor<'r> {
    fn next_head(&mut self) -> Result<Option<Head<'r>>, SpillError> {
        match self {
            Cursor::Memory(it) => Ok(it.next().map(Head::Borrowed)),
            Cursor::File(r) => Ok(r.next_group()?.map(|g| Head::Owned(Box::new(g)))),
        }
    }
}

/// [`merge_key_order`]'s state: the runs, each one's next group with its key prefix, and a
/// binary min-heap of the numbers of the runs that have one (lowest key first, of equal keys
/// the earliest run).
struct KWay<'r, 'c> {
    runs: Vec<Cursor<'r>>,
    heads: Vec<Option<(u128, Head<'r>)>>,
    heap: Vec<usize>,
    collations: &'c [Collation],
}

impl<'r, 'c> KWay<'r, 'c> {
    fn new(runs: Vec<Cursor<'r>>, collations: &'c [Collation]) -> Result<Self, SpillError> {
        let mut merge = KWay {
            heads: Vec::with_capacity(runs.len()),
            heap: Vec::with_capacity(runs.len()),
            runs,
            collations,
        };
        for run in 0..merge.runs.len() {
            let head = merge.next_of(run)?;
            if head.is_some() {
                merge.heap.push(run);
            }
            merge.heads.push(head);
        }
        let KWay {
            heap,
            heads,
            collations,
            ..
        } = &mut merge;
        run_heap::heapify(heap, |a, b| head_before(heads, collations, a, b));
        Ok(merge)
    }

    fn next_of(&mut self, run: usize) -> Result<Option<(u128, Head<'r>)>, SpillError> {
        Ok(self.runs[run]
            .next_head()?
            .map(|h| (key_prefix(h.group(), self.collations), h)))
    }

    /// Whether the lowest next group has the key of `group` (whose prefix is `prefix`).
    fn lowest_is(&self, prefix: u128, group: &Group) -> bool {
        self.heap
            .first()
            .is_some_and(|&run| match &self.heads[run] {
                Some((p, g)) => {
                    *p == prefix && compare_group_keys(g.group(), group, self.collations).is_eq()
                }
                None => false,
            })
    }

    /// Takes the lowest next group out of its run, and its key prefix.
    fn take_lowest(&mut self) -> Result<Option<(u128, Group)>, SpillError> {
        let Some(&run) = self.heap.first() else {
            return Ok(None);
        };
        let (prefix, head) = self.heads[run].take().expect("a run on the heap");
        let group = head.take();
        self.heads[run] = self.next_of(run)?;
        let (heads, collations) = (&self.heads, self.collations);
        run_heap::advance_top(&mut self.heap, heads[run].is_none(), |a, b| {
            head_before(heads, collations, a, b)
        });
        Ok(Some((prefix, group)))
    }
}

/// Whether run `a`'s next group comes before run `b`'s ([`KWay`]'s heap order).
fn head_before(
    heads: &[Option<(u128, Head<'_>)>],
    collations: &[Collation],
    a: usize,
    b: usize,
) -> bool {
    let (Some((pa, ga)), Some((pb, gb))) = (&heads[a], &heads[b]) else {
        unreachable!("only runs with a next group are on the heap")
    };
    pa.cmp(pb)
        .then_with(|| compare_group_keys(ga.group(), gb.group(), collations))
        .then(a.cmp(&b))
        .is_lt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::ir::{AggFunc, ColumnRead, Shape, SortKey};

    fn sum_spec() -> AggSpec {
        AggSpec::new(AggFunc::Sum, Some(Expr::Column(1)))
    }

    /// `SELECT k, sum(v) FROM t GROUP BY k [ORDER BY 2 DESC, 1] [LIMIT l OFFSET o]` over a
    /// key `k` under `collation`.
    fn plan(collation: Collation, ordered: bool, limit: Option<u64>, offset: u64) -> QueryPlan {
        QueryPlan {
            columns: vec![ColumnRead::Rowid],
            constant_terms: Vec::new(),
            filter: None,
            shape: Shape::Groups {
                keys: vec![(Expr::Column(0), collation)],
                aggregates: vec![sum_spec()],
                having: None,
                outputs: vec![Expr::Column(0), Expr::Column(1)],
            },
            order_by: if ordered {
                vec![
                    SortKey {
                        expr: Expr::Column(1),
                        descending: true,
                        nulls_first: false,
                        collation: Collation::Binary,
                    },
                    SortKey {
                        expr: Expr::Column(0),
                        descending: false,
                        nulls_first: true,
                        collation,
                    },
                ]
            } else {
                Vec::new()
            },
            backward: false,
            limit,
            offset,
            names: vec!["k".into(), "sum".into()],
            distinct: false,
            windows: None,
            arrival: None,
        }
    }

    /// A key of every storage class, and under NOCASE spellings that are one group.
    fn key(i: u64) -> Value {
        match i % 6 {
            0 => Value::Null,
            1 => Value::Integer(i as i64 / 6),
            2 => Value::Real(i as f64 / 12.0),
            3 => Value::text(format!("k{}", i / 6)),
            4 => Value::text(format!("K{}", i / 6)),
            _ => Value::Blob(vec![(i / 6) as u8, 1]),
        }
    }

    /// `runs` runs of groups in key order, as executors hand them over: each run's groups
    /// from its own rows (a key's group in several runs), sums from `value`.
    fn runs(
        collation: Collation,
        runs: usize,
        groups: u64,
        value: impl Fn(u64) -> i64,
    ) -> Vec<Vec<Group>> {
        let spec = sum_spec();
        (0..runs)
            .map(|r| {
                let mut table = crate::query::groups::GroupTable::default();
                for i in
                    (r as u64..groups)
                        .step_by(runs.max(1))
                        .chain([0, 7, groups / 2, groups - 1])
                {
                    let k = key(i);
                    let g = table.find_or_insert(
                        &[k.as_ref()],
                        &[collation],
                        (r as i64) << 32 | i as i64,
                        true,
                        || smallvec::smallvec![AggState::new(&spec)],
                    );
                    if let AggState::Sum(s) = &mut table.groups[g].states[0] {
                        s.update(ValueRef::Integer(value(i)));
                    }
                }
                table.into_key_order(&[collation])
            })
            .collect()
    }

    fn merged(
        plan: &QueryPlan,
        runs: Vec<Vec<Group>>,
        threads: usize,
    ) -> Result<Vec<Vec<Value>>, GroupError> {
        let runs = runs.into_iter().map(Run::Memory).collect();
        GroupQuery::of(plan)
            .unwrap()
            .merge(runs, threads)
            .map(|m| m.rows)
    }

    #[test]
    fn runs_of_different_key_ranges_split_into_even_slices() {
        let ints = |keys: std::ops::Range<i64>| -> Vec<Group> {
            keys.map(|k| Group {
                keys: smallvec::smallvec![Value::Integer(k)],
                keys_rowid: k,
                states: smallvec::SmallVec::new(),
            })
            .collect()
        };
        for threads in [2, 3] {
            // As two executors hand over a table clustered by its key: the second holds the
            // larger range, above the first's.
            let mut runs = vec![Run::Memory(ints(0..1000)), Run::Memory(ints(1000..4000))];
            let slices = split_runs(&mut runs, &[Collation::Binary], threads);
            let sizes: Vec<usize> = slices
                .iter()
                .map(|s| {
                    s.iter()
                        .map(|c| match c {
                            Cursor::Memory(it) => it.len(),
                            Cursor::File(_) => unreachable!("runs in memory"),
                        })
                        .sum()
                })
                .collect();
            assert_eq!(sizes.len(), threads);
            assert_eq!(sizes.iter().sum::<usize>(), 4000);
            let even = 4000 / threads;
            assert!(
                sizes.iter().all(|&n| n.abs_diff(even) <= 4000 / 32),
                "{sizes:?}"
            );
        }
    }

    #[test]
    fn every_thread_count_merges_the_same_rows_in_the_same_order() {
        for collation in [Collation::Binary, Collation::NoCase] {
            for (ordered, limit, offset) in [
                (false, None, 0),
                (false, Some(5), 3),
                (true, None, 0),
                (true, Some(4), 2),
                (false, Some(0), 0),
            ] {
                let plan = plan(collation, ordered, limit, offset);
                let serial = merged(&plan, runs(collation, 3, 900, |i| i as i64 % 17), 1).unwrap();
                assert!(!serial.is_empty() || limit == Some(0));
                for threads in [2, 3, 8] {
                    let parallel =
                        merged(&plan, runs(collation, 3, 900, |i| i as i64 % 17), threads).unwrap();
                    assert_eq!(
                        parallel, serial,
                        "{collation:?} {ordered} {limit:?} {offset} x{threads}"
                    );
                }
            }
        }
        // The slices really are several: the runs split at keys of the largest run.
        let mut all: Vec<Run> = runs(Collation::Binary, 3, 900, |_| 1)
            .into_iter()
            .map(Run::Memory)
            .collect();
        let split = split_runs(&mut all, &[Collation::Binary], 4);
        assert_eq!(split.len(), 4);
        let sizes: Vec<Vec<usize>> = split
            .iter()
            .map(|s| {
                s.iter()
                    .map(|r| match r {
                        Cursor::Memory(it) => it.len(),
                        Cursor::File(_) => unreachable!(),
                    })
                    .collect()
            })
            .collect();
        assert!(
            sizes
                .iter()
                .all(|s| s.len() == 3 && s.iter().sum::<usize>() > 50),
            "{sizes:?}"
        );
    }

    #[test]
    fn spilled_runs_merge_as_the_same_runs_in_memory() {
        // Each executor's run cut in two, the first half spilled (its earlier rows), and
        // runs compacted into one: the same rows for every thread count.
        let dir = tempfile::tempdir().unwrap();
        for collation in [Collation::Binary, Collation::NoCase] {
            for (ordered, limit, offset) in [(false, None, 0), (true, Some(4), 2)] {
                let plan = plan(collation, ordered, limit, offset);
                let query = GroupQuery::of(&plan).unwrap();
                let serial = merged(&plan, runs(collation, 3, 1500, |i| i as i64 % 17), 1).unwrap();
                let spilled = |compacted: bool| -> Vec<Run> {
                    let mut out = Vec::new();
                    for mut run in runs(collation, 3, 1500, |i| i as i64 % 17) {
                        // Halves by key: as if the executor had met them in turn.
                        let later = run.split_off(run.len() / 2);
                        let file = super::super::group_spill::spill(dir.path(), &[collation], run)
                            .unwrap();
                        let file = if compacted {
                            query.compact(&[file], dir.path()).unwrap()
                        } else {
                            file
                        };
                        out.push(Run::File(file));
                        out.push(Run::Memory(later));
                    }
                    out
                };
                for threads in [1, 2, 3] {
                    for compacted in [false, true] {
                        let rows = query.merge(spilled(compacted), threads).unwrap().rows;
                        assert_eq!(rows, serial, "{collation:?} {ordered} x{threads}");
                    }
                }
            }
        }
    }

    #[test]
    fn an_overflow_fails_where_a_serial_merge_reaches_it() {
        // The last group in key order (a blob) overflows its integer sum.
        let groups = 600;
        let bad = |i: u64| if i == groups - 1 { i64::MAX } else { 1 };
        for threads in [1, 2, 4] {
            // Every group is finished: the overflow is the error.
            let plan_all = plan(Collation::Binary, true, Some(3), 0);
            let e = merged(&plan_all, runs(Collation::Binary, 2, groups, bad), threads);
            assert_eq!(e, Err("integer overflow".to_string()), "x{threads}");
            // Without ORDER BY the LIMIT is filled long before that group: no error.
            let plan_first = plan(Collation::Binary, false, Some(10), 5);
            let rows = merged(
                &plan_first,
                runs(Collation::Binary, 2, groups, bad),
                threads,
            )
            .unwrap();
            assert_eq!(rows.len(), 10, "x{threads}");
            // Without a LIMIT it is reached.
            let plan_every = plan(Collation::Binary, false, None, 0);
            let e = merged(
                &plan_every,
                runs(Collation::Binary, 2, groups, bad),
                threads,
            );
            assert_eq!(e, Err("integer overflow".to_string()), "x{threads}");
        }
    }

    #[test]
    fn an_aggregate_over_no_rows_is_one_group() {
        let mut plan = plan(Collation::Binary, false, None, 0);
        if let Shape::Groups { keys, outputs, .. } = &mut plan.shape {
            keys.clear();
            *outputs = vec![Expr::Column(0)];
        }
        for threads in [1, 2] {
            assert_eq!(
                merged(&plan, vec![Vec::new(), Vec::new()], threads).unwrap(),
                vec![vec![Value::Null]]
            );
        }
    }
}
