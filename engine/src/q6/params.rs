//! TPC-H Q6: its substitution parameters and the exact partial aggregate each executor keeps.
//!
//! ```sql
//! SELECT sum(l_extendedprice * l_discount) FROM lineitem
//! WHERE l_shipdate >= DATE AND l_shipdate < DATE + 1 year
//!   AND l_discount BETWEEN DISCOUNT - 0.01 AND DISCOUNT + 0.01 AND l_quantity < QUANTITY;
//! ```
//!
//! Prices and discounts are decimals with two places, so the revenue is an exact integer count of
//! 1/10000 units. Parameters are parsed as decimals, never through `f64`: `0.06 + 0.01` is
//! `0.06999999999999999` in binary floating point and would silently drop every row with discount
//! 0.07. Comparisons against values stored as REAL use the double nearest to each decimal bound,
//! which is exactly what SQLite compares against, so boundary rows agree with SQLite.
//!
//! Layering: the bottom of [`crate::q6`]; imports nothing from the crate.

use std::fmt;

/// An error in a Q6 substitution parameter.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParamError {
    /// `--date` is not a real calendar date in `YYYY-MM-DD` form.
    #[error(
        "invalid date {0:?}: expected a calendar date YYYY-MM-DD between 0001-01-01 and 9998-12-31"
    )]
    Date(String),
    /// `--discount` is not a decimal in 0.00..=1.00 with at most two places.
    #[error(
        "invalid discount {0:?}: expected a decimal between 0.00 and 1.00 with at most two places"
    )]
    Discount(String),
    /// `--quantity` is not a positive decimal below 10^15 with at most two places.
    #[error(
        "invalid quantity {0:?}: expected a positive decimal below 10^15 with at most two places"
    )]
    Quantity(String),
}

/// A calendar date. Stored as its `YYYY-MM-DD` text, which is how the table stores dates and
/// what SQLite compares (byte by byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    year: u16,
    month: u8,
    day: u8,
}

impl Date {
    /// Parses `YYYY-MM-DD`, checking that the day exists in that month.
    pub fn parse(text: &str) -> Result<Self, ParamError> {
        let err = || ParamError::Date(text.to_string());
        let b = text.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(err());
        }
        let num = |s: &str| -> Result<u16, ParamError> {
            if s.bytes().all(|c| c.is_ascii_digit()) {
                s.parse().map_err(|_| err())
            } else {
                Err(err())
            }
        };
        let year = num(&text[0..4])?;
        let month = num(&text[5..7])?;
        let day = num(&text[8..10])?;
        if !(1..=9998).contains(&year) || !(1..=12).contains(&month) {
            return Err(err());
        }
        if day == 0 || day > u16::from(days_in_month(year, month as u8)) {
            return Err(err());
        }
        Ok(Date {
            year,
            month: month as u8,
            day: day as u8,
        })
    }

    /// The same day one year later, as SQLite's `date(d, '+1 year')` computes it: February 29
    /// becomes March 1 when the next year is not a leap year.
    pub fn plus_one_year(self) -> Self {
        let year = self.year + 1;
        if self.month == 2 && self.day == 29 && days_in_month(year, 2) == 28 {
            Date {
                year,
                month: 3,
                day: 1,
            }
        } else {
            Date { year, ..self }
        }
    }

    /// Year, month and day.
    pub fn ymd(self) -> (u16, u8, u8) {
        (self.year, self.month, self.day)
    }

    /// The date as the 10 bytes `YYYY-MM-DD`.
    pub fn text(self) -> [u8; 10] {
        let mut out = *b"0000-00-00";
        let put = |out: &mut [u8], v: u16| {
            let mut v = v;
            for c in out.iter_mut().rev() {
                *c = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(&mut out[0..4], self.year);
        put(&mut out[5..7], u16::from(self.month));
        put(&mut out[8..10], u16::from(self.day));
        out
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        _ => 28,
    }
}

/// Parses a non-negative decimal with at most two places into hundredths (`"0.06"` -> 6,
/// `"24"` -> 2400).
fn parse_hundredths(text: &str) -> Option<i64> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 2 || int.len() > 15 {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return None;
    }
    let whole: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut cents: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    if frac.len() == 1 {
        cents *= 10;
    }
    whole.checked_mul(100)?.checked_add(cents)
}

/// Formats hundredths as a decimal with two places (`6` -> `"0.06"`).
pub fn format_hundredths(h: i64) -> String {
    let sign = if h < 0 { "-" } else { "" };
    let a = h.unsigned_abs();
    format!("{sign}{}.{:02}", a / 100, a % 100)
}

/// The Q6 substitution parameters, validated, with the derived bounds the filter uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q6Params {
    /// First shipping date in the window (inclusive).
    pub date: Date,
    /// The discount, in hundredths; rows match within +-0.01, inclusive.
    pub discount_hundredths: i64,
    /// The quantity bound, in hundredths; rows match when `l_quantity` is below it.
    pub quantity_hundredths: i64,
}

impl Default for Q6Params {
    /// The TPC-H validation parameters: 1994-01-01, 0.06, 24.
    fn default() -> Self {
        Q6Params {
            date: Date {
                year: 1994,
                month: 1,
                day: 1,
            },
            discount_hundredths: 6,
            quantity_hundredths: 2400,
        }
    }
}

impl Q6Params {
    /// Parses and validates the three parameters as given on the command line.
    pub fn parse(date: &str, discount: &str, quantity: &str) -> Result<Self, ParamError> {
        let date = Date::parse(date)?;
        let discount_hundredths = parse_hundredths(discount)
            .filter(|d| (0..=100).contains(d))
            .ok_or_else(|| ParamError::Discount(discount.to_string()))?;
        let quantity_hundredths = parse_hundredths(quantity)
            .filter(|q| *q > 0 && *q < 100_000_000_000_000_000)
            .ok_or_else(|| ParamError::Quantity(quantity.to_string()))?;
        Ok(Q6Params {
            date,
            discount_hundredths,
            quantity_hundredths,
        })
    }

    /// The exclusive end of the shipping-date window: one year after [`Self::date`].
    pub fn date_end(&self) -> Date {
        self.date.plus_one_year()
    }

    /// The inclusive discount bounds in hundredths: `(discount - 0.01, discount + 0.01)`.
    pub fn discount_bounds(&self) -> (i64, i64) {
        (self.discount_hundredths - 1, self.discount_hundredths + 1)
    }
}

/// The bounds of a [`Q6Params`] in the forms the per-row filter compares against.
#[derive(Debug, Clone, Copy)]
pub struct Q6Filter {
    /// `YYYY-MM-DD` of the first day in the window.
    pub date_lo: [u8; 10],
    /// `YYYY-MM-DD` of the first day after the window.
    pub date_hi: [u8; 10],
    /// Lowest matching discount, in hundredths.
    pub discount_lo: i64,
    /// Highest matching discount, in hundredths.
    pub discount_hi: i64,
    /// The nearest double to `discount_lo / 100`, for REAL-stored discounts.
    pub discount_lo_f64: f64,
    /// The nearest double to `discount_hi / 100`.
    pub discount_hi_f64: f64,
    /// The quantity bound, in hundredths (exclusive).
    pub quantity: i64,
    /// The nearest double to `quantity / 100`.
    pub quantity_f64: f64,
}

impl Q6Filter {
    /// Whether a ship date stored as text lies in `[date_lo, date_hi)`, comparing bytes as
    /// SQLite's BINARY collation does. Ten-byte dates compare as two big-endian integers.
    #[inline(always)]
    pub fn date_in_window(&self, text: &[u8]) -> bool {
        if let Ok(t) = <&[u8; 10]>::try_from(text) {
            let key = date_key(t);
            key >= date_key(&self.date_lo) && key < date_key(&self.date_hi)
        } else {
            text >= &self.date_lo[..] && text < &self.date_hi[..]
        }
    }
}

/// Ten bytes as one integer whose order is their lexicographic order.
#[inline(always)]
fn date_key(t: &[u8; 10]) -> u128 {
    let (hi, lo) = t.split_at(8);
    let hi = u64::from_be_bytes(hi.try_into().unwrap_or([0; 8]));
    let lo = u16::from_be_bytes(lo.try_into().unwrap_or([0; 2]));
    (u128::from(hi) << 16) | u128::from(lo)
}

impl From<&Q6Params> for Q6Filter {
    fn from(p: &Q6Params) -> Self {
        let (lo, hi) = p.discount_bounds();
        // Integer divided by 100 is correctly rounded, so these are the doubles nearest to the
        // decimals, the same ones SQLite stores for them.
        Q6Filter {
            date_lo: p.date.text(),
            date_hi: p.date_end().text(),
            discount_lo: lo,
            discount_hi: hi,
            discount_lo_f64: lo as f64 / 100.0,
            discount_hi_f64: hi as f64 / 100.0,
            quantity: p.quantity_hundredths,
            quantity_f64: p.quantity_hundredths as f64 / 100.0,
        }
    }
}

/// One executor's share of the answer: an exact revenue and row counts. Merging partials is
/// addition, so the coordinator's result does not depend on how the table was cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartialAggregate {
    /// `sum(l_extendedprice * l_discount)` in units of 1/10000.
    pub revenue: i128,
    /// Rows (table-leaf cells) examined.
    pub rows_scanned: u64,
    /// Rows that satisfied the Q6 predicate.
    pub rows_matched: u64,
}

impl PartialAggregate {
    /// Adds another executor's partial into this one.
    pub fn merge(&mut self, other: &PartialAggregate) {
        self.revenue += other.revenue;
        self.rows_scanned += other.rows_scanned;
        self.rows_matched += other.rows_matched;
    }

    /// The revenue printed with four decimals, exactly (`1231410782283` -> `123141078.2283`).
    pub fn revenue_text(&self) -> String {
        format_ten_thousandths(self.revenue)
    }
}

/// Formats a count of 1/10000 units with four decimals.
pub fn format_ten_thousandths(v: i128) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    format!("{sign}{}.{:04}", a / 10_000, a % 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_tpch_defaults() {
        let p = Q6Params::parse("1994-01-01", "0.06", "24").unwrap();
        assert_eq!(p, Q6Params::default());
        let f = Q6Filter::from(&p);
        assert_eq!(&f.date_hi, b"1995-01-01");
        assert_eq!((f.discount_lo, f.discount_hi), (5, 7));
        assert_eq!(f.discount_hi_f64, 0.07);
        assert_eq!(f.quantity, 2400);
    }

    #[test]
    fn rejects_bad_parameters() {
        for d in [
            "1994-02-30",
            "1994-13-01",
            "94-01-01",
            "1994-1-01",
            "1994-01-0x",
        ] {
            assert!(matches!(Date::parse(d), Err(ParamError::Date(_))), "{d}");
        }
        for x in ["1.01", "0.061", "-0.06", ".", "abc", ""] {
            assert!(Q6Params::parse("1994-01-01", x, "24").is_err(), "{x}");
        }
        for q in ["0", "-1", "24.001", "1e3"] {
            assert!(Q6Params::parse("1994-01-01", "0.06", q).is_err(), "{q}");
        }
        assert_eq!(
            Q6Params::parse("1994-01-01", ".5", "24.5")
                .unwrap()
                .quantity_hundredths,
            2450
        );
        assert_eq!(
            Q6Params::parse("1994-01-01", "0", "24")
                .unwrap()
                .discount_bounds(),
            (-1, 1)
        );
        assert!(Q6Params::parse("9998-12-31", "1.00", "0.01").is_ok());
    }

    #[test]
    fn date_window_compares_like_binary_collation() {
        let f = Q6Filter::from(&Q6Params::default());
        for (t, inside) in [
            ("1994-01-01", true),
            ("1994-12-31", true),
            ("1995-01-01", false),
            ("1993-12-31", false),
            ("1994-06-01x", true),
            ("1994", false),
            ("1995", true),
            ("", false),
        ] {
            let slice = t.as_bytes() >= &f.date_lo[..] && t.as_bytes() < &f.date_hi[..];
            assert_eq!(f.date_in_window(t.as_bytes()), slice, "{t}");
            assert_eq!(slice, inside, "{t}");
        }
    }

    #[test]
    fn leap_day_plus_one_year_matches_sqlite() {
        let d = Date::parse("1996-02-29").unwrap();
        assert_eq!(d.plus_one_year().to_string(), "1997-03-01");
        assert_eq!(
            Date::parse("2000-02-29")
                .unwrap()
                .plus_one_year()
                .to_string(),
            "2001-03-01"
        );
        assert_eq!(
            Date::parse("1995-07-31")
                .unwrap()
                .plus_one_year()
                .to_string(),
            "1996-07-31"
        );
    }

    #[test]
    fn formats_exact_decimals() {
        assert_eq!(format_ten_thousandths(1_231_410_782_283), "123141078.2283");
        assert_eq!(format_ten_thousandths(0), "0.0000");
        assert_eq!(format_ten_thousandths(-5), "-0.0005");
        assert_eq!(format_hundredths(7), "0.07");
    }
}
