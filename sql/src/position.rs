//! Whether an `ORDER BY` or `GROUP BY` term names a result column by position, as SQLite
//! decides it (`resolveOrderGroupBy`): the term, without the COLLATE clauses at its top
//! (`sqlite3ExprSkipCollateAndLikely`), is an integer to `sqlite3ExprIsInteger`, which looks
//! through any chain of unary `+` and `-` down to a 32-bit integer literal.
//!
//! SQLite's parser folds some expressions to such literals before that test
//! (`sqlite3ExprInt32`): a literal tested with `IS [NOT] NULL` becomes 0 or 1, and an `AND`
//! with a folded 0 on one side becomes 0. A sign never folds: `-0 AND x` stays an `AND`.
//!
//! sqlparser builds a slightly different tree than SQLite's parser, and the differences
//! matter here: it binds COLLATE tighter than a sign (`-1 COLLATE x` is `-(1 COLLATE x)` to
//! sqlparser, `(-1) COLLATE x` to SQLite), and it gives `0x1F` and `X'1F'` the same token.

use sqlparser::ast;

use super::source::text_at;

/// The position `e` names, if it is one to SQLite (it may be out of range), and the COLLATE
/// that SQLite's tree has at the top of the term, if any: `resolveAlias` adds that one to the
/// copy of the result column it orders or groups by (`1 COLLATE NOCASE`).
pub(crate) fn position_term<'e>(
    e: &'e ast::Expr,
    sql: &str,
) -> Option<(i64, Option<&'e ast::ObjectName>)> {
    let (mut e, mut outermost) = skip_collate(e);
    let mut sign = 1;
    // The COLLATEs sqlparser puts directly below the signs at the top of the term are SQLite's
    // COLLATE over the signed term, which the test skips (the differential tester's run seed
    // 1796126295975782713). Below parentheses they stay below the sign: `-(1 COLLATE x)`.
    while let ast::Expr::UnaryOp {
        op: op @ (ast::UnaryOperator::Plus | ast::UnaryOperator::Minus),
        expr,
    } = e
    {
        if *op == ast::UnaryOperator::Minus {
            sign = -sign;
        }
        e = expr;
        while let ast::Expr::Collate { expr, collation } = e {
            outermost = outermost.or(Some(collation));
            e = expr;
        }
    }
    integer_term(e, sql).map(|k| (sign * k, outermost))
}

/// `e` without the COLLATE clauses and parentheses at its top
/// (`sqlite3ExprSkipCollateAndLikely`), and the outermost of those COLLATEs, which SQLite
/// applies to the result column that a position or an alias names (`resolveAlias`).
pub(crate) fn skip_collate(mut e: &ast::Expr) -> (&ast::Expr, Option<&ast::ObjectName>) {
    let mut outermost = None;
    while let ast::Expr::Nested(x) | ast::Expr::Collate { expr: x, .. } = e {
        if let ast::Expr::Collate { collation, .. } = e {
            outermost = outermost.or(Some(collation));
        }
        e = x;
    }
    (e, outermost)
}

/// The integer `e` is to `sqlite3ExprIsInteger`: a folded integer below any chain of unary
/// signs (and parentheses, which are no node to SQLite). A COLLATE is a node: `-(1 COLLATE
/// NOCASE)` is no integer (the differential tester's run seed 1796126157770429053).
fn integer_term(e: &ast::Expr, sql: &str) -> Option<i64> {
    match e {
        ast::Expr::Nested(x) => integer_term(x, sql),
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Plus,
            expr,
        } => integer_term(expr, sql),
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => integer_term(expr, sql).map(|k| -k),
        other => folded_integer(other, sql),
    }
}

/// The 32-bit integer literal SQLite's parser makes of `e` (an `EP_IntValue` node): an integer
/// literal that fits, `literal IS [NOT] NULL` (1 or 0), or an `AND` with a folded 0 on one side
/// and no function call on either (`sqlite3ExprAnd`: `EP_IsFalse` without `EP_HasFunc`).
fn folded_integer(e: &ast::Expr, sql: &str) -> Option<i64> {
    match e {
        ast::Expr::Nested(x) => folded_integer(x, sql),
        ast::Expr::Value(v) => int32_literal(v, sql),
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } if (folded_integer(left, sql) == Some(0) || folded_integer(right, sql) == Some(0))
            && !calls_a_function(left)
            && !calls_a_function(right) =>
        {
            Some(0)
        }
        ast::Expr::IsNull(x) | ast::Expr::IsNotNull(x) => {
            let mut inner = x.as_ref();
            loop {
                match inner {
                    ast::Expr::Nested(y) => inner = y,
                    // `sqlite3PExprIsNull` looks through any chain of unary signs, over any
                    // literal (`-'apple' IS NULL` is as constant as `-2.5 IS NULL`; the
                    // differential tester's run seed 1796115401311635259).
                    ast::Expr::UnaryOp {
                        op: ast::UnaryOperator::Minus | ast::UnaryOperator::Plus,
                        expr: y,
                    } => inner = y,
                    _ => break,
                }
            }
            // The operand is folded first (`('a' IS NOT NULL) IS NOT NULL` is `1 IS NOT NULL`,
            // then 1), so an operand that folds to an integer cannot be NULL either. `TRUE`
            // and `FALSE` are still names when the parser folds (`sqlite3ExprIdToTrueFalse`
            // runs later, at name resolution), and a COLLATE node is not folded (the
            // differential tester's run seed 1796125092124457154).
            let not_null = match inner {
                ast::Expr::Value(v) => {
                    !matches!(v.value, ast::Value::Null | ast::Value::Boolean(_))
                }
                other => folded_integer(other, sql).is_some(),
            };
            not_null.then(|| i64::from(matches!(e, ast::Expr::IsNotNull(_))))
        }
        _ => None,
    }
}

/// The value of an integer literal that fits in 32 bits (`sqlite3GetInt32`), decimal or hex
/// (`0x1F`, which sqlparser tokenizes as it does the blob `X'1F'`).
fn int32_literal(v: &ast::ValueWithSpan, sql: &str) -> Option<i64> {
    match &v.value {
        ast::Value::Number(n, _) => n.parse::<i32>().ok().map(i64::from),
        ast::Value::HexStringLiteral(h) => {
            let written = text_at(sql, v.span.start)?;
            if !(written.starts_with("0x") || written.starts_with("0X")) {
                return None;
            }
            // Leading zeros do not count; at most 8 digits, below 0x80000000.
            let digits = h.trim_start_matches('0');
            if digits.len() > 8 {
                return None;
            }
            let u = u32::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16).ok()?;
            i32::try_from(u).ok().map(i64::from)
        }
        _ => None,
    }
}

/// Whether `e` contains a function call anywhere (SQLite's `EP_HasFunc`). `LIKE`, `GLOB`,
/// `REGEXP` and `MATCH` are calls of the functions `like()`, `glob()`, ... to SQLite's parser
/// (the differential tester's run seed 1796125559978285622: `0 AND (1 GLOB '[^a]*')`), and so
/// are `trim(...)` and `substring(...)`, which sqlparser parses as syntax of their own (run
/// seed 1796136043638565375: `trim(c, 'a') AND 0`).
fn calls_a_function(e: &ast::Expr) -> bool {
    ast::visit_expressions(e, |x| match x {
        ast::Expr::Function(_)
        | ast::Expr::Trim { .. }
        | ast::Expr::Substring { .. }
        | ast::Expr::Like { .. }
        | ast::Expr::ILike { .. }
        | ast::Expr::RLike { .. }
        | ast::Expr::BinaryOp {
            op:
                ast::BinaryOperator::Glob
                | ast::BinaryOperator::Regexp
                | ast::BinaryOperator::Match,
            ..
        } => std::ops::ControlFlow::Break(()),
        _ => std::ops::ControlFlow::Continue(()),
    })
    .is_break()
}
