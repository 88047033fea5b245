//! `date`, `time`, `datetime`, `julianday`, `unixepoch`, `strftime` and `timediff`: a port of
//! SQLite 3.54's `date.c`, with its `DateTime` (an integer count of milliseconds since the
//! Julian epoch, and the broken-down fields, each with its validity flag) and the same order of
//! computations, so that every rounding is SQLite's.
//!
//! Time values: `YYYY-MM-DD` with an optional `[ T]HH:MM[:SS[.SSS]]` and `[ ]Z` or `±HH:MM`, a
//! bare `HH:MM[:SS[.SSS]]`, a number (a Julian day number, or with `unixepoch` / `auto` a Unix
//! time), `'now'` and `'subsec'`, and no argument at all (`'now'`). Modifiers: `±N days |
//! hours | minutes | seconds | months | years`, `±HH:MM[:SS[.SSS]]`, `±YYYY-MM-DD[ HH:MM[:SS]]`,
//! `ceiling`, `floor`, `start of day | month | year`, `end of day | month | year`, `weekday
//! N`, `unixepoch`, `julianday`, `auto`, `localtime`, `utc`, `subsec` / `subsecond`.
//! `strftime` knows every conversion SQLite does (`%d %e %f %F %G %g %H %I %j %J %k %l %m %M %p
//! %P %R %s %S %T %u %U %V %w %W %Y %%`).
//!
//! `'now'` is the statement's time, as SQLite's `sqlite3StmtCurrentTime`: read once when the
//! query starts ([`statement_time`]) and given to every thread that evaluates the query
//! ([`set_statement_time`]), so that every row, every executor and the coordinator see the
//! same instant. `localtime` and `utc` use the C library's `localtime_r` (the `TZ` of the
//! process), as SQLite does.

use std::cell::Cell;

use crate::value::{Value, ValueRef};

use super::ir::Function;

thread_local! {
    /// The running statement's time (milliseconds since the Julian epoch), if set.
    static STATEMENT_TIME: Cell<Option<i64>> = const { Cell::new(None) };
}

/// The current time as SQLite's clock gives it: milliseconds since the Julian epoch
/// (`unixCurrentTimeInt64`). Read it once per statement.
pub fn statement_time() -> i64 {
    const UNIX_EPOCH_JD_MS: i64 = 24_405_875 * 8_640_000;
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    UNIX_EPOCH_JD_MS + since.as_millis() as i64
}

/// Makes `jd_ms` (from [`statement_time`]) the time `'now'` reads on this thread, until set
/// again. A thread where it was never set reads the clock at each call.
pub fn set_statement_time(jd_ms: i64) {
    STATEMENT_TIME.with(|t| t.set(Some(jd_ms)));
}

/// The time [`set_statement_time`] set on this thread (`None` where it was never set): what
/// a thread working for the statement sets on its own.
pub fn this_thread_statement_time() -> Option<i64> {
    STATEMENT_TIME.with(Cell::get)
}

fn current_time() -> i64 {
    STATEMENT_TIME
        .with(Cell::get)
        .unwrap_or_else(statement_time)
}

/// SQLite's `DateTime`.
#[derive(Debug, Clone, Copy, Default)]
struct DateTime {
    /// The Julian day number times 86,400,000.
    ijd: i64,
    y: i64,
    mo: i64,
    d: i64,
    h: i64,
    mi: i64,
    /// Timezone offset in minutes.
    tz: i64,
    s: f64,
    valid_jd: bool,
    valid_ymd: bool,
    valid_hms: bool,
    /// Days to take off for `floor`.
    n_floor: i64,
    /// A raw number is in `s`.
    raw_s: bool,
    is_error: bool,
    use_subsec: bool,
    is_utc: bool,
    is_local: bool,
}

/// The byte at `i`, or 0 past the end (the C code reads NUL-terminated strings).
fn at(z: &[u8], i: usize) -> u8 {
    z.get(i).copied().unwrap_or(0)
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `getDigits`: fields of `(digits, min, max, next char)`; returns the values parsed, up to
/// the first that fails.
fn get_digits(z: &[u8], spec: &[(usize, i64, i64, u8)]) -> Vec<i64> {
    let mut out = Vec::with_capacity(spec.len());
    let mut i = 0;
    for &(n, min, max, next) in spec {
        let mut val = 0i64;
        for _ in 0..n {
            let c = at(z, i);
            if !c.is_ascii_digit() {
                return out;
            }
            val = val * 10 + i64::from(c - b'0');
            i += 1;
        }
        if val < min || val > max || (next != 0 && next != at(z, i)) {
            return out;
        }
        out.push(val);
        i += 1;
    }
    out
}

/// Returns true on error, as the C code does.
fn parse_timezone(z: &[u8], p: &mut DateTime) -> bool {
    let mut i = 0;
    while is_space(at(z, i)) {
        i += 1;
    }
    p.tz = 0;
    let c = at(z, i);
    let sgn = match c {
        b'-' => -1,
        b'+' => 1,
        b'Z' | b'z' => {
            i += 1;
            p.is_local = false;
            p.is_utc = true;
            0
        }
        _ => return c != 0,
    };
    if sgn != 0 {
        i += 1;
        let v = get_digits(&z[i.min(z.len())..], &[(2, 0, 14, b':'), (2, 0, 59, 0)]);
        if v.len() != 2 {
            return true;
        }
        i += 5;
        p.tz = sgn * (v[1] + v[0] * 60);
        if p.tz == 0 {
            p.is_local = false;
            p.is_utc = true;
        }
    }
    while is_space(at(z, i)) {
        i += 1;
    }
    at(z, i) != 0
}

fn parse_hh_mm_ss(z: &[u8], p: &mut DateTime) -> bool {
    let v = get_digits(z, &[(2, 0, 24, b':'), (2, 0, 59, 0)]);
    if v.len() != 2 {
        return true;
    }
    let (h, m) = (v[0], v[1]);
    let mut i = 5;
    let mut s = 0i64;
    let mut ms = 0.0f64;
    if at(z, i) == b':' {
        i += 1;
        let v = get_digits(&z[i.min(z.len())..], &[(2, 0, 59, 0)]);
        if v.len() != 1 {
            return true;
        }
        s = v[0];
        i += 2;
        if at(z, i) == b'.' && at(z, i + 1).is_ascii_digit() {
            let mut scale = 1.0;
            i += 1;
            while at(z, i).is_ascii_digit() {
                ms = ms * 10.0 + f64::from(at(z, i) - b'0');
                scale *= 10.0;
                i += 1;
            }
            ms /= scale;
            // Truncate to avoid problems with sub-milliseconds rounding.
            if ms > 0.999 {
                ms = 0.999;
            }
        }
    }
    if h == 24 && (m != 0 || s != 0 || ms != 0.0) {
        return true;
    }
    p.valid_jd = false;
    p.raw_s = false;
    p.valid_hms = true;
    p.h = h;
    p.mi = m;
    p.s = s as f64 + ms;
    parse_timezone(&z[i.min(z.len())..], p)
}

fn datetime_error(p: &mut DateTime) {
    *p = DateTime {
        is_error: true,
        ..DateTime::default()
    };
}

fn compute_jd(p: &mut DateTime) {
    if p.valid_jd {
        return;
    }
    let (mut y, mut m, d);
    if p.valid_ymd {
        (y, m, d) = (p.y, p.mo, p.d);
    } else {
        (y, m) = (2000, 1);
        d = if p.valid_hms && p.h == 24 {
            p.h = 0;
            2
        } else {
            1
        };
    }
    if !(-4713..=9999).contains(&y) || p.raw_s {
        datetime_error(p);
        return;
    }
    if m <= 2 {
        y -= 1;
        m += 12;
    }
    let a = (y + 4800) / 100;
    let b = 38 - a + a / 4;
    let x1 = 36525 * (y + 4716) / 100;
    let x2 = 306_001 * (m + 1) / 10000;
    p.ijd = (((x1 + x2 + d + b) as f64 - 1524.5) * 86_400_000.0) as i64;
    p.valid_jd = true;
    if p.valid_hms {
        p.ijd += p.h * 3_600_000 + p.mi * 60_000 + (p.s * 1000.0 + 0.5) as i64;
        if p.tz != 0 {
            p.ijd -= p.tz * 60_000;
            p.valid_ymd = false;
            p.valid_hms = false;
            p.tz = 0;
            p.is_utc = true;
            p.is_local = false;
        }
    }
}

fn days_of_month(y: i64, m: i64) -> i64 {
    if (1i64 << m) & 0x15aa != 0 {
        31
    } else if m != 2 {
        30
    } else if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) {
        29
    } else {
        28
    }
}

fn compute_floor(p: &mut DateTime) {
    let mx = days_of_month(p.y, p.mo.clamp(0, 12));
    p.n_floor = if p.d > mx { p.d - mx } else { 0 };
}

fn parse_yyyy_mm_dd(z: &[u8], p: &mut DateTime) -> bool {
    let (neg, z) = match z.first() {
        Some(b'-') => (true, &z[1..]),
        _ => (false, z),
    };
    let v = get_digits(z, &[(4, 0, 14712, b'-'), (2, 1, 12, b'-'), (2, 1, 31, 0)]);
    if v.len() != 3 {
        return true;
    }
    let (mut y, mut m, mut d) = (v[0], v[1], v[2]);
    let mut i = 10;
    while is_space(at(z, i)) || at(z, i) == b'T' {
        i += 1;
    }
    let rest = &z[i.min(z.len())..];
    if !parse_hh_mm_ss(rest, p) {
        if p.h == 24 {
            let mx = days_of_month(y, m);
            p.h = 0;
            d += 1;
            if d > mx {
                d -= mx;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    } else if rest.is_empty() {
        p.valid_hms = false;
    } else {
        return true;
    }
    p.valid_jd = false;
    p.valid_ymd = true;
    p.y = if neg { -y } else { y };
    p.mo = m;
    p.d = d;
    compute_floor(p);
    if p.tz != 0 {
        compute_jd(p);
    }
    false
}

fn clear_ymd_hms_tz(p: &mut DateTime) {
    p.valid_ymd = false;
    p.valid_hms = false;
    p.tz = 0;
}

fn set_to_current(p: &mut DateTime) -> bool {
    p.ijd = current_time();
    if p.ijd > 0 {
        p.valid_jd = true;
        p.is_utc = true;
        p.is_local = false;
        clear_ymd_hms_tz(p);
        false
    } else {
        true
    }
}

fn set_raw_number(p: &mut DateTime, r: f64) {
    p.s = r;
    p.raw_s = true;
    if (0.0..5_373_484.5).contains(&r) {
        p.ijd = (r * 86_400_000.0 + 0.5) as i64;
        p.valid_jd = true;
    }
}

fn atof(z: &[u8]) -> (i32, f64) {
    partitioner::numeric_text::atof(z)
}

fn parse_date_or_time(z: &[u8], p: &mut DateTime) -> bool {
    if !parse_yyyy_mm_dd(z, p) || !parse_hh_mm_ss(z, p) {
        return false;
    }
    if z.eq_ignore_ascii_case(b"now") {
        return set_to_current(p);
    }
    let (rc, r) = atof(z);
    if rc > 0 {
        set_raw_number(p, r);
        return false;
    }
    if z.eq_ignore_ascii_case(b"subsec") || z.eq_ignore_ascii_case(b"subsecond") {
        p.use_subsec = true;
        return set_to_current(p);
    }
    true
}

/// The Julian day number of 9999-12-31 23:59:59.999, in milliseconds.
const MAX_JD: i64 = 464_269_060_799_999;

fn valid_julian_day(ijd: i64) -> bool {
    (0..=MAX_JD).contains(&ijd)
}

fn compute_ymd(p: &mut DateTime) {
    if p.valid_ymd {
        return;
    }
    if !p.valid_jd {
        (p.y, p.mo, p.d) = (2000, 1, 1);
    } else if !valid_julian_day(p.ijd) {
        datetime_error(p);
        return;
    } else {
        let z = (p.ijd + 43_200_000) / 86_400_000;
        let alpha = ((z as f64 + 32044.75) / 36524.25) as i64 - 52;
        let a = z + 1 + alpha - ((alpha + 100) / 4) + 25;
        let b = a + 1524;
        let c = ((b as f64 - 122.1) / 365.25) as i64;
        let d = (36525 * (c & 32767)) / 100;
        let e = ((b - d) as f64 / 30.6001) as i64;
        let x1 = (30.6001 * e as f64) as i64;
        p.d = b - d - x1;
        p.mo = if e < 14 { e - 1 } else { e - 13 };
        p.y = if p.mo > 2 { c - 4716 } else { c - 4715 };
    }
    p.valid_ymd = true;
}

fn compute_hms(p: &mut DateTime) {
    if p.valid_hms {
        return;
    }
    compute_jd(p);
    let day_ms = (p.ijd + 43_200_000) % 86_400_000;
    p.s = (day_ms % 60_000) as f64 / 1000.0;
    let day_min = day_ms / 60_000;
    p.mi = day_min % 60;
    p.h = day_min / 60;
    p.raw_s = false;
    p.valid_hms = true;
}

fn compute_ymd_hms(p: &mut DateTime) {
    compute_ymd(p);
    compute_hms(p);
}

/// `toLocaltime`: moves a UTC time to local time. Returns true on error.
fn to_localtime(p: &mut DateTime) -> bool {
    compute_jd(p);
    let (t, year_diff) = if p.ijd < 2_108_667_600 * 100_000 || p.ijd > 2_130_141_456 * 100_000 {
        // localtime_r works for 1970..2037: map the year into that range and back.
        let mut x = *p;
        compute_ymd_hms(&mut x);
        let diff = (2000 + x.y % 4) - x.y;
        x.y += diff;
        x.valid_jd = false;
        compute_jd(&mut x);
        (x.ijd / 1000 - 21_086_676 * 10_000, diff)
    } else {
        (p.ijd / 1000 - 21_086_676 * 10_000, 0)
    };
    let Some(tm) = local_tm(t) else {
        return true;
    };
    p.y = i64::from(tm.tm_year) + 1900 - year_diff;
    p.mo = i64::from(tm.tm_mon) + 1;
    p.d = i64::from(tm.tm_mday);
    p.h = i64::from(tm.tm_hour);
    p.mi = i64::from(tm.tm_min);
    p.s = f64::from(tm.tm_sec) + (p.ijd % 1000) as f64 * 0.001;
    p.valid_ymd = true;
    p.valid_hms = true;
    p.valid_jd = false;
    p.raw_s = false;
    p.tz = 0;
    p.is_error = false;
    false
}

fn local_tm(t: i64) -> Option<libc::tm> {
    let t = libc::time_t::try_from(t).ok()?;
    // SAFETY: localtime_r reads `t` and writes only into `tm`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    ok.then_some(tm)
}

fn auto_adjust(p: &mut DateTime) {
    if !p.raw_s || p.valid_jd {
        p.raw_s = false;
    } else if p.s >= -21_086_676.0 * 10_000.0 && p.s <= 25_340_230.0 * 10_000.0 + 799.0 {
        let r = p.s * 1000.0 + 210_866_760_000_000.0;
        clear_ymd_hms_tz(p);
        p.ijd = (r + 0.5) as i64;
        p.valid_jd = true;
        p.raw_s = false;
    }
}

/// `sqlite3RealSameAsInt`.
fn real_same_as_int(r: f64, i: i64) -> bool {
    r == 0.0 || (r.to_bits() == (i as f64).to_bits() && (-(1i64 << 51)..(1i64 << 51)).contains(&i))
}

/// The `NNN unit` transforms: name, limit on NNN (as SQLite's `float`), seconds per unit.
const XFORMS: [(&str, f32, f64); 6] = [
    ("second", 4.6427e14, 1.0),
    ("minute", 7.7379e12, 60.0),
    ("hour", 1.2897e11, 3600.0),
    ("day", 5_373_485.0, 86400.0),
    ("month", 176_546.0, 2_592_000.0),
    ("year", 14713.0, 31_536_000.0),
];

/// `parseModifier`: applies modifier `z` (argument `idx`, 1-based) to `p`. Returns true on
/// error (the result is then NULL).
fn parse_modifier(z: &[u8], p: &mut DateTime, idx: usize) -> bool {
    let lower = z.to_ascii_lowercase();
    let is = |w: &str| lower == w.as_bytes();
    match lower.first().copied().unwrap_or(0) {
        b'a' => {
            if is("auto") {
                if idx > 1 {
                    return true;
                }
                auto_adjust(p);
                return false;
            }
            true
        }
        b'c' => {
            if is("ceiling") {
                compute_jd(p);
                clear_ymd_hms_tz(p);
                p.n_floor = 0;
                return false;
            }
            true
        }
        b'e' => {
            let Some(what) = lower.strip_prefix(b"end of ") else {
                return true;
            };
            if !p.valid_jd && !p.valid_ymd && !p.valid_hms {
                return true;
            }
            compute_ymd(p);
            p.valid_hms = true;
            p.h = 23;
            p.mi = 59;
            p.s = 59.999;
            p.raw_s = false;
            p.tz = 0;
            p.valid_jd = false;
            match what {
                b"month" => {
                    p.d = 1;
                    p.mo += 1;
                    if p.mo > 12 {
                        p.y += 1;
                        p.mo = 1;
                    }
                    compute_floor(p);
                    compute_jd(p);
                    p.ijd -= (p.n_floor + 1) * 86_400_000;
                    clear_ymd_hms_tz(p);
                    false
                }
                b"year" => {
                    p.mo = 12;
                    p.d = 31;
                    false
                }
                b"day" => false,
                _ => true,
            }
        }
        b'f' => {
            if is("floor") {
                compute_jd(p);
                p.ijd -= p.n_floor * 86_400_000;
                clear_ymd_hms_tz(p);
                return false;
            }
            true
        }
        b'j' => {
            if is("julianday") {
                if idx > 1 {
                    return true;
                }
                if p.valid_jd && p.raw_s {
                    p.raw_s = false;
                    return false;
                }
            }
            true
        }
        b'l' => {
            if is("localtime") {
                let failed = if p.is_local { false } else { to_localtime(p) };
                p.is_utc = false;
                p.is_local = true;
                return failed;
            }
            true
        }
        b'u' => {
            if is("unixepoch") && p.raw_s {
                if idx > 1 {
                    return true;
                }
                let r = p.s * 1000.0 + 210_866_760_000_000.0;
                if (0.0..464_269_060_800_000.0).contains(&r) {
                    clear_ymd_hms_tz(p);
                    p.ijd = (r + 0.5) as i64;
                    p.valid_jd = true;
                    p.raw_s = false;
                    return false;
                }
                return true;
            }
            if is("utc") {
                if !p.is_utc {
                    compute_jd(p);
                    let orig = p.ijd;
                    let (mut guess, mut err, mut cnt) = (orig, 0i64, 0);
                    loop {
                        guess -= err;
                        let mut new = DateTime {
                            ijd: guess,
                            valid_jd: true,
                            ..DateTime::default()
                        };
                        if to_localtime(&mut new) {
                            return true;
                        }
                        compute_jd(&mut new);
                        err = new.ijd - orig;
                        let again = err != 0 && cnt < 3;
                        cnt += 1;
                        if !again {
                            break;
                        }
                    }
                    *p = DateTime {
                        ijd: guess,
                        valid_jd: true,
                        is_utc: true,
                        ..DateTime::default()
                    };
                }
                return false;
            }
            true
        }
        b'w' => {
            let Some(rest) = lower.strip_prefix(b"weekday ") else {
                return true;
            };
            let (rc, r) = atof(rest);
            let n = r as i64;
            if !(rc > 0 && (-6.0..=6.0).contains(&r) && real_same_as_int(r, n)) {
                return true;
            }
            compute_ymd_hms(p);
            p.tz = 0;
            p.valid_jd = false;
            compute_jd(p);
            let mut zd = ((p.ijd + 129_600_000) / 86_400_000) % 7;
            let n = n.abs();
            if zd != n {
                if zd > n {
                    zd -= 7;
                }
                p.ijd += (n - zd) * 86_400_000;
                if rest.contains(&b'-') {
                    p.ijd -= 7 * 86_400_000;
                }
            }
            clear_ymd_hms_tz(p);
            false
        }
        b's' => {
            let Some(what) = lower.strip_prefix(b"start of ") else {
                if is("subsec") || is("subsecond") {
                    p.use_subsec = true;
                    return false;
                }
                return true;
            };
            if !p.valid_jd && !p.valid_ymd && !p.valid_hms {
                return true;
            }
            compute_ymd(p);
            p.valid_hms = true;
            p.h = 0;
            p.mi = 0;
            p.s = 0.0;
            p.raw_s = false;
            p.tz = 0;
            p.valid_jd = false;
            match what {
                b"month" => {
                    p.d = 1;
                    false
                }
                b"year" => {
                    p.mo = 1;
                    p.d = 1;
                    false
                }
                b"day" => false,
                _ => true,
            }
        }
        b'+' | b'-' | b'0'..=b'9' => numeric_modifier(z, p),
        _ => true,
    }
}

/// The modifiers that start with a sign or a digit: `NNN unit`, `±HH:MM[:SS[.SSS]]`,
/// `±YYYY-MM-DD[ HH:MM[:SS[.SSS]]]`.
fn numeric_modifier(z: &[u8], p: &mut DateTime) -> bool {
    let z0 = z[0];
    let mut n = 1;
    while at(z, n) != 0 {
        let c = at(z, n);
        if c == b':' || is_space(c) {
            break;
        }
        if c == b'-' {
            if n == 5 && get_digits(&z[1..], &[(4, 0, 14712, 0)]).len() == 1 {
                break;
            }
            if n == 6 && get_digits(&z[1..], &[(5, 0, 14712, 0)]).len() == 1 {
                break;
            }
        }
        n += 1;
    }
    let (rc, r) = atof(&z[..n.min(z.len())]);
    if rc <= 0 {
        return true;
    }
    let mut z2: &[u8] = z;
    let mut z = z;
    if at(z, n) == b'-' {
        // ±YYYY-MM-DD: years, months and days to add or subtract.
        if z0 != b'+' && z0 != b'-' {
            return true;
        }
        let v = if n == 5 {
            get_digits(
                &z[1..],
                &[(4, 0, 14712, b'-'), (2, 0, 12, b'-'), (2, 0, 31, 0)],
            )
        } else {
            let v = get_digits(
                &z[1..],
                &[(5, 0, 14712, b'-'), (2, 0, 12, b'-'), (2, 0, 31, 0)],
            );
            z = &z[1..];
            v
        };
        if v.len() != 3 {
            return true;
        }
        let (y, m, mut d) = (v[0], v[1], v[2]);
        if m >= 12 || d >= 31 {
            return true;
        }
        compute_ymd_hms(p);
        p.valid_jd = false;
        if z0 == b'-' {
            p.y -= y;
            p.mo -= m;
            d = -d;
        } else {
            p.y += y;
            p.mo += m;
        }
        let x = if p.mo > 0 {
            (p.mo - 1) / 12
        } else {
            (p.mo - 12) / 12
        };
        p.y += x;
        p.mo -= x * 12;
        compute_floor(p);
        compute_jd(p);
        p.valid_hms = false;
        p.valid_ymd = false;
        p.ijd += d * 86_400_000;
        if at(z, 11) == 0 {
            return false;
        }
        if is_space(at(z, 11))
            && get_digits(
                z.get(12..).unwrap_or(&[]),
                &[(2, 0, 24, b':'), (2, 0, 59, 0)],
            )
            .len()
                == 2
        {
            z2 = &z[12..];
            n = 2;
        } else {
            return true;
        }
    }
    if at(z2, n) == b':' {
        // ±HH:MM[:SS[.SSS]]: a time of day to add or subtract.
        if !at(z2, 0).is_ascii_digit() {
            z2 = &z2[1..];
        }
        let mut tx = DateTime::default();
        if parse_hh_mm_ss(z2, &mut tx) {
            return true;
        }
        compute_jd(&mut tx);
        tx.ijd -= 43_200_000;
        let day = tx.ijd / 86_400_000;
        tx.ijd -= day * 86_400_000;
        if z0 == b'-' {
            tx.ijd = -tx.ijd;
        }
        compute_jd(p);
        clear_ymd_hms_tz(p);
        p.ijd += tx.ijd;
        return false;
    }
    // NNN unit.
    let mut rest = &z[n.min(z.len())..];
    while rest.first().copied().is_some_and(is_space) {
        rest = &rest[1..];
    }
    let mut len = rest.len();
    if !(3..=10).contains(&len) {
        return true;
    }
    if rest[len - 1].eq_ignore_ascii_case(&b's') {
        len -= 1;
    }
    let unit = &rest[..len];
    compute_jd(p);
    let rounder = if r < 0.0 { -0.5 } else { 0.5 };
    p.n_floor = 0;
    let mut failed = true;
    let mut r = r;
    for (i, &(name, limit, xform)) in XFORMS.iter().enumerate() {
        let limit = f64::from(limit);
        if name.len() == len
            && unit.eq_ignore_ascii_case(name.as_bytes())
            && r > -limit
            && r < limit
        {
            match i {
                4 => {
                    compute_ymd_hms(p);
                    p.mo += r as i64;
                    let x = if p.mo > 0 {
                        (p.mo - 1) / 12
                    } else {
                        (p.mo - 12) / 12
                    };
                    p.y += x;
                    p.mo -= x * 12;
                    compute_floor(p);
                    p.valid_jd = false;
                    r -= (r as i64) as f64;
                }
                5 => {
                    compute_ymd_hms(p);
                    p.y += r as i64;
                    compute_floor(p);
                    p.valid_jd = false;
                    r -= (r as i64) as f64;
                }
                _ => {}
            }
            compute_jd(p);
            p.ijd += (r * 1000.0 * xform + rounder) as i64;
            failed = false;
            break;
        }
    }
    clear_ymd_hms_tz(p);
    failed
}

/// `isDate`: the time value and modifiers `a` as a `DateTime`, or `None` (NULL).
fn is_date(a: &[ValueRef<'_>]) -> Option<DateTime> {
    let mut p = DateTime::default();
    match a.first() {
        None => {
            if set_to_current(&mut p) {
                return None;
            }
        }
        Some(ValueRef::Integer(i)) => set_raw_number(&mut p, *i as f64),
        Some(ValueRef::Real(r)) => set_raw_number(&mut p, *r),
        Some(v) => {
            let z = c_text(*v)?;
            if parse_date_or_time(&z, &mut p) {
                return None;
            }
        }
    }
    for (i, m) in a.iter().enumerate().skip(1) {
        let z = c_text(*m)?;
        if parse_modifier(&z, &mut p, i) {
            return None;
        }
    }
    compute_jd(&mut p);
    if p.is_error || !valid_julian_day(p.ijd) {
        return None;
    }
    if a.len() == 1 && p.valid_ymd && p.d > 28 {
        // Make sure a YYYY-MM-DD is normalized (2023-02-31 is 2023-03-03).
        p.valid_ymd = false;
    }
    Some(p)
}

/// A value's text as the C functions see it (`sqlite3_value_text`: up to a NUL byte).
fn c_text(v: ValueRef<'_>) -> Option<Vec<u8>> {
    let t = v.to_text()?;
    let end = t.iter().position(|&b| b == 0).unwrap_or(t.len());
    Some(t[..end].to_vec())
}

fn year_text(y: i64) -> String {
    if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("{y:04}")
    }
}

fn seconds_text(p: &DateTime) -> String {
    if p.use_subsec {
        let s = (1000.0 * p.s + 0.5) as i64;
        format!("{:02}.{:03}", s / 1000 % 100, s % 1000)
    } else {
        format!("{:02}", p.s as i64)
    }
}

fn days_after_jan01(p: &DateTime) -> i64 {
    let mut jan01 = *p;
    jan01.valid_jd = false;
    jan01.mo = 1;
    jan01.d = 1;
    compute_jd(&mut jan01);
    (p.ijd - jan01.ijd + 43_200_000) / 86_400_000
}

fn days_after_monday(p: &DateTime) -> i64 {
    ((p.ijd + 43_200_000) / 86_400_000) % 7
}

fn days_after_sunday(p: &DateTime) -> i64 {
    ((p.ijd + 129_600_000) / 86_400_000) % 7
}

/// The Thursday of `p`'s ISO week.
fn iso_thursday(p: &DateTime) -> DateTime {
    let mut y = *p;
    y.ijd += (3 - days_after_monday(p)) * 86_400_000;
    y.valid_ymd = false;
    compute_ymd(&mut y);
    y
}

/// C's `%.16g`.
fn g16(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let sci = format!("{v:.15e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if !(-4..16).contains(&exp) {
        let m = mantissa.trim_end_matches('0').trim_end_matches('.');
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    let decimals = (15 - exp).max(0) as usize;
    let fixed = format!("{v:.decimals$}");
    if fixed.contains('.') {
        fixed
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        fixed
    }
}

fn strftime(fmt: &[u8], mut x: DateTime) -> Option<Value> {
    compute_jd(&mut x);
    compute_ymd_hms(&mut x);
    let mut out: Vec<u8> = Vec::with_capacity(fmt.len() + 8);
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        if c != b'%' {
            out.push(c);
            continue;
        }
        let cf = at(fmt, i);
        i += 1;
        let piece = match cf {
            b'd' => format!("{:02}", x.d),
            b'e' => format!("{:2}", x.d),
            b'f' => format!("{:06.3}", x.s.min(59.999)),
            b'F' => format!("{:04}-{:02}-{:02}", x.y, x.mo, x.d),
            b'G' => format!("{:04}", iso_thursday(&x).y),
            b'g' => format!("{:02}", iso_thursday(&x).y % 100),
            b'H' => format!("{:02}", x.h),
            b'k' => format!("{:2}", x.h),
            b'I' | b'l' => {
                let h = match x.h {
                    0 => 12,
                    h if h > 12 => h - 12,
                    h => h,
                };
                if cf == b'I' {
                    format!("{h:02}")
                } else {
                    format!("{h:2}")
                }
            }
            b'j' => format!("{:03}", days_after_jan01(&x) + 1),
            b'J' => g16(x.ijd as f64 / 86_400_000.0),
            b'm' => format!("{:02}", x.mo),
            b'M' => format!("{:02}", x.mi),
            b'p' => (if x.h >= 12 { "PM" } else { "AM" }).to_string(),
            b'P' => (if x.h >= 12 { "pm" } else { "am" }).to_string(),
            b'R' => format!("{:02}:{:02}", x.h, x.mi),
            b's' => {
                if x.use_subsec {
                    format!("{:.3}", (x.ijd - 210_866_760_000_000) as f64 / 1000.0)
                } else {
                    (x.ijd / 1000 - 210_866_760_000).to_string()
                }
            }
            b'S' => format!("{:02}", x.s as i64),
            b'T' => format!("{:02}:{:02}:{:02}", x.h, x.mi, x.s as i64),
            b'u' | b'w' => {
                let d = days_after_sunday(&x);
                (if d == 0 && cf == b'u' { 7 } else { d }).to_string()
            }
            b'U' => format!(
                "{:02}",
                (days_after_jan01(&x) - days_after_sunday(&x) + 7) / 7
            ),
            b'V' => format!("{:02}", days_after_jan01(&iso_thursday(&x)) / 7 + 1),
            b'W' => format!(
                "{:02}",
                (days_after_jan01(&x) - days_after_monday(&x) + 7) / 7
            ),
            b'Y' => format!("{:04}", x.y),
            b'%' => "%".to_string(),
            _ => return None,
        };
        out.extend_from_slice(piece.as_bytes());
    }
    Some(Value::Text(out))
}

/// `timediff(A, B)` (`timediffFunc`): the time to add to `b` to reach `a`, as `±YYYY-MM-DD
/// HH:MM:SS.SSS`, in whole years and months first (borrowing a month, or a year, when the
/// days and time of `b` are past those of `a`), then days and the time of day. `None` (NULL)
/// when either is not a date.
fn timediff(a: ValueRef<'_>, b: ValueRef<'_>) -> Option<Value> {
    let mut d1 = is_date(&[a])?;
    let mut d2 = is_date(&[b])?;
    compute_ymd_hms(&mut d1);
    compute_ymd_hms(&mut d2);
    // The Julian day of 0000-01-01 00:00:00 (times 86,400,000): the difference is printed as a
    // date counted from there.
    const YEAR_ZERO: i64 = 1_486_995_408 * 100_000;
    let sign;
    let mut y;
    let mut m;
    if d1.ijd >= d2.ijd {
        sign = '+';
        y = d1.y - d2.y;
        if y != 0 {
            d2.y = d1.y;
            d2.valid_jd = false;
            compute_jd(&mut d2);
        }
        m = d1.mo - d2.mo;
        if m < 0 {
            y -= 1;
            m += 12;
        }
        if m != 0 {
            d2.mo = d1.mo;
            d2.valid_jd = false;
            compute_jd(&mut d2);
        }
        while d1.ijd < d2.ijd {
            m -= 1;
            if m < 0 {
                m = 11;
                y -= 1;
            }
            d2.mo -= 1;
            if d2.mo < 1 {
                d2.mo = 12;
                d2.y -= 1;
            }
            d2.valid_jd = false;
            compute_jd(&mut d2);
        }
        d1.ijd -= d2.ijd;
        d1.ijd += YEAR_ZERO;
    } else {
        sign = '-';
        y = d2.y - d1.y;
        if y != 0 {
            d2.y = d1.y;
            d2.valid_jd = false;
            compute_jd(&mut d2);
        }
        m = d2.mo - d1.mo;
        if m < 0 {
            y -= 1;
            m += 12;
        }
        if m != 0 {
            d2.mo = d1.mo;
            d2.valid_jd = false;
            compute_jd(&mut d2);
        }
        while d1.ijd > d2.ijd {
            m -= 1;
            if m < 0 {
                m = 11;
                y -= 1;
            }
            d2.mo += 1;
            if d2.mo > 12 {
                d2.mo = 1;
                d2.y += 1;
            }
            d2.valid_jd = false;
            compute_jd(&mut d2);
        }
        d1.ijd = d2.ijd - d1.ijd;
        d1.ijd += YEAR_ZERO;
    }
    clear_ymd_hms_tz(&mut d1);
    compute_ymd_hms(&mut d1);
    Some(Value::text(format!(
        "{sign}{y:04}-{m:02}-{:02} {:02}:{:02}:{:06.3}",
        d1.d - 1,
        d1.h,
        d1.mi,
        d1.s
    )))
}

/// Calls date function `f` on its arguments: `None` (NULL) for a value that is not a date or
/// a modifier SQLite does not know, as SQLite answers them.
pub fn try_call(f: Function, a: &[ValueRef<'_>]) -> Result<Option<Value>, String> {
    if f == Function::TimeDiff {
        return Ok(match a {
            [x, y] => timediff(*x, *y),
            _ => None,
        });
    }
    if f == Function::Strftime {
        let Some(fmt) = a.first().and_then(|v| c_text(*v)) else {
            return Ok(None);
        };
        return Ok(is_date(&a[1..]).and_then(|x| strftime(&fmt, x)));
    }
    let Some(mut x) = is_date(a) else {
        return Ok(None);
    };
    Ok(Some(match f {
        Function::Date => {
            compute_ymd(&mut x);
            Value::text(format!("{}-{:02}-{:02}", year_text(x.y), x.mo, x.d))
        }
        Function::Time => {
            compute_hms(&mut x);
            Value::text(format!("{:02}:{:02}:{}", x.h, x.mi, seconds_text(&x)))
        }
        Function::DateTime => {
            compute_ymd_hms(&mut x);
            Value::text(format!(
                "{}-{:02}-{:02} {:02}:{:02}:{}",
                year_text(x.y),
                x.mo,
                x.d,
                x.h,
                x.mi,
                seconds_text(&x)
            ))
        }
        Function::JulianDay => {
            compute_jd(&mut x);
            Value::real(x.ijd as f64 / 86_400_000.0)
        }
        Function::UnixEpoch => {
            compute_jd(&mut x);
            if x.use_subsec {
                Value::real((x.ijd - 210_866_760_000_000) as f64 / 1000.0)
            } else {
                Value::Integer(x.ijd / 1000 - 210_866_760_000)
            }
        }
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(f: Function, args: &[&str]) -> Value {
        let v: Vec<ValueRef<'_>> = args.iter().map(|s| ValueRef::Text(s.as_bytes())).collect();
        try_call(f, &v).unwrap().unwrap_or(Value::Null)
    }

    #[test]
    fn iso_dates_and_modifiers() {
        let date = |a: &[&str]| call(Function::Date, a);
        assert_eq!(date(&["1994-01-01"]), Value::text("1994-01-01"));
        assert_eq!(date(&["1994-01-01", "+1 year"]), Value::text("1995-01-01"));
        assert_eq!(date(&["1994-01-31", "+1 month"]), Value::text("1994-03-03"));
        assert_eq!(
            date(&["1994-01-31", "+1 month", "floor"]),
            Value::text("1994-02-28")
        );
        assert_eq!(
            date(&["1994-03-15 10:00:00", "start of month"]),
            Value::text("1994-03-01")
        );
        assert_eq!(
            date(&["2024-02-10", "end of month"]),
            Value::text("2024-02-29")
        );
        assert_eq!(
            date(&["2024-02-10", "weekday 0"]),
            Value::text("2024-02-11")
        );
        assert_eq!(date(&["1994-12-31", "+1 day"]), Value::text("1995-01-01"));
        assert_eq!(date(&["garbage"]), Value::Null);
        assert_eq!(
            call(Function::DateTime, &["2000-01-01", "+0001-02-03 04:05:06"]),
            Value::text("2001-03-04 04:05:06")
        );
        assert_eq!(
            call(Function::Strftime, &["%J", "2000-01-01"]),
            Value::text("2451544.5")
        );
    }

    #[test]
    fn timediff_borrows_months_and_signs() {
        let td = |a: &str, b: &str| call(Function::TimeDiff, &[a, b]);
        assert_eq!(
            td("2023-03-15", "2023-02-15"),
            Value::text("+0000-01-00 00:00:00.000")
        );
        assert_eq!(
            td("2023-02-15", "2023-03-15"),
            Value::text("-0000-01-00 00:00:00.000")
        );
        assert_eq!(
            td("2024-01-01 00:00:00", "2023-12-31 23:59:59.5"),
            Value::text("+0000-00-00 00:00:00.500")
        );
        assert_eq!(td("garbage", "2023-02-15"), Value::Null);
        assert_eq!(td("2023-02-15", "garbage"), Value::Null);
        assert_eq!(
            try_call(Function::TimeDiff, &[ValueRef::Null, ValueRef::Integer(1)]),
            Ok(None)
        );
    }

    #[test]
    fn now_is_the_statements_time() {
        set_statement_time(2_460_000 * 86_400_000);
        assert_eq!(call(Function::Date, &["now"]), Value::text("2023-02-24"));
        assert_eq!(call(Function::Date, &[]), Value::text("2023-02-24"));
        assert_eq!(call(Function::Time, &["now"]), Value::text("12:00:00"));
    }

    #[test]
    fn g16_is_printf() {
        assert_eq!(g16(2451544.5), "2451544.5");
        assert_eq!(g16(2460000.123456789), "2460000.123456789");
        assert_eq!(g16(0.0), "0");
        assert_eq!(g16(1.0 / 3.0), "0.3333333333333333");
    }
}
