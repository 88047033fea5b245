//! Column type affinity: how SQLite converts a value stored into (or read by default from) a
//! column, decided by the declared type's text.

use crate::create_table::ColumnDef;

/// A column's type affinity (SQLite's `SQLITE_AFF_*`), from its declared type by SQLite's
/// substring rules (`sqlite3AffinityType`), applied in this order of precedence:
///
/// | the declared type                           | affinity  |
/// |---------------------------------------------|-----------|
/// | contains `INT`                              | `Integer` |
/// | contains `CHAR`, `CLOB` or `TEXT`           | `Text`    |
/// | contains `BLOB`, or no type at all          | `Blob`    |
/// | contains `REAL`, `FLOA` or `DOUB`           | `Real`    |
/// | anything else (`DECIMAL(15,2)`, `DATE`, ...) | `Numeric` |
///
/// The scan is left to right and stops at the first `INT`, hence the famous quirks:
/// `FLOATING POINT` is `Integer` (`poINT`) and `STRING` is `Numeric`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affinity {
    /// No conversion (`SQLITE_AFF_BLOB`; a column with no type, or `ANY` in a `STRICT` table).
    Blob,
    /// Numbers become text.
    Text,
    /// Text that looks like a number becomes an integer when it is one, else a real; a real
    /// with no fractional part that fits in an `i64` becomes an integer.
    Numeric,
    /// As [`Affinity::Numeric`] (the difference only shows in `CAST`).
    Integer,
    /// As [`Affinity::Numeric`], but integers are read back as reals.
    Real,
}

impl Affinity {
    /// The affinity of a column declared with type `declared` (`""` when no type was given).
    pub fn of_declared_type(declared: &str) -> Affinity {
        if declared.is_empty() {
            return Affinity::Blob;
        }
        let window = |w: &[u8; 4]| u32::from_be_bytes(*w);
        let mut h: u32 = 0;
        let mut affinity = Affinity::Numeric;
        for b in declared.bytes() {
            h = (h << 8) | u32::from(b.to_ascii_lowercase());
            let numeric_or_real = matches!(affinity, Affinity::Numeric | Affinity::Real);
            if h == window(b"char") || h == window(b"clob") || h == window(b"text") {
                affinity = Affinity::Text;
            } else if h == window(b"blob") && numeric_or_real {
                affinity = Affinity::Blob;
            } else if (h == window(b"real") || h == window(b"floa") || h == window(b"doub"))
                && affinity == Affinity::Numeric
            {
                affinity = Affinity::Real;
            } else if h & 0x00ff_ffff == window(b"\0int") {
                return Affinity::Integer;
            }
        }
        affinity
    }

    /// The affinity of `column`; `strict` says whether its table is `STRICT`, where type `ANY`
    /// means no conversion at all.
    pub fn of_column(column: &ColumnDef, strict: bool) -> Affinity {
        if strict && column.declared_type.eq_ignore_ascii_case("ANY") {
            Affinity::Blob
        } else {
            Affinity::of_declared_type(&column.declared_type)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Affinity::{self, *};

    #[test]
    fn sqlite_documentation_examples() {
        for (ty, expected) in [
            ("INT", Integer),
            ("INTEGER", Integer),
            ("TINYINT", Integer),
            ("UNSIGNED BIG INT", Integer),
            ("INT8", Integer),
            ("CHARACTER(20)", Text),
            ("VARCHAR(255)", Text),
            ("NATIVE CHARACTER(70)", Text),
            ("NVARCHAR(100)", Text),
            ("CLOB", Text),
            ("TEXT", Text),
            ("BLOB", Blob),
            ("", Blob),
            ("REAL", Real),
            ("DOUBLE", Real),
            ("DOUBLE PRECISION", Real),
            ("FLOAT", Real),
            ("NUMERIC", Numeric),
            ("DECIMAL(15,2)", Numeric),
            ("BOOLEAN", Numeric),
            ("DATE", Numeric),
            ("DATETIME", Numeric),
            ("FLOATING POINT", Integer),
            ("STRING", Numeric),
            ("CHARINT", Integer),
            ("REALBLOB", Blob),
            ("TEXTBLOB", Text),
            ("BLOBREAL", Blob),
            ("ANY", Numeric),
        ] {
            assert_eq!(Affinity::of_declared_type(ty), expected, "{ty}");
        }
    }
}
