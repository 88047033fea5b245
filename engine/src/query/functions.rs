//! The scalar functions, each as SQLite's `func.c` (or `date.c`) computes it.

use std::cmp::Ordering;

use crate::datatype3::compare_values;
use crate::value::{Value, ValueRef};

use super::ir::Function;
use super::{dates, json, math, printf, strings};

/// The index after the character starting at `i`, as `SQLITE_SKIP_UTF8` steps: a byte below
/// 0xc0 is one character, a lead byte swallows the continuation bytes after it.
fn skip_utf8(b: &[u8], mut i: usize) -> usize {
    let lead = b[i];
    i += 1;
    if lead >= 0xc0 {
        while i < b.len() && b[i] & 0xc0 == 0x80 {
            i += 1;
        }
    }
    i
}

/// The byte offsets where characters start, as SQLite 3.54's `length()` and `substr()` step
/// through text (tag-20260418-01 in its source): an ASCII byte is one character, any other
/// byte starts one that swallows the continuation bytes after it. (Malformed UTF-8 divides
/// differently in other SQLite functions and versions.)
fn char_starts(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let start = i;
        if start >= b.len() {
            return None;
        }
        i += 1;
        if b[start] >= 0x80 {
            while i < b.len() && b[i] & 0xc0 == 0x80 {
                i += 1;
            }
        }
        Some(start)
    })
}

/// `char()`'s text, as `charFunc` encodes it: each argument as an integer (NULL is 0), one
/// outside `0..=0x10FFFF` as U+FFFD, every code point (surrogates too) in the UTF-8 form of its
/// size.
fn char_text(a: &[ValueRef<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len() * 4);
    for v in a {
        let x = v.to_i64().unwrap_or(0);
        let c = if (0..=0x10ffff).contains(&x) {
            x as u32
        } else {
            0xfffd
        };
        strings::push_utf8(&mut out, c);
    }
    out
}

fn text_of(v: ValueRef<'_>) -> Option<Vec<u8>> {
    v.to_text().map(|t| t.into_owned())
}

/// Applies `f` to evaluated arguments.
pub fn apply(f: Function, a: &[ValueRef<'_>]) -> Result<Value, String> {
    let arg = |i: usize| a.get(i).copied().unwrap_or(ValueRef::Null);
    Ok(match f {
        Function::Truth { is_true, negated } => Value::Integer(i64::from(
            super::eval::truth(arg(0)).map_or(negated, |t| (t == is_true) != negated),
        )),
        Function::Coalesce => a
            .iter()
            .find(|v| !v.is_null())
            .map_or(Value::Null, |v| ValueRef::to_owned(*v)),
        Function::Abs => match arg(0) {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(
                i.checked_abs()
                    .ok_or_else(|| "integer overflow".to_string())?,
            ),
            other => Value::real(other.to_f64().unwrap_or(0.0).abs()),
        },
        Function::NullIf(c) => {
            if compare_values(arg(0), arg(1), c) == Ordering::Equal {
                Value::Null
            } else {
                arg(0).to_owned()
            }
        }
        Function::Length => match arg(0) {
            ValueRef::Null => Value::Null,
            ValueRef::Blob(b) => Value::Integer(b.len() as i64),
            other => {
                // Borrowed for text (nothing allocated per row); numbers are spelled first.
                let t = other.to_text().unwrap_or_default();
                let t = t.split(|&b| b == 0).next().unwrap_or(&[]);
                Value::Integer(char_starts(t).count() as i64)
            }
        },
        Function::Lower | Function::Upper => match text_of(arg(0)) {
            None => Value::Null,
            Some(mut t) => {
                if f == Function::Lower {
                    t.make_ascii_lowercase();
                } else {
                    t.make_ascii_uppercase();
                }
                Value::Text(t)
            }
        },
        Function::Substr => substr(a),
        Function::Trim | Function::LTrim | Function::RTrim => trim(f, a),
        Function::Round => round(a),
        Function::TypeOf => Value::text(arg(0).class().name()),
        Function::Hex => {
            let bytes = match arg(0) {
                ValueRef::Blob(b) => b.to_vec(),
                other => text_of(other).unwrap_or_default(),
            };
            let mut s = String::with_capacity(bytes.len() * 2);
            for b in bytes {
                s.push_str(&format!("{b:02X}"));
            }
            Value::text(s)
        }
        Function::Instr => instr(arg(0), arg(1)),
        Function::Char => Value::Text(char_text(a)),
        Function::Quote => strings::quote(arg(0)),
        Function::Unicode => strings::unicode(arg(0)),
        Function::Concat => strings::concat(a, false)?,
        Function::ConcatWs => strings::concat(a, true)?,
        Function::OctetLength => strings::octet_length(arg(0)),
        Function::Unhex => strings::unhex(arg(0), a.get(1).copied()),
        Function::ZeroBlob => strings::zeroblob(arg(0))?,
        Function::Unistr => strings::unistr(arg(0))?,
        Function::Math(m) => math::apply(m, a),
        Function::Printf => printf::printf(a)?,
        // Reached only without the subtypes of nested calls (the evaluator calls JSON
        // functions itself); plain values carry none.
        Function::Json(j) => {
            let args: Vec<json::JsonArg<'_>> = a.iter().map(|v| json::JsonArg::sql(*v)).collect();
            json::call(j, &args)?.0
        }
        Function::Replace => {
            // SQLite's replaceFunc checks in this order: an empty pattern (or one starting
            // with NUL) returns X even when Z is NULL.
            let (Some(x), Some(y)) = (text_of(arg(0)), text_of(arg(1))) else {
                return Ok(Value::Null);
            };
            if y.first().is_none_or(|&b| b == 0) {
                return Ok(Value::Text(x));
            }
            let Some(z) = text_of(arg(2)) else {
                return Ok(Value::Null);
            };
            let mut out = Vec::with_capacity(x.len());
            let mut i = 0;
            while i < x.len() {
                if x[i..].starts_with(&y) {
                    out.extend_from_slice(&z);
                    i += y.len();
                } else {
                    out.push(x[i]);
                    i += 1;
                }
            }
            Value::Text(out)
        }
        Function::Min(c) | Function::Max(c) => {
            if a.iter().any(|v| v.is_null()) {
                return Ok(Value::Null);
            }
            let max = matches!(f, Function::Max(_));
            let mut best = 0;
            for i in 1..a.len() {
                let o = compare_values(a[best], a[i], c);
                // SQLite's minmaxFunc: min keeps the last of equal values, max the first.
                if (!max && o != Ordering::Less) || (max && o == Ordering::Less) {
                    best = i;
                }
            }
            a.get(best).map_or(Value::Null, |v| ValueRef::to_owned(*v))
        }
        Function::Date
        | Function::Time
        | Function::DateTime
        | Function::Strftime
        | Function::JulianDay
        | Function::UnixEpoch
        | Function::TimeDiff => dates::try_call(f, a)?.unwrap_or(Value::Null),
    })
}

fn substr(a: &[ValueRef<'_>]) -> Value {
    let x = a.first().copied().unwrap_or(ValueRef::Null);
    let y = a.get(1).copied().unwrap_or(ValueRef::Null);
    if x.is_null() || y.is_null() || a.get(2).is_some_and(|z| z.is_null()) {
        return Value::Null;
    }
    let blob = matches!(x, ValueRef::Blob(_));
    // sqlite3_value_blob() of an empty blob is a null pointer: the result is NULL.
    if matches!(x, ValueRef::Blob(b) if b.is_empty()) {
        return Value::Null;
    }
    let bytes: Vec<u8> = match x {
        ValueRef::Blob(b) => b.to_vec(),
        other => text_of(other).unwrap_or_default(),
    };
    let bytes: &[u8] = if blob {
        &bytes
    } else {
        bytes.split(|&b| b == 0).next().unwrap_or(&[])
    };
    let starts: Vec<usize> = if blob {
        Vec::new()
    } else {
        char_starts(bytes).collect()
    };
    // The length counts characters with SQLITE_SKIP_UTF8 (stray continuation bytes are
    // characters of their own), the skipping below as length() does.
    let len = if blob {
        bytes.len() as i64
    } else {
        let (mut n, mut i) = (0i64, 0usize);
        while i < bytes.len() {
            i = skip_utf8(bytes, i);
            n += 1;
        }
        n
    };
    // SQLite 3.54's substrFunc, step by step.
    let mut p1 = y.to_i64().unwrap_or(0);
    let mut p2 = match a.get(2) {
        Some(z) => z.to_i64().unwrap_or(0),
        None => i64::MAX,
    };
    if p1 < 0 {
        p1 = p1.saturating_add(len);
        if p1 < 0 {
            p2 = if p2 < 0 { 0 } else { p2.saturating_add(p1) };
            p1 = 0;
        }
    } else if p1 > 0 {
        p1 -= 1;
    } else if p2 > 0 {
        p2 -= 1;
    }
    if p2 < 0 {
        p2 = if p2 < -p1 { p1 } else { -p2 };
        p1 -= p2;
    }
    let (p1, p2) = (p1.max(0) as u64, p2.max(0) as u64);
    if blob {
        let (start, n) = if p1 as usize >= bytes.len() {
            (0, 0)
        } else {
            (p1 as usize, (p2 as usize).min(bytes.len() - p1 as usize))
        };
        return Value::Blob(bytes[start..start + n].to_vec());
    }
    // Character offsets to byte offsets.
    let at = |c: u64| -> usize {
        if c as usize >= starts.len() {
            bytes.len()
        } else {
            starts[c as usize]
        }
    };
    let start = at(p1);
    let end = at(p1.saturating_add(p2));
    Value::Text(bytes[start..end.max(start)].to_vec())
}

fn utf8_chars(b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let j = skip_utf8(b, i);
        out.push(&b[i..j]);
        i = j;
    }
    out
}

fn trim(f: Function, a: &[ValueRef<'_>]) -> Value {
    let Some(x) = a.first().and_then(|v| text_of(*v)) else {
        return Value::Null;
    };
    let set: Vec<Vec<u8>> = match a.get(1) {
        None => vec![b" ".to_vec()],
        Some(v) => match text_of(*v) {
            None => return Value::Null,
            Some(s) => utf8_chars(&s).into_iter().map(<[u8]>::to_vec).collect(),
        },
    };
    let mut s: &[u8] = &x;
    if set.is_empty() {
        return Value::Text(x);
    }
    if f != Function::RTrim {
        'left: loop {
            for c in &set {
                if !c.is_empty() && s.starts_with(c) {
                    s = &s[c.len()..];
                    continue 'left;
                }
            }
            break;
        }
    }
    if f != Function::LTrim {
        'right: loop {
            for c in &set {
                if !c.is_empty() && s.ends_with(c) {
                    s = &s[..s.len() - c.len()];
                    continue 'right;
                }
            }
            break;
        }
    }
    Value::Text(s.to_vec())
}

fn instr(x: ValueRef<'_>, y: ValueRef<'_>) -> Value {
    if x.is_null() || y.is_null() {
        return Value::Null;
    }
    let both_blobs = matches!((x, y), (ValueRef::Blob(_), ValueRef::Blob(_)));
    let (h, n) = (
        text_of(x).unwrap_or_default(),
        text_of(y).unwrap_or_default(),
    );
    if n.is_empty() {
        return Value::Integer(1);
    }
    // SQLite's instrFunc: candidate positions advance one character at a time (one byte,
    // then any continuation bytes after it, for text).
    let (mut pos, mut count) = (0usize, 1i64);
    while n.len() <= h.len() - pos {
        if h[pos..].starts_with(&n) {
            return Value::Integer(count);
        }
        count += 1;
        pos += 1;
        while !both_blobs && pos < h.len() && h[pos] & 0xc0 == 0x80 {
            pos += 1;
        }
    }
    Value::Integer(0)
}

fn round(a: &[ValueRef<'_>]) -> Value {
    let mut n = 0i64;
    if let Some(d) = a.get(1) {
        if d.is_null() {
            return Value::Null;
        }
        n = d.to_i64().unwrap_or(0).clamp(0, 30);
    }
    let x = a.first().copied().unwrap_or(ValueRef::Null);
    let Some(mut r) = x.to_f64() else {
        return Value::Null;
    };
    if !(-4503599627370496.0..=4503599627370496.0).contains(&r) {
        // Too large to have a fraction.
    } else if n == 0 {
        r = ((r + if r < 0.0 { -0.5 } else { 0.5 }) as i64) as f64;
    } else {
        let text = sqlite_printf_fixed(r, n as i32);
        r = partitioner::numeric_text::atof(text.as_bytes()).1;
    }
    Value::real(r)
}

/// `sqlite3_mprintf("%!.*f", digits, r)`, through the bundled SQLite's own formatter (as
/// `value::real_to_text` does), so `round` rounds exactly as SQLite does.
fn sqlite_printf_fixed(r: f64, digits: i32) -> String {
    let mut buf = [0u8; 400];
    // SAFETY: the buffer's length is passed, the format takes exactly an int and a double,
    // and sqlite3_snprintf always NUL-terminates within the given length.
    unsafe {
        libsqlite3_sys::sqlite3_snprintf(
            buf.len() as std::ffi::c_int,
            buf.as_mut_ptr().cast(),
            c"%!.*f".as_ptr(),
            digits as std::ffi::c_int,
            r,
        );
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype3::Collation;

    fn t(s: &str) -> Value {
        Value::text(s)
    }

    #[test]
    fn substr_follows_sqlite() {
        let s = |args: &[Value]| {
            let r: Vec<ValueRef<'_>> = args.iter().map(Value::as_ref).collect();
            substr(&r)
        };
        let i = Value::Integer;
        assert_eq!(s(&[t("hello"), i(2), i(3)]), t("ell"));
        assert_eq!(s(&[t("hello"), i(0), i(2)]), t("h"));
        assert_eq!(s(&[t("hello"), i(-3)]), t("llo"));
        assert_eq!(s(&[t("hello"), i(3), i(-2)]), t("he"));
        assert_eq!(s(&[t("hello"), i(-10), i(8)]), t("hel"));
        assert_eq!(s(&[t("héllo"), i(2), i(2)]), t("él"));
    }

    #[test]
    fn round_and_min_max() {
        let r = |x: f64, n: i64| round(&[ValueRef::Real(x), ValueRef::Integer(n)]);
        assert_eq!(r(2.5, 0), Value::Real(3.0));
        assert_eq!(r(-2.5, 0), Value::Real(-3.0));
        assert_eq!(r(1.23456, 3), Value::Real(1.235));
        assert_eq!(
            apply(
                Function::Min(Collation::Binary),
                &[ValueRef::Integer(1), ValueRef::Real(1.0)]
            ),
            Ok(Value::Real(1.0))
        );
        assert_eq!(
            apply(
                Function::Max(Collation::Binary),
                &[ValueRef::Integer(1), ValueRef::Real(1.0)]
            ),
            Ok(Value::Integer(1))
        );
    }
}
