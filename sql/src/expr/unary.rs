//! Prefix and postfix operators: the signs, `NOT`, `~`, `IS [NOT] NULL` and `COLLATE`,
//! including where sqlparser's precedence differs from SQLite's and the tree is rotated first.

use engine::query::ir::{Expr, Function};
use engine::value::Value;
use sqlparser::ast::{self, BinaryOperator, UnaryOperator};

use super::binary::concat_binds_tighter;
use super::truth::never_null_literal;
use super::typed::{collation_named, first_explicit, Typed};
use super::{Resolver, Stage};
use crate::error::{unsupported, SqlError};

impl Resolver<'_> {
    /// `op expr`.
    pub(super) fn unary(
        &mut self,
        op: &UnaryOperator,
        expr: &ast::Expr,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        // sqlparser binds COLLATE tighter than a sign: `-1 COLLATE x` is SQLite's
        // `(-1) COLLATE x`, so that `-9223372036854775808 COLLATE NOCASE` is the
        // smallest integer, not the negated real 9223372036854775808.0 (run seed
        // 1796142816714926668).
        if let (UnaryOperator::Minus, ast::Expr::Collate { expr: x, collation }) = (op, expr) {
            let rotated = ast::Expr::Collate {
                expr: Box::new(ast::Expr::UnaryOp {
                    op: UnaryOperator::Minus,
                    expr: x.clone(),
                }),
                collation: collation.clone(),
            };
            return self.resolve(&rotated, stage, d);
        }
        // A sign over `~` that took in a binary operator (below): `-~a || b` is SQLite's
        // `(-(~a)) || b`, which sqlparser gives as `-(~(a || b))` (the differential tester's
        // run seed 1796379924821803153).
        if matches!(op, UnaryOperator::Minus | UnaryOperator::Plus) {
            if let Some(rotated) = sign_over_swallowing_not(op, expr) {
                return self.resolve(&rotated, stage, d);
            }
        }
        if let (UnaryOperator::Minus, ast::Expr::Value(v)) = (op, expr) {
            if matches!(
                v.value,
                ast::Value::Number(..) | ast::Value::HexStringLiteral(_)
            ) {
                return Ok(Typed::plain(Expr::Literal(self.literal_at(v, true)?)));
            }
        }
        // sqlparser parses the operand of `~` at the precedence of binary `+`, so it
        // takes in `*`, `/`, `%` and `||`; SQLite's `~` binds tighter than any binary
        // operator: `~a || b` is `(~a) || b` (the differential tester's default seed).
        // (The operand first as SQLite groups `||` with `*`, `/`, `%`.)
        let concat = concat_binds_tighter(expr);
        if let (
            UnaryOperator::BitwiseNot,
            ast::Expr::BinaryOp {
                left,
                op: inner,
                right,
            },
        ) = (op, concat.as_ref().unwrap_or(expr))
        {
            if matches!(
                inner,
                BinaryOperator::Multiply
                    | BinaryOperator::Divide
                    | BinaryOperator::Modulo
                    | BinaryOperator::StringConcat
            ) {
                let rotated = ast::Expr::BinaryOp {
                    left: Box::new(ast::Expr::UnaryOp {
                        op: UnaryOperator::BitwiseNot,
                        expr: left.clone(),
                    }),
                    op: inner.clone(),
                    right: right.clone(),
                };
                return self.resolve(&rotated, stage, d);
            }
        }
        let x = self.resolve(expr, stage, d)?;
        Ok(match op {
            UnaryOperator::Minus => Typed {
                expr: Expr::Negate(Box::new(x.expr)),
                affinity: None,
                collation: x.collation.filter(|c| c.1),
            },
            // Unary plus drops the affinity but keeps the collation. Over `AND`, `OR` or
            // `NOT` it also makes a condition a value: SQLite's jump code stops at the first
            // operand that decides, but codes `+(a AND b)` as the value of both operands
            // (run seed 4148684131733263814: `WHERE +(json_valid(x) AND json_type(x, 'a'))`
            // fails on a row whose `json_valid` is 0), so the operator is wrapped in a
            // call the jump code sees as one value: `coalesce(x, NULL)` (two arguments:
            // the WHERE splitter looks through a one-argument coalesce, `likely()`).
            UnaryOperator::Plus => Typed {
                expr: match x.expr {
                    e @ (Expr::And(..) | Expr::Or(..) | Expr::Not(_)) => {
                        Expr::Function(Function::Coalesce, vec![e, Expr::Literal(Value::Null)])
                    }
                    e => e,
                },
                affinity: None,
                collation: x.collation,
            },
            UnaryOperator::Not => Typed {
                collation: first_explicit([&x]),
                ..Typed::plain(Expr::Not(Box::new(x.expr)))
            },
            UnaryOperator::BitwiseNot => Typed {
                collation: first_explicit([&x]),
                ..Typed::plain(Expr::BitNot(Box::new(x.expr)))
            },
            other => return unsupported(format!("operator {other}")),
        })
    }

    /// `x IS NULL` (`not_null`: `x IS NOT NULL`).
    pub(super) fn is_null(
        &mut self,
        x: &ast::Expr,
        not_null: bool,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        if never_null_literal(x) {
            // SQLite's parser answers these itself (sqlite3PExprIsNull): the integer
            // literal it writes is one an AND or OR then reduces by (see `and_or`).
            return Ok(Typed::plain(Expr::Literal(Value::Integer(i64::from(
                not_null,
            )))));
        }
        let x = self.resolve(x, stage, d)?;
        Ok(Typed {
            collation: first_explicit([&x]),
            ..Typed::plain(Expr::IsNull(Box::new(x.expr), not_null))
        })
    }

    /// `x IS [NOT] TRUE` / `x IS [NOT] FALSE` as SQLite codes its `TK_TRUTH`: as a value
    /// (`OP_IsTrue`), the truth value of `x` (a number other than 0; text by its numeric
    /// prefix), NULL taken as false for `IS TRUE` and `IS FALSE`, inverted by `NOT`; as a
    /// condition, the jump code of `x` ([`Function::Truth`]), so that `('a' AND f(s)) IS
    /// FALSE` in a `WHERE` never calls `f` (tester table seed 661617571179855438).
    pub(super) fn truth(
        &mut self,
        x: &ast::Expr,
        is_true: bool,
        negated: bool,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let x = self.resolve(x, stage, d)?;
        let collation = first_explicit([&x]);
        Ok(Typed {
            collation,
            ..Typed::plain(Expr::Function(
                Function::Truth { is_true, negated },
                vec![x.expr],
            ))
        })
    }

    /// `expr COLLATE collation`: the expression, its affinity kept, under that collation.
    pub(super) fn collate(
        &mut self,
        expr: &ast::Expr,
        collation: &ast::ObjectName,
        stage: &mut Stage<'_>,
        d: usize,
    ) -> Result<Typed, SqlError> {
        let x = self.resolve(expr, stage, d)?;
        Ok(Typed {
            expr: x.expr,
            affinity: x.affinity,
            collation: Some((collation_named(collation)?, true)),
        })
    }
}

/// `op` over a chain of signs ending in a `~` whose operand is a binary `*`, `/`, `%` or `||`
/// (what sqlparser makes of SQLite's `-~a || b`): the tree with the whole prefix chain on the
/// binary operator's left operand, as SQLite binds prefix operators tighter than any binary
/// one. `None` for any other shape.
fn sign_over_swallowing_not(op: &UnaryOperator, expr: &ast::Expr) -> Option<ast::Expr> {
    let mut ops = vec![*op];
    let mut e = expr;
    while let ast::Expr::UnaryOp {
        op: o @ (UnaryOperator::Minus | UnaryOperator::Plus | UnaryOperator::BitwiseNot),
        expr: inner,
    } = e
    {
        ops.push(*o);
        e = inner;
    }
    if ops.last() != Some(&UnaryOperator::BitwiseNot) {
        return None;
    }
    let concat = concat_binds_tighter(e);
    let e = concat.as_ref().unwrap_or(e);
    let ast::Expr::BinaryOp {
        left,
        op:
            inner @ (BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo
            | BinaryOperator::StringConcat),
        right,
    } = e
    else {
        return None;
    };
    let mut operand = (**left).clone();
    for o in ops.into_iter().rev() {
        operand = ast::Expr::UnaryOp {
            op: o,
            expr: Box::new(operand),
        };
    }
    Some(ast::Expr::BinaryOp {
        left: Box::new(operand),
        op: inner.clone(),
        right: right.clone(),
    })
}
