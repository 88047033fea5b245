//! Filters pushed into corescan's scan: DataFusion's `WHERE` terms written as SQLite SQL, which
//! the engine evaluates on each row before it is converted and sent ([`translate`]).
//!
//! The engine evaluates with SQLite's rules on the stored values; DataFusion evaluates with its
//! own on the Arrow values they convert to. A term is pushed only where the two provably agree
//! on every row that converts ([`crate::convert`]), so that a row the engine drops is a row
//! DataFusion would drop too:
//!
//! | column's Arrow type | compared with | pushed | why the answers agree |
//! |---|---|---|---|
//! | `Int64` | an integer literal | `Exact` | both compare 64-bit integers |
//! | `Utf8` with the `BINARY` collation | a text literal | `Exact` | both compare bytes (`memcmp`) |
//! | `Date32` with the `BINARY` collation | a date in years 0000-9999 | `Exact` | the stored text is exactly `YYYY-MM-DD` (or the row is refused), whose byte order is date order |
//! | `Decimal128(p, s)` | a decimal with at most `s` fraction digits | `Exact` | a stored real converts only when it is the double nearest to a decimal of scale `s` below 2^52 scaled units, where nearest-double rounding keeps order and equality |
//! | `Utf8` | `LIKE` a pattern without `\` or `ESCAPE` | `Inexact` | SQLite's `LIKE` ignores ASCII case, so it keeps a superset of DataFusion's rows; DataFusion filters again |
//! | any | `IS NULL`, `IS NOT NULL` | `Exact` | NULL converts to NULL and nothing else does |
//!
//! A column read as another type than its declared one ([`crate::TableOptions`]) is only
//! tested for NULL in the scan: SQLite compares it by its declared affinity.
//!
//! Comparisons (`= <> < <= > >=`, either side), `BETWEEN`, `IN` lists, `NOT`, `AND` and `OR`
//! of such terms are pushed; a term is `Exact` when all its parts are. `Float64`, `Boolean`,
//! `Timestamp` and `Binary` columns are not compared in the scan (Arrow orders `-0.0` before
//! `0.0` where SQLite has them equal; timestamps have several text forms), nor are columns
//! with another collation, casts the optimizer left on a column (other than a widening
//! decimal cast), or `LIKE ... ESCAPE` (DataFusion reads `\` as an escape, SQLite does not).
//!
//! A row the pushed filter drops is not converted: a stored value that does not fit its
//! column's type is reported only when its row passes the filter, as if the filter ran
//! first.
//!
//! Layering: above [`crate::types`], [`crate::temporal`] and [`crate::output`]; used by
//! [`crate::table`].

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Like, Operator};

use crate::output::decimal_text;
use crate::temporal::date_text;
use crate::types::ColumnType;

/// The largest scaled decimal pushed into the scan (2^52), as in [`crate::convert`].
const MAX_EXACT_SCALED: i128 = 1 << 52;

/// A column as the pushdown sees it.
#[derive(Debug, Clone)]
pub struct PushColumn {
    /// The name DataFusion knows it by (lower case).
    pub field: String,
    /// The name as the schema spells it.
    pub name: String,
    /// Its Arrow type.
    pub ty: ColumnType,
    /// Whether it compares text with the `BINARY` collation (its declared collation, or none).
    pub binary_collation: bool,
    /// A `VIRTUAL` generated column, which the scan does not compute.
    pub computed: bool,
    /// Whether the type is the one the declared type gives: SQLite compares a column by its
    /// declared affinity, so a column read as another type is not compared in the scan.
    pub declared: bool,
}

/// A filter as SQLite SQL, and whether the engine's answer is exactly DataFusion's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The term, parenthesized, over the schema's column names.
    pub sql: String,
    /// `true`: the engine keeps exactly DataFusion's rows; `false`: a superset of them.
    pub exact: bool,
}

/// `expr` as a term the scan evaluates, or `None` when it cannot be pushed (see the module
/// docs).
pub fn translate(expr: &Expr, columns: &[PushColumn]) -> Option<Pushed> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And | Operator::Or => {
                let l = translate(left, columns);
                let r = translate(right, columns);
                let word = if *op == Operator::And { "AND" } else { "OR" };
                match (l, r) {
                    (Some(l), Some(r)) => Some(Pushed {
                        sql: format!("({} {word} {})", l.sql, r.sql),
                        exact: l.exact && r.exact,
                    }),
                    // One side of an AND still narrows the rows: a superset of the answer.
                    (Some(one), None) | (None, Some(one)) if *op == Operator::And => Some(Pushed {
                        sql: one.sql,
                        exact: false,
                    }),
                    _ => None,
                }
            }
            Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq => comparison(left, *op, right, columns),
            _ => None,
        },
        Expr::Not(inner) => {
            // Only an exact term may be negated: the complement of a superset is a subset.
            let inner = translate(inner, columns)?;
            inner.exact.then(|| Pushed {
                sql: format!("(NOT {})", inner.sql),
                exact: true,
            })
        }
        Expr::IsNull(e) | Expr::IsNotNull(e) => {
            let c = column(e, columns)?;
            let what = if matches!(expr, Expr::IsNull(_)) {
                "IS NULL"
            } else {
                "IS NOT NULL"
            };
            Some(Pushed {
                sql: format!("({} {what})", quoted(&c.name)),
                exact: true,
            })
        }
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) => {
            let c = compared_column(expr, columns)?;
            let low = literal(low, c)?;
            let high = literal(high, c)?;
            let not = if *negated { "NOT " } else { "" };
            Some(Pushed {
                sql: format!("({} {not}BETWEEN {low} AND {high})", quoted(&c.name)),
                exact: true,
            })
        }
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) => {
            let c = compared_column(expr, columns)?;
            if list.is_empty() {
                return None;
            }
            let items = list
                .iter()
                .map(|e| literal(e, c))
                .collect::<Option<Vec<_>>>()?;
            let not = if *negated { "NOT " } else { "" };
            Some(Pushed {
                sql: format!("({} {not}IN ({}))", quoted(&c.name), items.join(", ")),
                exact: true,
            })
        }
        Expr::Like(Like {
            negated: false,
            expr,
            pattern,
            escape_char: None,
            case_insensitive: false,
        }) => {
            let c = column(expr, columns)?;
            if c.ty != ColumnType::Utf8 || !c.declared {
                return None;
            }
            let pattern = text_literal(pattern)?;
            if pattern.contains('\\') {
                return None;
            }
            Some(Pushed {
                sql: format!("({} LIKE {})", quoted(&c.name), sql_text(pattern)),
                exact: false,
            })
        }
        _ => None,
    }
}

/// `left op right` with a column on one side and a literal on the other.
fn comparison(left: &Expr, op: Operator, right: &Expr, columns: &[PushColumn]) -> Option<Pushed> {
    let (col, lit, op) = match (
        compared_column(left, columns),
        compared_column(right, columns),
    ) {
        (Some(c), None) => (c, right, op),
        (None, Some(c)) => (c, left, op.swap()?),
        _ => return None,
    };
    let value = literal(lit, col)?;
    let sym = match op {
        Operator::Eq => "=",
        Operator::NotEq => "<>",
        Operator::Lt => "<",
        Operator::LtEq => "<=",
        Operator::Gt => ">",
        Operator::GtEq => ">=",
        _ => return None,
    };
    Some(Pushed {
        sql: format!("({} {sym} {value})", quoted(&col.name)),
        exact: true,
    })
}

/// The column `e` names, if it is one the scan can read.
fn column<'a>(e: &Expr, columns: &'a [PushColumn]) -> Option<&'a PushColumn> {
    let Expr::Column(c) = e else { return None };
    columns
        .iter()
        .find(|p| p.field == c.name)
        .filter(|p| !p.computed)
}

/// The column `e` names (possibly under a widening decimal cast), if its values compare in the
/// scan exactly as in DataFusion.
fn compared_column<'a>(e: &Expr, columns: &'a [PushColumn]) -> Option<&'a PushColumn> {
    let c = match e {
        Expr::Cast(cast) => {
            let c = column(&cast.expr, columns)?;
            // A decimal widened to more digits on both sides of the point keeps its value.
            match (c.ty, cast.field.data_type()) {
                (ColumnType::Decimal { precision, scale }, DataType::Decimal128(p, s))
                    if *s >= 0
                        && (*s as u8) >= scale
                        && p.saturating_sub(*s as u8) >= precision - scale =>
                {
                    c
                }
                _ => return None,
            }
        }
        _ => column(e, columns)?,
    };
    if !c.declared {
        return None;
    }
    match c.ty {
        ColumnType::Int64 | ColumnType::Decimal { .. } => Some(c),
        ColumnType::Utf8 | ColumnType::Date32 if c.binary_collation => Some(c),
        _ => None,
    }
}

/// `e` as a SQLite literal that compares with `column`'s values as DataFusion compares them
/// with `e`; `None` for NULL, other types and values outside the exact range.
fn literal(e: &Expr, column: &PushColumn) -> Option<String> {
    let Expr::Literal(value, _) = e else {
        return None;
    };
    match column.ty {
        ColumnType::Int64 => {
            let v: i64 = match value {
                ScalarValue::Int64(Some(v)) => *v,
                ScalarValue::Int32(Some(v)) => i64::from(*v),
                ScalarValue::Int16(Some(v)) => i64::from(*v),
                ScalarValue::Int8(Some(v)) => i64::from(*v),
                ScalarValue::UInt32(Some(v)) => i64::from(*v),
                ScalarValue::UInt16(Some(v)) => i64::from(*v),
                ScalarValue::UInt8(Some(v)) => i64::from(*v),
                ScalarValue::UInt64(Some(v)) => i64::try_from(*v).ok()?,
                _ => return None,
            };
            // SQLite reads `-9223372036854775808` as minus a real.
            (v != i64::MIN).then(|| v.to_string())
        }
        ColumnType::Utf8 => text_literal(e).map(sql_text),
        ColumnType::Date32 => match value {
            ScalarValue::Date32(Some(days)) => {
                let text = date_text(i64::from(*days));
                (text.len() == 10 && !text.starts_with('-')).then(|| sql_text(&text))
            }
            _ => None,
        },
        ColumnType::Decimal { scale, .. } => {
            let (v, s) = match value {
                ScalarValue::Decimal128(Some(v), _, s) => (*v, *s),
                ScalarValue::Int64(Some(v)) => (i128::from(*v), 0),
                ScalarValue::Int32(Some(v)) => (i128::from(*v), 0),
                _ => return None,
            };
            let scaled = rescale(v, s, scale)?;
            (scaled.abs() <= MAX_EXACT_SCALED).then(|| decimal_text(scaled, scale as i8))
        }
        _ => None,
    }
}

/// `v` at scale `from` as an integer at scale `to`, if that is exact.
fn rescale(v: i128, from: i8, to: u8) -> Option<i128> {
    let to = i32::from(to);
    let from = i32::from(from);
    if from <= to {
        v.checked_mul(10i128.checked_pow(u32::try_from(to - from).ok()?)?)
    } else {
        let div = 10i128.checked_pow(u32::try_from(from - to).ok()?)?;
        (v % div == 0).then(|| v / div)
    }
}

/// The text of a non-NULL string literal.
fn text_literal(e: &Expr) -> Option<&str> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) if !s.contains('\0') => Some(s),
        _ => None,
    }
}

/// `s` as a SQL string literal.
fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `name` as a quoted SQL identifier.
pub fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::{col, lit};

    use super::*;

    fn columns() -> Vec<PushColumn> {
        let c = |name: &str, ty, binary| PushColumn {
            field: name.to_lowercase(),
            name: name.into(),
            ty,
            binary_collation: binary,
            computed: false,
            declared: true,
        };
        vec![
            c("ID", ColumnType::Int64, true),
            c("Name", ColumnType::Utf8, true),
            c("nick", ColumnType::Utf8, false),
            c(
                "price",
                ColumnType::Decimal {
                    precision: 15,
                    scale: 2,
                },
                true,
            ),
            c("day", ColumnType::Date32, true),
            c("ratio", ColumnType::Float64, true),
        ]
    }

    fn pushed(e: Expr) -> Option<(String, bool)> {
        translate(&e, &columns()).map(|p| (p.sql, p.exact))
    }

    fn dec(v: i128, p: u8, s: i8) -> Expr {
        lit(ScalarValue::Decimal128(Some(v), p, s))
    }

    #[test]
    fn comparisons_of_exact_types_are_exact_with_the_schemas_spelling() {
        assert_eq!(
            pushed(col("id").gt(lit(5i64))),
            Some(("(\"ID\" > 5)".into(), true))
        );
        assert_eq!(
            pushed(lit(5i64).gt(col("id"))),
            Some(("(\"ID\" < 5)".into(), true))
        );
        assert_eq!(
            pushed(col("name").eq(lit("O'Neil"))),
            Some(("(\"Name\" = 'O''Neil')".into(), true))
        );
        assert_eq!(
            pushed(col("day").lt(lit(ScalarValue::Date32(Some(8766))))),
            Some(("(\"day\" < '1994-01-01')".into(), true))
        );
        assert_eq!(
            pushed(col("price").lt_eq(dec(7, 15, 2))),
            Some(("(\"price\" <= 0.07)".into(), true))
        );
        assert_eq!(
            pushed(col("price").lt(dec(2400, 15, 2))),
            Some(("(\"price\" < 24.00)".into(), true))
        );
    }

    #[test]
    fn what_could_disagree_is_not_pushed() {
        // Arrow orders -0.0 before 0.0; SQLite has them equal.
        assert_eq!(pushed(col("ratio").lt(lit(0.0f64))), None);
        // NOCASE text compares otherwise than Arrow's bytes.
        assert_eq!(pushed(col("nick").eq(lit("a"))), None);
        // More fraction digits than the column's scale: rounding to a double could merge them.
        assert_eq!(pushed(col("price").lt(dec(705, 15, 4))), None);
        // Beyond 2^52 scaled units the doubles are further apart than the decimals.
        assert_eq!(pushed(col("price").lt(dec(1i128 << 53, 18, 2))), None);
        assert_eq!(pushed(col("id").eq(lit(i64::MIN))), None);
        assert_eq!(pushed(col("id").eq(lit(ScalarValue::Int64(None)))), None);
        assert_eq!(pushed(col("id").eq(col("id"))), None);
        // A superset cannot be negated.
        assert_eq!(pushed(!col("name").like(lit("a%"))), None);
        assert_eq!(pushed(col("name").not_like(lit("a%"))), None);
        assert_eq!(pushed(col("name").like(lit("a\\%"))), None);
    }

    #[test]
    fn a_decimal_literal_with_fewer_digits_is_rescaled_and_one_with_zeros_too() {
        assert_eq!(
            pushed(col("price").gt(dec(5, 15, 1))),
            Some(("(\"price\" > 0.50)".into(), true))
        );
        assert_eq!(
            pushed(col("price").gt(dec(500, 15, 3))),
            Some(("(\"price\" > 0.50)".into(), true))
        );
        assert_eq!(
            pushed(col("price").gt(lit(24i64))),
            Some(("(\"price\" > 24.00)".into(), true))
        );
    }

    #[test]
    fn like_is_a_superset_and_and_keeps_what_it_can() {
        assert_eq!(
            pushed(col("name").like(lit("PROMO%"))),
            Some(("(\"Name\" LIKE 'PROMO%')".into(), false))
        );
        assert_eq!(
            pushed(col("id").gt(lit(1i64)).and(col("ratio").gt(lit(1.0f64)))),
            Some(("(\"ID\" > 1)".into(), false))
        );
        assert_eq!(
            pushed(col("id").gt(lit(1i64)).or(col("ratio").gt(lit(1.0f64)))),
            None
        );
        assert_eq!(
            pushed(col("id").gt(lit(1i64)).or(col("name").is_null())),
            Some(("((\"ID\" > 1) OR (\"Name\" IS NULL))".into(), true))
        );
        assert_eq!(
            pushed(col("ratio").is_not_null()),
            Some(("(\"ratio\" IS NOT NULL)".into(), true))
        );
        assert_eq!(
            pushed(col("id").in_list(vec![lit(1i64), lit(3i64)], true)),
            Some(("(\"ID\" NOT IN (1, 3))".into(), true))
        );
        assert_eq!(
            pushed(col("day").between(
                lit(ScalarValue::Date32(Some(0))),
                lit(ScalarValue::Date32(Some(1)))
            )),
            Some((
                "(\"day\" BETWEEN '1970-01-01' AND '1970-01-02')".into(),
                true
            ))
        );
    }
}
