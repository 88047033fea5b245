//! SQLite's newer text and blob functions, each as `func.c` (3.54) computes it: `quote`,
//! `unicode`, `concat`, `concat_ws`, `octet_length`, `unhex`, `zeroblob` and `unistr`.

use crate::value::{real_to_text, Value, ValueRef};

/// SQLite's largest string or blob (`SQLITE_MAX_LENGTH`, the default limit).
pub const MAX_LENGTH: i64 = 1_000_000_000;

/// SQLite's message for a result longer than [`MAX_LENGTH`].
pub const TOO_BIG: &str = "string or blob too big";

/// The text up to its first NUL, as C string functions see it.
fn c_str(t: &[u8]) -> &[u8] {
    t.split(|&b| b == 0).next().unwrap_or(&[])
}

/// `sqlite3Utf8Read`: the code point starting at `z[*i]`, stepping past it (a lead byte takes
/// every continuation byte after it; overlong forms, surrogates and U+FFFE/F read as U+FFFD).
fn utf8_read(z: &[u8], i: &mut usize) -> u32 {
    const TRANS1: [u8; 64] = [
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
        0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
        0x1e, 0x1f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
        0x0d, 0x0e, 0x0f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03,
        0x00, 0x01, 0x00, 0x00,
    ];
    let mut c = u32::from(z[*i]);
    *i += 1;
    if c >= 0xc0 {
        c = u32::from(TRANS1[(c - 0xc0) as usize]);
        while *i < z.len() && z[*i] & 0xc0 == 0x80 {
            c = (c << 6).wrapping_add(u32::from(z[*i] & 0x3f));
            *i += 1;
        }
        if c < 0x80 || c & 0xFFFF_F800 == 0xD800 || c & 0xFFFF_FFFE == 0xFFFE {
            c = 0xFFFD;
        }
    }
    c
}

/// `sqlite3AppendOneUtf8Character`: `c` in UTF-8, in the form of its size.
pub(super) fn push_utf8(out: &mut Vec<u8>, c: u32) {
    if c < 0x80 {
        out.push(c as u8);
    } else if c < 0x800 {
        out.extend([0xc0 | (c >> 6) as u8, 0x80 | (c & 0x3f) as u8]);
    } else if c < 0x10000 {
        out.extend([
            0xe0 | (c >> 12) as u8,
            0x80 | ((c >> 6) & 0x3f) as u8,
            0x80 | (c & 0x3f) as u8,
        ]);
    } else {
        out.extend([
            0xf0 | ((c >> 18) & 0x07) as u8,
            0x80 | ((c >> 12) & 0x3f) as u8,
            0x80 | ((c >> 6) & 0x3f) as u8,
            0x80 | (c & 0x3f) as u8,
        ]);
    }
}

/// `quote(x)`: the SQL literal of `x` (`sqlite3QuoteValue`): reals as `%!0.17g`, text in
/// single quotes up to its first NUL, blobs as `X'..'`, NULL as `NULL`.
pub fn quote(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::text("NULL"),
        ValueRef::Integer(i) => Value::text(i.to_string()),
        ValueRef::Real(r) => Value::text(quoted_real(r)),
        ValueRef::Text(t) => {
            let t = c_str(t);
            let mut out = Vec::with_capacity(t.len() + 2);
            out.push(b'\'');
            for &b in t {
                out.push(b);
                if b == b'\'' {
                    out.push(b'\'');
                }
            }
            out.push(b'\'');
            Value::Text(out)
        }
        ValueRef::Blob(b) => {
            let mut s = String::with_capacity(b.len() * 2 + 3);
            s.push_str("X'");
            for byte in b {
                s.push_str(&format!("{byte:02X}"));
            }
            s.push('\'');
            Value::text(s)
        }
    }
}

/// A real as `quote()` writes it: `%!0.17g` by SQLite's own printf (infinities as `9.0e+999`).
fn quoted_real(r: f64) -> String {
    let mut buf = [0u8; 48];
    // SAFETY: as in `real_to_text`: a writable buffer of its length, a NUL-terminated format
    // taking one double, and sqlite3_snprintf NUL-terminates within the size.
    unsafe {
        libsqlite3_sys::sqlite3_snprintf(
            buf.len() as std::ffi::c_int,
            buf.as_mut_ptr().cast(),
            c"%!0.17g".as_ptr(),
            r,
        );
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// `unicode(x)`: the code point of the first character of `x` as text, NULL for empty text
/// (or text starting with NUL) and NULL.
pub fn unicode(v: ValueRef<'_>) -> Value {
    let Some(t) = v.to_text() else {
        return Value::Null;
    };
    let t = c_str(&t);
    if t.is_empty() {
        return Value::Null;
    }
    Value::Integer(i64::from(utf8_read(t, &mut 0)))
}

/// `octet_length(x)`: the bytes of a blob or text, of a number's text; NULL for NULL.
pub fn octet_length(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Blob(b) | ValueRef::Text(b) => Value::Integer(b.len() as i64),
        ValueRef::Integer(i) => Value::Integer(i.to_string().len() as i64),
        ValueRef::Real(r) => Value::Integer(real_to_text(r).len() as i64),
    }
}

/// `concat(x, ...)` (no separator) and `concat_ws(sep, x, ...)` (`args[0]` the separator): the
/// text of the non-NULL arguments, joined; `concat_ws` with a NULL separator is NULL.
pub fn concat(args: &[ValueRef<'_>], with_separator: bool) -> Result<Value, String> {
    let (sep, parts) = if with_separator {
        match args.split_first() {
            Some((s, rest)) => match s.to_text() {
                Some(s) => (s, rest),
                None => return Ok(Value::Null),
            },
            None => return Ok(Value::Null),
        }
    } else {
        (std::borrow::Cow::Borrowed(&[][..]), args)
    };
    let mut out = Vec::new();
    let mut any = false;
    for p in parts {
        if let Some(t) = p.to_text() {
            if any {
                out.extend_from_slice(&sep);
            }
            out.extend_from_slice(&t);
            any = true;
            if out.len() as i64 > MAX_LENGTH {
                return Err(TOO_BIG.into());
            }
        }
    }
    Ok(Value::Text(out))
}

/// `unhex(x[, pass])`: the blob `x`'s hexadecimal digit pairs spell, where characters of
/// `pass` may come between pairs; NULL when anything else is in the way or an argument is
/// NULL. The text ends at its first NUL.
pub fn unhex(x: ValueRef<'_>, pass: Option<ValueRef<'_>>) -> Value {
    let Some(hex) = x.to_text() else {
        return Value::Null;
    };
    let pass = match pass {
        Some(p) => match p.to_text() {
            Some(p) => p,
            None => return Value::Null,
        },
        None => std::borrow::Cow::Borrowed(&[][..]),
    };
    let in_pass = |ch: u32| {
        let mut i = 0;
        while i < pass.len() {
            if utf8_read(&pass, &mut i) == ch {
                return true;
            }
        }
        false
    };
    let z = c_str(&hex);
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(z.len() / 2);
    let mut i = 0;
    while i < z.len() {
        let Some(c) = digit(z[i]) else {
            let ch = utf8_read(z, &mut i);
            if !in_pass(ch) {
                return Value::Null;
            }
            continue;
        };
        let Some(d) = z.get(i + 1).copied().and_then(digit) else {
            return Value::Null;
        };
        out.push(c << 4 | d);
        i += 2;
    }
    Value::Blob(out)
}

/// `zeroblob(n)`: `n` zero bytes (none for a negative `n`).
pub fn zeroblob(n: ValueRef<'_>) -> Result<Value, String> {
    let n = n.to_i64().unwrap_or(0).max(0);
    if n > MAX_LENGTH {
        return Err(TOO_BIG.into());
    }
    Ok(Value::Blob(vec![0; n as usize]))
}

/// `unistr(x)`: `x` with its escapes `\\`, `\XXXX`, `\+XXXXXX`, `\uXXXX` and `\UXXXXXXXX`
/// replaced by the characters they name; any other backslash is an error.
pub fn unistr(v: ValueRef<'_>) -> Result<Value, String> {
    let Some(t) = v.to_text() else {
        return Ok(Value::Null);
    };
    // `strchr` stops at a NUL: the text after one is copied as it is.
    let t = &t[..];
    let hex = |from: usize, n: usize| -> Option<u32> {
        let digits = t.get(from..from + n)?;
        digits.iter().try_fold(0u32, |v, &b| {
            (b as char)
                .to_digit(16)
                .map(|d| v.wrapping_shl(4).wrapping_add(d))
        })
    };
    let bad = || Err("invalid Unicode escape".to_string());
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        let Some(at) = t[i..].iter().position(|&b| b == b'\\' || b == 0) else {
            out.extend_from_slice(&t[i..]);
            break;
        };
        if t[i + at] == 0 {
            // strchr finds no backslash past a NUL: the rest is copied whole.
            out.extend_from_slice(&t[i..]);
            break;
        }
        out.extend_from_slice(&t[i..i + at]);
        i += at;
        let next = t.get(i + 1).copied().unwrap_or(0);
        let (len, c) = match next {
            b'\\' => {
                out.push(b'\\');
                i += 2;
                continue;
            }
            b if b.is_ascii_hexdigit() => (5, hex(i + 1, 4)),
            b'+' => (8, hex(i + 2, 6)),
            b'u' => (6, hex(i + 2, 4)),
            b'U' => (10, hex(i + 2, 8)),
            _ => return bad(),
        };
        let Some(c) = c else {
            return bad();
        };
        push_utf8(&mut out, c);
        i += len;
    }
    Ok(Value::Text(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn against_sqlite() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let cases: &[(&str, Vec<Value>)] = &[
            ("quote(?1)", vec![Value::real(0.1)]),
            ("quote(?1)", vec![Value::real(f64::INFINITY)]),
            ("quote(?1)", vec![Value::real(-1e300)]),
            ("quote(?1)", vec![Value::text("it's\0x")]),
            ("quote(?1)", vec![Value::Blob(vec![0, 0xab])]),
            ("unicode(?1)", vec![Value::text("é")]),
            ("unicode(?1)", vec![Value::Blob(vec![0xed, 0xa0, 0x80])]),
            ("unicode(?1)", vec![Value::Blob(vec![0xc0, 0x80])]),
            ("unicode(?1)", vec![Value::text("")]),
            ("octet_length(?1)", vec![Value::real(1.5)]),
            ("octet_length(?1)", vec![Value::text("é\0x")]),
            (
                "concat(?1, ?2, ?3)",
                vec![Value::Null, Value::real(2.5), Value::Blob(vec![65, 0, 66])],
            ),
            (
                "concat_ws(?1, ?2, ?3, ?4)",
                vec![
                    Value::text(", "),
                    Value::Integer(1),
                    Value::Null,
                    Value::text("b"),
                ],
            ),
            ("concat_ws(?1, ?2)", vec![Value::Null, Value::Integer(1)]),
            ("unhex(?1)", vec![Value::text("aBcD")]),
            ("unhex(?1)", vec![Value::text("abc")]),
            (
                "unhex(?1, ?2)",
                vec![Value::text("ab-é-cd-"), Value::text("-é")],
            ),
            ("unhex(?1, ?2)", vec![Value::text("a b"), Value::text(" ")]),
            ("unhex(?1)", vec![Value::text("ab\0zz")]),
            (
                "unistr(?1)",
                vec![Value::text("a\\u00e9\\\\\\+01F600\\0041\\U0001F600")],
            ),
            ("unistr(?1)", vec![Value::text("x\0\\q")]),
            ("length(zeroblob(?1))", vec![Value::real(3.9)]),
            ("zeroblob(?1)", vec![Value::Integer(-5)]),
        ];
        for (sql, args) in cases {
            let params: Vec<rusqlite::types::Value> = args
                .iter()
                .map(|v| match v {
                    Value::Null => rusqlite::types::Value::Null,
                    Value::Integer(i) => rusqlite::types::Value::Integer(*i),
                    Value::Real(r) => rusqlite::types::Value::Real(*r),
                    Value::Text(t) => {
                        rusqlite::types::Value::Text(String::from_utf8_lossy(t).into())
                    }
                    Value::Blob(b) => rusqlite::types::Value::Blob(b.clone()),
                })
                .collect();
            let theirs: Result<rusqlite::types::Value, String> = db
                .query_row(
                    &format!("SELECT {sql}"),
                    rusqlite::params_from_iter(params),
                    |r| r.get(0),
                )
                .map_err(|e| e.to_string());
            let a: Vec<ValueRef<'_>> = args.iter().map(Value::as_ref).collect();
            let ours = match sql.split('(').next().unwrap() {
                "quote" => Ok(quote(a[0])),
                "unicode" => Ok(unicode(a[0])),
                "octet_length" => Ok(octet_length(a[0])),
                "concat" => concat(&a, false),
                "concat_ws" => concat(&a, true),
                "unhex" => Ok(unhex(a[0], a.get(1).copied())),
                "unistr" => unistr(a[0]),
                "length" => zeroblob(a[0]).map(|b| match b {
                    Value::Blob(b) => Value::Integer(b.len() as i64),
                    other => other,
                }),
                _ => zeroblob(a[0]),
            };
            let ours = ours.map(|v| match v {
                Value::Null => rusqlite::types::Value::Null,
                Value::Integer(i) => rusqlite::types::Value::Integer(i),
                Value::Real(r) => rusqlite::types::Value::Real(r),
                Value::Text(t) => rusqlite::types::Value::Text(String::from_utf8_lossy(&t).into()),
                Value::Blob(b) => rusqlite::types::Value::Blob(b),
            });
            assert_eq!(ours, theirs, "{sql} {args:?}");
        }
    }
}
