//! Arrow values back into SQLite values ([`arrow_value`], [`batch_rows`]), so that DataFusion's
//! answers print in `corescan query`'s output formats and compare with SQLite's rows.
//!
//! Integers (of any width that fits 64 bits) and booleans (0 and 1) become integers, floats
//! reals (NaN is NULL, as in SQLite), strings text and binaries blobs. A decimal becomes its
//! exact text (`123.45`, all the scale's digits), never a double; a date `YYYY-MM-DD` and a
//! timestamp without a time zone `YYYY-MM-DD HH:MM:SS[.ffffff]`, as SQLite's date functions
//! write them. Every other type (intervals, lists, a timestamp with a zone, ...) becomes the
//! text Arrow displays for it.
//!
//! Layering: above [`crate::temporal`].

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float16Type, Float32Type, Float64Type, Int16Type,
    Int32Type, Int64Type, Int8Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use engine::value::Value;

use crate::temporal::{date_text, timestamp_text};

/// Every row of `batch` as SQLite values.
pub fn batch_rows(batch: &RecordBatch) -> Vec<Vec<Value>> {
    (0..batch.num_rows())
        .map(|row| {
            batch
                .columns()
                .iter()
                .map(|c| arrow_value(c.as_ref(), row))
                .collect()
        })
        .collect()
}

/// The value at `row` of `array` as a SQLite value (see the module docs).
pub fn arrow_value(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Null => Value::Null,
        DataType::Boolean => Value::Integer(i64::from(array.as_boolean().value(row))),
        DataType::Int8 => Value::Integer(array.as_primitive::<Int8Type>().value(row).into()),
        DataType::Int16 => Value::Integer(array.as_primitive::<Int16Type>().value(row).into()),
        DataType::Int32 => Value::Integer(array.as_primitive::<Int32Type>().value(row).into()),
        DataType::Int64 => Value::Integer(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => Value::Integer(array.as_primitive::<UInt8Type>().value(row).into()),
        DataType::UInt16 => Value::Integer(array.as_primitive::<UInt16Type>().value(row).into()),
        DataType::UInt32 => Value::Integer(array.as_primitive::<UInt32Type>().value(row).into()),
        DataType::UInt64 => {
            let v = array.as_primitive::<UInt64Type>().value(row);
            i64::try_from(v).map_or_else(|_| Value::text(v.to_string()), Value::Integer)
        }
        DataType::Float16 => Value::real(f64::from(array.as_primitive::<Float16Type>().value(row))),
        DataType::Float32 => Value::real(array.as_primitive::<Float32Type>().value(row).into()),
        DataType::Float64 => Value::real(array.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Value::text(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Value::text(array.as_string::<i64>().value(row)),
        DataType::Utf8View => Value::text(array.as_string_view().value(row)),
        DataType::Binary => Value::Blob(array.as_binary::<i32>().value(row).to_vec()),
        DataType::LargeBinary => Value::Blob(array.as_binary::<i64>().value(row).to_vec()),
        DataType::BinaryView => Value::Blob(array.as_binary_view().value(row).to_vec()),
        DataType::FixedSizeBinary(_) => {
            Value::Blob(array.as_fixed_size_binary().value(row).to_vec())
        }
        DataType::Decimal128(_, scale) => Value::text(decimal_text(
            array.as_primitive::<Decimal128Type>().value(row),
            *scale,
        )),
        DataType::Date32 => Value::text(date_text(
            array.as_primitive::<Date32Type>().value(row).into(),
        )),
        DataType::Timestamp(unit, None) => {
            let micros = match unit {
                TimeUnit::Second => array
                    .as_primitive::<TimestampSecondType>()
                    .value(row)
                    .checked_mul(1_000_000),
                TimeUnit::Millisecond => array
                    .as_primitive::<TimestampMillisecondType>()
                    .value(row)
                    .checked_mul(1000),
                TimeUnit::Microsecond => {
                    Some(array.as_primitive::<TimestampMicrosecondType>().value(row))
                }
                TimeUnit::Nanosecond => {
                    let ns = array.as_primitive::<TimestampNanosecondType>().value(row);
                    // Nanoseconds that microseconds cannot show go through Arrow's text.
                    (ns % 1000 == 0).then_some(ns / 1000)
                }
            };
            micros.map_or_else(|| displayed(array, row), |m| Value::text(timestamp_text(m)))
        }
        _ => displayed(array, row),
    }
}

/// The value as Arrow displays it.
fn displayed(array: &dyn Array, row: usize) -> Value {
    let options = FormatOptions::default();
    match ArrayFormatter::try_new(array, &options) {
        Ok(f) => Value::text(f.value(row).to_string()),
        Err(e) => Value::text(format!("<{}: {e}>", array.data_type())),
    }
}

/// A decimal's scaled integer `v` with `scale` fraction digits, exactly: `-0.05` for -5 at
/// scale 2, `1200` for 12 at scale -2.
pub fn decimal_text(v: i128, scale: i8) -> String {
    if scale <= 0 {
        let zeros = "0".repeat(usize::from(scale.unsigned_abs()));
        return if v == 0 {
            "0".into()
        } else {
            format!("{v}{zeros}")
        };
    }
    let scale = usize::from(scale.unsigned_abs());
    let digits = v.unsigned_abs().to_string();
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = digits.split_at(digits.len() - scale);
    let sign = if v < 0 { "-" } else { "" };
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Decimal128Array, Int64Array, StringArray};

    #[test]
    fn decimals_print_exactly() {
        assert_eq!(decimal_text(-5, 2), "-0.05");
        assert_eq!(decimal_text(123_456, 2), "1234.56");
        assert_eq!(decimal_text(0, 4), "0.0000");
        assert_eq!(decimal_text(12, 0), "12");
        assert_eq!(decimal_text(12, -2), "1200");
        assert_eq!(
            decimal_text(i128::MAX, 38),
            "1.70141183460469231731687303715884105727"
        );
    }

    #[test]
    fn arrow_values_become_sqlite_values() {
        let d = Decimal128Array::from(vec![Some(5), None])
            .with_precision_and_scale(15, 2)
            .unwrap();
        assert_eq!(arrow_value(&d, 0), Value::text("0.05"));
        assert_eq!(arrow_value(&d, 1), Value::Null);
        assert_eq!(
            arrow_value(&Int64Array::from(vec![7]), 0),
            Value::Integer(7)
        );
        assert_eq!(
            arrow_value(&StringArray::from(vec!["x"]), 0),
            Value::text("x")
        );
    }
}
