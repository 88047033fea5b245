//! Rows of SQLite values into Arrow record batches, strictly: a [`Converter`] turns an engine
//! [`Batch`](engine::Batch)'s rows (the rowid first, then the projected columns) into one
//! `RecordBatch` of the columns' Arrow types ([`ColumnType`]).
//!
//! A value either converts exactly or is an error naming the file, table, column, rowid and the
//! value's storage class ([`ConversionError`]); NULL is NULL in every type. What converts:
//!
//! - `Int64`: integers; a real only when it is a whole number in range (SQLite's INTEGER
//!   affinity would have stored it as an integer); text only when it is exactly a whole
//!   number (`-12`: a column of numbers kept as text, read as integers).
//! - `Float64` (REAL affinity): reals, and integers (SQLite reads them as reals).
//! - `Float64` for a NUMERIC column without a precision: reals, and integers a double holds
//!   exactly (up to 2^53).
//! - `Utf8`: text that is valid UTF-8.
//! - `Utf8` read from any value (`AnyText`): integers and reals as SQLite's `CAST(x AS TEXT)`
//!   writes them, text and blobs that are valid UTF-8.
//! - `Binary`: blobs, and text as its bytes.
//! - `Decimal128(p, s)`: an integer scaled by 10^s; a real when it is the double nearest to a
//!   decimal with at most `s` fraction digits (SQLite stores `0.05` as the double nearest to
//!   0.05): `round(x * 10^s)` converted back must give `x` exactly, and must be at most 2^52 so
//!   that no other such decimal has the same double; text only when it is exactly a decimal
//!   of at most `s` fraction digits (`12.50`); each must fit `p` digits.
//! - `Date32`: text `YYYY-MM-DD`; `Timestamp`: ISO-8601 text ([`crate::temporal`]).
//! - `Boolean`: the integers 0 and 1.
//!
//! Everything else (text in a numeric column, a number in a date column, a real with more
//! fraction digits than the decimal's scale) is refused: SQLite's affinity has already
//! converted every value that looked like the column's type when it was stored, so what is
//! left is data the declared type does not describe.
//!
//! Layering: above [`crate::types`], [`crate::temporal`] and [`crate::error`].

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
    StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use engine::value::{real_to_text, Value};

use crate::error::{ConversionError, Error};
use crate::temporal::{parse_date, parse_timestamp};
use crate::types::ColumnType;

/// 10^0 ..= 10^22: every one an exact double.
const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The largest scaled decimal a real converts to: below 2^52 the doubles are closer together
/// than the decimals of the scale, so one double is the nearest to at most one decimal.
const MAX_EXACT_SCALED: f64 = 4_503_599_627_370_496.0;

/// One projected column: its name as the schema spells it and its type.
#[derive(Debug, Clone)]
pub struct ConvertColumn {
    /// The column's name in the schema.
    pub name: String,
    /// Its Arrow type.
    pub ty: ColumnType,
}

/// Converts one scan's rows into record batches of `schema`.
#[derive(Debug)]
pub struct Converter {
    /// The database file (for messages).
    pub path: PathBuf,
    /// The table as the schema spells it (for messages).
    pub table: String,
    /// The projected columns, in the schema's order.
    pub columns: Vec<ConvertColumn>,
    /// Whether each row starts with the rowid (for messages, and for the row count of a
    /// projection of no columns).
    pub rowid_first: bool,
    /// The batches' schema.
    pub schema: SchemaRef,
}

impl Converter {
    /// `rows` as one record batch.
    pub fn batch(&self, rows: &[Vec<Value>]) -> Result<RecordBatch, Error> {
        let skip = usize::from(self.rowid_first);
        let arrays = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| self.array(rows, i + skip, c))
            .collect::<Result<Vec<_>, _>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
        RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options).map_err(|e| {
            Error::Unsupported {
                path: self.path.clone(),
                table: self.table.clone(),
                column: String::new(),
                reason: format!("building an Arrow batch: {e}"),
            }
        })
    }

    fn unsupported(&self, column: &ConvertColumn, reason: String) -> Error {
        Error::Unsupported {
            path: self.path.clone(),
            table: self.table.clone(),
            column: column.name.clone(),
            reason,
        }
    }

    /// Column `at` of `rows` as an array of `column`'s type.
    fn array(
        &self,
        rows: &[Vec<Value>],
        at: usize,
        column: &ConvertColumn,
    ) -> Result<ArrayRef, Error> {
        let values = || rows.iter().map(move |r| &r[at]);
        let fail =
            |row: usize, reason: String| self.conversion_error(&rows[row], at, column, reason);
        Ok(match column.ty {
            ColumnType::Int64 => Arc::new(Int64Array::from(collect(values(), fail, to_i64)?)),
            ColumnType::Float64 => Arc::new(Float64Array::from(collect(values(), fail, to_f64)?)),
            ColumnType::Numeric => {
                Arc::new(Float64Array::from(collect(values(), fail, to_f64_exact)?))
            }
            ColumnType::Utf8 => Arc::new(StringArray::from(collect(values(), fail, to_str)?)),
            ColumnType::AnyText => {
                let texts = collect(values(), fail, to_any_text)?;
                Arc::new(texts.iter().map(Option::as_deref).collect::<StringArray>())
            }
            ColumnType::Binary => Arc::new(BinaryArray::from(collect(values(), fail, to_bytes)?)),
            ColumnType::Decimal { precision, scale } => {
                let v = collect(values(), fail, |v| to_decimal(v, precision, scale))?;
                let array = Decimal128Array::from(v)
                    .with_precision_and_scale(precision, scale as i8)
                    .map_err(|e| self.unsupported(column, e.to_string()))?;
                Arc::new(array)
            }
            ColumnType::Date32 => Arc::new(Date32Array::from(collect(values(), fail, to_date)?)),
            ColumnType::Timestamp => Arc::new(TimestampMicrosecondArray::from(collect(
                values(),
                fail,
                to_timestamp,
            )?)),
            ColumnType::Boolean => Arc::new(BooleanArray::from(collect(values(), fail, to_bool)?)),
        })
    }

    fn conversion_error(
        &self,
        row: &[Value],
        at: usize,
        column: &ConvertColumn,
        reason: String,
    ) -> Error {
        let value = &row[at];
        let rowid = match (self.rowid_first, row.first()) {
            (true, Some(Value::Integer(r))) => Some(*r),
            _ => None,
        };
        Error::Conversion(Box::new(ConversionError {
            path: self.path.clone(),
            table: self.table.clone(),
            column: column.name.clone(),
            rowid,
            class: value.as_ref().class(),
            value: shown(value),
            expected: column.ty.to_string(),
            reason,
        }))
    }
}

/// The values converted by `convert`, or the first failure (by row) through `fail`.
fn collect<'a, T>(
    values: impl Iterator<Item = &'a Value>,
    fail: impl Fn(usize, String) -> Error,
    convert: impl Fn(&'a Value) -> Result<T, String>,
) -> Result<Vec<Option<T>>, Error> {
    values
        .enumerate()
        .map(|(row, v)| match v {
            Value::Null => Ok(None),
            v => convert(v).map(Some).map_err(|reason| fail(row, reason)),
        })
        .collect()
}

fn to_i64(v: &Value) -> Result<i64, String> {
    match *v {
        Value::Integer(i) => Ok(i),
        // -2^63 ..= 2^63 - 1024 (the largest double below 2^63).
        Value::Real(r)
            if r.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r) =>
        {
            Ok(r as i64)
        }
        Value::Real(_) => Err("not a whole number in the range of a 64-bit integer".into()),
        Value::Text(ref t) => integer_text(t).ok_or_else(|| "not an integer".into()),
        _ => Err("not an integer".into()),
    }
}

fn to_f64(v: &Value) -> Result<f64, String> {
    match *v {
        Value::Integer(i) => Ok(i as f64),
        Value::Real(r) => Ok(r),
        _ => Err("not a number".into()),
    }
}

fn to_f64_exact(v: &Value) -> Result<f64, String> {
    match *v {
        Value::Integer(i) if i.unsigned_abs() <= 1 << 53 => Ok(i as f64),
        Value::Integer(_) => Err("an integer a double cannot hold exactly".into()),
        Value::Real(r) => Ok(r),
        _ => Err("not a number".into()),
    }
}

fn to_str(v: &Value) -> Result<&str, String> {
    match v {
        Value::Text(t) => {
            std::str::from_utf8(t).map_err(|e| format!("text that is not UTF-8 ({e})"))
        }
        _ => Err("not text".into()),
    }
}

fn to_any_text(v: &Value) -> Result<std::borrow::Cow<'_, str>, String> {
    match v {
        Value::Integer(i) => Ok(i.to_string().into()),
        Value::Real(r) => Ok(real_to_text(*r).into()),
        Value::Text(t) | Value::Blob(t) => std::str::from_utf8(t)
            .map(Into::into)
            .map_err(|e| format!("bytes that are not UTF-8 text ({e})")),
        Value::Null => Err("NULL".into()),
    }
}

fn to_bytes(v: &Value) -> Result<&[u8], String> {
    match v {
        Value::Blob(b) | Value::Text(b) => Ok(b),
        _ => Err("not a blob or text".into()),
    }
}

/// The decimal of `scale` fraction digits that `v` is exactly, as its scaled integer.
fn to_decimal(v: &Value, precision: u8, scale: u8) -> Result<i128, String> {
    let scaled = match *v {
        Value::Integer(i) => i128::from(i)
            .checked_mul(10i128.pow(u32::from(scale)))
            .ok_or_else(|| "too large".to_string())?,
        Value::Real(r) => {
            let pow = POW10_F64[usize::from(scale)];
            let n = (r * pow).round();
            if !n.is_finite() || n.abs() > MAX_EXACT_SCALED {
                return Err(format!(
                    "a real with more significant digits than a decimal of scale {scale} can \
                     be read from exactly"
                ));
            }
            // Both are exact doubles, so the division is the double nearest to the decimal.
            if n / pow != r {
                return Err(format!(
                    "not a decimal with at most {scale} fraction digits"
                ));
            }
            n as i128
        }
        Value::Text(ref t) => decimal_text(t, scale)
            .ok_or_else(|| format!("not a number written with at most {scale} fraction digits"))?,
        _ => return Err("not a number".into()),
    };
    if scaled.unsigned_abs() >= 10u128.pow(u32::from(precision)) {
        return Err(format!("more than {precision} digits"));
    }
    Ok(scaled)
}

/// Text that is exactly a whole number (`-12`, `+7`: digits with an optional sign, nothing
/// else), as an integer; `None` for anything else or out of range.
fn integer_text(t: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(t).ok()?;
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Text that is exactly a decimal number with at most `scale` fraction digits (`12.50`,
/// `-3`, `.5`: digits, an optional sign and point, nothing else), scaled by 10^scale.
fn decimal_text(t: &[u8], scale: u8) -> Option<i128> {
    let s = std::str::from_utf8(t).ok()?;
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty())
        || !all_digits(int)
        || !all_digits(frac)
        || frac.len() > usize::from(scale)
        || int.len() > 38
    {
        return None;
    }
    let mut v: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    v = v.checked_mul(10i128.checked_pow(u32::from(scale) - frac.len() as u32)?)?;
    Some(if negative { -v } else { v })
}

fn to_date(v: &Value) -> Result<i32, String> {
    match v {
        Value::Text(t) => parse_date(t).ok_or_else(|| "not a date as 'YYYY-MM-DD'".to_string()),
        _ => Err("not a date as 'YYYY-MM-DD' text".into()),
    }
}

fn to_timestamp(v: &Value) -> Result<i64, String> {
    match v {
        Value::Text(t) => {
            parse_timestamp(t).ok_or_else(|| "not an ISO-8601 date and time".to_string())
        }
        _ => Err("not an ISO-8601 date and time text".into()),
    }
}

fn to_bool(v: &Value) -> Result<bool, String> {
    match *v {
        Value::Integer(0) => Ok(false),
        Value::Integer(1) => Ok(true),
        _ => Err("not 0 or 1".into()),
    }
}

/// A value as a message shows it: numbers as SQLite prints them, text quoted, blobs in hex,
/// either cut after 40 characters.
fn shown(v: &Value) -> String {
    const MAX: usize = 40;
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => real_to_text(*r),
        Value::Text(t) => {
            let text = String::from_utf8_lossy(t);
            let mut cut: String = text.chars().take(MAX).collect();
            if cut.len() < text.len() {
                cut.push_str("...");
            }
            format!("{cut:?}")
        }
        Value::Blob(b) => {
            let hex: String = b.iter().take(MAX / 2).map(|x| format!("{x:02x}")).collect();
            let more = if b.len() > MAX / 2 { "..." } else { "" };
            format!("x'{hex}{more}'")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_convert_to_decimals_only_when_they_are_one_exactly() {
        assert_eq!(to_decimal(&Value::Real(0.05), 15, 2), Ok(5));
        assert_eq!(to_decimal(&Value::Real(-1234.56), 15, 2), Ok(-123_456));
        assert_eq!(
            to_decimal(&Value::Real(0.1 + 0.2), 15, 2).map_err(|_| ()),
            Err(())
        );
        assert_eq!(
            to_decimal(&Value::Real(0.123), 15, 2).map_err(|_| ()),
            Err(())
        );
        assert_eq!(to_decimal(&Value::Real(0.123), 15, 3), Ok(123));
        assert_eq!(to_decimal(&Value::Integer(17), 15, 2), Ok(1700));
        assert_eq!(
            to_decimal(&Value::Integer(1000), 3, 0).map_err(|_| ()),
            Err(())
        );
        assert_eq!(to_decimal(&Value::Integer(999), 3, 0), Ok(999));
        assert_eq!(
            to_decimal(&Value::Real(1e300), 15, 2).map_err(|_| ()),
            Err(())
        );
        // Text that is exactly a decimal (a column of numbers kept as text, read as one).
        assert_eq!(to_decimal(&Value::text("1.5"), 15, 2), Ok(150));
        assert_eq!(to_decimal(&Value::text("-12.50"), 15, 2), Ok(-1250));
        assert_eq!(to_decimal(&Value::text(".5"), 15, 2), Ok(50));
        assert_eq!(to_decimal(&Value::text("1."), 15, 2), Ok(100));
        for bad in ["1.505", "1e3", " 1", "", "-", "0x10", "1,5", ".", "--1"] {
            assert!(to_decimal(&Value::text(bad), 15, 2).is_err(), "{bad:?}");
        }
        // Every cent value of a DECIMAL(15,2) column up to a billion round-trips.
        for cents in (-100_000_000_000i64..100_000_000_000).step_by(9_999_991) {
            let r = cents as f64 / 100.0;
            assert_eq!(to_decimal(&Value::Real(r), 15, 2), Ok(i128::from(cents)));
        }
    }

    #[test]
    fn integers_and_booleans_are_strict() {
        assert_eq!(to_i64(&Value::Real(3.0)), Ok(3));
        assert!(to_i64(&Value::Real(3.5)).is_err());
        assert!(to_i64(&Value::Real(1e19)).is_err());
        assert!(to_i64(&Value::text("abc")).is_err());
        assert_eq!(to_i64(&Value::text("-12")), Ok(-12));
        for bad in ["1.0", " 1", "", "+", "99999999999999999999"] {
            assert!(to_i64(&Value::text(bad)).is_err(), "{bad:?}");
        }
        assert!(to_f64_exact(&Value::Integer((1 << 53) + 1)).is_err());
        assert_eq!(to_bool(&Value::Integer(1)), Ok(true));
        assert!(to_bool(&Value::Integer(2)).is_err());
    }

    #[test]
    fn messages_show_values_briefly() {
        assert_eq!(shown(&Value::text("abc")), "\"abc\"");
        assert_eq!(shown(&Value::Real(0.5)), "0.5");
        assert_eq!(shown(&Value::Blob(vec![1, 255])), "x'01ff'");
        assert!(shown(&Value::text("x".repeat(100))).ends_with("...\""));
    }
}
