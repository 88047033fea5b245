//! `date`, `time`, `datetime`, `julianday` and `strftime` on the ISO-8601 text forms
//! (`YYYY-MM-DD`, with an optional `[ T]HH:MM[:SS[.SSS]]` and `Z` or `±HH:MM`), a bare
//! `HH:MM[:SS]`, and numbers (Julian day numbers), computed as SQLite's `date.c` does: through
//! an integer count of milliseconds since the Julian epoch. Modifiers: `±N days|hours|minutes|
//! seconds|months|years` and `start of day|month|year`; any other modifier, and `'now'` (which
//! would make the answer depend on the clock), is an error naming it.

use crate::value::{Value, ValueRef};

use super::ir::Function;

#[derive(Debug, Clone, Copy)]
struct DateTime {
    /// Milliseconds since noon of 4714-11-24 BCE (SQLite's `iJD`).
    jd: i64,
}

struct Ymd {
    y: i64,
    m: i64,
    d: i64,
    h: i64,
    min: i64,
    s: f64,
}

fn jd_of(y: i64, m: i64, d: i64, h: i64, min: i64, s: f64) -> i64 {
    let (mut y, mut m) = (y, m);
    if m <= 2 {
        y -= 1;
        m += 12;
    }
    // SQLite 3.54's computeJD.
    let a = (y + 4800) / 100;
    let b = 38 - a + a / 4;
    let x1 = 36525 * (y + 4716) / 100;
    let x2 = 306001 * (m + 1) / 10000;
    let day = ((x1 + x2 + d + b) as f64 - 1524.5) * 86_400_000.0;
    day as i64 + h * 3_600_000 + min * 60_000 + (s * 1000.0 + 0.5) as i64
}

impl DateTime {
    fn ymd(self) -> Ymd {
        // SQLite 3.54's computeYMD.
        let z = (self.jd + 43_200_000) / 86_400_000;
        let alpha = ((z as f64 + 32044.75) / 36524.25) as i64 - 52;
        let a = z + 1 + alpha - ((alpha + 100) / 4) + 25;
        let b = a + 1524;
        let c = ((b as f64 - 122.1) / 365.25) as i64;
        let d = (36525 * (c & 32767)) / 100;
        let e = ((b - d) as f64 / 30.6001) as i64;
        let x1 = (30.6001 * e as f64) as i64;
        let day = b - d - x1;
        let month = if e < 14 { e - 1 } else { e - 13 };
        let year = if month > 2 { c - 4716 } else { c - 4715 };
        let day_ms = (self.jd + 43_200_000) % 86_400_000;
        let s = (day_ms % 60_000) as f64 / 1000.0;
        let day_min = day_ms / 60_000;
        Ymd {
            y: year,
            m: month,
            d: day,
            h: day_min / 60,
            min: day_min % 60,
            s,
        }
    }
}

fn digits(s: &[u8], at: &mut usize, n: usize) -> Option<i64> {
    let part = s.get(*at..*at + n)?;
    if !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    *at += n;
    Some(part.iter().fold(0i64, |v, &b| v * 10 + i64::from(b - b'0')))
}

/// Parses `HH:MM[:SS[.SSS]]` at `at`; returns hours, minutes, seconds.
fn parse_time(s: &[u8], at: &mut usize) -> Option<(i64, i64, f64)> {
    let h = digits(s, at, 2)?;
    if s.get(*at) != Some(&b':') {
        return None;
    }
    *at += 1;
    let m = digits(s, at, 2)?;
    let mut sec = 0.0;
    if s.get(*at) == Some(&b':') {
        *at += 1;
        sec = digits(s, at, 2)? as f64;
        if s.get(*at) == Some(&b'.') && s.get(*at + 1).is_some_and(u8::is_ascii_digit) {
            *at += 1;
            let mut scale = 0.1;
            while let Some(&b) = s.get(*at).filter(|b| b.is_ascii_digit()) {
                sec += f64::from(b - b'0') * scale;
                scale /= 10.0;
                *at += 1;
            }
        }
    }
    (h < 24 && m < 60 && sec < 60.0).then_some((h, m, sec))
}

/// Parses a timezone suffix (`Z`, `±HH:MM`) and returns its offset in minutes.
fn parse_zone(s: &[u8], at: &mut usize) -> Option<i64> {
    while s.get(*at) == Some(&b' ') {
        *at += 1;
    }
    match s.get(*at) {
        None => Some(0),
        Some(b'Z' | b'z') => {
            *at += 1;
            Some(0)
        }
        Some(&c @ (b'+' | b'-')) => {
            *at += 1;
            let h = digits(s, at, 2)?;
            if s.get(*at) != Some(&b':') {
                return None;
            }
            *at += 1;
            let m = digits(s, at, 2)?;
            let off = h * 60 + m;
            Some(if c == b'-' { -off } else { off })
        }
        _ => None,
    }
}

fn parse(v: ValueRef<'_>) -> Result<Option<DateTime>, String> {
    match v {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(i) => Ok(julian(i as f64)),
        ValueRef::Real(r) => Ok(julian(r)),
        ValueRef::Text(t) | ValueRef::Blob(t) => {
            let s = trim_spaces(t);
            if s.eq_ignore_ascii_case(b"now") {
                return Err("date function argument 'now' depends on the clock".into());
            }
            if let Some(dt) = parse_text(s) {
                return Ok(Some(dt));
            }
            // Text that is wholly a number (sqlite3AtoF > 0) is a Julian day number.
            let (rc, r) = partitioner::numeric_text::atof(t);
            Ok(if rc > 0 { julian(r) } else { None })
        }
    }
}

fn trim_spaces(t: &[u8]) -> &[u8] {
    let start = t
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(t.len());
    let end = t
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |p| p + 1);
    &t[start..end]
}

fn julian(r: f64) -> Option<DateTime> {
    (r.is_finite() && (0.0..5373484.5).contains(&r)).then_some(DateTime {
        jd: (r * 86_400_000.0 + 0.5) as i64,
    })
}

fn parse_text(s: &[u8]) -> Option<DateTime> {
    let mut at = 0;
    let (y, m, d);
    if s.get(2) == Some(&b':') {
        let (h, min, sec) = parse_time(s, &mut at)?;
        let zone = parse_zone(s, &mut at)?;
        if at != s.len() {
            return None;
        }
        let jd = jd_of(2000, 1, 1, h, min, sec) - zone * 60_000;
        return Some(DateTime { jd });
    }
    // A leading '-' is a year before the common era (as date() prints them).
    let negative = s.first() == Some(&b'-');
    if negative {
        at += 1;
    }
    y = digits(s, &mut at, 4)? * if negative { -1 } else { 1 };
    if s.get(at) != Some(&b'-') {
        return None;
    }
    at += 1;
    m = digits(s, &mut at, 2)?;
    if s.get(at) != Some(&b'-') {
        return None;
    }
    at += 1;
    d = digits(s, &mut at, 2)?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let (mut h, mut min, mut sec, mut zone) = (0, 0, 0.0, 0);
    if at < s.len() {
        if s[at] == b'T' || s[at] == b' ' {
            while s.get(at) == Some(&b' ') {
                at += 1;
            }
            if s.get(at) == Some(&b'T') {
                at += 1;
            }
            (h, min, sec) = parse_time(s, &mut at)?;
            zone = parse_zone(s, &mut at)?;
        } else {
            return None;
        }
    }
    if at != s.len() {
        return None;
    }
    Some(DateTime {
        jd: jd_of(y, m, d, h, min, sec) - zone * 60_000,
    })
}

fn modify(dt: DateTime, modifier: &[u8]) -> Result<Option<DateTime>, String> {
    let text = String::from_utf8_lossy(trim_spaces(modifier)).to_ascii_lowercase();
    let unsupported = || Err(format!("date modifier {text:?} is not supported"));
    if let Some(what) = text.strip_prefix("start of ") {
        let mut p = dt.ymd();
        match what.trim() {
            "day" => {}
            "month" => p.d = 1,
            "year" => {
                p.m = 1;
                p.d = 1;
            }
            _ => return Ok(None),
        }
        return Ok(Some(DateTime {
            jd: jd_of(p.y, p.m, p.d, 0, 0, 0.0),
        }));
    }
    let mut parts = text.split_whitespace();
    let (Some(n), Some(unit), None) = (parts.next(), parts.next(), parts.next()) else {
        return unsupported();
    };
    let Ok(n) = n.parse::<f64>() else {
        return unsupported();
    };
    let unit = unit.strip_suffix('s').unwrap_or(unit);
    let ms = |per: f64| {
        Ok(Some(DateTime {
            jd: dt.jd + (n * per + if n < 0.0 { -0.5 } else { 0.5 }) as i64,
        }))
    };
    match unit {
        "day" => ms(86_400_000.0),
        "hour" => ms(3_600_000.0),
        "minute" => ms(60_000.0),
        "second" => ms(1000.0),
        "month" | "year" if n.fract() == 0.0 => {
            let mut p = dt.ymd();
            let months = if unit == "year" {
                n as i64 * 12
            } else {
                n as i64
            };
            let total = p.m - 1 + months;
            p.y += total.div_euclid(12);
            p.m = total.rem_euclid(12) + 1;
            let day_ms = (dt.jd + 43_200_000) % 86_400_000;
            let base = jd_of(p.y, p.m, p.d, 0, 0, 0.0);
            Ok(Some(DateTime { jd: base + day_ms }))
        }
        _ => unsupported(),
    }
}

/// Calls date function `f` on its arguments: `None` (NULL) for a value that is not a date,
/// an error for a modifier or input this port does not handle.
pub fn try_call(f: Function, a: &[ValueRef<'_>]) -> Result<Option<Value>, String> {
    let (format, rest) = if f == Function::Strftime {
        let Some(fmt) = a.first().and_then(|v| v.to_text()) else {
            return Ok(None);
        };
        (Some(fmt.into_owned()), a.get(1..).unwrap_or(&[]))
    } else {
        (None, a)
    };
    let Some(first) = rest.first() else {
        return Err("date functions without a time value read the clock".into());
    };
    let Some(mut dt) = parse(*first)? else {
        return Ok(None);
    };
    for m in &rest[1..] {
        let Some(t) = m.to_text() else {
            return Ok(None);
        };
        match modify(dt, &t)? {
            Some(d) => dt = d,
            None => return Ok(None),
        }
    }
    // SQLite's valid range: 4714-11-24 BCE 12:00 through 9999-12-31 23:59:59.999.
    if !(0..=464_269_060_799_999).contains(&dt.jd) {
        return Ok(None);
    }
    let p = dt.ymd();
    let date = format!("{:04}-{:02}-{:02}", p.y, p.m, p.d);
    let time = format!("{:02}:{:02}:{:02}", p.h, p.min, p.s as i64);
    Ok(Some(match f {
        Function::Date => Value::text(date),
        Function::Time => Value::text(time),
        Function::DateTime => Value::text(format!("{date} {time}")),
        Function::JulianDay => Value::real(dt.jd as f64 / 86_400_000.0),
        _ => {
            let fmt = format.unwrap_or_default();
            let mut out = String::new();
            let mut it = fmt.iter();
            while let Some(&c) = it.next() {
                if c != b'%' {
                    out.push(char::from(c));
                    continue;
                }
                match it.next() {
                    Some(b'd') => out.push_str(&format!("{:02}", p.d)),
                    Some(b'f') => out.push_str(&format!("{:06.3}", p.s)),
                    Some(b'H') => out.push_str(&format!("{:02}", p.h)),
                    Some(b'm') => out.push_str(&format!("{:02}", p.m)),
                    Some(b'M') => out.push_str(&format!("{:02}", p.min)),
                    Some(b'S') => out.push_str(&format!("{:02}", p.s as i64)),
                    Some(b'Y') => out.push_str(&format!("{:04}", p.y)),
                    Some(b's') => out.push_str(&format!(
                        "{}",
                        (dt.jd - 210_866_760_000_000).div_euclid(1000)
                    )),
                    Some(b'J') => {
                        out.push_str(&crate::value::real_to_text(dt.jd as f64 / 86_400_000.0))
                    }
                    Some(b'j') => {
                        let jan1 = jd_of(p.y, 1, 1, 0, 0, 0.0);
                        let day0 = jd_of(p.y, p.m, p.d, 0, 0, 0.0);
                        out.push_str(&format!("{:03}", (day0 - jan1) / 86_400_000 + 1));
                    }
                    Some(b'w') => {
                        let w = ((dt.jd + 129_600_000) / 86_400_000) % 7;
                        out.push_str(&w.to_string());
                    }
                    Some(b'%') => out.push('%'),
                    _ => return Ok(None),
                }
            }
            Value::text(out)
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(args: &[&str]) -> Value {
        let v: Vec<ValueRef<'_>> = args.iter().map(|s| ValueRef::Text(s.as_bytes())).collect();
        try_call(Function::Date, &v).unwrap().unwrap_or(Value::Null)
    }

    #[test]
    fn iso_dates_and_modifiers() {
        assert_eq!(date(&["1994-01-01"]), Value::text("1994-01-01"));
        assert_eq!(date(&["1994-01-01", "+1 year"]), Value::text("1995-01-01"));
        assert_eq!(date(&["1994-01-31", "+1 month"]), Value::text("1994-03-03"));
        assert_eq!(
            date(&["1994-03-15 10:00:00", "start of month"]),
            Value::text("1994-03-01")
        );
        assert_eq!(date(&["1994-12-31", "+1 day"]), Value::text("1995-01-01"));
        assert_eq!(date(&["garbage"]), Value::Null);
    }
}
