//! The constant expressions SQLite computes once when the statement starts, before any row:
//! a failing one fails the statement even on an empty table, under `LIMIT 0`, or in a `CASE`
//! branch never taken.
//!
//! SQLite factors constant expressions out of its loops (`sqlite3ExprCodeRunJustOnce`) where
//! it codes an operand into a temporary register (`sqlite3ExprCodeTemp`: the operands of
//! operators and comparisons, `CASE`'s operand, `WHEN` values and conditions, after it skips a
//! `COLLATE` on top) and where it codes the arguments of a function call that is not constant
//! itself (`sqlite3ExprCodeExprList` with `SQLITE_ECEL_FACTOR`, no `COLLATE` skipped). A
//! factored expression that holds a function (`EP_HasFunc`) is computed at its first use
//! (`OP_Once`), like any other; one without is computed at the statement's start (the
//! `pConstExpr` list `OP_Init` jumps to). A function's node carries `EP_HasFunc` up to every
//! node above it except a `COLLATE`, which does not take its operand's flags
//! (`sqlite3ExprAddCollateToken`): so `instr(x, (abs(-9223372036854775808) COLLATE NOCASE))`
//! fails at the start of any statement, `instr(x, abs(-9223372036854775808))` only on a row
//! (checked against SQLite 3.54: the differential tester's table seeds 7296929673621823082
//! and 17781823221850813153).
//!
//! [`init_constants`] finds those expressions in a statement (its subqueries included: they
//! are coded into the same program); the planner tests them with the `WHERE`'s constant
//! terms, first (`engine::query::ir::QueryPlan::constant_terms`). Only expressions that hold a
//! function are kept: without one nothing can fail.
//!
//! A leaf of the crate: it reads the parser's tree only.

use sqlparser::ast::{self, BinaryOperator, UnaryOperator};

/// The expressions of `query` SQLite computes at the statement's start, in the order met.
pub(crate) fn init_constants(query: &ast::Query) -> Vec<ast::Expr> {
    let mut out = Vec::new();
    walk_query(query, &mut out);
    out
}

fn walk_query(q: &ast::Query, out: &mut Vec<ast::Expr>) {
    let ast::SetExpr::Select(s) = q.body.as_ref() else {
        return;
    };
    for item in &s.projection {
        if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } =
            item
        {
            walk(e, out);
        }
    }
    for c in s.selection.iter().chain(&s.having) {
        condition(c, out);
        walk(c, out);
    }
    if let ast::GroupByExpr::Expressions(keys, _) = &s.group_by {
        keys.iter().for_each(|k| walk(k, out));
    }
    for w in &s.named_window {
        if let ast::NamedWindowExpr::WindowSpec(spec) = &w.1 {
            window(spec, out);
        }
    }
    if let Some(o) = &q.order_by {
        if let ast::OrderByKind::Expressions(terms) = &o.kind {
            terms.iter().for_each(|t| walk(&t.expr, out));
        }
    }
}

/// Notes what SQLite codes into a temporary register when it tests `e` as a condition
/// (`sqlite3ExprIfFalse`): `AND`, `OR` and `NOT` test their operands as conditions, the
/// comparisons and the like code their operands (noted by [`walk`]), anything else is coded
/// whole.
fn condition(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    match e {
        ast::Expr::Nested(x) => condition(x, out),
        ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::And | BinaryOperator::Or,
            right,
        } => {
            condition(left, out);
            condition(right, out);
        }
        ast::Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => condition(expr, out),
        ast::Expr::BinaryOp { op, .. } if temp_operands(op) => {}
        ast::Expr::IsNull(_)
        | ast::Expr::IsNotNull(_)
        | ast::Expr::Between { .. }
        | ast::Expr::In { .. }
        | ast::Expr::Like { .. }
        | ast::Expr::Function(_)
        | ast::Expr::Substring { .. }
        | ast::Expr::Trim { .. } => {}
        other => temp(other, out),
    }
}

/// Whether SQLite codes both operands of `op` with `sqlite3ExprCodeTemp`.
fn temp_operands(op: &BinaryOperator) -> bool {
    use BinaryOperator as B;
    matches!(
        op,
        B::Plus
            | B::Minus
            | B::Multiply
            | B::Divide
            | B::Modulo
            | B::BitwiseAnd
            | B::BitwiseOr
            | B::PGBitwiseShiftLeft
            | B::PGBitwiseShiftRight
            | B::StringConcat
            | B::Eq
            | B::NotEq
            | B::Lt
            | B::LtEq
            | B::Gt
            | B::GtEq
    )
}

/// Notes the factored operands and arguments of `e` and of every expression below it
/// (subqueries included).
fn walk(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    match e {
        ast::Expr::BinaryOp { left, op, right } if temp_operands(op) => {
            temp(left, out);
            temp(right, out);
        }
        ast::Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::BitwiseNot | UnaryOperator::Not,
            expr: x,
        }
        | ast::Expr::IsNull(x)
        | ast::Expr::IsNotNull(x) => temp(x, out),
        ast::Expr::Between {
            expr, low, high, ..
        } => [expr, low, high].into_iter().for_each(|x| temp(x, out)),
        ast::Expr::Case {
            operand,
            conditions,
            ..
        } => {
            if let Some(x) = operand {
                temp(x, out);
            }
            for w in conditions {
                match operand {
                    Some(_) => temp(&w.condition, out),
                    None => condition(&w.condition, out),
                }
            }
        }
        ast::Expr::Subquery(q)
        | ast::Expr::In {
            target: ast::InTarget::Subquery(q),
            ..
        } => walk_query(q, out),
        _ => {}
    }
    // A call that is not constant: its arguments are factored as a list (`LIKE`, `GLOB`,
    // `->` and their kin are calls too; the inline functions and aggregates are not).
    if let Some(args) = call_args(e) {
        let listed = match e {
            // An aggregate's arguments are coded per row without factoring (updateAccumulator).
            ast::Expr::Function(f) => {
                f.over.is_none()
                    && f.filter.is_none()
                    && !inline(f)
                    && !crate::aggregate::is_aggregate_call(f)
            }
            _ => true,
        };
        if listed && !constant(e) {
            args.iter().for_each(|a| argument(a, out));
        }
    }
    if let ast::Expr::Function(f) = e {
        if let Some(ast::WindowType::WindowSpec(w)) = &f.over {
            window(w, out);
        }
        if let Some(c) = &f.filter {
            condition(c, out);
            walk(c, out);
        }
    }
    visit_children(e, &mut |c| {
        walk(c, out);
        false
    });
}

/// A window's `PARTITION BY` and `ORDER BY` terms.
fn window(w: &ast::WindowSpec, out: &mut Vec<ast::Expr>) {
    w.partition_by.iter().for_each(|x| walk(x, out));
    w.order_by.iter().for_each(|t| walk(&t.expr, out));
}

/// An operand coded with `sqlite3ExprCodeTemp`: a `COLLATE` on top is skipped first.
fn temp(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    let mut x = e;
    while let ast::Expr::Nested(y) | ast::Expr::Collate { expr: y, .. } = x {
        x = y;
    }
    note(x, out);
}

/// An argument of a function call that is not constant (`SQLITE_ECEL_FACTOR`): taken as it
/// is, a `COLLATE` included.
fn argument(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    let mut x = e;
    while let ast::Expr::Nested(y) = x {
        x = y;
    }
    note(x, out);
}

/// Keeps `e` if SQLite computes it at the statement's start: constant, without the function
/// flag on its node, holding a function below a `COLLATE`.
fn note(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    if constant(e) && !has_func_flag(e) && holds_function(e) && !out.contains(e) {
        out.push(e.clone());
    }
}

/// Whether `e`'s node carries `EP_HasFunc`: a function call, or a node with such an operand,
/// except through a `COLLATE`.
fn has_func_flag(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Collate { .. } => false,
        x if is_function(x) => true,
        _ => {
            let mut found = false;
            visit_children(e, &mut |c| {
                found |= has_func_flag(c);
                false
            });
            found
        }
    }
}

/// Whether `e` holds a function call anywhere.
fn holds_function(e: &ast::Expr) -> bool {
    let mut found = is_function(e);
    visit_children(e, &mut |c| {
        found |= is_function(c);
        !found
    });
    found
}

/// A function call's node in SQLite's tree (`LIKE`, `GLOB`, `->` and the like are calls).
fn is_function(e: &ast::Expr) -> bool {
    matches!(
        e,
        ast::Expr::Function(_)
            | ast::Expr::Substring { .. }
            | ast::Expr::Trim { .. }
            | ast::Expr::Ceil { .. }
            | ast::Expr::Floor { .. }
            | ast::Expr::Like { .. }
            | ast::Expr::ILike { .. }
            | ast::Expr::BinaryOp {
                op: BinaryOperator::Glob
                    | BinaryOperator::Match
                    | BinaryOperator::Regexp
                    | BinaryOperator::Arrow
                    | BinaryOperator::LongArrow,
                ..
            }
    )
}

/// Whether `e` is constant to SQLite (`sqlite3ExprIsConstantNotJoin`): no column, no
/// subquery, no aggregate or window, no function that changes from call to call.
fn constant(e: &ast::Expr) -> bool {
    let mut ok = true;
    let mut check = |x: &ast::Expr| {
        match x {
            ast::Expr::Identifier(_)
            | ast::Expr::CompoundIdentifier(_)
            | ast::Expr::Subquery(_)
            | ast::Expr::Exists { .. }
            | ast::Expr::In {
                target: ast::InTarget::Subquery(_) | ast::InTarget::Table { .. },
                ..
            } => ok = false,
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_lowercase();
                if f.over.is_some()
                    || f.filter.is_some()
                    || crate::aggregate::has_aggregate(x)
                    || matches!(
                        name.as_str(),
                        "random" | "randomblob" | "changes" | "total_changes" | "last_insert_rowid"
                    )
                {
                    ok = false;
                }
            }
            _ => {}
        }
        ok
    };
    check(e) && {
        visit_children(e, &mut check);
        ok
    }
}

/// Functions SQLite codes inline, its arguments not as a list (`SQLITE_FUNC_INLINE`).
fn inline(f: &ast::Function) -> bool {
    matches!(
        f.name.to_string().to_ascii_lowercase().as_str(),
        "coalesce" | "ifnull" | "iif" | "if" | "likely" | "unlikely" | "likelihood" | "nullif"
    )
}

/// The arguments of a call written as a function (`f(...)`), or as one of the forms sqlparser
/// parses apart (`substr`, `trim`, `ceil`, `floor`); `None` for anything else.
fn call_args(e: &ast::Expr) -> Option<Vec<&ast::Expr>> {
    Some(match e {
        ast::Expr::Function(f) => function_args(f),
        ast::Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => std::iter::once(&**expr)
            .chain(substring_from.as_deref())
            .chain(substring_for.as_deref())
            .collect(),
        ast::Expr::Trim {
            expr,
            trim_characters,
            ..
        } => std::iter::once(&**expr)
            .chain(trim_characters.iter().flatten())
            .collect(),
        ast::Expr::Ceil { expr, .. } | ast::Expr::Floor { expr, .. } => vec![&**expr],
        // like(pattern, x [, escape]) and glob(pattern, x), `->`(x, path): the order does
        // not matter here.
        ast::Expr::Like {
            expr,
            pattern,
            escape_char,
            ..
        } => std::iter::once(&**pattern)
            .chain(std::iter::once(&**expr))
            .chain(escape_char.as_deref())
            .collect(),
        ast::Expr::BinaryOp { left, right, .. } if is_function(e) => vec![&**left, &**right],
        _ => return None,
    })
}

/// The argument expressions of a call.
fn function_args(f: &ast::Function) -> Vec<&ast::Expr> {
    match &f.args {
        ast::FunctionArguments::List(list) => list
            .args
            .iter()
            .filter_map(|a| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))
                | ast::FunctionArg::Named {
                    arg: ast::FunctionArgExpr::Expr(e),
                    ..
                } => Some(e),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Calls `f` on the expressions directly below `e` (through a subquery: none), and on theirs
/// while `f` returns true.
fn visit_children(e: &ast::Expr, f: &mut dyn FnMut(&ast::Expr) -> bool) {
    let go = |x: &ast::Expr, f: &mut dyn FnMut(&ast::Expr) -> bool| {
        if f(x) {
            visit_children(x, f);
        }
    };
    match e {
        ast::Expr::BinaryOp { left, right, .. } => {
            go(left, f);
            go(right, f);
        }
        ast::Expr::UnaryOp { expr, .. }
        | ast::Expr::Nested(expr)
        | ast::Expr::Collate { expr, .. }
        | ast::Expr::Cast { expr, .. }
        | ast::Expr::IsNull(expr)
        | ast::Expr::IsNotNull(expr)
        | ast::Expr::IsTrue(expr)
        | ast::Expr::IsFalse(expr)
        | ast::Expr::IsNotTrue(expr)
        | ast::Expr::IsNotFalse(expr) => go(expr, f),
        ast::Expr::Between {
            expr, low, high, ..
        } => {
            go(expr, f);
            go(low, f);
            go(high, f);
        }
        ast::Expr::ILike { expr, pattern, .. } => {
            go(expr, f);
            go(pattern, f);
        }
        ast::Expr::In { expr, target, .. } => {
            go(expr, f);
            if let ast::InTarget::List(list) = target {
                list.iter().for_each(|x| go(x, f));
            }
        }
        ast::Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(x) = operand {
                go(x, f);
            }
            for w in conditions {
                go(&w.condition, f);
                go(&w.result, f);
            }
            if let Some(x) = else_result {
                go(x, f);
            }
        }
        ast::Expr::Function(_)
        | ast::Expr::Like { .. }
        | ast::Expr::Substring { .. }
        | ast::Expr::Trim { .. }
        | ast::Expr::Ceil { .. }
        | ast::Expr::Floor { .. } => call_args(e)
            .unwrap_or_default()
            .into_iter()
            .for_each(|x| go(x, f)),
        ast::Expr::IsDistinctFrom(a, b) | ast::Expr::IsNotDistinctFrom(a, b) => {
            go(a, f);
            go(b, f);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(sql: &str) -> Vec<String> {
        let Some(ast::Statement::Query(q)) = crate::dialect::parse(sql).unwrap().pop() else {
            panic!("a query")
        };
        init_constants(&q).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_collate_hides_a_function_from_the_flag() {
        let a = "abs(-9223372036854775808)";
        // Factored at the start: arguments of a call that reads a column, operands.
        assert_eq!(
            found(&format!("SELECT instr(x, ({a} COLLATE NOCASE)) FROM t")),
            vec![format!("{a} COLLATE NOCASE")]
        );
        assert_eq!(
            found(&format!(
                "SELECT x FROM t WHERE x = (({a} COLLATE NOCASE) || '')"
            ))
            .len(),
            1
        );
        assert_eq!(
            found(&format!("SELECT instr(x, -({a} COLLATE NOCASE)) FROM t")).len(),
            1
        );
        assert_eq!(
            found(&format!(
                "SELECT CASE WHEN 0 THEN instr(x, ({a} COLLATE NOCASE)) END FROM t"
            ))
            .len(),
            1
        );
        // At its first use: a function's own node, a COLLATE on an operand, a constant
        // call, an inline function, an IN list.
        for q in [
            format!("SELECT instr(x, {a}) FROM t"),
            format!("SELECT x || ({a} COLLATE NOCASE) FROM t"),
            format!("SELECT instr('a', ({a} COLLATE NOCASE)) FROM t"),
            format!("SELECT coalesce(x, ({a} COLLATE NOCASE)) FROM t"),
            format!("SELECT x FROM t WHERE x IN (1, ({a} COLLATE NOCASE))"),
            "SELECT instr(x, ('a' COLLATE NOCASE)) FROM t".to_string(),
        ] {
            assert!(found(&q).is_empty(), "{q}");
        }
    }
}
