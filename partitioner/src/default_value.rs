//! [`DefaultValue`]: what SQLite reads for a column that a record does not reach.
//!
//! `ALTER TABLE ... ADD COLUMN` does not rewrite the table: rows written before it keep their
//! shorter records, and SQLite reads the column's `DEFAULT` for them instead of NULL. It does
//! so by evaluating the `DEFAULT` expression at prepare time (`sqlite3ValueFromExpr`, called
//! from `sqlite3ColumnDefault` with the column's affinity), which only handles literals, unary
//! signs and parentheses. This module ports that evaluation, including its corners:
//!
//! - a number literal keeps its text until the affinity converts it, so `DEFAULT 1e3` reads as
//!   the text `'1e3'` in a `TEXT` column, and `DEFAULT 901.0` as the integer 901 in a
//!   `NUMERIC` one;
//! - `-` directly on a number folds into it (so `-9223372036854775808` is an integer), while
//!   any other sign is applied after converting the operand to a number;
//! - a column with no affinity (no type) still turns number literals into numbers;
//! - a `REAL` column reads an integer default as a real (`OP_RealAffinity`).

use crate::affinity::Affinity;
use crate::create_table::{DefaultClause, Literal, Sign};
use crate::numeric_text::{
    atof, atoi64, dec_or_hex_to_i64, real_as_integer, real_same_as_int, real_to_i64, token_as_i32,
};

/// A value as SQLite reads it for a column whose field a record lacks.
#[derive(Debug, Clone, PartialEq)]
pub enum DefaultValue {
    /// NULL (also what a column without a `DEFAULT` reads).
    Null,
    /// An integer.
    Integer(i64),
    /// A real.
    Real(f64),
    /// Text.
    Text(String),
    /// A blob.
    Blob(Vec<u8>),
}

use DefaultValue::{Blob, Integer, Null, Real, Text};

impl DefaultValue {
    /// The value SQLite reads for a missing trailing field of a column with `default` and
    /// `affinity`: NULL without a default, else the literal converted as described in the
    /// [module docs](self).
    ///
    /// Fails, with a message naming the clause, for what only SQLite can evaluate: a
    /// `CURRENT_TIME`/`CURRENT_DATE`/`CURRENT_TIMESTAMP` or any expression beyond a signed
    /// literal. (SQLite refuses such defaults in `ADD COLUMN` on a non-empty table, so no
    /// record should ever need them.) Also fails in two corners not reproduced here: a
    /// sign applied to a blob, and a real that a `TEXT` column would render as text (both
    /// need a sign inside parentheses, such as `DEFAULT (-(-1.5))`).
    pub fn of_clause(default: Option<&DefaultClause>, affinity: Affinity) -> Result<Self, String> {
        let value = match default {
            None => Null,
            Some(DefaultClause::Constant { signs, literal }) => evaluate(signs, literal, affinity)?,
            Some(DefaultClause::CurrentTime(kw)) => {
                return Err(format!(
                    "DEFAULT {kw} is evaluated when a row is inserted; only SQLite can \
                     produce it (SQLite does not allow it in ALTER TABLE ADD COLUMN)"
                ))
            }
            Some(DefaultClause::Expression(text)) => {
                return Err(format!(
                    "DEFAULT {text} is an expression, not a literal; only SQLite can evaluate \
                     it (SQLite does not allow non-constant defaults in ALTER TABLE ADD \
                     COLUMN)"
                ))
            }
        };
        // OP_RealAffinity after the default is loaded.
        Ok(match value {
            Integer(i) if affinity == Affinity::Real => Real(i as f64),
            v => v,
        })
    }
}

/// `valueFromExpr` on `signs` (outermost first) over `literal`.
///
/// SQLite recurses once per sign; this walks the signs in a loop and then applies the
/// negations innermost first, so a hostile schema with a DEFAULT nested thousands of levels
/// deep cannot overflow the stack.
fn evaluate(signs: &[Sign], literal: &Literal, affinity: Affinity) -> Result<DefaultValue, String> {
    let mut negations = 0usize;
    let mut rest = signs;
    let innermost = loop {
        let plus = rest.iter().take_while(|&&s| s == Sign::Plus).count();
        rest = &rest[plus..];
        match rest {
            [] => break literal_value(literal, false, affinity)?,
            // A minus directly on a number folds into its text (so -9223372036854775808 is an
            // integer), except on a hexadecimal literal too large for 32 bits.
            [Sign::Minus] if folds_minus(literal) => break literal_value(literal, true, affinity)?,
            [_, inner @ ..] => {
                negations += 1;
                rest = inner;
            }
        }
    };
    let mut value = innermost;
    for _ in 0..negations {
        let negated = match numerify(value)? {
            Real(r) => Real(-r),
            Integer(i64::MIN) => Real(-(i64::MIN as f64)),
            Integer(i) => Integer(-i),
            other => other,
        };
        value = apply_affinity(negated, affinity)?;
    }
    Ok(value)
}

fn folds_minus(literal: &Literal) -> bool {
    match literal {
        Literal::Float(_) => true,
        Literal::Integer(token) => {
            let hex = token.starts_with("0x") || token.starts_with("0X");
            !hex || token_as_i32(token).is_some()
        }
        _ => false,
    }
}

/// A literal (under a folded minus when `negative`), with `affinity` applied.
fn literal_value(
    literal: &Literal,
    negative: bool,
    affinity: Affinity,
) -> Result<DefaultValue, String> {
    let sign = if negative { -1 } else { 1 };
    let minus = if negative { "-" } else { "" };
    match literal {
        Literal::Null => Ok(Null),
        Literal::Blob(b) => Ok(Blob(b.clone())),
        Literal::Bool(b) => apply_affinity(Integer(i64::from(*b)), affinity),
        Literal::Text(s) => match affinity {
            Affinity::Blob => Ok(Text(s.clone())),
            _ => apply_affinity(Text(s.clone()), affinity),
        },
        Literal::Integer(token) => {
            let value = if let Some(i) = token_as_i32(token) {
                Integer(i64::from(i) * sign)
            } else {
                match dec_or_hex_to_i64(token) {
                    (0, i) => Integer(i.wrapping_mul(sign)),
                    // Too large: kept as text, which the affinity may turn into a real.
                    _ => Text(format!("{minus}{token}")),
                }
            };
            match affinity {
                Affinity::Blob => apply_affinity(value, Affinity::Numeric),
                _ => apply_affinity(value, affinity),
            }
        }
        Literal::Float(token) => {
            let text = format!("{minus}{token}");
            match affinity {
                Affinity::Blob => Ok(Real(atof(text.as_bytes()).1)),
                _ => apply_affinity(Text(text), affinity),
            }
        }
    }
}

/// `applyAffinity`.
fn apply_affinity(value: DefaultValue, affinity: Affinity) -> Result<DefaultValue, String> {
    Ok(match affinity {
        Affinity::Blob => value,
        Affinity::Text => match value {
            Integer(i) => Text(i.to_string()),
            Real(r) => {
                return Err(format!(
                    "the DEFAULT works out to the real {r:?} in a TEXT column, and SQLite's \
                     rendering of reals as text is not reproduced here"
                ))
            }
            other => other,
        },
        Affinity::Numeric | Affinity::Integer | Affinity::Real => match value {
            Real(r) => real_as_integer(r).map_or(Real(r), Integer),
            Text(s) => numeric_from_text(s),
            other => other,
        },
    })
}

/// `applyNumericAffinity(_, 1)`: text that is wholly a number becomes one, preferring an
/// integer; other text stays text.
fn numeric_from_text(s: String) -> DefaultValue {
    let (rc, r) = atof(s.as_bytes());
    if rc <= 0 {
        return Text(s);
    }
    if rc & 2 == 0 {
        let i = real_to_i64(r);
        if real_same_as_int(r, i) {
            return Integer(i);
        }
        if let (0, i) = atoi64(s.as_bytes()) {
            return Integer(i);
        }
    }
    real_as_integer(r).map_or(Real(r), Integer)
}

/// `sqlite3VdbeMemNumerify`: forces text to a number, reading as much of it as looks like one.
fn numerify(value: DefaultValue) -> Result<DefaultValue, String> {
    Ok(match value {
        Text(s) => {
            let z = s.as_bytes();
            let (rc, r) = atof(z);
            match atoi64(z) {
                (code, i) if rc & 2 == 0 && code < 2 => Integer(i),
                _ => {
                    let i = real_to_i64(r);
                    if real_same_as_int(r, i) {
                        Integer(i)
                    } else {
                        Real(r)
                    }
                }
            }
        }
        Blob(_) => {
            return Err("a sign applied to a blob literal is not supported".to_string());
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::create_table::parse_create_table;

    /// The default of column `c` declared as `decl` (type and DEFAULT clause).
    fn default_of(decl: &str) -> Result<DefaultValue, String> {
        let t = parse_create_table(&format!("CREATE TABLE t(c {decl})"))?;
        let c = &t.columns[0];
        DefaultValue::of_clause(c.default.as_ref(), Affinity::of_column(c, t.strict))
    }

    #[test]
    fn affinity_conversions() {
        assert_eq!(default_of("DECIMAL(15,2) DEFAULT '0.06'"), Ok(Real(0.06)));
        assert_eq!(default_of("DECIMAL(15,2) DEFAULT -0.06"), Ok(Real(-0.06)));
        assert_eq!(default_of("DECIMAL(15,2) DEFAULT '24'"), Ok(Integer(24)));
        assert_eq!(default_of("NUMERIC DEFAULT 901.0"), Ok(Integer(901)));
        assert_eq!(default_of("DEFAULT 901.0"), Ok(Real(901.0)));
        assert_eq!(default_of("REAL DEFAULT 5"), Ok(Real(5.0)));
        assert_eq!(default_of("REAL DEFAULT '5'"), Ok(Real(5.0)));
        assert_eq!(default_of("INTEGER DEFAULT 'abc'"), Ok(Text("abc".into())));
        assert_eq!(default_of("TEXT DEFAULT 1e3"), Ok(Text("1e3".into())));
        assert_eq!(default_of("TEXT DEFAULT 0x1F"), Ok(Text("31".into())));
        assert_eq!(default_of("TEXT DEFAULT TRUE"), Ok(Text("1".into())));
        assert_eq!(default_of("BLOB DEFAULT X'00ff'"), Ok(Blob(vec![0, 255])));
        assert_eq!(default_of("INT DEFAULT NULL"), Ok(Null));
        assert_eq!(default_of("INT"), Ok(Null));
        assert_eq!(default_of("DEFAULT abc"), Ok(Text("abc".into())));
        assert_eq!(default_of("INT DEFAULT (-(1))"), Ok(Integer(-1)));
        assert_eq!(
            default_of("INT DEFAULT -9223372036854775808"),
            Ok(Integer(i64::MIN))
        );
        assert_eq!(
            default_of("INT DEFAULT (-(+9223372036854775808))"),
            Ok(Integer(i64::MIN))
        );
        assert_eq!(
            default_of("INT DEFAULT (+(-9223372036854775808))"),
            Ok(Integer(i64::MIN))
        );
        assert_eq!(
            default_of("INT DEFAULT (-(-9223372036854775808))"),
            Ok(Real(2f64.powi(63)))
        );
        assert_eq!(
            default_of("DEFAULT 0x1FFFFFFFFFFFFFFFFF"),
            Ok(Text("0x1FFFFFFFFFFFFFFFFF".into()))
        );
    }

    #[test]
    fn what_only_sqlite_can_evaluate_is_an_error() {
        let e = default_of("TEXT DEFAULT CURRENT_TIMESTAMP").unwrap_err();
        assert!(e.contains("CURRENT_TIMESTAMP"), "{e}");
        let e = default_of("REAL DEFAULT (round(1.5, 2))").unwrap_err();
        assert!(
            e.contains("(round(1.5,2))") && e.contains("expression"),
            "{e}"
        );
        assert!(default_of("TEXT DEFAULT (-(-1.5))").is_err());
        assert!(default_of("DEFAULT (-X'31')").is_err());
    }
}
