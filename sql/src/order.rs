//! Which `ORDER BY` the full scan delivers by itself, as SQLite's planner decides it for a
//! table without indexes (`wherePathSatisfiesOrderBy` over the full-scan loop). SQLite then
//! uses no sorter: the rows are the plain scan's, forwards or backwards, with its `LIMIT` and
//! `OFFSET` rules (no row after the `LIMIT` is evaluated, and the output columns of the rows
//! the `OFFSET` skips are never computed), so corescan plans such a query without `ORDER BY`.
//!
//! The rule:
//!
//! 1. An `ORDER BY` term that is a column (under parentheses, `COLLATE`, `likely()`,
//!    `unlikely()`, `likelihood()`; not under a unary `+`) is satisfied by a top-level `AND`
//!    term of `WHERE` that makes it constant: `column = constant` or `column IS constant`
//!    (either way round; `column IN (constant)` too, which SQLite's parser rewrites to
//!    `column = +constant`), or else `column IS NULL`. `sqlite3WhereFindTerm` picks the first
//!    `=`/`IS` term of the column with a constant side, else its first `IS NULL` one; the
//!    chosen `=`/`IS` term counts only if its comparison's collation is the `ORDER BY` term's
//!    and the constant side has no affinity or the column's (a `CAST`, say, to another type
//!    would convert). An `OR` term without a `COLLATE` in it is read as its reduction by
//!    the operands SQLite's parser marks true or false (`exprAnalyze` with
//!    `sqlite3ExprSimplifiedAndOr`: `x = 5 OR 0` is `x = 5`).
//! 2. The first term not satisfied so must be the rowid (or its `INTEGER PRIMARY KEY` alias):
//!    the full scan's own order, ascending or descending as that term is; the rowid is unique,
//!    so every later term is satisfied too.
//! 3. When every term is satisfied by 1, the forward scan is the order.
//!
//! Otherwise SQLite sorts. A satisfied prefix of terms followed by another column only
//! shortens its sort keys (`USE TEMP B-TREE FOR RIGHT PART OF ORDER BY`): the prefix is the
//! same on every row that passes `WHERE`, so the order and the rows a `LIMIT` keeps are a
//! full sort's.
//!
//! Not modelled (such queries are sorted, as before): a column made constant through another
//! one (`x = y AND y = 5`, SQLite's transitive `WO_EQUIV` terms); a `WHERE` name that is a
//! result alias of a column; `rowid = constant`, which SQLite runs as a one-row seek (the
//! scan reads only the leaf that can hold it, see `QueryPlan::rowid_ranges`, and sorts at most
//! one row).

use engine::datatype3::Collation;
use engine::query::ir::{ColumnRead, Expr, SortKey};
use engine::value::Value;
use sqlparser::ast::{self, BinaryOperator};

use super::error::SqlError;
use super::expr::{binary_collation, has_truth_value, uses_slots, Resolver, Stage, Typed};

/// The full scan's direction when it delivers a plain query's `ORDER BY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanOrder {
    /// Rowid order.
    Forward,
    /// Descending rowid order (SQLite's backward scan).
    Backward,
}

/// Whether the full scan delivers the `ORDER BY` whose terms are `keys`, each written as
/// `written` (a result column's expression when the term names one by alias or position),
/// under `filter` (the `WHERE` clause as written); see the module docs.
pub(crate) fn scan_order(
    r: &mut Resolver<'_>,
    filter: Option<&ast::Expr>,
    written: &[&ast::Expr],
    keys: &[SortKey],
) -> Result<Option<ScanOrder>, SqlError> {
    let mut terms = Vec::new();
    if let Some(f) = filter {
        where_terms(f, &mut terms);
    }
    let mut constraints = Vec::new();
    for t in terms {
        if let Some(c) = constraint(r, t) {
            constraints.push(c);
        }
    }
    for (e, key) in written.iter().zip(keys) {
        let Some(slot) = order_column(r, e)? else {
            return Ok(None);
        };
        if matches!(r.columns.get(slot), Some(ColumnRead::Rowid)) {
            return Ok(Some(if key.descending {
                ScanOrder::Backward
            } else {
                ScanOrder::Forward
            }));
        }
        let equal = constraints.iter().find_map(|c| match *c {
            Constraint::Equal {
                slot: s,
                collation,
                affinity_ok,
            } if s == slot => Some(collation == key.collation && affinity_ok),
            _ => None,
        });
        let satisfied = equal.unwrap_or_else(|| {
            constraints
                .iter()
                .any(|c| matches!(*c, Constraint::IsNull { slot: s } if s == slot))
        });
        if !satisfied {
            return Ok(None);
        }
    }
    Ok(Some(ScanOrder::Forward))
}

/// The slots of the columns a top-level `AND` term of `filter` makes constant: `column =
/// constant` or `column IS constant` with the comparison's collation and a constant side of
/// no affinity or the column's, or `column IS NULL` (`None`: the same in any collation).
pub(crate) fn constant_columns(
    r: &mut Resolver<'_>,
    filter: Option<&ast::Expr>,
) -> Vec<(usize, Option<Collation>)> {
    let mut terms = Vec::new();
    if let Some(f) = filter {
        where_terms(f, &mut terms);
    }
    terms
        .into_iter()
        .filter_map(|t| match constraint(r, t)? {
            Constraint::Equal {
                slot,
                collation,
                affinity_ok: true,
            } => Some((slot, Some(collation))),
            Constraint::Equal { .. } => None,
            Constraint::IsNull { slot } => Some((slot, None)),
        })
        .collect()
}

/// What a `WHERE` term tells SQLite's planner about one column.
#[derive(Debug, Clone, Copy)]
enum Constraint {
    /// `column = constant` or `column IS constant` (`WO_EQ`, `WO_IS`).
    Equal {
        /// The column's slot.
        slot: usize,
        /// The comparison's collation.
        collation: Collation,
        /// The constant side has no affinity, or the column's.
        affinity_ok: bool,
    },
    /// `column IS NULL` (`WO_ISNULL`).
    IsNull {
        /// The column's slot.
        slot: usize,
    },
}

/// `e` without the parentheses, `COLLATE`s and `likely()`-like calls at its top
/// (`sqlite3ExprSkipCollateAndLikely`).
pub(crate) fn skip_collate_and_likely(mut e: &ast::Expr) -> &ast::Expr {
    loop {
        e = match e {
            ast::Expr::Nested(x) | ast::Expr::Collate { expr: x, .. } => x,
            ast::Expr::Function(f) => match likely_argument(f) {
                Some(x) => x,
                None => return e,
            },
            _ => return e,
        };
    }
}

/// The first argument of a call to `likely`, `unlikely` or `likelihood` (with its arity).
fn likely_argument(f: &ast::Function) -> Option<&ast::Expr> {
    let name = f.name.to_string().to_ascii_lowercase();
    let ast::FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let arity = match name.as_str() {
        "likely" | "unlikely" => 1,
        "likelihood" => 2,
        _ => return None,
    };
    match list.args.first() {
        Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)))
            if list.args.len() == arity =>
        {
            Some(x)
        }
        _ => None,
    }
}

/// `WHERE` split at its top-level `AND`s as `sqlite3WhereSplit` splits it, each term
/// without its `COLLATE` and `likely()` wrappers (`whereClauseInsert`).
pub(crate) fn where_terms<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Expr>) {
    match skip_collate_and_likely(e) {
        ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            where_terms(left, out);
            where_terms(right, out);
        }
        term => out.push(term),
    }
}

/// The slot of the column `e` names (under parentheses and `COLLATE` only, as
/// `exprMightBeIndexed` sees an operand), if it is a table column other than the rowid.
fn operand_column(r: &mut Resolver<'_>, e: &ast::Expr) -> Option<usize> {
    let mut x = e;
    while let ast::Expr::Nested(y) | ast::Expr::Collate { expr: y, .. } = x {
        x = y;
    }
    let slot = named_column(r, x).ok().flatten()?;
    (!matches!(r.columns.get(slot), Some(ColumnRead::Rowid))).then_some(slot)
}

/// The slot of the table column (or rowid) that the bare name `e` names, never a result
/// alias.
fn named_column(r: &mut Resolver<'_>, e: &ast::Expr) -> Result<Option<usize>, SqlError> {
    if !matches!(
        e,
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
    ) {
        return Ok(None);
    }
    let aliases = std::mem::replace(&mut r.aliases_enabled, false);
    let resolved = r.resolve(e, &mut Stage::Row, 0);
    r.aliases_enabled = aliases;
    Ok(match resolved?.expr {
        Expr::Column(slot) => Some(slot),
        _ => None,
    })
}

/// The slot of the column an `ORDER BY` term is to SQLite's planner (through parentheses,
/// `COLLATE`, `likely()`, `unlikely()` and `likelihood()`, not a unary `+`), if it is one.
fn order_column(r: &mut Resolver<'_>, e: &ast::Expr) -> Result<Option<usize>, SqlError> {
    named_column(r, skip_collate_and_likely(e))
}

/// The truth SQLite's parser marks `e` with (`EP_IsTrue`, `EP_IsFalse`), if any: an integer
/// token of 32 bits, and the nodes it plans to such an integer (see `expr::has_truth_value`).
fn marked_truth(r: &mut Resolver<'_>, e: &ast::Expr) -> Option<bool> {
    if !has_truth_value(e) {
        return None;
    }
    match r.resolve(e, &mut Stage::Row, 0).ok()?.expr {
        Expr::Literal(Value::Integer(i)) => Some(i != 0),
        _ => None,
    }
}

/// `e` with its `AND`s and `OR`s reduced by their marked operands
/// (`sqlite3ExprSimplifiedAndOr`: `x OR 0` is `x`, `x AND 1` is `x`); `e` itself when none
/// reduces at its top.
fn simplified_and_or<'e>(r: &mut Resolver<'_>, e: &'e ast::Expr) -> &'e ast::Expr {
    let mut inner = e;
    while let ast::Expr::Nested(x) = inner {
        inner = x;
    }
    let ast::Expr::BinaryOp {
        left,
        op: op @ (BinaryOperator::And | BinaryOperator::Or),
        right,
    } = inner
    else {
        return e;
    };
    let and = *op == BinaryOperator::And;
    let (l, rt) = (simplified_and_or(r, left), simplified_and_or(r, right));
    let (lt, rtt) = (marked_truth(r, l), marked_truth(r, rt));
    if lt == Some(true) || rtt == Some(false) {
        if and {
            rt
        } else {
            l
        }
    } else if rtt == Some(true) || lt == Some(false) {
        if and {
            l
        } else {
            rt
        }
    } else {
        e
    }
}

/// What the `WHERE` term `t` constrains, if it is one of the forms of [`Constraint`].
fn constraint(r: &mut Resolver<'_>, t: &ast::Expr) -> Option<Constraint> {
    match t {
        ast::Expr::BinaryOp {
            op: BinaryOperator::Or,
            ..
        } => {
            // An `OR` term without a COLLATE in it is analysed as its reduced form
            // (`exprAnalyze`): `x = 5 OR 0` is `x = 5`.
            let collated = r
                .resolve(t, &mut Stage::Row, 0)
                .ok()?
                .collation
                .is_some_and(|c| c.1);
            let alt = simplified_and_or(r, t);
            if collated || std::ptr::eq(alt, t) {
                return None;
            }
            constraint(r, skip_collate_and_likely(alt))
        }
        ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq | BinaryOperator::Is,
            right,
        }
        | ast::Expr::IsNotDistinctFrom(left, right) => {
            // The column on the left, or on the right (`exprCommute`).
            let (column, on_left) = match operand_column(r, left) {
                Some(slot) => (slot, true),
                None => (operand_column(r, right)?, false),
            };
            let l = r.resolve(left, &mut Stage::Row, 0).ok()?;
            let rt = r.resolve(right, &mut Stage::Row, 0).ok()?;
            let (col, value) = if on_left { (&l, &rt) } else { (&rt, &l) };
            if uses_slots(&value.expr) {
                return None;
            }
            Some(Constraint::Equal {
                slot: column,
                collation: binary_collation(&l, &rt),
                affinity_ok: value.affinity.is_none() || value.affinity == col.affinity,
            })
        }
        ast::Expr::IsNull(x) => Some(Constraint::IsNull {
            slot: operand_column(r, x)?,
        }),
        ast::Expr::In {
            expr,
            target: ast::InTarget::List(list),
            negated: false,
            ..
        } if list.len() == 1 => {
            // `x IN (c)` is `x = +c` to SQLite's parser, unless `c` is a COLLATE.
            let mut c = &list[0];
            while let ast::Expr::Nested(y) = c {
                c = y;
            }
            if matches!(c, ast::Expr::Collate { .. }) {
                return None;
            }
            let slot = operand_column(r, expr)?;
            let x = r.resolve(expr, &mut Stage::Row, 0).ok()?;
            let value = r.resolve(c, &mut Stage::Row, 0).ok()?;
            if uses_slots(&value.expr) {
                return None;
            }
            let plus = Typed {
                affinity: None,
                ..value
            };
            Some(Constraint::Equal {
                slot,
                collation: binary_collation(&x, &plus),
                affinity_ok: true,
            })
        }
        _ => None,
    }
}
