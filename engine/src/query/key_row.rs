//! Which row of a group shows the group's key values ([`KeyRow`]).
//!
//! Rows whose keys SQLite calls equal form one group, but the values shown can differ from row
//! to row (`'a'` and `'A'` under `NOCASE`, `'a'` and `'a '` under `RTRIM`, `1` and `1.0`).
//! SQLite's aggregate loop (`updateAccumulator` in `select.c`) loads a group's columns, its
//! keys among them, from the rows of the group in scan (rowid) order:
//!
//! - without a one-argument `min()`/`max()`, only from the group's first row;
//! - with one, from every row for which the *last* of them (in the order the aggregates are
//!   first met: the result columns, then `ORDER BY`, then `HAVING`, each expression tree
//!   left to right) does not skip the load: `minmaxStep` skips it when the row's value is not
//!   strictly better than the best so far, or is NULL once there is a best. So the keys come
//!   from the first row in rowid order that holds the final minimum (maximum), or, when every
//!   value of the group is NULL, from the group's last row.
//!
//! - when that last one has a `FILTER` (and the query a `GROUP BY`), a row the filter leaves
//!   out loads the columns only as the group's first row (the "magnet" register takes the
//!   group's use flag before the filter is tested), and a row that passes it decides as
//!   above: so the keys come from the first row holding the final minimum (maximum) among
//!   the passing rows, or the last passing row when all their values are NULL, or the
//!   group's first row when no row passes ([`KeyRow::FilteredMinMax`]).
//!
//! A bare column (a column read over the group outside its keys and aggregates,
//! [`AggFunc::Shown`]) is loaded with the keys, from the same row ([`load_shown`]); so is one
//! of a query without `GROUP BY`, whose one group follows the same rules.
//!
//! Both are kept per executor and merged by rowid, so the choice does not depend on the split
//! or the file order of the leaves. Not reproduced: a `DISTINCT` `min`/`max` as the deciding
//! aggregate (SQLite's duplicate rows then repeat the previous row's decision); the group's
//! first row shows the keys then, and the planner refuses where that can show; nor, without
//! `GROUP BY`, a `FILTER` on one (no magnet register: a row the filter leaves out repeats the
//! previous row's decision), refused where a bare column shows it.

use crate::value::{Value, ValueRef};

use super::aggregate::AggState;
use super::groups::Group;
use super::ir::{AggFunc, Expr, Shape};

/// Which row of a group its shown key values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRow {
    /// The group's first row in rowid order.
    First,
    /// The row aggregate `i` (a one-argument `min`/`max`) chose: the first row holding its
    /// final value, or the group's last row when all its values are NULL.
    MinMax(usize),
    /// The row aggregate `i` (a one-argument `min`/`max` with a `FILTER`) chose: the first
    /// row holding its final value, or the last row that passed the filter when all their
    /// values are NULL (its state then holds a NULL best: [`AggState::Best`]), or the
    /// group's first row when no row passed.
    FilteredMinMax(usize),
}

impl KeyRow {
    /// The rule of a query of `shape` with `ORDER BY` expressions `order_by`.
    pub fn of<'a>(shape: &'a Shape, order_by: impl IntoIterator<Item = &'a Expr>) -> KeyRow {
        let Shape::Groups {
            keys, aggregates, ..
        } = shape
        else {
            return KeyRow::First;
        };
        // Without keys the row matters only to bare columns.
        if keys.is_empty() && !shows_columns(aggregates) {
            return KeyRow::First;
        }
        match deciding(shape, order_by) {
            Some(a) if aggregates[a].distinct => KeyRow::First,
            Some(a) if aggregates[a].filter.is_some() => KeyRow::FilteredMinMax(a),
            Some(a) => KeyRow::MinMax(a),
            None => KeyRow::First,
        }
    }
}

/// The one-argument `min()`/`max()` whose steps decide which row shows a group (the last of
/// them in the order SQLite's AggInfo lists them), if the query of `shape` with `ORDER BY`
/// expressions `order_by` has one.
pub fn deciding<'a>(
    shape: &'a Shape,
    order_by: impl IntoIterator<Item = &'a Expr>,
) -> Option<usize> {
    let Shape::Groups {
        keys,
        aggregates,
        having,
        outputs,
    } = shape
    else {
        return None;
    };
    // Aggregates in the order SQLite's AggInfo lists them: first appearance in the result
    // columns, then ORDER BY, then HAVING (slots after the keys are aggregates).
    let mut seen: Vec<usize> = Vec::new();
    let mut note = |slot: usize| {
        if let Some(a) = slot.checked_sub(keys.len()) {
            if !seen.contains(&a) {
                seen.push(a);
            }
        }
    };
    for e in outputs.iter().chain(order_by).chain(having.iter()) {
        e.visit_slots(&mut note);
    }
    seen.into_iter().rev().find(|&a| {
        aggregates
            .get(a)
            .is_some_and(|s| matches!(s.func, AggFunc::Min | AggFunc::Max))
    })
}

/// After the states of `group` took the row `rowid` with key values `keys`: keeps those
/// values when the rule says this row now shows the group. (For [`KeyRow::First`] the caller
/// keeps the lowest rowid's values.)
pub fn after_update(rule: KeyRow, group: &mut Group, keys: &[ValueRef<'_>], rowid: i64) {
    let (a, filtered) = match rule {
        KeyRow::First => return,
        KeyRow::MinMax(a) => (a, false),
        KeyRow::FilteredMinMax(a) => (a, true),
    };
    let take = match group.states.get(a) {
        Some(AggState::Best(Some((_, at)))) => *at == rowid,
        // No value yet: the last row, or with a FILTER that no row passed, the first.
        Some(AggState::Best(None)) if filtered => rowid < group.keys_rowid,
        Some(AggState::Best(None)) => rowid >= group.keys_rowid,
        _ => false,
    };
    if take {
        if group.keys.iter().zip(keys).any(|(k, v)| k.as_ref() != *v) {
            group.keys = keys.iter().map(|v| ValueRef::to_owned(*v)).collect();
        }
        group.keys_rowid = rowid;
    }
}

/// Sets the bare columns ([`AggState::Shown`]) of `group` from the row with rowid `rowid`
/// when that row shows the group (its `keys_rowid`, as the rule chose it): `value(j)` is
/// bare column `j`'s value in that row. Called after the row updated the group.
pub fn load_shown(
    group: &mut Group,
    rowid: i64,
    mut value: impl FnMut(usize) -> Result<Value, String>,
) -> Result<(), String> {
    if group.keys_rowid != rowid {
        return Ok(());
    }
    for (j, state) in group.states.iter_mut().enumerate() {
        if let AggState::Shown(v) = state {
            *v = Some(value(j)?);
        }
    }
    Ok(())
}

/// Whether any of `aggregates` is a bare column ([`AggFunc::Shown`]).
pub fn shows_columns(aggregates: &[super::ir::AggSpec]) -> bool {
    aggregates.iter().any(|a| a.func == AggFunc::Shown)
}

/// Merges `later` (the same group from a later range) into `into`: the aggregate states with
/// `merge_states`, and the key values (and bare columns) by the rule.
pub fn merge(
    rule: KeyRow,
    into: &mut Group,
    later: Group,
    merge_states: impl FnOnce(&mut Group, super::groups::GroupStates),
) {
    let Group {
        keys,
        keys_rowid,
        mut states,
    } = later;
    // The bare columns go with the keys.
    let shown: smallvec::SmallVec<[(usize, AggState); 1]> = states
        .iter_mut()
        .enumerate()
        .filter(|(_, s)| matches!(s, AggState::Shown(_)))
        .map(|(j, s)| (j, std::mem::replace(s, AggState::Shown(None))))
        .collect();
    merge_states(into, states);
    let take = match rule {
        KeyRow::First => keys_rowid < into.keys_rowid,
        KeyRow::MinMax(a) | KeyRow::FilteredMinMax(a) => match into.states.get(a) {
            Some(AggState::Best(Some((_, at)))) => *at == keys_rowid,
            Some(AggState::Best(None)) if rule == KeyRow::FilteredMinMax(a) => {
                keys_rowid < into.keys_rowid
            }
            Some(AggState::Best(None)) => keys_rowid > into.keys_rowid,
            _ => false,
        },
    };
    if take {
        into.keys = keys;
        into.keys_rowid = keys_rowid;
        for (j, s) in shown {
            into.states[j] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn group(keys_rowid: i64, states: Vec<AggState>) -> Group {
        Group {
            keys: Default::default(),
            keys_rowid,
            states: states.into_iter().collect(),
        }
    }

    fn shown(g: &Group, j: usize) -> Option<Value> {
        match &g.states[j] {
            AggState::Shown(v) => v.clone(),
            s => panic!("not a bare column: {s:?}"),
        }
    }

    #[test]
    fn bare_columns_load_only_from_the_row_that_shows_the_group() {
        let mut g = group(7, vec![AggState::Count(1), AggState::Shown(None)]);
        load_shown(&mut g, 8, |_| Ok(Value::Integer(8))).unwrap();
        assert_eq!(shown(&g, 1), None);
        load_shown(&mut g, 7, |j| Ok(Value::Integer(j as i64))).unwrap();
        assert_eq!(shown(&g, 1), Some(Value::Integer(1)));
    }

    #[test]
    fn bare_columns_merge_with_the_keys() {
        let merge_counts = |into: &mut Group, later: crate::query::groups::GroupStates| {
            if let (AggState::Count(a), Some(AggState::Count(b))) =
                (&mut into.states[0], later.into_iter().next())
            {
                *a += b;
            }
        };
        let text = |t: &str| Some(Value::Text(t.as_bytes().to_vec()));
        // The first row: the lower rowid wins, whichever range it came from.
        let mut into = group(9, vec![AggState::Count(2), AggState::Shown(text("late"))]);
        let later = group(4, vec![AggState::Count(1), AggState::Shown(text("early"))]);
        merge(KeyRow::First, &mut into, later, merge_counts);
        assert_eq!(shown(&into, 1), text("early"));
        assert!(matches!(into.states[0], AggState::Count(3)));
        let later = group(12, vec![AggState::Count(1), AggState::Shown(text("later"))]);
        merge(KeyRow::First, &mut into, later, merge_counts);
        assert_eq!(shown(&into, 1), text("early"));
        // A max(): the row holding the best value after the merge.
        let best = |v: i64, at: i64| AggState::Best(Some((Value::Integer(v), at)));
        let mut into = group(3, vec![best(5, 3), AggState::Shown(text("five"))]);
        let later = group(20, vec![best(9, 20), AggState::Shown(text("nine"))]);
        merge(KeyRow::MinMax(0), &mut into, later, |into, later| {
            into.states[0] = later.into_iter().next().unwrap();
        });
        assert_eq!(shown(&into, 1), text("nine"));
        assert_eq!(into.keys_rowid, 20);
    }
}
