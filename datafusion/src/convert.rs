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

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder,
    Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use engine::value::{real_to_text, Value, ValueRef};
use engine::{BatchSink, SinkRows};

use crate::error::{ConversionError, Error};
use crate::temporal::{parse_date, parse_timestamp};
use crate::types::ColumnType;

/// 10^0 ..= 10^22: every one an exact double.
const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// 10^0 ..= 10^38, the scales and precisions of a `Decimal128`.
const POW10_I128: [i128; 39] = {
    let mut t = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// `x` rounded to a nearby whole number: to nearest (ties to even) with two additions below
/// 2^51, where the sum's last bit is the units digit. Any rounding to one of the two nearest
/// whole numbers serves [`to_decimal`], whose check refuses a real halfway between decimals.
#[inline]
fn round_near(x: f64) -> f64 {
    const HALF_RANGE: f64 = 2_251_799_813_685_248.0; // 2^51
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    if x.abs() < HALF_RANGE {
        (x + MAGIC) - MAGIC
    } else {
        x.round()
    }
}

/// The largest scaled decimal a real converts to: below 2^52 the doubles are closer together
/// than the decimals of the scale, so one double is the nearest to at most one decimal.
const MAX_EXACT_SCALED: f64 = 4_503_599_627_370_496.0;

/// Bytes of text and blobs a sink gathers before it sends its batch, whatever its rows.
const SINK_BATCH_BYTES: usize = 16 << 20;

/// One projected column: its name as the schema spells it and its type.
#[derive(Debug, Clone)]
pub struct ConvertColumn {
    /// The column's name in the schema.
    pub name: String,
    /// Its Arrow type.
    pub ty: ColumnType,
}

/// Converts one scan's rows into record batches of `schema`.
#[derive(Debug, Clone)]
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
        let mut builders = self.builders(rows.len());
        let skip = usize::from(self.rowid_first);
        let mut bytes = 0;
        let mut values = Vec::with_capacity(rows.len());
        for (i, (c, b)) in self.columns.iter().zip(&mut builders).enumerate() {
            values.clear();
            values.extend(rows.iter().map(|r| r[i + skip].as_ref()));
            b.append(&values, &mut bytes).map_err(|(k, reason)| {
                let rowid = match (self.rowid_first, rows[k].first()) {
                    (true, Some(Value::Integer(r))) => Some(*r),
                    _ => None,
                };
                self.conversion_error(rowid, values[k], c, reason)
            })?;
        }
        self.finish(&mut builders, rows.len())
    }

    /// A builder for each column, with room for `rows` values.
    fn builders(&self, rows: usize) -> Vec<ColumnBuilder> {
        self.columns
            .iter()
            .map(|c| ColumnBuilder::new(c.ty, rows))
            .collect()
    }

    /// The builders' arrays (emptying them) as a record batch of `rows` rows.
    fn finish(&self, builders: &mut [ColumnBuilder], rows: usize) -> Result<RecordBatch, Error> {
        let arrays = builders
            .iter_mut()
            .zip(&self.columns)
            .map(|(b, c)| b.finish().map_err(|reason| self.unsupported(c, reason)))
            .collect::<Result<Vec<ArrayRef>, Error>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options).map_err(|e| {
            Error::Unsupported {
                path: self.path.clone(),
                table: self.table.clone(),
                column: String::new(),
                reason: format!("building an Arrow batch: {e}"),
            }
        })
    }

    /// A sink building this converter's batches on an executor, `batch_rows` rows each (see
    /// [`ArrowSink`]).
    pub fn sink(self: &Arc<Self>, batch_rows: usize) -> ArrowSink {
        ArrowSink {
            builders: self.builders(batch_rows),
            converter: Arc::clone(self),
            rows: 0,
            bytes: 0,
            batch_rows: batch_rows.max(1),
            failure: None,
        }
    }

    fn unsupported(&self, column: &ConvertColumn, reason: String) -> Error {
        Error::Unsupported {
            path: self.path.clone(),
            table: self.table.clone(),
            column: column.name.clone(),
            reason,
        }
    }

    fn conversion_error(
        &self,
        rowid: Option<i64>,
        value: ValueRef<'_>,
        column: &ConvertColumn,
        reason: String,
    ) -> Error {
        Error::Conversion(Box::new(ConversionError {
            path: self.path.clone(),
            table: self.table.clone(),
            column: column.name.clone(),
            rowid,
            class: value.class(),
            value: shown(value),
            expected: column.ty.to_string(),
            reason,
        }))
    }
}

/// What an [`ArrowSink`] hands over: a record batch, or the first value that did not convert.
pub type SinkBatch = Result<RecordBatch, Error>;

/// Builds one partition's record batches on its executor's thread ([`BatchSink`]): each
/// page's selected rows are appended column by column to Arrow builders, straight from the
/// decoded cells where the engine can, and a batch is sent every `batch_rows` rows (or
/// [`SINK_BATCH_BYTES`] of text). Its batches are [`SinkBatch`]es; the first value that does
/// not convert ends the partition with its [`ConversionError`].
pub struct ArrowSink {
    converter: Arc<Converter>,
    builders: Vec<ColumnBuilder>,
    rows: usize,
    bytes: usize,
    batch_rows: usize,
    failure: Option<Error>,
}

impl BatchSink for ArrowSink {
    fn append(&mut self, rows: &SinkRows<'_>) -> bool {
        let c = &*self.converter;
        let skip = usize::from(c.rowid_first);
        let mut values = Vec::with_capacity(rows.len());
        for (i, (column, b)) in c.columns.iter().zip(&mut self.builders).enumerate() {
            rows.column(i + skip, &mut values);
            if let Err((k, reason)) = b.append(&values, &mut self.bytes) {
                let error = c.conversion_error(Some(rows.rowid(k)), values[k], column, reason);
                self.failure = Some(error);
                return false;
            }
        }
        self.rows += rows.len();
        true
    }

    fn len(&self) -> usize {
        self.rows
    }

    fn is_full(&self) -> bool {
        self.rows >= self.batch_rows || self.bytes >= SINK_BATCH_BYTES
    }

    fn take(&mut self) -> Box<dyn Any + Send> {
        let batch: SinkBatch = match self.failure.take() {
            Some(e) => Err(e),
            None => self.converter.finish(&mut self.builders, self.rows),
        };
        self.rows = 0;
        self.bytes = 0;
        Box::new(batch)
    }
}

/// An Arrow builder for one column's type.
enum ColumnBuilder {
    Int64(Int64Builder),
    /// `Float64` (REAL affinity): reals and integers.
    Float64(Float64Builder),
    /// `Float64` of a NUMERIC column without a precision: integers only when exact.
    Numeric(Float64Builder),
    Utf8(StringBuilder),
    AnyText(StringBuilder),
    Binary(BinaryBuilder),
    Decimal(Decimal128Builder, u8, u8),
    Date32(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Boolean(BooleanBuilder),
}

impl ColumnBuilder {
    fn new(ty: ColumnType, rows: usize) -> Self {
        match ty {
            ColumnType::Int64 => ColumnBuilder::Int64(Int64Builder::with_capacity(rows)),
            ColumnType::Float64 => ColumnBuilder::Float64(Float64Builder::with_capacity(rows)),
            ColumnType::Numeric => ColumnBuilder::Numeric(Float64Builder::with_capacity(rows)),
            ColumnType::Utf8 => ColumnBuilder::Utf8(StringBuilder::with_capacity(rows, rows * 16)),
            ColumnType::AnyText => {
                ColumnBuilder::AnyText(StringBuilder::with_capacity(rows, rows * 16))
            }
            ColumnType::Binary => {
                ColumnBuilder::Binary(BinaryBuilder::with_capacity(rows, rows * 16))
            }
            ColumnType::Decimal { precision, scale } => {
                ColumnBuilder::Decimal(Decimal128Builder::with_capacity(rows), precision, scale)
            }
            ColumnType::Date32 => ColumnBuilder::Date32(Date32Builder::with_capacity(rows)),
            ColumnType::Timestamp => {
                ColumnBuilder::Timestamp(TimestampMicrosecondBuilder::with_capacity(rows))
            }
            ColumnType::Boolean => ColumnBuilder::Boolean(BooleanBuilder::with_capacity(rows)),
        }
    }

    /// Appends `values`; the first that does not convert stops it, as its index and why
    /// (the values before it stay appended). Text and blob bytes are added to `bytes`.
    fn append(
        &mut self,
        values: &[ValueRef<'_>],
        bytes: &mut usize,
    ) -> Result<(), (usize, String)> {
        match self {
            ColumnBuilder::Int64(b) => append_with(values, |v| b.append_option(v), to_i64),
            ColumnBuilder::Float64(b) => append_with(values, |v| b.append_option(v), to_f64),
            ColumnBuilder::Numeric(b) => append_with(values, |v| b.append_option(v), to_f64_exact),
            ColumnBuilder::Utf8(b) => append_with(
                values,
                |v: Option<&str>| {
                    *bytes += v.map_or(0, str::len);
                    b.append_option(v)
                },
                to_str,
            ),
            ColumnBuilder::AnyText(b) => append_with(
                values,
                |v: Option<std::borrow::Cow<'_, str>>| {
                    *bytes += v.as_ref().map_or(0, |t| t.len());
                    b.append_option(v)
                },
                to_any_text,
            ),
            ColumnBuilder::Binary(b) => append_with(
                values,
                |v: Option<&[u8]>| {
                    *bytes += v.map_or(0, <[u8]>::len);
                    b.append_option(v)
                },
                to_bytes,
            ),
            ColumnBuilder::Decimal(b, precision, scale) => {
                let (p, s) = (*precision, *scale);
                append_with(values, |v| b.append_option(v), |v| to_decimal(v, p, s))
            }
            ColumnBuilder::Date32(b) => append_with(values, |v| b.append_option(v), to_date),
            ColumnBuilder::Timestamp(b) => {
                append_with(values, |v| b.append_option(v), to_timestamp)
            }
            ColumnBuilder::Boolean(b) => append_with(values, |v| b.append_option(v), to_bool),
        }
    }

    /// The array of the values appended since the last call.
    fn finish(&mut self) -> Result<ArrayRef, String> {
        Ok(match self {
            ColumnBuilder::Int64(b) => Arc::new(b.finish()),
            ColumnBuilder::Float64(b) | ColumnBuilder::Numeric(b) => Arc::new(b.finish()),
            ColumnBuilder::Utf8(b) | ColumnBuilder::AnyText(b) => Arc::new(b.finish()),
            ColumnBuilder::Binary(b) => Arc::new(b.finish()),
            ColumnBuilder::Decimal(b, precision, scale) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*precision, *scale as i8)
                    .map_err(|e| e.to_string())?,
            ),
            ColumnBuilder::Date32(b) => Arc::new(b.finish()),
            ColumnBuilder::Timestamp(b) => Arc::new(b.finish()),
            ColumnBuilder::Boolean(b) => Arc::new(b.finish()),
        })
    }
}

/// Appends `values` converted by `convert` through `append` (NULL as `None`); the first
/// failure stops it, as its index and why.
#[inline]
fn append_with<'v, T>(
    values: &[ValueRef<'v>],
    mut append: impl FnMut(Option<T>),
    convert: impl Fn(ValueRef<'v>) -> Result<T, String>,
) -> Result<(), (usize, String)> {
    for (k, &v) in values.iter().enumerate() {
        match v {
            ValueRef::Null => append(None),
            v => append(Some(convert(v).map_err(|reason| (k, reason))?)),
        }
    }
    Ok(())
}

fn to_i64(v: ValueRef<'_>) -> Result<i64, String> {
    match v {
        ValueRef::Integer(i) => Ok(i),
        // -2^63 ..= 2^63 - 1024 (the largest double below 2^63).
        ValueRef::Real(r)
            if r.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r) =>
        {
            Ok(r as i64)
        }
        ValueRef::Real(_) => Err("not a whole number in the range of a 64-bit integer".into()),
        ValueRef::Text(t) => integer_text(t).ok_or_else(|| "not an integer".into()),
        _ => Err("not an integer".into()),
    }
}

fn to_f64(v: ValueRef<'_>) -> Result<f64, String> {
    match v {
        ValueRef::Integer(i) => Ok(i as f64),
        ValueRef::Real(r) => Ok(r),
        _ => Err("not a number".into()),
    }
}

fn to_f64_exact(v: ValueRef<'_>) -> Result<f64, String> {
    match v {
        ValueRef::Integer(i) if i.unsigned_abs() <= 1 << 53 => Ok(i as f64),
        ValueRef::Integer(_) => Err("an integer a double cannot hold exactly".into()),
        ValueRef::Real(r) => Ok(r),
        _ => Err("not a number".into()),
    }
}

fn to_str(v: ValueRef<'_>) -> Result<&str, String> {
    match v {
        ValueRef::Text(t) => {
            std::str::from_utf8(t).map_err(|e| format!("text that is not UTF-8 ({e})"))
        }
        _ => Err("not text".into()),
    }
}

fn to_any_text(v: ValueRef<'_>) -> Result<std::borrow::Cow<'_, str>, String> {
    match v {
        ValueRef::Integer(i) => Ok(i.to_string().into()),
        ValueRef::Real(r) => Ok(real_to_text(r).into()),
        ValueRef::Text(t) | ValueRef::Blob(t) => std::str::from_utf8(t)
            .map(Into::into)
            .map_err(|e| format!("bytes that are not UTF-8 text ({e})")),
        ValueRef::Null => Err("NULL".into()),
    }
}

fn to_bytes(v: ValueRef<'_>) -> Result<&[u8], String> {
    match v {
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(b),
        _ => Err("not a blob or text".into()),
    }
}

/// The decimal of `scale` fraction digits that `v` is exactly, as its scaled integer.
fn to_decimal(v: ValueRef<'_>, precision: u8, scale: u8) -> Result<i128, String> {
    let scaled = match v {
        ValueRef::Integer(i) => i128::from(i)
            .checked_mul(POW10_I128[usize::from(scale)])
            .ok_or_else(|| "too large".to_string())?,
        ValueRef::Real(r) => {
            let pow = POW10_F64[usize::from(scale)];
            let n = round_near(r * pow);
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
            // A whole number below 2^52: exact as an i64.
            i128::from(n as i64)
        }
        ValueRef::Text(t) => decimal_text(t, scale)
            .ok_or_else(|| format!("not a number written with at most {scale} fraction digits"))?,
        _ => return Err("not a number".into()),
    };
    if scaled.unsigned_abs() >= POW10_I128[usize::from(precision)].unsigned_abs() {
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

fn to_date(v: ValueRef<'_>) -> Result<i32, String> {
    match v {
        ValueRef::Text(t) => parse_date(t).ok_or_else(|| "not a date as 'YYYY-MM-DD'".to_string()),
        _ => Err("not a date as 'YYYY-MM-DD' text".into()),
    }
}

fn to_timestamp(v: ValueRef<'_>) -> Result<i64, String> {
    match v {
        ValueRef::Text(t) => {
            parse_timestamp(t).ok_or_else(|| "not an ISO-8601 date and time".to_string())
        }
        _ => Err("not an ISO-8601 date and time text".into()),
    }
}

fn to_bool(v: ValueRef<'_>) -> Result<bool, String> {
    match v {
        ValueRef::Integer(0) => Ok(false),
        ValueRef::Integer(1) => Ok(true),
        _ => Err("not 0 or 1".into()),
    }
}

/// A value as a message shows it: numbers as SQLite prints them, text quoted, blobs in hex,
/// either cut after 40 characters.
fn shown(v: ValueRef<'_>) -> String {
    const MAX: usize = 40;
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) => real_to_text(r),
        ValueRef::Text(t) => {
            let text = String::from_utf8_lossy(t);
            let mut cut: String = text.chars().take(MAX).collect();
            if cut.len() < text.len() {
                cut.push_str("...");
            }
            format!("{cut:?}")
        }
        ValueRef::Blob(b) => {
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
        assert_eq!(to_decimal(Value::Real(0.05).as_ref(), 15, 2), Ok(5));
        assert_eq!(
            to_decimal(Value::Real(-1234.56).as_ref(), 15, 2),
            Ok(-123_456)
        );
        assert_eq!(
            to_decimal(Value::Real(0.1 + 0.2).as_ref(), 15, 2).map_err(|_| ()),
            Err(())
        );
        assert_eq!(
            to_decimal(Value::Real(0.123).as_ref(), 15, 2).map_err(|_| ()),
            Err(())
        );
        assert_eq!(to_decimal(Value::Real(0.123).as_ref(), 15, 3), Ok(123));
        assert_eq!(to_decimal(Value::Integer(17).as_ref(), 15, 2), Ok(1700));
        assert_eq!(
            to_decimal(Value::Integer(1000).as_ref(), 3, 0).map_err(|_| ()),
            Err(())
        );
        assert_eq!(to_decimal(Value::Integer(999).as_ref(), 3, 0), Ok(999));
        assert_eq!(
            to_decimal(Value::Real(1e300).as_ref(), 15, 2).map_err(|_| ()),
            Err(())
        );
        // Text that is exactly a decimal (a column of numbers kept as text, read as one).
        assert_eq!(to_decimal(Value::text("1.5").as_ref(), 15, 2), Ok(150));
        assert_eq!(to_decimal(Value::text("-12.50").as_ref(), 15, 2), Ok(-1250));
        assert_eq!(to_decimal(Value::text(".5").as_ref(), 15, 2), Ok(50));
        assert_eq!(to_decimal(Value::text("1.").as_ref(), 15, 2), Ok(100));
        for bad in ["1.505", "1e3", " 1", "", "-", "0x10", "1,5", ".", "--1"] {
            assert!(
                to_decimal(Value::text(bad).as_ref(), 15, 2).is_err(),
                "{bad:?}"
            );
        }
        // Every cent value of a DECIMAL(15,2) column up to a billion round-trips.
        for cents in (-100_000_000_000i64..100_000_000_000).step_by(9_999_991) {
            let r = cents as f64 / 100.0;
            assert_eq!(
                to_decimal(Value::Real(r).as_ref(), 15, 2),
                Ok(i128::from(cents))
            );
        }
    }

    #[test]
    fn integers_and_booleans_are_strict() {
        assert_eq!(to_i64(Value::Real(3.0).as_ref()), Ok(3));
        assert!(to_i64(Value::Real(3.5).as_ref()).is_err());
        assert!(to_i64(Value::Real(1e19).as_ref()).is_err());
        assert!(to_i64(Value::text("abc").as_ref()).is_err());
        assert_eq!(to_i64(Value::text("-12").as_ref()), Ok(-12));
        for bad in ["1.0", " 1", "", "+", "99999999999999999999"] {
            assert!(to_i64(Value::text(bad).as_ref()).is_err(), "{bad:?}");
        }
        assert!(to_f64_exact(Value::Integer((1 << 53) + 1).as_ref()).is_err());
        assert_eq!(to_bool(Value::Integer(1).as_ref()), Ok(true));
        assert!(to_bool(Value::Integer(2).as_ref()).is_err());
    }

    #[test]
    fn messages_show_values_briefly() {
        assert_eq!(shown(Value::text("abc").as_ref()), "\"abc\"");
        assert_eq!(shown(Value::Real(0.5).as_ref()), "0.5");
        assert_eq!(shown(Value::Blob(vec![1, 255]).as_ref()), "x'01ff'");
        assert!(shown(Value::text("x".repeat(100)).as_ref()).ends_with("...\""));
    }
}
