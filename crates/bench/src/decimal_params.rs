//! Exact query parameters: calendar dates and two-place decimals, parsed and printed without
//! floating point.
//!
//! Q6's boundaries must not be decided by f64 arithmetic (`0.06 + 0.01` is
//! `0.06999999999999999` and would drop every row with discount 0.07), so decimals are parsed
//! from their text straight into integer hundredths ([`parse_hundredths`]), shifted there, and
//! printed back ([`format_hundredths`]). Where SQLite needs a REAL, the caller parses that text
//! as f64, which yields the nearest double, the very value a TPC-H file stores for it.
//!
//! The Q6 revenue is a sum of `price * discount` products of hundredths, so it is an exact count
//! of 1/10000 units; [`format_revenue`] prints it with four decimals.

use std::fmt;
use std::str::FromStr;

/// A parameter that does not parse or is out of range. Displays as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// Not a real calendar date in `YYYY-MM-DD` form.
    #[error("invalid date '{0}': expected a calendar date YYYY-MM-DD")]
    Date(String),
    /// Not a decimal of the expected form or range.
    #[error("invalid {what} '{text}': {reason}")]
    Decimal {
        /// Which parameter (`discount`, `quantity`).
        what: &'static str,
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A proleptic Gregorian calendar date with a four-digit year.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    year: u16,
    month: u8,
    day: u8,
}

impl Date {
    /// The date `year-month-day`, if it exists (years 1..=9999).
    pub fn new(year: i32, month: u32, day: u32) -> Option<Date> {
        let valid = (1..=9999).contains(&year)
            && (1..=12).contains(&month)
            && day >= 1
            && day <= days_in_month(year, month);
        valid.then_some(Date {
            year: year as u16,
            month: month as u8,
            day: day as u8,
        })
    }

    /// `(year, month, day)`.
    pub fn ymd(self) -> (i32, u32, u32) {
        (
            i32::from(self.year),
            u32::from(self.month),
            u32::from(self.day),
        )
    }

    /// The same month and day `years` later, as SQLite's `date(d, '+N years')` computes it:
    /// February 29 becomes March 1 when the target year is not a leap year. `None` past 9999.
    pub fn plus_years(self, years: u32) -> Option<Date> {
        let year = i32::from(self.year).checked_add(i32::try_from(years).ok()?)?;
        let (month, day) = (u32::from(self.month), u32::from(self.day));
        Date::new(year, month, day).or_else(|| Date::new(year, month + 1, 1))
    }
}

impl fmt::Display for Date {
    /// `YYYY-MM-DD`, the form TPC-H files store and compare as text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl FromStr for Date {
    type Err = ParamError;

    /// Parses exactly `YYYY-MM-DD` (ten characters) naming a real calendar date.
    fn from_str(s: &str) -> Result<Date, ParamError> {
        let bad = || ParamError::Date(s.to_string());
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(bad());
        }
        let number = |r: std::ops::Range<usize>| -> Option<u32> {
            let digits = &s[r];
            digits
                .bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| digits.parse().ok())?
        };
        let (y, m, d) = (number(0..4), number(5..7), number(8..10));
        match (y, m, d) {
            (Some(y), Some(m), Some(d)) => Date::new(y as i32, m, d).ok_or_else(bad),
            _ => Err(bad()),
        }
    }
}

fn is_leap_year(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Parses a non-negative decimal with at most two fraction digits (`24`, `0.06`, `1.5`) into
/// hundredths (`2400`, `6`, `150`). `what` names the parameter in the error.
///
/// Accepted: one to fifteen integer digits, optionally followed by `.` and one or two digits.
/// No sign, exponent or whitespace.
pub fn parse_hundredths(what: &'static str, text: &str) -> Result<i64, ParamError> {
    let err = |reason| ParamError::Decimal {
        what,
        text: text.to_string(),
        reason,
    };
    if text.starts_with('-') {
        return Err(err("must not be negative"));
    }
    let (int, frac) = match text.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (text, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if !all_digits(int) || frac.is_some_and(|f| !all_digits(f)) {
        return Err(err("expected a decimal number such as 0.06 or 24"));
    }
    if int.len() > 15 {
        return Err(err("too large"));
    }
    let frac = frac.unwrap_or("");
    if frac.len() > 2 {
        return Err(err("at most two decimal places are allowed"));
    }
    let whole: i64 = int.parse().map_err(|_| err("too large"))?;
    let mut cents: i64 = 0;
    for (i, c) in frac.bytes().enumerate() {
        cents += i64::from(c - b'0') * if i == 0 { 10 } else { 1 };
    }
    Ok(whole * 100 + cents)
}

/// Prints hundredths as a decimal with exactly two places: `6` -> `0.06`, `-1` -> `-0.01`,
/// `2400` -> `24.00`. Parsing the result as f64 gives the double nearest to the decimal.
pub fn format_hundredths(hundredths: i64) -> String {
    let sign = if hundredths < 0 { "-" } else { "" };
    let abs = hundredths.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

/// Prints a count of 1/10000 units with exactly four decimals:
/// `1231410782283` -> `123141078.2283`, `0` -> `0.0000`, `-5` -> `-0.0005`.
pub fn format_revenue(ten_thousandths: i128) -> String {
    let sign = if ten_thousandths < 0 { "-" } else { "" };
    let abs = ten_thousandths.unsigned_abs();
    format!("{sign}{}.{:04}", abs / 10_000, abs % 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        let d: Date = "1994-01-01".parse().unwrap();
        assert_eq!(d.ymd(), (1994, 1, 1));
        assert_eq!(d.to_string(), "1994-01-01");
        assert_eq!(d.plus_years(1).unwrap().to_string(), "1995-01-01");
        let leap: Date = "1996-02-29".parse().unwrap();
        assert_eq!(leap.plus_years(1).unwrap().to_string(), "1997-03-01");
        assert_eq!(leap.plus_years(4).unwrap().to_string(), "2000-02-29");
        assert!(Date::new(9999, 6, 1).unwrap().plus_years(1).is_none());
        for bad in [
            "1994-02-30",
            "1993-02-29",
            "1900-02-29",
            "1994-13-01",
            "1994-00-10",
            "1994-1-01",
            "94-01-01",
            "1994/01/01",
            "1994-01-01 ",
            "",
            "0000-01-01",
            "1994-01-+1",
            "１９９４-01-01",
        ] {
            assert!(bad.parse::<Date>().is_err(), "{bad}");
        }
        assert!("2000-02-29".parse::<Date>().is_ok());
    }

    #[test]
    fn hundredths() {
        let p = |s| parse_hundredths("discount", s);
        assert_eq!(p("0.06"), Ok(6));
        assert_eq!(p("0.6"), Ok(60));
        assert_eq!(p("24"), Ok(2400));
        assert_eq!(p("1.00"), Ok(100));
        assert_eq!(p("007.05"), Ok(705));
        for bad in [
            "", ".", ".5", "1.", "1.234", "-0.01", "+1", "1e2", " 1", "0x1", "1.0.0", "NaN",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert!(p("1234567890123456").is_err());
        let e = p("0.061").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid discount '0.061': at most two decimal places are allowed"
        );
        assert_eq!(format_hundredths(6), "0.06");
        assert_eq!(format_hundredths(-1), "-0.01");
        assert_eq!(format_hundredths(2400), "24.00");
        assert_eq!(format_hundredths(7).parse::<f64>().unwrap(), 0.07);
    }

    #[test]
    fn revenue() {
        assert_eq!(format_revenue(1_231_410_782_283), "123141078.2283");
        assert_eq!(format_revenue(0), "0.0000");
        assert_eq!(format_revenue(5), "0.0005");
        assert_eq!(format_revenue(-5), "-0.0005");
        assert_eq!(format_revenue(-123_456), "-12.3456");
        assert_eq!(format_revenue(10_000), "1.0000");
        assert!(format_revenue(i128::MIN).starts_with('-'));
    }
}
