//! The Q6 predicate on one row's stored values, under SQLite's comparison rules for each
//! column's declared affinity and collation ([`crate::datatype3`]).
//!
//! Q6 compares each column with a literal, and a literal has no affinity, so the column's
//! affinity decides the conversions: on a `CHAR(10)` quantity, `l_quantity < 24` compares the
//! stored text `'17'` with the text `'24'`; on a `DECIMAL(15,2)` ship date, stored text that is
//! wholly a number becomes that number and sorts before every date. The common TPC-H case
//! (numbers in numeric columns, `'YYYY-MM-DD'` text under `BINARY`) takes fast arms that are
//! exactly equivalent; every other combination goes through [`datatype3::compare`].

use std::cmp::Ordering;

use crate::datatype3::{self, comparison_affinity, Affinity, Collation};
use crate::q6::params::Q6Filter;
use crate::value::{numeric_affinity_of_text, Number, ValueRef};

/// A value of one of the Q6 columns, as stored (a blob's bytes are never needed: Q6 compares
/// no blob with a blob).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stored<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a [u8]),
    Blob,
}

impl<'a> From<ValueRef<'a>> for Stored<'a> {
    #[inline(always)]
    fn from(v: ValueRef<'a>) -> Self {
        match v {
            ValueRef::Null => Stored::Null,
            ValueRef::Integer(i) => Stored::Int(i),
            ValueRef::Real(x) => Stored::Real(x),
            ValueRef::Text(t) => Stored::Text(t),
            ValueRef::Blob(_) => Stored::Blob,
        }
    }
}

impl<'a> Stored<'a> {
    pub(super) fn as_value_ref(self) -> ValueRef<'a> {
        match self {
            Stored::Null => ValueRef::Null,
            Stored::Int(i) => ValueRef::Integer(i),
            Stored::Real(x) => ValueRef::Real(x),
            Stored::Text(t) => ValueRef::Text(t),
            Stored::Blob => ValueRef::Blob(&[]),
        }
    }
}

/// How SQLite stores and compares each Q6 column: its affinity and collation, in the order
/// quantity, extended price, discount, ship date (as [`crate::q6::Q6_COLUMNS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Q6ColumnTypes {
    /// Each column's affinity (from its declared type).
    pub affinity: [Affinity; 4],
    /// Each column's declared collation (`BINARY` when none is declared).
    pub collation: [Collation; 4],
}

impl Default for Q6ColumnTypes {
    /// The common TPC-H layout: `DECIMAL(15,2)` money and quantity, a `DATE` ship date (all
    /// NUMERIC affinity), no collations.
    fn default() -> Self {
        Q6ColumnTypes {
            affinity: [Affinity::Numeric; 4],
            collation: [Collation::Binary; 4],
        }
    }
}

/// The three Q6 comparisons, planned for one table's column types.
#[derive(Debug, Clone)]
pub(super) struct Q6Predicates {
    filter: Q6Filter,
    ship: Rule,
    discount: Rule,
    quantity: Rule,
    /// The quantity bound as the literal the Q6 text writes: an integer when whole.
    quantity_literal: Number,
}

/// One column's comparison with a literal.
#[derive(Debug, Clone, Copy)]
struct Rule {
    /// The affinity the comparison applies (`None`: no conversion).
    affinity: Option<Affinity>,
    collation: Collation,
}

impl Q6Predicates {
    pub(super) fn new(filter: Q6Filter, types: &Q6ColumnTypes) -> Self {
        let rule = |k: usize| Rule {
            affinity: comparison_affinity(Some(types.affinity[k]), None),
            collation: types.collation[k],
        };
        let q = filter.quantity;
        Q6Predicates {
            filter,
            quantity: rule(0),
            discount: rule(2),
            ship: rule(3),
            quantity_literal: if q % 100 == 0 {
                Number::Integer(q / 100)
            } else {
                Number::Real(filter.quantity_f64)
            },
        }
    }

    /// Whether a row whose ship date is not stored as text can still match (only when the
    /// comparison renders numbers as text).
    #[inline(always)]
    pub(super) fn only_text_dates_match(&self) -> bool {
        self.ship.affinity != Some(Affinity::Text)
    }

    /// Whether `date`, stored as text, may be judged by the bytewise window test.
    #[inline(always)]
    pub(super) fn date_bytes_decide(&self, date: &[u8]) -> bool {
        // Under a numeric affinity, text that is wholly a number would become one; a
        // `YYYY-MM-DD` text never is (the `-` after the year ends the number).
        self.ship.collation == Collation::Binary
            && (!is_numeric(self.ship.affinity) || (date.len() == 10 && date[4] == b'-'))
    }

    /// When every ten-byte text date is judged by [`Self::date_bytes_decide`] given one
    /// byte: `Some(Some((4, b'-')))` under a numeric affinity (only a `YYYY-` text is sure not
    /// to be a number), `Some(None)` when every text decides, `None` under a collation.
    pub(super) fn ten_byte_dates_decide(&self) -> Option<Option<(usize, u8)>> {
        (self.ship.collation == Collation::Binary)
            .then(|| is_numeric(self.ship.affinity).then_some((4, b'-')))
    }

    /// `l_shipdate >= lo AND l_shipdate < hi`.
    #[inline(always)]
    pub(super) fn ship_date(&self, v: Stored<'_>) -> bool {
        match v {
            Stored::Text(t) if self.date_bytes_decide(t) => self.filter.date_in_window(t),
            Stored::Null => false,
            Stored::Int(_) | Stored::Real(_) | Stored::Blob if self.only_text_dates_match() => {
                false
            }
            _ => {
                let (lo, hi) = (&self.filter.date_lo[..], &self.filter.date_hi[..]);
                self.ship
                    .cmp(v, ValueRef::Text(lo))
                    .is_some_and(Ordering::is_ge)
                    && self
                        .ship
                        .cmp(v, ValueRef::Text(hi))
                        .is_some_and(Ordering::is_lt)
            }
        }
    }

    /// `l_discount BETWEEN lo AND hi`. Numbers compare as numbers under every affinity (a
    /// text affinity converts only when an operand is text); the integer case compares in
    /// hundredths, exactly.
    #[inline(always)]
    pub(super) fn discount(&self, v: Stored<'_>) -> bool {
        let f = &self.filter;
        match v {
            Stored::Int(x) => {
                let h = i128::from(x) * 100;
                h >= i128::from(f.discount_lo) && h <= i128::from(f.discount_hi)
            }
            Stored::Real(x) => x >= f.discount_lo_f64 && x <= f.discount_hi_f64,
            Stored::Null | Stored::Blob => false,
            Stored::Text(_) => {
                let lo = ValueRef::Real(f.discount_lo_f64);
                let hi = ValueRef::Real(f.discount_hi_f64);
                self.discount.cmp(v, lo).is_some_and(Ordering::is_ge)
                    && self.discount.cmp(v, hi).is_some_and(Ordering::is_le)
            }
        }
    }

    /// `l_quantity < QUANTITY`.
    #[inline(always)]
    pub(super) fn quantity(&self, v: Stored<'_>) -> bool {
        let f = &self.filter;
        match v {
            Stored::Int(x) => i128::from(x) * 100 < i128::from(f.quantity),
            Stored::Real(x) => x < f.quantity_f64,
            Stored::Null | Stored::Blob => false,
            Stored::Text(_) => {
                let literal = match self.quantity_literal {
                    Number::Integer(i) => ValueRef::Integer(i),
                    Number::Real(r) => ValueRef::Real(r),
                };
                self.quantity.cmp(v, literal).is_some_and(Ordering::is_lt)
            }
        }
    }
}

impl Rule {
    fn cmp(self, v: Stored<'_>, literal: ValueRef<'_>) -> Option<Ordering> {
        datatype3::compare(v.as_value_ref(), literal, self.affinity, self.collation)
    }
}

fn is_numeric(affinity: Option<Affinity>) -> bool {
    matches!(
        affinity,
        Some(Affinity::Numeric | Affinity::Integer | Affinity::Real)
    )
}

/// A matched price or discount in hundredths, exactly; `None` for NULL. Text counts when it
/// is wholly a number (SQLite's arithmetic would read it as one); anything the exact sum
/// cannot be formed from is an error naming the column and the value, never a rounding.
pub(super) fn hundredths(v: Stored<'_>, column: &str) -> Result<Option<i64>, String> {
    let number = match v {
        Stored::Null => return Ok(None),
        Stored::Int(i) => Number::Integer(i),
        Stored::Real(x) => Number::Real(x),
        Stored::Text(t) => numeric_affinity_of_text(t).ok_or_else(|| {
            format!(
                "{column} holds the text {:?}, which is not a number, so the exact revenue \
                 cannot be formed",
                String::from_utf8_lossy(t)
            )
        })?,
        Stored::Blob => {
            return Err(format!(
                "{column} holds a blob, so the exact revenue cannot be formed"
            ))
        }
    };
    match number {
        Number::Integer(i) => i
            .checked_mul(100)
            .map(Some)
            .ok_or_else(|| format!("{column} value {i} is too large")),
        Number::Real(x) => {
            let h = (x * 100.0).round();
            // The REAL must be the double nearest to a two-place decimal; dividing the integer
            // by 100 reproduces exactly that double.
            if h.abs() < 9.0e15 && h / 100.0 == x {
                Ok(Some(h as i64))
            } else {
                Err(format!(
                    "{column} value {x} is not a decimal with at most two places"
                ))
            }
        }
    }
}
