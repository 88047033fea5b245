//! Constant folding: every subexpression that reads no slot is evaluated once, when the query
//! is planned, instead of once per row (`date('1998-12-01', '-90 day')` in TPC-H Q1).
//!
//! The rules, each chosen so that the folded plan gives SQLite's answers exactly:
//!
//! - **Only successes fold.** A constant subexpression whose evaluation fails (an integer
//!   overflow in `abs()`, a bad `ESCAPE`, `'now'`) stays as it is, so its error surfaces only if
//!   and when a row reaches it, as before; the evaluator is deterministic, so evaluating a
//!   constant once or per row gives the same value.
//! - **Bottom-up.** Children fold first; then a node that reads no slot is evaluated as a
//!   whole (a `CASE` whose untaken branch would fail still folds). A node that reads a slot
//!   keeps its shape, with its constant parts folded.
//! - **Affinities and collations are already fixed** in the IR (a comparison carries the
//!   affinity its operands had before folding), so replacing `CAST('5' AS INTEGER)` by the
//!   literal `5` does not change how a comparison with it converts.
//! - **Comparison literals are pre-converted** ([`pre_convert`]) only where SQLite converts
//!   them unconditionally: under a numeric comparison affinity a text literal that is wholly a
//!   number becomes that number (`OP_Lt` applies `applyNumericAffinity` to each operand on its
//!   own, whatever the other operand is). Under text affinity a numeric literal is rendered as
//!   text only when the other operand is text, which is known per row only: that is left to
//!   the evaluator.

use crate::datatype3::Affinity;
use crate::value::{numeric_affinity_of_text, Value};

use super::eval::eval;
use super::ir::{AggFunc, ColumnRead, Expr, Function, QueryPlan, Shape};

/// Folds the constant subexpressions of every expression of `plan`.
pub fn fold_plan(plan: &mut QueryPlan) {
    for c in &mut plan.columns {
        if let ColumnRead::Virtual { expr, .. } = c {
            fold_in_place(expr);
        }
    }
    plan.constant_terms.iter_mut().for_each(fold_in_place);
    if let Some(f) = &mut plan.filter {
        fold_in_place(f);
    }
    match &mut plan.shape {
        Shape::Rows { outputs } => outputs.iter_mut().for_each(fold_in_place),
        Shape::Groups {
            keys,
            aggregates,
            having,
            outputs,
        } => {
            keys.iter_mut().for_each(|(e, _)| fold_in_place(e));
            for spec in aggregates {
                if let AggFunc::Json(_) = spec.func {
                    // The arguments hand their JSON subtype to the aggregate.
                    for a in spec.arg.iter_mut().chain(&mut spec.second) {
                        let taken = std::mem::replace(a, Expr::Literal(Value::Null));
                        *a = fold_json_argument(taken);
                    }
                    spec.filter.iter_mut().for_each(fold_in_place);
                    spec.order_by
                        .iter_mut()
                        .for_each(|k| fold_in_place(&mut k.expr));
                } else {
                    spec.exprs_mut().for_each(fold_in_place);
                }
            }
            if let Some(h) = having {
                fold_in_place(h);
            }
            outputs.iter_mut().for_each(fold_in_place);
        }
    }
    for k in &mut plan.order_by {
        fold_in_place(&mut k.expr);
    }
}

fn fold_in_place(e: &mut Expr) {
    let taken = std::mem::replace(e, Expr::Literal(Value::Null));
    *e = fold(taken);
}

/// Folds a boxed child in its own allocation.
fn fold_box(mut e: Box<Expr>) -> Box<Expr> {
    fold_in_place(&mut e);
    e
}

/// The length from which an `IN` list of integers compared without an affinity becomes an
/// [`Expr::InIntegers`] set.
pub const MIN_SORTED_IN: usize = 8;

/// `expr` with its constant subexpressions evaluated (see the module docs for the rules).
pub fn fold(expr: Expr) -> Expr {
    let folded = match expr {
        Expr::Column(_) | Expr::Literal(_) | Expr::Raise(_) => return expr,
        Expr::Negate(x) => Expr::Negate(fold_box(x)),
        Expr::Not(x) => Expr::Not(fold_box(x)),
        Expr::BitNot(x) => Expr::BitNot(fold_box(x)),
        Expr::Arith(op, a, b) => Expr::Arith(op, fold_box(a), fold_box(b)),
        Expr::Concat(a, b) => Expr::Concat(fold_box(a), fold_box(b)),
        Expr::NullFirst { first, expr } => {
            let (first, expr) = (fold(*first), fold(*expr));
            return match first {
                // A constant first operand settles whether the rest is computed.
                Expr::Literal(Value::Null) => first,
                Expr::Literal(_) => expr,
                first => Expr::NullFirst {
                    first: Box::new(first),
                    expr: Box::new(expr),
                },
            };
        }
        Expr::Compare {
            op,
            left,
            right,
            affinity,
            collation,
        } => Expr::Compare {
            op,
            left: Box::new(pre_convert(fold(*left), affinity)),
            right: Box::new(pre_convert(fold(*right), affinity)),
            affinity,
            collation,
        },
        Expr::And(a, b) => Expr::And(fold_box(a), fold_box(b)),
        Expr::ShortCircuit { expr, right_first } => {
            return match fold(*expr) {
                // Folded to a constant, or no longer an AND or OR: nothing left to skip.
                e @ (Expr::And(..) | Expr::Or(..)) => Expr::ShortCircuit {
                    expr: Box::new(e),
                    right_first,
                },
                e => e,
            };
        }
        Expr::Or(a, b) => Expr::Or(fold_box(a), fold_box(b)),
        Expr::IsNull(x, negated) => Expr::IsNull(fold_box(x), negated),
        Expr::InList {
            expr,
            list,
            negated,
            collation,
        } => {
            let list: Vec<(Expr, Option<Affinity>)> = list
                .into_iter()
                .map(|(e, a)| (pre_convert(fold(e), a), a))
                .collect();
            // A long list of integers compared without an affinity: a sorted set.
            let integers: Option<Vec<i64>> = list
                .iter()
                .map(|(e, a)| match (e, a) {
                    (Expr::Literal(Value::Integer(i)), None) => Some(*i),
                    _ => None,
                })
                .collect();
            match integers {
                Some(mut values) if !negated && values.len() >= MIN_SORTED_IN => {
                    values.sort_unstable();
                    values.dedup();
                    Expr::InIntegers {
                        expr: fold_box(expr),
                        values: values.into(),
                    }
                }
                _ => Expr::InList {
                    expr: fold_box(expr),
                    list,
                    negated,
                    collation,
                },
            }
        }
        Expr::InIntegers { expr, values } => Expr::InIntegers {
            expr: fold_box(expr),
            values,
        },
        Expr::InSet { expr, set, negated } => Expr::InSet {
            expr: fold_box(expr),
            set,
            negated,
        },
        Expr::Like {
            expr,
            pattern,
            escape,
            negated,
            glob,
        } => Expr::Like {
            expr: fold_box(expr),
            pattern: fold_box(pattern),
            escape: escape.map(fold_box),
            negated,
            glob,
        },
        Expr::Case {
            operand,
            whens,
            otherwise,
        } => {
            let has_operand = operand.is_some();
            Expr::Case {
                operand: operand.map(fold_box),
                whens: whens
                    .into_iter()
                    .map(|(w, t, a, c)| {
                        // With an operand, each WHEN value is a comparison operand.
                        let w = if has_operand {
                            pre_convert(fold(w), a)
                        } else {
                            fold(w)
                        };
                        (w, fold(t), a, c)
                    })
                    .collect(),
                otherwise: otherwise.map(fold_box),
            }
        }
        Expr::Cast(x, a) => Expr::Cast(fold_box(x), a),
        Expr::Function(f @ Function::Json(_), args) => {
            Expr::Function(f, args.into_iter().map(fold_json_argument).collect())
        }
        Expr::Function(f, args) => Expr::Function(f, args.into_iter().map(fold).collect()),
    };
    // A constant node whose children did not all fold (an error in a branch it may not take)
    // can still fold as a whole.
    if !reads_slots(&folded) {
        if let Ok(v) = eval(&folded, &[]) {
            return Expr::Literal(v);
        }
    }
    folded
}

/// A JSON call's argument, folded: one that is or holds a JSON call is left as it is (as a
/// literal it would lose the JSON subtype it passes on, also through `CASE` or `coalesce`;
/// see `eval::json_argument`).
fn fold_json_argument(a: Expr) -> Expr {
    let mut holds_json = false;
    a.visit(&mut |x| holds_json |= matches!(x, Expr::Function(Function::Json(_), _)));
    if holds_json {
        a
    } else {
        fold(a)
    }
}

/// Whether `e` reads any slot of its stage.
pub fn reads_slots(e: &Expr) -> bool {
    match e {
        Expr::Column(_) => true,
        Expr::Literal(_) | Expr::Raise(_) => false,
        Expr::Negate(x)
        | Expr::Not(x)
        | Expr::BitNot(x)
        | Expr::IsNull(x, _)
        | Expr::Cast(x, _)
        | Expr::ShortCircuit { expr: x, .. } => reads_slots(x),
        Expr::Arith(_, a, b)
        | Expr::Concat(a, b)
        | Expr::And(a, b)
        | Expr::Or(a, b)
        | Expr::NullFirst { first: a, expr: b } => reads_slots(a) || reads_slots(b),
        Expr::Compare { left, right, .. } => reads_slots(left) || reads_slots(right),
        Expr::InList { expr, list, .. } => {
            reads_slots(expr) || list.iter().any(|(x, _)| reads_slots(x))
        }
        Expr::InIntegers { expr, .. } | Expr::InSet { expr, .. } => reads_slots(expr),
        Expr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            reads_slots(expr) || reads_slots(pattern) || escape.as_deref().is_some_and(reads_slots)
        }
        Expr::Case {
            operand,
            whens,
            otherwise,
        } => {
            operand.as_deref().is_some_and(reads_slots)
                || whens
                    .iter()
                    .any(|(w, t, _, _)| reads_slots(w) || reads_slots(t))
                || otherwise.as_deref().is_some_and(reads_slots)
        }
        Expr::Function(_, args) => args.iter().any(reads_slots),
    }
}

/// A comparison operand with the comparison's affinity applied when that is exact at planning
/// time: a text literal that is wholly a number, under a numeric affinity, becomes the number
/// (what `datatype3::compare` would make of it on every row). Anything else is returned as is.
pub fn pre_convert(e: Expr, affinity: Option<Affinity>) -> Expr {
    match (&e, affinity) {
        (
            Expr::Literal(Value::Text(t)),
            Some(Affinity::Numeric | Affinity::Integer | Affinity::Real),
        ) => match numeric_affinity_of_text(t) {
            Some(n) => Expr::Literal(Value::from(n)),
            None => e,
        },
        _ => e,
    }
}

#[cfg(test)]
mod tests;
