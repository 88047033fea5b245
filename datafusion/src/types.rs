//! The Arrow type of a SQLite column ([`ColumnType`]), from its declared type.
//!
//! SQLite stores any value in any column; the declared type only gives the column an affinity
//! (<https://www.sqlite.org/datatype3.html>) that converts some values on the way in. DataFusion
//! needs one Arrow type per column, so a few declared type names that say more than their
//! affinity are read as their SQL meaning, and every other column gets its affinity's type:
//!
//! | declared type (case-insensitive)           | Arrow type                      |
//! |--------------------------------------------|---------------------------------|
//! | `DECIMAL(p,s)`, `NUMERIC(p,s)` (and `(p)`) | `Decimal128(p, s)` (p at most 38) |
//! | `DATE`                                     | `Date32`                        |
//! | `DATETIME`, `TIMESTAMP`                    | `Timestamp(Microsecond, None)`  |
//! | `BOOLEAN`, `BOOL`                          | `Boolean`                       |
//! | INTEGER affinity (`INT`, `BIGINT`, ...)    | `Int64`                         |
//! | REAL affinity (`REAL`, `DOUBLE`, `FLOAT`)  | `Float64`                       |
//! | TEXT affinity (`TEXT`, `VARCHAR(n)`, ...)  | `Utf8`                          |
//! | BLOB affinity (`BLOB`, no type, `ANY` in a `STRICT` table) | `Binary`        |
//! | any other NUMERIC affinity (`NUMERIC`, `DECIMAL`, `MONEY`, ...) | `Float64`  |
//!
//! The type only says what a value must be; whether a stored value fits is decided row by row
//! in [`crate::convert`], which refuses what does not (never a NULL or a guess).
//!
//! A table can be read otherwise ([`crate::TableOptions`]): every column as text
//! ([`ColumnType::AnyText`], DuckDB's `sqlite_all_varchar`), or one column as a type named as
//! [`ColumnType::from_name`] reads it (`corescan sql --type orders.o_total=DECIMAL(12,2)`).
//!
//! Layering: the bottom of the crate beside [`crate::error`]; imports nothing from it.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use partitioner::create_table::ColumnDef;
use partitioner::Affinity;

/// The widest precision of an Arrow `Decimal128`.
pub const MAX_DECIMAL_PRECISION: u8 = 38;

/// The widest scale whose power of ten is an exact double (10^22 is the last): the exactness
/// check of a REAL stored in a decimal column needs it ([`crate::convert`]).
pub const MAX_DECIMAL_SCALE: u8 = 22;

/// The Arrow type a column is read as, and so how its stored values are converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ColumnType {
    /// `Int64`: integers.
    Int64,
    /// `Float64`: reals (and integers, read as reals).
    Float64,
    /// `Float64` for a NUMERIC column without precision: reals, and integers a double holds
    /// exactly.
    Numeric,
    /// `Utf8`: text.
    Utf8,
    /// `Utf8` from any storage class: numbers as SQLite's `CAST(x AS TEXT)` writes them, text
    /// and blobs as their bytes (which must be UTF-8).
    AnyText,
    /// `Binary`: blobs, and text as its bytes.
    Binary,
    /// `Decimal128(precision, scale)`: integers and reals that are exactly a decimal of
    /// `scale` fraction digits.
    Decimal {
        /// Total digits.
        precision: u8,
        /// Fraction digits.
        scale: u8,
    },
    /// `Date32`: `'YYYY-MM-DD'` text.
    Date32,
    /// `Timestamp(Microsecond, None)`: ISO-8601 text (`'YYYY-MM-DD HH:MM:SS.ffffff'`).
    Timestamp,
    /// `Boolean`: the integers 0 and 1.
    Boolean,
}

impl ColumnType {
    /// The type of `column` of a table (`strict`: a `STRICT` table).
    pub fn of_column(column: &ColumnDef, strict: bool) -> ColumnType {
        if column.rowid_alias {
            return ColumnType::Int64;
        }
        if let Some(t) = named_type(&column.declared_type) {
            return t;
        }
        match Affinity::of_column(column, strict) {
            Affinity::Integer => ColumnType::Int64,
            Affinity::Real => ColumnType::Float64,
            Affinity::Text => ColumnType::Utf8,
            Affinity::Blob => ColumnType::Binary,
            Affinity::Numeric => ColumnType::Numeric,
        }
    }

    /// The Arrow type.
    pub fn data_type(self) -> DataType {
        match self {
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 | ColumnType::Numeric => DataType::Float64,
            ColumnType::Utf8 | ColumnType::AnyText => DataType::Utf8,
            ColumnType::Binary => DataType::Binary,
            ColumnType::Decimal { precision, scale } => {
                // Scales are at most MAX_DECIMAL_SCALE, so the cast cannot wrap.
                DataType::Decimal128(precision, scale as i8)
            }
            ColumnType::Date32 => DataType::Date32,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::Boolean => DataType::Boolean,
        }
    }
}

impl std::fmt::Display for ColumnType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColumnType::Numeric => f.write_str("Float64 (NUMERIC)"),
            ColumnType::AnyText => f.write_str("Utf8 (any value as text)"),
            other => write!(f, "{}", other.data_type()),
        }
    }
}

impl ColumnType {
    /// The type `name` asks for, case-insensitively: `INTEGER` (or `INT64`, `BIGINT`), `REAL`
    /// (`FLOAT64`, `DOUBLE`), `TEXT` (any value as text: [`ColumnType::AnyText`]), `BLOB`
    /// (`BINARY`), `DECIMAL(p,s)` (`NUMERIC(p,s)`), `DATE`, `TIMESTAMP` (`DATETIME`),
    /// `BOOLEAN`; `None` for anything else.
    pub fn from_name(name: &str) -> Option<ColumnType> {
        if let Some(t) = named_type(name) {
            return Some(t);
        }
        match name.trim().to_ascii_uppercase().as_str() {
            "INTEGER" | "INT" | "INT64" | "BIGINT" => Some(ColumnType::Int64),
            "REAL" | "FLOAT64" | "DOUBLE" | "FLOAT" => Some(ColumnType::Float64),
            "TEXT" | "UTF8" | "VARCHAR" => Some(ColumnType::AnyText),
            "BLOB" | "BINARY" => Some(ColumnType::Binary),
            _ => None,
        }
    }
}

/// The type a declared type names beyond its affinity: decimals with a precision, dates,
/// timestamps and booleans. `None` for every other name.
fn named_type(declared: &str) -> Option<ColumnType> {
    let declared = declared.trim();
    let (name, args) = match declared.split_once('(') {
        Some((name, rest)) => (name.trim(), Some(rest.strip_suffix(')')?)),
        None => (declared, None),
    };
    let name = name.to_ascii_uppercase();
    match (name.as_str(), args) {
        ("DATE", None) => Some(ColumnType::Date32),
        ("DATETIME" | "TIMESTAMP", None) => Some(ColumnType::Timestamp),
        ("BOOLEAN" | "BOOL", None) => Some(ColumnType::Boolean),
        ("DECIMAL" | "NUMERIC", Some(args)) => decimal(args),
        _ => None,
    }
}

/// `Decimal128(p, s)` from the arguments of `DECIMAL(p, s)` or `DECIMAL(p)`; `None` when they
/// are not one or two small integers with `s <= p`. A precision over 38 is read as 38: the
/// values still have to fit, row by row.
fn decimal(args: &str) -> Option<ColumnType> {
    let mut parts = args.split(',').map(|p| p.trim().parse::<u32>().ok());
    let precision = parts.next()??;
    let scale = match parts.next() {
        Some(s) => s?,
        None => 0,
    };
    if parts.next().is_some() || precision == 0 || scale > precision {
        return None;
    }
    let precision = precision.min(u32::from(MAX_DECIMAL_PRECISION)) as u8;
    let scale = u8::try_from(scale).ok()?;
    if scale > precision || scale > MAX_DECIMAL_SCALE {
        return None;
    }
    Some(ColumnType::Decimal { precision, scale })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(declared: &str) -> ColumnDef {
        partitioner::create_table::parse_create_table(&format!("CREATE TABLE t(c {declared})"))
            .unwrap()
            .columns
            .remove(0)
    }

    #[test]
    fn declared_types_map_as_the_docs_table_says() {
        use ColumnType::*;
        for (declared, expected) in [
            ("INTEGER", Int64),
            ("BIGINT", Int64),
            ("REAL", Float64),
            ("DOUBLE PRECISION", Float64),
            ("TEXT", Utf8),
            ("VARCHAR(44)", Utf8),
            ("CHAR(1)", Utf8),
            ("BLOB", Binary),
            ("", Binary),
            (
                "DECIMAL(15,2)",
                Decimal {
                    precision: 15,
                    scale: 2,
                },
            ),
            (
                "numeric( 10 , 0 )",
                Decimal {
                    precision: 10,
                    scale: 0,
                },
            ),
            (
                "DECIMAL(7)",
                Decimal {
                    precision: 7,
                    scale: 0,
                },
            ),
            (
                "DECIMAL(60,4)",
                Decimal {
                    precision: 38,
                    scale: 4,
                },
            ),
            ("DECIMAL", Numeric),
            ("NUMERIC", Numeric),
            ("DECIMAL(2,5)", Numeric),
            ("DATE", Date32),
            ("date", Date32),
            ("DATETIME", Timestamp),
            ("TIMESTAMP", Timestamp),
            ("BOOLEAN", Boolean),
            // SQLite's quirk: "FLOATING POINT" has INTEGER affinity ("poINT").
            ("FLOATING POINT", Int64),
        ] {
            assert_eq!(
                ColumnType::of_column(&column(declared), false),
                expected,
                "{declared:?}"
            );
        }
    }

    #[test]
    fn a_rowid_alias_is_an_integer_and_any_in_a_strict_table_is_binary() {
        let def = partitioner::create_table::parse_create_table(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v ANY) STRICT",
        )
        .unwrap();
        assert_eq!(
            ColumnType::of_column(&def.columns[0], true),
            ColumnType::Int64
        );
        assert_eq!(
            ColumnType::of_column(&def.columns[1], true),
            ColumnType::Binary
        );
    }
}
