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
//! Both are kept per executor and merged by rowid, so the choice does not depend on the split
//! or the file order of the leaves. Not reproduced: a `DISTINCT` `min`/`max` as the deciding
//! aggregate (SQLite's duplicate rows then repeat the previous row's decision); the group's
//! first row shows the keys then.

use crate::value::ValueRef;

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
}

impl KeyRow {
    /// The rule of a query of `shape` with `ORDER BY` expressions `order_by`.
    pub fn of<'a>(shape: &'a Shape, order_by: impl IntoIterator<Item = &'a Expr>) -> KeyRow {
        let Shape::Groups {
            keys,
            aggregates,
            having,
            outputs,
        } = shape
        else {
            return KeyRow::First;
        };
        if keys.is_empty() {
            return KeyRow::First;
        }
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
        let last = seen.into_iter().rev().find(|&a| {
            aggregates
                .get(a)
                .is_some_and(|s| matches!(s.func, AggFunc::Min | AggFunc::Max))
        });
        match last {
            Some(a) if !aggregates[a].distinct => KeyRow::MinMax(a),
            _ => KeyRow::First,
        }
    }
}

/// After the states of `group` took the row `rowid` with key values `keys`: keeps those
/// values when the rule says this row now shows the group. (For [`KeyRow::First`] the caller
/// keeps the lowest rowid's values.)
pub fn after_update(rule: KeyRow, group: &mut Group, keys: &[ValueRef<'_>], rowid: i64) {
    let KeyRow::MinMax(a) = rule else { return };
    let take = match group.states.get(a) {
        Some(AggState::Best(Some((_, at)))) => *at == rowid,
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

/// Merges `later` (the same group from a later range) into `into`: the aggregate states with
/// `merge_states`, and the key values by the rule.
pub fn merge(
    rule: KeyRow,
    into: &mut Group,
    later: Group,
    merge_states: impl FnOnce(&mut Group, super::groups::GroupStates),
) {
    let Group {
        keys,
        keys_rowid,
        states,
    } = later;
    merge_states(into, states);
    let take = match rule {
        KeyRow::First => keys_rowid < into.keys_rowid,
        KeyRow::MinMax(a) => match into.states.get(a) {
            Some(AggState::Best(Some((_, at)))) => *at == keys_rowid,
            Some(AggState::Best(None)) => keys_rowid > into.keys_rowid,
            _ => false,
        },
    };
    if take {
        into.keys = keys;
        into.keys_rowid = keys_rowid;
    }
}
