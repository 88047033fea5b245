//! Dates and timestamps as SQLite stores them (ISO-8601 text) and as Arrow holds them (days
//! and microseconds since 1970-01-01), both ways, on the proleptic Gregorian calendar.
//!
//! Reading is strict: a date is exactly `YYYY-MM-DD`, a timestamp one of the text forms
//! SQLite's date functions read (<https://www.sqlite.org/lang_datefunc.html>, formats 1 to 7:
//! `YYYY-MM-DD`, then `HH:MM`, `HH:MM:SS` or `HH:MM:SS.fff` after a space or a `T`, then an
//! optional `Z` or `±HH:MM`, which is converted to UTC as SQLite does), with real calendar
//! dates and clock times. Fractions of a second finer than a microsecond must be zeros: Arrow's
//! microseconds could not hold them.
//!
//! Layering: the bottom of the crate; imports nothing from it.

/// Microseconds in a day.
const DAY_MICROS: i64 = 86_400_000_000;

/// Days from 1970-01-01 to `y-m-d` (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01, as (year, month, day) (Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The value of `n` ASCII digits at the start of `s`.
fn digits(s: &[u8], n: usize) -> Option<u32> {
    let part = s.get(..n)?;
    part.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// `YYYY-MM-DD` at the start of `s`, as days since 1970-01-01.
fn date_prefix(s: &[u8]) -> Option<i64> {
    let y = digits(s, 4)?;
    let m = digits(s.get(5..)?, 2)?;
    let d = digits(s.get(8..)?, 2)?;
    if s[4] != b'-' || s[7] != b'-' || !(1..=12).contains(&m) {
        return None;
    }
    let y = i64::from(y);
    if d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// Exactly `YYYY-MM-DD` (a real date), as days since 1970-01-01; `None` for anything else.
pub fn parse_date(s: &[u8]) -> Option<i32> {
    if s.len() != 10 {
        return None;
    }
    i32::try_from(date_prefix(s)?).ok()
}

/// An ISO-8601 timestamp in one of SQLite's text forms (see the module docs), as microseconds
/// since 1970-01-01 00:00:00 UTC; `None` for anything else.
pub fn parse_timestamp(s: &[u8]) -> Option<i64> {
    let days = date_prefix(s)?;
    let mut rest = &s[10..];
    let mut micros = 0i64;
    if let [b' ' | b'T', time @ ..] = rest {
        let h = digits(time, 2)?;
        let min = digits(time.get(3..)?, 2)?;
        if time[2] != b':' || h > 23 || min > 59 {
            return None;
        }
        micros = (i64::from(h) * 60 + i64::from(min)) * 60_000_000;
        rest = &time[5..];
        if let [b':', sec @ ..] = rest {
            let secs = digits(sec, 2)?;
            if secs > 59 {
                return None;
            }
            micros += i64::from(secs) * 1_000_000;
            rest = &sec[2..];
            if let [b'.', frac @ ..] = rest {
                let n = frac.iter().take_while(|b| b.is_ascii_digit()).count();
                if n == 0 || frac[6.min(n)..n].iter().any(|&b| b != b'0') {
                    return None;
                }
                let kept = n.min(6);
                let value = i64::from(digits(frac, kept)?);
                micros += value * 10i64.pow((6 - kept) as u32);
                rest = &frac[n..];
            }
        }
        // SQLite allows spaces between the time and its zone.
        while let [b' ', zone @ ..] = rest {
            if zone.is_empty() {
                return None;
            }
            rest = zone;
        }
    }
    let offset_minutes = match rest {
        [] => 0,
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), tz @ ..] if tz.len() == 5 && tz[2] == b':' => {
            let h = digits(tz, 2)?;
            let m = digits(&tz[3..], 2)?;
            if h > 14 || m > 59 {
                return None;
            }
            let minutes = i64::from(h * 60 + m);
            if *sign == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    // A local time at +HH:MM is that much ahead of UTC.
    Some(days * DAY_MICROS + micros - offset_minutes * 60_000_000)
}

/// `days` since 1970-01-01 as `YYYY-MM-DD` (years outside 0..=9999 keep their sign and
/// digits).
pub fn date_text(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    if (0..=9999).contains(&y) {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!("{y}-{m:02}-{d:02}")
    }
}

/// Microseconds since 1970-01-01 as `YYYY-MM-DD HH:MM:SS`, with the fraction of a second
/// (`.5`, `.000001`) when there is one: the form SQLite's `datetime()` writes.
pub fn timestamp_text(micros: i64) -> String {
    let days = micros.div_euclid(DAY_MICROS);
    let of_day = micros.rem_euclid(DAY_MICROS);
    let secs = of_day / 1_000_000;
    let frac = of_day % 1_000_000;
    let mut s = format!(
        "{} {:02}:{:02}:{:02}",
        date_text(days),
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if frac != 0 {
        let f = format!("{frac:06}");
        s.push('.');
        s.push_str(f.trim_end_matches('0'));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_round_trip_over_four_centuries() {
        for days in -800_000..800_000 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1998, 12, 1), 10_561);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn dates_are_exactly_yyyy_mm_dd_and_real() {
        assert_eq!(parse_date(b"1970-01-01"), Some(0));
        assert_eq!(parse_date(b"2000-02-29"), Some(11_016));
        for bad in [
            &b"1900-02-29"[..],
            b"1998-13-01",
            b"1998-00-10",
            b"1998-04-31",
            b"1998-1-01",
            b"1998-01-01 ",
            b"1998/01/01",
            b"19980101",
            b"",
        ] {
            assert_eq!(parse_date(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(date_text(10_561), "1998-12-01");
    }

    #[test]
    fn timestamps_take_sqlites_forms_and_convert_offsets_to_utc() {
        let base = 10_561 * DAY_MICROS;
        assert_eq!(parse_timestamp(b"1998-12-01"), Some(base));
        assert_eq!(
            parse_timestamp(b"1998-12-01 10:20"),
            Some(base + 37_200_000_000)
        );
        assert_eq!(
            parse_timestamp(b"1998-12-01T10:20:30.5"),
            Some(base + 37_230_500_000)
        );
        assert_eq!(
            parse_timestamp(b"1998-12-01 10:20:30.123456000Z"),
            Some(base + 37_230_123_456)
        );
        assert_eq!(
            parse_timestamp(b"1998-12-01 10:20:30+02:00"),
            Some(base + 37_230_000_000 - 7_200_000_000)
        );
        for bad in [
            &b"1998-12-01 24:00"[..],
            b"1998-12-01 10:60",
            b"1998-12-01 10:20:30.1234567",
            b"1998-12-01 10:20:30.",
            b"1998-12-01 10",
            b"1998-12-01x",
            b"1998-12-01 10:20 ",
        ] {
            assert_eq!(
                parse_timestamp(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            parse_timestamp(b"1998-12-01 10:20 -01:30"),
            Some(base + 37_200_000_000 + 5_400_000_000)
        );
        assert_eq!(
            timestamp_text(base + 37_230_500_000),
            "1998-12-01 10:20:30.5"
        );
        assert_eq!(timestamp_text(-1), "1969-12-31 23:59:59.999999");
    }
}
