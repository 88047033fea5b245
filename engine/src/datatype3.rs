//! SQLite's comparison rules (<https://www.sqlite.org/datatype3.html>), in one place that every
//! evaluator calls: the Q6 filter and the general query's expressions alike.
//!
//! A comparison `a OP b` is decided in three steps, all fixed when the query is planned except
//! the last:
//!
//! 1. **The comparison affinity** ([`comparison_affinity`], SQLite's `sqlite3CompareAffinity`)
//!    from the operands' expression affinities: a column has its declared affinity, a
//!    `CAST(x AS type)` the affinity of `type`, `x COLLATE c` the affinity of `x`, anything
//!    else (a literal, `+col`, arithmetic, a function) none. One side numeric
//!    (`INTEGER`/`REAL`/`NUMERIC`) makes the comparison numeric; otherwise a lone `TEXT` side
//!    facing an operand without affinity makes it text; otherwise nothing is converted. So
//!    `l_quantity < 24` on a `CHAR(10)` column compares the text `'17'` with the text `'24'`.
//!    The right-hand values of `IN (...)` count as having no affinity; `BETWEEN` is two
//!    comparisons.
//! 2. **The collating sequence** ([`Collation`]): the left operand's explicit `COLLATE`, else
//!    the right's, else the left column's declared collation, else the right column's, else
//!    `BINARY`. A collation other than the three built-in ones cannot be applied: the planner
//!    refuses the query, as SQLite does without the application that registered it.
//! 3. **At run time** ([`compare`]): with a numeric affinity, each operand that is text is
//!    read as a number when the whole text is one; with text affinity, when either operand is
//!    text, each number is rendered as text; then the two values compare by storage class
//!    (NULL, then numbers, then text, then blobs), numbers exactly across integers and reals,
//!    text by the collation, blobs by `memcmp` ([`compare_values`], `sqlite3MemCompare`).
//!    A NULL operand makes the comparison NULL (`None`).

use std::cmp::Ordering;

pub use partitioner::Affinity;

use crate::value::{numeric_affinity_of_text, real_to_text, Number, Value, ValueRef};

/// A collating sequence for text comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Collation {
    /// `memcmp` of the bytes (the default).
    #[default]
    Binary,
    /// ASCII letters compare case-insensitively; other bytes as `BINARY`.
    NoCase,
    /// Trailing spaces (U+0020 only) are ignored; then as `BINARY`.
    RTrim,
}

impl Collation {
    /// The built-in collation called `name` (ASCII case-insensitive), or `None` for any other:
    /// a collation that an application registers exists only in that application.
    pub fn from_name(name: &str) -> Option<Collation> {
        if name.eq_ignore_ascii_case("binary") {
            Some(Collation::Binary)
        } else if name.eq_ignore_ascii_case("nocase") {
            Some(Collation::NoCase)
        } else if name.eq_ignore_ascii_case("rtrim") {
            Some(Collation::RTrim)
        } else {
            None
        }
    }

    /// The collation's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Collation::Binary => "BINARY",
            Collation::NoCase => "NOCASE",
            Collation::RTrim => "RTRIM",
        }
    }

    /// Compares two texts under this collation.
    pub fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            Collation::Binary => a.cmp(b),
            // `nocaseCollatingFunc`: ASCII letters folded, up to the shorter length, and
            // `sqlite3StrNICmp` stops at a NUL: past a NUL both texts hold at the same place
            // (all before it equal), only the lengths count.
            Collation::NoCase => {
                for (&x, &y) in a.iter().zip(b) {
                    let (x, y) = (x.to_ascii_lowercase(), y.to_ascii_lowercase());
                    if x != y {
                        return x.cmp(&y);
                    }
                    if x == 0 {
                        break;
                    }
                }
                a.len().cmp(&b.len())
            }
            Collation::RTrim => rtrim(a).cmp(rtrim(b)),
        }
    }
}

/// The key NOCASE compares `t` by (two texts are equal under NOCASE exactly when their keys
/// are equal): ASCII letters folded up to the first NUL, every byte after it zero (only the
/// length of what follows a NUL counts; see [`Collation::compare`]).
pub fn nocase_key(t: &[u8]) -> Vec<u8> {
    let mut key = t.to_ascii_lowercase();
    if let Some(nul) = key.iter().position(|&c| c == 0) {
        key[nul..].fill(0);
    }
    key
}

/// `s` without its trailing spaces (U+0020 only, as RTRIM defines them).
fn rtrim(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
    &s[..end]
}

/// `sqlite3CompareAffinity`: the affinity a comparison applies to its operands, from the
/// operands' expression affinities (`None` = the expression has no affinity). `None` in the
/// result means nothing is converted.
pub fn comparison_affinity(left: Option<Affinity>, right: Option<Affinity>) -> Option<Affinity> {
    let numeric = |a: Option<Affinity>| {
        matches!(
            a,
            Some(Affinity::Numeric | Affinity::Integer | Affinity::Real)
        )
    };
    match (left, right) {
        // Two columns: numeric if either is, otherwise compared as they are.
        (Some(_), Some(_)) => (numeric(left) || numeric(right)).then_some(Affinity::Numeric),
        (Some(a), None) | (None, Some(a)) => match a {
            Affinity::Blob => None,
            Affinity::Text => Some(Affinity::Text),
            _ => Some(Affinity::Numeric),
        },
        (None, None) => None,
    }
}

/// Orders two values as SQLite's `sqlite3MemCompare` does: NULL first, then numbers (integers
/// and reals compared exactly), then text under `collation`, then blobs by bytes. Used for
/// `ORDER BY`, `GROUP BY`, `DISTINCT`, `min`/`max`, and by [`compare`] after conversions.
pub fn compare_values(a: ValueRef<'_>, b: ValueRef<'_>, collation: Collation) -> Ordering {
    use ValueRef::*;
    match (a, b) {
        (Null, Null) => Ordering::Equal,
        (Null, _) => Ordering::Less,
        (_, Null) => Ordering::Greater,
        (Integer(x), Integer(y)) => x.cmp(&y),
        (Integer(x), Real(y)) => int_real_cmp(x, y),
        (Real(x), Integer(y)) => int_real_cmp(y, x).reverse(),
        (Real(x), Real(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Integer(_) | Real(_), _) => Ordering::Less,
        (_, Integer(_) | Real(_)) => Ordering::Greater,
        (Text(x), Text(y)) => collation.compare(x, y),
        (Text(_), Blob(_)) => Ordering::Less,
        (Blob(_), Text(_)) => Ordering::Greater,
        (Blob(x), Blob(y)) => x.cmp(y),
    }
}

/// `sqlite3IntFloatCompare`: an integer against a real, exactly (no rounding of the integer
/// to a double).
pub fn int_real_cmp(i: i64, r: f64) -> Ordering {
    if r.is_nan() {
        return Ordering::Greater;
    }
    if r < -9_223_372_036_854_775_808.0 {
        return Ordering::Greater;
    }
    if r >= 9_223_372_036_854_775_808.0 {
        return Ordering::Less;
    }
    let y = r as i64; // truncates toward zero; exact range checked above
    match i.cmp(&y) {
        Ordering::Equal => {
            let frac = r - y as f64;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

/// A value after a comparison's affinity has been applied to it.
#[derive(Debug, Clone, PartialEq)]
pub enum Converted<'a> {
    /// Unchanged.
    Same(ValueRef<'a>),
    /// Text read as a number.
    Number(Number),
    /// A number rendered as text.
    Text(String),
}

impl Converted<'_> {
    /// The converted value.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Converted::Same(v) => *v,
            Converted::Number(Number::Integer(i)) => ValueRef::Integer(*i),
            Converted::Number(Number::Real(r)) => ValueRef::Real(*r),
            Converted::Text(t) => ValueRef::Text(t.as_bytes()),
        }
    }
}

/// Applies a comparison's affinity to both operands (the VDBE's `OP_Lt` family): numeric
/// affinity reads text operands that are wholly numbers as numbers; text affinity renders
/// numbers as text, but only when one of the operands is text.
pub fn apply_comparison_affinity<'a, 'b>(
    a: ValueRef<'a>,
    b: ValueRef<'b>,
    affinity: Option<Affinity>,
) -> (Converted<'a>, Converted<'b>) {
    let is_text = |v: ValueRef<'_>| matches!(v, ValueRef::Text(_));
    match affinity {
        Some(Affinity::Numeric | Affinity::Integer | Affinity::Real) => {
            (numeric_side(a), numeric_side(b))
        }
        Some(Affinity::Text) if is_text(a) || is_text(b) => (text_side(a), text_side(b)),
        _ => (Converted::Same(a), Converted::Same(b)),
    }
}

fn numeric_side(v: ValueRef<'_>) -> Converted<'_> {
    match v {
        ValueRef::Text(t) => match numeric_affinity_of_text(t) {
            Some(n) => Converted::Number(n),
            None => Converted::Same(v),
        },
        _ => Converted::Same(v),
    }
}

fn text_side(v: ValueRef<'_>) -> Converted<'_> {
    match v {
        ValueRef::Integer(i) => Converted::Text(i.to_string()),
        ValueRef::Real(r) => Converted::Text(real_to_text(r)),
        _ => Converted::Same(v),
    }
}

/// A comparison operator's outcome on two values: `None` when either is NULL, else the order
/// of `a` relative to `b` after applying `affinity` (see [`comparison_affinity`]) and under
/// `collation`.
pub fn compare(
    a: ValueRef<'_>,
    b: ValueRef<'_>,
    affinity: Option<Affinity>,
    collation: Collation,
) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    let (ca, cb) = apply_comparison_affinity(a, b, affinity);
    Some(compare_values(ca.as_ref(), cb.as_ref(), collation))
}

/// The value `v` takes when stored in (or read by default into) a column of `affinity`
/// (`applyAffinity` as `OP_Affinity` does it): used for `CAST`-free conversions such as
/// defaults and generated columns.
pub fn apply_column_affinity(v: ValueRef<'_>, affinity: Affinity) -> Value {
    match affinity {
        Affinity::Blob => v.to_owned(),
        Affinity::Text => match v {
            ValueRef::Integer(i) => Value::text(i.to_string()),
            ValueRef::Real(r) => Value::text(real_to_text(r)),
            other => other.to_owned(),
        },
        Affinity::Numeric | Affinity::Integer | Affinity::Real => {
            let n = match v {
                ValueRef::Text(t) => numeric_affinity_of_text(t),
                ValueRef::Integer(i) => Some(Number::Integer(i)),
                ValueRef::Real(r) => Some(Number::Real(r)),
                _ => None,
            };
            match n {
                // A real with an integer value that fits becomes an integer, except in a
                // REAL column, which keeps (and reads back) reals.
                Some(Number::Real(r)) if affinity != Affinity::Real => {
                    partitioner::numeric_text::real_as_integer(r)
                        .map_or(Value::real(r), Value::Integer)
                }
                Some(Number::Integer(i)) if affinity == Affinity::Real => Value::Real(i as f64),
                Some(n) => Value::from(n),
                None => v.to_owned(),
            }
        }
    }
}

#[cfg(test)]
mod tests;
