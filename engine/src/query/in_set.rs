//! [`InSet`]: the right-hand side of `x IN (SELECT ...)` once its subquery has run, as SQLite
//! holds it (`sqlite3CodeRhsOfIN`): an ephemeral index of the subquery's values, each stored
//! under the comparison's affinity, keyed under the comparison's collation, and a note of
//! whether any was NULL. A membership test applies the same affinity to the left value
//! (`OP_Affinity`) and looks it up, so `x IN (SELECT ...)` is true, false, or NULL as
//! `sqlite3ExprCodeIN` decides: NULL when `x` is NULL (unless the set is empty) or when `x` is
//! not found and the set holds a NULL.
//!
//! A leaf: values, affinities and collations only.

use std::cmp::Ordering;

use crate::datatype3::{apply_column_affinity, compare_values, Affinity, Collation};
use crate::value::{Value, ValueRef};

/// The values of an `IN (SELECT ...)` subquery, sorted and distinct under the comparison's
/// collation, after its affinity.
#[derive(Debug, Clone, PartialEq)]
pub struct InSet {
    /// The non-NULL values, ascending (SQLite's record order), each once.
    values: Vec<Value>,
    /// Whether the subquery gave a NULL.
    has_null: bool,
    /// The comparison's affinity (`exprINAffinity`), applied to both sides.
    affinity: Option<Affinity>,
    /// The comparison's collation (`sqlite3BinaryCompareCollSeq` of the left operand and the
    /// subquery's column).
    collation: Collation,
}

impl InSet {
    /// The set of `values` (a subquery's first column, in any order) compared under
    /// `affinity` and `collation`.
    pub fn new(values: Vec<Value>, affinity: Option<Affinity>, collation: Collation) -> InSet {
        let mut has_null = false;
        let mut kept: Vec<Value> = values
            .into_iter()
            .filter_map(|v| {
                if matches!(v, Value::Null) {
                    has_null = true;
                    None
                } else {
                    Some(stored(v.as_ref(), affinity))
                }
            })
            .collect();
        kept.sort_by(|a, b| compare_values(a.as_ref(), b.as_ref(), collation));
        kept.dedup_by(|a, b| compare_values(a.as_ref(), b.as_ref(), collation) == Ordering::Equal);
        InSet {
            values: kept,
            has_null,
            affinity,
            collation,
        }
    }

    /// Whether the subquery gave no row at all.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && !self.has_null
    }

    /// The distinct non-NULL values, ascending.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// `x IN set`: `Some(true)` when found, `Some(false)` when not (or the set is empty),
    /// `None` (NULL) when `x` is NULL or not found beside a NULL.
    pub fn contains(&self, x: ValueRef<'_>) -> Option<bool> {
        if self.is_empty() {
            return Some(false);
        }
        if x.is_null() {
            return None;
        }
        let x = stored(x, self.affinity);
        let found = self
            .values
            .binary_search_by(|v| compare_values(v.as_ref(), x.as_ref(), self.collation))
            .is_ok();
        if found {
            Some(true)
        } else if self.has_null {
            None
        } else {
            Some(false)
        }
    }
}

/// `v` as the ephemeral index stores it (`applyAffinity`): text that is wholly a number read
/// as one under a numeric affinity, numbers rendered as text under `TEXT`. Under `REAL`, an
/// integer beyond 6 bytes becomes the nearest real (`OP_Affinity` and `OP_MakeRecord` keep a
/// smaller one as an integer flagged real, which compares as the integer): so `i + 0 IN
/// (SELECT r ...)` finds 2^63 - 1 among reals equal to 2^63.
fn stored(v: ValueRef<'_>, affinity: Option<Affinity>) -> Value {
    /// The range of a 6-byte integer.
    const SIX_BYTES: std::ops::RangeInclusive<i64> = -140_737_488_355_328..=140_737_488_355_327;
    match affinity {
        None | Some(Affinity::Blob) => v.to_owned(),
        Some(Affinity::Text) => apply_column_affinity(v, Affinity::Text),
        // A real keeps its value (`sqlite3VdbeIntegerAffinity` only changes its form).
        Some(Affinity::Numeric | Affinity::Integer) => apply_column_affinity(v, Affinity::Numeric),
        Some(Affinity::Real) => match apply_column_affinity(v, Affinity::Numeric) {
            Value::Integer(i) if !SIX_BYTES.contains(&i) => Value::Real(i as f64),
            other => other,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Value {
        Value::text(s.to_string())
    }

    #[test]
    fn membership_follows_affinity_collation_and_nulls() {
        let set = InSet::new(
            vec![Value::Integer(5), text("7"), Value::Real(2.5)],
            Some(Affinity::Numeric),
            Collation::Binary,
        );
        assert_eq!(set.contains(ValueRef::Text(b"5")), Some(true));
        assert_eq!(set.contains(ValueRef::Integer(7)), Some(true));
        assert_eq!(set.contains(ValueRef::Real(5.0)), Some(true));
        assert_eq!(set.contains(ValueRef::Integer(6)), Some(false));
        assert_eq!(set.contains(ValueRef::Null), None);

        let with_null = InSet::new(vec![text("a"), Value::Null], None, Collation::NoCase);
        assert_eq!(with_null.contains(ValueRef::Text(b"A")), Some(true));
        assert_eq!(with_null.contains(ValueRef::Text(b"b")), None);

        let empty = InSet::new(Vec::new(), None, Collation::Binary);
        assert_eq!(empty.contains(ValueRef::Null), Some(false));
        let only_null = InSet::new(vec![Value::Null], None, Collation::Binary);
        assert_eq!(only_null.contains(ValueRef::Integer(1)), None);

        // Under REAL, an integer beyond 6 bytes is its nearest real (2^63 - 1 is 2^63); a
        // smaller one stays exact.
        let reals = InSet::new(
            vec![
                Value::Real(9.223_372_036_854_776e18),
                Value::Integer(1 << 47),
            ],
            Some(Affinity::Real),
            Collation::Binary,
        );
        assert_eq!(reals.contains(ValueRef::Integer(i64::MAX)), Some(true));
        assert_eq!(
            reals.contains(ValueRef::Text(b"9223372036854775807")),
            Some(true)
        );
        assert_eq!(
            reals.contains(ValueRef::Integer((1 << 47) + 1)),
            Some(false)
        );
        let numeric = InSet::new(
            vec![Value::Real(9.223_372_036_854_776e18)],
            Some(Affinity::Numeric),
            Collation::Binary,
        );
        assert_eq!(numeric.contains(ValueRef::Integer(i64::MAX)), Some(false));

        // Without an affinity, text never equals a number.
        let plain = InSet::new(vec![text("5")], None, Collation::Binary);
        assert_eq!(plain.contains(ValueRef::Integer(5)), Some(false));
        // Under TEXT, numbers are compared as their text.
        let as_text = InSet::new(
            vec![Value::Integer(5)],
            Some(Affinity::Text),
            Collation::Binary,
        );
        assert_eq!(as_text.contains(ValueRef::Text(b"5")), Some(true));
        assert_eq!(as_text.contains(ValueRef::Integer(5)), Some(true));
    }
}
