//! Whether a parsed expression calls an aggregate function: asked while expressions are
//! resolved (`expr`) and while a statement is planned (`plan`), so it lives below both.

use sqlparser::ast;

/// Whether `e` calls an aggregate function (one-argument `min`/`max`, `count`, `sum`, ...).
pub(crate) fn has_aggregate(e: &ast::Expr) -> bool {
    let text = e.to_string();
    // Cheap pre-check before the walk.
    if !text.contains('(') {
        return false;
    }
    walk_has_aggregate(e)
}

/// Whether the call `f` is itself an aggregate (not one of its arguments); with `OVER` it is
/// a window function, computed per row.
pub(crate) fn is_aggregate_call(f: &ast::Function) -> bool {
    let args = match &f.args {
        ast::FunctionArguments::List(l) => l.args.len(),
        _ => 0,
    };
    f.over.is_none()
        && match f.name.to_string().to_ascii_lowercase().as_str() {
            "count" | "sum" | "total" | "avg" | "group_concat" | "string_agg"
            | "json_group_array" | "jsonb_group_array" | "json_group_object"
            | "jsonb_group_object" => true,
            "min" | "max" => args == 1,
            _ => false,
        }
}

fn walk_has_aggregate(e: &ast::Expr) -> bool {
    use ast::Expr as E;
    match e {
        E::Function(f) => {
            let args: Vec<&ast::FunctionArg> = match &f.args {
                ast::FunctionArguments::List(l) => l.args.iter().collect(),
                _ => Vec::new(),
            };
            is_aggregate_call(f)
                || args.iter().any(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => {
                        walk_has_aggregate(x)
                    }
                    _ => false,
                })
        }
        E::BinaryOp { left, right, .. } => walk_has_aggregate(left) || walk_has_aggregate(right),
        E::UnaryOp { expr, .. }
        | E::Nested(expr)
        | E::IsNull(expr)
        | E::IsNotNull(expr)
        | E::Cast { expr, .. }
        | E::Collate { expr, .. } => walk_has_aggregate(expr),
        E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
            walk_has_aggregate(a) || walk_has_aggregate(b)
        }
        E::Between {
            expr, low, high, ..
        } => walk_has_aggregate(expr) || walk_has_aggregate(low) || walk_has_aggregate(high),
        E::In { expr, target, .. } => {
            walk_has_aggregate(expr)
                || matches!(target, ast::InTarget::List(l) if l.iter().any(walk_has_aggregate))
        }
        E::Like {
            expr,
            pattern,
            escape_char,
            ..
        } => {
            walk_has_aggregate(expr)
                || walk_has_aggregate(pattern)
                || escape_char.as_deref().is_some_and(walk_has_aggregate)
        }
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(walk_has_aggregate)
                || conditions
                    .iter()
                    .any(|c| walk_has_aggregate(&c.condition) || walk_has_aggregate(&c.result))
                || else_result.as_deref().is_some_and(walk_has_aggregate)
        }
        _ => false,
    }
}
