//! How SQLite reads a number from text: ports of `sqlite3AtoF`, `sqlite3Atoi64`,
//! `sqlite3DecOrHexToI64` and the helpers that decide when a real is also an integer, as in
//! SQLite 3.54 (the version rusqlite bundles, which the tests compare against).
//!
//! These decide what a `DEFAULT '0.06'` on a `DECIMAL(15,2)` column reads as, so they follow
//! SQLite's quirks on purpose: leading and trailing ASCII whitespace is allowed, only the first
//! 19 or so significant digits count, and an integer is only "the same as" a real when both
//! are exact and small enough (below 2^51).

/// SQLite's `sqlite3Isspace`: ASCII space, tab, newline, vertical tab, form feed, return.
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The closest double to `s * 10^d` (SQLite's `sqlite3Fp10Convert2`, which rounds
/// correctly; so does Rust's parser). SQLite's table of powers of ten spans 10^-348 to
/// 10^347; beyond it the result is 0 or infinity, as the correctly rounded value is anyway.
fn pow10_to_double(s: u64, d: i64) -> f64 {
    // Both factors exact in a double: one IEEE operation, correctly rounded (the classic fast
    // path; `1994`, `0.06`, `12.5` all take it). Otherwise the correctly rounding parser.
    const EXACT: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    if s < (1 << 53) && (-22..=22).contains(&d) {
        let m = s as f64;
        return if d >= 0 {
            m * EXACT[d as usize]
        } else {
            m / EXACT[(-d) as usize]
        };
    }
    if d < -348 {
        0.0
    } else if d > 347 {
        f64::INFINITY
    } else {
        format!("{s}e{d}").parse().unwrap_or(0.0)
    }
}

/// `sqlite3AtoF`: the real number `z` spells (up to the end or a NUL byte), and SQLite's
/// return code: 0 when no prefix is a number; negative when a prefix is but text follows;
/// otherwise positive, with bit 1 set when there is a `.` or an exponent, bit 2 for an exact
/// zero, bit 3 when digits beyond the 19th or so were dropped.
pub fn atof(z: &[u8]) -> (i32, f64) {
    const LIMIT: u64 = (u64::MAX - 9) / 10;
    let at = |i: usize| z.get(i).copied().unwrap_or(0);
    let digit = |i: usize| at(i).is_ascii_digit().then(|| u64::from(at(i) - b'0'));
    let mut i = 0;
    let mut neg = false;
    let mut s: u64 = 0;
    let mut d: i64 = 0;
    let mut state: u32 = 0;
    while is_space(at(i)) {
        i += 1;
    }
    if matches!(at(i), b'-' | b'+') {
        neg = at(i) == b'-';
        i += 1;
    }
    if let Some(v) = digit(i) {
        state = 1;
        s = v;
        i += 1;
        while let Some(v) = digit(i) {
            s = s * 10 + v;
            i += 1;
            if s >= LIMIT {
                state = 9;
                while digit(i).is_some() {
                    i += 1;
                    d += 1;
                }
                break;
            }
        }
    }
    if at(i) == b'.' {
        i += 1;
        if digit(i).is_some() {
            state |= 1;
            while let Some(v) = digit(i) {
                if s < LIMIT {
                    s = s * 10 + v;
                    d -= 1;
                } else {
                    state = 11;
                }
                i += 1;
            }
        } else if state == 0 {
            return (0, 0.0);
        }
        state |= 2;
    } else if state == 0 {
        return (0, 0.0);
    }
    if matches!(at(i), b'e' | b'E') {
        i += 1;
        let sign = if at(i) == b'-' { -1 } else { 1 };
        if matches!(at(i), b'-' | b'+') {
            i += 1;
        }
        if let Some(v) = digit(i) {
            let mut exp = v as i64;
            i += 1;
            state |= 2;
            while let Some(v) = digit(i) {
                exp = if exp < 10000 {
                    exp * 10 + v as i64
                } else {
                    10000
                };
                i += 1;
            }
            d += sign * exp;
        } else {
            // Leave `i` on the `e` or sign, so the text counts as trailing garbage.
            i -= 1;
        }
    }
    let mut value = if s == 0 {
        state |= 4;
        0.0
    } else {
        pow10_to_double(s, d)
    };
    if neg {
        value = -value;
    }
    while is_space(at(i)) {
        i += 1;
    }
    let rc = if at(i) == 0 {
        state
    } else {
        0xffff_fff0 | state
    };
    (rc as i32, value)
}

/// `sqlite3Atoi64` on all of `z`: the integer it spells, saturated to `i64`, and SQLite's
/// return code: -1 no digits at all, 0 fits, 1 non-space text follows, 2 too large, 3 exactly
/// 9223372036854775808 (which fits only when negative, and then the code is 0 or 1).
pub fn atoi64(z: &[u8]) -> (i32, i64) {
    let n = z.len();
    let mut i = 0;
    while i < n && is_space(z[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < n && matches!(z[i], b'-' | b'+') {
        neg = z[i] == b'-';
        i += 1;
    }
    let start = i;
    while i < n && z[i] == b'0' {
        i += 1;
    }
    let digits = z[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    let u = z[i..i + digits].iter().fold(0u64, |u, &b| {
        u.wrapping_mul(10).wrapping_add(u64::from(b - b'0'))
    });
    let saturated = if neg { i64::MIN } else { i64::MAX };
    let value = match i64::try_from(u) {
        Ok(v) if neg => -v,
        Ok(v) => v,
        Err(_) => saturated,
    };
    let rc = if digits == 0 && start == i {
        -1
    } else if z[i + digits..].iter().any(|&b| !is_space(b)) {
        1
    } else {
        0
    };
    if digits < 19 {
        return (rc, value);
    }
    let order = if digits > 19 {
        std::cmp::Ordering::Greater
    } else {
        z[i..i + 19].cmp(b"9223372036854775808")
    };
    match order {
        std::cmp::Ordering::Less => (rc, value),
        std::cmp::Ordering::Greater => (2, saturated),
        std::cmp::Ordering::Equal => (if neg { rc } else { 3 }, saturated),
    }
}

/// `sqlite3DecOrHexToI64` on an integer token (decimal digits, or `0x` and hex digits):
/// hexadecimal is read as the bits of a `u64` and fails (code 2) past 16 significant digits.
pub fn dec_or_hex_to_i64(token: &str) -> (i32, i64) {
    let z = token.as_bytes();
    if z.len() >= 2 && z[0] == b'0' && matches!(z[1], b'x' | b'X') {
        let body = &z[2..];
        let zeros = body.iter().take_while(|&&b| b == b'0').count();
        let hex = body[zeros..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let u = body[zeros..zeros + hex].iter().fold(0u64, |u, &b| {
            let v = (b as char).to_digit(16).unwrap_or(0);
            u.wrapping_mul(16).wrapping_add(u64::from(v))
        });
        let rc = if hex > 16 {
            2
        } else if zeros + hex < body.len() {
            1
        } else {
            0
        };
        (rc, u as i64)
    } else {
        atoi64(z)
    }
}

/// The value of an integer token when SQLite's `sqlite3GetInt32` accepts it, i.e. when the
/// parser stores it as a small integer (`EP_IntValue`) rather than as text: at most 10
/// significant decimal digits up to 2147483647, or at most 8 hex digits below 0x80000000.
pub fn token_as_i32(token: &str) -> Option<i32> {
    let z = token.as_bytes();
    if z.len() > 2 && z[0] == b'0' && matches!(z[1], b'x' | b'X') {
        let body = &z[2..];
        let body = &body[body.iter().take_while(|&&b| b == b'0').count()..];
        let hex = body
            .iter()
            .take(8)
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let u = body[..hex].iter().fold(0u32, |u, &b| {
            (u << 4) | (b as char).to_digit(16).unwrap_or(0)
        });
        let more = body.get(hex).is_some_and(u8::is_ascii_hexdigit);
        return (u & 0x8000_0000 == 0 && !more).then_some(u as i32);
    }
    let body = &z[z.iter().take_while(|&&b| b == b'0').count()..];
    let digits = body
        .iter()
        .take(11)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits > 10 || z.first().is_none_or(|b| !b.is_ascii_digit()) {
        return None;
    }
    let v = body[..digits]
        .iter()
        .fold(0i64, |v, &b| v * 10 + i64::from(b - b'0'));
    i32::try_from(v).ok()
}

/// `sqlite3RealToI64`: `r` truncated toward zero, saturating just inside the `i64` range.
pub fn real_to_i64(r: f64) -> i64 {
    if r < -9_223_372_036_854_774_784.0 {
        i64::MIN
    } else if r > 9_223_372_036_854_774_784.0 {
        i64::MAX
    } else {
        r as i64
    }
}

/// `sqlite3RealSameAsInt`: whether `i` (obtained from `r`) represents `r` exactly, counting
/// only integers below 2^51 in magnitude (and any zero).
pub fn real_same_as_int(r: f64, i: i64) -> bool {
    r == 0.0
        || (r.to_bits() == (i as f64).to_bits()
            && (-2_251_799_813_685_248..2_251_799_813_685_248).contains(&i))
}

/// `sqlite3VdbeIntegerAffinity` on a real: the integer it equals, when it equals one strictly
/// inside the `i64` range.
pub fn real_as_integer(r: f64) -> Option<i64> {
    let i = real_to_i64(r);
    (r == i as f64 && i > i64::MIN && i < i64::MAX).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_fast_path_rounds_as_the_parser_does() {
        let mut rng = testkit::Rng::xorshift64(0x9E37_79B9_7F4A_7C15);
        for _ in 0..50_000 {
            let x = rng.next_u64();
            let s = x >> (11 + x % 40);
            let d = (x % 45) as i64 - 22;
            let want: f64 = format!("{s}e{d}").parse().unwrap();
            assert_eq!(pow10_to_double(s, d).to_bits(), want.to_bits(), "{s}e{d}");
        }
    }

    #[test]
    fn atof_return_codes() {
        assert_eq!(atof(b"12"), (1, 12.0));
        assert_eq!(atof(b" 12.5 "), (3, 12.5));
        assert_eq!(atof(b"-0.06"), (3, -0.06));
        assert_eq!(atof(b"1e3"), (3, 1000.0));
        assert_eq!(atof(b".5"), (3, 0.5));
        assert_eq!(atof(b"5."), (3, 5.0));
        assert_eq!(atof(b"0"), (5, 0.0));
        assert_eq!(atof(b""), (0, 0.0));
        assert_eq!(atof(b"."), (0, 0.0));
        assert_eq!(atof(b"abc"), (0, 0.0));
        assert_eq!(atof(b"- 5"), (0, 0.0));
        let (rc, v) = atof(b"12abc");
        assert!(rc < 0 && v == 12.0);
        assert!(atof(b"1e").0 < 0);
        assert!(atof(b"1e+").0 < 0);
        assert!(atof(b"0x10").0 < 0);
        assert_eq!(atof(b"12345678901234567890123").0, 9);
        assert_eq!(atof(b"1e999").1, f64::INFINITY);
        assert_eq!(atof(b"1e-999"), (3, 0.0));
        assert_eq!(atof(b"-0").1.to_bits(), (-0.0f64).to_bits());
    }

    #[test]
    fn atoi64_return_codes() {
        assert_eq!(atoi64(b"42"), (0, 42));
        assert_eq!(atoi64(b" -42 "), (0, -42));
        assert_eq!(atoi64(b"42x"), (1, 42));
        assert_eq!(atoi64(b""), (-1, 0));
        assert_eq!(atoi64(b"x"), (-1, 0));
        assert_eq!(atoi64(b"000"), (0, 0));
        assert_eq!(atoi64(b"9223372036854775807"), (0, i64::MAX));
        assert_eq!(atoi64(b"9223372036854775808"), (3, i64::MAX));
        assert_eq!(atoi64(b"-9223372036854775808"), (0, i64::MIN));
        assert_eq!(atoi64(b"9223372036854775809"), (2, i64::MAX));
        assert_eq!(atoi64(b"-99999999999999999999"), (2, i64::MIN));
        assert_eq!(atoi64(b"1.5"), (1, 1));
    }

    #[test]
    fn integer_tokens() {
        assert_eq!(dec_or_hex_to_i64("0x1F"), (0, 31));
        assert_eq!(dec_or_hex_to_i64("0xFFFFFFFFFFFFFFFF"), (0, -1));
        assert_eq!(dec_or_hex_to_i64("0x0000000000000000001"), (0, 1));
        assert_eq!(dec_or_hex_to_i64("0x10000000000000000").0, 2);
        assert_eq!(token_as_i32("2147483647"), Some(i32::MAX));
        assert_eq!(token_as_i32("2147483648"), None);
        assert_eq!(token_as_i32("000000000000042"), Some(42));
        assert_eq!(token_as_i32("0x7FFFFFFF"), Some(i32::MAX));
        assert_eq!(token_as_i32("0x80000000"), None);
        assert_eq!(token_as_i32("0x000000001"), Some(1));
    }

    #[test]
    fn reals_that_are_integers() {
        assert_eq!(real_as_integer(901.0), Some(901));
        assert_eq!(real_as_integer(0.5), None);
        assert_eq!(real_as_integer(-0.0), Some(0));
        assert_eq!(real_as_integer(i64::MAX as f64), None);
        assert_eq!(real_as_integer(f64::INFINITY), None);
        assert!(real_same_as_int(-0.0, 0));
        assert!(!real_same_as_int(2f64.powi(52), 1 << 52));
    }
}
