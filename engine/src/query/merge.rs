//! [`merge`]: the coordinator's side of a query, which combines the partials of all executors,
//! in range order, into the result rows: plain rows in the result's order with the marked-row
//! rules of [`super::marks`] (the `OFFSET` skips, the `LIMIT` ends, a marked row it reaches
//! fails the query), groups merged, finished, filtered by `HAVING` and ordered.

use std::cmp::Ordering;

use crate::datatype3::Collation;
use crate::value::Value;

use super::group_merge::{GroupQuery, Run};
use super::group_spill::{for_each_tag, for_each_tag_mut, GroupRuns, GroupStats};
use super::groups::GroupTable;
use super::ir::{QueryPlan, Shape};
use super::marks::{compare_keys, compare_rows, sorts_with_limit};
use super::row_stream::{OutRow, RowFailure};
use super::sort::{record_values, SortBuffer, SortedMerge, SpillError};

/// What one executor hands the coordinator.
#[derive(Debug, Clone, PartialEq)]
pub enum Partial {
    /// A plain query's rows (its best `LIMIT + OFFSET` when there is a limit).
    Rows(Vec<OutRow>),
    /// A grouped query's partial groups, as an executor builds them (in order of first
    /// appearance).
    Groups(GroupTable),
    /// A grouped query's partial groups sorted by key (SQLite's group order), as an executor
    /// hands them over: sorted on the executors, in parallel, so the coordinator only merges
    /// sorted runs (those it spilled beyond its memory budget, then those in memory).
    KeyOrder(GroupRuns),
    /// A full sort's rows (`ORDER BY` without `LIMIT`) as encoded, sorted runs, in memory or
    /// spilled ([`super::sort`]). Their rowids are not tags: the merge orders the runs of
    /// several files by file, then rowid.
    Sorted(SortBuffer),
}

impl Partial {
    /// The lowest and highest rowid this partial's rows, group keys and aggregate states are
    /// tagged with (what ties between ranges are decided by); `None` when it has none.
    pub fn rowid_span(&self) -> Option<(i64, i64)> {
        let mut span: Option<(i64, i64)> = None;
        self.for_each_tag(|t| {
            let (lo, hi) = span.get_or_insert((t, t));
            *lo = (*lo).min(t);
            *hi = (*hi).max(t);
        });
        span
    }

    /// Adds `by` to every rowid tag (not to values, which show rowids as they are, nor to
    /// marked rows' failures, which name them), so that this partial's rows all rank after
    /// those of partials tagged below the shifted span: how partials read from several files
    /// are ordered file by file (the tags must not overflow; see [`Partial::rowid_span`]).
    pub fn shift_rowids(&mut self, by: i64) {
        if let Partial::KeyOrder(runs) = self {
            runs.spilled.iter_mut().for_each(|r| r.shift_rowids(by));
        }
        self.for_each_tag_mut(|t| *t += by);
    }

    fn for_each_tag(&self, mut f: impl FnMut(i64)) {
        match self {
            Partial::Rows(rows) => rows.iter().for_each(|r| f(r.rowid)),
            Partial::Sorted(_) => {}
            Partial::Groups(GroupTable { groups, .. }) => {
                groups.iter().for_each(|g| for_each_tag(g, &mut f));
            }
            Partial::KeyOrder(runs) => {
                for (lo, hi) in runs.spilled.iter().filter_map(|r| r.rowid_span()) {
                    f(lo);
                    f(hi);
                }
                runs.memory.iter().for_each(|g| for_each_tag(g, &mut f));
            }
        }
    }

    fn for_each_tag_mut(&mut self, mut f: impl FnMut(&mut i64)) {
        match self {
            Partial::Rows(rows) => rows.iter_mut().for_each(|r| f(&mut r.rowid)),
            Partial::Sorted(_) => {}
            Partial::Groups(GroupTable { groups, .. }) => {
                groups.iter_mut().for_each(|g| for_each_tag_mut(g, &mut f));
            }
            // (Spilled runs are shifted as they are read: `shift_rowids`.)
            Partial::KeyOrder(runs) => {
                runs.memory
                    .iter_mut()
                    .for_each(|g| for_each_tag_mut(g, &mut f));
            }
        }
    }
}

/// Why [`merge`] failed.
#[derive(Debug, Clone, PartialEq)]
pub enum MergeError {
    /// Finishing a group, or its `HAVING` or output columns, failed (`integer overflow`).
    Eval(String),
    /// The result reaches a marked row, kept by the executor of range `range`.
    Row {
        /// The range (the index of its partial).
        range: usize,
        /// The row's failure.
        failure: RowFailure,
    },
    /// A full sort or a grouped query could not write or read its runs in the scratch
    /// directory.
    Spill(SpillError),
}

/// The merged answer.
#[derive(Debug)]
pub struct MergedRows {
    /// The result rows.
    pub rows: Vec<Vec<Value>>,
    /// A grouped query's figures (`None` for other queries, and for an aggregate without
    /// `GROUP BY` or `DISTINCT`).
    pub groups: Option<GroupStats>,
}

/// Combines the executors' partials (in range order) into the result rows; a grouped
/// query's groups are merged on one thread per partial ([`super::group_merge`]).
pub fn merge(plan: &QueryPlan, partials: Vec<Partial>) -> Result<MergedRows, MergeError> {
    let threads = partials.len();
    merge_files(plan, partials, None, threads)
}

/// [`merge`] of partials read from several files: `file_of[i]` is partial `i`'s file, in
/// the listed order, and rows of different files are in scan order by file first (rowids
/// repeat across files), as ties of a sort are. A grouped query's groups are merged on up to
/// `threads` threads (the executors' count: their cores are idle once the scan is done).
pub fn merge_files(
    plan: &QueryPlan,
    partials: Vec<Partial>,
    file_of: Option<&[usize]>,
    threads: usize,
) -> Result<MergedRows, MergeError> {
    let (rows, groups) = merge_scan(plan, partials, file_of, threads)?;
    let rows = match &plan.windows {
        // The scan's rows are the window stage's input, in the loop's order.
        Some(stage) => super::over::apply(stage, rows).map_err(MergeError::Eval)?,
        None => rows,
    };
    Ok(MergedRows { rows, groups })
}

/// [`merge_files`] but for a window stage.
fn merge_scan(
    plan: &QueryPlan,
    partials: Vec<Partial>,
    file_of: Option<&[usize]>,
    threads: usize,
) -> Result<(Vec<Vec<Value>>, Option<GroupStats>), MergeError> {
    let file = |range: usize| file_of.map_or(0, |f| f[range]);
    let offset = usize::try_from(plan.offset).unwrap_or(usize::MAX);
    let limit = plan
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    if limit == 0 {
        // SQLite stops before computing anything: no error can come from a LIMIT 0 query.
        return Ok((Vec::new(), None));
    }
    match &plan.shape {
        Shape::Rows { .. } if partials.iter().any(|p| matches!(p, Partial::Sorted(_))) => {
            let mut merge = sorted_merge(plan, partials, file_of).map_err(MergeError::Spill)?;
            // A full sort has no marked rows: its failing rows failed their executors.
            let (mut out, mut skipped) = (Vec::new(), 0usize);
            while out.len() < limit {
                let Some(record) = merge.next_record().map_err(MergeError::Spill)? else {
                    break;
                };
                if skipped < offset {
                    skipped += 1;
                } else {
                    out.push(record_values(record, plan.order_by.len()));
                }
            }
            Ok((out, None))
        }
        Shape::Rows { .. } => {
            let mut rows: Vec<(usize, OutRow)> = Vec::new();
            for (range, p) in partials.into_iter().enumerate() {
                if let Partial::Rows(r) = p {
                    rows.extend(r.into_iter().map(|r| (range, r)));
                }
            }
            if sorts_with_limit(plan) {
                // A marked row is in SQLite's sorter, and fails the query, if fewer than
                // `LIMIT + OFFSET` rows before it rank before or with it: those of its own
                // range it counted, and those of the ranges before it (each range's best
                // rows are kept, so the count is exact below the bound). The first in rowid
                // order is the error; the others are never in the result.
                let k = plan.keep().unwrap_or(u64::MAX);
                let ranks_before = |range: usize, m: &OutRow| -> u64 {
                    rows.iter()
                        .filter(|(j, r)| {
                            *j < range
                                && compare_keys(&plan.order_by, &r.keys, &m.keys)
                                    != Ordering::Greater
                        })
                        .count() as u64
                };
                let fatal = rows
                    .iter()
                    .filter(|(range, m)| match &m.values {
                        Err(f) => f.ahead.unwrap_or(0).saturating_add(ranks_before(*range, m)) < k,
                        Ok(_) => false,
                    })
                    .min_by_key(|(range, m)| (*range, m.rowid))
                    .cloned();
                if let Some((
                    range,
                    OutRow {
                        values: Err(failure),
                        ..
                    },
                )) = fatal
                {
                    return Err(MergeError::Row { range, failure });
                }
                rows.retain(|(_, r)| r.values.is_ok());
            }
            // Each range's rows come sorted (`kernel::finish`): the sort merges the runs.
            rows.sort_by(|(ra, a), (rb, b)| {
                compare_keys(&plan.order_by, &a.keys, &b.keys)
                    .then_with(|| file(*ra).cmp(&file(*rb)))
                    .then_with(|| compare_rows(plan, a, b))
            });
            // As SQLite's loop goes: the OFFSET skips rows (marked ones too, whose output
            // columns it never computes), a marked row it does not skip fails the query, and
            // nothing after the LIMIT is looked at.
            let (mut out, mut skipped) = (Vec::new(), 0usize);
            for (range, r) in rows {
                if out.len() >= limit {
                    break;
                }
                match r.values {
                    Ok(_)
                    | Err(RowFailure {
                        in_output: true, ..
                    }) if skipped < offset => skipped += 1,
                    Ok(values) => out.push(values),
                    Err(failure) => return Err(MergeError::Row { range, failure }),
                }
            }
            Ok((out, None))
        }
        Shape::Groups { keys, .. } => {
            let query = GroupQuery::of(plan).expect("a grouped plan");
            let (runs, mut stats) =
                group_runs(partials, &query.collations).map_err(MergeError::Spill)?;
            let merged = query.merge(runs, threads).map_err(MergeError::Eval)?;
            stats.groups = merged.groups;
            // An aggregate without GROUP BY is one group: nothing to report.
            Ok((merged.rows, (!keys.is_empty()).then_some(stats)))
        }
    }
}

/// The runs of a grouped query's partials (in range order: an executor's spilled runs, which
/// hold its earlier rows, before its groups in memory), and what their tables reported.
pub(super) fn group_runs(
    partials: Vec<Partial>,
    collations: &[Collation],
) -> Result<(Vec<Run>, GroupStats), SpillError> {
    let mut stats = GroupStats::default();
    let mut runs: Vec<Run> = Vec::new();
    for p in partials {
        let table = match p {
            Partial::KeyOrder(table) => table,
            Partial::Groups(table) => GroupRuns::in_memory(table.into_key_order(collations)),
            Partial::Rows(_) | Partial::Sorted(_) => continue,
        };
        if let Some(e) = table.failed {
            return Err(e);
        }
        stats.add(&table.stats);
        runs.extend(table.spilled.into_iter().map(Run::File));
        runs.push(Run::Memory(table.memory));
    }
    Ok((runs, stats))
}

/// The merge of a full sort's runs ([`Partial::Sorted`]), partial `i` from file
/// `file_of[i]`.
pub fn sorted_merge<'p>(
    plan: &'p QueryPlan,
    partials: Vec<Partial>,
    file_of: Option<&[usize]>,
) -> Result<SortedMerge<'p>, SpillError> {
    let runs = partials
        .into_iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Partial::Sorted(b) => Some((file_of.map_or(0, |f| f[i]), b)),
            _ => None,
        })
        .collect();
    SortedMerge::new(&plan.order_by, plan.backward, runs)
}
