//! SQLite values: the five storage classes, owned ([`Value`]) and borrowed from a page
//! ([`ValueRef`]), and the conversions SQLite applies between them.
//!
//! The conversions are SQLite's own, not Rust's: text becomes a number the way the VDBE's
//! arithmetic reads it (`computeNumericType`: the longest numeric prefix, `'12abc'` is 12 and
//! `'abc'` is 0), a real becomes text the way `sqlite3VdbeMemStringify` renders it (`%!.17g`
//! through SQLite's own formatter: up to seventeen significant digits and always a decimal
//! point, `1.0`, `1.0e+20`), and a NaN is never a value (SQLite stores and reads it as NULL).
//! The ports follow SQLite 3.54, the version bundled with rusqlite, which the tests use as
//! the oracle. Comparison rules live in
//! [`crate::datatype3`]; everything here is what those rules convert with.

use std::borrow::Cow;
use std::fmt;

use partitioner::numeric_text::{atof, atoi64, real_same_as_int, real_to_i64};

/// A value owned by the caller: one of SQLite's storage classes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Value {
    /// NULL.
    Null,
    /// A signed 64-bit integer.
    Integer(i64),
    /// An IEEE double (never NaN: SQLite has no NaN value).
    Real(f64),
    /// Text, as the bytes stored (UTF-8 in the databases corescan reads).
    Text(Vec<u8>),
    /// A blob.
    Blob(Vec<u8>),
}

/// A value borrowed from a page, a record or a [`Value`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// NULL.
    Null,
    /// A signed 64-bit integer.
    Integer(i64),
    /// An IEEE double (never NaN).
    Real(f64),
    /// Text bytes.
    Text(&'a [u8]),
    /// Blob bytes.
    Blob(&'a [u8]),
}

/// The storage class of a value, as `typeof()` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StorageClass {
    /// `null`.
    Null,
    /// `integer`.
    Integer,
    /// `real`.
    Real,
    /// `text`.
    Text,
    /// `blob`.
    Blob,
}

impl StorageClass {
    /// The name `typeof()` returns.
    pub fn name(self) -> &'static str {
        match self {
            StorageClass::Null => "null",
            StorageClass::Integer => "integer",
            StorageClass::Real => "real",
            StorageClass::Text => "text",
            StorageClass::Blob => "blob",
        }
    }
}

/// A number as SQLite's arithmetic sees one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// An integer.
    Integer(i64),
    /// A real.
    Real(f64),
}

impl Number {
    /// The number as a double.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Integer(i) => i as f64,
            Number::Real(r) => r,
        }
    }
}

impl Value {
    /// A real, or NULL for NaN (SQLite never produces a NaN value).
    pub fn real(r: f64) -> Value {
        if r.is_nan() {
            Value::Null
        } else {
            Value::Real(r)
        }
    }

    /// Text from a string.
    pub fn text(s: impl Into<String>) -> Value {
        Value::Text(s.into().into_bytes())
    }

    /// Borrows the value.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(r) => ValueRef::Real(*r),
            Value::Text(t) => ValueRef::Text(t),
            Value::Blob(b) => ValueRef::Blob(b),
        }
    }

    /// Whether the value is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Self {
        match n {
            Number::Integer(i) => Value::Integer(i),
            Number::Real(r) => Value::real(r),
        }
    }
}

impl From<partitioner::DefaultValue> for Value {
    fn from(d: partitioner::DefaultValue) -> Self {
        use partitioner::DefaultValue as D;
        match d {
            D::Null => Value::Null,
            D::Integer(i) => Value::Integer(i),
            D::Real(r) => Value::real(r),
            D::Text(t) => Value::Text(t.into_bytes()),
            D::Blob(b) => Value::Blob(b),
        }
    }
}

impl<'a> ValueRef<'a> {
    /// An owned copy.
    pub fn to_owned(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Real(r) => Value::real(r),
            ValueRef::Text(t) => Value::Text(t.to_vec()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        }
    }

    /// The storage class.
    pub fn class(self) -> StorageClass {
        match self {
            ValueRef::Null => StorageClass::Null,
            ValueRef::Integer(_) => StorageClass::Integer,
            ValueRef::Real(_) => StorageClass::Real,
            ValueRef::Text(_) => StorageClass::Text,
            ValueRef::Blob(_) => StorageClass::Blob,
        }
    }

    /// Whether the value is NULL.
    pub fn is_null(self) -> bool {
        matches!(self, ValueRef::Null)
    }

    /// The value as SQLite's arithmetic reads it (`sqlite3VdbeMemNumerify` through
    /// `computeNumericType`); `None` for NULL. Text and blobs read their longest numeric
    /// prefix: `'12'` is 12, `' 1.5e1x'` is 15.0, `'12abc'` is 12, `'1.5x'` is 1.5, `'abc'` is 0.
    pub fn to_number(self) -> Option<Number> {
        match self {
            ValueRef::Null => None,
            ValueRef::Integer(i) => Some(Number::Integer(i)),
            ValueRef::Real(r) => Some(Number::Real(r)),
            ValueRef::Text(z) | ValueRef::Blob(z) => Some(text_to_number(z)),
        }
    }

    /// The value as an integer, as `CAST(x AS INTEGER)` and integer-taking functions read it
    /// (`sqlite3VdbeIntValue`); `None` for NULL. Reals truncate toward zero, saturating.
    pub fn to_i64(self) -> Option<i64> {
        match self {
            ValueRef::Null => None,
            ValueRef::Integer(i) => Some(i),
            ValueRef::Real(r) => Some(real_to_i64(r)),
            ValueRef::Text(z) | ValueRef::Blob(z) => Some(text_to_i64(z)),
        }
    }

    /// The value as a double (`sqlite3VdbeRealValue`); `None` for NULL.
    pub fn to_f64(self) -> Option<f64> {
        match self {
            ValueRef::Null => None,
            ValueRef::Integer(i) => Some(i as f64),
            ValueRef::Real(r) => Some(r),
            ValueRef::Text(z) | ValueRef::Blob(z) => Some(atof(z).1),
        }
    }

    /// The value as text, as SQLite renders it for `||`, text affinity and the text functions
    /// (`None` for NULL). Blobs are their bytes.
    pub fn to_text(self) -> Option<Cow<'a, [u8]>> {
        match self {
            ValueRef::Null => None,
            ValueRef::Integer(i) => Some(Cow::Owned(i.to_string().into_bytes())),
            ValueRef::Real(r) => Some(Cow::Owned(real_to_text(r).into_bytes())),
            ValueRef::Text(t) | ValueRef::Blob(t) => Some(Cow::Borrowed(t)),
        }
    }
}

/// `computeNumericType` (SQLite 3.54): the number the arithmetic operators read from text.
/// Without a `.` or exponent in the numeric prefix it is an integer when `sqlite3Atoi64`
/// reads one (with or without trailing text); otherwise the real the prefix spells.
pub fn text_to_number(z: &[u8]) -> Number {
    let (rc, r) = atof(z);
    let (code, i) = atoi64(z);
    let integral = rc & 2 == 0;
    if integral && (code == 0 || (rc <= 0 && code <= 1)) {
        Number::Integer(i)
    } else {
        Number::Real(r)
    }
}

/// `sqlite3VdbeIntValue` on text: the integer prefix (`'12abc'` is 12, `'1e3'` is 1).
fn text_to_i64(z: &[u8]) -> i64 {
    atoi64(z).1
}

/// `applyNumericAffinity(_, 0)` on text, as a comparison with numeric affinity applies it:
/// text that is wholly a number (spaces around it allowed) becomes that number, an integer
/// when it is written as one that fits; other text is left alone (`None`).
pub fn numeric_affinity_of_text(z: &[u8]) -> Option<Number> {
    // Most text compared under a numeric affinity is no number at all (a `'1994-01-01'` date
    // in a DATE column): say so without computing the value of its numeric prefix.
    if !is_whole_number(z) {
        return None;
    }
    let (rc, r) = atof(z);
    if rc <= 0 {
        return None;
    }
    if rc & 2 == 0 {
        // `alsoAnInt`.
        let i = real_to_i64(r);
        if real_same_as_int(r, i) {
            return Some(Number::Integer(i));
        }
        if let (0, i) = atoi64(z) {
            return Some(Number::Integer(i));
        }
    }
    Some(Number::Real(r))
}

/// Whether `z` has the shape `sqlite3AtoF` accepts as wholly a number: optional spaces, a
/// sign, digits with an optional fraction (at least one digit), an optional exponent with
/// digits, optional spaces, and nothing else (a NUL ends the text, as for SQLite).
fn is_whole_number(z: &[u8]) -> bool {
    let z = z.split(|&b| b == 0).next().unwrap_or(&[]);
    let space = |b: &u8| partitioner::numeric_text::is_space(*b);
    let start = z.iter().position(|b| !space(b)).unwrap_or(z.len());
    let end = z.iter().rposition(|b| !space(b)).map_or(start, |p| p + 1);
    let t = &z[start..end];
    let mut i = usize::from(matches!(t.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let from = *i;
        while t.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    let mut n = digits(&mut i);
    if t.get(i) == Some(&b'.') {
        i += 1;
        n += digits(&mut i);
    }
    if n == 0 {
        return false;
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(t.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == t.len()
}

/// A real rendered as text exactly as SQLite renders it (`vdbeMemRenderNum`: `%!.17g`
/// through SQLite's own `sqlite3FpDecode`, which keeps seventeen significant digits but cuts
/// them shorter when a shorter form it tries reads back as the same double): `0.1`, `100.0`,
/// `1.0e+20`, `1.5e-05`, `0.33333333333333331`, `Inf`, `-Inf`.
///
/// SQLite's digit generation is an approximation with its own rounding (a correctly rounded
/// seventeen-digit form differs in about one value in a thousand), so this calls SQLite's
/// `sqlite3_snprintf` from the bundled library, the same code the oracle runs, rather than
/// reimplementing it.
pub fn real_to_text(r: f64) -> String {
    let mut out = Vec::with_capacity(24);
    push_real_text(r, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Appends [`real_to_text`]'s text of `r` to `out`, allocating nothing (the output formats
/// render millions of reals). SQLite's formatting costs about 150 ns; a column's reals often
/// repeat (prices, rates, quantities), so each thread keeps the texts of the last reals it
/// formatted in a small direct-mapped cache keyed by their bits.
pub fn push_real_text(r: f64, out: &mut Vec<u8>) {
    thread_local! {
        static TEXTS: std::cell::RefCell<Vec<RealText>> =
            std::cell::RefCell::new(vec![RealText::EMPTY; REAL_TEXTS]);
    }
    let bits = r.to_bits();
    // Fibonacci hashing of the bits: neighbouring values spread over the slots.
    let slot =
        (bits.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - REAL_TEXTS.trailing_zeros())) as usize;
    TEXTS.with(|texts| {
        let mut texts = texts.borrow_mut();
        let t = &mut texts[slot];
        if t.len == 0 || t.bits != bits {
            *t = RealText::of(r);
        }
        out.extend_from_slice(&t.text[..usize::from(t.len)]);
    });
}

/// Slots of [`push_real_text`]'s cache (a power of two).
const REAL_TEXTS: usize = 1024;

/// A real's text as [`real_to_text`] makes it (at most 25 bytes: `-1.2345678901234567e-308`).
#[derive(Clone, Copy)]
struct RealText {
    bits: u64,
    len: u8,
    text: [u8; 31],
}

impl RealText {
    const EMPTY: RealText = RealText {
        bits: 0,
        len: 0,
        text: [0; 31],
    };

    fn of(r: f64) -> RealText {
        let mut buf = [0u8; 40];
        // SAFETY: the buffer is writable for its length, the format is NUL-terminated and
        // takes exactly one double; sqlite3_snprintf always NUL-terminates within the given
        // size and needs no initialised library (it allocates nothing).
        unsafe {
            libsqlite3_sys::sqlite3_snprintf(
                buf.len() as std::ffi::c_int,
                buf.as_mut_ptr().cast(),
                c"%!.17g".as_ptr(),
                r,
            );
        }
        let len = buf
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(buf.len())
            .min(31);
        let mut text = [0u8; 31];
        text[..len].copy_from_slice(&buf[..len]);
        RealText {
            bits: r.to_bits(),
            len: len as u8,
            text,
        }
    }
}

impl fmt::Display for ValueRef<'_> {
    /// As the `sqlite3` shell prints a value in list mode: NULL as empty, reals as
    /// [`real_to_text`], text and blobs as their bytes (lossily as UTF-8).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Null => Ok(()),
            ValueRef::Integer(i) => write!(f, "{i}"),
            ValueRef::Real(r) => f.write_str(&real_to_text(*r)),
            ValueRef::Text(t) | ValueRef::Blob(t) => f.write_str(&String::from_utf8_lossy(t)),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_render_as_sqlite_does() {
        for (r, text) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.33333333333333332"),
            (123456789012345.0, "123456789012345.0"),
            (1e15, "1000000000000000.0"),
            (1e17, "1.0e+17"),
            (1e20, "1.0e+20"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (-2.5, "-2.5"),
            (1e100, "1.0e+100"),
            (f64::INFINITY, "Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (0.0, "0.0"),
            (0.06999999999999999, "0.069999999999999993"),
        ] {
            assert_eq!(real_to_text(r), text, "{r:?}");
        }
    }

    #[test]
    fn text_reads_as_the_arithmetic_reads_it() {
        assert_eq!(text_to_number(b"12"), Number::Integer(12));
        assert_eq!(text_to_number(b" 12 "), Number::Integer(12));
        assert_eq!(text_to_number(b"12abc"), Number::Integer(12));
        assert_eq!(text_to_number(b"1.5abc"), Number::Real(1.5));
        assert_eq!(text_to_number(b"abc"), Number::Integer(0));
        assert_eq!(text_to_number(b"1.5"), Number::Real(1.5));
        assert_eq!(text_to_number(b"1e3"), Number::Real(1000.0));
        assert_eq!(text_to_number(b""), Number::Integer(0));
        assert_eq!(text_to_number(b"0"), Number::Integer(0));
    }

    #[test]
    fn numeric_affinity_takes_only_whole_numbers() {
        assert_eq!(numeric_affinity_of_text(b"24"), Some(Number::Integer(24)));
        assert_eq!(numeric_affinity_of_text(b" 24 "), Some(Number::Integer(24)));
        assert_eq!(numeric_affinity_of_text(b"0.06"), Some(Number::Real(0.06)));
        assert_eq!(numeric_affinity_of_text(b"24x"), None);
        assert_eq!(numeric_affinity_of_text(b""), None);
        assert_eq!(numeric_affinity_of_text(b"0"), Some(Number::Integer(0)));
        assert_eq!(
            numeric_affinity_of_text(b"9223372036854775808"),
            Some(Number::Real(9223372036854775808.0))
        );
    }

    #[test]
    fn the_whole_number_shape_is_what_atof_accepts() {
        let alphabet = b" 0123456789.eE+-x\t\0a";
        let mut rng = testkit::Rng::xorshift64(0x1234_5678_9abc_def0);
        let mut cases: Vec<Vec<u8>> = [
            "",
            " ",
            "1",
            "-1",
            "+.5",
            "5.",
            ".",
            "1e",
            "1e+",
            "1e5",
            " 12 ",
            "1 2",
            "0x10",
            "1994-01-01",
            "--1",
            "1.2.3",
            "e5",
            "1\u{0}x",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        for _ in 0..20_000 {
            let seed = rng.next_u64();
            let len = (seed % 7) as usize;
            let case = (0..len)
                .map(|k| alphabet[((seed >> (8 * k + 3)) % alphabet.len() as u64) as usize])
                .collect();
            cases.push(case);
        }
        for z in cases {
            assert_eq!(
                is_whole_number(&z),
                atof(&z).0 > 0,
                "{:?}",
                String::from_utf8_lossy(&z)
            );
        }
    }

    #[test]
    fn nan_is_null() {
        assert_eq!(Value::real(f64::NAN), Value::Null);
        assert_eq!(ValueRef::Real(f64::NAN).to_owned(), Value::Null);
    }
}
