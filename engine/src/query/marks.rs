//! Which failing rows a plain query keeps, and where: SQLite fails a query on a row only if
//! it actually evaluates the failing expression, which depends on where the row falls in its
//! scan and sorter. This module holds the rules; [`super::kernel`] applies them per executor
//! and [`super::merge`] across executors.
//!
//! - **Marked rows** ([`plan_marks`]): a plain query without a sorter (no `ORDER BY`, or one
//!   the scan delivers, forwards or [`QueryPlan::backward`]) keeps a row whose `WHERE` or
//!   output columns fail as a [`RowFailure`] in its place in the scan's order; the coordinator
//!   fails when the result reaches it, or drops it when the `OFFSET` skips it (output columns
//!   only: `WHERE` is computed for skipped rows too). An executor's rows end at a failing
//!   `WHERE` ([`past_end`]): the scan never gets past it.
//! - **Sorter drops** ([`sorts_with_limit`], [`resolve_marks`]): with `ORDER BY ... LIMIT`,
//!   SQLite's sorter holds `LIMIT + OFFSET` rows and drops, before computing its output
//!   columns, a row that ranks after all of them; a row whose output columns fail is kept with
//!   the count of rows before it that rank before or with it, which decides at the merge.
//! - **Top-k** ([`keep_best`]): with a `LIMIT`, each executor keeps only its best `LIMIT +
//!   OFFSET` rows by [`compare_rows`] (the `ORDER BY` keys, then the scan's order), and the
//!   marked rows whose place is still open.

use std::cmp::Ordering;

use crate::datatype3::compare_values;
use crate::value::{Value, ValueRef};

use super::ir::{QueryPlan, Shape, SortKey};
use super::row_stream::{OutRow, RowFailure};

/// Whether `plan` keeps its failing rows as marked rows ([`RowFailure`]): a plain query
/// without `ORDER BY`, whose `OFFSET` and `LIMIT` apply in rowid order (descending for a
/// [`QueryPlan::backward`] scan) as the scan goes.
pub(super) fn plan_marks(plan: &QueryPlan) -> bool {
    matches!(plan.shape, Shape::Rows { .. }) && plan.order_by.is_empty()
}

/// Whether `plan` sorts with a `LIMIT`: SQLite's sorter then holds at most `LIMIT + OFFSET`
/// rows, and a row that comes (in rowid order) when it is full and ranks after all of them is
/// dropped before its output columns are computed (`pushOntoSorter` with the deferred row
/// load of `selectInnerLoop`): a row whose output columns fail is kept as a marked row until
/// its place is known ([`resolve_marks`], [`merge`]).
pub(super) fn sorts_with_limit(plan: &QueryPlan) -> bool {
    matches!(plan.shape, Shape::Rows { .. }) && !plan.order_by.is_empty() && plan.limit.is_some()
}

/// Whether `plan` sorts all its rows (`ORDER BY` without `LIMIT`, no window stage): each
/// executor sorts its rows as encoded runs within the query's memory budget, and the
/// coordinator merges them ([`super::sort`]).
pub(super) fn sorts_fully(plan: &QueryPlan) -> bool {
    matches!(plan.shape, Shape::Rows { .. })
        && !plan.order_by.is_empty()
        && plan.limit.is_none()
        && plan.windows.is_none()
}

/// A sorting plan's marked rows of the page just done ([`sorts_with_limit`]): each learns
/// how many rows before it in the range rank before or with it; one that `k` (`LIMIT +
/// OFFSET`) rows precede so is never in SQLite's sorter, and is dropped. The rows kept are
/// the range's best rows up to this page and all of this page's, so the count is exact below
/// `k` (a row dropped earlier had `k` better rows before it).
pub(super) fn resolve_marks(order: &[SortKey], rows: &mut Vec<OutRow>, k: u64) {
    let mut places = Vec::new();
    for (i, m) in rows.iter().enumerate() {
        if !matches!(&m.values, Err(RowFailure { ahead: None, .. })) {
            continue;
        }
        let ahead = rows
            .iter()
            .filter(|r| {
                r.rowid < m.rowid && compare_keys(order, &r.keys, &m.keys) != Ordering::Greater
            })
            .count() as u64;
        places.push((i, (ahead < k).then_some(ahead)));
    }
    // From the last: a swap_remove moves an element already seen.
    for &(i, ahead) in places.iter().rev() {
        match ahead {
            None => {
                rows.swap_remove(i);
            }
            Some(n) => {
                if let Err(f) = &mut rows[i].values {
                    f.ahead = Some(n);
                }
            }
        }
    }
}

/// Keeps a plan's best `k` rows (by its order, then rowid); a sorting plan also keeps its
/// marked rows beyond them ([`sorts_with_limit`]: their place in SQLite's sorter depends on the
/// rows before them, not on the final order).
pub(super) fn keep_best(plan: &QueryPlan, rows: &mut Vec<OutRow>, k: u64) {
    rows.sort_by(|a, b| compare_rows(plan, a, b));
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    if rows.len() > k {
        let beyond = rows.split_off(k);
        if sorts_with_limit(plan) {
            rows.extend(beyond.into_iter().filter(|r| r.values.is_err()));
        }
    }
}

/// Whether `rowid` comes after `end` in the scan's order (rowid order, descending when
/// `backward`).
pub(super) fn past_end(end: Option<i64>, backward: bool, rowid: i64) -> bool {
    match end {
        Some(end) if backward => rowid < end,
        Some(end) => rowid > end,
        None => false,
    }
}

/// Orders two values as one `ORDER BY` term does.
pub fn compare_key(k: &SortKey, a: &Value, b: &Value) -> Ordering {
    compare_key_ref(k, a.as_ref(), b.as_ref())
}

/// [`compare_key`] on borrowed values: NULLs placed by `NULLS FIRST/LAST`, then SQLite's order
/// of values under the term's collation, reversed for `DESC`.
pub fn compare_key_ref(k: &SortKey, a: ValueRef<'_>, b: ValueRef<'_>) -> Ordering {
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) if k.nulls_first => Ordering::Less,
        (true, false) => Ordering::Greater,
        (false, true) if k.nulls_first => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => {
            let o = compare_values(a, b, k.collation);
            if k.descending {
                o.reverse()
            } else {
                o
            }
        }
    }
}

pub(super) fn compare_keys(order: &[SortKey], a: &[Value], b: &[Value]) -> Ordering {
    for ((k, x), y) in order.iter().zip(a).zip(b) {
        let o = compare_key(k, x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Orders two rows of `plan` as its result does: by the `ORDER BY` keys, then in the scan's
/// order (rowid order, descending for a [`QueryPlan::backward`] scan).
pub(super) fn compare_rows(plan: &QueryPlan, a: &OutRow, b: &OutRow) -> Ordering {
    let scan = if plan.backward {
        b.rowid.cmp(&a.rowid)
    } else {
        a.rowid.cmp(&b.rowid)
    };
    compare_keys(&plan.order_by, &a.keys, &b.keys).then(scan)
}
